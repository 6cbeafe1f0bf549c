// YAML for the files people write by hand (prompt profiles, run configurations), read into the same JSON
// values the JSON readers take, so one reader checks both. Plain scalars are typed by the YAML 1.2 core
// schema (null, true/false, integers, floats, else a string); quoted scalars are always strings. Built on
// yaml-cpp where the build has it (every CPU build); a GPU-only build has none and refuses YAML with an error
// that says so.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace surf::agent {

// Parses one YAML document. `name` (a file name) prefixes every error (Error kFormat), with the line and
// column for syntax errors; a key repeated in one mapping is an error naming it. When `key_lines` is given,
// it receives the 1-based line of each top-level key (for later errors about a key).
nlohmann::ordered_json parse_yaml(const std::string& text, const std::string& name,
                                  std::map<std::string, int>* key_lines = nullptr);

// True when `path` names a YAML file by its extension (.yaml, .yml).
bool is_yaml_path(const std::string& path);

// Reads a JSON or YAML file (YAML by extension, else JSON) into JSON. Throws Error kIo / kFormat naming the
// file.
nlohmann::ordered_json read_json_or_yaml(const std::string& path,
                                         std::map<std::string, int>* key_lines = nullptr);

// Whether this build reads YAML.
bool yaml_supported();

}  // namespace surf::agent
