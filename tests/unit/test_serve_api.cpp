// The OpenAI-compatible API of `surf serve`, in process: the HTTP server and the service over the CPU
// engine of the tiny fixture model on 127.0.0.1, driven with libcurl. Checks the response shapes, usage
// counts (against the tokenizer and the image tiling), streaming == non-streaming text, json_schema,
// image data URLs, every error path with OpenAI-style JSON and its status code, /metrics, and that a
// client disconnecting mid-stream cancels its generation and frees its session.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

// The server sources live in the `surf` executable; the test compiles them in.
#include "agent/remote/remote_client.h"
#include "apps/serve/http_server.h"
#include "apps/serve/metrics.h"
#include "apps/serve/openai_api.h"
#include "apps/serve/prefix_cache.h"
#include "model/vision/image_opencv.h"
#include "tests/http_client.h"

using namespace surf;
using json = nlohmann::json;

namespace {

const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

struct Reply : surf::test::HttpReply {
    json j() const { return json::parse(body); }
};

Reply http(int port, const std::string& method, const std::string& path, const std::string& body = "",
           const std::vector<std::string>& headers = {}) {
    return {
        surf::test::http_request(method, "http://127.0.0.1:" + std::to_string(port) + path, body, headers)};
}

// The CPU engine, counting the tokens its generate calls prefill (the CPU engine keeps no EngineStats).
class CountingEngine : public model::Engine {
public:
    explicit CountingEngine(std::unique_ptr<model::Engine> inner) : inner_(std::move(inner)) {}
    const model::ModelConfig& config() const override { return inner_->config(); }
    const model::Tokenizer& tokenizer() const override { return inner_->tokenizer(); }
    std::shared_ptr<const model::TokenIndex> token_index() const override { return inner_->token_index(); }
    std::string backend_name() const override { return inner_->backend_name(); }
    model::SessionId open_session() override { return inner_->open_session(); }
    model::SessionId fork_session(model::SessionId from) override { return inner_->fork_session(from); }
    void close_session(model::SessionId id) override { inner_->close_session(id); }
    model::GenerateResult generate(model::SessionId id, const std::vector<model::InputPart>& input,
                                   const model::GenerateOptions& options) override {
        model::GenerateResult r = inner_->generate(id, input, options);
        prefilled += r.prefill_tokens;
        return r;
    }
    std::atomic<int64_t> prefilled{0};

private:
    std::unique_ptr<model::Engine> inner_;
};

struct Fixture {
    std::shared_ptr<CountingEngine> counting{
        std::make_shared<CountingEngine>(model::open_cpu_engine(kModel))};
    std::shared_ptr<model::Engine> engine{counting};
    std::shared_ptr<serve::OpenAiService> service;
    std::unique_ptr<serve::HttpServer> server;
    int port = 0;

    explicit Fixture(serve::ServiceOptions so = {}, serve::HttpServerOptions ho = {}) {
        if (so.model_name.empty()) so.model_name = "tiny";
        service = std::make_shared<serve::OpenAiService>(engine, so);
        ho.port = 0;
        auto svc = service;
        server = std::make_unique<serve::HttpServer>(
            ho, [svc](const serve::HttpRequest& r, serve::HttpResponseWriter& w) { svc->handle(r, w); });
        service->set_queue_probe([s = server.get()] { return s->queue_depth(); });
        server->start();
        port = server->port();
    }
    Reply chat(const json& body, const std::vector<std::string>& headers = {}) {
        return http(port, "POST", "/v1/chat/completions", body.dump(), headers);
    }
};

json user(const std::string& text, int max_tokens = 8) {
    return {{"model", "tiny"},
            {"messages", json::array({{{"role", "user"}, {"content", text}}})},
            {"max_tokens", max_tokens}};
}

// A raw connection to the server (for clients that stall or hang up), and what it reads back until EOF.
int connect_local(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    return fd;
}

void send_all(int fd, const std::string& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

std::string post_request(const std::string& body) {
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
           "application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string read_to_end(int fd) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
}

template <typename F>
bool eventually(F&& condition, int tries = 500) {
    for (int i = 0; i < tries; ++i) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

void check_error(const Reply& r, long status, const std::string& code = "") {
    CHECK(r.status == status);
    INFO(r.body);
    const json j = r.j();
    REQUIRE(j.contains("error"));
    CHECK(j["error"]["message"].is_string());
    CHECK(!j["error"]["message"].get<std::string>().empty());
    CHECK(j["error"].contains("type"));
    CHECK(j["error"].contains("param"));
    CHECK(j["error"].contains("code"));
    if (!code.empty()) CHECK(j["error"]["code"] == code);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string b64(const std::string& bytes) {
    static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                           uint8_t(bytes[i + 2]);
        out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], k[v & 63]};
    }
    if (i + 1 == bytes.size()) {
        const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        out += {k[v >> 18], k[(v >> 12) & 63], '=', '='};
    } else if (i + 2 == bytes.size()) {
        const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8);
        out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], '='};
    }
    return out;
}

