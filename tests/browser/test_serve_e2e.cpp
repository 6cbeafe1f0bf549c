// End to end through the network: a child `surf serve` (the tiny fixture model, two CPU replicas, an API
// key, a 1 MB body limit) on 127.0.0.1, driven through the remote backend: 16 concurrent streaming
// json_schema calls; malformed bodies, oversized inputs, unknown models and missing keys get OpenAI-style
// error JSON with the right code; a client that disconnects mid-stream frees its session; and a web agent
// runs against local pages on real Chromium with every model call going through the server. The server
// keeps serving throughout and stops cleanly on SIGTERM.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/remote/remote_chat.h"
#include "tests/browser/test_http_server.h"
#include "tests/http_client.h"
#include "tests/serve_process.h"
#include "tests/test_util.h"

using namespace surf;
using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";
const std::string kPages = SURF_SOURCE_DIR "/tests/browser/agent_pages";
const std::string kKey = "e2e-key";

// `surf serve` as a child process.
struct ServeProcess : surf::test::ServeProcess {
    ServeProcess()
        : surf::test::ServeProcess({"--model", kModel, "--model-name", "tiny", "--api-key", kKey,
                                    "--replicas", "2", "--max-body-mb", "1", "--prefix-cache", "8"}) {}
};

using Reply = surf::test::HttpReply;

Reply http(const std::string& url, const std::string& body, const std::vector<std::string>& headers,
           bool post = true) {
    return surf::test::http_request(post ? "POST" : "GET", url, body, headers);
}

std::string error_code(const Reply& r) {
    const json j = json::parse(r.body);  // throws (fails the test) if the error is not JSON
    REQUIRE(j.contains("error"));
    REQUIRE(j["error"]["message"].is_string());
    return j["error"]["code"].is_string() ? j["error"]["code"].get<std::string>() : "";
}

// A gauge from /metrics.
double metric(const ServeProcess& s, const std::string& name) {
    const Reply r = http(s.origin() + "/metrics", "", {"Authorization: Bearer " + kKey}, false);
    const size_t at = r.body.find("\n" + name + " ");
    REQUIRE_MESSAGE(at != std::string::npos, name);
    return std::stod(r.body.substr(at + name.size() + 2));
}

agent::RemoteChatOptions remote(const ServeProcess& s) {
    agent::RemoteChatOptions o;
    o.client.base_url = s.url();
    o.client.model_name = "tiny";
    o.client.api_key = kKey;
    o.client.max_concurrency = 16;
    o.tokenizer_dir = kModel;  // neutralise the checkpoint's special tokens in page text, as in-process
    return o;
}

// An agent run on local pages with every model call through the server; its trace names the remote backend.
void check_agent_run(const ServeProcess& server, const std::shared_ptr<agent::ChatModel>& model) {
    test::TestHttpServer pages(kPages);
    agent::AgentConfig config;
    config.profile = kPages + "/profile_tiny.json";
    agent::Agent a(model, config);
    agent::RunOptions run;
    run.task = "Find the price of the blue kettle";
    run.start_url = pages.url("/index.html");
    run.max_steps = 3;
    run.max_answer_attempts = 2;
    run.timeout_seconds = 120;
    run.viewport_width = 320;
    run.viewport_height = 240;
    run.max_wait_seconds = 0.2;
    run.allow_domains = {"127.0.0.1"};
    const fs::path dir = fs::temp_directory_path() / "surf_serve_e2e_agent";
    fs::remove_all(dir);
    run.trace_dir = dir.string();
    const agent::RunResult r = a.run(run);
    MESSAGE("status " << std::string(agent::run_status_name(r.status)) << ", steps " << r.steps << ", calls "
                      << r.model_calls << ", " << r.seconds << " s, error " << r.error);
    CHECK(r.status != agent::RunStatus::kError);
    CHECK(r.steps >= 1);
    CHECK(r.model_calls >= r.steps);
    std::ifstream in(dir / "trace.jsonl");
    std::string line;
    int remote_calls = 0;
    bool backend_named = false;
    while (std::getline(in, line)) {
        const json j = json::parse(line);
        if (j["type"] == "run_start")
            backend_named = j.dump().find("remote " + server.url()) != std::string::npos;
        if (j["type"] == "model_call" && j["prompt_tokens"].get<int64_t>() > 0) ++remote_calls;
    }
    CHECK(backend_named);
    CHECK(remote_calls >= r.steps);
    CHECK(metric(server, "surf_sessions_open") == 0);
    fs::remove_all(dir);
}

