#include "eval/eval_report.h"
#include "base/utf8.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "agent/trace.h"
#include "base/error.h"

namespace surf::eval {

using agent::html_escape;

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

ordered_json distribution(const std::vector<double>& v) {
    ordered_json j;
    double sum = 0;
    for (double x : v) sum += x;
    j["mean"] = v.empty() ? 0.0 : sum / static_cast<double>(v.size());
    j["p50"] = percentile(v, 0.5);
    j["p90"] = percentile(v, 0.9);
    j["max"] = v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
    j["total"] = sum;
    return j;
}

double rate(size_t num, size_t den) {
    return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

std::string pct(double r) {
    return fmt::format("{:.1f}%", 100.0 * r);
}

std::string tri(const std::optional<bool>& b, const char* yes = "yes", const char* no = "no") {
    return b ? (*b ? yes : no) : "–";
}

// The run's configuration, model, version, date and machine (eval/eval_config.h), folded away.
std::string run_section(const ordered_json& run) {
    std::ostringstream h;
    const auto text = [&](const char* key) { return run.contains(key) ? run[key].get<std::string>() : ""; };
    h << "<p><span class=\"k\">Run:</span> surf " << html_escape(text("surf_version")) << " on "
      << html_escape(text("host")) << ", " << html_escape(text("date"));
    if (run.contains("model")) {
        const auto& m = run["model"];
        h << " &nbsp; <span class=\"k\">Model:</span> "
          << html_escape(m.value("path", m.value("url", std::string()))) << " "
          << html_escape(m.value("checksum", m.value("name", std::string())));
    }
    h << "</p>\n<details><summary>Configuration</summary><table>";
    if (run.contains("config")) {
        for (auto it = run["config"].begin(); it != run["config"].end(); ++it)
            h << "<tr><th>" << html_escape(it.key()) << "</th><td>" << html_escape(it.value().dump())
              << "</td></tr>";
    }
    h << "</table></details>\n";
    return h.str();
}

// Counts of one group of tasks (a site, a level, a family).
struct Group {
    size_t tasks = 0, succeeded = 0, errors = 0;
    double wall = 0;

    void add(const TaskRecord& r) {
        ++tasks;
        wall += r.wall_seconds;
        succeeded += r.success.value_or(false);
        errors += r.status == "error";
    }
    ordered_json to_json() const {
        return {{"tasks", tasks},
                {"succeeded", succeeded},
                {"success_rate", rate(succeeded, tasks)},
                {"errors", errors},
                {"mean_wall_s", tasks ? wall / static_cast<double>(tasks) : 0.0}};
    }
};

// Task-file fields whose values group the tasks a second way: surf's own "family", Online-Mind2Web's "level",
// GAIA's "Level".
constexpr const char* kGroupFields[] = {"family", "level", "Level"};

// A field's value as a group name: strings as they are, other values as JSON.
std::string group_name(const ordered_json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
}

// The counts and per-task samples that summarize() gathers over the records.
struct Tally {
    std::map<std::string, size_t> status;
    size_t succeeded = 0, errors = 0, known = 0;
    size_t judged = 0, judge_yes = 0, judge_none = 0;
    size_t with_ref = 0, exact = 0, normalized = 0, contains = 0;
    std::set<std::string> judges;
    std::vector<double> steps, wall, model, browser, tokens;
    int64_t prompt = 0, output = 0, image = 0, judge_tokens = 0;
    std::map<std::string, Group> sites;
    std::map<std::string, std::map<std::string, Group>> fields;  // field → value → group
    ordered_json error_list = ordered_json::array();

    void add(const TaskRecord& r) {
        ++status[r.status];
        sites[r.site].add(r);
        for (const char* key : kGroupFields) {
            if (r.task_fields.contains(key)) fields[key][group_name(r.task_fields[key])].add(r);
        }
        if (r.success) ++known;
        if (r.success.value_or(false)) ++succeeded;
        if (r.status == "error") {
            ++errors;
            error_list.push_back({{"id", r.id}, {"error", r.error}});
        }
        if (!r.judge.empty()) {
            judges.insert(r.judge);
            ++judged;
            if (!r.judge_success) ++judge_none;
            if (r.judge_success.value_or(false)) ++judge_yes;
        }
        if (!r.references.empty() && r.status != "error") {
            ++with_ref;
            exact += r.exact_match.value_or(false);
            normalized += r.normalized_match.value_or(false);
            contains += r.contains_match.value_or(false);
        }
        steps.push_back(r.steps);
        wall.push_back(r.wall_seconds);
        model.push_back(r.model_seconds);
        browser.push_back(r.browser_seconds);
        tokens.push_back(static_cast<double>(r.prompt_tokens + r.output_tokens));
        prompt += r.prompt_tokens;
        output += r.output_tokens;
        image += r.image_tokens;
        judge_tokens += r.judge_tokens;
    }

    ordered_json judge_json() const {
        ordered_json judge;
        judge["names"] = judges;
        judge["judged"] = judged;
        judge["success"] = judge_yes;
        judge["no_verdict"] = judge_none;
        judge["success_rate"] = rate(judge_yes, judged);
        return judge;
    }

    ordered_json reference_json() const {
        ordered_json ref;
        ref["tasks"] = with_ref;
        ref["exact"] = exact;
        ref["normalized"] = normalized;
        ref["contains"] = contains;
        ref["contains_rate"] = rate(contains, with_ref);
        return ref;
    }
};

}  // namespace

ordered_json summarize(const std::vector<TaskRecord>& records, size_t planned) {
    ordered_json s;
    s["tasks"] = records.size();
    s["planned"] = planned;
    Tally t;
    for (const TaskRecord& r : records) t.add(r);
    s["status"] = t.status;
    s["succeeded"] = t.succeeded;
    s["success_rate"] = rate(t.succeeded, records.size());
    s["success_rate_without_errors"] = rate(t.succeeded, records.size() - t.errors);
    s["with_verdict"] = t.known;
    s["errors"] = t.errors;
    s["judge"] = t.judge_json();
    s["reference"] = t.reference_json();
    ordered_json per_site = ordered_json::object();
    for (const auto& [name, site] : t.sites) per_site[name] = site.to_json();
    s["per_site"] = per_site;
    if (!t.fields.empty()) {
        ordered_json per_field;
        for (const auto& [key, groups] : t.fields) {
            for (const auto& [value, group] : groups) per_field[key][value] = group.to_json();
        }
        s["per_field"] = per_field;
    }
    s["tokens"] = {{"prompt", t.prompt},
                   {"output", t.output},
                   {"image", t.image},
                   {"judge", t.judge_tokens},
                   {"per_task", distribution(t.tokens)}};
    s["model_s"] = distribution(t.model);
    s["browser_s"] = distribution(t.browser);
    s["wall_s"] = distribution(t.wall);
    s["steps"] = distribution(t.steps);
    s["error_list"] = t.error_list;
    return s;
}

RoundBins round_bins(double lo, double hi, int wanted, bool integers) {
    if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) lo = hi = 0;
    if (integers) {
        lo = std::floor(lo);
        hi = std::floor(hi);
        if (hi - lo + 1 <= 40) return {lo, 1.0, static_cast<int>(hi - lo + 1)};  // one bar per value
    }
    const double span = hi > lo ? hi - lo : std::max(1.0, std::fabs(lo));
    const double raw = span / std::max(1, wanted);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double norm = raw / mag;
    double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
    if (integers) step = std::max(1.0, std::round(step));
    const double first = std::floor(lo / step) * step;
    const int count = std::max(1, static_cast<int>(std::floor((hi - first) / step + 1e-9)) + 1);
    return {first, step, count};
}