// Concatenated delta contents of an SSE body; `finish` gets the last finish_reason, `usage` the usage chunk.
std::string sse_text(const std::string& body, std::string* finish, json* usage, bool* done) {
    std::string text;
    std::istringstream in(body);
    std::string line;
    *done = false;
    while (std::getline(in, line)) {
        if (line.rfind("data: ", 0) != 0) continue;
        const std::string payload = line.substr(6);
        if (payload == "[DONE]") {
            *done = true;
            continue;
        }
        const json c = json::parse(payload);
        if (c.contains("usage")) *usage = c["usage"];
        if (c["choices"].empty()) continue;
        const json& ch = c["choices"][0];
        CHECK(c["object"] == "chat.completion.chunk");
        if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
        if (ch["finish_reason"].is_string()) *finish = ch["finish_reason"];
    }
    return text;
}

}  // namespace

TEST_CASE("serve: health, models, metrics, routes") {
    Fixture f;
    Reply r = http(f.port, "GET", "/health");
    CHECK(r.status == 200);
    CHECK(r.j()["status"] == "ok");
    r = http(f.port, "GET", "/v1/models");
    CHECK(r.status == 200);
    CHECK(r.j()["object"] == "list");
    CHECK(r.j()["data"][0]["id"] == "tiny");
    check_error(http(f.port, "GET", "/v2/nothing"), 404, "not_found");
    check_error(http(f.port, "GET", "/v1/chat/completions"), 405, "method_not_allowed");
    check_error(http(f.port, "POST", "/v1/models", "{}"), 405, "method_not_allowed");
    r = http(f.port, "GET", "/metrics");
    CHECK(r.status == 200);
    CHECK(r.content_type.find("text/plain") == 0);
    for (const char* name : {"surf_queue_depth", "surf_requests_running", "surf_sessions_open",
                             "surf_generation_tokens_per_second", "surf_kv_occupancy", "surf_state_occupancy",
                             "surf_generation_tokens_total", "surf_http_responses_total{code=\"404\"} 1"}) {
        CHECK_MESSAGE(r.body.find(name) != std::string::npos, name);
    }
}

TEST_CASE("serve: GET /v1/models/{id} answers the served model and 404s any other") {
    Fixture f;
    Reply r = http(f.port, "GET", "/v1/models/tiny");
    CHECK(r.status == 200);
    CHECK(r.j()["id"] == "tiny");
    CHECK(r.j()["object"] == "model");
    check_error(http(f.port, "GET", "/v1/models/other"), 404, "model_not_found");
    check_error(http(f.port, "POST", "/v1/models/tiny", "{}"), 405, "method_not_allowed");
}

TEST_CASE("serve: response ids are unique within a server and across servers") {
    std::set<std::string> ids;
    for (int server = 0; server < 2; ++server) {
        Fixture f;
        for (int i = 0; i < 3; ++i) {
            const Reply r = f.chat(user("hello", 2));
            REQUIRE(r.status == 200);
            const std::string id = r.j()["id"];
            CHECK(id.rfind("chatcmpl-", 0) == 0);
            CHECK(id.size() == 33);
            CHECK(ids.insert(id).second);
        }
    }
}

