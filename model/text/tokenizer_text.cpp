// Text-level parts of the tokenizer: UTF-8, the ByteLevel table, the PCRE2 regex, the added-token matcher,
// normalizers, pre-tokenizers and decoders. Each mirrors the HF `tokenizers` component of the same name.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "base/error.h"
#include "model/text/tokenizer_internal.h"

namespace surf::model::tokenizer_detail {

// ---- UTF-8 ----

namespace {

// Length of the valid UTF-8 sequence at bytes[pos]: > 0 when complete and valid; otherwise -(length of
// the maximal valid prefix, at least 1); `truncated` says the prefix ran into the end of the buffer.
int utf8_sequence(std::string_view bytes, size_t pos, bool* truncated) {
    *truncated = false;
    auto b0 = static_cast<uint8_t>(bytes[pos]);
    if (b0 < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return -1;
    }
    for (int k = 1; k < need; ++k) {
        if (pos + k >= bytes.size()) {
            *truncated = true;
            return -k;
        }
        auto b = static_cast<uint8_t>(bytes[pos + k]);
        uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h) return -k;
    }
    return need;
}

}  // namespace

size_t append_utf8_lossy(std::string_view bytes, bool final_chunk, std::string& out) {
    size_t pos = 0;
    while (pos < bytes.size()) {
        size_t run = pos;  // copy ASCII runs in one go
        while (run < bytes.size() && static_cast<uint8_t>(bytes[run]) < 0x80) ++run;
        out.append(bytes.data() + pos, run - pos);
        pos = run;
        if (pos >= bytes.size()) break;
        bool truncated;
        int n = utf8_sequence(bytes, pos, &truncated);
        if (n > 0) {
            out.append(bytes.data() + pos, n);
            pos += n;
        } else if (truncated && !final_chunk) {
            break;  // may still complete with the next bytes
        } else {
            out.append("\xEF\xBF\xBD");
            pos += static_cast<size_t>(-n);
        }
    }
    return pos;
}

bool is_valid_utf8(std::string_view bytes) {
    for (size_t pos = 0; pos < bytes.size();) {
        if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
            ++pos;
            continue;
        }
        bool truncated;
        int n = utf8_sequence(bytes, pos, &truncated);
        if (n <= 0) return false;
        pos += n;
    }
    return true;
}

uint32_t decode_utf8(std::string_view text, size_t pos, size_t* len) {
    auto b0 = static_cast<uint8_t>(text[pos]);
    if (b0 < 0x80) {
        *len = 1;
        return b0;
    }
    int n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
    uint32_t cp = b0 & (0x3F >> (n - 1));
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + k]) & 0x3F);
    *len = static_cast<size_t>(n);
    return cp;
}

bool is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

// ---- ByteLevel ----

const ByteLevelTable& byte_level_table() {
    static const ByteLevelTable table = [] {
        ByteLevelTable t;
        // Printable Latin-1 bytes stand for themselves; the others take code points 256, 257, ... in order.
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            bool visible = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            uint32_t cp = visible ? static_cast<uint32_t>(b) : next++;
            append_utf8(t.byte_to_utf8[b], cp);
            t.cp_to_byte[cp] = static_cast<uint8_t>(b);
        }
        return t;
    }();
    return table;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
    const auto& table = byte_level_table();
    std::string out;
    out.reserve(token.size());
    for (size_t pos = 0; pos < token.size();) {
        size_t len;
        uint32_t cp = decode_utf8(token, pos, &len);
        auto it = table.cp_to_byte.find(cp);
        if (it == table.cp_to_byte.end()) return std::nullopt;
        out.push_back(static_cast<char>(it->second));
        pos += len;
    }
    return out;
}

// ---- Regex ----