std::string tick_label(double value, double step) {
    const double a = std::fabs(value);
    if (a >= 1e3) {  // thousands and millions in k and M
        const double scale = a >= 1e6 ? 1e6 : 1e3;
        const double v = value / scale, s = step / scale;
        return fmt::format("{:.{}f}{}", v, s >= 1 || std::fabs(v) >= 100 ? 0 : 1, a >= 1e6 ? "M" : "k");
    }
    const int decimals = step >= 1 ? 0 : std::min(3, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    return fmt::format("{:.{}f}", value, decimals);
}

std::string svg_histogram(const std::vector<double>& values, int wanted, const std::string& x_label,
                          bool integers) {
    const int W = 420, H = 180, left = 36, bottom = 34, top = 12, right = 10;
    double lo = 0, hi = 0;
    if (!values.empty()) {
        lo = *std::min_element(values.begin(), values.end());
        hi = *std::max_element(values.begin(), values.end());
    }
    const RoundBins rb = round_bins(lo, hi, wanted, integers);
    lo = rb.lo;
    const int bins = rb.count;
    const double width = rb.step;
    std::vector<int> count(static_cast<size_t>(bins), 0);
    for (double v : values) {
        int b = static_cast<int>(std::floor((v - lo) / width));
        count[static_cast<size_t>(std::clamp(b, 0, bins - 1))]++;
    }
    const int peak = std::max(1, *std::max_element(count.begin(), count.end()));
    std::ostringstream o;
    o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" viewBox=\"0 0 " << W << " " << H << "\" role=\"img\"><title>" << html_escape(x_label)
      << "</title>";
    const double plot_w = W - left - right, plot_h = H - top - bottom, bar_w = plot_w / bins;
    o << "<line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\"" << W - right << "\" y2=\""
      << H - bottom << "\" stroke=\"#444\"/>";
    o << "<text x=\"" << left - 4 << "\" y=\"" << top + 8 << "\" font-size=\"10\" text-anchor=\"end\">"
      << peak << "</text>";
    for (int b = 0; b < bins; ++b) {
        const double h = plot_h * count[static_cast<size_t>(b)] / peak;
        const double x = left + b * bar_w;
        o << "<rect x=\"" << fmt::format("{:.1f}", x + 1) << "\" y=\""
          << fmt::format("{:.1f}", H - bottom - h) << "\" width=\""
          << fmt::format("{:.1f}", std::max(1.0, bar_w - 2)) << "\" height=\"" << fmt::format("{:.1f}", h)
          << "\" fill=\"#4a7fb5\"><title>" << count[static_cast<size_t>(b)] << "</title></rect>";
        if (b % ((bins + 7) / 8) == 0) {  // at most eight labels: they never overlap
            const double v = lo + b * width;
            o << "<text x=\"" << fmt::format("{:.1f}", x + bar_w / 2) << "\" y=\"" << H - bottom + 12
              << "\" font-size=\"10\" text-anchor=\"middle\">" << tick_label(v, width) << "</text>";
        }
    }
    o << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << H - 6
      << "\" font-size=\"11\" text-anchor=\"middle\">" << html_escape(x_label) << "</text></svg>";
    return o.str();
}

namespace {

// "Per site" (or level, family): one row per group with its tasks, successes, rate, errors and mean wall
// time.
std::string group_table(const std::string& what, const ordered_json& groups) {
    std::string head = what;
    head[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(head[0])));
    std::ostringstream h;
    h << "<h2>Per " << html_escape(what) << "</h2>\n<table><tr><th>" << html_escape(head)
      << "</th><th>Tasks</th><th>Succeeded</th><th>Rate</th><th>Errors</th><th>Mean wall (s)</th></tr>\n";
    for (const auto& [name, v] : groups.items()) {
        h << "<tr><td>" << html_escape(name) << "</td><td>" << v["tasks"].get<size_t>() << "</td><td>"
          << v["succeeded"].get<size_t>() << "</td><td>" << pct(v["success_rate"].get<double>())
          << "</td><td>" << v["errors"].get<size_t>() << "</td><td>"
          << fmt::format("{:.1f}", v["mean_wall_s"].get<double>()) << "</td></tr>\n";
    }
    h << "</table>\n";
    return h.str();
}

// The task table's sorting (a click on a header; numbers as numbers, again for the reverse order) and its
// filter (rows holding the text box's words). body[data-ready] marks that the script ran to its end.
constexpr const char* kTableScript = R"JS(<script>
(() => {
  const table = document.getElementById('tasks'), body = table.tBodies[0], filter = document.getElementById('filter');
  const key = (row, i) => {
    const text = row.cells[i].textContent.trim(), n = parseFloat(text);
    return isNaN(n) || !/^-?[0-9.]/.test(text) ? text.toLowerCase() : n;
  };
  const compare = (a, b) => typeof a === typeof b ? (a > b) - (a < b) : String(a).localeCompare(String(b));
  [...table.tHead.rows[0].cells].forEach((th, i) => th.addEventListener('click', () => {
    const dir = th.dataset.dir === 'asc' ? -1 : 1;
    th.dataset.dir = dir > 0 ? 'asc' : 'desc';
    [...body.rows].sort((x, y) => dir * compare(key(x, i), key(y, i))).forEach(r => body.appendChild(r));
  }));
  filter.addEventListener('input', () => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const row of body.rows) row.hidden = !words.every(w => row.textContent.toLowerCase().includes(w));
  });
  document.body.dataset.ready = '1';
})();
</script>
)JS";

