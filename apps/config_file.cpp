#include "apps/config_file.h"

#include <map>

#include "agent/yaml_json.h"
#include "base/error.h"
#include "base/utf8.h"

namespace surf::cli {

namespace {

using Json = nlohmann::ordered_json;

// One value as flag text: strings as they are, numbers as written in JSON.
std::string flag_text(const Json& v, const std::string& where) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return v.dump();
    throw Error(ErrorKind::kConfig, where + " must be a string or a number, got " + v.dump());
}

// "file:line" of a top-level key, or the file when its line is unknown.
std::string location(const std::string& path, const std::map<std::string, int>& lines,
                     const std::string& key) {
    std::string out = path;
    if (auto it = lines.find(key); it != lines.end()) {
        out += ':';
        out += std::to_string(it->second);
    }
    return out;
}

}  // namespace

Args apply_config_file(const Args& args, const std::string& path, const std::vector<FlagSpec>& specs,
                       const std::string& positional_key) {
    std::map<std::string, int> lines;
    Json config = agent::read_json_or_yaml(path, &lines);
    if (!config.is_object())
        throw Error(ErrorKind::kConfig, path + ": expected a mapping of flag names to values");
    // A results folder's config.json (eval/eval_config.h) re-runs as its "config" object.
    if (config.contains("surf_version") && config.contains("config") && config["config"].is_object()) {
        Json inner = std::move(config["config"]);
        config = std::move(inner);
        lines.clear();
    }
    std::map<std::string, const FlagSpec*> by_name;
    std::vector<std::string> names = {positional_key};
    for (const FlagSpec& spec : specs) {
        by_name[spec.name] = &spec;
        if (spec.name != "config") names.push_back(spec.name);
    }
    Args out = args;
    for (auto it = config.begin(); it != config.end(); ++it) {
        const std::string& key = it.key();
        const Json& value = it.value();
        const std::string where = location(path, lines, key) + ": \"" + key + "\"";
        if (key == positional_key) {
            if (!value.is_null()) out.set_default_positional({flag_text(value, where)});
            continue;
        }
        auto spec = by_name.find(key);
        if (spec == by_name.end() || key == "config") {
            const std::string guess = surf::closest_name(key, names);
            throw Error(ErrorKind::kConfig, location(path, lines, key) + ": unknown key \"" + key + "\"" +
                                                (guess.empty() ? "" : " (did you mean \"" + guess + "\"?)"));
        }
        if (value.is_null()) continue;
        const FlagSpec& flag = *spec->second;
        if (flag.value_name.empty()) {
            if (!value.is_boolean()) throw Error(ErrorKind::kConfig, where + " is a switch: true or false");
            if (value.get<bool>()) out.set_default(key, {"1"});
        } else if (value.is_array()) {
            if (!flag.repeatable) throw Error(ErrorKind::kConfig, where + " takes one value, not a list");
            std::vector<std::string> items;
            for (const Json& item : value) items.push_back(flag_text(item, where));
            if (!items.empty()) out.set_default(key, std::move(items));
        } else {
            out.set_default(key, {flag_text(value, where)});
        }
    }
    return out;
}

}  // namespace surf::cli
