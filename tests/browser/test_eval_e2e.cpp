// End to end for `surf eval`: the local test site (tests/browser/eval_site/, static pages with
// known answers served on 127.0.0.1), real Chromium, the tiny random fixture model on the CPU engine with
// agent_pages/profile_tiny.json. One engine and one browser serve all concurrent tasks. Checked: a run at
// concurrency 4 writes results.jsonl, summary.json, report.html and a trace per task; a task whose server
// never answers and a task whose browser context crashes are recorded as errors while the others finish;
// a stopped run and a run killed mid-write (simulated by a torn last line) resume without duplicates;
// shards merged give the same task set as one run; a profile that lists elements gets the page's list.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "agent/conversation.h"
#include "agent/replay.h"
#include "eval/eval_mind2web.h"
#include "eval/eval_report.h"
#include "eval/eval_runner.h"
#include "model/engine.h"
#include "tests/browser/forced_profile.h"
#include "tests/browser/test_http_server.h"
#include "tests/test_util.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

using namespace surf;
using namespace surf::eval;
namespace fs = std::filesystem;

namespace {

const std::string kSite = SURF_SOURCE_DIR "/tests/browser/eval_site";
const std::string kProfile = SURF_SOURCE_DIR "/tests/browser/agent_pages/profile_tiny.json";
const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

std::string slurp(const fs::path& p) {
    return surf::test::read_file(p.string());
}

fs::path fresh_dir(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("surf_eval_e2e_" + name);
    fs::remove_all(dir);
    return dir;
}

// The site's task file with the server's address filled in.
std::vector<EvalTask> site_tasks(const test::TestHttpServer& server) {
    std::string text = slurp(kSite + "/tasks.jsonl.in");
    const std::string base = server.url("");
    for (size_t p; (p = text.find("{base}")) != std::string::npos;) text.replace(p, 6, base);
    return parse_tasks(text, "tasks.jsonl");
}

std::vector<EvalTask> only(const std::vector<EvalTask>& tasks, const std::set<std::string>& ids) {
    std::vector<EvalTask> out;
    for (const EvalTask& t : tasks)
        if (ids.count(t.id)) out.push_back(t);
    return out;
}

const std::set<std::string> kGood = {"Freedonia--0", "Shop--0", "Shop--1", "Weather--0"};

// Everything the runs share: one engine (loaded once for the whole file), one browser per fixture.
struct Fixture {
    std::shared_ptr<model::Engine> engine = model::open_cpu_engine(kModel);
    std::shared_ptr<agent::EngineChatModel> chat = agent::EngineChatModel::open(engine);
    agent::PromptProfile profile = agent::load_profile(kProfile);
    std::shared_ptr<tools::Browser> browser;

    Fixture() {
        tools::BrowserOptions bo;
        // A small JavaScript heap, so crash.html can kill its renderer by exhausting it (a crashed context).
        bo.extra_args = {"--js-flags=--max-old-space-size=64"};
        browser = tools::Browser::launch(bo);
    }
    ~Fixture() { browser->shutdown(); }

    EvalOptions options(int concurrency) const {
        EvalOptions o;
        o.concurrency = concurrency;
        o.max_steps = 2;
        o.attempts = 1;
        o.task_timeout_seconds = 60;
        o.page_timeout_seconds = 4;
        o.viewport_width = 320;
        o.viewport_height = 240;
        o.max_wait_seconds = 0.2;
        o.allow_domains = {"127.0.0.1"};
        o.judge_screenshots = 2;
        return o;
    }

