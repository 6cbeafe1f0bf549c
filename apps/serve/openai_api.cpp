#include "apps/serve/openai_api.h"

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "base/error.h"

namespace surf::serve {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// %XX escapes of a URL path segment decoded; a malformed escape stays as written.
std::string percent_decode(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) && hex(s[i + 2])) {
            out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

int http_status_of(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::kInvalidArgument:
        case ErrorKind::kFormat:
        case ErrorKind::kUnsupported: return 400;
        case ErrorKind::kResourceExhausted:
        case ErrorKind::kUnavailable: return 503;
        case ErrorKind::kTimeout: return 504;
        default: return 500;
    }
}

bool constant_time_equal(const std::string& a, const std::string& b) {
    // Time independent of where the first difference is (the length may leak; keys are random).
    if (a.size() != b.size()) return false;
    unsigned diff = 0;
    for (size_t i = 0; i < a.size(); ++i)
        diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
    return diff == 0;
}

const char* finish_name(model::FinishReason f) {
    return f == model::FinishReason::kStop ? "stop" : "length";
}

}  // namespace

ApiError bad_request(const std::string& param, const std::string& message, const std::string& code) {
    ApiError e;
    e.status = 400;
    e.param = param;
    e.message = param.empty() ? message : param + ": " + message;
    e.code = code;
    return e;
}

std::string api_error_json(const ApiError& error) {
    json e = {{"message", error.message},
              {"type", error.type},
              {"param", error.param.empty() ? json() : json(error.param)},
              {"code", error.code.empty() ? json() : json(error.code)}};
    // The message may quote the request's own bytes (a parse error near invalid UTF-8): replace, never throw.
    return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

OpenAiService::OpenAiService(std::shared_ptr<model::Engine> engine, ServiceOptions options)
    : engine_(std::move(engine)), options_(std::move(options)) {
    template_ =
        std::make_unique<model::ChatTemplate>(model::ChatTemplate::from_model_dir(engine_->config().dir));
    if (options_.prefix_cache_sessions > 0)
        prefix_cache_ = std::make_unique<PrefixCache>(*engine_, options_.prefix_cache_sessions);
    std::random_device rd;
    id_nonce_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

std::string OpenAiService::next_response_id() {
    // The counter is mixed into the nonce's low bits (splitmix64's odd constant): ids stay distinct within a
    // process and unpredictable from one another.
    const uint64_t n = static_cast<uint64_t>(next_id_++);
    return fmt::format("chatcmpl-{:016x}{:08x}", static_cast<uint64_t>(id_nonce_ + n * 0x9E3779B97F4A7C15u),
                       static_cast<uint64_t>(n & 0xffffffffu));
}

json OpenAiService::model_object() const {
    return {{"id", options_.model_name},
            {"object", "model"},
            {"created", static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                                 std::chrono::system_clock::now().time_since_epoch() -
                                                 (Clock::now() - started_))
                                                 .count())},
            {"owned_by", "surf"}};
}

namespace {

// An engine session for exactly as long as a request runs: closed on every path, disconnects included.
struct SessionGuard {
    model::Engine& engine;
    std::atomic<int64_t>& open;
    model::SessionId id;
    SessionGuard(model::Engine& e, std::atomic<int64_t>& o, model::SessionId s) : engine(e), open(o), id(s) {
        ++open;
    }
    ~SessionGuard() {
        try {
            engine.close_session(id);
        } catch (...) {
        }
        --open;
    }
    SessionGuard(const SessionGuard&) = delete;
    SessionGuard& operator=(const SessionGuard&) = delete;
};

}  // namespace

