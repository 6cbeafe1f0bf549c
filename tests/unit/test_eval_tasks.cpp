// Task files for `surf eval`: WebVoyager JSONL (spec/agent.md §3.1) plus surf's optional fields, reference
// answers from WebVoyager's reference_answer.json, sharding and trace folder names. The other formats and
// format detection: test_eval_formats.cpp.
#include <doctest/doctest.h>

#include <functional>
#include <set>

#include "base/error.h"
#include "eval/eval_tasks.h"
#include "tests/test_util.h"

using namespace surf;
using namespace surf::eval;
using surf::test::error_of;

namespace {

// Two lines in WebVoyager_data.jsonl's exact shape (the real file's last line has no newline).
const std::string kWebVoyager =
    R"({"web_name": "Allrecipes", "id": "Allrecipes--0", "ques": "Provide a recipe for vegetarian lasagna.", "web": "https://www.allrecipes.com/"})"
    "\n"
    R"({"web_name": "Amazon", "id": "Amazon--3", "ques": "Find a kettle.", "web": "https://www.amazon.com/"})";

}  // namespace

TEST_CASE("WebVoyager lines parse; the last line may lack its newline; blank lines are skipped") {
    const auto tasks = parse_tasks(kWebVoyager + "\n\n", "wv.jsonl");
    REQUIRE(tasks.size() == 2);
    CHECK(tasks[0].id == "Allrecipes--0");
    CHECK(tasks[0].site == "Allrecipes");
    CHECK(tasks[0].question == "Provide a recipe for vegetarian lasagna.");
    CHECK(tasks[0].start_url == "https://www.allrecipes.com/");
    CHECK(tasks[0].references.empty());
    CHECK(tasks[0].max_steps == 0);
    CHECK(tasks[1].line == 2);
    CHECK(parse_tasks(kWebVoyager, "wv.jsonl").size() == 2);  // unterminated last line
}

TEST_CASE(
    "optional fields: reference answers, allowed domains, max steps; unknown fields are carried along") {
    const EvalTask t = parse_task_line(
        R"({"web_name": "S", "id": 7, "ques": "q", "web": "http://x/", "reference_answer": ["25 EUR", "25 euros"],
            "reference_type": "golden", "allowed_domains": ["x"], "max_steps": 4, "level": "easy"})",
        "t:1");
    CHECK(t.id == "7");
    CHECK(t.references == std::vector<std::string>{"25 EUR", "25 euros"});
    CHECK(t.reference_type == "golden");
    CHECK(t.allowed_domains == std::vector<std::string>{"x"});
    CHECK(t.max_steps == 4);
    CHECK(t.fields == nlohmann::ordered_json{{"level", "easy"}});
    const EvalTask u = parse_task_line(
        R"({"web_name": "S", "id": "a", "ques": "q", "web": "http://x/", "answer": "y"})", "t:2");
    CHECK(u.references == std::vector<std::string>{"y"});
}

TEST_CASE("bad task lines are errors naming the file, line and field") {
    CHECK(error_of([] {
              parse_tasks("{\"web_name\": \"S\", \"id\": \"a\", \"ques\": \"q\"}", "f.jsonl");
          }).find("f.jsonl:1: missing field \"web\"") != std::string::npos);
    CHECK(error_of([] { parse_tasks("not json", "f.jsonl"); }).find("f.jsonl:1: not a task file") == 0);
    CHECK(error_of([] {
              parse_tasks("{\"id\": \"a\", \"ques\": \"q\", \"web\": \"http://x/\"}\n{oops", "f.jsonl");
          }).find("f.jsonl:2: not valid JSON") == 0);
    CHECK(error_of([] {
              parse_task_line(R"({"web_name": "S", "id": "a", "ques": " ", "web": "http://x"})", "w");
          }).find("\"ques\" is empty") != std::string::npos);
    CHECK(error_of([] {
              parse_task_line(R"({"web_name": "S", "id": "a", "ques": "q", "web": "x.com"})", "w");
          }).find("not an absolute URL") != std::string::npos);
    CHECK(error_of([] {
              parse_task_line(
                  R"({"web_name": "S", "id": "a", "ques": "q", "web": "javascript://x.com/%0aalert%281%29"})",
                  "w");
          }).find("a javascript: URL is not a page to start on") != std::string::npos);
    CHECK(error_of([] {
              parse_task_line(
                  R"({"web_name": "S", "id": "a", "ques": "q", "web": "http://x", "max_steps": 0})", "w");
          }).find("max_steps") != std::string::npos);
    CHECK(error_of([] {
              parse_task_line(
                  R"({"web_name": "S", "id": "a", "ques": "q", "web": "http://x", "reference_type": "x"})",
                  "w");
          }).find("golden or possible") != std::string::npos);
    const std::string dup = R"({"web_name": "S", "id": "a", "ques": "q", "web": "http://x"})";
    CHECK(error_of([&] {
              parse_tasks(dup + "\n" + dup, "d.jsonl");
          }).find("d.jsonl:2: task id \"a\" repeats the task on line 1") == 0);
    CHECK(error_of([] { parse_tasks("\n\n", "e.jsonl"); }).find("no tasks") != std::string::npos);
    CHECK(error_of([] { load_tasks("/nonexistent/tasks.jsonl"); }).find("/nonexistent/tasks.jsonl") == 0);
}

TEST_CASE("WebVoyager reference_answer.json attaches by site and numeric id suffix") {
    auto tasks = parse_tasks(kWebVoyager, "wv.jsonl");
    const std::string refs =
        R"({"Allrecipes": {"notice": "n", "answers": [{"id": 0, "type": "possible", "ans": "Lasagna X"}]},
                                 "Amazon": {"answers": [{"id": 2, "type": "golden", "ans": "no"}]}})";
    CHECK(attach_references(tasks, refs, "ref.json") == 1);
    CHECK(tasks[0].references == std::vector<std::string>{"Lasagna X"});
    CHECK(tasks[0].reference_type == "possible");
    CHECK(tasks[1].references.empty());
    CHECK(error_of([&] { attach_references(tasks, "[1]", "ref.json"); }).find("ref.json") == 0);
}