// `surf eval --model URL` on a two-task file: every call through the server, each trace naming it; a local
// model's flags are refused with a remote one.
void check_eval_through_server(const ServeProcess& server) {
    test::TestHttpServer pages(kPages);
    const fs::path dir = fs::temp_directory_path() / "surf_serve_e2e_eval";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path tasks = dir / "tasks.jsonl", out = dir / "out", log = dir / "eval.log";
    {
        std::ofstream t(tasks);
        t << R"({"web_name": "Shop", "id": "Shop--0", "ques": "Find the price of the blue kettle", "web": ")"
          << pages.url("/index.html") << "\"}\n"
          << R"({"web_name": "Shop", "id": "Shop--1", "ques": "What does the second page say?", "web": ")"
          << pages.url("/page2.html") << "\"}\n";
    }
    const std::string cmd =
        std::string(SURF_BINARY_DIR "/surf") + " eval " + tasks.string() + " --out " + out.string() +
        " --model " + server.url() + " --model-name tiny --api-key " + kKey + " --tokenizer " + kModel +
        " --profile " + kPages +
        "/profile_tiny.json --concurrency 2 --max-steps 2 --attempts 1 --judge none --viewport 320x240" +
        " --allow-domain 127.0.0.1 --page-timeout 10 --timeout 120 > " + log.string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    const std::string printed = surf::test::read_file(log.string());
    INFO("surf eval printed:\n" << printed);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(printed.find("connecting to " + server.url()) != std::string::npos);
    std::ifstream results(out / "results.jsonl");
    std::string line;
    int records = 0;
    while (std::getline(results, line)) {
        const json r = json::parse(line);
        INFO(r.dump());
        ++records;
        CHECK(r["status"] != "error");
        CHECK(r["prompt_tokens"].get<int64_t>() > 0);
        CHECK(r["steps"].get<int>() >= 1);
        // The task's trace names the remote backend: the model ran behind the server, not in this
        // process.
        CHECK(surf::test::read_file((out / r["trace"].get<std::string>() / "trace.jsonl").string())
                  .find("remote " + server.url()) != std::string::npos);
    }
    CHECK(records == 2);
    CHECK(json::parse(surf::test::read_file((out / "summary.json").string()))["tasks"] == 2);
    // A local model's flags are refused with a remote one (exit 2, naming the flag) before anything
    // connects.
    for (const std::string& bad :
         {std::string(" eval ") + tasks.string() + " --out " + out.string() + " --template x.jinja",
          std::string(" run \"task\" --url ") + pages.url("/index.html") + " --backend cuda"}) {
        const std::string refused = std::string(SURF_BINARY_DIR "/surf") + bad + " --model " + server.url() +
                                    " --model-name tiny > " + log.string() + " 2>&1";
        const int rc = std::system(refused.c_str());
        const std::string said = surf::test::read_file(log.string());
        INFO(bad << ": " << said);
        CHECK((WIFEXITED(rc) && WEXITSTATUS(rc) == 2));
        CHECK(said.find("applies to a local model folder, not to a remote --model") != std::string::npos);
    }
    CHECK(metric(server, "surf_sessions_open") == 0);
    fs::remove_all(dir);
}

// `surf run` with a local policy and the localizer and validator behind the server; --without-action.
void check_roles_through_server(const ServeProcess& server) {
    test::TestHttpServer pages(kPages);
    const fs::path log = fs::temp_directory_path() / "surf_serve_e2e_roles.log";
    // Only click (which asks the localizer) and answer (which asks the validator) are left, so every step
    // that parses makes a call to the server.
    std::string without;
    for (const char* a : {"back", "double_click", "drag", "goto", "hover", "key", "refresh", "right_click",
                          "scroll", "select", "wait", "write"})
        without += std::string(" --without-action ") + a;
    const double before = metric(server, "surf_prompt_tokens_total");
    const std::string cmd = std::string(SURF_BINARY_DIR "/surf") +
                            " run \"Find the price of the blue kettle\"" + " --url " +
                            pages.url("/index.html") + " --model " + kModel + " --localizer-model " +
                            server.url() + " --validator-model " + server.url() + " --model-name tiny" +
                            " --api-key " + kKey + " --profile " + kPages + "/profile_tiny.json" + without +
                            " --max-steps 3 --attempts 1 --viewport 320x240 --allow-domain 127.0.0.1" +
                            " --timeout 120 > " + log.string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    const std::string printed = surf::test::read_file(log.string());
    INFO("surf run printed:\n" << printed);
    REQUIRE(WIFEXITED(status));
    CHECK((WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 1));  // answered or not: no error
    CHECK(printed.find("connecting to " + server.url()) != std::string::npos);
    CHECK(metric(server, "surf_prompt_tokens_total") > before);
    // The policy still runs in this process: the run's own model is the local folder.
    CHECK(printed.find("loading " + kModel) != std::string::npos);
    // A name the profile's policy does not have is refused before anything loads.
    const std::string refused = std::string(SURF_BINARY_DIR "/surf") + " run task --url " +
                                pages.url("/index.html") + " --model " + kModel + " --profile " + kPages +
                                "/profile_tiny.json --without-action fly > " + log.string() + " 2>&1";
    const int rc = std::system(refused.c_str());
    CHECK((WIFEXITED(rc) && WEXITSTATUS(rc) == 2));
    CHECK(surf::test::read_file(log.string()).find("\"fly\" is not an action") != std::string::npos);
    CHECK(metric(server, "surf_sessions_open") == 0);
    fs::remove(log);
}

}  // namespace

