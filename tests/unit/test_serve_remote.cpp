// The remote backend (agent/remote_*.h) against an in-process `surf serve` (tiny fixture model, CPU) and
// against scripted HTTP handlers: the pass-through chat format round-trips, the agent's Conversation runs
// unchanged on the remote engine (same text as the server's own greedy output), 16 concurrent streaming
// json_schema calls, retries with backoff on 503, the concurrency limit, a clear error naming the URL
// when the server is down, and 4xx answers surface the server's message.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "agent/conversation.h"
#include "agent/remote/remote_engine.h"
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

agent::RemoteEngineOptions remote(const std::string& url) {
    agent::RemoteEngineOptions o;
    o.client.base_url = url;
    o.client.model_name = "tiny";
    o.client.backoff_seconds = 0.01;
    o.client.backoff_max_seconds = 0.05;
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

TEST_CASE("remote: the pass-through chat format round-trips through the chat template") {
    const model::ChatTemplate t(agent::remote_chat_template(), "remote");
    std::vector<model::ChatMessage> msgs = {
        {"system", std::string("You are an agent.")},
        {"user", std::vector<model::ChatPart>{{model::ChatPartKind::kText, "Look: "},
                                              {model::ChatPartKind::kImage, ""}}},
        {"assistant", std::string("{\"a\":1}")},
        {"user", std::string("again")}};
    model::ChatRenderOptions ro;
    ro.enable_thinking = false;
    std::string text = t.render(msgs, ro);
    const size_t img = text.find("<image>");
    REQUIRE(img != std::string::npos);
    text.replace(img, 7, agent::kRemoteImageMarker);
    std::string thinking;
    const auto parsed = agent::parse_remote_chat(text, &thinking);
    CHECK(thinking == "off");
    REQUIRE(parsed.size() == 5);
    CHECK(parsed[0].role == "system");
    CHECK(parsed[0].text == "You are an agent.");
    CHECK(parsed[1].text == std::string("Look: ") + agent::kRemoteImageMarker);
    CHECK(parsed[2].role == "assistant");
    CHECK(parsed[2].text == "{\"a\":1}");
    CHECK(parsed[3].text == "again");
    CHECK(parsed[4].role == "assistant");
    CHECK(parsed[4].open);
    CHECK(parsed[4].text.empty());
    CHECK_THROWS_AS(agent::parse_remote_chat("<SPECIAL_11>User\nhi\n", nullptr), Error);
}

TEST_CASE(
    "remote: an agent Conversation runs on the remote engine, incrementally, with the server's output") {
    Server s;
    auto engine = agent::open_remote_engine(remote(s.url));
    const model::ChatTemplate t = model::ChatTemplate::from_model_dir(engine->config().dir);
    agent::Conversation conv(*engine, t, agent::ConversationOptions{false, "<SPECIAL_12>"});
    conv.reset({agent::Message{"system", "You browse the web. <|surf_end|> is not a marker here.", {}}});
    model::GenerateOptions o;
    o.max_tokens = 10;
    const agent::TurnReport first = conv.ask(agent::Message{"user", "step one", {}}, o);
    CHECK(first.feed_mode == "fresh");
    CHECK(first.result.prefill_tokens > 0);
    CHECK(first.result.tokens.empty());  // the server sends text, not ids
    CHECK(first.result.output_tokens() > 0);
    CHECK(first.result.output_tokens() <= 10);
    const agent::TurnReport second = conv.ask(agent::Message{"user", "step two", {}}, o);
    CHECK(second.feed_mode != "fresh");  // prefix or splice: the session was extended, not rebuilt
    CHECK(engine->open_sessions() == 1);

    // The same conversation sent straight to the server gives the same reply: the engine re-sent exactly
    // the messages (the sanitised system text included) with the reply in between.
    agent::ChatCall direct;
    direct.max_tokens = 10;
    direct.chat_template_kwargs = {{"enable_thinking", false}};
    direct.messages = json::array({{{"role", "system"}, {"content", conv.messages()[0].text}},
                                   {{"role", "user"}, {"content", "step one"}},
                                   {{"role", "assistant"}, {"content", first.result.text}},
                                   {{"role", "user"}, {"content", "step two"}}});
    CHECK(conv.messages()[0].text.find("<|surf_end|>") == std::string::npos);  // neutralised
    CHECK(engine->client().chat(direct).text == second.result.text);
}

TEST_CASE("remote: 16 concurrent streaming json_schema calls") {
    Server s;
    auto engine = agent::open_remote_engine(remote(s.url));
    const auto schema = model::compile_json_schema_text(
        R"({"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":1000},"y":{"type":"integer","minimum":0,"maximum":1000}},"required":["x","y"]})");
    const std::string prefix = "<|surf_role:user|>where is the kettle?<|surf_end|><|surf_role:assistant|>";
    std::atomic<int> ok{0}, streamed_ok{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) {
        threads.emplace_back([&, i] {
            const model::SessionId id = engine->open_session();
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
            const model::GenerateResult r = engine->generate(id, {model::InputPart::of_text(prefix)}, o);
            const json j = json::parse(r.text);
            if (j["x"].is_number_integer() && j["y"].is_number_integer() &&
                r.finish == model::FinishReason::kStop)
                ++ok;
            if (streamed == r.text) ++streamed_ok;
            engine->close_session(id);
        });
    }
    for (auto& t : threads) t.join();
    CHECK(ok == 16);
    CHECK(streamed_ok == 16);
    CHECK(engine->open_sessions() == 0);
    CHECK(s.service->open_sessions() == 0);
    CHECK(engine->stats().decode_tokens > 16 * 4);
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
    agent::RemoteEngineOptions o = remote(s.url);
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
    agent::RemoteEngineOptions down = remote("http://127.0.0.1:" + std::to_string(port) + "/v1");
    down.client.max_retries = 2;
    try {
        agent::open_remote_engine(down);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kUnavailable);  // an environment problem: `surf` exits 3, not 2
        CHECK(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
        CHECK(std::string(e.what()).find("3 attempts") != std::string::npos);
    }
    down.check_model = false;
    auto offline = agent::open_remote_engine(down);
    const model::SessionId id = offline->open_session();
    CHECK_THROWS_AS(
        offline->generate(
            id, {model::InputPart::of_text("<|surf_role:user|>hi<|surf_end|><|surf_role:assistant|>")}, {}),
        Error);
    CHECK_THROWS_AS(offline->generate(id, {model::InputPart::of_tokens({1, 2})}, {}), Error);
    CHECK_THROWS_AS(offline->generate(id, {model::InputPart::of_text("<SPECIAL_11>User\nhi")}, {}), Error);

    Server s;
    agent::RemoteEngineOptions wrong = remote(s.url);
    wrong.client.model_name = "holotron";
    try {
        agent::open_remote_engine(wrong);
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(std::string(e.what()).find("tiny") != std::string::npos);
    }
    wrong.check_model = false;
    auto engine = agent::open_remote_engine(wrong);
    const model::SessionId sid = engine->open_session();
    try {
        engine->generate(
            sid, {model::InputPart::of_text("<|surf_role:user|>hi<|surf_end|><|surf_role:assistant|>")}, {});
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(std::string(e.what()).find("404") != std::string::npos);
        CHECK(std::string(e.what()).find("does not exist") != std::string::npos);
    }
    agent::RemoteClientOptions ftp;
    ftp.base_url = "ftp://x", ftp.model_name = "m";
    CHECK_THROWS_AS(agent::RemoteClient{ftp}, Error);
}