TEST_CASE("shards split k mod n, cover every task once; bad shard specs are errors") {
    std::string text;
    for (int i = 0; i < 11; ++i)
        text += R"({"web_name": "S", "id": "t)" + std::to_string(i) +
                R"(", "ques": "q", "web": "http://x/"})"
                "\n";
    const auto tasks = parse_tasks(text, "s.jsonl");
    std::multiset<std::string> seen;
    for (int i = 0; i < 3; ++i) {
        const auto part = select_shard(tasks, parse_shard(std::to_string(i) + "/3"));
        CHECK(part.size() == (i < 2 ? 4u : 3u));
        for (const auto& t : part) seen.insert(t.id);
    }
    CHECK(seen.size() == 11);
    CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 11);
    CHECK(select_shard(tasks, parse_shard("1/3"))[0].id == "t1");
    for (const char* bad : {"3/3", "-1/2", "1", "a/b", "1/0", "1/2x"})
        CHECK(error_of([&] { parse_shard(bad); }).find(std::string("--shard \"") + bad + "\"") == 0);
}

TEST_CASE("--ids, --sites and --limit select tasks in file order; unknown ids and sites are errors") {
    std::string text;
    for (int i = 0; i < 6; ++i)
        text += R"({"web_name": ")" + std::string(i % 2 ? "Amazon" : "BBC News") + R"(", "id": "t)" +
                std::to_string(i) +
                R"(", "ques": "q", "web": "http://x/"})"
                "\n";
    const auto tasks = parse_tasks(text, "s.jsonl");
    const auto ids = [](const std::vector<EvalTask>& ts) {
        std::string out;
        for (const auto& t : ts) out += t.id + " ";
        return out;
    };
    CHECK(ids(select_tasks(tasks, {})) == "t0 t1 t2 t3 t4 t5 ");
    CHECK(ids(select_tasks(tasks, {{"t4", "t1"}, {}, 0})) == "t1 t4 ");
    CHECK(ids(select_tasks(tasks, {{}, {"amazon"}, 0})) == "t1 t3 t5 ");
    CHECK(ids(select_tasks(tasks, {{}, {"bbc news"}, 2})) == "t0 t2 ");
    CHECK(ids(select_tasks(tasks, {{"t0", "t1"}, {"Amazon"}, 0})) == "t1 ");
    CHECK(ids(select_tasks(tasks, {{}, {}, 4})) == "t0 t1 t2 t3 ");
    CHECK(error_of([&] { select_tasks(tasks, {{"t9"}, {}, 0}); }) == "--ids: no task has the id \"t9\"");
    CHECK(error_of([&] {
              select_tasks(tasks, {{}, {"Ebay"}, 0});
          }).find("--sites: no task is on the site \"Ebay\" (the file has: BBC News, Amazon)") == 0);
}

TEST_CASE("trace folder names are safe and distinct") {
    CHECK(task_dir_name("Allrecipes--0") == "Allrecipes--0");
    const std::string a = task_dir_name("a/b"), b = task_dir_name("a:b");
    CHECK(a.find('/') == std::string::npos);
    CHECK(a != b);
    CHECK(a.rfind("a_b-", 0) == 0);
    CHECK(task_dir_name("..") != "..");
    CHECK(task_dir_name(std::string(200, 'x')).size() < 100);
}
