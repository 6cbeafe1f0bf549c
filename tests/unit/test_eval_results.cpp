// results.jsonl (atomic appends, resume after a torn line, never a task twice, the folder lock), the
// summary, the report's charts, and merging shard folders.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "eval/eval_report.h"
#include "eval/eval_results.h"

using namespace surf;
using namespace surf::eval;
namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) {
    const fs::path d =
        fs::temp_directory_path() / ("surf_eval_unit_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    return d;
}

TaskRecord rec(const std::string& id, const std::string& site, const std::string& status,
               std::optional<bool> ok) {
    TaskRecord r;
    r.id = id;
    r.site = site;
    r.question = "q " + id;
    r.status = status;
    r.success = ok;
    r.steps = 3;
    r.prompt_tokens = 100;
    r.output_tokens = 10;
    r.wall_seconds = 2.5;
    r.model_seconds = 1.5;
    r.trace = "traces/" + id;
    if (status == "error") r.error = "the start page did not load";
    return r;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("a record round-trips through JSON with every field") {
    TaskRecord r = rec("a", "S", "answered", true);
    r.answer = "25 EUR";
    r.judge = "local";
    r.judge_success = false;
    r.judge_reason = "no";
    r.references = {"25 EUR"};
    r.reference_type = "golden";
    r.exact_match = true;
    r.normalized_match = true;
    r.contains_match = true;
    r.task_fields = {{"level", "easy"}, {"reference_length", 4}};
    const TaskRecord back = record_from_json(nlohmann::json::parse(record_to_json(r).dump()), "x");
    CHECK(record_to_json(back).dump() == record_to_json(r).dump());
    CHECK(record_to_json(back)["task_fields"]["level"] == "easy");
    // A task without carried fields writes no task_fields key.
    CHECK(!record_to_json(rec("b", "S", "answered", true)).contains("task_fields"));
    CHECK_THROWS_AS(
        record_from_json(nlohmann::json::parse(R"({"id": "a", "status": "x", "task_fields": [1]})"), "x"),
        Error);
    CHECK_THROWS_AS(record_from_json(nlohmann::json::parse(R"({"status": "answered"})"), "x"), Error);
    CHECK_THROWS_AS(
        record_from_json(nlohmann::json::parse(R"({"id": "a", "status": "x", "steps": "3"})"), "x"), Error);
}

TEST_CASE(
    "appends are whole lines; reopening resumes; a torn last line is dropped; no task is written twice") {
    const fs::path dir = fresh("append");
    {
        ResultsFile f(dir.string());
        CHECK(f.existing().empty());
        f.append(rec("a", "S", "answered", true));
        f.append(rec("b", "S", "rejected", false));
        CHECK_THROWS_AS(f.append(rec("a", "S", "answered", true)), Error);
        CHECK(f.all().size() == 2);
    }
    const std::string good = slurp(dir / "results.jsonl");
    CHECK(std::count(good.begin(), good.end(), '\n') == 2);
    // kill -9 in the middle of the third write: half a line, no newline.
    const std::string third = record_to_json(rec("c", "S", "answered", true)).dump() + "\n";
    {
        std::ofstream out(dir / "results.jsonl", std::ios::app | std::ios::binary);
        out << third.substr(0, third.size() / 2);
    }
    size_t torn = 0;
    CHECK(read_results((dir / "results.jsonl").string(), &torn).size() == 2);
    CHECK(torn == third.size() / 2);
    {
        ResultsFile f(dir.string());
        CHECK(f.torn_bytes_dropped() == third.size() / 2);
        CHECK(f.finished_ids() == std::set<std::string>{"a", "b"});
        CHECK(slurp(dir / "results.jsonl") == good);  // truncated back to the last whole line
        f.append(rec("c", "S", "answered", true));
    }
    const auto all = read_results((dir / "results.jsonl").string());
    REQUIRE(all.size() == 3);
    CHECK(all[2].id == "c");
    // A torn line that happens to end in a newline byte (the write stopped right after it) is dropped too.
    {
        std::ofstream out(dir / "results.jsonl", std::ios::app | std::ios::binary);
        out << "{\"id\": \"d\", \"sta\n";
    }
    CHECK(ResultsFile(dir.string()).finished_ids().size() == 3);
    // A bad line in the middle is corruption, not a torn write: an error naming the line.
    {
        std::ofstream out(dir / "results.jsonl", std::ios::app | std::ios::binary);
        out << "garbage\n" << record_to_json(rec("e", "S", "answered", true)).dump() << "\n";
    }
    try {
        ResultsFile f(dir.string());
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("results.jsonl:4") != std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE("a second runner on the same folder is refused; --retry-errors drops error records atomically") {
    const fs::path dir = fresh("lock");
    {
        ResultsFile f(dir.string());
        f.append(rec("a", "S", "answered", true));
        f.append(rec("b", "S", "error", false));
        f.append(rec("c", "S", "no_answer", false));
        CHECK_THROWS_WITH_AS(ResultsFile(dir.string()), doctest::Contains("another surf eval"), Error);
    }
    {
        ResultsFile f(dir.string(), true);
        CHECK(f.errors_dropped() == 1);
        CHECK(f.finished_ids() == std::set<std::string>{"a", "c"});
        f.append(rec("b", "S", "answered", true));
    }
    const auto all = read_results((dir / "results.jsonl").string());
    CHECK(all.size() == 3);
    CHECK(all.back().status == "answered");
    CHECK_FALSE(fs::exists(dir / "results.jsonl.tmp"));
    fs::remove_all(dir);
}

TEST_CASE("summary: success rates overall, without errors and per site; judge and reference counts") {
    std::vector<TaskRecord> rs = {rec("a", "S1", "answered", true), rec("b", "S1", "rejected", false),
                                  rec("c", "S2", "error", false), rec("d", "S2", "answered", std::nullopt)};
    rs[0].judge = "local";
    rs[0].judge_success = true;
    rs[1].judge = "local";
    rs[1].judge_success = std::nullopt;
    rs[0].references = {"x"};
    rs[0].exact_match = rs[0].normalized_match = rs[0].contains_match = true;
    rs[0].steps = 5;
    const auto s = summarize(rs, 10);
    CHECK(s["tasks"] == 4);
    CHECK(s["planned"] == 10);
    CHECK(s["succeeded"] == 1);
    CHECK(s["success_rate"].get<double>() == doctest::Approx(0.25));
    CHECK(s["success_rate_without_errors"].get<double>() == doctest::Approx(1.0 / 3));
    CHECK(s["errors"] == 1);
    CHECK(s["per_site"]["S1"]["success_rate"].get<double>() == doctest::Approx(0.5));
    CHECK(s["per_site"]["S2"]["errors"] == 1);
    CHECK(s["judge"]["judged"] == 2);
    CHECK(s["judge"]["no_verdict"] == 1);
    CHECK(s["reference"]["exact"] == 1);
    CHECK(s["steps"]["max"].get<double>() == 5);
    CHECK(s["tokens"]["prompt"] == 400);
    CHECK(s["error_list"][0]["id"] == "c");
    const std::string html = render_eval_report(rs, s);
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(html.find("<svg") != std::string::npos);
    CHECK(html.find("href=\"traces/a/report.html\"") != std::string::npos);
    CHECK(html.find("S2") != std::string::npos);
    CHECK(summarize({})["success_rate"].get<double>() == 0);  // no division by zero
    CHECK_FALSE(s.contains("per_field"));                     // no task carries a level or family
}

TEST_CASE("summary: tasks grouped by their level or family as well as their site") {
    std::vector<TaskRecord> rs = {rec("a", "S1", "answered", true), rec("b", "S1", "rejected", false),
                                  rec("c", "S2", "error", false), rec("d", "S2", "answered", true)};
    rs[0].task_fields = {{"level", "easy"}};
    rs[1].task_fields = {{"level", "hard"}, {"family", "login"}};
    rs[2].task_fields = {{"level", "hard"}};
    rs[3].task_fields = {{"Level", 2}};  // GAIA's numeric level
    const auto s = summarize(rs);
    CHECK(s["per_field"]["level"]["easy"]["tasks"] == 1);
    CHECK(s["per_field"]["level"]["easy"]["success_rate"].get<double>() == doctest::Approx(1.0));
    CHECK(s["per_field"]["level"]["hard"]["tasks"] == 2);
    CHECK(s["per_field"]["level"]["hard"]["errors"] == 1);
    CHECK(s["per_field"]["family"]["login"]["succeeded"] == 0);
    CHECK(s["per_field"]["Level"]["2"]["succeeded"] == 1);
    const std::string html = render_eval_report(rs, s);
    CHECK(html.find("<h2>Per site</h2>") != std::string::npos);
    CHECK(html.find("<h2>Per level</h2>") != std::string::npos);
    CHECK(html.find("<h2>Per family</h2>") != std::string::npos);
    CHECK(html.find("<td>hard</td><td>2</td><td>0</td><td>0.0%</td><td>1</td>") != std::string::npos);
}

TEST_CASE("histogram SVG: one bar per integer value, counts in titles") {
    const std::string svg = svg_histogram({1, 2, 2, 3, 3, 3}, 10, "steps", true);
    CHECK(svg.rfind("<svg", 0) == 0);
    size_t bars = 0;
    for (size_t p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++bars;
    CHECK(bars == 3);
    CHECK(svg.find("<title>3</title>") != std::string::npos);
    CHECK(svg_histogram({}, 5, "x", false).find("<svg") == 0);
    CHECK(svg_histogram({2.0, 2.0}, 5, "x", false).find("<title>2</title>") != std::string::npos);
}

TEST_CASE("histogram axes: round bin edges and short labels, never exponent notation") {
    RoundBins b = round_bins(0.37, 9.8, 12, false);
    CHECK(b.step == doctest::Approx(1.0));
    CHECK(b.lo == doctest::Approx(0.0));
    CHECK(b.count == 10);
    b = round_bins(1234, 9876, 12, false);
    CHECK(b.step == doctest::Approx(1000));
    CHECK(b.lo == doctest::Approx(1000));
    CHECK(b.count == 9);
    b = round_bins(0, 0, 12, false);  // all values equal: a unit span, not 1e-9 wide bins
    CHECK(b.step == doctest::Approx(0.1));
    CHECK(b.count == 1);
    b = round_bins(3, 250, 15, true);
    CHECK(b.step == doctest::Approx(20));
    CHECK(b.lo == doctest::Approx(0));
    CHECK(round_bins(3, 9, 15, true).count == 7);  // one bar per value
    CHECK(tick_label(0.25, 0.05) == "0.25");
    CHECK(tick_label(40, 5) == "40");
    CHECK(tick_label(4500, 500) == "4.5k");
    CHECK(tick_label(12000, 1000) == "12k");
    CHECK(tick_label(3e6, 1e6) == "3M");
    CHECK(tick_label(0, 0.1) == "0.0");
    for (const std::vector<double>& values :
         {std::vector<double>{0, 0, 0}, std::vector<double>{4140, 5120, 9999, 20480},
          std::vector<double>{1e-9, 2e-9}}) {
        const std::string svg = svg_histogram(values, 12, "x", false);
        CHECK(svg.find("e+") == std::string::npos);
        CHECK(svg.find("e-") == std::string::npos);
        size_t labels = 0;
        for (size_t p = svg.find("text-anchor=\"middle\">"); p != std::string::npos;
             p = svg.find("text-anchor=\"middle\">", p + 1))
            ++labels;
        CHECK(labels <= 9);  // eight edges at most, and the axis title
    }
}

TEST_CASE(
    "merge: shards combine into one report with trace links rewritten; a task in two folders is an error") {
    const fs::path root = fresh("merge");
    const fs::path a = root / "shard0", b = root / "shard1", out = root / "all";
    {
        ResultsFile f(a.string());
        f.append(rec("t0", "S", "answered", true));
        f.append(rec("t2", "S", "no_answer", false));
    }
    {
        ResultsFile f(b.string());
        f.append(rec("t1", "S", "answered", true));
    }
    const auto merged = merge_results({a.string(), b.string()}, out.string());
    REQUIRE(merged.size() == 3);
    CHECK(merged[0].trace == "../shard0/traces/t0");
    CHECK(merged[2].trace == "../shard1/traces/t1");
    CHECK(read_results((out / "results.jsonl").string()).size() == 3);
    CHECK(fs::exists(out / "summary.json"));
    CHECK(slurp(out / "report.html").find("../shard1/traces/t1/report.html") != std::string::npos);
    CHECK_THROWS_WITH_AS(merge_results({a.string(), a.string()}, (root / "dup").string()),
                         doctest::Contains("is in both"), Error);
    CHECK_THROWS_AS(merge_results({(root / "missing").string()}, (root / "x").string()), Error);
    fs::remove_all(root);
}
