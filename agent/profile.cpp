#include "agent/profile.h"

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "agent/actions.h"
#include "agent/yaml_json.h"
#include "base/data_paths.h"
#include "base/error.h"
#include "base/file_text.h"
#include "base/utf8.h"

namespace surf::agent {

namespace {

namespace fs = std::filesystem;

struct Reader {
    const nlohmann::json& j;
    std::string origin;
    fs::path dir;
    std::set<std::string> seen;

    const nlohmann::json* find(const std::string& key) {
        seen.insert(key);
        auto it = j.find(key);
        return it == j.end() ? nullptr : &*it;
    }
    std::string string(const std::string& key, const std::string& fallback = "", bool required = false) {
        const nlohmann::json* v = find(key);
        if (!v) {
            if (required) throw Error(ErrorKind::kConfig, origin + ": missing field \"" + key + "\"");
            return fallback;
        }
        if (!v->is_string())
            throw Error(ErrorKind::kConfig, origin + ": field \"" + key + "\" must be a string");
        return v->get<std::string>();
    }
    int64_t integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) {
        const nlohmann::json* v = find(key);
        if (!v) return fallback;
        if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi) {
            throw Error(ErrorKind::kConfig, origin + ": field \"" + key + "\" must be an integer in [" +
                                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
        }
        return v->get<int64_t>();
    }
    bool boolean(const std::string& key, bool fallback) {
        const nlohmann::json* v = find(key);
        if (!v) return fallback;
        if (!v->is_boolean())
            throw Error(ErrorKind::kConfig, origin + ": field \"" + key + "\" must be true or false");
        return v->get<bool>();
    }
    fs::path file(const std::string& key) {
        const fs::path p = dir / string(key, "", true);
        if (!fs::exists(p))
            throw Error(ErrorKind::kIo,
                        origin + ": field \"" + key + "\" names " + p.string() + ", which does not exist");
        return p;
    }
    std::shared_ptr<PromptTemplate> prompt(const std::string& key, const std::set<std::string>& provided) {
        auto t = std::make_shared<PromptTemplate>(PromptTemplate::load(file(key).string()));
        for (const std::string& name : t->placeholders()) {
            if (!provided.count(name)) {
                throw Error(
                    ErrorKind::kConfig, t->origin() + ": unknown placeholder {" + name +
                                            "} (this prompt may use: " +
                                            [&] {
                                                std::string s;
                                                for (auto& p : provided) s += "{" + p + "} ";
                                                return s;
                                            }() +
                                            ")");
            }
        }
        return t;
    }
    std::shared_ptr<const model::CompiledSchema> schema(const std::string& key, std::string* text) {
        const fs::path p = file(key);
        *text = surf::read_text_file(p);
        return model::compile_json_schema_text(*text, p.string());
    }
    ModuleSettings module(const std::string& key) {
        ModuleSettings m;
        const nlohmann::json* v = find(key);
        if (!v) return m;
        if (!v->is_object())
            throw Error(ErrorKind::kConfig, origin + ": field \"" + key + "\" must be an object");
        Reader r{*v, origin + " (" + key + ")", dir, {}};
        m.max_tokens = static_cast<int>(r.integer("max_tokens", m.max_tokens, 1, 32768));
        m.retries = static_cast<int>(r.integer("retries", m.retries, 0, 10));
        m.sampling.top_k = static_cast<int32_t>(r.integer("top_k", 0, 0, 1 << 20));
        m.sampling.seed = static_cast<uint64_t>(r.integer("seed", 0, 0, INT64_MAX));
        if (const nlohmann::json* t = r.find("temperature")) {
            if (!t->is_number() || t->get<double>() < 0)
                throw Error(ErrorKind::kConfig, r.origin + ": temperature must be a number ≥ 0");
            m.sampling.temperature = t->get<float>();
        }
        if (const nlohmann::json* t = r.find("top_p")) {
            if (!t->is_number()) throw Error(ErrorKind::kConfig, r.origin + ": top_p must be a number");
            m.sampling.top_p = t->get<float>();
        }
        r.check_unknown();
        return m;
    }
    void check_unknown() const {
        for (auto it = j.begin(); it != j.end(); ++it) {
            if (!seen.count(it.key()) && it.key().rfind("_", 0) != 0) {
                const std::string guess =
                    surf::closest_name(it.key(), std::vector<std::string>(seen.begin(), seen.end()));
                throw Error(ErrorKind::kConfig,
                            origin + ": unknown field \"" + it.key() + "\"" +
                                (guess.empty() ? "" : " (did you mean \"" + guess + "\"?)"));
            }
        }
    }
};

}  // namespace

std::string prompts_dir() {
    return data_dir("prompts", "SURF_PROMPTS_DIR");
}

std::string default_profile_path() {
    return prompts_dir() + "/profile_holotron.json";
}

std::string profile_for_model(const std::string& model_dir) {
    std::error_code ec;
    for (const char* name : {"surf_profile.json", "surf_profile.yaml"}) {
        const fs::path own = fs::path(model_dir) / name;
        if (!model_dir.empty() && fs::is_regular_file(own, ec)) return own.string();
    }
    return default_profile_path();
}

