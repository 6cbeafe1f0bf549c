// The remote chat model (agent/remote/) against an in-process `surf serve` (tiny fixture model, CPU) and
// against scripted HTTP handlers: what a chat posts (messages, data URLs, schema, thinking switch, page
// markup neutralised), an agent chat on surf serve (same text as the server's own greedy output), 16
// concurrent streaming json_schema chats, retries with backoff on 503, the concurrency limit, a clear error
// naming the URL when the server is down, and 4xx answers surface the server's message.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include <mutex>

#include "agent/remote/remote_chat.h"
#include "apps/serve/http_server.h"
#include "apps/serve/metrics.h"
#include "apps/serve/openai_api.h"
#include "apps/serve/prefix_cache.h"
#include "base/error.h"

using namespace surf;
using json = nlohmann::ordered_json;

namespace {

const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

struct Server {
    std::shared_ptr<model::Engine> engine;
    std::shared_ptr<serve::OpenAiService> service;
    std::unique_ptr<serve::HttpServer> http;
    std::string url;

    explicit Server(serve::HttpHandler handler = nullptr) {
        if (!handler) {
            engine = std::shared_ptr<model::Engine>(model::open_cpu_engine(kModel));
            serve::ServiceOptions so;
            so.model_name = "tiny";
            service = std::make_shared<serve::OpenAiService>(engine, so);
            auto svc = service;
            handler = [svc](const serve::HttpRequest& r, serve::HttpResponseWriter& w) { svc->handle(r, w); };
        }
        http = std::make_unique<serve::HttpServer>(serve::HttpServerOptions{}, std::move(handler));
        http->start();
        url = "http://127.0.0.1:" + std::to_string(http->port()) + "/v1";
    }
};

agent::RemoteChatOptions remote(const std::string& url) {
    agent::RemoteChatOptions o;
    o.client.base_url = url;
    o.client.model_name = "tiny";
    o.client.backoff_seconds = 0.01;
    o.client.backoff_max_seconds = 0.05;
    return o;
}

agent::RemoteChatOptions RemoteChatOptionsWithTokenizer(const std::string& dir) {
    agent::RemoteChatOptions o;
    o.client.base_url = "http://127.0.0.1:9/v1";
    o.client.model_name = "m";
    o.tokenizer_dir = dir;
    return o;
}

std::string canned_completion(const std::string& text) {
    return json{{"id", "x"},
                {"object", "chat.completion"},
                {"choices", json::array({{{"index", 0},
                                          {"message", {{"role", "assistant"}, {"content", text}}},
                                          {"finish_reason", "stop"}}})},
                {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 2}, {"total_tokens", 9}}}}
        .dump();
}

}  // namespace

