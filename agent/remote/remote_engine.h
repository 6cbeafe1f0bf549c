// The remote backend: a model::Engine whose model runs behind an OpenAI-compatible endpoint
// (surf serve, vLLM, SGLang, ...), so the policy, localizer and validator run unchanged on it:
//
//   surf::agent::RemoteEngineOptions o;
//   o.client.base_url = "http://gpu-box:8000/v1";
//   o.client.model_name = "holotron-12b";
//   auto engine = surf::agent::open_remote_engine(o);   // checks the server lists the model
//   surf::agent::Agent agent(engine, config);
//
// Remote servers are stateless, so sessions live here: a session is the conversation so far, re-sent
// whole on every call (a server with prefix caching makes that cheap). The engine is *chat level*: its
// config().dir holds a pass-through chat template, so the agent's Conversation renders messages into a
// lossless markup (role markers, "<image>" per image) that this engine parses back into OpenAI messages;
// the server then renders them with the checkpoint's own template, exactly as the in-process engine
// would (docs/SERVE.md, "Remote backend"). Images go as PNG data URLs. Token-id inputs are unsupported.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/remote/remote_client.h"
#include "model/engine.h"

namespace surf::agent {

struct RemoteEngineOptions {
    RemoteClientOptions client;
    // A local checkpoint folder (tokenizer.json) whose special tokens the agent should neutralise in page
    // text and tasks (e.g. "<SPECIAL_11>"), as it does in-process. "" = only the pass-through markers.
    std::string tokenizer_dir;
    bool check_model = true;  // open_remote_engine asks GET /models and requires model_name among them
};

// One message as the pass-through template carries it.
struct RemoteMessage {
    std::string role;
    std::string text;   // with kRemoteImageMarker where each image goes
    bool open = false;  // the last message, not closed: the generation prompt (assistant)
};

inline constexpr const char* kRemoteImageMarker = "<|surf_image|>";

// The pass-through chat template (Jinja) the remote engine gives the agent.
const std::string& remote_chat_template();
// Parses text rendered by remote_chat_template (images already replaced by kRemoteImageMarker). Throws
// kInvalidArgument when the text is not in that format. `thinking` gets the enable_thinking switch if
// the render carried one ("" otherwise, "on" / "off").
std::vector<RemoteMessage> parse_remote_chat(const std::string& text, std::string* thinking);

class RemoteEngine final : public model::Engine {
public:
    explicit RemoteEngine(RemoteEngineOptions options);
    ~RemoteEngine() override;

    const model::ModelConfig& config() const override { return config_; }
    const model::Tokenizer& tokenizer() const override { return tokenizer_; }
    std::shared_ptr<const model::TokenIndex> token_index() const override;
    std::string backend_name() const override;
    model::EngineStats stats() const override;

    model::SessionId open_session() override;
    model::SessionId fork_session(model::SessionId from) override;
    void close_session(model::SessionId id) override;
    // GenerateResult.tokens stays empty (the server returns text); prefill_tokens is the whole prompt the
    // server read (usage.prompt_tokens), session_tokens prompt + completion.
    model::GenerateResult generate(model::SessionId id, const std::vector<model::InputPart>& input,
                                   const model::GenerateOptions& options) override;

    RemoteClient& client() { return client_; }
    size_t open_sessions() const;

private:
    struct Session {
        std::string text;                                           // the conversation, pass-through markup
        std::vector<std::shared_ptr<const model::Image>> images;    // in marker order
        std::vector<std::shared_ptr<const std::string>> data_urls;  // encoded once, re-sent every call
    };

    RemoteEngineOptions options_;
    RemoteClient client_;
    model::ModelConfig config_;
    model::Tokenizer tokenizer_;
    mutable std::shared_ptr<const model::TokenIndex> index_;
    mutable std::mutex mutex_;
    std::map<model::SessionId, Session> sessions_;
    model::SessionId next_id_ = 1;
    int64_t prompt_tokens_ = 0, completion_tokens_ = 0, calls_ = 0, running_ = 0;
};

// Builds the engine and, with check_model, verifies the server is up and serves the model (a clear
// kIo error naming the URL when it is down; kInvalidArgument listing what it serves otherwise).
std::shared_ptr<RemoteEngine> open_remote_engine(const RemoteEngineOptions& options);

}  // namespace surf::agent