namespace {

// Oniguruma's \s is Unicode White_Space; PCRE2 10.42's UCP \s also takes U+180E. Spell it out.
constexpr const char* kWhiteSpaceClass =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";

std::string rewrite_white_space(const std::string& pattern) {
    std::string out;
    bool in_class = false;
    size_t class_start = 0;
    for (size_t i = 0; i < pattern.size(); ++i) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            char e = pattern[i + 1];
            if (e == 's') {
                out += in_class ? std::string(kWhiteSpaceClass) : "[" + std::string(kWhiteSpaceClass) + "]";
            } else if (e == 'S' && !in_class) {
                out += "[^" + std::string(kWhiteSpaceClass) + "]";
            } else {
                out += c;
                out += e;
            }
            ++i;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            class_start = i;
        } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
            size_t close = pattern.find(":]", i + 2);
            if (close != std::string::npos) {
                out.append(pattern, i, close + 2 - i);
                i = close + 1;
                continue;
            }
        } else if (in_class && c == ']') {
            // A ']' right after '[' or '[^' is a literal.
            size_t first = class_start + 1 + (pattern[class_start + 1] == '^' ? 1 : 0);
            if (i != first) in_class = false;
        }
        out += c;
    }
    return out;
}

struct MatchScratch {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
    ~MatchScratch() {
        pcre2_jit_stack_free(stack);
        pcre2_match_context_free(context);
        pcre2_match_data_free(data);
    }
};

MatchScratch& scratch() {
    thread_local MatchScratch s;
    return s;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool literal, const std::string& where) {
    std::string source = literal ? pattern : rewrite_white_space(pattern);
    int error = 0;
    PCRE2_SIZE offset = 0;
    uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options,
                                     &error, &offset, nullptr);
    if (code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof(message));
        throw Error(ErrorKind::kFormat, where + ": regex '" + pattern + "' does not compile at offset " +
                                            std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
    }
    code_ = code;
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
    pcre2_code_free(static_cast<pcre2_code*>(code_));
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
    out.clear();
    auto* code = static_cast<pcre2_code*>(code_);
    auto& s = scratch();
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    while (pos <= text.size()) {
        int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), pos, 0, s.data, s.context)
                      : PCRE2_ERROR_JIT_BADOPTION;
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
            // No JIT, or its stack ran out on a pathological input: the interpreter keeps its
            // backtracking state on the heap.
            rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.data, s.context);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof(message));
            throw Error(ErrorKind::kResourceExhausted, std::string("tokenizer regex failed on the input: ") +
                                                           reinterpret_cast<char*>(message));
        }
        PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
        size_t start = ovector[0], end = ovector[1];
        out.emplace_back(start, end);
        if (end > start) {
            pos = end;
        } else {
            if (end >= text.size()) break;
            size_t len;
            decode_utf8(text, end, &len);
            pos = end + len;
        }
    }
}

bool is_word_char(uint32_t cp) {
    static const Regex word("^[\\p{L}\\p{Nl}\\p{Nd}\\p{M}\\p{Pc}\\x{200C}\\x{200D}]$", false, "word class");
    std::string text;
    append_utf8(text, cp);
    std::vector<std::pair<size_t, size_t>> matches;
    word.find_all(text, matches);
    return !matches.empty();
}

// ---- added-token matcher ----

void TokenTrie::add(std::string_view text, int32_t value) {
    if (text.empty()) return;
    first_byte_[static_cast<uint8_t>(text[0])] = true;
    int32_t node = 0;
    for (char ch : text) {
        auto byte = static_cast<uint8_t>(ch);
        auto& children = nodes_[node].children;
        auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
        if (it != children.end() && it->first == byte) {
            node = it->second;
        } else {
            auto child = static_cast<int32_t>(nodes_.size());
            children.insert(it, {byte, child});
            nodes_.emplace_back();
            node = child;
        }
    }
    nodes_[node].value = value;
}

bool TokenTrie::find(std::string_view text, size_t from, size_t* start, size_t* end, int32_t* value) const {
    for (size_t i = from; i < text.size(); ++i) {
        if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
        int32_t node = 0;
        int32_t best = -1;
        size_t best_end = 0;
        for (size_t j = i; j < text.size(); ++j) {
            const auto& children = nodes_[node].children;
            auto byte = static_cast<uint8_t>(text[j]);
            auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{-1}));
            if (it == children.end() || it->first != byte) break;
            node = it->second;
            if (nodes_[node].value >= 0) {
                best = nodes_[node].value;
                best_end = j + 1;
            }
        }
        if (best >= 0) {
            *start = i;
            *end = best_end;
            *value = best;
            return true;
        }
    }
    return false;
}

// ---- normalizers, pre-tokenizers, decoders ----

