#include "tools/browser/input.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "base/error.h"
#include "base/utf8.h"

namespace surf::tools {
namespace {

// Named (non-character) keys. Codes follow the UI Events KeyboardEvent code and key values and the
// Windows virtual key codes that Chromium expects in windowsVirtualKeyCode.
const std::map<std::string, KeyDef>& named_keys() {
    static const std::map<std::string, KeyDef> table = [] {
        std::map<std::string, KeyDef> t;
        auto add = [&](std::vector<std::string> names, KeyDef def) {
            for (auto& n : names) t[surf::ascii_lower(n)] = def;
        };
        add({"Enter", "return"}, {"Enter", "Enter", 13, "\r", "", 0});
        add({"Tab"}, {"Tab", "Tab", 9, "", "", 0});
        add({"Escape", "esc"}, {"Escape", "Escape", 27, "", "", 0});
        add({"Backspace"}, {"Backspace", "Backspace", 8, "", "", 0});
        add({"Delete", "del"}, {"Delete", "Delete", 46, "", "", 0});
        add({"Insert"}, {"Insert", "Insert", 45, "", "", 0});
        add({"ArrowLeft", "left"}, {"ArrowLeft", "ArrowLeft", 37, "", "", 0});
        add({"ArrowUp", "up"}, {"ArrowUp", "ArrowUp", 38, "", "", 0});
        add({"ArrowRight", "right"}, {"ArrowRight", "ArrowRight", 39, "", "", 0});
        add({"ArrowDown", "down"}, {"ArrowDown", "ArrowDown", 40, "", "", 0});
        add({"Home"}, {"Home", "Home", 36, "", "", 0});
        add({"End"}, {"End", "End", 35, "", "", 0});
        add({"PageUp", "pgup"}, {"PageUp", "PageUp", 33, "", "", 0});
        add({"PageDown", "pgdn"}, {"PageDown", "PageDown", 34, "", "", 0});
        add({"Space", "spacebar"}, {" ", "Space", 32, " ", " ", 0});
        add({"Shift"}, {"Shift", "ShiftLeft", 16, "", "", 1});
        add({"Control", "ctrl"}, {"Control", "ControlLeft", 17, "", "", 1});
        add({"Alt", "option"}, {"Alt", "AltLeft", 18, "", "", 1});
        add({"Meta", "cmd", "command", "super", "win"}, {"Meta", "MetaLeft", 91, "", "", 1});
        for (int i = 1; i <= 12; ++i) {
            std::string name = "F" + std::to_string(i);
            add({name}, {name, name, 111 + i, "", "", 0});
        }
        return t;
    }();
    return table;
}

// Printable US-layout punctuation: character, shifted character, code, virtual key code.
struct Punct {
    char c, shifted;
    const char* code;
    int vk;
};
constexpr Punct kPunct[] = {
    {'-', '_', "Minus", 189},        {'=', '+', "Equal", 187},      {'[', '{', "BracketLeft", 219},
    {']', '}', "BracketRight", 221}, {'\\', '|', "Backslash", 220}, {';', ':', "Semicolon", 186},
    {'\'', '"', "Quote", 222},       {',', '<', "Comma", 188},      {'.', '>', "Period", 190},
    {'/', '?', "Slash", 191},        {'`', '~', "Backquote", 192},
};
constexpr const char* kShiftedDigits = ")!@#$%^&*(";

std::optional<KeyDef> character_key(const std::string& name) {
    if (name.size() != 1) return std::nullopt;
    char c = name[0];
    if (std::isalpha(static_cast<unsigned char>(c))) {
        char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        char u = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return KeyDef{std::string(1, l), std::string("Key") + u, u, std::string(1, l), std::string(1, u), 0};
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
        return KeyDef{name, std::string("Digit") + c, c, name, std::string(1, kShiftedDigits[c - '0']), 0};
    }
    for (const auto& p : kPunct) {
        if (p.c == c || p.shifted == c) {
            return KeyDef{std::string(1, p.c),       p.code, p.vk, std::string(1, p.c),
                          std::string(1, p.shifted), 0};
        }
    }
    return std::nullopt;
}

int modifier_bit(const std::string& key) {
    if (key == "Alt") return kAlt;
    if (key == "Control") return kCtrl;
    if (key == "Meta") return kMeta;
    if (key == "Shift") return kShift;
    return 0;
}

}  // namespace

KeyDef lookup_key(const std::string& name) {
    if (name.empty()) throw Error(ErrorKind::kInvalidArgument, "empty key name");
    auto it = named_keys().find(surf::ascii_lower(name));
    if (it != named_keys().end()) return it->second;
    if (auto def = character_key(name)) return *def;
    throw Error(ErrorKind::kInvalidArgument, "unknown key '" + name + "'");
}

KeyChord parse_chord(const std::string& chord) {
    std::vector<std::string> parts;
    size_t start = 0;
    // Split on '+', but a trailing "+" (as in "ctrl++") names the plus key.
    for (size_t i = 0; i < chord.size(); ++i) {
        if (chord[i] == '+' && i > start) {
            parts.push_back(chord.substr(start, i - start));
            start = i + 1;
        }
    }
    if (start < chord.size()) parts.push_back(chord.substr(start));
    for (auto& p : parts) {
        p.erase(0, p.find_first_not_of(' '));
        p.erase(p.find_last_not_of(' ') + 1);
    }
    if (parts.empty()) throw Error(ErrorKind::kInvalidArgument, "empty key chord");
    KeyChord out;
    bool has_main = false;
    for (size_t i = 0; i < parts.size(); ++i) {
        KeyDef def;
        try {
            def = lookup_key(parts[i]);
        } catch (const Error&) {
            throw Error(ErrorKind::kInvalidArgument,
                        "key chord '" + chord + "': unknown key '" + parts[i] + "'");
        }
        int bit = modifier_bit(def.key);
        bool last = i + 1 == parts.size();
        if (bit != 0 && !last) {
            out.modifiers |= bit;
            out.modifier_keys.push_back(def);
            continue;
        }
        if (!last || has_main) {
            throw Error(ErrorKind::kInvalidArgument,
                        "key chord '" + chord + "' has more than one non-modifier key");
        }
        // "Shift+a" types "A": with Shift the key value and text are the shifted ones.
        if ((out.modifiers & kShift) && !def.shifted_key.empty()) {
            def.key = def.shifted_key;
            def.text = def.shifted_key;
        }
        out.key = def;
        has_main = true;
    }
    // Chromium on Linux does not map Ctrl+letter to editing commands by itself when the events come
    // from CDP; name the command so select-all, copy, cut, paste and undo behave as on a keyboard.
    if (out.modifiers == kCtrl || out.modifiers == kMeta) {
        static const std::map<std::string, std::string> commands = {
            {"a", "selectAll"}, {"c", "copy"}, {"x", "cut"}, {"v", "paste"}, {"z", "undo"}};
        auto it = commands.find(out.key.key);
        if (it != commands.end()) out.commands.push_back(it->second);
    }
    return out;
}

std::vector<nlohmann::json> chord_events(const KeyChord& chord) {
    std::vector<nlohmann::json> events;
    int held = 0;
    auto key_event = [](const char* type, const KeyDef& def, int modifiers) {
        nlohmann::json e = {{"type", type},
                            {"key", def.key},
                            {"code", def.code},
                            {"modifiers", modifiers},
                            {"windowsVirtualKeyCode", def.key_code},
                            {"nativeVirtualKeyCode", def.key_code}};
        if (def.location) e["location"] = def.location;
        return e;
    };
    for (const auto& m : chord.modifier_keys) {
        held |= modifier_bit(m.key);
        events.push_back(key_event("rawKeyDown", m, held));
    }
    // Text is inserted only when no Ctrl/Alt/Meta is held ("ctrl+a" must not type an "a").
    bool inserts_text = !chord.key.text.empty() && (chord.modifiers & (kCtrl | kAlt | kMeta)) == 0;
    nlohmann::json down = key_event(inserts_text ? "keyDown" : "rawKeyDown", chord.key, chord.modifiers);
    if (inserts_text) {
        down["text"] = chord.key.text;
        down["unmodifiedText"] = chord.key.text;
    }
    if (!chord.commands.empty()) down["commands"] = chord.commands;
    events.push_back(down);
    events.push_back(key_event("keyUp", chord.key, chord.modifiers));
    for (auto it = chord.modifier_keys.rbegin(); it != chord.modifier_keys.rend(); ++it) {
        held &= ~modifier_bit(it->key);
        events.push_back(key_event("keyUp", *it, held));
    }
    return events;
}

const char* mouse_button_name(MouseButton button) {
    switch (button) {
        case MouseButton::kLeft: return "left";
        case MouseButton::kRight: return "right";
        case MouseButton::kMiddle: return "middle";
    }
    return "left";
}

int mouse_button_bit(MouseButton button) {
    switch (button) {
        case MouseButton::kLeft: return 1;
        case MouseButton::kRight: return 2;
        case MouseButton::kMiddle: return 4;
    }
    return 1;
}

}  // namespace surf::tools
