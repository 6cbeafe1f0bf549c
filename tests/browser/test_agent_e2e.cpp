// End to end: real Chromium, local pages served on 127.0.0.1 (tests/browser/agent_pages/), the tiny random
// fixture model through the CPU engine and the public API (agent/agent.h). The model's output is random but
// schema-constrained, so the runs exercise every path the loop has: a run finishes within its budget and
// leaves a valid trace and report, the allow-list blocks a navigation, cut-off (malformed) output is retried
// then recorded, and a Chromium killed mid-run is recorded while the run goes on. The last case drives the
// BrowserEnvironment directly (no model) to check each action lands where the mapped point says.
#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <thread>
#include "agent/agent.h"
#include "agent/environment.h"
#include "model/engine.h"
#include "tests/browser/test_http_server.h"
#include "tests/test_util.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

using namespace surf;
using namespace surf::agent;
namespace fs = std::filesystem;

namespace {

const std::string kPages = SURF_SOURCE_DIR "/tests/browser/agent_pages";
const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

std::unique_ptr<Agent> make_agent(const std::string& profile = kPages + "/profile_tiny.json") {
    AgentConfig config;
    config.model_dir = kModel;
    config.profile = profile;
    return Agent::create(config);
}

RunOptions small_run(const std::string& url, const std::string& trace_dir, int max_steps = 4) {
    RunOptions o;
    o.task = "Find the price of the blue kettle";
    o.start_url = url;
    o.max_steps = max_steps;
    o.max_answer_attempts = 2;
    o.timeout_seconds = 120;
    o.viewport_width = 320;
    o.viewport_height = 240;
    o.max_wait_seconds = 0.2;
    o.allow_domains = {"127.0.0.1"};
    o.trace_dir = trace_dir;
    return o;
}

std::vector<nlohmann::json> read_trace(const fs::path& dir) {
    std::ifstream in(dir / "trace.jsonl");
    REQUIRE(in);
    std::vector<nlohmann::json> lines;
    std::string line;
    while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));  // throws if invalid
    return lines;
}

std::string slurp(const fs::path& p) {
    return surf::test::read_file(p.string());
}

fs::path fresh_dir(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("surf_agent_e2e_" + name);
    fs::remove_all(dir);
    return dir;
}