namespace {

std::string_view strip_white_space(std::string_view s, bool left, bool right) {
    size_t begin = 0, end = s.size();
    while (left && begin < end) {
        size_t len;
        if (!is_white_space(decode_utf8(s, begin, &len))) break;
        begin += len;
    }
    while (right && end > begin) {
        size_t back = end - 1;
        while (back > begin && (static_cast<uint8_t>(s[back]) & 0xC0) == 0x80) --back;
        size_t len;
        if (!is_white_space(decode_utf8(s, back, &len))) break;
        end = back;
    }
    return s.substr(begin, end - begin);
}

void replace_all(std::string& s, std::string_view pattern, std::string_view content) {
    if (pattern.empty()) return;
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = s.find(pattern, pos)) != std::string::npos; pos = hit + pattern.size()) {
        out.append(s, pos, hit - pos);
        out.append(content);
    }
    if (pos == 0) return;
    out.append(s, pos, std::string::npos);
    s = std::move(out);
}

// HF NormalizedString::split: the matches cover the piece as (range, is_match) runs, then the behaviour
// decides which runs merge and which are dropped.
void split_piece(std::string_view piece, const PreTokenizerStep& step, std::vector<std::string_view>& out) {
    thread_local std::vector<std::pair<size_t, size_t>> matches;
    struct Run {
        size_t begin, end;
        bool is_match;
    };
    thread_local std::vector<Run> runs;
    thread_local std::vector<Run> merged;
    step.pattern->find_all(piece, matches);
    runs.clear();
    size_t prev = 0;
    for (auto [start, end] : matches) {
        if (prev != start) runs.push_back({prev, start, step.invert});
        runs.push_back({start, end, !step.invert});
        prev = end;
    }
    if (prev != piece.size()) runs.push_back({prev, piece.size(), step.invert});

    merged.clear();
    bool previous_match = false;
    switch (step.behavior) {
        case SplitBehavior::kIsolated:
            for (auto r : runs) merged.push_back({r.begin, r.end, false});
            break;
        case SplitBehavior::kRemoved: merged = runs; break;
        case SplitBehavior::kContiguous:
            for (auto r : runs) {
                if (r.is_match == previous_match && !merged.empty()) {
                    merged.back().end = r.end;
                } else {
                    merged.push_back({r.begin, r.end, false});
                }
                previous_match = r.is_match;
            }
            break;
        case SplitBehavior::kMergedWithPrevious:
            for (auto r : runs) {
                if (r.is_match && !previous_match && !merged.empty()) {
                    merged.back().end = r.end;
                } else {
                    merged.push_back({r.begin, r.end, false});
                }
                previous_match = r.is_match;
            }
            break;
        case SplitBehavior::kMergedWithNext:
            for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
                if (it->is_match && !previous_match && !merged.empty()) {
                    merged.back().begin = it->begin;
                } else {
                    merged.push_back({it->begin, it->end, false});
                }
                previous_match = it->is_match;
            }
            std::reverse(merged.begin(), merged.end());
            break;
    }
    for (auto r : merged) {
        if (!r.is_match && r.end > r.begin) out.push_back(piece.substr(r.begin, r.end - r.begin));
    }
}

}  // namespace

std::string TokenizerData::normalize(std::string_view text) const {
    std::string s(text);
    for (const auto& step : normalizers) {
        switch (step.kind) {
            case NormalizerStep::Kind::kPrepend:
                if (!s.empty()) s.insert(0, step.text);
                break;
            case NormalizerStep::Kind::kReplace: {
                thread_local std::vector<std::pair<size_t, size_t>> matches;
                step.pattern->find_all(s, matches);
                if (matches.empty()) break;
                std::string out;
                size_t prev = 0;
                for (auto [start, end] : matches) {
                    out.append(s, prev, start - prev);
                    out.append(step.text);
                    prev = end;
                }
                out.append(s, prev, std::string::npos);
                s = std::move(out);
                break;
            }
            case NormalizerStep::Kind::kStrip:
                s = std::string(strip_white_space(s, step.strip_left, step.strip_right));
                break;
        }
    }
    return s;
}

