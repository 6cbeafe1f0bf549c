#include "agent/remote/remote_client.h"
#include "base/utf8.h"

#include <curl/curl.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "base/error.h"

namespace surf::agent {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What the server said in an OpenAI-style error body, else the body itself (shortened).
std::string server_message(const std::string& body) {
    try {
        const json j = json::parse(body);
        if (j.contains("error") && j["error"].is_object() && j["error"].contains("message")) {
            return j["error"]["message"].is_string() ? j["error"]["message"].get<std::string>()
                                                     : j["error"]["message"].dump();
        }
        if (j.contains("detail")) return j["detail"].dump();  // FastAPI-style servers
    } catch (const json::exception&) {
    }
    return surf::shorten_utf8(body, 300, "...");
}

bool retryable_curl(CURLcode code) {
    switch (code) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE: return true;
        default: return false;
    }
}

}  // namespace

struct RemoteClient::Response {
    long status = 0;
    std::string body;  // the whole body, or (streaming, status 200) nothing: it went to on_data
    CURLcode code = CURLE_OK;
    std::string curl_error;
    bool delivered = false;  // on_data received something (a retry would repeat it)
    bool cancelled = false;  // on_data returned false
};

json chat_call_body(const ChatCall& call, const std::string& model_name) {
    json body = {{"model", model_name},
                 {"messages", call.messages},
                 {"max_tokens", call.max_tokens},
                 {"temperature", call.temperature}};
    if (call.top_p < 1) body["top_p"] = call.top_p;
    if (call.top_k > 0) body["top_k"] = call.top_k;
    if (call.send_seed) body["seed"] = call.seed;
    if (call.ignore_eos) body["ignore_eos"] = true;
    if (!call.json_schema.empty()) {
        body["response_format"] = {
            {"type", "json_schema"},
            {"json_schema",
             {{"name", "surf_output"}, {"schema", json::parse(call.json_schema)}, {"strict", true}}}};
    }
    if (!call.chat_template_kwargs.is_null()) body["chat_template_kwargs"] = call.chat_template_kwargs;
    if (call.continue_final_message) {
        body["continue_final_message"] = true;  // vLLM's names for "complete the last assistant message"
        body["add_generation_prompt"] = false;
    }
    if (call.on_text) {
        body["stream"] = true;
        body["stream_options"] = {{"include_usage", true}};
    }
    return body;
}

RemoteClient::RemoteClient(RemoteClientOptions options) : options_(std::move(options)) {
    global_init();
    base_ = options_.base_url;
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
    if (base_.rfind("http://", 0) != 0 && base_.rfind("https://", 0) != 0) {
        throw Error(ErrorKind::kInvalidArgument,
                    "remote model URL \"" + options_.base_url + "\": expected http://host:port/v1");
    }
    if (options_.model_name.empty()) {
        throw Error(ErrorKind::kInvalidArgument,
                    "remote model " + base_ + ": a model name is required (--model-name)");
    }
    if (options_.max_concurrency < 1 || options_.max_retries < 0) {
        throw Error(ErrorKind::kInvalidArgument,
                    "remote model " + base_ + ": max_concurrency ≥ 1 and max_retries ≥ 0");
    }
}

int RemoteClient::in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return in_flight_;
}

void RemoteClient::acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return in_flight_ < options_.max_concurrency; });
    ++in_flight_;
}

void RemoteClient::release() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        --in_flight_;
    }
    cv_.notify_one();
}

