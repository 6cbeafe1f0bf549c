// The in-process chat model: a conversation with one engine session, fed incrementally. The engine is
// append-only (recurrent state cannot roll back), so a conversation remembers what its session holds and,
// for each new turn, renders the whole conversation with the checkpoint's chat template and feeds only what
// is new:
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

#include "agent/chat.h"
#include "model/engine.h"
#include "model/text/chat_template.h"

namespace surf::agent {

class Conversation final : public Chat {
public:
    Conversation(model::Engine& engine, const model::ChatTemplate& chat_template, ChatOptions options);
    ~Conversation() override;
    Conversation(const Conversation&) = delete;
    Conversation& operator=(const Conversation&) = delete;

    // Replaces the conversation; the next turn starts a fresh session.
    void reset(std::vector<Message> messages) override;
    // Appends a user message, feeds what is new, generates the reply and appends it (sanitised).
    TurnReport ask(Message user, model::GenerateOptions options) override;

    const std::vector<Message>& messages() const override { return messages_; }
    int64_t session_tokens() const override { return session_tokens_; }
    int fresh_starts() const override { return fresh_starts_; }
    const std::string& fed_text() const { return fed_; }  // what the session holds, as text
    model::SessionId session() const { return session_; }

private:
    std::string render(const std::vector<Message>& messages, bool generation_prompt) const;
    void close();
    // The text to feed for the prompt `full`: what follows what the session holds ("prefix"), the template's
    // closing of the last reply and what follows it ("splice"), or all of it in a new session ("fresh").
    std::string next_delta(const std::string& full, std::string& feed_mode);
    // The conversation's last `n_images` images, in order; refuses more than were given.
    std::vector<std::shared_ptr<const model::Image>> last_images(size_t n_images) const;
    // Records what the session now holds after a reply and appends the reply (sanitised and stripped).
    void record_reply(const std::string& delta, const model::GenerateResult& result);

    model::Engine& engine_;
    const model::ChatTemplate& template_;
    ChatOptions options_;
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

// The special-token strings of a tokenizer that look like markup ("<...>").
std::vector<std::string> markup_special_tokens(const model::Tokenizer& tokenizer);

// A model::Engine and the chat template it renders with, as a ChatModel: each chat is a Conversation.
class EngineChatModel final : public ChatModel {
public:
    // Borrows both; they must outlive the model and its chats.
    EngineChatModel(model::Engine& engine, const model::ChatTemplate& chat_template);
    // Owns the engine and loads its template: `template_file`, or "" for the checkpoint's own
    // (config().dir).
    static std::shared_ptr<EngineChatModel> open(std::shared_ptr<model::Engine> engine,
                                                 const std::string& template_file = "");

    std::unique_ptr<Chat> open_chat(const ChatOptions& options) override;
    std::string name() const override { return engine_.backend_name(); }
    model::Engine& engine() const { return engine_; }

private:
    std::shared_ptr<model::Engine> owned_engine_;
    std::unique_ptr<model::ChatTemplate> owned_template_;
    model::Engine& engine_;
    const model::ChatTemplate& template_;

    EngineChatModel(std::shared_ptr<model::Engine> engine,
                    std::unique_ptr<model::ChatTemplate> chat_template);
};

}  // namespace surf::agent
