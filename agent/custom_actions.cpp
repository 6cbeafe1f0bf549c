#include "agent/custom_actions.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "agent/profile.h"
#include "base/error.h"
#include "base/utf8.h"
#include "model/structured/grammar.h"

namespace surf::agent {

namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument, where + ": " + what);
}

bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 64 || name[0] < 'a' || name[0] > 'z') return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

// The arguments schema of `spec` as an object schema {properties, required}; errors name the action.
ojson arguments_object(const CustomActionSpec& spec, const std::string& where) {
    ojson schema = ojson::object();
    if (!spec.arguments_schema.empty()) {
        try {
            schema = ojson::parse(spec.arguments_schema);
        } catch (const nlohmann::json::exception& e) {
            bad(where + ".arguments_schema", std::string("not JSON: ") + e.what());
        }
    }
    if (!schema.is_object()) bad(where + ".arguments_schema", "expected a JSON schema object");
    if (model::schema_has_refs(schema))
        bad(where + ".arguments_schema", "\"$ref\" is not supported: write the schema inline");
    if (schema.contains("type") && schema["type"] != "object")
        bad(where + ".arguments_schema", "the arguments are an object (\"type\": \"object\")");
    ojson props = schema.value("properties", ojson::object());
    if (!props.is_object()) bad(where + ".arguments_schema.properties", "expected an object");
    if (props.contains("type"))
        bad(where + ".arguments_schema.properties", "\"type\" names the action itself");
    ojson required = schema.value("required", ojson::array());
    if (!required.is_array()) bad(where + ".arguments_schema.required", "expected an array of field names");
    for (const auto& r : required)
        if (!r.is_string() || !props.contains(r.get<std::string>()))
            bad(where + ".arguments_schema.required", "names a field that is not a property: " + r.dump());
    return ojson{
        {"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
}

// The policy schema's branch for a custom action: {"type": {"const": name}} then its fields.
ojson action_branch(const CustomActionSpec& spec, const ojson& args) {
    ojson props = ojson::object();
    props["type"] = ojson{{"const", spec.name}};
    for (const auto& [key, value] : args["properties"].items()) props[key] = value;
    ojson required = ojson::array({"type"});
    for (const auto& r : args["required"]) required.push_back(r);
    return ojson{{"type", "object"},
                 {"description", spec.description},
                 {"properties", props},
                 {"required", required},
                 {"additionalProperties", false}};
}

// The action a branch of properties.action stands for (its type const, $refs into $defs followed).
std::string branch_action(const ojson& schema, const ojson& branch) {
    const ojson* b = &branch;
    if (b->contains("$ref") && (*b)["$ref"].is_string()) {
        const std::string ref = (*b)["$ref"].get<std::string>();
        const nlohmann::json::json_pointer pointer(ref.substr(ref.find('#') + 1));
        if (!schema.contains(pointer)) return "";
        b = &schema.at(pointer);
    }
    if (!b->contains("properties") || !(*b)["properties"].contains("type")) return "";
    return (*b)["properties"]["type"].value("const", std::string());
}

// The branches of a policy schema's properties.action (its anyOf or oneOf; a single branch becomes an anyOf).
ojson& action_branches(ojson& schema) {
    ojson& action = schema["properties"]["action"];
    const char* list_key = action.contains("oneOf") ? "oneOf" : "anyOf";
    if (!action.contains(list_key)) action = ojson{{list_key, ojson::array({action})}};
    return action[list_key];
}

// Adds `- name {a, b}: description` to the system prompt's list of the run's extra actions.
void add_action_line(PromptProfile& p, const std::string& name, const std::vector<std::string>& fields,
                     const std::string& description) {
    const std::string heading = "\n\nMore actions in this run:\n";
    if (p.policy_system_extra.find(heading) == std::string::npos) p.policy_system_extra += heading;
    p.policy_system_extra +=
        "- " + name + (fields.empty() ? "" : " {" + comma_joined(fields) + "}") + ": " + description + "\n";
}

}  // namespace

std::string comma_joined(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
}

CustomActionSpec ask_human_action(std::function<std::string(const std::string& question)> ask) {
    return {
        "ask_human",
        "ask the user a question, only when the task is ambiguous or needs something only they know; their "
        "reply is the outcome",
        R"({"properties": {"question": {"type": "string", "minLength": 1, "maxLength": 500}},)"
        R"( "required": ["question"]})",
        [ask = std::move(ask)](const CustomActionCall& call) {
            const std::string reply = ask(call.arguments.at("question").get<std::string>());
            return "the user replied: " + (reply.empty() ? std::string("(nothing)") : reply);
        }};
}

std::vector<std::string> upload_files(const std::string& upload_dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(upload_dir, ec)) bad("upload_dir", upload_dir + ": not a folder");
    std::vector<std::string> files;
    for (const fs::directory_entry& e : fs::directory_iterator(upload_dir, ec))
        if (e.is_regular_file(ec)) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    if (files.size() > 100) files.resize(100);
    if (files.empty()) bad("upload_dir", upload_dir + ": holds no file to upload");
    return files;
}