RemoteClient::Response RemoteClient::perform(const std::string& route, const std::string* body,
                                             const std::function<bool(std::string_view)>& on_data) {
    Response r;
    CURL* curl = curl_easy_init();
    if (!curl)
        throw Error(ErrorKind::kResourceExhausted, "remote model " + base_ + ": curl_easy_init failed");
    struct Ctx {
        CURL* curl;
        Response* r;
        const std::function<bool(std::string_view)>* on_data;
    } ctx{curl, &r, &on_data};
    char error_buf[CURL_ERROR_SIZE] = "";
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    if (on_data) headers = curl_slist_append(headers, "Accept: text/event-stream");
    if (!options_.api_key.empty())
        headers = curl_slist_append(headers, ("Authorization: Bearer " + options_.api_key).c_str());
    const std::string target = url(route);
    curl_easy_setopt(curl, CURLOPT_URL, target.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buf);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options_.connect_timeout_seconds * 1000));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_seconds * 1000));
    if (body) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->data());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &ctx);
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t, size_t n, void* user) -> size_t {
            auto* c = static_cast<Ctx*>(user);
            long status = 0;
            curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
            if (status == 200 && *c->on_data) {
                c->r->delivered = true;
                if (!(*c->on_data)(std::string_view(data, n))) {
                    c->r->cancelled = true;
                    return 0;  // aborts the transfer: the server sees the connection close and cancels
                }
            } else {
                c->r->body.append(data, n);
            }
            return n;
        });
    r.code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    r.curl_error = error_buf[0] ? error_buf : curl_easy_strerror(r.code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return r;
}

std::vector<std::string> RemoteClient::models() {
    std::string last;
    for (int attempt = 0; attempt <= options_.max_retries; ++attempt) {
        if (attempt > 0) {
            std::this_thread::sleep_for(std::chrono::duration<double>(std::min(
                options_.backoff_max_seconds, options_.backoff_seconds * std::pow(2.0, attempt - 1))));
        }
        const Response r = perform("/models", nullptr, {});
        if (r.code != CURLE_OK) {
            last = r.curl_error;
            if (retryable_curl(r.code)) continue;
            throw Error(r.code == CURLE_OPERATION_TIMEDOUT ? ErrorKind::kTimeout : ErrorKind::kUnavailable,
                        "remote model server " + url("/models") + ": " + r.curl_error);
        }
        if (r.status >= 500 || r.status == 429) {
            last = "HTTP " + std::to_string(r.status) + ": " + server_message(r.body);
            continue;
        }
        if (r.status != 200) {
            throw Error(ErrorKind::kInvalidArgument, "remote model server " + url("/models") + ": HTTP " +
                                                         std::to_string(r.status) + ": " +
                                                         server_message(r.body));
        }
        try {
            std::vector<std::string> ids;
            const json list = json::parse(r.body);  // named: a range-for over a temporary's member dangles
            for (const auto& m : list.at("data")) ids.push_back(m.at("id").get<std::string>());
            return ids;
        } catch (const json::exception& e) {
            throw Error(ErrorKind::kModelOutput,
                        "remote model server " + url("/models") + ": not a model list: " + e.what());
        }
    }
    throw Error(ErrorKind::kUnavailable, "remote model server " + base_ + " is not reachable (" + last +
                                             ") after " + std::to_string(options_.max_retries + 1) +
                                             " attempts");
}

namespace {

// A streamed chat completion as it arrives: server-sent events ("data: {chunk}" lines, "data: [DONE]" at the
// end, maybe "data: {error}"); the text goes to the caller piece by piece, usage and finish reason into the
// reply.
class EventStream {
public:
    EventStream(ChatReply& reply, const std::function<bool(std::string_view)>& on_text)
        : reply_(reply), on_text_(on_text) {}

    // Received bytes; false stops the transfer (the caller stopped, or the stream is broken).
    bool feed(std::string_view data) {
        pending_.append(data);
        size_t nl;
        while ((nl = pending_.find('\n')) != std::string::npos) {
            std::string l = pending_.substr(0, nl);
            pending_.erase(0, nl + 1);
            if (!l.empty() && l.back() == '\r') l.pop_back();
            if (!line(l)) return false;
        }
        return true;
    }
    // The last line, when the stream did not end with a newline.
    void finish() {
        if (!pending_.empty()) line(pending_);
    }
    bool caller_stopped() const { return caller_stopped_; }
    const std::string& error() const { return error_; }

private:
    bool line(const std::string& l) {
        if (l.rfind("data:", 0) != 0) return true;
        std::string payload = l.substr(5);
        if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
        if (payload == "[DONE]") return true;
        json chunk;
        try {
            chunk = json::parse(payload);
        } catch (const json::exception&) {
            error_ = "a stream event that is not JSON: " + payload.substr(0, 200);
            return false;
        }
        if (chunk.contains("error")) {
            error_ = server_message(payload);
            return false;
        }
        if (chunk.contains("usage") && chunk["usage"].is_object()) {
            reply_.prompt_tokens = chunk["usage"].value("prompt_tokens", int64_t{0});
            reply_.completion_tokens = chunk["usage"].value("completion_tokens", int64_t{0});
        }
        if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty())
            return true;
        const json& choice = chunk["choices"][0];
        if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
            reply_.finish_reason = choice["finish_reason"].get<std::string>();
        if (!choice.contains("delta") || !choice["delta"].contains("content") ||
            !choice["delta"]["content"].is_string())
            return true;
        const std::string piece = choice["delta"]["content"].get<std::string>();
        if (piece.empty()) return true;
        reply_.text += piece;
        if (on_text_(piece)) return true;
        caller_stopped_ = true;
        return false;
    }

