// Reading task files: format detection (eval/eval_tasks.h) and one reader per format. All three share the
// optional fields (reference answers, allow-list, step budget, viewport, page check).
#include "eval/eval_tasks.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/loop.h"
#include "base/error.h"
#include "base/utf8.h"

namespace surf::eval {

namespace {

using Json = nlohmann::ordered_json;

// The key sets each format's required fields, for the errors that name them.
const char* required_fields(TaskFormat format) {
    switch (format) {
        case TaskFormat::kWebVoyager: return "id, ques, web";
        case TaskFormat::kMind2Web: return "task_id, confirmed_task, website";
        case TaskFormat::kSurf: return "id, task, url";
    }
    return "";
}

// The format one object's keys name, or nullopt.
std::optional<TaskFormat> format_of(const Json& j) {
    if (j.contains("confirmed_task")) return TaskFormat::kMind2Web;
    if (j.contains("ques") || j.contains("web") || j.contains("web_name")) return TaskFormat::kWebVoyager;
    if (j.contains("task") || j.contains("url")) return TaskFormat::kSurf;
    return std::nullopt;
}

// One task object being read: every error names the place, the field and the format; `used` collects the
// keys read, so the rest can be carried along (published formats) or refused (surf's own).
struct ObjectReader {
    const Json& j;
    std::string where;
    TaskFormat format;
    std::string note;  // appended to errors: why this object is read in this format
    std::set<std::string> used;

    [[noreturn]] void bad(const std::string& message) const {
        throw Error(ErrorKind::kFormat,
                    where + ": " + message + " (" + task_format_name(format) + " task" + note + ")");
    }
    const Json* find(const std::string& key) {
        used.insert(key);
        auto it = j.find(key);
        return it == j.end() ? nullptr : &*it;
    }
    std::string text(const Json& v, const std::string& key) const {
        // WebVoyager ids are strings; other task files use numbers. Both name a task.
        if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
        if (!v.is_string()) bad("field \"" + key + "\" must be a string, got " + v.dump());
        const std::string s = v.get<std::string>();
        if (s.find_first_not_of(" \t\r\n") == std::string::npos) bad("field \"" + key + "\" is empty");
        return s;
    }
    std::string required(const std::string& key) {
        const Json* v = find(key);
        if (!v) bad("missing field \"" + key + "\"");
        return text(*v, key);
    }
    std::string optional(const std::string& key) {
        const Json* v = find(key);
        return v ? text(*v, key) : "";
    }
    std::vector<std::string> strings(const std::string& key) {
        const Json* v = find(key);
        std::vector<std::string> out;
        if (!v || v->is_null()) return out;
        const auto one = [&](const Json& x) {
            if (x.is_string()) return x.get<std::string>();
            if (x.is_number()) return x.dump();  // GAIA's answers may be numbers
            bad("field \"" + key + "\" must hold strings, got " + x.dump());
        };
        if (v->is_array()) {
            for (const Json& x : *v) out.push_back(one(x));
        } else if (v->is_string() || v->is_number()) {
            out.push_back(one(*v));
        } else {
            bad("field \"" + key + "\" must be a string or a list of strings, got " + v->dump());
        }
        return out;
    }
};

void read_start_url(ObjectReader& r, const std::string& key, EvalTask& t) {
    t.start_url = r.required(key);
    if (const std::string problem = agent::start_url_problem(t.start_url); !problem.empty())
        r.bad("field \"" + key + "\": " + problem);
}

// The optional fields every format shares. `aliases` also reads WebVoyager-era spellings (answer,
// reference_answers, allow_domains).
void read_options(ObjectReader& r, EvalTask& t, bool aliases) {
    for (const char* key : {"reference_answer", "reference_answers", "answer"}) {
        if (!aliases && std::string(key) != "reference_answer") continue;
        for (std::string& s : r.strings(key)) t.references.push_back(std::move(s));
    }
    if (const Json* v = r.find("viewport")) {
        if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number_integer() || !(*v)[1].is_number_integer())
            r.bad("field \"viewport\" must be [width, height], got " + v->dump());
        t.viewport_width = (*v)[0].get<int>();
        t.viewport_height = (*v)[1].get<int>();
        if (t.viewport_width < 16 || t.viewport_height < 16 || t.viewport_width > 8192 ||
            t.viewport_height > 8192)
            r.bad("field \"viewport\": " + v->dump() + " is outside 16..8192");
    }
    if (const Json* v = r.find("check")) {
        if (!v->is_string() || v->get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos)
            r.bad("field \"check\" must be a non-empty string (a JavaScript function of the answer)");
        t.check = v->get<std::string>();
    }
    if (const Json* v = r.find("reference_type")) {
        if (!v->is_string()) r.bad("field \"reference_type\" must be a string");
        t.reference_type = v->get<std::string>();
        if (t.reference_type != "golden" && t.reference_type != "possible")
            r.bad("field \"reference_type\": \"" + t.reference_type + "\" (expected golden or possible)");
    }
    for (const char* key : {"allowed_domains", "allow_domains"}) {
        if (!aliases && std::string(key) != "allowed_domains") continue;
        if (r.j.contains(key)) t.allowed_domains = r.strings(key);
    }
    if (const Json* v = r.find("max_steps")) {
        if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > 1000)
            r.bad("field \"max_steps\": " + v->dump() + " (expected an integer in 1..1000)");
        t.max_steps = v->get<int>();
    }
}