void TokenizerData::pre_tokenize(std::string_view text, std::vector<std::string_view>& pieces,
                                 std::vector<std::unique_ptr<std::string>>& arena) const {
    pieces.clear();
    if (!text.empty()) pieces.push_back(text);
    thread_local std::vector<std::string_view> next;
    for (const auto& step : pre_tokenizers) {
        next.clear();
        for (std::string_view piece : pieces) {
            if (step.kind == PreTokenizerStep::Kind::kSplit) {
                split_piece(piece, step, next);
                continue;
            }
            // ByteLevel: the byte mapping itself happens in the BPE (Bpe::Options::byte_level).
            if (step.add_prefix_space && piece.front() != ' ') {
                auto prefixed = std::make_unique<std::string>(1, ' ');
                prefixed->append(piece);
                arena.push_back(std::move(prefixed));
                piece = *arena.back();
            }
            if (step.pattern) {
                split_piece(piece, step, next);
            } else {
                next.push_back(piece);
            }
        }
        pieces.swap(next);
    }
}

std::optional<std::string> TokenizerData::id_to_token(int32_t id) const {
    if (auto it = added_normalized.find(id); it != added_normalized.end()) return it->second;
    if (auto it = added_by_id.find(id); it != added_by_id.end()) return it->second.content;
    if (id >= 0 && static_cast<size_t>(id) < model_tokens.size() && has_model_token[id])
        return model_tokens[id];
    return std::nullopt;
}

namespace {

// ByteLevel: maps each token's characters back to bytes (a token outside the byte alphabet stays as
// written) and joins them into one token, invalid UTF-8 replaced.
void decode_byte_level(std::vector<std::string>& tokens) {
    std::string bytes;
    for (const auto& t : tokens) {
        auto raw = byte_level_decode(t);
        bytes += raw ? *raw : t;
    }
    std::string text;
    append_utf8_lossy(bytes, true, text);
    tokens.assign(1, std::move(text));
}

// ByteFallback: runs of `<0xAB>` tokens become their bytes when those form valid UTF-8, else one U+FFFD
// per byte.
void decode_byte_fallback(std::vector<std::string>& tokens) {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
        if (pending.empty()) return;
        if (is_valid_utf8(pending)) {
            out.push_back(pending);
        } else {
            for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
        }
        pending.clear();
    };
    for (auto& t : tokens) {
        auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) && hex(t[4])) {
            pending.push_back(static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
        } else {
            flush();
            out.push_back(std::move(t));
        }
    }
    flush();
    tokens = std::move(out);
}

// Strip: removes up to step.start leading and step.stop trailing characters equal to step.content.
void strip_token(std::string& t, const DecoderStep& step) {
    std::vector<std::pair<size_t, size_t>> chars;  // (offset, length)
    for (size_t pos = 0, len; pos < t.size(); pos += len) {
        decode_utf8(t, pos, &len);
        chars.emplace_back(pos, len);
    }
    auto is_content = [&](size_t k) { return t.compare(chars[k].first, chars[k].second, step.content) == 0; };
    size_t start_cut = 0, stop_cut = chars.size();
    for (size_t k = 0; k < chars.size() && k < static_cast<size_t>(step.start); ++k) {
        if (!is_content(k)) break;
        start_cut = k + 1;
    }
    for (size_t k = 0; k < static_cast<size_t>(step.stop) && k < chars.size(); ++k) {
        size_t index = chars.size() - k - 1;
        if (!is_content(index)) break;
        stop_cut = index;
    }
    if (start_cut >= stop_cut) {
        t.clear();
        return;
    }
    size_t begin = chars[start_cut].first;
    size_t end = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
    t = t.substr(begin, end - begin);
}

}  // namespace

std::string TokenizerData::run_decoders(std::vector<std::string> tokens) const {
    if (!has_decoder) {
        std::string out;
        for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
        return out;
    }
    for (const auto& step : decoders) {
        switch (step.kind) {
            case DecoderStep::Kind::kByteLevel: decode_byte_level(tokens); break;
            case DecoderStep::Kind::kByteFallback: decode_byte_fallback(tokens); break;
            case DecoderStep::Kind::kFuse: {
                std::string joined;
                for (const auto& t : tokens) joined += t;
                tokens.assign(1, std::move(joined));
                break;
            }
            case DecoderStep::Kind::kStrip:
                for (auto& t : tokens) strip_token(t, step);
                break;
            case DecoderStep::Kind::kReplace:
                for (auto& t : tokens) replace_all(t, step.pattern, step.content);
                break;
        }
    }
    std::string out;
    for (const auto& t : tokens) out += t;
    return out;
}

}  // namespace surf::model::tokenizer_detail