// The trace's last screenshot (relative to the results folder), "" when it has none.
std::string last_screenshot(const std::string& dir, const std::string& trace) {
    std::error_code ec;
    std::string last;
    for (const auto& e : fs::directory_iterator(fs::path(dir) / trace / "screenshots", ec)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(".png") && name > last) last = name;
    }
    return last.empty() ? "" : trace + "/screenshots/" + last;
}

// The headline paragraph: tasks, success, judge verdicts, reference matches, tokens and times.
std::string headline_section(size_t n, const ordered_json& s) {
    std::ostringstream h;
    h << "<p><span class=\"k\">Tasks:</span> " << n;
    if (s.value("planned", 0) > 0) h << " of " << s["planned"].get<size_t>() << " planned";
    h << " &nbsp; <span class=\"k\">Success:</span> <b>" << s["succeeded"].get<size_t>() << " ("
      << pct(s["success_rate"].get<double>()) << ")</b>, "
      << pct(s["success_rate_without_errors"].get<double>())
      << " without errors &nbsp; <span class=\"k\">Errors:</span> " << s["errors"].get<size_t>() << "<br>";
    const auto& judge = s["judge"];
    if (judge["judged"].get<size_t>() > 0) {
        h << "<span class=\"k\">Judge:</span> " << judge["success"].get<size_t>() << " SUCCESS of "
          << judge["judged"].get<size_t>() << " judged (" << pct(judge["success_rate"].get<double>()) << "), "
          << judge["no_verdict"].get<size_t>() << " without a usable verdict<br>";
    }
    const auto& ref = s["reference"];
    if (ref["tasks"].get<size_t>() > 0) {
        h << "<span class=\"k\">Reference answers:</span> " << ref["tasks"].get<size_t>() << " tasks; exact "
          << ref["exact"].get<size_t>() << ", normalised " << ref["normalized"].get<size_t>()
          << ", contained " << ref["contains"].get<size_t>() << "<br>";
    }
    const auto& tok = s["tokens"];
    h << "<span class=\"k\">Tokens:</span> " << tok["prompt"].get<int64_t>() << " prompt, "
      << tok["output"].get<int64_t>() << " output ("
      << fmt::format("{:.0f}", tok["per_task"]["mean"].get<double>()) << " per task), judge "
      << tok["judge"].get<int64_t>() << " &nbsp; <span class=\"k\">Model time:</span> "
      << fmt::format("{:.1f}", s["model_s"]["mean"].get<double>()) << " s per task ("
      << fmt::format("{:.1f}", s["model_s"]["total"].get<double>())
      << " s in all) &nbsp; <span class=\"k\">Wall:</span> p50 "
      << fmt::format("{:.1f}", s["wall_s"]["p50"].get<double>()) << " s, p90 "
      << fmt::format("{:.1f}", s["wall_s"]["p90"].get<double>()) << " s</p>\n";
    return h.str();
}

