// UTF-8 helpers shared by the tokenizer, the Jinja interpreter and every message writer, ASCII case
// folding for protocol names (hosts, HTTP headers, key names), and the nearest known name to a mistyped one
// (for "did you mean" in errors about flags, fields and keys).
// Cutting text for messages, traces and reports without splitting a UTF-8 character: a byte cut in the
// middle of one makes invalid UTF-8, which JSON writers reject (nlohmann::json::dump throws).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace surf {

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

// Levenshtein distance between two byte strings (insertions, deletions and substitutions cost 1).
inline size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// The candidate nearest to `word` by edit distance when it is close enough to be a typo of it (at most
// max(2, |word| / 3) edits), else "".
inline std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
    std::string best;
    size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
    for (const std::string& c : candidates) {
        const size_t d = edit_distance(word, c);
        if (d < best_distance) {
            best = c;
            best_distance = d;
        }
    }
    return best;
}

}  // namespace surf
