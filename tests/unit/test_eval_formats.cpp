// Task-file formats of `surf eval`, detected from the content: WebVoyager (WebVoyager_data.jsonl and
// GAIA_web.jsonl), Online-Mind2Web (a JSON array), surf's own JSONL; samples in the real layouts under
// tests/fixtures/eval_formats/. Also the Online-Mind2Web output (WebJudge's result.json + trajectory/).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "eval/eval_mind2web.h"
#include "eval/eval_tasks.h"
#include "tests/test_util.h"

using namespace surf;
using namespace surf::eval;
using surf::test::error_of;
namespace fs = std::filesystem;

namespace {

const std::string kDir = SURF_FIXTURES_DIR "/eval_formats/";

std::string fixture(const std::string& name) {
    return surf::test::read_file(kDir + name);
}

}  // namespace

TEST_CASE(
    "WebVoyager_data.jsonl: web_name, id, ques, web; reference_answer.json attaches by site and number") {
    TaskFile f = load_task_file(kDir + "WebVoyager_data.jsonl");
    CHECK(f.format == TaskFormat::kWebVoyager);
    REQUIRE(f.tasks.size() == 5);  // the last line has no newline
    CHECK(f.tasks[3].id == "Cambridge Dictionary--2");
    CHECK(f.tasks[3].site == "Cambridge Dictionary");
    CHECK(f.tasks[3].question.find("\"ubiquitous\"") != std::string::npos);
    CHECK(f.tasks[3].start_url == "https://dictionary.cambridge.org/");
    CHECK(f.tasks[4].line == 5);
    CHECK(f.tasks[0].fields.empty());
    CHECK(attach_references(f.tasks, fixture("reference_answer.json"), "reference_answer.json") == 3);
    CHECK(f.tasks[1].references ==
          std::vector<std::string>{
              "Quick Chocolate Chip Cookies: butter, sugar, eggs, flour, chocolate chips"});
    CHECK(f.tasks[3].reference_type == "golden");
    CHECK(f.tasks[2].references.empty());  // Amazon has no answers in the sample
}