TEST_CASE("serve: latency histograms in /metrics and one access-log line per request") {
    std::vector<std::string> lines;
    std::mutex m;
    serve::ServiceOptions so;
    so.access_log = [&](const std::string& line) {
        std::lock_guard<std::mutex> lock(m);
        lines.push_back(line);
    };
    Fixture f(so);
    json body = user("Find the price of the blue kettle", 4);
    body["ignore_eos"] = true;
    const Reply c = f.chat(body);
    REQUIRE(c.status == 200);
    REQUIRE(http(f.port, "GET", "/v1/models/nope").status == 404);
    // A request is observed just after its response is sent: poll until both are in (/metrics is never
    // counted).
    Reply r = http(f.port, "GET", "/metrics");
    for (int i = 0; i < 500 && r.body.find("surf_request_duration_seconds_count 2") == std::string::npos;
         ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        r = http(f.port, "GET", "/metrics");
    }
    for (const char* name :
         {"# TYPE surf_request_duration_seconds histogram",
          "surf_request_duration_seconds_bucket{le=\"+Inf\"} 2", "surf_request_duration_seconds_count 2",
          "surf_request_queue_seconds_count 2", "# TYPE surf_time_to_first_token_seconds histogram"}) {
        CHECK_MESSAGE(r.body.find(name) != std::string::npos, name);
    }
    // The first token is the first text the engine streams: a reply with text has one.
    const std::string content = c.j()["choices"][0]["message"]["content"];
    const std::string ttft = content.empty() ? "surf_time_to_first_token_seconds_count 0"
                                             : "surf_time_to_first_token_seconds_count 1";
    CHECK(r.body.find(ttft) != std::string::npos);
    // A line is written after its response is sent: wait for all three (the chat, the 404, /metrics itself),
    // which may land in any order.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(m);
            if (lines.size() >= 3 || std::chrono::steady_clock::now() > deadline) break;  // the polls log too
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard<std::mutex> lock(m);
    REQUIRE(lines.size() >= 3);  // the chat, the 404, and each /metrics poll
    const auto line_with = [&](const std::string& part) {
        for (const std::string& l : lines)
            if (l.find(part) != std::string::npos) return l;
        return std::string();
    };
    // "PEER METHOD PATH STATUS PROMPT_TOKENS COMPLETION_TOKENS SECONDS"
    std::istringstream chat(line_with(" POST /v1/chat/completions "));
    std::string peer, method, path;
    int status = 0;
    int64_t prompt = 0, completion = 0;
    double seconds = -1;
    chat >> peer >> method >> path >> status >> prompt >> completion >> seconds;
    CHECK(peer.rfind("127.0.0.1:", 0) == 0);
    CHECK(method == "POST");
    CHECK(path == "/v1/chat/completions");
    CHECK(status == 200);
    CHECK(prompt > 0);
    CHECK(completion == 4);
    CHECK(seconds >= 0);
    CHECK(!line_with(" GET /v1/models/nope 404 0 0 ").empty());
    CHECK(!line_with(" GET /metrics 200 0 0 ").empty());
}

TEST_CASE("serve: chat completion, usage counts, streaming equals non-streaming") {
    Fixture f;
    json body = user("Find the price of the blue kettle", 12);
    body["temperature"] = 0;
    const Reply r = f.chat(body);
    REQUIRE(r.status == 200);
    const json j = r.j();
    CHECK(j["object"] == "chat.completion");
    CHECK(j["model"] == "tiny");
    CHECK(j["choices"][0]["message"]["role"] == "assistant");
    const std::string text = j["choices"][0]["message"]["content"];
    const std::string finish = j["choices"][0]["finish_reason"];
    CHECK((finish == "stop" || finish == "length"));

    // prompt_tokens = the chat template's render, tokenized; completion_tokens ≤ max_tokens.
    const model::ChatTemplate t = model::ChatTemplate::from_model_dir(kModel);
    const std::string prompt =
        t.render(std::vector<model::ChatMessage>{{"user", std::string("Find the price of the blue kettle")}});
    CHECK(j["usage"]["prompt_tokens"] == static_cast<int64_t>(f.engine->tokenizer().encode(prompt).size()));
    CHECK(j["usage"]["completion_tokens"].get<int>() <= 12);
    CHECK(j["usage"]["completion_tokens"].get<int>() >= 1);
    CHECK(j["usage"]["total_tokens"] ==
          j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());

    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const Reply s = f.chat(body);
    REQUIRE(s.status == 200);
    CHECK(s.content_type.find("text/event-stream") == 0);
    std::string sfinish;
    json usage;
    bool done = false;
    CHECK(sse_text(s.body, &sfinish, &usage, &done) == text);
    CHECK(sfinish == finish);
    CHECK(done);
    CHECK(usage == j["usage"]);

    // max_tokens cuts: finish_reason length, exactly max_tokens generated (ignore_eos as in vLLM).
    json cut = user("hello", 3);
    cut["ignore_eos"] = true;
    const json c = f.chat(cut).j();
    CHECK(c["choices"][0]["finish_reason"] == "length");
    CHECK(c["usage"]["completion_tokens"] == 3);
}

