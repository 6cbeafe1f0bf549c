// Argument binding and Python string operations for the Jinja builtins.
#include "model/text/jinja_text.h"
#include "base/utf8.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace surf::model::jinja {

const Value* Args::find(size_t index, const char* name) {
    if (index < call_.positional.size()) {
        positional_seen_ = std::max(positional_seen_, index + 1);
        return &call_.positional[index];
    }
    for (const auto& [key, value] : call_.keyword) {
        if (key == name) {
            keywords_seen_.push_back(key);
            return &value;
        }
    }
    return nullptr;
}

Value Args::required(size_t index, const char* name) {
    const Value* v = find(index, name);
    if (!v) throw TemplateError(function_ + "() missing required argument '" + name + "'");
    return *v;
}

Value Args::optional(size_t index, const char* name, Value fallback) {
    const Value* v = find(index, name);
    return v ? *v : fallback;
}

int64_t Args::integer(size_t index, const char* name, int64_t fallback) {
    const Value* v = find(index, name);
    if (!v || v->is_none()) return fallback;
    if (!v->is_number() || v->is_float()) {
        throw TemplateError(function_ + "() argument '" + name + "' must be an integer, not " +
                            v->type_name());
    }
    return v->as_int();
}

bool Args::flag(size_t index, const char* name, bool fallback) {
    const Value* v = find(index, name);
    return v ? v->truthy() : fallback;
}

std::string Args::string(size_t index, const char* name) {
    Value v = required(index, name);
    if (!v.is_string()) {
        throw TemplateError(function_ + "() argument '" + name + "' must be str, not " + v.type_name());
    }
    return v.as_string();
}

void Args::finish() const {
    if (call_.positional.size() > positional_seen_) {
        throw TemplateError(function_ + "() takes " + std::to_string(positional_seen_) +
                            " positional arguments but " + std::to_string(call_.positional.size()) +
                            " were given");
    }
    for (const auto& [key, value] : call_.keyword) {
        if (std::find(keywords_seen_.begin(), keywords_seen_.end(), key) == keywords_seen_.end()) {
            throw TemplateError(function_ + "() got an unexpected keyword argument '" + key + "'");
        }
    }
}

namespace {

// One code point of `s` at `i` (advancing i); invalid bytes decode as themselves.
uint32_t next_codepoint(const std::string& s, size_t& i) {
    unsigned char c = static_cast<unsigned char>(s[i++]);
    int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
    uint32_t cp = extra ? c & (0x3f >> extra) : c;
    for (int k = 0; k < extra && i < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i++]) & 0x3f);
    return cp;
}

// Python's str.isspace for one code point.
bool is_unicode_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

struct CodePoint {
    uint32_t cp;
    size_t begin, end;  // byte range
};

std::vector<CodePoint> decode(const std::string& s) {
    std::vector<CodePoint> out;
    for (size_t i = 0; i < s.size();) {
        size_t begin = i;
        uint32_t cp = next_codepoint(s, i);
        out.push_back({cp, begin, i});
    }
    return out;
}

}  // namespace