// Histograms of steps, wall seconds, model seconds and tokens per task.
std::string distributions_section(const std::vector<TaskRecord>& records) {
    std::ostringstream h;
    std::vector<double> steps, wall, model, tokens;
    for (const TaskRecord& r : records) {
        steps.push_back(r.steps);
        wall.push_back(r.wall_seconds);
        model.push_back(r.model_seconds);
        tokens.push_back(static_cast<double>(r.prompt_tokens + r.output_tokens));
    }
    h << "<h2>Distributions</h2>\n<div class=\"charts\">" << svg_histogram(steps, 15, "steps per task", true)
      << svg_histogram(wall, 12, "wall seconds per task", false)
      << svg_histogram(model, 12, "model seconds per task", false)
      << svg_histogram(tokens, 12, "tokens per task", false) << "</div>\n";
    return h.str();
}

// One row of the task table; its thumbnail is the trace's last screenshot when `dir` is known.
std::string task_row(const TaskRecord& r, const std::string& dir) {
    std::ostringstream h;
    const char* cls = r.status == "error" ? "err" : (r.success.value_or(false) ? "ok" : "bad");
    h << "<tr><td title=\"" << html_escape(r.question) << "\">" << html_escape(r.id) << "</td><td>"
      << html_escape(r.site) << "</td><td class=\"" << cls << "\">" << html_escape(r.status);
    if (!r.error.empty()) h << "<br><small>" << html_escape(surf::shorten_utf8(r.error, 300)) << "</small>";
    h << "</td><td class=\"" << cls << "\">" << tri(r.success) << "</td><td>";
    if (!r.judge.empty()) {
        h << tri(r.judge_success, "SUCCESS", "NOT SUCCESS") << "<br><small>"
          << html_escape(surf::shorten_utf8(r.judge_reason, 300)) << "</small>";
    }
    h << "</td><td>";
    if (!r.references.empty()) {
        h << "exact " << tri(r.exact_match) << ", norm. " << tri(r.normalized_match) << ", cont. "
          << tri(r.contains_match) << "<br><small>ref: " << html_escape(r.references.front().substr(0, 200))
          << "</small>";
    }
    h << "</td><td class=\"a\">" << html_escape(r.answer) << "</td><td>" << r.steps << "</td><td>"
      << r.prompt_tokens + r.output_tokens << "</td><td>" << fmt::format("{:.1f}", r.model_seconds)
      << "</td><td>" << fmt::format("{:.1f}", r.wall_seconds) << "</td><td>";
    if (!r.trace.empty()) {
        const std::string shot = dir.empty() ? "" : last_screenshot(dir, r.trace);
        if (!shot.empty()) {
            h << "<a href=\"" << html_escape(r.trace)
              << "/report.html\"><img class=\"thumb\" loading=\"lazy\" "
              << "alt=\"last screenshot\" src=\"" << html_escape(shot) << "\"></a><br>";
        }
        h << "<a href=\"" << html_escape(r.trace) << "/report.html\">report</a> <a href=\""
          << html_escape(r.trace) << "/trace.jsonl\">trace</a>";
    }
    h << "</td></tr>\n";
    return h.str();
}

}  // namespace