PromptProfile with_upload(const PromptProfile& profile, const std::vector<std::string>& files) {
    PromptProfile p = profile;
    ojson schema = ojson::parse(p.policy_schema_text);
    ojson& branches = action_branches(schema);
    const ojson coordinate = {{"type", "integer"}, {"minimum", 0}, {"maximum", 1000}};
    ojson props = ojson::object();
    props["type"] = ojson{{"const", "upload"}};
    props["element"] = ojson{{"type", "string"}, {"minLength", 1}, {"maxLength", 300}};
    props["x"] = coordinate;
    props["y"] = coordinate;
    props["file"] = ojson{{"enum", files}};
    branches.push_back(ojson{{"type", "object"},
                             {"description", "Give a file to a file field."},
                             {"properties", props},
                             {"required", {"type", "element", "x", "y", "file"}},
                             {"additionalProperties", false}});
    p.policy_schema_text = schema.dump();
    p.policy_schema = model::compile_json_schema(schema, "the policy schema with the upload action");
    p.policy_actions.push_back("upload");
    add_action_line(p, "upload", {"element", "x", "y", "file"},
                    "click a file field and give it one of these files: " + comma_joined(files) + ".");
    return p;
}

PromptProfile with_actions(const PromptProfile& profile, const std::vector<CustomActionSpec>& add,
                           const std::vector<std::string>& remove) {
    PromptProfile p = profile;
    ojson schema = ojson::parse(p.policy_schema_text);
    ojson& branches = action_branches(schema);

    const std::set<std::string> removed(remove.begin(), remove.end());
    for (const std::string& name : removed) {
        if (name == "answer") bad("removed_actions", "the answer action cannot be removed");
        if (std::find(p.policy_actions.begin(), p.policy_actions.end(), name) == p.policy_actions.end())
            bad("removed_actions", "\"" + name + "\" is not an action of " + p.path);
    }
    ojson kept = ojson::array();
    std::vector<std::string> dropped_defs;  // the definitions only a removed branch referred to
    for (const ojson& b : branches) {
        if (!removed.count(branch_action(schema, b)))
            kept.push_back(b);
        else if (b.contains("$ref") && b["$ref"].is_string())
            dropped_defs.push_back(b["$ref"].get<std::string>());
    }
    branches = kept;
    for (const std::string& ref : dropped_defs) {
        const nlohmann::json::json_pointer pointer(ref.substr(ref.find('#') + 1));
        if (pointer.empty() || !schema.contains(pointer)) continue;
        schema[pointer.parent_pointer()].erase(pointer.back());
    }
    std::erase_if(p.policy_actions, [&](const std::string& a) { return removed.count(a) > 0; });

    const std::vector<std::string>& builtin = action_names();
    for (size_t i = 0; i < add.size(); ++i) {
        const CustomActionSpec& spec = add[i];
        const std::string where = "custom_actions[" + std::to_string(i) + "] (" + spec.name + ")";
        if (!valid_name(spec.name)) bad(where + ".name", "expected [a-z][a-z0-9_]*, at most 64 characters");
        if (std::find(builtin.begin(), builtin.end(), spec.name) != builtin.end())
            bad(where + ".name",
                "a built-in action's name (remove the built-in to replace it: not supported)");
        if (std::find(p.policy_actions.begin(), p.policy_actions.end(), spec.name) != p.policy_actions.end())
            bad(where + ".name", "registered twice");
        if (spec.description.empty())
            bad(where + ".description", "empty: the policy needs to know what it does");
        if (!spec.handler) bad(where + ".handler", "missing");
        const ojson args = arguments_object(spec, where);
        auto registered = std::make_shared<CustomActionSchema>();
        registered->name = spec.name;
        for (const auto& [key, value] : args["properties"].items()) registered->fields.push_back(key);
        try {
            registered->arguments = model::compile_json_schema(args, where + ".arguments_schema");
        } catch (const Error& e) {
            bad(where + ".arguments_schema", e.what());
        }
        branches.push_back(action_branch(spec, args));
        p.policy_actions.push_back(spec.name);
        add_action_line(p, spec.name, registered->fields, spec.description);
        p.custom_actions.push_back(std::move(registered));
    }
    p.policy_schema_text = schema.dump();
    p.policy_schema = model::compile_json_schema(schema, "the policy schema with the run's actions");
    if (!removed.empty())
        p.policy_system_extra +=
            "\n\nNot available in this run: " + comma_joined({removed.begin(), removed.end()}) + ".\n";
    return p;
}

void check_custom_arguments(const Action& action, const PromptProfile& profile) {
    const auto* custom = std::get_if<CustomAction>(&action);
    if (!custom) return;
    const auto it = std::find_if(profile.custom_actions.begin(), profile.custom_actions.end(),
                                 [&](const auto& c) { return c->name == custom->name; });
    if (it == profile.custom_actions.end())
        throw Error(ErrorKind::kModelOutput, "action.type: \"" + custom->name + "\" is not an action here");
    const CustomActionSchema& schema = **it;
    // Compact JSON in the schema's field order, as the grammar reads it.
    std::string text = "{";
    for (const std::string& field : schema.fields) {
        if (!custom->arguments.contains(field)) continue;
        text += (text.size() > 1 ? "," : "") + nlohmann::json(field).dump() + ":" +
                custom->arguments[field].dump();
    }
    text += "}";
    const std::string fields = comma_joined(schema.fields);
    for (const auto& [key, value] : custom->arguments.items())
        if (std::find(schema.fields.begin(), schema.fields.end(), key) == schema.fields.end())
            throw Error(ErrorKind::kModelOutput, "action." + key + ": not a field of " + custom->name +
                                                     " (its fields: " + (fields.empty() ? "none" : fields) +
                                                     ")");
    model::ByteMatcher matcher(schema.arguments->grammar);
    if (!matcher.accept_bytes(text) || !matcher.can_end())
        throw Error(ErrorKind::kModelOutput, "action: the fields of " + custom->name +
                                                 " do not match its schema " +
                                                 shorten_utf8(schema.arguments->schema_text, 300) + "; got " +
                                                 shorten_utf8(text, 300));
}

}  // namespace surf::agent
