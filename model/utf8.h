// UTF-8 helpers shared by the tokenizer, the Jinja interpreter and every message writer, and ASCII case
// folding for protocol names (hosts, HTTP headers, key names).
// Cutting text for messages, traces and reports without splitting a UTF-8 character: a byte cut in the
// middle of one makes invalid UTF-8, which JSON writers reject (nlohmann::json::dump throws).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace surf::model {

// ASCII lower case: A–Z only; other bytes (UTF-8 sequences included) unchanged, whatever the C locale.
inline std::string ascii_lower(std::string s) {
    for (char& c : s) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return s;
}

// Appends the UTF-8 encoding of code point `cp` (≤ 0x10FFFF).
inline void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

// The longest prefix of `s` of at most `max_bytes` bytes that ends on a character boundary.
inline std::string_view utf8_prefix(std::string_view s, size_t max_bytes) {
    if (s.size() <= max_bytes) return s;
    size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0u) == 0x80u) --n;  // back off continuation bytes
    return s.substr(0, n);
}

// `s` cut to at most `max_bytes` (on a character boundary) with `ellipsis` appended when it was cut.
inline std::string shorten_utf8(std::string_view s, size_t max_bytes, std::string_view ellipsis = "…") {
    if (s.size() <= max_bytes) return std::string(s);
    std::string out(utf8_prefix(s, max_bytes));
    out += ellipsis;
    return out;
}

}  // namespace surf::model