std::string render_eval_report(const std::vector<TaskRecord>& records, const ordered_json& s,
                               const std::string& dir) {
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>surf eval report</title><style>"
         "body{font-family:sans-serif;margin:20px;color:#222}table{border-collapse:collapse;font-size:13px}"
         "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}"
         "th{background:#eee}.ok{color:#176d17}.bad{color:#a31515}.err{color:#a36b00}"
         ".charts{display:flex;gap:24px;flex-wrap:wrap}.k{color:#666}td.a{max-width:360px;word-break:break-"
         "word}"
         "th{cursor:pointer}th[data-dir=asc]::after{content:' \\25B2'}th[data-dir=desc]::after{content:' "
         "\\25BC'}"
         "img.thumb{width:96px;border:1px solid #ccc}#filter{margin:4px 0 8px;width:320px}"
         "</style></head><body>\n<h1>surf eval</h1>\n";
    h << headline_section(records.size(), s);

    if (s.contains("run")) h << run_section(s["run"]);
    h << group_table("site", s["per_site"]);
    if (s.contains("per_field"))
        for (const auto& [key, groups] : s["per_field"].items()) h << group_table(key, groups);

    h << distributions_section(records);

    h << "<h2>Tasks</h2>\n<input id=\"filter\" type=\"search\" placeholder=\"filter: words in any column\">\n"
         "<table "
         "id=\"tasks\"><thead><tr><th>Task</th><th>Site</th><th>Status</th><th>Success</th><th>Judge</th>"
         "<th>Match</th><th>Answer</th><th>Steps</th><th>Tokens</th><th>Model s</th><th>Wall "
         "s</th><th>Trace</th>"
         "</tr></thead><tbody>\n";
    for (const TaskRecord& r : records) h << task_row(r, dir);
    h << "</tbody></table>\n" << kTableScript << "</body></html>\n";
    return h.str();
}

void write_summary_and_report(const std::string& dir, const std::vector<TaskRecord>& records, size_t planned,
                              const ordered_json& run) {
    ordered_json s = summarize(records, planned);
    if (!run.is_null()) s["run"] = run;
    write_file_atomic((fs::path(dir) / "summary.json").string(), s.dump(2) + "\n");
    write_file_atomic((fs::path(dir) / "report.html").string(), render_eval_report(records, s, dir));
}

std::vector<TaskRecord> merge_results(const std::vector<std::string>& dirs, const std::string& out_dir) {
    if (dirs.empty()) throw Error(ErrorKind::kInvalidArgument, "merge: no result folders");
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) throw Error(ErrorKind::kIo, out_dir + ": cannot create: " + ec.message());
    const fs::path out_abs = fs::absolute(out_dir).lexically_normal();
    std::vector<TaskRecord> merged;
    std::map<std::string, std::string> seen;  // id -> folder
    for (const std::string& dir : dirs) {
        const fs::path src_abs = fs::absolute(dir).lexically_normal();
        if (src_abs == out_abs)
            throw Error(ErrorKind::kInvalidArgument, "merge: --out must differ from " + dir);
        for (TaskRecord& r : read_results((fs::path(dir) / "results.jsonl").string())) {
            auto [it, fresh] = seen.emplace(r.id, dir);
            if (!fresh) {
                throw Error(ErrorKind::kInvalidArgument,
                            "merge: task \"" + r.id + "\" is in both " + it->second + " and " + dir);
            }
            if (!r.trace.empty()) r.trace = (src_abs / r.trace).lexically_relative(out_abs).string();
            merged.push_back(std::move(r));
        }
    }
    std::string body;
    for (const TaskRecord& r : merged) body += record_to_json(r).dump() + "\n";
    write_file_atomic((fs::path(out_dir) / "results.jsonl").string(), body);
    write_summary_and_report(out_dir, merged);
    return merged;
}

}  // namespace surf::eval
