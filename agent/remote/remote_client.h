// A client for an OpenAI-compatible chat endpoint (surf serve, vLLM, SGLang, ...) over libcurl: JSON or
// streamed (server-sent events) chat completions, with connect and total timeouts, retries with
// exponential backoff on connection errors, 429 and 5xx (only while nothing has been streamed to the
// caller yet), a limit on requests in flight, and errors that name the URL.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace surf::agent {

struct RemoteClientOptions {
    std::string base_url;    // "http://host:port/v1" (a trailing slash is ignored)
    std::string model_name;  // the "model" field of every request
    std::string api_key;     // sent as "Authorization: Bearer <key>" when set
    double connect_timeout_seconds = 5;
    double request_timeout_seconds = 600;  // a whole call, streaming included
    int max_retries = 3;                   // attempts after the first
    double backoff_seconds = 0.25;         // first wait; doubles each retry, at most backoff_max_seconds
    double backoff_max_seconds = 4;
    int max_concurrency = 16;  // requests in flight from this client; more wait their turn
};

struct ChatCall {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI messages
    int32_t max_tokens = 256;
    float temperature = 0;
    float top_p = 1;
    int32_t top_k = 0;  // 0 = not sent
    uint64_t seed = 0;
    bool send_seed = false;
    std::string json_schema;  // compact schema text; "" = free text
    bool ignore_eos = false;
    nlohmann::ordered_json chat_template_kwargs = nullptr;  // e.g. {"enable_thinking": false}
    bool continue_final_message = false;                    // the last message is an assistant prefix
    // When set the call streams; each piece of text goes here; returning false cancels the call.
    std::function<bool(std::string_view)> on_text;
};

struct ChatReply {
    std::string text;
    std::string finish_reason;  // "stop", "length", ... ("" when cancelled)
    bool cancelled = false;
    int64_t prompt_tokens = 0, completion_tokens = 0;  // from "usage" (0 if the server sent none)
    int attempts = 0;
    double seconds = 0;
};

class RemoteClient {
public:
    explicit RemoteClient(RemoteClientOptions options);

    // One chat completion. Throws surf::Error naming the URL: kIo when the server cannot be reached (after
    // the retries), kTimeout past the request timeout, kInvalidArgument for a 4xx answer (with the
    // server's message), kModelOutput for a reply that is not the API's JSON.
    ChatReply chat(const ChatCall& call);
    // GET /models: the model ids the server lists (throws like chat()).
    std::vector<std::string> models();

    const RemoteClientOptions& options() const { return options_; }
    std::string url(const std::string& route) const { return base_ + route; }
    int in_flight() const;

private:
    struct Response;
    Response perform(const std::string& route, const std::string* body,
                     const std::function<bool(std::string_view)>& on_data);
    void acquire();
    void release();

    RemoteClientOptions options_;
    std::string base_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    int in_flight_ = 0;
};

// The JSON body of a chat call (exposed for tests).
nlohmann::ordered_json chat_call_body(const ChatCall& call, const std::string& model_name);

}  // namespace surf::agent