TEST_CASE("serve: response_format json_schema constrains the output") {
    Fixture f;
    const json schema = {
        {"type", "object"},
        {"properties",
         {{"x", {{"type", "integer"}, {"minimum", 0}, {"maximum", 1000}}}, {"ok", {{"type", "boolean"}}}}},
        {"required", {"x", "ok"}}};
    for (uint64_t seed : {1, 2, 3}) {
        json body = user("Where is the button?", 40);
        body["temperature"] = 1.0;
        body["seed"] = seed;
        body["response_format"] = {{"type", "json_schema"},
                                   {"json_schema", {{"name", "point"}, {"schema", schema}}}};
        const Reply r = f.chat(body);
        REQUIRE(r.status == 200);
        const json out = json::parse(r.j()["choices"][0]["message"]["content"].get<std::string>());
        CHECK(out["x"].is_number_integer());
        CHECK(out["x"].get<int>() >= 0);
        CHECK(out["x"].get<int>() <= 1000);
        CHECK(out["ok"].is_boolean());
    }
    json bad_schema = user("hi");
    bad_schema["response_format"] = {{"type", "json_schema"},
                                     {"json_schema", {{"name", "x"}, {"schema", {{"type", "frobnicate"}}}}}};
    check_error(f.chat(bad_schema), 400, "invalid_schema");
    json obj = user("hi");
    obj["response_format"] = {{"type", "json_object"}};
    check_error(f.chat(obj), 400);
}

TEST_CASE("serve: image_url data URLs count their image tokens") {
    Fixture f;
    const std::string png = read_file(kModel + "/image.png");
    REQUIRE(!png.empty());
    const json parts =
        json::array({{{"type", "text"}, {"text", "What is shown?"}},
                     {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + b64(png)}}}}});
    json body = {{"model", "tiny"},
                 {"messages", json::array({{{"role", "user"}, {"content", parts}}})},
                 {"max_tokens", 4}};
    const Reply r = f.chat(body);
    REQUIRE(r.status == 200);
    const int with_image = r.j()["usage"]["prompt_tokens"];
    const int text_only = f.chat(user("What is shown?", 4)).j()["usage"]["prompt_tokens"];
    // The image adds <img> + tokens per tile × tiles + </img> (and its "\n"): well over the text alone.
    CHECK(with_image > text_only + 16);

    json broken = body;
    broken["messages"][0]["content"][1]["image_url"]["url"] = "data:image/png;base64,AAAA";
    check_error(f.chat(broken), 400, "invalid_image");
    broken["messages"][0]["content"][1]["image_url"]["url"] = "https://example.com/cat.png";
    check_error(f.chat(broken), 400, "invalid_image_url");
    broken["messages"][0]["content"][1]["image_url"]["url"] = "data:image/png;base64,!!!";
    check_error(f.chat(broken), 400, "invalid_image_url");
    broken["messages"][0]["content"][1] = {{"type", "input_audio"}};
    check_error(f.chat(broken), 400);
}