Value split_string(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
    ValueList parts;
    if (sep.is_none() || sep.is_undefined()) {
        // Runs of whitespace; leading/trailing whitespace never makes empty parts.
        std::vector<CodePoint> cps = decode(s);
        std::vector<std::pair<size_t, size_t>> words;
        for (size_t i = 0; i < cps.size();) {
            while (i < cps.size() && is_unicode_space(cps[i].cp)) ++i;
            if (i == cps.size()) break;
            size_t j = i;
            while (j < cps.size() && !is_unicode_space(cps[j].cp)) ++j;
            words.emplace_back(cps[i].begin, cps[j - 1].end);
            i = j;
        }
        if (maxsplit >= 0 && int64_t(words.size()) > maxsplit + 1) {
            // The unsplit remainder keeps its inner whitespace, trimmed on the split side only.
            if (!from_right) {
                size_t keep = size_t(maxsplit);
                std::string rest = s.substr(words[keep].first);
                words.resize(keep);
                for (auto& [b, e] : words) parts.push_back(Value::string(s.substr(b, e - b)));
                parts.push_back(Value::string(strip_string(rest, Value::none(), false, true)));
                return Value::list(std::move(parts));
            }
            size_t first_kept = words.size() - size_t(maxsplit);
            std::string rest = s.substr(0, words[first_kept - 1].second);
            parts.push_back(Value::string(strip_string(rest, Value::none(), true, false)));
            for (size_t k = first_kept; k < words.size(); ++k) {
                parts.push_back(Value::string(s.substr(words[k].first, words[k].second - words[k].first)));
            }
            return Value::list(std::move(parts));
        }
        for (auto& [b, e] : words) parts.push_back(Value::string(s.substr(b, e - b)));
        return Value::list(std::move(parts));
    }
    if (!sep.is_string()) throw TemplateError(std::string("must be str or None, not ") + sep.type_name());
    const std::string& d = sep.as_string();
    if (d.empty()) throw TemplateError("empty separator");
    std::vector<std::string> pieces;
    if (!from_right) {
        size_t start = 0;
        for (size_t at = s.find(d);
             at != std::string::npos && (maxsplit < 0 || int64_t(pieces.size()) < maxsplit);
             at = s.find(d, start)) {
            pieces.push_back(s.substr(start, at - start));
            start = at + d.size();
        }
        pieces.push_back(s.substr(start));
    } else {
        size_t end = s.size();
        while (maxsplit < 0 || int64_t(pieces.size()) < maxsplit) {
            if (end < d.size()) break;
            size_t at = s.rfind(d, end - d.size());
            if (at == std::string::npos) break;
            pieces.push_back(s.substr(at + d.size(), end - at - d.size()));
            end = at;
        }
        pieces.push_back(s.substr(0, end));
        std::reverse(pieces.begin(), pieces.end());
    }
    for (std::string& p : pieces) parts.push_back(Value::string(std::move(p)));
    return Value::list(std::move(parts));
}

std::string strip_string(const std::string& s, const Value& chars, bool left, bool right) {
    std::vector<CodePoint> cps = decode(s);
    std::vector<uint32_t> set;
    bool whitespace = chars.is_none() || chars.is_undefined();
    if (!whitespace) {
        if (!chars.is_string())
            throw TemplateError(std::string("strip arg must be None or str, not ") + chars.type_name());
        for (const CodePoint& c : decode(chars.as_string())) set.push_back(c.cp);
    }
    auto strip = [&](uint32_t cp) {
        return whitespace ? is_unicode_space(cp) : std::find(set.begin(), set.end(), cp) != set.end();
    };
    size_t b = 0, e = cps.size();
    if (left) {
        while (b < e && strip(cps[b].cp)) ++b;
    }
    if (right) {
        while (e > b && strip(cps[e - 1].cp)) --e;
    }
    if (b == e) return "";
    return s.substr(cps[b].begin, cps[e - 1].end - cps[b].begin);
}

std::string replace_string(const std::string& s, const std::string& old_text, const std::string& new_text,
                           int64_t count) {
    std::string out;
    int64_t done = 0;
    if (old_text.empty()) {
        // Python inserts `new` before every character and at the end.
        for (const std::string& c : utf8_chars(s)) {
            if (count < 0 || done < count) {
                out += new_text;
                ++done;
            }
            out += c;
        }
        if (count < 0 || done < count) out += new_text;
        return out;
    }
    size_t start = 0;
    for (size_t at = s.find(old_text); at != std::string::npos && (count < 0 || done < count);
         at = s.find(old_text, start)) {
        out.append(s, start, at - start);
        out += new_text;
        start = at + old_text.size();
        ++done;
    }
    out.append(s, start, std::string::npos);
    return out;
}

