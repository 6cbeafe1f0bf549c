#include "eval/eval_tasks.h"

#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"

namespace surf::eval {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& message) {
    throw Error(ErrorKind::kFormat, where + ": " + message);
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

}  // namespace

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
        if (file_sites.insert(surf::ascii_lower(t.site)).second)
            known += (known.empty() ? "" : ", ") + t.site;
    }
    for (const std::string& id : selection.ids) {
        if (!file_ids.count(id))
            throw Error(ErrorKind::kInvalidArgument, "--ids: no task has the id \"" + id + "\"");
    }
    std::set<std::string> sites;
    for (const std::string& s : selection.sites) {
        if (!file_sites.count(surf::ascii_lower(s))) {
            throw Error(ErrorKind::kInvalidArgument,
                        "--sites: no task is on the site \"" + s + "\" (the file has: " + known + ")");
        }
        sites.insert(surf::ascii_lower(s));
    }
    const std::set<std::string> ids(selection.ids.begin(), selection.ids.end());
    std::vector<EvalTask> out;
    for (const EvalTask& t : tasks) {
        if (selection.limit > 0 && static_cast<int64_t>(out.size()) >= selection.limit) break;
        if (!ids.empty() && !ids.count(t.id)) continue;
        if (!sites.empty() && !sites.count(surf::ascii_lower(t.site))) continue;
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