TEST_CASE("serve: conversation reuse prefills only what a kept session lacks, with the same reply") {
    serve::ServiceOptions cached_opts;
    cached_opts.prefix_cache_sessions = 4;
    Fixture cached(cached_opts), plain;
    const std::string png = read_file(kModel + "/image.png");
    REQUIRE(!png.empty());
    // An agent's turns: a screenshot and a question, the reply, then the next question with the conversation
    // re-sent.
    json messages = json::array(
        {{{"role", "system"}, {"content", "You are a careful web agent."}},
         {{"role", "user"},
          {"content", json::array({{{"type", "text"}, {"text", "Here is the page."}},
                                   {{"type", "image_url"},
                                    {"image_url", {{"url", "data:image/png;base64," + b64(png)}}}}})}}});
    auto turn = [&](Fixture& f) {
        json body = {{"model", "tiny"}, {"messages", messages}, {"max_tokens", 6}, {"temperature", 0}};
        const Reply r = f.chat(body);
        REQUIRE(r.status == 200);
        return r.j();
    };
    const int64_t before1 = cached.counting->prefilled;
    const json first = turn(cached), first_plain = turn(plain);
    CHECK(first["choices"][0]["message"]["content"] == first_plain["choices"][0]["message"]["content"]);
    CHECK(first["usage"]["prompt_tokens"] == first_plain["usage"]["prompt_tokens"]);
    CHECK(first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    CHECK(cached.counting->prefilled - before1 == first["usage"]["prompt_tokens"].get<int64_t>());

    messages.push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "Now click the search box."}});
    const int64_t before2 = cached.counting->prefilled;
    const json second = turn(cached), second_plain = turn(plain);
    const int64_t prompt = second["usage"]["prompt_tokens"],
                  reused = second["usage"]["prompt_tokens_details"]["cached_tokens"];
    CHECK(prompt == second_plain["usage"]["prompt_tokens"].get<int64_t>());
    // The first prompt up to its generation prompt (image included) came from the kept session.
    CHECK(reused > 16);
    CHECK(reused < first["usage"]["prompt_tokens"].get<int64_t>());
    CHECK(cached.counting->prefilled - before2 == prompt - reused);
    CHECK(second["choices"][0]["message"]["content"] == second_plain["choices"][0]["message"]["content"]);
    CHECK(cached.service->open_sessions() == 0);  // request sessions closed; kept ones are the cache's

    const std::string metrics = http(cached.port, "GET", "/metrics").body;
    CHECK(metrics.find("surf_prefix_cache_hits_total 1") != std::string::npos);
    CHECK(metrics.find("surf_prefix_cache_sessions 2") != std::string::npos);
    // A different conversation does not match, and the cache keeps at most 4 sessions.
    for (int i = 0; i < 5; ++i) {
        const Reply r = cached.chat(user("unrelated question " + std::to_string(i), 2));
        REQUIRE(r.status == 200);
        CHECK(r.j()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    }
    CHECK(http(cached.port, "GET", "/metrics").body.find("surf_prefix_cache_sessions 4") !=
          std::string::npos);
}

TEST_CASE("serve: malformed bodies, oversized inputs, unknown models and keys get OpenAI-style errors") {
    serve::ServiceOptions so;
    so.api_key = "sekret";
    so.max_tokens_limit = 64;
    so.max_prompt_tokens = 200;
    so.max_images = 1;
    serve::HttpServerOptions ho;
    ho.max_body_bytes = 4096;
    Fixture f(so, ho);
    const std::vector<std::string> key = {"Authorization: Bearer sekret"};

    check_error(f.chat(user("hi")), 401, "invalid_api_key");
    check_error(f.chat(user("hi"), {"Authorization: Bearer wrong"}), 401, "invalid_api_key");
    check_error(f.chat(user("hi"), {"Authorization: Basic c2VrcmV0"}), 401, "invalid_api_key");
    check_error(http(f.port, "GET", "/v1/models"), 401, "invalid_api_key");
    CHECK(http(f.port, "GET", "/health").status == 200);  // liveness probes carry no key
    CHECK(http(f.port, "GET", "/v1/models", "", key).status == 200);
    CHECK(f.chat(user("hi"), key).status == 200);

    check_error(http(f.port, "POST", "/v1/chat/completions", "{\"model\": \"tiny\", ", key), 400);
    check_error(http(f.port, "POST", "/v1/chat/completions", "[1, 2]", key), 400);
    check_error(http(f.port, "POST", "/v1/chat/completions", "", key), 400);
    check_error(f.chat({{"model", "tiny"}}, key), 400);
    check_error(f.chat({{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}}, key), 400);
    check_error(
        f.chat({{"model", "tiny"}, {"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}, key),
        400);
    check_error(
        f.chat({{"model", "tiny"}, {"messages", json::array({{{"role", "user"}, {"content", 5}}})}}, key),
        400);
    json b = user("hi");
    b["max_tokens"] = 65;
    check_error(f.chat(b, key), 400);
    b["max_tokens"] = "ten";
    check_error(f.chat(b, key), 400);
    b = user("hi");
    b["temperature"] = 7;
    check_error(f.chat(b, key), 400);
    b = user("hi");
    b["stop"] = "\n";
    check_error(f.chat(b, key), 400, "unsupported_parameter");
    b = user("hi");
    b["n"] = 2;
    check_error(f.chat(b, key), 400);
    b = user("hi");
    b["model"] = "gpt-4o";
    check_error(f.chat(b, key), 404, "model_not_found");

    // Oversized: the body (413, from the HTTP layer), the prompt (context_length_exceeded).
    check_error(f.chat(user(std::string(5000, 'a')), key), 413);
    std::string words;
    for (int i = 0; i < 300; ++i) words += "kettle ";
    check_error(f.chat(user(words.substr(0, 2000)), key), 400, "context_length_exceeded");
    // The server is still fine.
    CHECK(f.chat(user("hi"), key).status == 200);
    CHECK(f.service->open_sessions() == 0);
}

// A body nested tens of thousands of levels deep (60 KB) gets a 400 and leaves the server serving: walked
// recursively, such a body would overflow the stack of the thread handling it.
std::string nested(const std::string& key, int depth, bool objects) {
    std::string open, close;
    for (int i = 0; i < depth; ++i) {
        open += objects ? "{\"a\":" : "[";
        close += objects ? "}" : "]";
    }
    return R"({"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], ")" + key +
           "\": " + open + "1" + close + "}";
}

TEST_CASE("serve: bad UTF-8, unrepresentable numbers and ill-typed option fields get a 400, not a 500") {
    Fixture f;
    const std::string head = R"({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], )";
    const std::vector<std::string> bodies = {
        R"({"model": "tiny", "messages": [{"role": "user", "content": "h)"
        "\xff\xfe"
        R"(i"}]})",  // invalid UTF-8
        head + R"("max_tokens": )" + std::string(400, '9') + "}",
        head + R"("temperature": 1e999})",
        head + R"("stream": true, "stream_options": {"include_usage": "yes"}})",
        head + R"("response_format": {"type": 5}})",
    };
    for (const std::string& body : bodies) {
        INFO(body.substr(0, 120));
        const Reply r = http(f.port, "POST", "/v1/chat/completions", body);
        CHECK(r.status == 400);
        CHECK(r.body.find("\"error\"") != std::string::npos);
    }
    CHECK(http(f.port, "GET", "/health").status == 200);
}

