// The library's run options on a real page (tests/browser/agent_pages/field.html, served on 127.0.0.1) with
// the CPU engine and the tiny random fixture model, through the public API (agent/agent.h). Each run's
// profile offers the policy one page action, so the random model's constrained output takes the path under
// test: secrets typed by the browser and absent from every output, a custom action and a replaced built-in
// run by their handlers on the page, the approval hook seeing the real screenshot, and a structured answer.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/conversation.h"
#include "model/engine.h"
#include "tests/browser/forced_profile.h"
#include "tests/browser/test_http_server.h"
#include "tests/test_util.h"
#include "tools/browser/browser_session.h"

using namespace surf;
using namespace surf::agent;
namespace fs = std::filesystem;

namespace {

const std::string kPages = SURF_SOURCE_DIR "/tests/browser/agent_pages";
const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

fs::path fresh_dir(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("surf_library_e2e_" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

std::unique_ptr<Agent> agent_with(const std::string& profile) {
    AgentConfig config;
    config.model_dir = kModel;
    config.profile = profile;
    return Agent::create(config);
}

RunOptions run_on(const std::string& url, const fs::path& trace_dir, int max_steps) {
    RunOptions o;
    o.task = "Fill in the field";
    o.start_url = url;
    o.max_steps = max_steps;
    o.max_answer_attempts = 1;
    o.timeout_seconds = 120;
    o.viewport_width = 320;
    o.viewport_height = 240;
    o.allow_domains = {"127.0.0.1"};
    o.trace_dir = trace_dir.string();
    return o;
}

// What the test server saw at /typed (the field's value when Enter was pressed).
struct TypedLog {
    std::mutex mu;
    std::vector<std::string> values;
    test::TestHttpServer::Handler handler() {
        return [this](const test::HttpRequest& req, test::HttpResponse& res) {
            if (req.path != "/typed") return false;
            std::lock_guard<std::mutex> lock(mu);
            values.push_back(req.query);
            res.body = "ok";
            return true;
        };
    }
};

// A role's model that counts the chats opened on it (the run opens one per call it makes for the role).
class CountingModel : public ChatModel {
public:
    explicit CountingModel(std::shared_ptr<ChatModel> inner) : inner_(std::move(inner)) {}
    std::unique_ptr<Chat> open_chat(const ChatOptions& options) override {
        ++chats;
        return inner_->open_chat(options);
    }
    std::string name() const override { return inner_->name(); }
    std::atomic<int> chats{0};

private:
    std::shared_ptr<ChatModel> inner_;
};

}  // namespace

TEST_CASE("a secret is typed into the page and held by no trace file, report, event or result") {
    TypedLog typed;
    test::TestHttpServer server(kPages, typed.handler());
    const fs::path dir = fresh_dir("secrets");
    const std::string value = "hunter2S3cret";
    auto agent = agent_with(test::profile_offering(
        dir,
        test::action_with({{"type", "write"}, {"content", "<secret:pw>"}, {"element", "the field"}}, true)));
    RunOptions o = run_on(server.url("/field.html"), dir / "trace", 2);  // a write, then the forced answer
    o.task = "Log in with the password <secret:pw>";
    o.secrets = {{"pw", {value, {"127.0.0.1"}}}};
    std::string events;
    const RunResult r = agent->run(o, [&](const StepEvent& e) {
        events += e.description + e.outcome + e.thought + e.note + e.target + e.action + "\n";
    });
    CHECK(r.steps >= 1);
    {
        std::lock_guard<std::mutex> lock(typed.mu);
        REQUIRE(!typed.values.empty());
        CHECK(typed.values.front() == "v=" + value);  // the browser typed the real value
    }
    CHECK(events.find("<secret:pw>") != std::string::npos);
    CHECK(events.find(value) == std::string::npos);
    CHECK(r.answer.find(value) == std::string::npos);
    CHECK(r.error.find(value) == std::string::npos);
    int files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir / "trace")) {
        if (!entry.is_regular_file()) continue;
        ++files;
        CHECK_MESSAGE(test::read_file(entry.path().string()).find(value) == std::string::npos, entry.path());
    }
    CHECK(files >= 3);  // trace.jsonl, report.html, a screenshot
    CHECK(test::read_file((dir / "trace" / "trace.jsonl").string()).find("<secret:pw>") != std::string::npos);

