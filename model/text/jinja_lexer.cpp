// Jinja lexer: data / {{ }} / {% %} / {# #} with the whitespace rules of jinja2's lexer
// (`-` strips, `+` keeps, trim_blocks eats one newline after a block or comment, lstrip_blocks
// removes the indentation before a block or comment tag).
#include <algorithm>
#include <cstring>

#include "base/utf8.h"
#include "model/text/jinja_ast.h"

namespace surf::model::jinja {

namespace {

bool is_space(char c) {
    // Python's str.isspace for the ASCII range (\x1c-\x1f count as whitespace there).
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
           (c >= 0x1c && c <= 0x1f);
}

bool is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

std::string rstrip(const std::string& s) {
    size_t end = s.size();
    while (end > 0 && is_space(s[end - 1])) --end;
    return s.substr(0, end);
}

class Lexer {
public:
    Lexer(const std::string& source, const LexerOptions& options) : options_(options) {
        // jinja2 normalises \r\n and \r to \n, then drops one trailing newline.
        src_.reserve(source.size());
        for (size_t i = 0; i < source.size(); ++i) {
            if (source[i] == '\r') {
                src_ += '\n';
                if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
            } else {
                src_ += source[i];
            }
        }
        if (!options_.keep_trailing_newline && !src_.empty() && src_.back() == '\n') src_.pop_back();
        for (size_t i = 0; i < src_.size(); ++i) {
            if (src_[i] == '\n') newlines_.push_back(i);
        }
    }

    std::vector<Token> run() {
        size_t pos = 0;
        while (pos < src_.size()) {
            size_t tag = find_tag(pos);
            if (tag == std::string::npos) {
                emit_data(src_.substr(pos), pos);
                break;
            }
            char kind = src_[tag + 1];
            size_t after = tag + 2;
            char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
            if (sign) ++after;
            bool raw = kind == '%' && is_raw_begin(after);
            std::string text = src_.substr(pos, tag - pos);
            if (sign == '-') {
                text = rstrip(text);
            } else if (sign != '+' && kind != '{' && options_.lstrip_blocks) {
                size_t line_start = text.rfind('\n');
                line_start = line_start == std::string::npos ? 0 : line_start + 1;
                bool line_starting = pos == 0 || src_[pos - 1] == '\n';
                if ((line_start > 0 || line_starting) &&
                    text.find_first_not_of(" \t", line_start) == std::string::npos) {
                    text.resize(line_start);
                }
            }
            emit_data(text, pos);
            if (raw) {
                pos = lex_raw(tag, after);
            } else if (kind == '#') {
                pos = lex_comment(tag, after);
            } else {
                pos = lex_tag(kind, tag, after);
            }
        }
        tokens_.push_back({TokenType::kEof, "", line_at(src_.size())});
        return std::move(tokens_);
    }

private:
    int line_at(size_t pos) const {
        return int(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin()) + 1;
    }

    [[noreturn]] void fail(size_t pos, const std::string& message) const {
        throw TemplateError(message, line_at(pos));
    }

    size_t find_tag(size_t pos) const {
        for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
                return i;
        }
        return std::string::npos;
    }

    void emit_data(const std::string& text, size_t pos) {
        if (!text.empty()) tokens_.push_back({TokenType::kData, text, line_at(pos)});
    }

    size_t skip_space(size_t pos) const {
        while (pos < src_.size() && is_space(src_[pos])) ++pos;
        return pos;
    }

    bool starts_with(size_t pos, const char* s) const { return src_.compare(pos, std::strlen(s), s) == 0; }

    // After a block end: `-%}` strips all following whitespace, `%}` eats one newline (trim_blocks).
    size_t after_block_end(size_t pos, char sign, bool trim) const {
        if (sign == '-') return skip_space(pos);
        if (sign == 0 && trim && pos < src_.size() && src_[pos] == '\n') return pos + 1;
        return pos;
    }

    // `{% raw %}`: the begin tag accepts `-%}` or `%}` (jinja2 applies no trim_blocks to it).
    bool is_raw_begin(size_t pos) const {
        pos = skip_space(pos);
        if (!starts_with(pos, "raw")) return false;
        pos = skip_space(pos + 3);
        return starts_with(pos, "%}") || starts_with(pos, "-%}");
    }

    size_t lex_raw(size_t tag, size_t after) {
        size_t pos = skip_space(skip_space(after) + 3);
        pos = starts_with(pos, "-%}") ? skip_space(pos + 3) : pos + 2;
        size_t body_start = pos;
        for (size_t i = src_.find("{%", pos); i != std::string::npos; i = src_.find("{%", i + 1)) {
            size_t p = i + 2;
            char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
            if (sign) ++p;
            p = skip_space(p);
            if (!starts_with(p, "endraw")) continue;
            p = skip_space(p + 6);
            char end_sign = 0;
            if (starts_with(p, "+%}") || starts_with(p, "-%}")) {
                end_sign = src_[p];
                ++p;
            }
            if (!starts_with(p, "%}")) continue;
            std::string text = src_.substr(body_start, i - body_start);
            if (sign == '-') {
                text = rstrip(text);
            } else if (sign != '+' && options_.lstrip_blocks) {
                size_t line_start = text.rfind('\n');
                line_start = line_start == std::string::npos ? 0 : line_start + 1;
                bool line_starting = body_start == 0 || src_[body_start - 1] == '\n';
                if ((line_start > 0 || line_starting) &&
                    text.find_first_not_of(" \t", line_start) == std::string::npos) {
                    text.resize(line_start);
                }
            }
            emit_data(text, body_start);
            return after_block_end(p + 2, end_sign, options_.trim_blocks);
        }
        fail(tag, "missing end of raw directive");
    }