std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> lines;
    std::string current;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
            if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
            lines.push_back(current);
            current.clear();
        } else {
            current += c;
        }
    }
    if (!current.empty()) lines.push_back(current);
    return lines;
}

namespace {

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (Python maps all of
// Unicode; these cover the scripts chat templates meet in practice). Returns cp when unmapped.
uint32_t map_case(uint32_t cp, bool upper) {
    if (cp < 0x80) {
        if (upper && cp >= 'a' && cp <= 'z') return cp - 32;
        if (!upper && cp >= 'A' && cp <= 'Z') return cp + 32;
        return cp;
    }
    if (upper) {
        if ((cp >= 0xe0 && cp <= 0xfe && cp != 0xf7) || (cp >= 0x3b1 && cp <= 0x3cb && cp != 0x3c2) ||
            (cp >= 0x430 && cp <= 0x44f)) {
            return cp - 0x20;
        }
        if (cp == 0xff) return 0x178;
        if (cp == 0x3c2) return 0x3a3;  // final sigma
        if (cp == 0x3ac) return 0x386;  // Greek letters with tonos
        if (cp >= 0x3ad && cp <= 0x3af) return cp - 0x25;
        if (cp == 0x3cc) return 0x38c;
        if (cp == 0x3cd || cp == 0x3ce) return cp - 0x3f;
        if (cp >= 0x450 && cp <= 0x45f) return cp - 0x50;
        if (cp >= 0x100 && cp <= 0x17f && cp != 0x131 && cp != 0x138 && cp != 0x149 && cp != 0x17f) {
            bool odd_is_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e);
            if ((cp % 2 == 1) == odd_is_upper) return cp;  // already upper case
            return cp - 1;
        }
        return cp;
    }
    if ((cp >= 0xc0 && cp <= 0xde && cp != 0xd7) || (cp >= 0x391 && cp <= 0x3ab && cp != 0x3a2) ||
        (cp >= 0x410 && cp <= 0x42f)) {
        return cp + 0x20;
    }
    if (cp == 0x178) return 0xff;
    if (cp == 0x386) return 0x3ac;
    if (cp >= 0x388 && cp <= 0x38a) return cp + 0x25;
    if (cp == 0x38c) return 0x3cc;
    if (cp == 0x38e || cp == 0x38f) return cp + 0x3f;
    if (cp >= 0x400 && cp <= 0x40f) return cp + 0x50;
    if (cp >= 0x100 && cp <= 0x17f && cp != 0x130 && cp != 0x138 && cp != 0x149 && cp != 0x17f) {
        bool odd_is_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e);
        if ((cp % 2 == 1) != odd_is_upper) return cp;  // already lower case
        return cp + 1;
    }
    return cp;
}

std::string change_case(const std::string& s, bool upper) {
    std::string out;
    out.reserve(s.size());
    for (const CodePoint& c : decode(s)) {
        // Python's special (multi-character or cross-block) mappings in these blocks.
        const char* special = nullptr;
        if (upper) {
            switch (c.cp) {
                case 0xdf: special = "SS"; break;
                case 0xb5: special = "\u039c"; break;
                case 0x131: special = "I"; break;
                case 0x149: special = "\u02bcN"; break;
                case 0x17f: special = "S"; break;
                case 0x390: special = "\u0399\u0308\u0301"; break;
                case 0x3b0: special = "\u03a5\u0308\u0301"; break;
                default: break;
            }
        } else if (c.cp == 0x130) {
            special = "i\u0307";
        }
        if (special) {
            out += special;
            continue;
        }
        uint32_t mapped = map_case(c.cp, upper);
        if (mapped == c.cp) {
            out.append(s, c.begin, c.end - c.begin);  // keeps invalid bytes as they were
        } else {
            append_utf8(out, mapped);
        }
    }
    return out;
}

}  // namespace

std::string upper_string(std::string s) {
    return change_case(s, true);
}

std::string lower_string(std::string s) {
    return change_case(s, false);
}

