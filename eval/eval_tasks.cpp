#include "eval/eval_tasks.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/loop.h"
#include "kernels/base/error.h"
#include "model/utf8.h"

namespace surf::eval {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& message) {
    throw Error(ErrorKind::kFormat, where + ": " + message);
}

std::string required_string(const json& j, const char* key, const std::string& where) {
    auto it = j.find(key);
    if (it == j.end()) bad(where, std::string("missing field \"") + key + "\"");
    // WebVoyager ids are strings; other task files use numbers. Both name a task.
    if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
    if (!it->is_string())
        bad(where, std::string("field \"") + key + "\" must be a string, got " + it->dump());
    const std::string s = it->get<std::string>();
    if (s.find_first_not_of(" \t\r\n") == std::string::npos)
        bad(where, std::string("field \"") + key + "\" is empty");
    return s;
}

std::vector<std::string> string_list(const json& value, const std::string& key, const std::string& where) {
    std::vector<std::string> out;
    if (value.is_string()) {
        out.push_back(value.get<std::string>());
    } else if (value.is_array()) {
        for (const json& v : value) {
            if (!v.is_string()) bad(where, "field \"" + key + "\" must hold strings, got " + v.dump());
            out.push_back(v.get<std::string>());
        }
    } else if (!value.is_null()) {
        bad(where, "field \"" + key + "\" must be a string or a list of strings, got " + value.dump());
    }
    return out;
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

}  // namespace

EvalTask parse_task_line(const std::string& line, const std::string& where) {
    json j;
    try {
        j = json::parse(line);
    } catch (const json::exception& e) {
        bad(where, std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) bad(where, "expected a JSON object, got " + j.dump().substr(0, 80));
    EvalTask t;
    t.id = required_string(j, "id", where);
    t.site = required_string(j, "web_name", where);
    t.question = required_string(j, "ques", where);
    t.start_url = required_string(j, "web", where);
    if (const std::string problem = agent::start_url_problem(t.start_url); !problem.empty()) bad(where, "field \"web\": " + problem);
    for (const char* key : {"reference_answer", "reference_answers", "answer"}) {
        if (auto it = j.find(key); it != j.end()) {
            for (std::string& s : string_list(*it, key, where)) t.references.push_back(std::move(s));
        }
    }
    if (auto it = j.find("viewport"); it != j.end()) {
        if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() || !(*it)[1].is_number_integer())
            bad(where, "field \"viewport\" must be [width, height], got " + it->dump());
        t.viewport_width = (*it)[0].get<int>();
        t.viewport_height = (*it)[1].get<int>();
        if (t.viewport_width < 16 || t.viewport_height < 16 || t.viewport_width > 8192 || t.viewport_height > 8192)
            bad(where, "field \"viewport\": " + it->dump() + " is outside 16..8192");
    }
    if (auto it = j.find("check"); it != j.end()) {
        if (!it->is_string() || it->get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos)
            bad(where, "field \"check\" must be a non-empty string (a JavaScript function of the answer)");
        t.check = it->get<std::string>();
    }
    if (auto it = j.find("reference_type"); it != j.end()) {
        if (!it->is_string()) bad(where, "field \"reference_type\" must be a string");
        t.reference_type = it->get<std::string>();
        if (t.reference_type != "golden" && t.reference_type != "possible")
            bad(where,
                "field \"reference_type\": \"" + t.reference_type + "\" (expected golden or possible)");
    }
    for (const char* key : {"allowed_domains", "allow_domains"}) {
        if (auto it = j.find(key); it != j.end()) t.allowed_domains = string_list(*it, key, where);
    }
    if (auto it = j.find("max_steps"); it != j.end()) {
        if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1000)
            bad(where, "field \"max_steps\": " + it->dump() + " (expected an integer in 1..1000)");
        t.max_steps = it->get<int>();
    }
    return t;
}

std::vector<EvalTask> parse_tasks(const std::string& text, const std::string& name) {
    std::vector<EvalTask> tasks;
    std::map<std::string, int> seen;  // id -> line
    std::istringstream in(text);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        const std::string where = name + ":" + std::to_string(number);
        EvalTask t = parse_task_line(line, where);
        t.line = number;
        auto [it, fresh] = seen.emplace(t.id, number);
        if (!fresh)
            bad(where, "task id \"" + t.id + "\" repeats the task on line " + std::to_string(it->second));
        tasks.push_back(std::move(t));
    }
    if (tasks.empty()) throw Error(ErrorKind::kFormat, name + ": no tasks");
    return tasks;
}

std::vector<EvalTask> load_tasks(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, path + ": cannot open the task file");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_tasks(ss.str(), path);
}