    // The same secret bound to another host is not typed here: the step is refused and the page gets nothing.
    TypedLog other;
    test::TestHttpServer elsewhere(kPages, other.handler());
    o.secrets = {{"pw", {value, {"shop.example"}}}};
    o.trace_dir = (dir / "trace2").string();
    const RunResult refused = agent->run(o);
    CHECK(refused.errors >= 1);
    std::lock_guard<std::mutex> lock(other.mu);
    CHECK(other.values.empty());
    fs::remove_all(dir);
}

TEST_CASE("a custom action and a replaced built-in run their handlers with the run's browser tab") {
    test::TestHttpServer server(kPages);
    const fs::path dir = fresh_dir("custom");
    // The profile offers `wait` only; the run takes it away and adds `stamp`, so every step is a stamp.
    auto agent =
        agent_with(test::profile_offering(dir, test::action_with({{"type", "wait"}, {"seconds", 1}}, false)));
    RunOptions o = run_on(server.url("/field.html"), dir / "trace", 2);
    std::vector<std::string> urls;
    o.custom_actions.push_back(
        {"stamp", "write the step into the page's title", "{}", [&](const CustomActionCall& call) {
             REQUIRE(call.page != nullptr);
             urls.push_back(call.url);
             call.page->evaluate("document.title = 'stamped'");
             return std::string("stamped the page");
         }});
    o.removed_actions = {"wait"};
    const RunResult r = agent->run(o);
    REQUIRE(!urls.empty());
    CHECK(urls.front() == server.url("/field.html"));
    const std::string trace = test::read_file((dir / "trace" / "trace.jsonl").string());
    CHECK(trace.find("stamped the page") != std::string::npos);
    CHECK(r.steps >= 1);

    // `wait` kept in the schema but performed by the product: the handler gets its field.
    RunOptions w = run_on(server.url("/field.html"), dir / "trace_wait", 2);
    std::vector<int> seconds;
    w.replaced_actions.push_back({"wait", "", "", [&](const CustomActionCall& call) {
                                      REQUIRE(call.page != nullptr);
                                      seconds.push_back(call.arguments.at("seconds").get<int>());
                                      return "title: " + call.page->title();
                                  }});
    agent->run(w);
    CHECK(seconds == std::vector<int>{1});
    CHECK(test::read_file((dir / "trace_wait" / "trace.jsonl").string()).find("title: One field") !=
          std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("the approval hook sees the real page and its refusal keeps the page untouched") {
    TypedLog typed;
    test::TestHttpServer server(kPages, typed.handler());
    const fs::path dir = fresh_dir("approval");
    auto agent = agent_with(test::profile_offering(
        dir, test::action_with({{"type", "write"}, {"content", "abc"}, {"element", "the field"}}, true)));
    RunOptions o = run_on(server.url("/field.html"), dir / "trace", 3);  // the last step is the forced answer
    std::vector<ProposedAction> seen;
    o.before_action = [&](const ProposedAction& p) {
        seen.push_back(p);
        return seen.size() == 1 ? ApprovalDecision::reject("not yet") : ApprovalDecision::approve();
    };
    agent->run(o);
    REQUIRE(seen.size() >= 1);
    CHECK(seen[0].url == server.url("/field.html"));
    REQUIRE(seen[0].screenshot != nullptr);
    CHECK(seen[0].screenshot->width == 320);
    CHECK(seen[0].screenshot->height == 240);
    CHECK(seen[0].description.find("abc") != std::string::npos);
    std::lock_guard<std::mutex> lock(typed.mu);
    CHECK(typed.values.size() == seen.size() - 1);  // the refused write typed nothing
    fs::remove_all(dir);
}

TEST_CASE("a structured answer is written to its schema and returned parsed") {
    test::TestHttpServer server(kPages);
    const fs::path dir = fresh_dir("structured");
    auto agent =
        agent_with(test::profile_offering(dir, test::action_with({{"type", "wait"}, {"seconds", 1}}, false)));
    RunOptions o = run_on(server.url("/field.html"), dir / "trace", 1);
    o.answer_schema =
        R"({"type":"object","properties":{"price":{"type":"integer","minimum":0,"maximum":99},)"
        R"("currency":{"enum":["EUR","USD"]}},"required":["price","currency"],"additionalProperties":false})";
    const RunResult r = agent->run(o);  // one step: the forced answer
    REQUIRE(!r.answer.empty());
    REQUIRE(r.structured.is_object());
    CHECK(r.structured.at("price").get<int>() <= 99);
    const std::string currency = r.structured.at("currency").get<std::string>();
    CHECK((currency == "EUR" || currency == "USD"));
    fs::remove_all(dir);
}

TEST_CASE("ask_human puts the policy's question to the product and the reply is the step's outcome") {
    test::TestHttpServer server(kPages);
    const fs::path dir = fresh_dir("ask");
    // The profile offers `wait` only; the run takes it away, so the one page action left is ask_human. Its
    // question is free text, which the random model may run on with: a large reply budget.
    auto agent = agent_with(
        test::profile_offering(dir, test::action_with({{"type", "wait"}, {"seconds", 1}}, false), 2000));
    RunOptions o = run_on(server.url("/index.html"), dir / "trace", 2);
    o.removed_actions = {"wait"};
    std::vector<std::string> questions;
    o.ask_human = [&](const std::string& q) {
        questions.push_back(q);
        return std::string("the blue one");
    };
    agent->run(o);
    CHECK(questions.size() == 1);
    CHECK(test::read_file((dir / "trace" / "trace.jsonl").string()).find("the user replied: the blue one") !=
          std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("the localizer and the validator run on models of their own, and the result counts each role") {
    test::TestHttpServer server(kPages);
    const fs::path dir = fresh_dir("roles");
    const auto own = [] {
        std::shared_ptr<model::Engine> engine = model::open_engine(kModel, "cpu", "the test's role model");
        return std::make_shared<CountingModel>(EngineChatModel::open(engine, ""));
    };
    const auto localizer = own(), validator = own();
    const auto agent_offering = [&](const std::string& name, const nlohmann::json& action) {
        AgentConfig config;
        config.model_dir = kModel;
        fs::create_directories(dir / name);
        config.profile = test::profile_offering(dir / name, action);
        config.localizer_chat_model = localizer;
        config.validator_chat_model = validator;
        return Agent::create(config);
    };
    // A write (located by the localizer's model), then the forced answer (not validated).
    auto writer = agent_offering(
        "write", test::action_with({{"type", "write"}, {"content", "abc"}, {"element", "the field"}}, true));
    const RunResult r = writer->run(run_on(server.url("/field.html"), dir / "trace", 2));
    CHECK(localizer->chats.load() >= 1);
    CHECK(validator->chats.load() == 0);
    CHECK(r.usage.at("localizer").calls >= 1);
    CHECK(r.usage.at("localizer").input_tokens > 0);
    CHECK(r.usage.at("policy").calls >= 2);
    CHECK(r.usage.at("policy").output_tokens > 0);
    CHECK(r.final_url == server.url("/field.html"));
    CHECK(r.model_seconds > 0);
    CHECK(r.browser_seconds > 0);
    // An answer at the first step, checked by the validator's model.
    auto answerer =
        agent_offering("answer", test::action_with({{"type", "answer"}, {"content", "42"}}, false));
    const RunResult a = answerer->run(run_on(server.url("/field.html"), dir / "trace2", 2));
    CHECK(validator->chats.load() >= 1);
    CHECK(a.usage.at("validator").calls >= 1);
    CHECK(a.usage.at("validator").output_tokens > 0);
    fs::remove_all(dir);
}
