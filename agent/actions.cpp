#include "agent/actions.h"
#include "base/utf8.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "base/error.h"
#include "tools/browser/input.h"

namespace surf::agent {

namespace {

constexpr int kMaxCoordinate = 1000;
constexpr size_t kMaxElementChars = 300;
constexpr size_t kMaxContentChars = 4000;
constexpr size_t kMaxUrlChars = 2048;
constexpr size_t kMaxKeysChars = 40;
constexpr int kMaxTabIndex = 63;

[[noreturn]] void fail(const std::string& message) {
    throw Error(ErrorKind::kModelOutput, message);
}

std::string shorten(const std::string& s, size_t n = 80) {
    return surf::shorten_utf8(s, n);
}

void check_fields(const nlohmann::json& obj, const std::string& where, const std::set<std::string>& allowed) {
    if (!obj.is_object()) fail(where + ": expected a JSON object, got " + shorten(obj.dump()));
    for (auto it = obj.begin(); it != obj.end(); ++it) {
        if (!allowed.count(it.key())) fail(where + ": unknown field \"" + it.key() + "\"");
    }
}

std::string get_string(const nlohmann::json& obj, const std::string& where, const std::string& key,
                       size_t max_len, bool required = true, bool non_empty = false) {
    auto it = obj.find(key);
    if (it == obj.end()) {
        if (required) fail(where + "." + key + ": missing");
        return "";
    }
    if (!it->is_string()) fail(where + "." + key + ": expected a string, got " + shorten(it->dump()));
    std::string s = it->get<std::string>();
    if (s.size() > max_len)
        fail(where + "." + key + ": longer than " + std::to_string(max_len) + " characters");
    if (non_empty && s.find_first_not_of(" \t\r\n") == std::string::npos) fail(where + "." + key + ": empty");
    return s;
}

int get_int(const nlohmann::json& obj, const std::string& where, const std::string& key, int lo, int hi) {
    auto it = obj.find(key);
    if (it == obj.end()) fail(where + "." + key + ": missing");
    if (!it->is_number())
        fail(where + "." + key + ": expected an integer in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "], got " + shorten(it->dump()));
    const double v = it->get<double>();
    if (!std::isfinite(v) || v != std::floor(v) || v < lo || v > hi) {
        fail(where + "." + key + ": expected an integer in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "], got " + shorten(it->dump()));
    }
    return static_cast<int>(v);
}

bool get_bool(const nlohmann::json& obj, const std::string& where, const std::string& key, bool fallback) {
    auto it = obj.find(key);
    if (it == obj.end()) return fallback;
    if (!it->is_boolean()) fail(where + "." + key + ": expected true or false, got " + shorten(it->dump()));
    return it->get<bool>();
}

std::string quoted(const std::string& s) {
    std::string out = "\"";  // appended, not "\"" + ...: GCC 12 warns falsely (-Wrestrict) on that form here
    out += shorten(s, 60);
    return out += '"';
}

}  // namespace

const char* scroll_direction_name(ScrollDirection d) {
    switch (d) {
        case ScrollDirection::kUp: return "up";
        case ScrollDirection::kDown: return "down";
        case ScrollDirection::kLeft: return "left";
        case ScrollDirection::kRight: return "right";
    }
    return "?";
}

const std::vector<std::string>& action_names() {
    static const std::vector<std::string> names = {
        "click", "write",        "scroll",      "goto", "back",   "refresh",    "wait",      "answer", "key",
        "hover", "double_click", "right_click", "drag", "select", "switch_tab", "close_tab", "upload"};
    return names;
}

const char* action_name(const Action& action) {
    static_assert(std::variant_size_v<Action> == 18,
                  "action_names() lists every built-in alternative of Action");
    if (const auto* c = std::get_if<CustomAction>(&action)) return c->name.c_str();
    return action_names()[action.index()].c_str();
}

std::vector<PointTarget> action_points(const Action& action) {
    if (auto* c = std::get_if<ClickAction>(&action)) return {{c->element, c->x, c->y}};
    if (auto* w = std::get_if<WriteAction>(&action)) return {{w->element, w->x, w->y}};
    if (auto* s = std::get_if<SelectAction>(&action)) return {{s->element, s->x, s->y}};
    if (auto* u = std::get_if<UploadAction>(&action)) return {{u->element, u->x, u->y}};
    if (auto* h = std::get_if<HoverAction>(&action)) return {{h->element, h->x, h->y}};
    if (auto* d = std::get_if<DoubleClickAction>(&action)) return {{d->element, d->x, d->y}};
    if (auto* r = std::get_if<RightClickAction>(&action)) return {{r->element, r->x, r->y}};
    if (auto* d = std::get_if<DragAction>(&action))
        return {{d->element, d->x, d->y}, {d->to_element, d->to_x, d->to_y}};
    return {};
}

bool needs_point(const Action& action) {
    return !action_points(action).empty();
}

bool is_answer(const Action& action) {
    return std::holds_alternative<AnswerAction>(action);
}

std::string action_target(const Action& action) {
    if (auto* g = std::get_if<GotoAction>(&action)) return g->url;
    const std::vector<PointTarget> points = action_points(action);
    std::string target;
    for (const PointTarget& p : points) target += (target.empty() ? "" : " -> ") + p.element;
    return target;
}

namespace {

std::string joined(const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i)
        s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return s;
}

// A branch of the action's anyOf, with a local "#/..." $ref followed (JSON pointer into the schema).
const nlohmann::json& resolve_ref(const nlohmann::json& schema, const nlohmann::json& branch,
                                  const std::string& origin) {
    auto ref = branch.find("$ref");
    if (ref == branch.end()) return branch;
    const std::string target = ref->is_string() ? ref->get<std::string>() : "";
    if (target.rfind("#/", 0) != 0)
        throw Error(ErrorKind::kConfig,
                    origin + ": action branch $ref " + ref->dump() + " is not a local reference");
    const nlohmann::json::json_pointer pointer(target.substr(1));
    if (!schema.contains(pointer))
        throw Error(ErrorKind::kConfig, origin + ": action branch $ref \"" + target + "\" points at nothing");
    return schema.at(pointer);
}

}  // namespace