int attach_references(std::vector<EvalTask>& tasks, const std::string& reference_json,
                      const std::string& name) {
    json j;
    try {
        j = json::parse(reference_json);
    } catch (const json::exception& e) {
        throw Error(ErrorKind::kFormat, name + ": not valid JSON: " + e.what());
    }
    if (!j.is_object()) throw Error(ErrorKind::kFormat, name + ": expected an object keyed by site name");
    int attached = 0;
    for (EvalTask& t : tasks) {
        const size_t sep = t.id.rfind("--");
        if (sep == std::string::npos) continue;
        int n = -1;
        try {
            size_t used = 0;
            n = std::stoi(t.id.substr(sep + 2), &used);
            if (used != t.id.size() - sep - 2) continue;
        } catch (const std::exception&) {
            continue;
        }
        auto site = j.find(t.site);
        if (site == j.end() || !site->is_object()) continue;
        auto answers = site->find("answers");
        if (answers == site->end() || !answers->is_array()) {
            throw Error(ErrorKind::kFormat, name + ": site \"" + t.site + "\" has no \"answers\" list");
        }
        for (const json& a : *answers) {
            if (!a.is_object() || a.value("id", -1) != n) continue;
            const std::string where = name + ": " + t.site + " answer " + std::to_string(n);
            if (!a.contains("ans") || !a["ans"].is_string()) bad(where, "missing string field \"ans\"");
            t.references = {a["ans"].get<std::string>()};
            t.reference_type = a.value("type", std::string());
            ++attached;
            break;
        }
    }
    return attached;
}

Shard parse_shard(const std::string& text) {
    Shard s;
    const size_t slash = text.find('/');
    bool ok = slash != std::string::npos;
    if (ok) {
        try {
            size_t a = 0, b = 0;
            s.index = std::stoi(text.substr(0, slash), &a);
            s.count = std::stoi(text.substr(slash + 1), &b);
            ok = a == slash && b == text.size() - slash - 1 && s.count >= 1 && s.index >= 0 &&
                 s.index < s.count;
        } catch (const std::exception&) {
            ok = false;
        }
    }
    if (!ok) {
        throw Error(ErrorKind::kInvalidArgument,
                    "--shard \"" + text + "\": expected i/n with 0 <= i < n, e.g. 0/4");
    }
    return s;
}

std::vector<EvalTask> select_shard(const std::vector<EvalTask>& tasks, const Shard& shard) {
    std::vector<EvalTask> out;
    for (size_t k = 0; k < tasks.size(); ++k) {
        if (static_cast<int>(k % static_cast<size_t>(shard.count)) == shard.index) out.push_back(tasks[k]);
    }
    return out;
}

std::vector<EvalTask> select_tasks(const std::vector<EvalTask>& tasks, const TaskSelection& selection) {
    std::set<std::string> file_ids, file_sites;  // sites lower-cased
    std::string known;                           // the file's sites as written, for the error
    for (const EvalTask& t : tasks) {
        file_ids.insert(t.id);
        if (file_sites.insert(model::ascii_lower(t.site)).second) known += (known.empty() ? "" : ", ") + t.site;
    }
    for (const std::string& id : selection.ids) {
        if (!file_ids.count(id)) throw Error(ErrorKind::kInvalidArgument, "--ids: no task has the id \"" + id + "\"");
    }
    std::set<std::string> sites;
    for (const std::string& s : selection.sites) {
        if (!file_sites.count(model::ascii_lower(s))) {
            throw Error(ErrorKind::kInvalidArgument,
                        "--sites: no task is on the site \"" + s + "\" (the file has: " + known + ")");
        }
        sites.insert(model::ascii_lower(s));
    }
    const std::set<std::string> ids(selection.ids.begin(), selection.ids.end());
    std::vector<EvalTask> out;
    for (const EvalTask& t : tasks) {
        if (selection.limit > 0 && static_cast<int64_t>(out.size()) >= selection.limit) break;
        if (!ids.empty() && !ids.count(t.id)) continue;
        if (!sites.empty() && !sites.count(model::ascii_lower(t.site))) continue;
        out.push_back(t);
    }
    return out;
}

std::string task_dir_name(const std::string& id) {
    std::string out;
    bool replaced = id.empty() || id == "." || id == "..";
    for (unsigned char c : id) {
        if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
            out += static_cast<char>(c);
        } else {
            out += '_';
            replaced = true;
        }
    }
    if (out.size() > 80) {
        out.resize(80);
        replaced = true;
    }
    if (replaced) {
        char buf[24];
        std::snprintf(buf, sizeof buf, "-%08llx", static_cast<unsigned long long>(fnv1a(id) & 0xffffffffull));
        out += buf;
    }
    return out;
}

}  // namespace surf::eval