model::GenerateResult OpenAiService::generate_reusing(const ChatRequest& req, const std::string& prompt,
                                                      const std::vector<model::InputPart>& parts,
                                                      int64_t& prompt_tokens, int64_t& cached_tokens) {
    const PromptUnits units = prompt_units(parts, engine_->tokenizer());
    // The kept state ends before the generation prompt where the prompt renders as the conversation plus that
    // suffix (a later request re-renders this turn's reply after it, not necessarily as the same tokens),
    // else before the last unit. The suffix is found from its own text: the rendering without it is a prefix
    // of the rendering with it, and only the few tokens after that prefix are tokenized (not the whole
    // conversation again, nor its images hashed again). A suffix whose tokens are not exactly the prompt's
    // last ones (a merge across the boundary) keeps the fallback; either way the cache only ever reuses a
    // state whose units match.
    size_t split = units.size() > 0 ? units.size() - 1 : 0;
    if (req.add_generation_prompt) {
        ChatRequest bare = req;
        bare.add_generation_prompt = false;
        const std::string head = render_prompt(bare);
        const std::string& image_token = engine_->config().image_context_token;
        if (prompt.size() > head.size() && prompt.compare(0, head.size(), head) == 0) {
            const std::string suffix = prompt.substr(head.size());
            if (image_token.empty() || suffix.find(image_token) == std::string::npos) {
                const std::vector<int32_t> tail = engine_->tokenizer().encode(suffix, /*parse_special=*/true);
                if (!tail.empty() && tail.size() < units.size() &&
                    std::equal(tail.rbegin(), tail.rend(), units.keys.rbegin(),
                               [](int32_t t, int64_t k) { return k == t; })) {
                    split = units.size() - tail.size();
                }
            }
        }
    }
    std::optional<PrefixCache::Hit> hit =
        split > 0 ? prefix_cache_->fork_longest_prefix(units, split) : std::nullopt;
    SessionGuard session(*engine_, open_sessions_, hit ? hit->session : engine_->open_session());
    size_t at = hit ? hit->units : 0;
    int64_t tokens = hit ? hit->engine_tokens : 0;
    cached_tokens = tokens;
    if (split > 0) {
        if (at < split) {
            model::GenerateOptions prefill_only;
            prefill_only.max_tokens = 0;
            prefill_only.is_cancelled = req.options.is_cancelled;
            model::GenerateResult fed = engine_->generate(session.id, units.parts(at, split), prefill_only);
            if (fed.finish == model::FinishReason::kCancelled)
                return fed;  // nothing to keep: the state is partial
            tokens += fed.prefill_tokens;
            at = split;
        }
        try {
            prefix_cache_->insert(units, split, tokens, session.id);
        } catch (const Error&) {
            // Keeping the state is an optimisation: a fork the engine cannot hold now (full of busy sessions)
            // is skipped.
        }
    }
    model::GenerateResult result = engine_->generate(session.id, units.parts(at, units.size()), req.options);
    prompt_tokens = tokens + result.prefill_tokens;
    return result;
}

void OpenAiService::send_error(HttpResponseWriter& writer, const ApiError& error) {
    writer.send(error.status, "application/json", api_error_json(error));
}

std::string OpenAiService::render_prompt(const ChatRequest& req) const {
    model::ChatRenderOptions ro;
    ro.add_generation_prompt = req.add_generation_prompt;
    ro.extra = req.template_kwargs;
    try {
        return template_->render(req.messages, ro);
    } catch (const Error& e) {
        throw bad_request("messages", std::string("the chat template refused them: ") + e.what());
    }
}

void OpenAiService::record_finished(int64_t prompt_tokens, int64_t completion_tokens) {
    prompt_tokens_total_ += prompt_tokens;
    completion_tokens_total_ += completion_tokens;
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    recent_tokens_.emplace_back(now, completion_tokens);
    prune_recent_tokens(now);
}

void OpenAiService::prune_recent_tokens(Clock::time_point now) const {
    while (!recent_tokens_.empty() && now - recent_tokens_.front().first > kRecentWindow)
        recent_tokens_.pop_front();
}

void OpenAiService::handle(const HttpRequest& request, HttpResponseWriter& writer) {
    const auto begun = Clock::now();
    RequestRecord record;
    try {
        route(request, writer, record);
    } catch (const ApiError& e) {
        if (!writer.started()) send_error(writer, e);
    }
    record_request(request, writer, record, begun);
}