std::vector<std::string> offered_actions(const nlohmann::json& schema, const std::string& origin) {
    const nlohmann::json* action = nullptr;
    if (schema.is_object() && schema.contains("properties") && schema["properties"].is_object() &&
        schema["properties"].contains("action"))
        action = &schema["properties"]["action"];
    if (!action) throw Error(ErrorKind::kConfig, origin + ": the policy schema has no properties.action");
    std::vector<nlohmann::json> branches;
    const nlohmann::json& root = resolve_ref(schema, *action, origin);
    for (const char* key : {"anyOf", "oneOf"})
        if (root.contains(key) && root[key].is_array())
            branches.insert(branches.end(), root[key].begin(), root[key].end());
    if (branches.empty()) branches.push_back(root);
    std::vector<std::string> offered;
    for (const nlohmann::json& b : branches) {
        const nlohmann::json& branch = resolve_ref(schema, b, origin);
        const nlohmann::json* type = nullptr;
        if (branch.is_object() && branch.contains("properties") && branch["properties"].contains("type"))
            type = &branch["properties"]["type"];
        if (!type || !type->contains("const") || !(*type)["const"].is_string())
            throw Error(ErrorKind::kConfig, origin +
                                                ": every branch of properties.action needs properties.type "
                                                "with a string const naming the action, got " +
                                                shorten(branch.dump()));
        const std::string name = (*type)["const"].get<std::string>();
        const std::vector<std::string>& known = action_names();
        if (std::find(known.begin(), known.end(), name) == known.end())
            throw Error(ErrorKind::kConfig, origin + ": the policy schema offers an unknown action \"" +
                                                name + "\" (surf knows " + joined(known) + ")");
        if (std::find(offered.begin(), offered.end(), name) == offered.end()) offered.push_back(name);
    }
    return offered;
}

void check_offered(const Action& action, const std::vector<std::string>& offered) {
    const std::string name = action_name(action);
    if (std::find(offered.begin(), offered.end(), name) == offered.end())
        fail("action.type: " + quoted(name) + " is not an action here; expected " + joined(offered));
}