bool any_line_mentions(const std::vector<nlohmann::json>& lines, const std::string& needle) {
    for (const auto& j : lines) {
        if (j.dump().find(needle) != std::string::npos) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("a run on local pages completes within its step budget and writes a valid trace and report") {
    test::TestHttpServer server(kPages);
    auto agent = make_agent();
    const fs::path dir = fresh_dir("basic");
    std::vector<StepEvent> events;
    const RunResult r = agent->run(small_run(server.url("/index.html"), dir.string()),
                                   [&](const StepEvent& e) { events.push_back(e); });
    MESSAGE("status " << std::string(run_status_name(r.status)) << ", steps " << r.steps << ", calls "
                      << r.model_calls << ", " << r.seconds << " s");
    CHECK(r.status != RunStatus::kError);
    CHECK(r.steps >= 1);
    CHECK(r.steps <= 4);
    CHECK(r.model_calls >= r.steps);
    REQUIRE_FALSE(events.empty());
    CHECK(events.back().kind == StepEventKind::kFinished);

    const auto lines = read_trace(dir);
    REQUIRE(lines.size() >= 4);
    CHECK(lines.front().at("type") == "run_start");
    CHECK(lines.back().at("type") == "run_end");
    int steps = 0, policy_calls = 0;
    for (const auto& j : lines) {
        if (j.at("type") == "step") {
            ++steps;
            const std::string shot = j.at("screenshot");
            REQUIRE_FALSE(shot.empty());
            CHECK(fs::file_size(dir / shot) > 100);
        }
        if (j.at("type") == "model_call" && j.at("role") == "policy") {
            ++policy_calls;
            CHECK(j.at("prompt_tokens").get<int64_t>() > 0);
            CHECK(j.at("latency_s").get<double>() > 0);
            if (j.at("step") == 1 && j.at("attempt") == 0) CHECK(j.at("image_tokens").get<int64_t>() > 0);
        }
    }
    CHECK(steps == r.steps);
    CHECK(policy_calls >= r.steps);
    const std::string html = slurp(dir / "report.html");
    CHECK(html.find("<!DOCTYPE html>") == 0);
    CHECK(html.find("data:image/png;base64,") != std::string::npos);
    CHECK(html.find("Find the price of the blue kettle") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("the allow-list blocks navigations away from the allowed host") {
    test::TestHttpServer server(kPages);
    auto agent = make_agent();
    SUBCASE("a page that redirects to another host") {
        const fs::path dir = fresh_dir("guard_redirect");
        const RunResult r = agent->run(small_run(server.url("/redirect.html"), dir.string(), 2));
        CHECK(r.status != RunStatus::kError);
        const auto lines = read_trace(dir);
        CHECK(any_line_mentions(lines, "blocked.example.com"));
        CHECK(any_line_mentions(lines, "navigation_denied"));
        fs::remove_all(dir);
    }
    SUBCASE("a start URL outside the allow-list ends the run as an error, with no model call") {
        const fs::path dir = fresh_dir("guard_start");
        RunOptions o = small_run("http://blocked.example.com/", dir.string(), 1);
        const RunResult r = agent->run(o);
        CHECK(r.status == RunStatus::kError);
        CHECK(r.error.find("the start page did not load") != std::string::npos);
        CHECK(r.error.find("navigation_denied") != std::string::npos);
        CHECK(r.model_calls == 0);
        const auto lines = read_trace(dir);
        bool open_denied = false;
        for (const auto& j : lines) {
            if (j.at("type") == "open")
                open_denied = j.at("ok") == false && j.at("message").get<std::string>().find(
                                                         "navigation_denied") != std::string::npos;
        }
        CHECK(open_denied);
        fs::remove_all(dir);
    }
}

TEST_CASE(
    "output cut off by the token budget is retried with feedback, recorded, and the run still ends cleanly") {
    // The tiny profile with a policy budget too small for any complete JSON step.
    const fs::path dir = fresh_dir("malformed");
    fs::create_directories(dir);
    nlohmann::json profile = nlohmann::json::parse(slurp(kPages + "/profile_tiny.json"));
    for (auto it = profile.begin(); it != profile.end(); ++it) {
        if (it->is_string() && (it->get<std::string>().find(".md") != std::string::npos ||
                                it->get<std::string>().find(".json") != std::string::npos)) {
            *it = (fs::path(kPages) / it->get<std::string>()).lexically_normal().string();
        }
    }
    profile["policy"]["max_tokens"] = 6;
    profile["policy"]["retries"] = 1;
    std::ofstream(dir / "profile.json") << profile.dump(1);

    test::TestHttpServer server(kPages);
    auto agent = make_agent((dir / "profile.json").string());
    const fs::path trace_dir = dir / "trace";
    const RunResult r = agent->run(small_run(server.url("/index.html"), trace_dir.string(), 2));
    CHECK(r.status == RunStatus::kNoAnswer);
    CHECK(r.errors == 2);
    CHECK(r.steps == 2);
    const auto lines = read_trace(trace_dir);
    int cut = 0, feedback_retries = 0;
    for (const auto& j : lines) {
        if (j.at("type") == "model_call") {
            if (j.at("finish") == "length" && !j.at("error").get<std::string>().empty()) ++cut;
            if (j.at("attempt") == 1) ++feedback_retries;
        }
    }
    CHECK(cut == 4);
    CHECK(feedback_retries == 2);
    CHECK(fs::exists(trace_dir / "report.html"));
    fs::remove_all(dir);
}

TEST_CASE("a browser killed mid-run is recorded and the run goes on") {
    test::TestHttpServer server(kPages);
    auto agent = make_agent();
    const fs::path dir = fresh_dir("crash");
    int killed_pid = 0;
    RunResult r;
    // The random model may answer at step 1 and have the answer accepted, which ends the run before the
    // kill can show: the first seed whose run has a second step is the one checked.
    for (uint64_t seed = 0; seed < 6 && r.steps < 2; ++seed) {
        fs::remove_all(dir);
        RunOptions o = small_run(server.url("/index.html"), dir.string(), 3);
        o.seed = seed;
        r = agent->run(o, [&](const StepEvent& e) {
            if (e.kind == StepEventKind::kStep && e.step == 1 && agent->browser_pid() > 0) {
                killed_pid = agent->browser_pid();
                ::kill(killed_pid, SIGKILL);
            }
        });
    }
    REQUIRE(killed_pid > 0);
    MESSAGE("status " << std::string(run_status_name(r.status)) << ", steps " << r.steps);
    CHECK(r.status != RunStatus::kError);
    REQUIRE(r.steps >= 2);  // the run went on after the kill
    const auto lines = read_trace(dir);
    CHECK(lines.back().at("type") == "run_end");
    // The crash shows up: an event about the restart, or a failed action / screenshot naming the browser.
    CHECK(any_line_mentions(lines, "browser_restarted"));
    CHECK(agent->browser_pid() != killed_pid);
    fs::remove_all(dir);
}

TEST_CASE("BrowserEnvironment executes typed actions at mapped points on a real page (DSF 2)") {
    test::TestHttpServer server(kPages);
    tools::BrowserOptions bo;
    auto browser = tools::Browser::launch(bo);
    tools::SessionOptions so;
    so.viewport.css_width = 320;
    so.viewport.css_height = 240;
    so.viewport.device_scale_factor = 2.0;
    so.guard = tools::NavigationGuard({"127.0.0.1"}, {});
    auto session = browser->new_session(so);
    BrowserEnvironment env(*session, BrowserEnvironmentOptions{0.8, std::chrono::milliseconds(100),
                                                               std::chrono::milliseconds(50)});
    REQUIRE(env.open(server.url("/index.html")).ok);
    Observation obs = env.observe();
    REQUIRE(obs.image);
    CHECK(obs.frame.width == 640);
    CHECK(obs.frame.height == 480);
    CHECK(obs.frame.pixels_per_css == doctest::Approx(2.0));
    CHECK(obs.title == "Agent test shop");

    // The red kettle box spans CSS x 10..300, y 160..200: its centre (155, 180) is (484, 750) in 0–1000.
    const tools::CssPoint red = to_css(PointConvention::kNormalized1000, 484, 750, {640, 480}, obs.frame);
    CHECK(red.x == doctest::Approx(154.88));
    CHECK(red.y == doctest::Approx(180));
    CHECK(env.execute(ClickAction{"red kettle", 484, 750}, red).ok);
    CHECK(session->evaluate("document.getElementById('c').textContent") == "clicked");

    // Write into the search box (CSS 10..210 × 10..~30) given in pixels of a half-size sent image, then Go.
    const tools::CssPoint box = to_css(PointConvention::kImagePixels, 100, 20, {320, 240}, obs.frame);
    CHECK(env.execute(WriteAction{"kettle", "search box", 0, 0, true, false}, box).ok);
    CHECK(env.execute(WriteAction{"blue kettle", "search box", 0, 0, true, false}, box).ok);  // cleared first
    CHECK(env.execute(ClickAction{"Go", 0, 0}, tools::CssPoint{260, 22}).ok);
    CHECK(session->evaluate("document.getElementById('out').textContent") == "searched: blue kettle");

    CHECK(env.execute(ScrollAction{ScrollDirection::kDown}, {}).ok);
    CHECK(session->evaluate("window.scrollY").get<double>() > 100);

    CHECK(env.execute(GotoAction{server.url("/page2.html")}, {}).ok);
    CHECK(env.observe().title == "Blue kettle");
    CHECK(env.execute(BackAction{}, {}).ok);
    CHECK(env.observe().title == "Agent test shop");
    // A denied navigation is an outcome, not an exception.
    const ActionOutcome denied = env.execute(GotoAction{"http://blocked.example.com/"}, {});
    CHECK_FALSE(denied.ok);
    CHECK(denied.error_kind == "navigation_denied");
    // A click without a point is refused.
    CHECK_FALSE(env.execute(ClickAction{"x", 1, 1}, {}).ok);

    // A cancelled run does not wait a `wait` action out.
    std::atomic<bool> cancel{false};
    BrowserEnvironmentOptions waiting;
    waiting.cancel = &cancel;
    BrowserEnvironment patient(*session, waiting);
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        cancel.store(true);
    });
    const auto t0 = std::chrono::steady_clock::now();
    const ActionOutcome waited = patient.execute(WaitAction{10}, {});
    canceller.join();
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
    CHECK(waited.message.find("wait cancelled after") != std::string::npos);
    browser->shutdown();
}

TEST_CASE("two agents share one engine and one browser (one context per run)") {
    test::TestHttpServer server(kPages);
    auto browser = tools::Browser::launch(tools::BrowserOptions{});
    auto engine = std::shared_ptr<model::Engine>(model::open_cpu_engine(kModel));
    AgentConfig config;
    config.model_dir = kModel;
    config.profile = kPages + "/profile_tiny.json";
    config.browser = browser;
    Agent a(engine, config), b(engine, config);
    const auto dir = fs::temp_directory_path() / "surf_agent_shared";
    fs::remove_all(dir);
    RunResult ra, rb;
    std::thread ta([&] { ra = a.run(small_run(server.url("/index.html"), (dir / "a").string(), 2)); });
    std::thread tb([&] { rb = b.run(small_run(server.url("/page2.html"), (dir / "b").string(), 2)); });
    ta.join();
    tb.join();
    CHECK(ra.status != RunStatus::kError);
    CHECK(rb.status != RunStatus::kError);
    CHECK(a.browser_pid() == b.browser_pid());
    CHECK(a.browser_pid() == static_cast<int>(browser->pid()));
    CHECK(browser->launches() == 1);
}

TEST_CASE("a run on a shared browser is refused when its resolver leaves a denied host name resolvable") {
    test::TestHttpServer server(kPages);
    tools::BrowserOptions bo;
    bo.deny_hosts = {"ads.test"};
    auto browser = tools::Browser::launch(bo);
    AgentConfig config;
    config.model_dir = kModel;
    config.profile = kPages + "/profile_tiny.json";
    config.browser = browser;
    auto agent = Agent::create(config);
    const auto dir = fs::temp_directory_path() / "surf_agent_shared_deny";
    fs::remove_all(dir);
    RunOptions o = small_run(server.url("/index.html"), (dir / "a").string(), 1);
    o.allow_domains.clear();
    o.deny_domains = {"x.ads.test", "tracker.test"};
    try {
        agent->run(o);
        FAIL("a run with a host name the shared browser resolves was accepted");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(std::string(e.what()).find("deny_domains: tracker.test not denied by the shared browser") !=
              std::string::npos);
    }
    o.deny_domains = {"x.ads.test"};  // under the launched rule: the run goes ahead on the shared browser
    CHECK(agent->run(o).status != RunStatus::kError);
    CHECK(browser->launches() == 1);
    browser->shutdown();
}

TEST_CASE("a run starts with the storage state it is given and returns the state it ends with") {
    test::TestHttpServer server(kPages);
    auto agent = make_agent();
    RunOptions run = small_run(server.url("/index.html"), "");
    run.max_steps = 1;
    run.use_validator = false;
    run.storage_state = {{"cookies", {{{"name", "session"}, {"value", "s-77"}, {"domain", "127.0.0.1"}}}},
                         {"origins", nlohmann::json::array()}};
    run.save_storage_state = true;
    const RunResult r = agent->run(run);
    CHECK(r.status != RunStatus::kError);
    MESSAGE(r.storage_state.dump());
    REQUIRE(r.storage_state.contains("cookies"));
    bool kept = false;
    for (const auto& c : r.storage_state["cookies"]) kept |= c["name"] == "session" && c["value"] == "s-77";
    CHECK(kept);
}
