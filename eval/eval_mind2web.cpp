#include "eval/eval_mind2web.h"

#include <filesystem>
#include <fstream>

#include "agent/actions.h"
#include "base/error.h"
#include "eval/eval_tasks.h"

namespace surf::eval {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// The step lines of a trace.jsonl, in order; a torn or unparsable line (a killed run) is skipped.
std::vector<json> read_trace_steps(const fs::path& path) {
    std::vector<json> steps;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        json j = json::parse(line, nullptr, false);
        if (j.is_object() && j.value("type", "") == "step") steps.push_back(std::move(j));
    }
    return steps;
}

// The trace's action (a JSON object as text) as a readable action, or "" for an answer or no action.
std::string action_text(const std::string& action) {
    if (action.empty()) return "";
    const json j = json::parse(action, nullptr, false);
    if (!j.is_object()) return action;
    if (j.value("type", "") == "answer") return "";
    try {
        return agent::describe_action(agent::parse_action(j));
    } catch (const Error&) {
        return j.dump();  // an action of a custom registry: its JSON says what it did
    }
}

}  // namespace

ordered_json mind2web_result(const TaskRecord& record, const std::vector<json>& trace_steps) {
    ordered_json actions = ordered_json::array(), thoughts = ordered_json::array();
    for (const json& step : trace_steps) {
        thoughts.push_back(step.value("thought", ""));
        const std::string a = action_text(step.value("action", ""));
        if (!a.empty()) actions.push_back(a);
    }
    ordered_json r;
    r["task_id"] = record.id;
    r["task"] = record.question;
    r["final_result_response"] = record.answer;
    r["action_history"] = std::move(actions);
    r["thoughts"] = std::move(thoughts);
    return r;
}

Mind2WebExport write_mind2web(const std::string& results_dir, const std::vector<TaskRecord>& records,
                              const std::string& out_dir) {
    Mind2WebExport done;
    for (const TaskRecord& record : records) {
        const fs::path dir = fs::path(out_dir) / task_dir_name(record.id);
        std::error_code ec;
        fs::remove_all(dir, ec);
        fs::create_directories(dir / "trajectory", ec);
        if (ec)
            throw Error(ErrorKind::kIo, (dir / "trajectory").string() + ": cannot create: " + ec.message());
        std::vector<json> steps;
        const fs::path trace = fs::path(results_dir) / record.trace;
        if (!record.trace.empty()) steps = read_trace_steps(trace / "trace.jsonl");
        int n = 0;
        for (const json& step : steps) {
            const std::string shot = step.value("screenshot", "");
            if (shot.empty() || !fs::is_regular_file(trace / shot, ec)) continue;
            const fs::path to = dir / "trajectory" / (std::to_string(n++) + ".png");
            if (!fs::copy_file(trace / shot, to, fs::copy_options::overwrite_existing, ec))
                throw Error(ErrorKind::kIo, to.string() + ": cannot copy the screenshot: " + ec.message());
            ++done.screenshots;
        }
        std::ofstream out(dir / "result.json", std::ios::binary);
        out << mind2web_result(record, steps).dump(4) << "\n";
        if (!out) throw Error(ErrorKind::kIo, (dir / "result.json").string() + ": cannot write");
        ++done.tasks;
    }
    return done;
}

}  // namespace surf::eval