std::string title_string(const std::string& s) {
    // str.title: the first cased character after an uncased one is title-cased, the rest lowered.
    std::string out;
    bool previous_cased = false;
    for (const CodePoint& c : decode(s)) {
        std::string ch = s.substr(c.begin, c.end - c.begin);
        std::string upper = change_case(ch, true), lower = change_case(ch, false);
        bool cased = upper != lower || upper != ch;
        if (!cased) {
            out += ch;
        } else if (previous_cased) {
            out += lower;
        } else {
            out += c.cp == 0xdf ? std::string("Ss") : upper;  // ß title-cases to "Ss"
        }
        previous_cased = cased;
    }
    return out;
}

std::string jinja_title(const std::string& s) {
    // Words start after runs of [-\s({[<]; each word is item[0].upper() + item[1:].lower().
    std::string out;
    bool word_start = true;
    for (const CodePoint& c : decode(s)) {
        std::string ch = s.substr(c.begin, c.end - c.begin);
        bool boundary =
            c.cp == '-' || c.cp == '(' || c.cp == '{' || c.cp == '[' || c.cp == '<' || is_unicode_space(c.cp);
        if (boundary) {
            out += ch;
            word_start = true;
        } else {
            out += change_case(ch, word_start);
            word_start = false;
        }
    }
    return out;
}

std::string capitalize_string(const std::string& s) {
    // str.capitalize: the first character title-cased, the rest lowered.
    std::vector<CodePoint> cps = decode(s);
    if (cps.empty()) return s;
    std::string first = s.substr(0, cps[0].end);
    std::string out = cps[0].cp == 0xdf ? std::string("Ss") : change_case(first, true);
    return out + change_case(s.substr(cps[0].end), false);
}

bool all_chars(const std::string& s, int (*pred)(int)) {
    if (s.empty()) return false;
    return std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)) != 0; });
}

std::string percent_format(const std::string& fmt, const Value& args) {
    ValueList values = args.is_tuple() ? args.as_list() : ValueList{args};
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        size_t j = i + 1;
        std::string spec = "%";
        while (j < fmt.size() && std::string("-+ 0#").find(fmt[j]) != std::string::npos) spec += fmt[j++];
        while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) spec += fmt[j++];
        if (j < fmt.size() && fmt[j] == '.') {
            spec += fmt[j++];
            while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) spec += fmt[j++];
        }
        if (j >= fmt.size()) throw TemplateError("incomplete format");
        char conv = fmt[j];
        i = j;
        if (conv == '%') {
            out += '%';
            continue;
        }
        if (next >= values.size()) throw TemplateError("not enough arguments for format string");
        const Value& v = values[next++];
        char buf[512];
        if (conv == 's' || conv == 'r') {
            std::string text = conv == 's' ? to_str(v) : to_repr(v);
            std::snprintf(buf, sizeof(buf), (spec + "s").c_str(), text.c_str());
            out += spec.size() == 1 ? text : std::string(buf);
        } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X') {
            if (!v.is_number())
                throw TemplateError(std::string("%d format: a real number is required, not ") +
                                    v.type_name());
            std::snprintf(buf, sizeof(buf), (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(),
                          static_cast<long long>(v.is_float() ? int64_t(v.as_double()) : v.as_int()));
            out += buf;
        } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'g') {
            if (!v.is_number()) throw TemplateError(std::string("must be real number, not ") + v.type_name());
            std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), v.as_double());
            out += buf;
        } else {
            throw TemplateError(std::string("unsupported format character '") + conv + "'");
        }
    }
    // Like Python, a lone list/dict argument that no specifier consumed is not an error.
    bool lone_container = !args.is_tuple() && (args.is_list() || args.is_dict()) && next == 0;
    if (next < values.size() && !lone_container) {
        throw TemplateError("not all arguments converted during string formatting");
    }
    return out;
}

}  // namespace surf::model::jinja