// The fields no reader used, in file order.
Json unread(const ObjectReader& r) {
    Json out = Json::object();
    for (auto it = r.j.begin(); it != r.j.end(); ++it) {
        if (!r.used.count(it.key())) out[it.key()] = it.value();
    }
    return out;
}

EvalTask read_webvoyager(ObjectReader& r) {
    EvalTask t;
    t.id = r.required("id");
    t.question = r.required("ques");
    read_start_url(r, "web", t);
    t.site = r.optional("web_name");
    read_options(r, t, true);
    // GAIA_web.jsonl: the GAIA answer, exact by construction.
    for (std::string& s : r.strings("Final answer")) t.references.push_back(std::move(s));
    if (r.j.contains("Final answer") && t.reference_type.empty()) t.reference_type = "golden";
    t.fields = unread(r);
    return t;
}

EvalTask read_mind2web(ObjectReader& r) {
    EvalTask t;
    t.id = r.required("task_id");
    t.question = r.required("confirmed_task");
    read_start_url(r, "website", t);
    read_options(r, t, false);
    t.fields = unread(r);
    return t;
}

EvalTask read_surf(ObjectReader& r) {
    EvalTask t;
    t.id = r.required("id");
    t.question = r.required("task");
    read_start_url(r, "url", t);
    t.site = r.optional("site");
    read_options(r, t, false);
    if (const Json* v = r.find("extra")) {
        if (!v->is_object()) r.bad("field \"extra\" must be an object, got " + v->dump());
        t.fields = *v;
    }
    const std::vector<std::string> known(r.used.begin(), r.used.end());
    for (auto it = r.j.begin(); it != r.j.end(); ++it) {
        if (r.used.count(it.key())) continue;
        const std::string guess = surf::closest_name(it.key(), known);
        r.bad("unknown field \"" + it.key() + "\"" +
              (guess.empty() ? "" : " (did you mean \"" + guess + "\"?)"));
    }
    return t;
}

EvalTask read_task(const Json& j, TaskFormat format, const std::string& where, const std::string& note) {
    ObjectReader r{j, where, format, note, {}};
    EvalTask t;
    switch (format) {
        case TaskFormat::kWebVoyager: t = read_webvoyager(r); break;
        case TaskFormat::kMind2Web: t = read_mind2web(r); break;
        case TaskFormat::kSurf: t = read_surf(r); break;
    }
    if (t.site.empty()) t.site = site_of_url(t.start_url);
    return t;
}

[[noreturn]] void bad(const std::string& where, const std::string& message) {
    throw Error(ErrorKind::kFormat, where + ": " + message);
}

