// The OpenAI-compatible API of `surf serve` over one model::Engine (docs/SERVE.md):
//   POST /v1/chat/completions  text + image_url (data URLs) parts, stream (server-sent events),
//                              response_format json_schema (constrained decoding), usage counts
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text)
// Every request runs on its own engine session, closed when the request ends (also when a streaming client
// disconnects, which cancels its generation); with ServiceOptions::prefix_cache_sessions that session starts
// as a fork of a kept one whose prompt the request's prompt extends, so a conversation re-sent whole prefills
// only its new part. Errors are OpenAI's JSON shape
// {"error": {"message", "type", "param", "code"}} with the matching 4xx/5xx status.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/serve/http_server.h"
#include "apps/serve/metrics.h"
#include "apps/serve/prefix_cache.h"
#include "model/engine.h"
#include "model/structured/json_schema.h"
#include "model/text/chat_template.h"

namespace surf::serve {

struct ServiceOptions {
    std::string model_name;  // the id /v1/models lists and requests must name
    std::string api_key;     // "" = no key; else "Authorization: Bearer <key>" on /v1/* and /metrics
    int32_t default_max_tokens = 512;
    int32_t max_tokens_limit = 8192;  // a larger max_tokens is refused (400)
    int64_t max_prompt_tokens = 0;    // text tokens of the rendered prompt as the engine is fed them (special
                                      // tokens parsed); 0 = no limit beyond the engine's
    int max_images = 16;              // image parts per request
    size_t max_image_bytes = 16 << 20;                // decoded base64 bytes of one image
    int64_t max_image_pixels = int64_t{4096} * 4096;  // width × height of one image, checked before decoding
    int64_t max_request_pixels = 4 * int64_t{4096} * 4096;  // of all a request's images together
    // Conversation reuse (prefix_cache.h): engine sessions kept at the end of recent prompts, forked by
    // requests whose prompt extends one; 0 = every request prefills its whole prompt.
    size_t prefix_cache_sessions = 0;
    // One line per request (peer, method, path, status, prompt and completion tokens, latency); null = none.
    std::function<void(const std::string&)> access_log;
};

// An error as the API reports it.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // "" = null
    std::string code;   // "" = null
};
std::string api_error_json(const ApiError& error);
// A 400 naming the request parameter (message prefixed with "param: ").
ApiError bad_request(const std::string& param, const std::string& message, const std::string& code = "");

// A chat completion request, parsed and checked.
struct ChatRequest {
    std::string model;
    std::vector<model::ChatMessage> messages;
    std::vector<std::shared_ptr<const model::Image>> images;  // in the order the template renders them
    model::GenerateOptions options;                           // no callbacks set
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool add_generation_prompt = true;
    nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
};

// The deepest nesting of objects and arrays in a JSON text (brackets inside strings do not count).
int json_nesting_depth(std::string_view text);
// Bodies nested deeper than this are refused (400) before they are parsed.
inline constexpr int kMaxJsonDepth = 64;

// Parses a /v1/chat/completions body; throws ApiError naming the field. Unknown models are not checked
// here (the service does it, with 404).
ChatRequest parse_chat_request(const std::string& body, const ServiceOptions& options,
                               model::SchemaCache& schemas);

// Decodes "data:image/png;base64,...." (any image/* type stb_image reads); throws ApiError.
std::shared_ptr<const model::Image> decode_data_url(const std::string& url, size_t max_bytes,
                                                    int64_t max_pixels, const std::string& param);

// Standard base64 (padding optional, no whitespace); nullopt when malformed.
std::optional<std::string> base64_decode(const std::string& text);

class OpenAiService {
public:
    OpenAiService(std::shared_ptr<model::Engine> engine, ServiceOptions options);

    void handle(const HttpRequest& request, HttpResponseWriter& writer);
    // Connections waiting for a worker (the HTTP server's queue), reported in /metrics.
    void set_queue_probe(std::function<int64_t()> probe) { queue_probe_ = std::move(probe); }
    std::string metrics_text() const;