void OpenAiService::record_request(const HttpRequest& request, const HttpResponseWriter& writer,
                                   const RequestRecord& record, Clock::time_point begun) {
    const auto now = Clock::now();
    const auto received = request.received == Clock::time_point{} ? begun : request.received;
    const double seconds = std::chrono::duration<double>(now - received).count();
    {
        std::lock_guard<std::mutex> lock(metrics_mutex_);
        ++responses_by_status_[writer.status()];
    }
    if (options_.access_log) {
        // The path is the client's text: control characters are escaped so that one request is one line.
        std::string path;
        for (char c : request.path.substr(0, 200))
            path += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
        options_.access_log(fmt::format("{} {} {} {} {} {} {:.3f}", request.peer,
                                        request.method.substr(0, 16), path, writer.status(),
                                        record.prompt_tokens, record.completion_tokens, seconds));
    }
    // The request's duration is observed last: a /metrics that counts it also shows its other observations
    // and its access-log line.
    if (request.path != "/health" && request.path != "/metrics") {
        queue_seconds_.observe(std::chrono::duration<double>(begun - received).count());
        if (record.first_token != Clock::time_point{})
            first_token_seconds_.observe(
                std::chrono::duration<double>(record.first_token - received).count());
        request_seconds_.observe(seconds);
    }
}

void OpenAiService::route(const HttpRequest& request, HttpResponseWriter& writer, RequestRecord& record) {
    const bool needs_key = request.path != "/health";
    if (needs_key && !options_.api_key.empty()) {
        const std::string auth = request.header("authorization");
        const std::string prefix = "Bearer ";
        if (auth.empty()) {
            throw ApiError{401, "missing API key: send \"Authorization: Bearer <key>\"",
                           "invalid_request_error", "", "invalid_api_key"};
        }
        if (auth.rfind(prefix, 0) != 0 ||
            !constant_time_equal(auth.substr(prefix.size()), options_.api_key)) {
            throw ApiError{401, "incorrect API key", "invalid_request_error", "", "invalid_api_key"};
        }
    }
    const bool get = request.method == "GET";
    if (request.path == "/health") {
        if (!get) throw ApiError{405, "use GET /health", "invalid_request_error", "", "method_not_allowed"};
        writer.send(200, "application/json", "{\"status\":\"ok\"}");
    } else if (request.path == "/metrics") {
        if (!get) throw ApiError{405, "use GET /metrics", "invalid_request_error", "", "method_not_allowed"};
        writer.send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_text());
    } else if (request.path == "/v1/models") {
        if (!get)
            throw ApiError{405, "use GET /v1/models", "invalid_request_error", "", "method_not_allowed"};
        writer.send(200, "application/json",
                    json{{"object", "list"}, {"data", json::array({model_object()})}}.dump());
    } else if (request.path.rfind("/v1/models/", 0) == 0) {
        if (!get)
            throw ApiError{405, "use GET /v1/models/{model}", "invalid_request_error", "",
                           "method_not_allowed"};
        const std::string id = percent_decode(request.path.substr(std::string("/v1/models/").size()));
        if (id != options_.model_name) {
            throw ApiError{
                404,
                "the model \"" + id + "\" does not exist; this server serves \"" + options_.model_name + "\"",
                "invalid_request_error", "model", "model_not_found"};
        }
        writer.send(200, "application/json", model_object().dump());
    } else if (request.path == "/v1/chat/completions") {
        if (request.method != "POST") {
            throw ApiError{405, "use POST /v1/chat/completions", "invalid_request_error", "",
                           "method_not_allowed"};
        }
        chat_completions(request, writer, record);
    } else {
        throw ApiError{404, "no route " + request.method + " " + request.path, "invalid_request_error", "",
                       "not_found"};
    }
}

namespace {

// What identifies one completion in every object it sends: id, creation time and model name.
struct CompletionIds {
    std::string id;
    int64_t created = 0;
    std::string model;