nlohmann::ordered_json action_to_json(const Action& action) {
    nlohmann::ordered_json j;
    j["type"] = action_name(action);
    std::visit(
        [&](const auto& a) {
            using T = std::decay_t<decltype(a)>;
            // Every action at a point names its element and the point, in the same keys.
            const auto at = [&](const auto& p) {
                j["element"] = p.element;
                j["x"] = p.x;
                j["y"] = p.y;
            };
            if constexpr (std::is_same_v<T, ClickAction> || std::is_same_v<T, HoverAction> ||
                          std::is_same_v<T, DoubleClickAction> || std::is_same_v<T, RightClickAction>) {
                at(a);
            } else if constexpr (std::is_same_v<T, WriteAction>) {
                j["content"] = a.content;
                at(a);
                j["clear"] = a.clear;
                j["press_enter"] = a.press_enter;
            } else if constexpr (std::is_same_v<T, ScrollAction>) {
                j["direction"] = scroll_direction_name(a.direction);
            } else if constexpr (std::is_same_v<T, GotoAction>) {
                j["url"] = a.url;
            } else if constexpr (std::is_same_v<T, WaitAction>) {
                j["seconds"] = a.seconds;
            } else if constexpr (std::is_same_v<T, AnswerAction>) {
                j["content"] = a.content;
            } else if constexpr (std::is_same_v<T, KeyAction>) {
                j["keys"] = a.keys;
            } else if constexpr (std::is_same_v<T, SelectAction>) {
                at(a);
                j["option"] = a.option;
            } else if constexpr (std::is_same_v<T, DragAction>) {
                at(a);
                j["to_element"] = a.to_element;
                j["to_x"] = a.to_x;
                j["to_y"] = a.to_y;
            } else if constexpr (std::is_same_v<T, SwitchTabAction>) {
                j["index"] = a.index;
            } else if constexpr (std::is_same_v<T, UploadAction>) {
                at(a);
                j["file"] = a.file;
            } else if constexpr (std::is_same_v<T, CustomAction>) {
                for (const auto& [key, value] : a.arguments.items()) j[key] = value;
            }
        },
        action);
    return j;
}

std::string describe_action(const Action& action) {
    return std::visit(
        [](const auto& a) -> std::string {
            using T = std::decay_t<decltype(a)>;
            if constexpr (std::is_same_v<T, ClickAction>)
                return "click " + quoted(a.element);
            else if constexpr (std::is_same_v<T, WriteAction>)
                return "write " + quoted(a.content) + " into " + quoted(a.element);
            else if constexpr (std::is_same_v<T, ScrollAction>)
                return std::string("scroll ") + scroll_direction_name(a.direction);
            else if constexpr (std::is_same_v<T, GotoAction>)
                return "goto " + a.url;
            else if constexpr (std::is_same_v<T, BackAction>)
                return "back";
            else if constexpr (std::is_same_v<T, RefreshAction>)
                return "refresh";
            else if constexpr (std::is_same_v<T, WaitAction>)
                return "wait " + std::to_string(a.seconds) + "s";
            else if constexpr (std::is_same_v<T, KeyAction>)
                return "key " + a.keys;
            else if constexpr (std::is_same_v<T, HoverAction>)
                return "hover " + quoted(a.element);
            else if constexpr (std::is_same_v<T, DoubleClickAction>)
                return "double_click " + quoted(a.element);
            else if constexpr (std::is_same_v<T, RightClickAction>)
                return "right_click " + quoted(a.element);
            else if constexpr (std::is_same_v<T, SelectAction>)
                return "select " + quoted(a.option) + " in " + quoted(a.element);
            else if constexpr (std::is_same_v<T, DragAction>)
                return "drag " + quoted(a.element) + " to " + quoted(a.to_element);
            else if constexpr (std::is_same_v<T, SwitchTabAction>)
                return "switch_tab " + std::to_string(a.index);
            else if constexpr (std::is_same_v<T, CloseTabAction>)
                return "close_tab";
            else if constexpr (std::is_same_v<T, UploadAction>)
                return "upload " + quoted(a.file) + " into " + quoted(a.element);
            else if constexpr (std::is_same_v<T, CustomAction>)
                return a.name + (a.arguments.empty() ? "" : " " + shorten(a.arguments.dump(), 200));
            else
                return "answer " + quoted(a.content);
        },
        action);
}

nlohmann::json parse_model_json(const std::string& text, const std::string& what) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail(what + ": the output is empty");
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        fail(what + ": not valid JSON (" + std::string(e.what()) + "); output was: " + shorten(text, 200));
    }
}

