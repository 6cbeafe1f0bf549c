// A prompt profile for tests that need the tiny random model to take one path: the e2e profile
// (tests/browser/agent_pages/profile_tiny.json) with the policy offered one action whose fields the test
// fixes, so that constrained decoding writes that action at every step.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace surf::test {

inline const std::string kAgentPages = SURF_SOURCE_DIR "/tests/browser/agent_pages";

// The tiny e2e profile's JSON with its files' paths made absolute, so that a test can change it and write it
// anywhere.
inline nlohmann::json tiny_profile_json() {
    nlohmann::json profile = nlohmann::json::parse(read_file(kAgentPages + "/profile_tiny.json"));
    for (auto it = profile.begin(); it != profile.end(); ++it) {
        if (it->is_string() &&
            (it->get<std::string>().ends_with(".md") || it->get<std::string>().ends_with(".json")))
            *it = (std::filesystem::path(kAgentPages) / it->get<std::string>()).lexically_normal().string();
    }
    return profile;
}

// The tiny e2e profile with the policy's action narrowed to `action` (a JSON schema of one action object),
// written into `dir`; returns the profile's path.
inline std::string profile_offering(const std::filesystem::path& dir, const nlohmann::json& action,
                                    int policy_max_tokens = 200) {
    nlohmann::json profile = tiny_profile_json();
    nlohmann::json schema =
        nlohmann::json::parse(read_file(kAgentPages + "/schemas/policy_tiny.schema.json"));
    schema["$defs"]["only"] = action;
    schema["properties"]["action"] = {{"$ref", "#/$defs/only"}};
    std::ofstream(dir / "policy.schema.json") << schema.dump(1);
    profile["policy_schema"] = (dir / "policy.schema.json").string();
    profile["policy"]["max_tokens"] = policy_max_tokens;
    std::ofstream(dir / "profile.json") << profile.dump(1);
    return (dir / "profile.json").string();
}

// An action object with constant fields, e.g. {"type":"write","content":"<secret:pw>"}; x and y free.
inline nlohmann::json action_with(const nlohmann::json& constants, bool pointed) {
    nlohmann::json props = nlohmann::json::object(), required = nlohmann::json::array();
    for (const auto& [key, value] : constants.items()) {
        props[key] = {{"const", value}};
        required.push_back(key);
    }
    if (pointed) {
        for (const char* axis : {"x", "y"}) {
            props[axis] = {{"$ref", "#/$defs/coordinate"}};
            required.push_back(axis);
        }
    }
    return {
        {"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
}

}  // namespace surf::test