    std::unique_ptr<EvalRunner> runner(const EvalOptions& o, bool with_judge) {
        std::shared_ptr<Judge> judge;
        if (with_judge) {
            LocalJudgeOptions jo;
            jo.schema = kSite + "/judge_tiny.schema.json";
            jo.settings.max_tokens = 40;
            judge = std::make_shared<LocalJudge>(chat, jo);
        }
        auto r = std::make_unique<EvalRunner>(chat, profile, judge, o);
        r->set_browser(browser);
        return r;
    }
};

Fixture& fixture() {
    static Fixture f;
    return f;
}

// Every chart of the page at `url` is readable: no two text labels of one chart overlap and none is in
// exponent notation; every image (HTML or SVG) decodes; a replay video, if the page has one, loads. Returns
// "" or what is wrong, as a person looking at the page in Chromium would find it.
std::string check_page(tools::BrowserSession& session, const std::string& url) {
    if (!session.navigate(url).ok()) return "cannot open " + url;
    const nlohmann::json problems = session.evaluate(R"JS((async () => {
      const out = [];
      for (const svg of document.querySelectorAll('svg')) {
        const texts = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBBox()]);
        for (const [s] of texts) if (/\de[+-]?\d/.test(s)) out.push('exponent label ' + s);
        for (let i = 0; i < texts.length; ++i)
          for (let j = i + 1; j < texts.length; ++j) {
            const a = texts[i][1], b = texts[j][1];
            if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height)
              out.push('labels overlap: ' + texts[i][0] + ' / ' + texts[j][0]);
          }
      }
      const sources = [...document.images].map(i => i.src)
          .concat([...document.querySelectorAll('image')].map(i => i.href.baseVal));
      for (const src of sources) {
        const im = new Image();
        im.src = src;
        try { await im.decode(); } catch (e) { out.push('image does not load: ' + src.slice(0, 60)); }
      }
      const video = document.querySelector('video');
      if (video) {
        const width = await new Promise(done => {
          if (video.readyState >= 1) return done(video.videoWidth);
          video.onloadedmetadata = () => done(video.videoWidth);
          video.onerror = () => done(-1);
          setTimeout(() => done(-2), 5000);
        });
        if (!(width > 0)) out.push('the replay video does not load (' + width + ')');
      }
      return out;
    })())JS");
    std::string text;
    for (const auto& p : problems) text += p.get<std::string>() + "\n";
    return text;
}

std::map<std::string, TaskRecord> by_id(const std::vector<TaskRecord>& records) {
    std::map<std::string, TaskRecord> out;
    for (const TaskRecord& r : records) {
        CHECK_MESSAGE(out.emplace(r.id, r).second, "task recorded twice: " << r.id);
    }
    return out;
}

}  // namespace