namespace {

// The actions beyond Surfer-H's eight (key, hover, double_click, right_click, select, drag); std::nullopt
// when `type` names none of them.
std::optional<Action> parse_more_actions(const nlohmann::json& a, const std::string& where,
                                         const std::string& type) {
    const auto coord = [&](const char* k) { return get_int(a, where, k, 0, kMaxCoordinate); };
    if (type == "key") {
        check_fields(a, where, {"type", "keys"});
        KeyAction k{get_string(a, where, "keys", kMaxKeysChars, true, true)};
        try {
            tools::parse_chord(k.keys);
        } catch (const Error& e) {
            fail(where + ".keys: " + e.what() +
                 "; name one key (Enter, Tab, Escape, Backspace, ArrowDown, PageDown, Home, End, a, ...) "
                 "with optional modifiers (ctrl+a, shift+Tab, ctrl+Enter)");
        }
        return k;
    }
    if (type == "hover" || type == "double_click" || type == "right_click") {
        check_fields(a, where, {"type", "element", "x", "y"});
        const std::string element = get_string(a, where, "element", kMaxElementChars, true, true);
        if (type == "hover") return HoverAction{element, coord("x"), coord("y")};
        if (type == "double_click") return DoubleClickAction{element, coord("x"), coord("y")};
        return RightClickAction{element, coord("x"), coord("y")};
    }
    if (type == "switch_tab") {
        check_fields(a, where, {"type", "index"});
        return SwitchTabAction{get_int(a, where, "index", 0, kMaxTabIndex)};
    }
    if (type == "close_tab") {
        check_fields(a, where, {"type"});
        return CloseTabAction{};
    }
    // An element at a point and one more text field: select's option, upload's file.
    const auto pointed_text = [&](const char* field) {
        check_fields(a, where, {"type", "element", "x", "y", field});
        return std::tuple{get_string(a, where, "element", kMaxElementChars, true, true), coord("x"),
                          coord("y"), get_string(a, where, field, kMaxElementChars, true, true)};
    };
    if (type == "upload") {
        auto [element, x, y, file] = pointed_text("file");
        return UploadAction{element, x, y, file};
    }
    if (type == "select") {
        auto [element, x, y, option] = pointed_text("option");
        return SelectAction{element, x, y, option};
    }
    if (type == "drag") {
        check_fields(a, where, {"type", "element", "x", "y", "to_element", "to_x", "to_y"});
        DragAction d;
        d.element = get_string(a, where, "element", kMaxElementChars, true, true);
        d.x = coord("x");
        d.y = coord("y");
        d.to_element = get_string(a, where, "to_element", kMaxElementChars, true, true);
        d.to_x = coord("to_x");
        d.to_y = coord("to_y");
        return d;
    }
    return std::nullopt;
}

}  // namespace