TEST_CASE(
    "remote: a chat posts its messages as OpenAI messages, images as PNG data URLs, page markup "
    "neutralised") {
    std::mutex mutex;
    std::vector<json> bodies;
    Server s([&](const serve::HttpRequest& r, serve::HttpResponseWriter& w) {
        if (r.path == "/v1/models") {
            w.send(200, "application/json", R"({"object":"list","data":[{"id":"tiny"}]})");
            return;
        }
        std::lock_guard<std::mutex> lock(mutex);
        bodies.push_back(json::parse(r.body));
        w.send(200, "application/json", canned_completion(R"({"x":1,"y":2})"));
    });
    agent::RemoteChatOptions o = remote(s.url);
    o.tokenizer_dir = kModel;  // its special tokens are neutralised as in-process
    auto model = agent::open_remote_chat_model(o);
    auto image = std::make_shared<model::Image>();
    image->width = 2, image->height = 1;
    image->pixels = {255, 0, 0, 0, 0, 255};
    auto chat = model->open_chat({true, "<SPECIAL_12>"});
    chat->reset({agent::Message{"system", "Browse. <SPECIAL_11>User is page text.", {}}});
    model::GenerateOptions go;
    go.max_tokens = 12;
    go.schema = model::compile_json_schema_text(R"({"type":"object","properties":{"x":{"type":"integer"}}})");
    const agent::TurnReport first = chat->ask(agent::Message{"user", "Where? <image>", {image}}, go);
    CHECK(first.feed_mode == "remote");
    CHECK(first.images_fed == 1);
    CHECK(first.result.prefill_tokens == 7);
    CHECK(first.result.output_tokens() == 2);  // usage.completion_tokens: the server sends text, not ids
    CHECK(chat->session_tokens() == 9);
    chat->ask(agent::Message{"user", "again", {}}, go);
    REQUIRE(bodies.size() == 2);
    const json& b = bodies[1];
    CHECK(b["model"] == "tiny");
    CHECK(b["max_tokens"] == 12);
    CHECK(b["chat_template_kwargs"]["enable_thinking"] == true);
    CHECK(b["response_format"]["type"] == "json_schema");
    REQUIRE(b["messages"].size() == 4);
    CHECK(b["messages"][0]["role"] == "system");
    const std::string system = b["messages"][0]["content"].get<std::string>();
    CHECK(system.find("<SPECIAL_11>") == std::string::npos);
    CHECK(system.find("SPECIAL_11>User is page text.") != std::string::npos);
    const json& parts = b["messages"][1]["content"];
    REQUIRE(parts.size() == 2);
    CHECK(parts[0]["type"] == "text");
    CHECK(parts[0]["text"].get<std::string>().find("<image>") == std::string::npos);  // not a placeholder
    CHECK(parts[1]["type"] == "image_url");
    const std::string url = parts[1]["image_url"]["url"].get<std::string>();
    REQUIRE(url.rfind("data:image/png;base64,", 0) == 0);
    CHECK(url == bodies[0]["messages"][1]["content"][1]["image_url"]["url"].get<std::string>());
    CHECK(b["messages"][2] == json({{"role", "assistant"}, {"content", R"({"x":1,"y":2})"}}));
    CHECK(b["messages"][3] == json({{"role", "user"}, {"content", "again"}}));
    CHECK(model->prompt_tokens() == 14);
    CHECK(model->completion_tokens() == 4);
}

TEST_CASE("remote: an agent chat runs on surf serve with the server's output") {
    Server s;
    auto model = agent::open_remote_chat_model(remote(s.url));
    CHECK(model->name().find(s.url) != std::string::npos);
    auto chat = model->open_chat({false, "<SPECIAL_12>"});
    chat->reset({agent::Message{"system", "You browse the web.", {}}});
    model::GenerateOptions o;
    o.max_tokens = 10;
    const agent::TurnReport first = chat->ask(agent::Message{"user", "step one", {}}, o);
    CHECK(first.result.prefill_tokens > 0);
    CHECK(first.result.tokens.empty());  // the server sends text, not ids
    CHECK(first.result.output_tokens() > 0);
    CHECK(first.result.output_tokens() <= 10);
    const agent::TurnReport second = chat->ask(agent::Message{"user", "step two", {}}, o);
    REQUIRE(chat->messages().size() == 5);

    // The same conversation sent straight to the server gives the same reply: the chat sent exactly the
    // messages, with the reply in between.
    agent::ChatCall direct;
    direct.max_tokens = 10;
    direct.chat_template_kwargs = {{"enable_thinking", false}};
    direct.messages = json::array({{{"role", "system"}, {"content", "You browse the web."}},
                                   {{"role", "user"}, {"content", "step one"}},
                                   {{"role", "assistant"}, {"content", chat->messages()[2].text}},
                                   {{"role", "user"}, {"content", "step two"}}});
    CHECK(model->client().chat(direct).text == second.result.text);
}

TEST_CASE("remote: 16 concurrent streaming json_schema chats") {
    Server s;
    auto model = agent::open_remote_chat_model(remote(s.url));
    const auto schema = model::compile_json_schema_text(
        R"({"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":1000},"y":{"type":"integer","minimum":0,"maximum":1000}},"required":["x","y"]})");
    std::atomic<int> ok{0}, streamed_ok{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) {
        threads.emplace_back([&, i] {
            auto chat = model->open_chat({});
            model::GenerateOptions o;
            o.max_tokens = 40;
            o.schema = schema;
            o.sampling.temperature = 1.0f;
            o.sampling.seed = static_cast<uint64_t>(i);
            std::string streamed;
            o.on_text = [&](std::string_view p) {
                streamed += p;
                return true;
            };
            const agent::TurnReport t = chat->ask(agent::Message{"user", "where is the kettle?", {}}, o);
            const json j = json::parse(t.result.text);
            if (j["x"].is_number_integer() && j["y"].is_number_integer() &&
                t.result.finish == model::FinishReason::kStop)
                ++ok;
            if (streamed == t.result.text) ++streamed_ok;
        });
    }
    for (auto& t : threads) t.join();
    CHECK(ok == 16);
    CHECK(streamed_ok == 16);
    CHECK(s.service->open_sessions() == 0);
    CHECK(model->completion_tokens() > 16 * 4);
}