    ChatReply& reply_;
    const std::function<bool(std::string_view)>& on_text_;
    std::string pending_, error_;
    bool caller_stopped_ = false;
};

// A whole (not streamed) chat completion's text, finish reason and usage into `reply`.
void parse_completion(const std::string& body, const std::string& where, ChatReply& reply) {
    try {
        const json j = json::parse(body);
        const json& choice = j.at("choices").at(0);
        const json& content = choice.at("message").at("content");
        reply.text = content.is_string() ? content.get<std::string>() : "";
        reply.finish_reason = choice.value("finish_reason", "");
        if (j.contains("usage") && j["usage"].is_object()) {
            reply.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{0});
            reply.completion_tokens = j["usage"].value("completion_tokens", int64_t{0});
        }
    } catch (const json::exception& e) {
        throw Error(ErrorKind::kModelOutput, where + ": not a chat completion: " + e.what());
    }
}

}  // namespace

ChatReply RemoteClient::chat(const ChatCall& call) {
    const std::string body = chat_call_body(call, options_.model_name).dump();
    const std::string where = "remote model " + url("/chat/completions");
    ChatReply reply;
    const auto t0 = Clock::now();
    acquire();
    struct Release {
        RemoteClient* self;
        ~Release() { self->release(); }
    } release_on_exit{this};

    std::string last;
    for (int attempt = 0; attempt <= options_.max_retries; ++attempt) {
        if (attempt > 0) {
            std::this_thread::sleep_for(std::chrono::duration<double>(std::min(
                options_.backoff_max_seconds, options_.backoff_seconds * std::pow(2.0, attempt - 1))));
        }
        reply = ChatReply{};
        reply.attempts = attempt + 1;
        EventStream stream(reply, call.on_text);
        std::function<bool(std::string_view)> on_data;
        if (call.on_text) on_data = [&](std::string_view data) { return stream.feed(data); };
        const Response r = perform("/chat/completions", &body, on_data);
        if (stream.caller_stopped()) {
            reply.cancelled = true;
            reply.finish_reason.clear();
            break;
        }
        if (!stream.error().empty()) throw Error(ErrorKind::kModelOutput, where + ": " + stream.error());
        if (r.code != CURLE_OK) {
            last = r.curl_error;
            if (r.code == CURLE_OPERATION_TIMEDOUT) {
                throw Error(ErrorKind::kTimeout, where + ": no complete reply within " +
                                                     std::to_string(options_.request_timeout_seconds) + " s");
            }
            if (retryable_curl(r.code) && !r.delivered) continue;
            throw Error(ErrorKind::kUnavailable,
                        where + ": " + r.curl_error + (r.delivered ? " (in the middle of the reply)" : ""));
        }
        if (r.status == 429 || r.status >= 500) {
            last = "HTTP " + std::to_string(r.status) + ": " + server_message(r.body);
            continue;
        }
        if (r.status != 200) {
            throw Error(ErrorKind::kInvalidArgument,
                        where + ": HTTP " + std::to_string(r.status) + ": " + server_message(r.body));
        }
        if (call.on_text) {
            stream.finish();
        } else {
            parse_completion(r.body, where, reply);
        }
        reply.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        return reply;
    }
    if (reply.cancelled) {
        reply.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        return reply;
    }
    throw Error(ErrorKind::kUnavailable, "remote model server " + base_ + " is not reachable or failing (" +
                                             last + ") after " + std::to_string(options_.max_retries + 1) +
                                             " attempts");
}

}  // namespace surf::agent
