// The agent's typed vocabulary (DESIGN.md rule 13): every action the policy may take, the outputs of the
// three modules (policy step, localizer point, validator verdict), and the ONE place where model text is
// parsed and validated. Anything malformed or out of range throws Error(kModelOutput) with a message
// written to be fed back to the model ("field action.x: expected an integer in [0, 1000], got 1200").
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

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
// A key or chord pressed on the focused element: "Enter", "Tab", "ctrl+a", "shift+Tab" (tools/browser/input.h
// names the keys; parsing checks the chord).
struct KeyAction {
    std::string keys;
};
// An option of a native <select> (dropdown list) chosen by its visible text; the point locates the list.
struct SelectAction {
    std::string element;
    int x = 0, y = 0;
    std::string option;
};
// Pointer gestures at an element, located like a click: the mouse moved there without a click (menus
// that open on hover), a double click, a right click (the page's contextmenu handler).
struct HoverAction {
    std::string element;
    int x = 0, y = 0;
};
struct DoubleClickAction {
    std::string element;
    int x = 0, y = 0;
};
struct RightClickAction {
    std::string element;
    int x = 0, y = 0;
};
// The left button pressed on `element`, moved with it held and released on `to_element` (sliders, sortable
// lists, HTML5 drag and drop); each end is located like a click.
struct DragAction {
    std::string element;
    int x = 0, y = 0;
    std::string to_element;
    int to_x = 0, to_y = 0;
};

// Tabs: a page that opens a tab (target=_blank, window.open) makes it the active one; the observation lists
// the open tabs when there is more than one. switch_tab makes tab `index` (0 = the first opened) the active
// one; close_tab closes the active tab and returns to the one active before it.
struct SwitchTabAction {
    int index = 0;
};
struct CloseTabAction {};
// A file from the run's upload folder (RunOptions::upload_dir) given to the file field at the point: the
// field is clicked and its file chooser receives the file. Offered only when the run has an upload folder;
// `file` is a name the policy chose from its list, which the run turns into the file's path before it acts.
struct UploadAction {
    std::string element;
    int x = 0, y = 0;
    std::string file;
};

// An action the embedding product registers for a run (RunOptions::custom_actions, agent/custom_actions.h):
// its name, and the fields the policy wrote beside "type", as the action's schema orders them.
struct CustomAction {
    std::string name;
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

using Action =
    std::variant<ClickAction, WriteAction, ScrollAction, GotoAction, BackAction, RefreshAction, WaitAction,
                 AnswerAction, KeyAction, HoverAction, DoubleClickAction, RightClickAction, DragAction,
                 SelectAction, SwitchTabAction, CloseTabAction, UploadAction, CustomAction>;

// "click", "write", ... as the schema's `type` discriminator spells them; a custom action's own name.
const char* action_name(const Action& action);
// Every built-in action type, in the variant's order (CustomAction, the last alternative, excluded).
const std::vector<std::string>& action_names();
const char* scroll_direction_name(ScrollDirection direction);
// The action as the schema's JSON (round-trips through parse_action).
nlohmann::ordered_json action_to_json(const Action& action);
// One short line for logs and the history shown to the policy: `click "Search button"`.
std::string describe_action(const Action& action);
// A point an action acts on: the element the localizer searches for, and the policy's own estimate of it.
struct PointTarget {
    std::string element;
    int x = 0, y = 0;
};
// The points an action acts on, in order: none (scroll, key, goto, ...), one (click, write, select, hover,
// double_click, right_click) or two (drag: where it starts, then where it ends).
std::vector<PointTarget> action_points(const Action& action);
// True for actions that act on a point of the page (action_points is not empty).
bool needs_point(const Action& action);
// What an action is aimed at, for logs: the element of a pointed action, the URL of a goto ("" otherwise).
std::string action_target(const Action& action);
bool is_answer(const Action& action);

// The action types a policy output schema offers: the `type` constants of the branches of its
// properties.action (anyOf / oneOf, local $refs followed). A profile offers the policy exactly these.
// Throws Error(kConfig) naming `origin` when the schema offers none or names a type surf does not know.
std::vector<std::string> offered_actions(const nlohmann::json& policy_schema, const std::string& origin);
// Throws Error(kModelOutput) when `action` is not one of `offered` (a reply that did not follow the schema,
// e.g. from an endpoint without constrained decoding), naming the actions that are.
void check_offered(const Action& action, const std::vector<std::string>& offered);

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
// `custom` names the run's custom actions: a type among them parses as a CustomAction holding its other
// fields (agent/custom_actions.h checks them against the action's schema).
PolicyOutput parse_policy_output(const std::string& text, const std::vector<std::string>& custom = {});
Action parse_action(const nlohmann::json& value, const std::string& where = "action",
                    const std::vector<std::string>& custom = {});

// Localizer point {x, y}, each a number in [0, max_x] / [0, max_y] (max 1000 for normalised output, the sent
// image's width/height minus one for pixel output).
LocalizerOutput parse_localizer_output(const std::string& text, double max_x, double max_y);

// Validator verdict {reason, success}; also accepts WebVoyager's free-text verdict ending in SUCCESS or
// NOT SUCCESS when the text is not JSON.
Verdict parse_verdict(const std::string& text);

}  // namespace surf::agent