PromptProfile load_profile(const std::string& path) {
    const nlohmann::json j = read_json_or_yaml(path);
    if (!j.is_object())
        throw Error(ErrorKind::kFormat,
                    path + (is_yaml_path(path) ? ": expected a YAML mapping" : ": expected a JSON object"));
    Reader r{j, path, fs::path(path).parent_path(), {}};
    PromptProfile p;
    p.path = path;
    p.name = r.string("name", fs::path(path).stem().string());
    p.policy_system = r.prompt("policy_system", {"schema", "date"});
    p.policy_turn = r.prompt("policy_turn", {"task", "step", "max_steps", "notes", "history", "observation",
                                             "forced", "elements"});
    p.retry_feedback = r.prompt("retry_feedback", {"error"});
    p.policy_schema = r.schema("policy_schema", &p.policy_schema_text);
    p.policy_actions =
        offered_actions(nlohmann::json::parse(p.policy_schema_text), path + " (policy_schema)");
    p.answer_schema = r.schema("answer_schema", &p.answer_schema_text);
    if (offered_actions(nlohmann::json::parse(p.answer_schema_text), path + " (answer_schema)") !=
        std::vector<std::string>{"answer"})
        throw Error(ErrorKind::kConfig, path + ": answer_schema must offer the answer action only");
    p.policy = r.module("policy");
    p.policy_convention = parse_point_convention(r.string("policy_coordinates", "normalized_1000"));
    p.localizer_prompt = r.prompt("localizer_prompt", {"element", "schema", "width", "height", "elements"});
    p.localizer_schema = r.schema("localizer_schema", &p.localizer_schema_text);
    p.localizer_convention = parse_point_convention(r.string("localizer_coordinates", "normalized_1000"));
    p.localizer = r.module("localizer");
    p.validator_system = r.prompt("validator_system", {"schema"});
    p.validator_turn = r.prompt("validator_turn", {"task", "answer", "notes", "n_screenshots", "elements"});
    p.validator_schema = r.schema("validator_schema", &p.validator_schema_text);
    p.validator = r.module("validator");
    p.enable_thinking = r.boolean("enable_thinking", false);
    p.stop_token = r.string("stop_token", p.stop_token);
    p.image_max_width = static_cast<int>(r.integer("image_max_width", 0, 0, 16384));
    p.image_max_height = static_cast<int>(r.integer("image_max_height", 0, 0, 16384));
    p.history_steps = static_cast<int>(r.integer("history_steps", 3, 0, 100));
    p.screenshots_on_restart = static_cast<int>(r.integer("screenshots_on_restart", 3, 1, 16));
    p.validator_screenshots = static_cast<int>(r.integer("validator_screenshots", 3, 1, 16));
    p.max_session_tokens = r.integer("max_session_tokens", 60000, 1000, int64_t{1} << 30);
    p.page_elements = static_cast<int>(r.integer("page_elements", 0, 0, 1000));
    p.listed_elements_only = r.boolean("listed_elements_only", false);
    p.typed_text_from_task_quotes = r.boolean("typed_text_from_task_quotes", false);
    p.element_follows_thought = r.boolean("element_follows_thought", false);
    r.check_unknown();
    const bool listed = p.policy_turn->placeholders().count("elements") ||
                        p.localizer_prompt->placeholders().count("elements") ||
                        p.validator_turn->placeholders().count("elements");
    if (listed && p.page_elements == 0)
        throw Error(ErrorKind::kConfig, path +
                                            ": a prompt uses {elements} but \"page_elements\" is 0 (give the "
                                            "number of elements to list)");
    if (!listed && p.page_elements > 0)
        throw Error(ErrorKind::kConfig, path + ": \"page_elements\" is " + std::to_string(p.page_elements) +
                                            " but no prompt uses {elements}");
    if (p.listed_elements_only && !p.policy_turn->placeholders().count("elements"))
        throw Error(
            ErrorKind::kConfig,
            path + ": \"listed_elements_only\" is true but the policy's turn does not show {elements}");
    return p;
}

namespace {

// Replaces the content schema of every object branch whose "type" is the constant "answer"; returns how many.
int put_answer_content(nlohmann::ordered_json& node, const nlohmann::ordered_json& content) {
    int n = 0;
    if (node.is_object()) {
        const auto props = node.find("properties");
        if (props != node.end() && props->is_object() && props->contains("type") &&
            props->contains("content") && (*props)["type"].is_object() &&
            (*props)["type"].value("const", nlohmann::ordered_json()) == "answer") {
            (*props)["content"] = content;
            ++n;
        }
        for (auto& [key, value] : node.items()) n += put_answer_content(value, content);
    } else if (node.is_array()) {
        for (auto& value : node) n += put_answer_content(value, content);
    }
    return n;
}

}  // namespace

PromptProfile with_answer_content(const PromptProfile& profile, const std::string& content_schema) {
    const auto bad = [](const std::string& m) {
        throw Error(ErrorKind::kInvalidArgument, "answer_schema: " + m);
    };
    nlohmann::ordered_json content;
    try {
        content = nlohmann::ordered_json::parse(content_schema);
    } catch (const nlohmann::json::exception& e) {
        bad(std::string("not JSON: ") + e.what());
    }
    if (!content.is_object()) bad("expected a JSON schema object");
    if (model::schema_has_refs(content))
        bad("\"$ref\" and definitions are not supported: write the schema inline");
    PromptProfile p = profile;
    for (auto [text, compiled] : {std::pair{&p.policy_schema_text, &p.policy_schema},
                                  std::pair{&p.answer_schema_text, &p.answer_schema}}) {
        nlohmann::ordered_json schema = nlohmann::ordered_json::parse(*text);
        if (put_answer_content(schema, content) == 0)
            bad("the profile's schema " + p.path + " has no answer action");
        *text = schema.dump();
        try {
            *compiled = model::compile_json_schema(schema);
        } catch (const Error& e) {
            bad(e.what());
        }
    }
    return p;
}

}  // namespace surf::agent
