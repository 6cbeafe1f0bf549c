// Actions a product adds to a run, and built-in actions it takes away (RunOptions::custom_actions,
// RunOptions::removed_actions). A custom action joins the policy's action schema (so constrained decoding
// writes it like a built-in one) and its system prompt; when the policy chooses it, the run calls its handler
// with the arguments, checked against the action's schema, and the policy reads the handler's text as the
// step's outcome.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/actions.h"
#include "agent/environment.h"
#include "model/structured/json_schema.h"

namespace surf::tools {
class BrowserSession;
}

namespace surf::agent {

struct PromptProfile;

// What a custom action's handler gets.
struct CustomActionCall {
    const nlohmann::ordered_json& arguments;  // the action's fields, as its schema orders them
    const std::string& url;                   // the page's URL when the policy chose the action
    tools::BrowserSession* page;              // the run's browser tab (null in environments without one)
    // Where a replaced built-in that acts on a point acts (ActionRegistry::replace_builtin), in CSS pixels of
    // the viewport; null for custom actions.
    const ActionPoints* points = nullptr;
};

struct CustomActionSpec {
    std::string name;         // [a-z][a-z0-9_]*, not a built-in action's name
    std::string description;  // one line for the policy: what the action does and when to use it
    // A JSON schema of an object (JSON text): its properties are the action's fields, in the order the policy
    // writes them. No "$ref". "{}" or "": an action without fields.
    std::string arguments_schema;
    // Runs the action; returns what happened (the policy reads it). An exception is a failed step whose
    // message the policy reads.
    std::function<std::string(const CustomActionCall&)> handler;
};

// A registered custom action as the run's profile holds it.
struct CustomActionSchema {
    std::string name;
    std::vector<std::string> fields;                         // the schema's properties, in order
    std::shared_ptr<const model::CompiledSchema> arguments;  // the arguments object
};

// "a, b, c" ("" for none): the lists of actions and fields in prompts and errors.
std::string comma_joined(const std::vector<std::string>& items);

// The ask_human action: its question field, and the user's reply (from `ask`) as its outcome.
CustomActionSpec ask_human_action(std::function<std::string(const std::string& question)> ask);

// The files of RunOptions::upload_dir the upload action may name (regular files, sorted, at most 100). Throws
// Error(kInvalidArgument) naming upload_dir when it is no folder or holds no file.
std::vector<std::string> upload_files(const std::string& upload_dir);

// `profile` offering the upload action with `files` as the only names it may write, and the system prompt
// saying so.
PromptProfile with_upload(const PromptProfile& profile, const std::vector<std::string>& files);

// `profile` with `add` joined to and `remove` taken from the policy's action schema (recompiled), the
// policy's offered actions updated, and the custom actions listed for the system prompt. Throws
// Error(kInvalidArgument) naming the action and field: a bad name, a name taken twice or by a built-in, a
// schema that is not an object schema or holds "$ref", no handler, removing an action the profile does not
// offer or the answer action.
PromptProfile with_actions(const PromptProfile& profile, const std::vector<CustomActionSpec>& add,
                           const std::vector<std::string>& remove);

// Throws Error(kModelOutput) when `action` is a custom action whose arguments its schema refuses (a reply
// from an endpoint without constrained decoding), naming the action and quoting its schema's fields.
void check_custom_arguments(const Action& action, const PromptProfile& profile);

}  // namespace surf::agent
