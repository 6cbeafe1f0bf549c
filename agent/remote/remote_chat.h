// The remote chat model: the agent's roles on a model behind an OpenAI-compatible endpoint (surf serve, vLLM,
// SGLang, ...):
//
//   surf::agent::RemoteChatOptions o;
//   o.client.base_url = "http://gpu-box:8000/v1";
//   o.client.model_name = "holotron-12b";
//   auto model = surf::agent::open_remote_chat_model(o);   // checks the server lists the model
//   surf::agent::Agent agent(model, config);
//
// With more_base_urls the model is served by several servers (replicas, no load balancer needed): each chat
// stays on one of them and moves only when its server stops answering (agent/remote/remote_endpoints.h).
//
// Each turn posts the whole conversation as OpenAI messages (text parts, images as PNG data URLs, each
// encoded once per chat); the server renders them with the checkpoint's own template, and one with prefix
// caching reuses what it read before (docs/SERVE.md, "Remote backend"). A schema becomes a strict
// json_schema response format, the profile's enable_thinking a chat_template_kwargs entry.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "agent/chat.h"
#include "agent/remote/remote_client.h"
#include "agent/remote/remote_endpoints.h"

namespace surf::agent {

struct RemoteChatOptions {
    RemoteClientOptions client;
    // Other servers of the same model beside client.base_url; each chat is placed on one of them.
    std::vector<std::string> more_base_urls;
    // How long a server that failed is passed over for new chats and turns (RemoteEndpoints).
    double down_seconds = 30;
    // A local checkpoint folder (tokenizer.json) whose special tokens the agent should neutralise in page
    // text and tasks (e.g. "<SPECIAL_11>"), as it does in-process. "" = only "<image>", "<img>", "</img>".
    std::string tokenizer_dir;
    bool check_model = true;  // open_remote_chat_model asks GET /models and requires model_name among them
};

class RemoteChatModel final : public ChatModel {
public:
    explicit RemoteChatModel(RemoteChatOptions options);

    std::unique_ptr<Chat> open_chat(const ChatOptions& options) override;
    std::string name() const override;

    RemoteClient& client() { return endpoints_.client(0); }  // the first server's
    RemoteEndpoints& endpoints() { return endpoints_; }
    const std::vector<std::string>& special_strings() const { return special_strings_; }
    // Totals over every chat: the prompt tokens the server read and the tokens it generated.
    int64_t prompt_tokens() const { return prompt_tokens_.load(); }
    int64_t completion_tokens() const { return completion_tokens_.load(); }

private:
    friend class RemoteChat;
    RemoteChatOptions options_;
    RemoteEndpoints endpoints_;
    std::vector<std::string> special_strings_;
    std::atomic<int64_t> prompt_tokens_{0}, completion_tokens_{0};
};

// Builds the model and, with check_model, verifies every server is up and serves it (a clear kUnavailable
// error naming the URL when one is down; kInvalidArgument listing what it serves otherwise).
std::shared_ptr<RemoteChatModel> open_remote_chat_model(const RemoteChatOptions& options);

// The OpenAI messages of a conversation (exposed for tests): text, then each image as an image_url part;
// `data_url` gives an image's data URL.
nlohmann::ordered_json openai_messages(
    const std::vector<Message>& messages,
    const std::function<const std::string&(const std::shared_ptr<const model::Image>&)>& data_url);

}  // namespace surf::agent
