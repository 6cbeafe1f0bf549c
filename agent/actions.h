// The agent's typed vocabulary (DESIGN.md rule 13): every action the policy may take, the outputs of the
// three modules (policy step, localizer point, validator verdict), and the ONE place where model text is
// parsed and validated. Anything malformed or out of range throws Error(kModelOutput) with a message
// written to be fed back to the model ("field action.x: expected an integer in [0, 1000], got 1200").
#pragma once

#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

namespace surf::agent {

// Coordinates in policy output are 0–1000 of the last screenshot (prompts/schemas/policy_action.schema.json).
struct ClickAction {
    std::string element;  // description the localizer searches for
    int x = 0, y = 0;     // the policy's own guess, 0–1000
};
struct WriteAction {
    std::string content;
    std::string element;
    int x = 0, y = 0;
    bool clear = true;        // select all and delete before typing
    bool press_enter = true;  // Enter after typing (Surfer-H's executor always does)
};
enum class ScrollDirection { kUp, kDown, kLeft, kRight };
struct ScrollAction {
    ScrollDirection direction = ScrollDirection::kDown;
};
struct GotoAction {
    std::string url;
};
struct BackAction {};
struct RefreshAction {};
struct WaitAction {
    int seconds = 2;
};
struct AnswerAction {
    std::string content;
};

using Action = std::variant<ClickAction, WriteAction, ScrollAction, GotoAction, BackAction, RefreshAction,
                            WaitAction, AnswerAction>;

// "click", "write", ... as the schema's `type` discriminator spells them.
const char* action_name(const Action& action);
const char* scroll_direction_name(ScrollDirection direction);
// The action as the schema's JSON (round-trips through parse_action).
nlohmann::ordered_json action_to_json(const Action& action);
// One short line for logs and the history shown to the policy: `click "Search button"`.
std::string describe_action(const Action& action);
// True for actions that need a point on the page (click, write).
bool needs_point(const Action& action);
// The element description of a click/write ("" otherwise).
std::string action_target(const Action& action);
bool is_answer(const Action& action);

struct PolicyOutput {
    std::string thought;
    std::string note;
    Action action;
};

struct LocalizerOutput {
    double x = 0, y = 0;  // in the convention the caller names (validated against its range)
};

struct Verdict {
    bool success = false;
    std::string reason;
};

// Parses one JSON value from `text` (surrounding whitespace allowed, nothing else). Errors name `what`.
nlohmann::json parse_model_json(const std::string& text, const std::string& what);

// Policy step {thought, note, action}. `notes` is accepted as a synonym of `note` (Surfer-H's CLI spells it
// so); unknown fields, wrong types, out-of-range coordinates and unknown action types are errors.
PolicyOutput parse_policy_output(const std::string& text);
Action parse_action(const nlohmann::json& value, const std::string& where = "action");

// Localizer point {x, y}, each a number in [0, max_x] / [0, max_y] (max 1000 for normalised output, the sent
// image's width/height minus one for pixel output).
LocalizerOutput parse_localizer_output(const std::string& text, double max_x, double max_y);

// Validator verdict {reason, success}; also accepts WebVoyager's free-text verdict ending in SUCCESS or
// NOT SUCCESS when the text is not JSON.
Verdict parse_verdict(const std::string& text);

}  // namespace surf::agent
