// Keyboard and mouse vocabulary for Input.dispatchKeyEvent / Input.dispatchMouseEvent (spec/agent.md §6.2):
// the key table (DOM key, physical code, Windows virtual key code, text) and the parser for chords such
// as "Enter", "ctrl+a" or "Shift+Tab". Pure data, no browser.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surf::tools {

// CDP modifier bits.
enum Modifier : int { kAlt = 1, kCtrl = 2, kMeta = 4, kShift = 8 };

enum class MouseButton { kLeft, kRight, kMiddle };

struct KeyDef {
    std::string key;          // KeyboardEvent.key, e.g. "Enter", "a"
    std::string code;         // KeyboardEvent.code, e.g. "Enter", "KeyA"
    int key_code = 0;         // windowsVirtualKeyCode, e.g. 13
    std::string text;         // text the key inserts without modifiers ("" for none), e.g. "\r" for Enter
    std::string shifted_key;  // key (and text) with Shift, for printable keys
    int location = 0;         // 1 for the left modifier keys
};

struct KeyChord {
    int modifiers = 0;                  // Modifier bits
    KeyDef key;                         // the non-modifier key (or a modifier key pressed alone)
    std::vector<KeyDef> modifier_keys;  // in press order
    std::vector<std::string> commands;  // editing commands Chromium should run (e.g. "selectAll")
};

// Looks a key up by name, case-insensitively: "Enter", "return", "Tab", "Escape"/"esc", "Backspace",
// "Delete"/"del", "ArrowUp"/"up", ..., "Home", "End", "PageUp", "PageDown", "Space", "F1".."F12",
// single characters ("a", "7", ";"), and the modifiers. Throws Error(kInvalidArgument) naming it.
KeyDef lookup_key(const std::string& name);

// Parses "ctrl+shift+ArrowLeft", "Control+A", "Enter", "cmd+a". Exactly one non-modifier key, any
// modifiers. Throws Error(kInvalidArgument) naming the chord.
KeyChord parse_chord(const std::string& chord);

// The keyDown/keyUp event parameters that press (then release) a chord, in order.
std::vector<nlohmann::json> chord_events(const KeyChord& chord);

const char* mouse_button_name(MouseButton button);
int mouse_button_bit(MouseButton button);  // the "buttons" bitmask value while it is held

}  // namespace surf::tools
