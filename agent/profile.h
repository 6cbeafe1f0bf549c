// A prompt profile: which prompt files and schemas each module uses, and the model-specific settings
// (coordinate convention, image size sent, thinking switch, stop token, sampling, token budgets). One
// JSON file in prompts/ (prompts/profile_holotron.json is the default), or the same keys in YAML (a .yaml or
// .yml file); paths inside it are relative to the file. Loading renders nothing but checks everything: every
// file exists, every template parses and uses exactly the placeholders its module provides, every schema
// compiles.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/coordinates.h"
#include "agent/prompt_renderer.h"
#include "model/sampler.h"
#include "model/structured/json_schema.h"

namespace surf::agent {

struct CustomActionSchema;

struct ModuleSettings {
    int max_tokens = 512;
    model::SamplingParams sampling;  // temperature 0 = greedy
    int retries = 2;                 // extra attempts after a malformed / out-of-range output
};

struct PromptProfile {
    std::string name;
    std::string path;  // the profile file

    // Policy: system prompt, the per-step user turn, the feedback turn after malformed output.
    std::shared_ptr<PromptTemplate> policy_system;  // {schema} {date}
    std::shared_ptr<PromptTemplate>
        policy_turn;  // {task} {step} {max_steps} {notes} {history} {observation} {forced} [{elements}]
    std::shared_ptr<PromptTemplate> retry_feedback;  // {error}
    std::shared_ptr<const model::CompiledSchema> policy_schema;
    std::string policy_schema_text;           // shown in the system prompt
    std::vector<std::string> policy_actions;  // the action types policy_schema offers (offered_actions)
    // The run's custom actions (agent/custom_actions.h: with_actions), and what the system prompt adds for
    // them.
    std::vector<std::shared_ptr<const CustomActionSchema>> custom_actions;
    std::string policy_system_extra;
    std::shared_ptr<const model::CompiledSchema> answer_schema;  // forced answer: action must be answer
    std::string answer_schema_text;
    ModuleSettings policy;

    // Localizer: one user turn with the screenshot and the element description.
    std::shared_ptr<PromptTemplate> localizer_prompt;  // {element} {schema} {width} {height} [{elements}]
    std::shared_ptr<const model::CompiledSchema> localizer_schema;
    std::string localizer_schema_text;
    PointConvention localizer_convention = PointConvention::kNormalized1000;
    PointConvention policy_convention = PointConvention::kNormalized1000;
    ModuleSettings localizer;

    // Validator: system prompt + user turn with the task, the answer and the last screenshots.
    std::shared_ptr<PromptTemplate> validator_system;  // {schema}
    std::shared_ptr<PromptTemplate>
        validator_turn;  // {task} {answer} {notes} {n_screenshots} [{elements}]; the screenshots follow
    std::shared_ptr<const model::CompiledSchema> validator_schema;
    std::string validator_schema_text;
    ModuleSettings validator;

    // Model format.
    bool enable_thinking = false;             // passed to the chat template
    std::string stop_token = "<SPECIAL_12>";  // ends an assistant turn
    int image_max_width = 0;                  // screenshots are downscaled to fit before sending (0 = as is)
    int image_max_height = 0;

    // The page's element list (agent/page_text.h) in the prompts that use {elements}: at most this many
    // entries. 0 = none, and then no prompt may use {elements}.
    int page_elements = 0;
    // The policy's element fields may name only listed elements (its schema gets their descriptions as an
    // enum each step), and a listed element is acted on at its listed point, without the localizer. For a
    // small model that copies from the list: it cannot name an element the page lacks.
    bool listed_elements_only = false;
    // A write action types one of the task's quoted strings ("…", “…”, «…») when the task quotes any (its
    // schema gets them as an enum each step): a small model copies the text whole instead of garbling it.
    bool typed_text_from_task_quotes = false;
    // A click, write or select whose element contains none of the strings its thought quotes is turned to
    // the listed control that does (agent/thought_target.h); the trace keeps the policy's own element.
    bool element_follows_thought = false;

    // Memory.
    int history_steps = 3;               // recent actions listed in each turn's text
    int screenshots_on_restart = 3;      // screenshots re-sent when the policy session is rebuilt
    int validator_screenshots = 3;       // last screenshots the validator sees
    int64_t max_session_tokens = 60000;  // rebuild the policy session (compacted) beyond this
};

// Loads and checks a profile. Throws Error(kIo / kFormat / kConfig) naming the file and field.
PromptProfile load_profile(const std::string& path);

// `profile` with the answer action's content constrained to `content_schema` (JSON text) in both the policy's
// schema and the forced-answer schema, recompiled (RunOptions::answer_schema). Throws Error(kInvalidArgument)
// naming answer_schema for text that is not a JSON schema object, holds "$ref", or that the profile's
// schemas have no answer action for.
PromptProfile with_answer_content(const PromptProfile& profile, const std::string& content_schema);

// The prompts/ folder: $SURF_PROMPTS_DIR, else the installed or the source tree's (base/data_paths.h).
std::string prompts_dir();

// prompts_dir()/profile_holotron.json.
std::string default_profile_path();

// The profile a model folder runs with when none is named: the folder's own surf_profile.json (or
// surf_profile.yaml) when it ships one (models/surf-tiny does), else default_profile_path().
std::string profile_for_model(const std::string& model_dir);

}  // namespace surf::agent