TEST_CASE("serve: decoded pixels are limited per image and per request, from the header, before decoding") {
    const std::string png = read_file(kModel + "/image.png");
    REQUIRE(!png.empty());
    const model::Image probe = model::decode_image(reinterpret_cast<const uint8_t*>(png.data()), png.size());
    const int64_t one = int64_t{probe.width} * probe.height;
    serve::ServiceOptions so;
    so.max_image_pixels = one;        // one such image fits ...
    so.max_request_pixels = 2 * one;  // ... two per request, not three
    Fixture f(so);
    const auto body = [&](int n_images) {
        json parts = json::array({{{"type", "text"}, {"text", "What is shown?"}}});
        for (int i = 0; i < n_images; ++i)
            parts.push_back(
                {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + b64(png)}}}});
        return json{{"model", "tiny"},
                    {"messages", json::array({{{"role", "user"}, {"content", parts}}})},
                    {"max_tokens", 2}};
    };
    CHECK(f.chat(body(2)).status == 200);
    const Reply three = f.chat(body(3));
    CHECK(three.status == 400);
    CHECK(three.body.find("over the limit of") != std::string::npos);

    serve::ServiceOptions small;
    small.max_image_pixels = one - 1;
    Fixture g(small);
    const Reply r = g.chat(body(1));
    CHECK(r.status == 400);
    CHECK(r.body.find("pixels, over the limit of " + std::to_string(one - 1)) != std::string::npos);
}

