// A chat with one engine session, fed incrementally. The engine is append-only (recurrent state cannot
// roll back), so a conversation remembers what its session holds and, for each new turn, renders the
// whole conversation with the checkpoint's chat template and feeds only what is new:
//   prefix  — what the session holds is a prefix of the new render: feed the rest (exact);
//   splice  — the template rewrites past assistant turns (Nemotron strips the <think></think> the
//             generation prompt opened and adds "\n" before <SPECIAL_12>), so the session's text differs
//             from any render; but the render of the conversation up to the last reply is a prefix of the
//             new render, so the new turn is that difference, preceded by what the template puts after
//             the reply's text (minus the stop token, which the session already holds);
//   fresh   — anything else (or a reset): a new session with the full render.
// Every turn reports which way it went; traces count the fresh restarts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/engine.h"
#include "model/text/chat_template.h"

namespace surf::agent {

struct Message {
    std::string role;                                         // system, user, assistant
    std::string text;                                         // text first ...
    std::vector<std::shared_ptr<const model::Image>> images;  // ... then these images
};

struct TurnReport {
    model::GenerateResult result;
    std::string feed_mode;  // "prefix", "splice", "fresh"
    int64_t fed_chars = 0;  // characters of text fed this turn
    int images_fed = 0;
    double latency_seconds = 0;  // wall time of the engine call
};

struct ConversationOptions {
    bool enable_thinking = false;
    std::string stop_token = "<SPECIAL_12>";
};

class Conversation {
public:
    Conversation(model::Engine& engine, const model::ChatTemplate& chat_template,
                 ConversationOptions options);
    ~Conversation();
    Conversation(const Conversation&) = delete;
    Conversation& operator=(const Conversation&) = delete;

    // Replaces the conversation; the next turn starts a fresh session.
    void reset(std::vector<Message> messages);
    // Appends a user message, feeds what is new, generates the reply and appends it (sanitised).
    TurnReport ask(Message user, model::GenerateOptions options);

    const std::vector<Message>& messages() const { return messages_; }
    int64_t session_tokens() const { return session_tokens_; }
    int fresh_starts() const { return fresh_starts_; }
    const std::string& fed_text() const { return fed_; }  // what the session holds, as text
    model::SessionId session() const { return session_; }

private:
    std::string render(const std::vector<Message>& messages, bool generation_prompt) const;
    void close();

    model::Engine& engine_;
    const model::ChatTemplate& template_;
    ConversationOptions options_;
    std::vector<Message> messages_;
    model::SessionId session_ = 0;
    bool open_ = false;
    std::string fed_;          // everything the session holds, as text
    std::string last_render_;  // render of messages_ (no generation prompt) after the last reply
    std::string last_reply_;   // sanitised text of the last reply
    int64_t session_tokens_ = 0;
    int fresh_starts_ = 0;
    std::vector<std::string> special_strings_;
};

// Neutralises text that would tokenize as a control token or image placeholder ("<SPECIAL_11>", "<image>",
// "</s>") by replacing its '<' with '‹': page text, tasks and model notes must never forge turns or images.
std::string sanitize_for_prompt(const std::string& text, const std::vector<std::string>& special_strings);
// The special-token strings of a tokenizer that look like markup ("<...>").
std::vector<std::string> markup_special_tokens(const model::Tokenizer& tokenizer);

}  // namespace surf::agent
