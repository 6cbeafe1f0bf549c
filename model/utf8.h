// Cutting text for messages, traces and reports without splitting a UTF-8 character: a byte cut in the
// middle of one makes invalid UTF-8, which JSON writers reject (nlohmann::json::dump throws).
#pragma once

#include <string>
#include <string_view>

namespace surf::model {

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