    // The SSE event of one chat.completion.chunk.
    std::string chunk(const json& delta, const json& finish) const {
        json c = {
            {"id", id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model},
            {"choices", json::array({json{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
        return "data: " + c.dump() + "\n\n";
    }
};

// The end of a completed generation: a stream's last chunk (and the usage chunk when asked for) and
// [DONE], or the whole chat.completion object.
void send_completion(const ChatRequest& req, const CompletionIds& ids, const model::GenerateResult& result,
                     const json& usage, HttpResponseWriter& writer) {
    if (req.stream) {
        std::string tail = ids.chunk(json::object(), finish_name(result.finish));
        if (req.include_usage) {
            json u = {{"id", ids.id},       {"object", "chat.completion.chunk"}, {"created", ids.created},
                      {"model", ids.model}, {"choices", json::array()},          {"usage", usage}};
            tail += "data: " + u.dump() + "\n\n";
        }
        writer.write(tail + "data: [DONE]\n\n");
        return;
    }
    const json message = {{"role", "assistant"}, {"content", result.text}};
    const json response = {
        {"id", ids.id},
        {"object", "chat.completion"},
        {"created", ids.created},
        {"model", ids.model},
        {"choices", json::array({json{
                        {"index", 0}, {"message", message}, {"finish_reason", finish_name(result.finish)}}})},
        {"usage", usage}};
    writer.send(200, "application/json", response.dump());
}

}  // namespace

std::vector<model::InputPart> OpenAiService::prompt_parts(const ChatRequest& req,
                                                          const std::string& prompt) const {
    std::vector<model::InputPart> parts;
    try {
        parts = model::interleave_images(prompt, req.images, engine_->config().image_context_token);
    } catch (const Error& e) {
        throw bad_request("messages",
                          std::string("text must not contain the image placeholder itself: ") + e.what());
    }
    // The text parts are tokenized once, here, as the engine would (special tokens parsed): the limit counts
    // what the engine is fed, and the prefix cache and the engine take the ids instead of tokenizing the text
    // again.
    int64_t text_tokens = 0;
    for (model::InputPart& part : parts) {
        if (part.image || part.text.empty()) continue;
        part.token_ids = engine_->tokenizer().encode(part.text, /*parse_special=*/true);
        part.text.clear();
        text_tokens += static_cast<int64_t>(part.token_ids.size());
    }
    if (options_.max_prompt_tokens > 0 && text_tokens > options_.max_prompt_tokens) {
        throw bad_request("messages",
                          "the prompt has " + std::to_string(text_tokens) +
                              " text tokens; this server accepts " +
                              std::to_string(options_.max_prompt_tokens),
                          "context_length_exceeded");
    }
    return parts;
}

bool OpenAiService::run_generation(const ChatRequest& req, const std::string& prompt,
                                   const std::vector<model::InputPart>& parts, HttpResponseWriter& writer,
                                   model::GenerateResult& result, int64_t& prompt_tokens,
                                   int64_t& cached_tokens) {
    ++running_;
    try {
        if (prefix_cache_) {
            result = generate_reusing(req, prompt, parts, prompt_tokens, cached_tokens);
        } else {
            SessionGuard session(*engine_, open_sessions_, engine_->open_session());
            result = engine_->generate(session.id, parts, req.options);
            prompt_tokens = result.prefill_tokens;
        }
        --running_;
    } catch (const Error& e) {
        --running_;
        ApiError err{http_status_of(e.kind()), e.what(), "invalid_request_error", "", ""};
        if (err.status >= 500) err.type = "server_error";
        if (e.kind() == ErrorKind::kResourceExhausted) err.code = "overloaded";
        if (!req.stream) throw err;
        writer.write("data: " + api_error_json(err) + "\n\ndata: [DONE]\n\n");
        return false;
    } catch (...) {
        --running_;
        throw;
    }
    return true;
}

void OpenAiService::chat_completions(const HttpRequest& request, HttpResponseWriter& writer,
                                     RequestRecord& record) {
    ChatRequest req = parse_chat_request(request.body, options_, schemas_);
    if (req.model != options_.model_name) {
        throw ApiError{404,
                       "the model \"" + req.model + "\" does not exist; this server serves \"" +
                           options_.model_name + "\"",
                       "invalid_request_error", "model", "model_not_found"};
    }
    const std::string prompt = render_prompt(req);
    const std::vector<model::InputPart> parts = prompt_parts(req, prompt);
    const CompletionIds ids{next_response_id(), static_cast<int64_t>(std::time(nullptr)),
                            options_.model_name};

    bool client_left = false;
    // Polled between the prompt's chunks and the decode steps (CPU backend) and at every piece: a client that
    // hangs up stops its generation wherever it is.
    const auto hung_up = [&] {
        if (writer.client_gone()) client_left = true;
        return client_left;
    };
    req.options.is_cancelled = hung_up;
    if (req.stream) {
        req.options.on_text = [&](std::string_view piece) {
            if (record.first_token == Clock::time_point{}) record.first_token = Clock::now();
            if (hung_up() || !writer.write(ids.chunk(json{{"content", std::string(piece)}}, nullptr))) {
                client_left = true;
                return false;
            }
            return true;
        };
        if (!writer.begin_stream(200, "text/event-stream") ||
            !writer.write(ids.chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr))) {
            return;
        }
    } else {
        // Nothing is written until the end: the socket is polled at every piece instead.
        req.options.on_text = [&](std::string_view) {
            if (record.first_token == Clock::time_point{}) record.first_token = Clock::now();
            return !hung_up();
        };
    }
    model::GenerateResult result;
    int64_t prompt_tokens = 0, cached_tokens = 0;
    if (!run_generation(req, prompt, parts, writer, result, prompt_tokens, cached_tokens)) return;

    const int64_t completion = static_cast<int64_t>(result.tokens.size());
    record_finished(prompt_tokens, completion);
    record.prompt_tokens = prompt_tokens;
    record.completion_tokens = completion;
    json usage = {{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", completion},
                  {"total_tokens", prompt_tokens + completion}};
    if (prefix_cache_) usage["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
    if (result.finish == model::FinishReason::kCancelled || client_left) {
        ++cancelled_total_;
        return;
    }
    send_completion(req, ids, result, usage, writer);
}

namespace {

void write_metric(std::ostream& os, const char* name, const char* type, const char* help, double value) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
       << name << " " << value << "\n";
}

// The engine's own gauges and counters: scheduler, throughput, KV pages, state slots, sessions, memory.
void write_engine_metrics(std::ostream& os, const model::EngineStats& s) {
    write_metric(os, "surf_engine_running", "gauge", "Sequences the engine is running.",
                 static_cast<double>(s.running));
    write_metric(os, "surf_engine_waiting", "gauge", "Requests waiting inside the engine.",
                 static_cast<double>(s.waiting));
    write_metric(os, "surf_engine_decode_tokens_total", "counter", "Tokens decoded by the engine.",
                 static_cast<double>(s.decode_tokens));
    write_metric(os, "surf_engine_prefill_tokens_total", "counter", "Tokens prefilled by the engine.",
                 static_cast<double>(s.prefill_tokens));
    write_metric(
        os, "surf_engine_decode_tokens_per_second", "gauge",
        "Decode-only throughput over the engine's life (tokens / decode-step seconds).",
        s.decode_only_seconds > 0 ? static_cast<double>(s.decode_only_rows) / s.decode_only_seconds : 0.0);
    write_metric(os, "surf_kv_pages_used", "gauge", "Paged-KV pages in use.",
                 static_cast<double>(s.kv_pages_used));
    write_metric(os, "surf_kv_pages_total", "gauge", "Paged-KV pages.",
                 static_cast<double>(s.kv_pages_total));
    write_metric(os, "surf_kv_occupancy", "gauge", "Fraction of KV pages in use.",
                 s.kv_pages_total > 0
                     ? static_cast<double>(s.kv_pages_used) / static_cast<double>(s.kv_pages_total)
                     : 0.0);
    write_metric(os, "surf_state_slots_used", "gauge", "Recurrent-state (conv + SSM) slots in use.",
                 static_cast<double>(s.slots_used));
    write_metric(os, "surf_state_slots_total", "gauge", "Recurrent-state slots.",
                 static_cast<double>(s.slots_total));
    write_metric(
        os, "surf_state_occupancy", "gauge", "Fraction of state slots in use.",
        s.slots_total > 0 ? static_cast<double>(s.slots_used) / static_cast<double>(s.slots_total) : 0.0);
    write_metric(os, "surf_sessions_resident", "gauge", "Sessions resident on the device.",
                 static_cast<double>(s.resident_sessions));
    write_metric(os, "surf_sessions_offloaded", "gauge", "Sessions offloaded to host memory.",
                 static_cast<double>(s.offloaded_sessions));
    write_metric(os, "surf_image_cache_hits_total", "counter", "Image-embedding cache hits.",
                 static_cast<double>(s.image_cache_hits));
    write_metric(os, "surf_device_bytes", "gauge", "Bytes allocated on the device.",
                 static_cast<double>(s.device_bytes));
}

}  // namespace

double OpenAiService::write_response_counts(std::ostream& os, Clock::time_point now) const {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    prune_recent_tokens(now);
    int64_t sum = 0;
    for (const auto& r : recent_tokens_) sum += r.second;
    const double window = std::min(std::chrono::duration<double>(kRecentWindow).count(),
                                   std::chrono::duration<double>(now - started_).count());
    os << "# HELP surf_http_responses_total Responses sent, by status code.\n"
          "# TYPE surf_http_responses_total counter\n";
    for (const auto& [status, n] : responses_by_status_) {
        os << "surf_http_responses_total{code=\"" << status << "\"} " << n << "\n";
    }
    return window > 0 ? static_cast<double>(sum) / window : 0;
}

void OpenAiService::write_service_metrics(std::ostream& os, const model::EngineStats& s,
                                          double tokens_per_second) const {
    const int64_t queued = queue_probe_ ? queue_probe_() : 0;
    write_metric(
        os, "surf_queue_depth", "gauge",
        "Requests waiting: HTTP connections not yet picked up plus engine requests waiting for a slot.",
        static_cast<double>(queued + s.waiting));
    write_metric(os, "surf_requests_running", "gauge", "Chat completions generating now.",
                 static_cast<double>(running_.load()));
    write_metric(os, "surf_sessions_open", "gauge", "Engine sessions held by in-flight requests.",
                 static_cast<double>(open_sessions_.load()));
    write_metric(os, "surf_prompt_tokens_total", "counter",
                 "Prompt tokens of finished requests (those a kept session held included).",
                 static_cast<double>(prompt_tokens_total_.load()));
    if (prefix_cache_) {
        write_metric(os, "surf_prefix_cache_sessions", "gauge",
                     "Engine sessions kept at the end of recent prompts (conversation reuse).",
                     static_cast<double>(prefix_cache_->size()));
        write_metric(os, "surf_prefix_cache_hits_total", "counter",
                     "Requests that started from a kept session.",
                     static_cast<double>(prefix_cache_->hits()));
        write_metric(os, "surf_prefix_cached_tokens_total", "counter",
                     "Prompt tokens those kept sessions already held (not prefilled again).",
                     static_cast<double>(prefix_cache_->hit_tokens()));
    }
    write_metric(os, "surf_generation_tokens_total", "counter", "Tokens generated.",
                 static_cast<double>(completion_tokens_total_.load()));
    write_metric(os, "surf_generation_tokens_per_second", "gauge",
                 "Tokens generated by requests that finished in the last 10 s, per second.",
                 tokens_per_second);
    write_metric(os, "surf_requests_cancelled_total", "counter",
                 "Generations cancelled because the client disconnected.",
                 static_cast<double>(cancelled_total_.load()));
    queue_seconds_.write(os, "surf_request_queue_seconds",
                         "Time a chat request waited for a worker after it was read whole.");
    first_token_seconds_.write(os, "surf_time_to_first_token_seconds",
                               "Time from a chat request read whole to its first generated token.");
    request_seconds_.write(
        os, "surf_request_duration_seconds",
        "Time from a request read whole to its response sent (streams: to the last chunk).");
}

std::string OpenAiService::metrics_text() const {
    std::ostringstream os;
    const model::EngineStats s = engine_->stats();
    const auto now = Clock::now();
    const double tokens_per_second = write_response_counts(os, now);
    write_service_metrics(os, s, tokens_per_second);
    write_engine_metrics(os, s);
    write_metric(os, "surf_uptime_seconds", "gauge", "Seconds since the server started.",
                 std::chrono::duration<double>(now - started_).count());
    return os.str();
}

}  // namespace surf::serve