Action parse_action(const nlohmann::json& a, const std::string& where,
                    const std::vector<std::string>& custom) {
    if (!a.is_object()) fail(where + ": expected an object with a \"type\" field, got " + shorten(a.dump()));
    auto t = a.find("type");
    if (t == a.end() || !t->is_string()) fail(where + ".type: missing or not a string");
    const std::string type = t->get<std::string>();
    const auto coord = [&](const char* k) { return get_int(a, where, k, 0, kMaxCoordinate); };
    if (type == "click") {
        check_fields(a, where, {"type", "element", "x", "y"});
        return ClickAction{get_string(a, where, "element", kMaxElementChars, true, true), coord("x"),
                           coord("y")};
    }
    if (type == "write") {
        check_fields(a, where, {"type", "content", "element", "x", "y", "clear", "press_enter"});
        WriteAction w;
        w.content = get_string(a, where, "content", kMaxContentChars);
        w.element = get_string(a, where, "element", kMaxElementChars, true, true);
        w.x = coord("x");
        w.y = coord("y");
        w.clear = get_bool(a, where, "clear", true);
        w.press_enter = get_bool(a, where, "press_enter", true);
        return w;
    }
    if (type == "scroll") {
        check_fields(a, where, {"type", "direction"});
        const std::string d = get_string(a, where, "direction", 10);
        if (d == "up") return ScrollAction{ScrollDirection::kUp};
        if (d == "down") return ScrollAction{ScrollDirection::kDown};
        if (d == "left") return ScrollAction{ScrollDirection::kLeft};
        if (d == "right") return ScrollAction{ScrollDirection::kRight};
        fail(where + ".direction: expected up, down, left or right, got " + quoted(d));
    }
    if (type == "goto") {
        check_fields(a, where, {"type", "url"});
        return GotoAction{get_string(a, where, "url", kMaxUrlChars, true, true)};
    }
    if (type == "back") {
        check_fields(a, where, {"type"});
        return BackAction{};
    }
    if (type == "refresh") {
        check_fields(a, where, {"type"});
        return RefreshAction{};
    }
    if (type == "wait") {
        check_fields(a, where, {"type", "seconds"});
        if (!a.contains("seconds")) return WaitAction{};
        return WaitAction{get_int(a, where, "seconds", 0, 10)};
    }
    if (type == "answer") {
        check_fields(a, where, {"type", "content"});
        // A structured answer (RunOptions::answer_schema) is a JSON value: kept as its compact text.
        if (a.contains("content") && !a.at("content").is_string() && !a.at("content").is_null())
            return AnswerAction{a.at("content").dump()};
        return AnswerAction{get_string(a, where, "content", kMaxContentChars)};
    }
    if (std::optional<Action> more = parse_more_actions(a, where, type)) return *more;
    if (std::find(custom.begin(), custom.end(), type) != custom.end()) {
        CustomAction c{type};
        for (const auto& [key, value] : a.items())
            if (key != "type") c.arguments[key] = value;
        return c;
    }
    std::vector<std::string> known = action_names();
    known.insert(known.end(), custom.begin(), custom.end());
    fail(where + ".type: unknown action " + quoted(type) + "; expected " + joined(known));
}

PolicyOutput parse_policy_output(const std::string& text, const std::vector<std::string>& custom) {
    const nlohmann::json j = parse_model_json(text, "policy output");
    check_fields(j, "policy output", {"thought", "note", "notes", "action"});
    PolicyOutput out;
    out.thought = get_string(j, "policy output", "thought", 4000, false);
    const char* note_key = j.contains("note") ? "note" : "notes";
    out.note = get_string(j, "policy output", note_key, 4000, false);
    if (!j.contains("action")) fail("policy output.action: missing");
    out.action = parse_action(j["action"], "action", custom);
    return out;
}

LocalizerOutput parse_localizer_output(const std::string& text, double max_x, double max_y) {
    const nlohmann::json j = parse_model_json(text, "localizer output");
    check_fields(j, "localizer output", {"x", "y", "action"});
    LocalizerOutput out;
    const auto coord = [&](const char* key, double hi) {
        auto it = j.find(key);
        if (it == j.end()) fail(std::string("localizer output.") + key + ": missing");
        if (!it->is_number())
            fail(std::string("localizer output.") + key + ": expected a number, got " + shorten(it->dump()));
        const double v = it->get<double>();
        if (!std::isfinite(v) || v < 0 || v > hi) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "localizer output.%s: %g is outside [0, %g]", key, v, hi);
            fail(buf);
        }
        return v;
    };
    out.x = coord("x", max_x);
    out.y = coord("y", max_y);
    return out;
}

Verdict parse_verdict(const std::string& text) {
    nlohmann::json j;
    bool is_json = false;
    try {
        j = nlohmann::json::parse(text);
        is_json = j.is_object();
    } catch (const nlohmann::json::parse_error&) {
    }
    if (!is_json) {
        // WebVoyager's evaluator convention: the verdict is the last SUCCESS / NOT SUCCESS in the text.
        const size_t not_at = text.rfind("NOT SUCCESS");
        const size_t yes_at = text.rfind("SUCCESS");
        if (yes_at == std::string::npos)
            fail("validator output: neither JSON nor a SUCCESS / NOT SUCCESS verdict: " + shorten(text, 200));
        Verdict v;
        v.success = not_at == std::string::npos || yes_at != not_at + 4;
        v.reason = shorten(text, 1000);
        return v;
    }
    check_fields(j, "validator output", {"reason", "success"});
    Verdict v;
    v.reason = get_string(j, "validator output", "reason", 4000, false);
    auto it = j.find("success");
    if (it == j.end() || !it->is_boolean()) fail("validator output.success: missing or not true/false");
    v.success = it->get<bool>();
    return v;
}

}  // namespace surf::agent