    size_t lex_comment(size_t tag, size_t body_start) {
        size_t end = src_.find("#}", body_start);
        if (end == std::string::npos) fail(tag, "missing end of comment tag");
        char sign = end > body_start && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
        return after_block_end(end + 2, sign, options_.trim_blocks);
    }

    size_t lex_tag(char kind, size_t tag, size_t pos) {
        bool block = kind == '%';
        tokens_.push_back({block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", line_at(tag)});
        std::string brackets;  // open ( [ { inside the tag: end tags only count when balanced
        while (true) {
            pos = skip_space(pos);
            if (pos >= src_.size()) {
                fail(tag, std::string("unexpected end of template: '") + (block ? "{%" : "{{") +
                              "' opened here is never closed");
            }
            if (brackets.empty()) {
                const char* end = block ? "%}" : "}}";
                char sign = 0;
                size_t p = pos;
                if ((src_[p] == '-' || (block && src_[p] == '+')) && starts_with(p + 1, end))
                    sign = src_[p++];
                if (starts_with(p, end)) {
                    tokens_.push_back({block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", line_at(p)});
                    return after_block_end(p + 2, sign, block && options_.trim_blocks);
                }
            }
            pos = lex_token(pos, brackets);
        }
    }

    size_t lex_token(size_t pos, std::string& brackets) {
        int line = line_at(pos);
        char c = src_[pos];
        if (is_digit(c)) return lex_number(pos, line);
        if (is_name_start(c)) {
            size_t end = pos;
            while (end < src_.size() && is_name_char(src_[end])) ++end;
            tokens_.push_back({TokenType::kName, src_.substr(pos, end - pos), line});
            return end;
        }
        if (c == '\'' || c == '"') return lex_string(pos, line);
        static const char* kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
        for (const char* op : kTwoChar) {
            if (starts_with(pos, op)) {
                tokens_.push_back({TokenType::kOp, op, line});
                return pos + 2;
            }
        }
        if (std::strchr("+-/*%~[](){}<>=.:|,;", c) == nullptr)
            fail(pos, std::string("unexpected char '") + c + "'");
        if (c == '(' || c == '[' || c == '{') {
            brackets += c;
        } else if (c == ')' || c == ']' || c == '}') {
            char open = c == ')' ? '(' : c == ']' ? '[' : '{';
            if (brackets.empty() || brackets.back() != open) fail(pos, std::string("unexpected '") + c + "'");
            brackets.pop_back();
        }
        tokens_.push_back({TokenType::kOp, std::string(1, c), line});
        return pos + 1;
    }

    size_t lex_digits(size_t pos, std::string& out) const {
        // \d+(_\d+)*
        while (pos < src_.size()) {
            if (is_digit(src_[pos])) {
                out += src_[pos++];
            } else if (src_[pos] == '_' && pos + 1 < src_.size() && is_digit(src_[pos + 1]) && !out.empty()) {
                ++pos;
            } else {
                break;
            }
        }
        return pos;
    }

    size_t lex_number(size_t pos, int line) {
        std::string text;
        size_t end = lex_digits(pos, text);
        bool is_float = false;
        // No float right after a dot: `x.0.1` is two attribute lookups (jinja2's (?<!\.) rule).
        bool after_dot = pos > 0 && src_[pos - 1] == '.';
        if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
            text += '.';
            end = lex_digits(end + 1, text);
            is_float = true;
        }
        if (!after_dot && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
            size_t p = end + 1;
            std::string exp = "e";
            if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) exp += src_[p++];
            if (p < src_.size() && is_digit(src_[p])) {
                end = lex_digits(p, exp);
                text += exp;
                is_float = true;
            }
        }
        tokens_.push_back({is_float ? TokenType::kFloat : TokenType::kInt, text, line});
        return end;
    }

    // String literal with Python's unicode-escape rules (unknown escapes stay as written).
    size_t lex_string(size_t pos, int line) {
        char quote = src_[pos];
        std::string out;
        size_t p = pos + 1;
        while (true) {
            if (p >= src_.size()) fail(pos, "unterminated string literal");
            char c = src_[p];
            if (c == quote) break;
            if (c != '\\') {
                out += c;
                ++p;
                continue;
            }
            if (p + 1 >= src_.size()) fail(pos, "unterminated string literal");
            char e = src_[p + 1];
            p += 2;
            switch (e) {
                case 'n': out += '\n'; break;
                case 't': out += '\t'; break;
                case 'r': out += '\r'; break;
                case '\\': out += '\\'; break;
                case '\'': out += '\''; break;
                case '"': out += '"'; break;
                case 'a': out += '\a'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'v': out += '\v'; break;
                case '\n': break;  // line continuation
                case 'x':
                case 'u':
                case 'U': {
                    size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    if (p + digits > src_.size()) fail(pos, "truncated \\" + std::string(1, e) + " escape");
                    std::string hex = src_.substr(p, digits);
                    if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
                        fail(pos, "truncated \\" + std::string(1, e) + " escape");
                    }
                    uint32_t cp = uint32_t(std::stoul(hex, nullptr, 16));
                    if (cp > 0x10ffff) fail(pos, "illegal Unicode character in escape");
                    append_utf8(out, cp);
                    p += digits;
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        uint32_t cp = uint32_t(e - '0');
                        for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) {
                            cp = cp * 8 + uint32_t(src_[p++] - '0');
                        }
                        append_utf8(out, cp);
                    } else {
                        out += '\\';
                        out += e;
                    }
            }
        }
        tokens_.push_back({TokenType::kString, out, line});
        return p + 1;
    }

    LexerOptions options_;
    std::string src_;
    std::vector<size_t> newlines_;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexerOptions& options) {
    return Lexer(source, options).run();
}

}  // namespace surf::model::jinja