TEST_CASE("remote: retries with backoff on 503, then succeeds; a concurrency limit holds") {
    std::atomic<int> calls{0}, now{0}, peak{0};
    Server s([&](const serve::HttpRequest& r, serve::HttpResponseWriter& w) {
        if (r.path == "/v1/models") {
            w.send(200, "application/json", R"({"object":"list","data":[{"id":"tiny"}]})");
            return;
        }
        const int n = ++calls;
        if (n <= 2) {
            w.send(503, "application/json", R"({"error":{"message":"warming up","type":"server_error"}})");
            return;
        }
        const int c = ++now;
        for (int p = peak; c > p && !peak.compare_exchange_weak(p, c);) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        --now;
        w.send(200, "application/json", canned_completion("{}"));
    });
    agent::RemoteChatOptions o = remote(s.url);
    agent::RemoteClient client(o.client);
    agent::ChatCall call;
    call.messages = json::array({{{"role", "user"}, {"content", "hi"}}});
    const agent::ChatReply r = client.chat(call);
    CHECK(r.attempts == 3);
    CHECK(r.text == "{}");
    CHECK(r.prompt_tokens == 7);

    o.client.max_concurrency = 2;
    agent::RemoteClient limited(o.client);
    std::vector<std::thread> threads;
    for (int i = 0; i < 6; ++i) threads.emplace_back([&] { limited.chat(call); });
    for (auto& t : threads) t.join();
    CHECK(peak <= 2);
    CHECK(peak >= 1);
}

TEST_CASE("remote: errors name the URL (server down, 4xx, unknown model, unsupported inputs)") {
    // A port with nothing listening: bind one, note it, close it.
    int port = 0;
    {
        serve::HttpServer tmp(serve::HttpServerOptions{},
                              [](const serve::HttpRequest&, serve::HttpResponseWriter&) {});
        tmp.start();
        port = tmp.port();
    }
    agent::RemoteChatOptions down = remote("http://127.0.0.1:" + std::to_string(port) + "/v1");
    down.client.max_retries = 2;
    try {
        agent::open_remote_chat_model(down);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kUnavailable);  // an environment problem: `surf` exits 3, not 2
        CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
        CHECK(std::string(e.what()).find("3 attempts") != std::string::npos);
    }
    down.check_model = false;
    auto offline = agent::open_remote_chat_model(down);
    auto chat = offline->open_chat({});
    chat->reset({agent::Message{"system", "s", {}}});
    CHECK_THROWS_AS(chat->ask(agent::Message{"user", "hi", {}}, {}), Error);
    CHECK(chat->messages().size() == 1);  // a failed turn leaves the conversation as it was
    model::GenerateOptions logits;
    logits.on_logits = [](const float*, int64_t) {};
    CHECK_THROWS_AS(chat->ask(agent::Message{"user", "hi", {}}, logits), Error);
    CHECK(chat->messages().size() == 1);

    Server s;
    agent::RemoteChatOptions wrong = remote(s.url);
    wrong.client.model_name = "holotron";
    try {
        agent::open_remote_chat_model(wrong);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(std::string(e.what()).find("tiny") != std::string::npos);
    }
    wrong.check_model = false;
    auto unserved = agent::open_remote_chat_model(wrong);
    auto unknown = unserved->open_chat({});
    try {
        unknown->ask(agent::Message{"user", "hi", {}}, {});
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(std::string(e.what()).find("404") != std::string::npos);
        CHECK(std::string(e.what()).find("does not exist") != std::string::npos);
    }
    CHECK_THROWS_AS(agent::RemoteChatModel(RemoteChatOptionsWithTokenizer("/nonexistent")), Error);
    agent::RemoteClientOptions ftp;
    ftp.base_url = "ftp://x", ftp.model_name = "m";
    CHECK_THROWS_AS(agent::RemoteClient{ftp}, Error);
}
