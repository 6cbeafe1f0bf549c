// The agent's interface to a model, at the level of chat messages: the policy, localizer and validator ask
// for a reply to messages (text, then images) with generation options (schema, sampling, length, stop
// callback). How messages become model input is the implementation's business:
//   EngineChatModel (agent/conversation.h) — an in-process model::Engine: the checkpoint's chat template,
//       tokens and session reuse (each turn feeds only what is new);
//   RemoteChatModel (agent/remote/remote_chat.h) — an OpenAI-compatible server: the messages as they are.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/engine.h"

namespace surf::agent {

struct Message {
    std::string role;                                         // system, user, assistant
    std::string text;                                         // text first ...
    std::vector<std::shared_ptr<const model::Image>> images;  // ... then these images
};

struct TurnReport {
    model::GenerateResult result;
    std::string feed_mode;  // in-process: "prefix", "splice", "fresh"; remote: "remote" (all messages sent)
    int64_t fed_chars = 0;  // characters of text fed this turn
    int images_fed = 0;
    double latency_seconds = 0;  // wall time of the model call
};

struct ChatOptions {
    bool enable_thinking = false;
    std::string stop_token = "<SPECIAL_12>";  // the end of a reply in the checkpoint's vocabulary
};

// One conversation with a model. Text that would read as a control token ("<SPECIAL_11>", "<image>") is
// neutralised in every message (sanitize_for_prompt), so page text and tasks never forge turns or images.
class Chat {
public:
    virtual ~Chat() = default;
    // Replaces the conversation; the next turn starts over.
    virtual void reset(std::vector<Message> messages) = 0;
    // Appends a user message, gets the reply and appends it. Throws surf::Error when the model fails; the
    // conversation then holds what it held before.
    virtual TurnReport ask(Message user, model::GenerateOptions options) = 0;
    virtual const std::vector<Message>& messages() const = 0;
    // Tokens the model holds for this conversation (the prompt plus the reply of the last turn).
    virtual int64_t session_tokens() const = 0;
    // Turns that could not extend the model's state and read the whole conversation again.
    virtual int fresh_starts() const = 0;
};

class ChatModel {
public:
    virtual ~ChatModel() = default;
    // A new, empty chat. It borrows the model, which must outlive it; chats of one model may run on
    // different threads at once.
    virtual std::unique_ptr<Chat> open_chat(const ChatOptions& options) = 0;
    // The backend in one line, for traces ("cpu ...", "remote http://... (model)").
    virtual std::string name() const = 0;
};

// Neutralises text that would tokenize as a control token or image placeholder ("<SPECIAL_11>", "<image>",
// "</s>") by replacing its '<' with '‹': page text, tasks and model notes must never forge turns or images.
std::string sanitize_for_prompt(const std::string& text, const std::vector<std::string>& special_strings);

}  // namespace surf::agent