    // Requests generating now / sessions this service holds open now (tests watch both).
    int64_t running() const { return running_.load(); }
    int64_t open_sessions() const { return open_sessions_.load(); }

private:
    // What one request did, for the access log and the latency histograms.
    struct RequestRecord {
        int64_t prompt_tokens = 0, completion_tokens = 0;
        std::chrono::steady_clock::time_point first_token{};  // unset: no token was generated
    };
    void chat_completions(const HttpRequest& request, HttpResponseWriter& writer, RequestRecord& record);
    // The prompt as engine input: images interleaved and text parts tokenized; refuses a prompt of more than
    // options_.max_prompt_tokens text tokens.
    std::vector<model::InputPart> prompt_parts(const ChatRequest& req, const std::string& prompt) const;
    // Generates, counting the request in running_. An engine error is thrown as an ApiError, or for a stream
    // written as an error event (then false).
    bool run_generation(const ChatRequest& req, const std::string& prompt,
                        const std::vector<model::InputPart>& parts, HttpResponseWriter& writer,
                        model::GenerateResult& result, int64_t& prompt_tokens, int64_t& cached_tokens);
    // metrics_text's parts: the responses by status code (returning the recent tokens per second, both under
    // metrics_mutex_), then the service's queue, request, token and latency metrics.
    double write_response_counts(std::ostream& os, std::chrono::steady_clock::time_point now) const;
    void write_service_metrics(std::ostream& os, const model::EngineStats& s, double tokens_per_second) const;
    void route(const HttpRequest& request, HttpResponseWriter& writer, RequestRecord& record);
    void record_request(const HttpRequest& request, const HttpResponseWriter& writer,
                        const RequestRecord& record, std::chrono::steady_clock::time_point begun);
    // "chatcmpl-" + 16 hex digits of this process's random nonce + a counter: unique across restarts.
    std::string next_response_id();
    nlohmann::ordered_json model_object() const;
    void send_error(HttpResponseWriter& writer, const ApiError& error);
    std::string render_prompt(const ChatRequest& req) const;
    // Runs the request on the engine through the prefix cache (`prompt` is render_prompt(req), `parts` its
    // engine input): `prompt_tokens` gets the whole prompt's engine tokens, `cached_tokens` those a kept
    // session already held.
    model::GenerateResult generate_reusing(const ChatRequest& req, const std::string& prompt,
                                           const std::vector<model::InputPart>& parts, int64_t& prompt_tokens,
                                           int64_t& cached_tokens);
    void record_finished(int64_t prompt_tokens, int64_t completion_tokens);
    // Drops the entries of recent_tokens_ older than kRecentWindow (metrics_mutex_ held). Called on every
    // request as well as by /metrics: a server nobody scrapes keeps only the window.
    void prune_recent_tokens(std::chrono::steady_clock::time_point now) const;
    static constexpr std::chrono::seconds kRecentWindow{10};

    std::shared_ptr<model::Engine> engine_;
    ServiceOptions options_;
    std::unique_ptr<PrefixCache> prefix_cache_;  // null when options_.prefix_cache_sessions is 0
    std::unique_ptr<model::ChatTemplate> template_;
    model::SchemaCache schemas_;
    std::function<int64_t()> queue_probe_;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

    std::atomic<int64_t> running_{0}, open_sessions_{0}, next_id_{1};
    uint64_t id_nonce_ = 0;
    LatencyHistogram queue_seconds_, first_token_seconds_, request_seconds_;
    std::atomic<int64_t> prompt_tokens_total_{0}, completion_tokens_total_{0}, cancelled_total_{0};
    mutable std::mutex metrics_mutex_;
    std::map<int, int64_t> responses_by_status_;
    mutable std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>>
        recent_tokens_;  // completions of the last kRecentWindow
};

}  // namespace surf::serve