TEST_CASE(
    "concurrency 4: results, traces, summary and report; a hung page and a crashed context are errors") {
    std::atomic<bool> release{false};
    test::TestHttpServer server(kSite, [&](const test::HttpRequest& req, test::HttpResponse&) {
        if (req.path != "/hang") return false;
        // A handler that never answers (until the test ends): the start page cannot load.
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return false;
    });
    // Released before the server is destroyed (it joins its handler threads), however the test ends.
    struct Release {
        std::atomic<bool>& flag;
        ~Release() { flag = true; }
    } release_on_exit{release};
    Fixture& f = fixture();
    const fs::path dir = fresh_dir("main");
    auto runner = f.runner(f.options(4), true);
    size_t max_running = 0;
    std::atomic<bool> done{false};
    std::thread watch([&] {
        while (!done.load()) {
            max_running = std::max(max_running, runner->progress().running);
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    const auto t0 = std::chrono::steady_clock::now();
    const EvalOutcome out = runner->run(site_tasks(server), dir.string());
    done = true;
    watch.join();
    release = true;
    MESSAGE("6 tasks at concurrency 4: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s, "
            << out.progress.tokens << " tokens");
    CHECK_FALSE(out.stopped);
    CHECK(max_running >= 2);
    CHECK(max_running <= 4);
    CHECK(out.progress.done == 6);

    const auto records = read_results((dir / "results.jsonl").string());
    const auto rs = by_id(records);
    REQUIRE(rs.size() == 6);
    const TaskRecord& hang = rs.at("Faults--hang");
    CHECK(hang.status == "error");
    CHECK(hang.error.find("start page did not load") != std::string::npos);
    CHECK(hang.success == std::optional<bool>(false));
    const TaskRecord& crash = rs.at("Faults--crash");
    CHECK(crash.status == "error");
    CHECK(crash.error.find("crashed") != std::string::npos);
    for (const std::string& id : kGood) {
        const TaskRecord& r = rs.at(id);
        INFO(id << ": " << r.status << " " << r.error);
        CHECK(r.status != "error");
        CHECK(r.steps >= 1);
        CHECK(r.steps <= (id == "Shop--1" ? 2 : 2));
        CHECK(r.prompt_tokens > 0);
        CHECK(r.image_tokens > 0);
        CHECK(r.model_seconds > 0);
        CHECK(r.browser_seconds > 0);
        CHECK(r.wall_seconds >= r.model_seconds * 0.5);
        CHECK(r.judge == "local");
        CHECK(fs::exists(dir / r.trace / "trace.jsonl"));
        CHECK(fs::exists(dir / r.trace / "report.html"));
        if (r.answer.empty()) {
            CHECK(r.judge_success == std::optional<bool>(false));
        } else {
            CHECK(r.judge_tokens > 0);  // the judge ran on the engine (its verdict is random)
        }
        CHECK(r.success.has_value());
    }
    // Reference answers are matched when the task has them (the random answers almost never match).
    CHECK(rs.at("Freedonia--0").exact_match.has_value());
    CHECK_FALSE(rs.at("Weather--0").exact_match.has_value());

    const auto summary = nlohmann::json::parse(slurp(dir / "summary.json"));
    CHECK(summary["tasks"] == 6);
    CHECK(summary["errors"] == 2);
    CHECK(summary["per_site"].contains("Shop"));
    const std::string html = slurp(dir / "report.html");
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(html.find("<svg") != std::string::npos);
    for (const auto& [id, r] : rs)
        CHECK(html.find("href=\"" + r.trace + "/report.html\"") != std::string::npos);

    // Both reports as a person sees them in Chromium: readable charts, every screenshot and the replay load.
    {
        tools::SessionOptions so;
        so.guard = tools::NavigationGuard({}, {}, tools::LocalSchemes::kFileAlways);
        so.guard.set_file_root(dir.string());
        auto session = f.browser->new_session(so);
        CHECK(check_page(*session, "file://" + (dir / "report.html").string()) == "");
        // The task table's script ran; thumbnails of the traces' last screenshots; sorting and filtering.
        CHECK(session->evaluate("document.body.dataset.ready").get<std::string>() == "1");
        CHECK(session->evaluate("document.querySelectorAll('img.thumb').length").get<int>() >= 4);
        const std::string steps_column =
            "[...document.getElementById('tasks').tBodies[0].rows].map(r => +r.cells[7].textContent)";
        session->evaluate("document.querySelectorAll('#tasks th')[7].click()");
        CHECK(session->evaluate("(c => c.every((v, i) => !i || c[i - 1] <= v))(" + steps_column + ")")
                  .get<bool>());
        session->evaluate("document.querySelectorAll('#tasks th')[7].click()");
        CHECK(session->evaluate("(c => c.every((v, i) => !i || c[i - 1] >= v))(" + steps_column + ")")
                  .get<bool>());
        CHECK(session
                  ->evaluate("(() => { const f = document.getElementById('filter'); f.value = 'weather--0';"
                             " f.dispatchEvent(new Event('input'));"
                             " return [...document.getElementById('tasks').tBodies[0].rows]"
                             ".filter(r => !r.hidden).length; })()")
                  .get<int>() == 1);
        const TaskRecord& shop = rs.at("Shop--0");
        CHECK(check_page(*session, "file://" + (dir / shop.trace / "report.html").string()) == "");
        if (agent::replay_available()) CHECK(fs::exists(dir / shop.trace / "replay.webm"));
        CHECK(session->evaluate("document.images.length + document.querySelectorAll('image').length")
                  .get<int>() > 0);
    }

    // Online-Mind2Web's WebJudge layout from the real traces: a folder per task, one thought per step, one
    // screenshot per observed step, the answer in final_result_response.
    const Mind2WebExport m2w = write_mind2web(dir.string(), records, (dir / "mind2web").string());
    CHECK(m2w.tasks == 6);
    for (const std::string& id : kGood) {
        const TaskRecord& r = rs.at(id);
        const fs::path task_dir = dir / "mind2web" / task_dir_name(id);
        const auto result = nlohmann::json::parse(slurp(task_dir / "result.json"));
        CHECK(result["task"] == r.question);
        CHECK(result["final_result_response"] == r.answer);
        CHECK(result["thoughts"].size() == static_cast<size_t>(r.steps));
        CHECK(result["action_history"].size() <= static_cast<size_t>(r.steps));
        CHECK(fs::exists(task_dir / "trajectory" / "0.png"));
    }

    // Running again with the same folder finds everything done: nothing runs, nothing is written twice.
    const std::string before = slurp(dir / "results.jsonl");
    auto again = f.runner(f.options(4), true);
    const EvalOutcome second = again->run(site_tasks(server), dir.string());
    CHECK(second.progress.skipped == 6);
    CHECK(second.progress.done == 0);
    CHECK(slurp(dir / "results.jsonl") == before);
    fs::remove_all(dir);
}

TEST_CASE("the report check finds overlapping or exponent labels, broken images and a broken video") {
    const fs::path dir = fresh_dir("bad_page");
    fs::create_directories(dir);
    test::write_file(
        (dir / "bad.html").string(),
        "<!DOCTYPE html><html><body><svg width='200' height='50'><text x='10' y='20'>1e+03</text>"
        "<text x='14' y='22'>2</text></svg><img src='missing.png'>"
        "<video src='missing.webm'></video></body></html>");
    tools::SessionOptions so;
    so.guard = tools::NavigationGuard({}, {}, tools::LocalSchemes::kFileAlways);
    so.guard.set_file_root(dir.string());
    auto session = fixture().browser->new_session(so);
    const std::string problems = check_page(*session, "file://" + (dir / "bad.html").string());
    CHECK(problems.find("exponent label 1e+03") != std::string::npos);
    CHECK(problems.find("labels overlap: 1e+03 / 2") != std::string::npos);
    CHECK(problems.find("image does not load") != std::string::npos);
    CHECK(problems.find("the replay video does not load") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("a stopped run and a run killed mid-write resume without duplicates") {
    test::TestHttpServer server(kSite);
    Fixture& f = fixture();
    const fs::path dir = fresh_dir("resume");
    const auto tasks = only(site_tasks(server), kGood);
    auto runner = f.runner(f.options(2), false);
    // Ctrl-C after the first task is recorded: the running task is cancelled and not recorded.
    runner->on_record = [&](const TaskRecord&) { runner->stop(); };
    const EvalOutcome first = runner->run(tasks, dir.string());
    CHECK(first.stopped);
    const auto after_stop = read_results((dir / "results.jsonl").string());
    MESSAGE("recorded before the stop took effect: " << after_stop.size());
    REQUIRE(after_stop.size() >= 1);
    REQUIRE(after_stop.size() < 4);

    auto resumed = f.runner(f.options(2), false);
    const EvalOutcome second = resumed->run(tasks, dir.string());
    CHECK_FALSE(second.stopped);
    CHECK(second.progress.skipped == after_stop.size());
    auto all = read_results((dir / "results.jsonl").string());
    CHECK(by_id(all).size() == 4);
    CHECK(all.size() == 4);
    // Tasks recorded before the stop were not run again.
    for (const TaskRecord& r : after_stop) CHECK(by_id(all).at(r.id).started_at == r.started_at);

    // kill -9 in the middle of writing the last line: cut it in half. The torn task runs again, once.
    const std::string text = slurp(dir / "results.jsonl");
    const size_t last_start = text.rfind('\n', text.size() - 2) + 1;
    const std::string torn_id = all.back().id;
    fs::resize_file(dir / "results.jsonl", last_start + (text.size() - last_start) / 2);
    auto after_kill = f.runner(f.options(2), false);
    const EvalOutcome third = after_kill->run(tasks, dir.string());
    CHECK(third.progress.skipped == 3);
    CHECK(third.progress.done == 1);
    all = read_results((dir / "results.jsonl").string());
    CHECK(all.size() == 4);
    CHECK(by_id(all).size() == 4);
    CHECK(all.back().id == torn_id);
    fs::remove_all(dir);
}

TEST_CASE("shards merged give the same task set as one run") {
    test::TestHttpServer server(kSite);
    Fixture& f = fixture();
    const auto tasks = only(site_tasks(server), kGood);
    const fs::path root = fresh_dir("shards");
    std::vector<std::string> dirs;
    for (int i = 0; i < 2; ++i) {
        EvalOptions o = f.options(2);
        o.max_steps = 1;  // the forced answer at once: this test is about bookkeeping
        o.shard = std::to_string(i) + "/2";
        const auto part = select_shard(tasks, parse_shard(o.shard));
        CHECK(part.size() == 2);
        dirs.push_back((root / ("shard" + std::to_string(i))).string());
        f.runner(o, false)->run(part, dirs.back());
    }
    const auto merged = merge_results(dirs, (root / "merged").string());
    std::set<std::string> ids;
    for (const TaskRecord& r : merged) {
        ids.insert(r.id);
        CHECK(fs::exists(root / "merged" / r.trace / "trace.jsonl"));
        CHECK_FALSE(r.shard.empty());
    }
    CHECK(ids == kGood);
    CHECK(merged.size() == 4);
    CHECK(nlohmann::json::parse(slurp(root / "merged" / "summary.json"))["tasks"] == 4);
    fs::remove_all(root);
}

TEST_CASE("an evaluated task's agent reads the page's element list when its profile lists elements") {
    test::TestHttpServer server(kSite);
    Fixture& f = fixture();
    const fs::path dir = fresh_dir("elements");
    fs::create_directories(dir);
    // The e2e profile with surf-tiny's turn prompts, which carry {elements}, and a list of 20 lines.
    nlohmann::json profile = test::tiny_profile_json();
    const std::string prompts = SURF_SOURCE_DIR "/models/surf-tiny/prompts/";
    profile["policy_turn"] = prompts + "policy_turn.md";
    profile["localizer_prompt"] = prompts + "localizer.md";
    profile["validator_turn"] = prompts + "validator_turn.md";
    profile["page_elements"] = 20;
    std::ofstream(dir / "profile.json") << profile.dump(1);
    EvalOptions o = f.options(1);
    o.max_steps = 1;
    EvalRunner runner(f.chat, agent::load_profile((dir / "profile.json").string()), nullptr, o);
    runner.set_browser(f.browser);
    runner.run(only(site_tasks(server), {"Shop--0"}), (dir / "run").string());
    const auto records = read_results((dir / "run" / "results.jsonl").string());
    REQUIRE(records.size() == 1);
    std::string listed;
    std::ifstream trace(dir / "run" / records[0].trace / "trace.jsonl");
    for (std::string line; std::getline(trace, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j.value("type", "") == "step") listed = j.value("elements", "");
    }
    INFO(listed);
    CHECK(listed.find("the \"Facts\" link (") != std::string::npos);
    CHECK(listed.find("Blue kettle") != std::string::npos);
    fs::remove_all(dir);
}