TEST_CASE("GAIA_web.jsonl loads: no web_name, its Final answer is the golden reference, Level is carried") {
    const TaskFile f = load_task_file(kDir + "GAIA_web.jsonl");
    CHECK(f.format == TaskFormat::kWebVoyager);
    REQUIRE(f.tasks.size() == 3);
    const EvalTask& t = f.tasks[2];
    CHECK(t.id == "level2-0");
    CHECK(t.start_url == "https://www.google.com/");
    CHECK(t.site == "google.com");  // no web_name: the start URL's host
    CHECK(t.references == std::vector<std::string>{"Ada Lovelace"});
    CHECK(t.reference_type == "golden");
    CHECK(t.fields["Level"] == 2);
    CHECK(t.fields["task_id"] == "c7e1b3d9-2f4a-4b8c-9d6e-1a3f5c7e9b24");
    CHECK(!t.fields.contains("Final answer"));
    // A numeric answer is read as text.
    const EvalTask n =
        parse_task_line(R"({"id": "g", "ques": "q", "web": "http://x/", "Final answer": 17})", "g:1");
    CHECK(n.references == std::vector<std::string>{"17"});
}

TEST_CASE("Online-Mind2Web: a JSON array of task_id, confirmed_task, website; other fields are carried") {
    const TaskFile f = load_task_file(kDir + "Online_Mind2Web.json");
    CHECK(f.format == TaskFormat::kMind2Web);
    REQUIRE(f.tasks.size() == 3);
    const EvalTask& t = f.tasks[1];
    CHECK(t.id == "a41b7c2e5d8f4a0b9c3e6f1d2a7b8c94");
    CHECK(t.question == "Show the opening hours of the nearest public library to the zip code 10001.");
    CHECK(t.start_url == "https://www.nypl.org/");
    CHECK(t.site == "nypl.org");
    CHECK(t.references.empty());
    CHECK(t.fields.dump() == R"({"reference_length":4,"level":"easy"})");  // file order kept
    CHECK(f.tasks[0].line == 2);  // the line each array element starts on
    CHECK(t.line == 9);
    CHECK(f.tasks[2].line == 16);
}

TEST_CASE("surf's own JSONL: id, task, url and the optional fields; unknown keys are errors with a guess") {
    const TaskFile f = load_task_file(kDir + "surf_tasks.jsonl");
    CHECK(f.format == TaskFormat::kSurf);
    REQUIRE(f.tasks.size() == 3);
    CHECK(f.tasks[0].site == "Shop");
    CHECK(f.tasks[0].references == std::vector<std::string>{"25 EUR", "25 euros"});
    CHECK(f.tasks[0].max_steps == 8);
    CHECK(f.tasks[1].site == "wiki.example.org");
    CHECK(f.tasks[1].allowed_domains == std::vector<std::string>{"wiki.example.org"});
    CHECK(f.tasks[1].viewport_width == 1280);
    CHECK(f.tasks[2].id == "3");
    CHECK(f.tasks[2].site == "example.net");
    CHECK(f.tasks[2].fields["difficulty"] == "easy");
    CHECK(error_of([] {
              parse_tasks(R"({"id": "a", "task": "q", "url": "http://x/", "max_step": 3})", "s.jsonl");
          }) == "s.jsonl:1: unknown field \"max_step\" (did you mean \"max_steps\"?) (surf task)");
    CHECK(error_of([] {
              parse_tasks(R"({"id": "a", "task": "q", "url": "http://x/", "answer": "y"})", "s.jsonl");
          }).find("unknown field \"answer\"") != std::string::npos);
    CHECK(error_of([] { parse_tasks(R"({"id": "a", "task": "q"})", "s.jsonl"); }) ==
          "s.jsonl:1: missing field \"url\" (surf task)");
    CHECK(error_of([] {
              parse_tasks(R"({"id": "a", "task": "q", "url": "http://x/", "extra": 3})", "s.jsonl");
          }).find("field \"extra\" must be an object") != std::string::npos);
}

TEST_CASE(
    "format detection: by content, the first task decides, errors name the file, line, field and format") {
    // The same file name, three formats: the name plays no part.
    CHECK(parse_task_file(R"({"id": "a", "ques": "q", "web": "http://x/"})", "t.json").format ==
          TaskFormat::kWebVoyager);
    CHECK(parse_task_file(R"([{"task_id": "a", "confirmed_task": "q", "website": "http://x/"}])", "t.json")
              .format == TaskFormat::kMind2Web);
    CHECK(parse_task_file(R"({"task_id": "a", "confirmed_task": "q", "website": "http://x/"})", "t.json")
              .format == TaskFormat::kMind2Web);  // Online-Mind2Web as JSON Lines
    CHECK(parse_task_file(R"([{"id": "a", "task": "q", "url": "http://x/"}])", "t.json").format ==
          TaskFormat::kSurf);
    CHECK(
        parse_task_file("\xEF\xBB\xBF{\"id\": \"a\", \"task\": \"q\", \"url\": \"http://x/\"}", "t").format ==
        TaskFormat::kSurf);  // a UTF-8 byte order mark is skipped

    // WebVoyager's GAIA line used to be refused for lacking web_name; a line missing ques still is.
    CHECK(error_of([] { parse_tasks(R"({"id": "a", "web": "http://x/"})", "w.jsonl"); }) ==
          "w.jsonl:1: missing field \"ques\" (WebVoyager task)");
    // A later line in another format is read in the first line's format, and the error says both.
    CHECK(error_of([] {
              parse_tasks(
                  "{\"id\": \"a\", \"ques\": \"q\", \"web\": \"http://x/\"}\n\n"
                  "{\"id\": \"b\", \"task\": \"q\", \"url\": \"http://x/\"}",
                  "m.jsonl");
          }) ==
          "m.jsonl:3: missing field \"ques\" (WebVoyager task, as line 1 is; id, ques, web are required; "
          "this line looks like a surf task)");
    // Online-Mind2Web errors point at the element's line in the array.
    CHECK(error_of([] {
              parse_tasks(
                  "[\n  {\"task_id\": \"a\", \"confirmed_task\": \"q\", \"website\": \"http://x/\"},\n"
                  "  {\"task_id\": \"b\", \"confirmed_task\": \"q\",\n   \"website\": \"x.com\"}\n]",
                  "o.json");
          }).find("o.json:3: field \"website\": ") == 0);
    CHECK(error_of([] { parse_tasks("[1]", "o.json"); }) == "o.json:1: task 1 is not a JSON object");
    CHECK(error_of([] { parse_tasks("[{\"a\": 1}", "o.json"); }).find("o.json: not valid JSON") == 0);
    CHECK(error_of([] {
              parse_tasks(R"({"name": "x", "goal": "y"})", "u.jsonl");
          }).find("u.jsonl:1: not a task in a known format (fields: name, goal)") == 0);
    CHECK(error_of([] { parse_tasks("\n\ntask: find\n", "y.yaml"); }).find("y.yaml:3: not a task file") == 0);
    CHECK(error_of([] { parse_tasks("[]", "e.json"); }) == "e.json: no tasks");
    CHECK(error_of([] {
              parse_tasks(R"([{"task_id": "a", "confirmed_task": "q", "website": "http://x/"},
                             {"task_id": "a", "confirmed_task": "r", "website": "http://x/"}])",
                          "d.json");
          }) == "d.json:2: task id \"a\" repeats the task on line 1");
}

TEST_CASE("site names come from the URL's host") {
    CHECK(site_of_url("https://www.kbb.com/cars?x=1") == "kbb.com");
    CHECK(site_of_url("http://127.0.0.1:8080/a") == "127.0.0.1");
    CHECK(site_of_url("HTTPS://Example.ORG") == "example.org");
    CHECK(site_of_url("file:///tmp/a.html") == "file");
    CHECK(site_of_url("about:blank") == "about");
}

TEST_CASE(
    "Online-Mind2Web output: result.json with WebJudge's fields and the screenshots numbered in order") {
    const fs::path dir = fs::temp_directory_path() / "surf_test_mind2web";
    fs::remove_all(dir);
    const fs::path trace = dir / "run" / "traces" / "t1";
    fs::create_directories(trace / "screenshots");
    for (int i = 1; i <= 3; ++i)
        std::ofstream(trace / "screenshots" / ("step_00" + std::to_string(i) + ".png")) << "png" << i;
    {
        // Step lines as agent/trace.cpp writes them: the action is the action's JSON as text.
        const auto step = [](int n, const std::string& thought, const nlohmann::json& action) {
            char shot[64];
            std::snprintf(shot, sizeof shot, "screenshots/step_%03d.png", n);
            return nlohmann::json{{"type", "step"},
                                  {"step", n},
                                  {"screenshot", shot},
                                  {"thought", thought},
                                  {"action", action.dump()}}
                .dump();
        };
        std::ofstream t(trace / "trace.jsonl");
        t << R"({"type": "run_start", "task": "q"})"
          << "\n"
          << step(1, "search", {{"type", "click"}, {"element", "Search box"}, {"x", 10}, {"y", 20}}) << "\n"
          << step(2, "type",
                  {{"type", "write"},
                   {"content", "Lyon"},
                   {"element", "City"},
                   {"x", 1},
                   {"y", 2},
                   {"clear", true},
                   {"press_enter", true}})
          << "\n"
          << step(3, "done", {{"type", "answer"}, {"content", "25 EUR"}}) << "\n"
          << R"({"type": "step", "step": 4, "scr)";  // a torn last line
    }
    TaskRecord done, failed;
    done.id = "t1";
    done.question = "How much is the kettle?";
    done.answer = "25 EUR";
    done.trace = "traces/t1";
    failed.id = "a/b";  // an id that is not a safe folder name
    failed.question = "q";
    failed.status = "error";
    const Mind2WebExport e = write_mind2web((dir / "run").string(), {done, failed}, (dir / "m2w").string());
    CHECK(e.tasks == 2);
    CHECK(e.screenshots == 3);
    const auto result =
        nlohmann::json::parse(surf::test::read_file((dir / "m2w" / "t1" / "result.json").string()));
    CHECK(result["task_id"] == "t1");
    CHECK(result["task"] == "How much is the kettle?");
    CHECK(result["final_result_response"] == "25 EUR");
    // The answer is agent output, not an action: it is left out of the history, as Online-Mind2Web asks.
    CHECK(result["action_history"] == nlohmann::json{"click \"Search box\"", "write \"Lyon\" into \"City\""});
    CHECK(result["thoughts"] == nlohmann::json{"search", "type", "done"});
    CHECK(surf::test::read_file((dir / "m2w" / "t1" / "trajectory" / "0.png").string()) == "png1");
    CHECK(surf::test::read_file((dir / "m2w" / "t1" / "trajectory" / "2.png").string()) == "png3");
    // An error without a trace still gets its folder (WebJudge divides by the number of folders).
    const fs::path other = dir / "m2w" / task_dir_name("a/b");
    CHECK(fs::is_empty(other / "trajectory"));
    const auto r2 = nlohmann::json::parse(surf::test::read_file((other / "result.json").string()));
    CHECK(r2["task_id"] == "a/b");
    CHECK(r2["action_history"].empty());
    // Writing again replaces a task's folder (a resumed run re-exports everything).
    std::ofstream(dir / "m2w" / "t1" / "trajectory" / "9.png") << "stale";
    write_mind2web((dir / "run").string(), {done}, (dir / "m2w").string());
    CHECK(!fs::exists(dir / "m2w" / "t1" / "trajectory" / "9.png"));
    fs::remove_all(dir);
}