TEST_CASE("surf serve end to end: remote backend, error codes, disconnects, an agent run") {
    ServeProcess server;
    const std::string chat_url = server.url() + "/chat/completions";
    const std::vector<std::string> auth = {"Authorization: Bearer " + kKey, "Content-Type: application/json"};
    auto model = agent::open_remote_chat_model(remote(server));

    SUBCASE("16 concurrent streaming json_schema chats through the remote backend") {
        const auto schema = model::compile_json_schema_text(
            R"({"type":"object","properties":{"action":{"type":"string","enum":["click","scroll","answer"]},"x":{"type":"integer","minimum":0,"maximum":1000}},"required":["action","x"]})");
        std::atomic<int> valid{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < 16; ++i) {
            threads.emplace_back([&, i] {
                auto chat = model->open_chat({});
                model::GenerateOptions o;
                o.max_tokens = 48;
                o.schema = schema;
                o.sampling.temperature = 0.8f;
                o.sampling.seed = static_cast<uint64_t>(100 + i);
                std::string streamed;
                o.on_text = [&](std::string_view p) {
                    streamed += p;
                    return true;
                };
                const agent::TurnReport t =
                    chat->ask(agent::Message{"user", "task " + std::to_string(i), {}}, o);
                const json j = json::parse(t.result.text);
                if (streamed == t.result.text && j["x"].is_number_integer() && j["action"].is_string())
                    ++valid;
            });
        }
        for (auto& t : threads) t.join();
        CHECK(valid == 16);
        CHECK(metric(server, "surf_sessions_open") == 0);
        CHECK(metric(server, "surf_generation_tokens_total") > 16 * 4);
    }

    SUBCASE("malformed bodies, oversized inputs, unknown models, missing keys") {
        const std::string ok =
            R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2})";
        Reply r = http(chat_url, ok, {"Content-Type: application/json"});
        CHECK(r.status == 401);
        CHECK(error_code(r) == "invalid_api_key");
        r = http(chat_url, ok, {"Authorization: Bearer nope"});
        CHECK(r.status == 401);
        r = http(chat_url, R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],)", auth);
        CHECK(r.status == 400);
        error_code(r);
        r = http(chat_url, R"({"model":"tiny","messages":"hi"})", auth);
        CHECK(r.status == 400);
        CHECK(json::parse(r.body)["error"]["param"] == "messages");
        r = http(chat_url, R"({"model":"gpt-5","messages":[{"role":"user","content":"hi"}]})", auth);
        CHECK(r.status == 404);
        CHECK(error_code(r) == "model_not_found");
        r = http(
            chat_url,
            R"({"model":"tiny","messages":[{"role":"user","content":")" + std::string(1500000, 'a') + "\"}]}",
            auth);
        CHECK(r.status == 413);
        error_code(r);
        r = http(chat_url,
                 R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":100000})", auth);
        CHECK(r.status == 400);
        CHECK(json::parse(r.body)["error"]["param"] == "max_tokens");
        r = http(chat_url, ok, auth);
        CHECK(r.status == 200);
    }

    SUBCASE("a client that disconnects mid-stream frees its session") {
        agent::RemoteClient client(remote(server).client);
        agent::ChatCall call;
        call.messages = json::array({{{"role", "user"}, {"content", "tell me everything"}}});
        call.max_tokens = 4000;
        call.ignore_eos = true;
        int pieces = 0;
        call.on_text = [&](std::string_view) { return ++pieces < 4; };
        const auto t0 = std::chrono::steady_clock::now();
        CHECK(client.chat(call).cancelled);
        bool freed = false;
        for (int i = 0; i < 250 && !freed; ++i) {
            freed = metric(server, "surf_sessions_open") == 0 && metric(server, "surf_requests_running") == 0;
            if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        CHECK(freed);
        CHECK(metric(server, "surf_requests_cancelled_total") >= 1);
        CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    }

    SUBCASE("a web agent runs end to end through the server") {
        check_agent_run(server, model);
    }

    SUBCASE("surf eval --model URL runs a task file with every model call going through the server") {
        check_eval_through_server(server);
    }

    SUBCASE(
        "surf run with a local policy, the localizer and validator behind the server, and --without-action") {
        check_roles_through_server(server);
    }

    CHECK(server.alive());
    CHECK(http(server.url().substr(0, server.url().size() - 3) + "/health", "", {}, false).status == 200);
    CHECK(metric(server, "surf_sessions_open") == 0);
    CHECK(server.terminate() == 0);
}