Json parse_object(const std::string& text, const std::string& where) {
    Json j;
    try {
        j = Json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        bad(where, std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) bad(where, "expected a JSON object, got " + surf::shorten_utf8(j.dump(), 80));
    return j;
}

TaskFormat detect(const Json& j, const std::string& where) {
    const std::optional<TaskFormat> f = format_of(j);
    if (!f) {
        std::string keys;
        for (auto it = j.begin(); it != j.end(); ++it) keys += (keys.empty() ? "" : ", ") + it.key();
        bad(where, "not a task in a known format (fields: " + keys +
                       "); expected WebVoyager (id, ques, web), Online-Mind2Web (task_id, confirmed_task, "
                       "website) or surf (id, task, url)");
    }
    return *f;
}

// The 1-based line on which each element of a top-level JSON array starts (strings and nesting skipped).
std::vector<int> array_element_lines(const std::string& text) {
    std::vector<int> lines;
    int line = 1, depth = 0;
    bool in_string = false, escaped = false, expect_element = false;
    for (char c : text) {
        if (c == '\n') ++line;
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (depth == 1 && expect_element && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != ']') {
            lines.push_back(line);
            expect_element = false;
        }
        if (c == '"')
            in_string = true;
        else if (c == '[' || c == '{')
            expect_element = (++depth == 1);
        else if (c == ']' || c == '}')
            --depth;
        else if (c == ',' && depth == 1)
            expect_element = true;
    }
    return lines;
}

// The task objects of a file with their line numbers: a JSON array's elements or a JSON Lines file's lines.
std::vector<std::pair<int, Json>> task_objects(const std::string& text, const std::string& name) {
    std::vector<std::pair<int, Json>> out;
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) throw Error(ErrorKind::kFormat, name + ": no tasks");
    if (text[first] == '[') {
        Json all;
        try {
            all = Json::parse(text);
        } catch (const nlohmann::json::exception& e) {
            bad(name, std::string("not valid JSON (a JSON array of tasks): ") + e.what());
        }
        const std::vector<int> lines = array_element_lines(text);
        for (size_t i = 0; i < all.size(); ++i) {
            const int line = i < lines.size() ? lines[i] : 0;
            if (!all[i].is_object())
                bad(name + ":" + std::to_string(line),
                    "task " + std::to_string(i + 1) + " is not a JSON object");
            out.emplace_back(line, std::move(all[i]));
        }
        return out;
    }
    if (text[first] != '{') {
        const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + first, '\n'));
        bad(name + ":" + std::to_string(line),
            "not a task file: expected JSON Lines (one task object per line) or a JSON array of task "
            "objects");
    }
    std::istringstream in(text);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        out.emplace_back(number, parse_object(line, name + ":" + std::to_string(number)));
    }
    return out;
}

}  // namespace

const char* task_format_name(TaskFormat format) {
    switch (format) {
        case TaskFormat::kWebVoyager: return "WebVoyager";
        case TaskFormat::kMind2Web: return "Online-Mind2Web";
        case TaskFormat::kSurf: return "surf";
    }
    return "?";
}

std::string site_of_url(const std::string& url) {
    const size_t colon = url.find(':');
    const std::string scheme = colon == std::string::npos ? "" : surf::ascii_lower(url.substr(0, colon));
    const size_t start = url.find("://");
    if (start == std::string::npos) return scheme;
    const size_t end = url.find_first_of("/:?#", start + 3);
    std::string host = surf::ascii_lower(
        url.substr(start + 3, end == std::string::npos ? std::string::npos : end - start - 3));
    if (host.rfind("www.", 0) == 0) host = host.substr(4);
    return host.empty() ? scheme : host;
}

EvalTask parse_task_line(const std::string& line, const std::string& where) {
    const Json j = parse_object(line, where);
    return read_task(j, detect(j, where), where, "");
}

TaskFile parse_task_file(const std::string& text_in, const std::string& name) {
    const std::string bom = "\xEF\xBB\xBF";
    const std::string text = text_in.rfind(bom, 0) == 0 ? text_in.substr(bom.size()) : text_in;
    TaskFile file;
    std::map<std::string, int> seen;  // id -> line
    int first_line = 0;
    for (auto& [line, j] : task_objects(text, name)) {
        const std::string where = name + ":" + std::to_string(line);
        std::string note;
        if (first_line == 0) {
            file.format = detect(j, where);
            first_line = line;
        } else if (const auto own = format_of(j); own != file.format) {
            note = ", as line " + std::to_string(first_line) + " is; " + required_fields(file.format) +
                   " are required" +
                   (own ? std::string("; this line looks like a ") + task_format_name(*own) + " task" : "");
        }
        EvalTask t = read_task(j, file.format, where, note);
        t.line = line;
        auto [it, fresh] = seen.emplace(t.id, line);
        if (!fresh)
            bad(where, "task id \"" + t.id + "\" repeats the task on line " + std::to_string(it->second));
        file.tasks.push_back(std::move(t));
    }
    if (file.tasks.empty()) throw Error(ErrorKind::kFormat, name + ": no tasks");
    return file;
}

std::vector<EvalTask> parse_tasks(const std::string& text, const std::string& name) {
    return parse_task_file(text, name).tasks;
}

TaskFile load_task_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, path + ": cannot open the task file");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_task_file(ss.str(), path);
}

std::vector<EvalTask> load_tasks(const std::string& path) {
    return load_task_file(path).tasks;
}

}  // namespace surf::eval