TEST_CASE("serve: json_nesting_depth counts brackets outside strings only") {
    CHECK(serve::json_nesting_depth("1") == 0);
    CHECK(serve::json_nesting_depth(R"({"a": [1, {"b": []}]})") == 4);
    CHECK(serve::json_nesting_depth(R"({"a": "[[[{{{"})") == 1);
    CHECK(serve::json_nesting_depth(R"({"a": "\"[[[", "b": [[]]})") == 3);
    CHECK(serve::json_nesting_depth(nested("stop", 100, true)) == 101);
}

TEST_CASE("serve: deeply nested JSON anywhere in the body is a 400, never a crash") {
    Fixture f;
    for (const char* key : {"chat_template_kwargs", "stop", "tools", "stream_options", "response_format"}) {
        for (bool objects : {true, false}) {
            INFO(key << (objects ? " objects" : " arrays"));
            check_error(http(f.port, "POST", "/v1/chat/completions", nested(key, 30000, objects)), 400);
        }
    }
    // Nesting at the limit's scale that real requests use still works.
    json b = user("hi");
    b["chat_template_kwargs"] = {{"a", {{"b", {{"c", 1}}}}}};
    CHECK(f.chat(b).status == 200);
    CHECK(http(f.port, "GET", "/health").status == 200);
}

TEST_CASE(
    "serve: --max-prompt-tokens counts the tokens the engine is fed (the template's special tokens one "
    "each)") {
    const json body = user("how many tokens is this prompt?", 2);
    int64_t fed = 0;
    {
        Fixture f;
        const Reply r = f.chat(body);
        REQUIRE(r.status == 200);
        fed = r.j()["usage"]["prompt_tokens"].get<int64_t>();
        REQUIRE(fed > 1);
    }
    serve::ServiceOptions so;
    so.max_prompt_tokens = fed;
    {
        Fixture f(so);
        CHECK(f.chat(body).status == 200);
    }
    so.max_prompt_tokens = fed - 1;
    {
        Fixture f(so);
        check_error(f.chat(body), 400, "context_length_exceeded");
    }
}

TEST_CASE("serve: a client that disconnects mid-stream cancels its generation and frees its session") {
    Fixture f;
    agent::RemoteClientOptions o;
    o.base_url = "http://127.0.0.1:" + std::to_string(f.port) + "/v1";
    o.model_name = "tiny";
    agent::RemoteClient client(o);
    agent::ChatCall call;
    call.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "write a long story"}}});
    call.max_tokens = 4000;
    call.ignore_eos = true;
    int pieces = 0;
    call.on_text = [&](std::string_view) { return ++pieces < 3; };  // hang up after 3 pieces
    const auto t0 = std::chrono::steady_clock::now();
    const agent::ChatReply reply = client.chat(call);
    CHECK(reply.cancelled);
    // The server notices at its next write: the session closes long before 4000 tokens.
    CHECK(eventually([&] { return f.service->open_sessions() == 0 && f.service->running() == 0; }));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    const Reply m = http(f.port, "GET", "/metrics");
    CHECK(m.body.find("surf_requests_cancelled_total 1") != std::string::npos);
    CHECK(m.body.find("surf_sessions_open 0") != std::string::npos);
    // And it keeps serving.
    CHECK(f.chat(user("hi")).status == 200);
}

TEST_CASE("serve: a client that hangs up on a non-streamed request cancels its generation") {
    Fixture f;
    const std::string body =
        json{{"model", "tiny"},
             {"max_tokens", 4000},
             {"ignore_eos", true},
             {"messages", json::array({{{"role", "user"}, {"content", "write a long story"}}})}}
            .dump();
    const int fd = connect_local(f.port);
    send_all(fd, post_request(body));
    REQUIRE(eventually([&] { return f.service->running() == 1; }));
    const auto t0 = std::chrono::steady_clock::now();
    ::close(fd);
    CHECK(eventually([&] { return f.service->open_sessions() == 0 && f.service->running() == 0; }));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK(http(f.port, "GET", "/metrics").body.find("surf_requests_cancelled_total 1") != std::string::npos);
    CHECK(f.chat(user("hi")).status == 200);
}

TEST_CASE("serve: a client that hangs up while its long prompt is fed stops the prompt there (CPU backend)") {
    Fixture f;
    std::string story;
    for (int i = 0; i < 2000; ++i) story += "the long story goes on ";
    const std::string body = json{{"model", "tiny"},
                                  {"max_tokens", 1},
                                  {"messages", json::array({{{"role", "user"}, {"content", story}}})}}
                                 .dump();
    // The whole prompt, for scale.
    const auto t0 = std::chrono::steady_clock::now();
    const Reply whole = http(f.port, "POST", "/v1/chat/completions", body);
    const auto full = std::chrono::steady_clock::now() - t0;
    REQUIRE(whole.status == 200);
    REQUIRE(whole.j()["usage"]["prompt_tokens"].get<int64_t>() > 8000);

    const int fd = connect_local(f.port);
    send_all(fd, post_request(body));
    REQUIRE(eventually([&] { return f.service->running() == 1; }));
    const auto t1 = std::chrono::steady_clock::now();
    ::close(fd);
    CHECK(eventually([&] { return f.service->open_sessions() == 0 && f.service->running() == 0; }));
    // Polled between chunks of 2,048 tokens: it ends within a chunk or two, not after the whole prompt.
    CHECK(std::chrono::steady_clock::now() - t1 < full / 2);
    CHECK(http(f.port, "GET", "/metrics").body.find("surf_requests_cancelled_total 1") != std::string::npos);
    CHECK(f.chat(user("hi")).status == 200);
}

TEST_CASE(
    "serve: slow clients hold no worker: /health and requests are answered while 100 connections stall") {
    serve::HttpServerOptions ho;
    ho.threads = 4;
    ho.read_timeout_ms = 1500;
    Fixture f({}, ho);
    std::vector<int> stalled;
    for (int i = 0; i < 100; ++i) {
        stalled.push_back(connect_local(f.port));
        send_all(stalled.back(), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");  // and nothing more
    }
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(http(f.port, "GET", "/health").status == 200);
    CHECK(f.chat(user("hi")).status == 200);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1000));
    // At the read deadline each stalled client gets 408 and its connection is closed.
    CHECK(read_to_end(stalled[0]).rfind("HTTP/1.1 408", 0) == 0);
    for (int fd : stalled) ::close(fd);
}

TEST_CASE("serve: a full queue is answered 503 with Retry-After, never a reset") {
    serve::HttpServerOptions ho;
    ho.threads = 1;
    ho.max_queue = 1;
    Fixture f({}, ho);
    const std::string long_body =
        json{{"model", "tiny"},
             {"max_tokens", 4000},
             {"ignore_eos", true},
             {"messages", json::array({{{"role", "user"}, {"content", "write a long story"}}})}}
            .dump();
    const int busy = connect_local(f.port);  // holds the one worker
    send_all(busy, post_request(long_body));
    REQUIRE(eventually([&] { return f.service->running() == 1; }));
    const int queued = connect_local(f.port);  // waits in the queue
    send_all(queued, post_request(user("hi").dump()));
    REQUIRE(eventually([&] { return f.server->queue_depth() == 1; }));
    const int refused = connect_local(f.port);
    send_all(refused, post_request(user("hi").dump()));
    const std::string answer = read_to_end(refused);
    CHECK(answer.rfind("HTTP/1.1 503", 0) == 0);
    CHECK(answer.find("Retry-After: 1") != std::string::npos);
    CHECK(http(f.port, "GET", "/health").status == 200);  // answered by the reading thread
    ::close(busy);  // its generation is cancelled, and the queued request runs
    CHECK(read_to_end(queued).rfind("HTTP/1.1 200", 0) == 0);
    ::close(queued);
    ::close(refused);
}

TEST_CASE("serve: helpers (base64, data URLs)") {
    CHECK(serve::base64_decode("aGVsbG8=") == std::optional<std::string>("hello"));
    CHECK(serve::base64_decode("aGVsbG8") == std::optional<std::string>("hello"));
    CHECK(serve::base64_decode("aGVsbA==") == std::optional<std::string>("hell"));
    CHECK(!serve::base64_decode("a"));
    CHECK(!serve::base64_decode("aGV*bG8="));
    CHECK(!serve::base64_decode("aG===="));
    CHECK_THROWS_AS(serve::decode_data_url("data:text/plain;base64,aGk=", 100, 1 << 20, "p"),
                    serve::ApiError);
    CHECK_THROWS_AS(serve::decode_data_url("data:image/png,raw", 100, 1 << 20, "p"), serve::ApiError);
    try {
        serve::decode_data_url("data:image/png;base64," + std::string(400, 'A'), 100, 1 << 20, "p");
        FAIL("expected a 413");
    } catch (const serve::ApiError& e) {
        CHECK(e.status == 413);
    }
    // WebP, as OpenAI's API takes it (decoded through OpenCV where the build has it).
    const std::string webp = read_file(std::string(SURF_FIXTURES_DIR) + "/image/webp/lossy_rgb.webp");
    if (surf::model::opencv_decoding_available()) {
        const auto image =
            serve::decode_data_url("data:image/webp;base64," + b64(webp), 1 << 20, 1 << 20, "p");
        CHECK(image->width == 300);
        CHECK(image->height == 200);
    }
    // GIF, as OpenAI's API takes it (the first frame; model/vision/image_gif.cpp).
    const std::string gif = read_file(std::string(SURF_FIXTURES_DIR) + "/image/gif/noise_interlaced.gif");
    const auto frame = serve::decode_data_url("data:image/gif;base64," + b64(gif), 1 << 20, 1 << 20, "p");
    CHECK(frame->width == 160);
    CHECK(frame->height == 120);
}
