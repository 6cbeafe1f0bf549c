#include "model/structured/grammar.h"

#include <algorithm>

#include "base/check.h"

// Frame fields per node kind:
//   kLiteral: a = current literal trie node.
//   kString:  a = StringState, b = code points so far, c = state detail (see StringState).
//   kNumber:  a = flags (kNum*), b = integer digits, c = fraction digits | fraction value << 4,
//             v = integer part.
//   kObject:  a = ObjState, b = properties passed (the next key comes from key_literal[b]).
//   kArray:   a = ArrState, b = items so far.

namespace surf::model {
namespace {

enum : uint32_t { kNumNeg = 1, kNumDigit = 2, kNumLeadZero = 4, kNumDot = 8 };
enum ObjState : uint32_t {
    kObjBeforeOpen = 0,
    kObjAfterOpen = 1,
    kObjAfterValue = 2,
    kObjInKey = 3,
    kObjInValue = 4
};
enum ArrState : uint32_t { kArrBeforeOpen = 0, kArrAfterOpen = 1, kArrAfterItem = 2, kArrInItem = 3 };

using i128 = __int128;

i128 pow10_i128(int k) {
    i128 r = 1;
    for (int i = 0; i < k; ++i) r *= 10;
    return r;
}

int hex_value(uint8_t byte) {
    if (byte >= '0' && byte <= '9') return byte - '0';
    if (byte >= 'a' && byte <= 'f') return byte - 'a' + 10;
    if (byte >= 'A' && byte <= 'F') return byte - 'A' + 10;
    return -1;
}

// Whether a \u escape whose first `digits` hex digits are `value` can still be completed.
// mode 0: any code unit except a lone low surrogate; mode 1: must be a low surrogate DC00..DFFF.
bool hex_prefix_ok(uint32_t value, uint32_t digits, uint32_t mode) {
    uint32_t shift = 4 * (4 - digits);
    uint32_t lo = value << shift;
    uint32_t hi = lo + (1u << shift) - 1;
    if (mode == 1) return hi >= 0xDC00 && lo <= 0xDFFF;
    return !(lo >= 0xDC00 && hi <= 0xDFFF);
}

Frame initial_frame(uint32_t node) {
    return Frame{node, 0, 0, 0, 0};
}

}  // namespace

void GrammarStack::push(const Frame& f) {
    SURF_CHECK(depth_ < kMaxGrammarDepth, "grammar stack overflow", depth_);
    frames_[depth_++] = f;
}

namespace {

// kStrNormal: a closing quote, a backslash, or the first byte of a character (a UTF-8 lead byte records
// how many continuation bytes follow and the range the next one must fall in).
StringStep string_char_step(Frame& f, uint8_t byte, uint32_t min_length, uint32_t max_length) {
    if (byte == '"') return f.b >= min_length ? StringStep::kClosed : StringStep::kDead;
    if (byte < 0x20) return StringStep::kDead;  // raw control characters are invalid JSON
    if (f.b >= max_length) return StringStep::kDead;
    uint32_t pending = 0, lo = 0x80, hi = 0xBF;
    if (byte == '\\') {
        f.a = kStrEscape;
    } else if (byte < 0x80) {
        // plain ASCII character
    } else if (byte >= 0xC2 && byte <= 0xDF) {
        pending = 1;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
        pending = 2;
        if (byte == 0xE0) lo = 0xA0;  // no overlong 3-byte forms
        if (byte == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (byte >= 0xF0 && byte <= 0xF4) {
        pending = 3;
        if (byte == 0xF0) lo = 0x90;  // no overlong 4-byte forms
        if (byte == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return StringStep::kDead;  // continuation byte without a lead, C0/C1, F5..FF
    }
    if (pending > 0) {
        f.a = kStrUtf8;
        f.c = pending | lo << 8 | hi << 16;
    }
    ++f.b;
    return StringStep::kInside;
}

// kStrUtf8: a continuation byte within the range the previous byte allows.
StringStep string_utf8_step(Frame& f, uint8_t byte) {
    uint32_t pending = f.c & 0xFF, lo = (f.c >> 8) & 0xFF, hi = (f.c >> 16) & 0xFF;
    if (byte < lo || byte > hi) return StringStep::kDead;
    if (--pending == 0) {
        f.a = kStrNormal;
        f.c = 0;
    } else {
        f.c = pending | 0x80u << 8 | 0xBFu << 16;
    }
    return StringStep::kInside;
}

// kStrEscape: the character after a backslash.
StringStep string_escape_step(Frame& f, uint8_t byte) {
    if (byte == 'u') {
        f.a = kStrHex;
        f.c = 0;
        return StringStep::kInside;
    }
    if (byte == '"' || byte == '\\' || byte == '/' || byte == 'b' || byte == 'f' || byte == 'n' ||
        byte == 'r' || byte == 't') {
        f.a = kStrNormal;
        return StringStep::kInside;
    }
    return StringStep::kDead;
}

// kStrHex: one hex digit of \uXXXX; a prefix that can no longer complete a valid code unit is dead.
StringStep string_hex_step(Frame& f, uint8_t byte) {
    int d = hex_value(byte);
    if (d < 0) return StringStep::kDead;
    uint32_t digits = (f.c & 0xF) + 1, mode = (f.c >> 4) & 0xF, value = (f.c >> 8) * 16 + d;
    if (!hex_prefix_ok(value, digits, mode)) return StringStep::kDead;
    if (digits < 4) {
        f.c = digits | mode << 4 | value << 8;
    } else if (mode == 0 && value >= 0xD800 && value <= 0xDBFF) {
        f.a = kStrNeedBackslash;  // a high surrogate must be followed by a low one
        f.c = 0;
    } else {
        f.a = kStrNormal;
        f.c = 0;
    }
    return StringStep::kInside;
}

}  // namespace

StringStep string_step(Frame& f, uint8_t byte, uint32_t min_length, uint32_t max_length) {
    switch (f.a) {
        case kStrBeforeOpen:
            if (byte != '"') return StringStep::kDead;
            f.a = kStrNormal;
            return StringStep::kInside;
        case kStrNormal: return string_char_step(f, byte, min_length, max_length);
        case kStrUtf8: return string_utf8_step(f, byte);
        case kStrEscape: return string_escape_step(f, byte);
        case kStrHex: return string_hex_step(f, byte);
        case kStrNeedBackslash:
            if (byte != '\\') return StringStep::kDead;
            f.a = kStrNeedU;
            return StringStep::kInside;
        case kStrNeedU:
            if (byte != 'u') return StringStep::kDead;
            f.a = kStrHex;
            f.c = 1u << 4;  // mode 1: low surrogate; the pair counts as one code point (counted at '\')
            return StringStep::kInside;
        default: SURF_CHECK(false, "bad string state", f.a);
    }
    return StringStep::kDead;
}

uint32_t Grammar::add_literal_node(const std::vector<std::string>& values) {
    // Build the trie with temporary child lists, then flatten so each node's edges are contiguous.
    struct Tmp {
        std::vector<std::pair<uint8_t, uint32_t>> children;
        int32_t terminal = -1;
    };
    std::vector<Tmp> tmp(1);
    for (size_t i = 0; i < values.size(); ++i) {
        uint32_t cur = 0;
        for (unsigned char ch : values[i]) {
            uint32_t next = UINT32_MAX;
            for (auto& [b, child] : tmp[cur].children) {
                if (b == ch) next = child;
            }
            if (next == UINT32_MAX) {
                next = static_cast<uint32_t>(tmp.size());
                tmp[cur].children.push_back({ch, next});
                tmp.emplace_back();
            }
            cur = next;
        }
        if (tmp[cur].terminal < 0) tmp[cur].terminal = static_cast<int32_t>(i);
    }
    uint32_t base = static_cast<uint32_t>(lit_nodes.size());
    for (const Tmp& t : tmp) {
        LiteralTrieNode n;
        n.edge_begin = static_cast<uint32_t>(lit_edge_byte.size());
        for (auto& [b, child] : t.children) {
            lit_edge_byte.push_back(b);
            lit_edge_child.push_back(base + child);
        }
        n.edge_end = static_cast<uint32_t>(lit_edge_byte.size());
        n.terminal = t.terminal;
        lit_nodes.push_back(n);
    }
    GrammarNode node;
    node.kind = GrammarNodeKind::kLiteral;
    node.trie_root = base;
    nodes.push_back(std::move(node));
    return static_cast<uint32_t>(nodes.size() - 1);
}

std::vector<GrammarStack> Grammar::initial_stacks() const {
    std::vector<GrammarStack> out;
    push_node(GrammarStack(), root, out);
    dedupe_stacks(out);
    return out;
}

void Grammar::push_node(GrammarStack stack, uint32_t node, std::vector<GrammarStack>& out) const {
    const GrammarNode& n = nodes[node];
    if (n.kind == GrammarNodeKind::kAnyOf) {
        for (uint32_t alt : n.alternatives) push_node(stack, alt, out);
        return;
    }
    Frame f = initial_frame(node);
    if (n.kind == GrammarNodeKind::kLiteral) f.a = n.trie_root;
    stack.push(f);
    out.push_back(stack);
}

bool Grammar::number_feasible(const GrammarNode& n, const Frame& f) const {
    // Scaled magnitudes the finished number may take, intersected with the bounds' magnitudes.
    bool neg = f.a & kNumNeg;
    i128 lo, hi;
    if (!neg) {
        lo = std::max<i128>(n.min_scaled, 0);
        hi = n.max_scaled;
    } else {
        lo = std::max<i128>(-static_cast<i128>(n.max_scaled), 1);  // "-0" is not generated
        hi = -static_cast<i128>(n.min_scaled);
    }
    if (lo > hi) return false;
    if (!(f.a & kNumDigit)) return true;
    i128 scale = pow10_i128(n.frac_digits);
    i128 p = static_cast<i128>(f.v);
    if (f.a & kNumDot) {
        uint32_t j = f.c & 0xF, frac = f.c >> 4;
        i128 unit = pow10_i128(n.frac_digits - j);
        i128 m = p * scale + static_cast<i128>(frac) * unit;
        return m <= hi && m + unit - 1 >= lo;
    }
    if (f.a & kNumLeadZero) return lo <= scale - 1;  // 0 or 0.xxx
    // Integer part p followed by k more digits: [p·10^k, (p+1)·10^k) before the fraction.
    i128 width = scale;
    for (uint32_t digits = f.b; digits <= n.max_int_digits; ++digits) {
        i128 start = p * width;
        if (start > hi) break;
        if (start + width - 1 >= lo) return true;
        width *= 10;
    }
    return false;
}

bool Grammar::number_complete(const GrammarNode& n, const Frame& f) const {
    if (!(f.a & kNumDigit)) return false;
    uint32_t j = f.c & 0xF;
    if ((f.a & kNumDot) && j == 0) return false;
    i128 m = static_cast<i128>(f.v) * pow10_i128(n.frac_digits) +
             static_cast<i128>(f.c >> 4) * pow10_i128(n.frac_digits - j);
    if (f.a & kNumNeg) {
        m = -m;
        if (m == 0) return false;
    }
    return m >= n.min_scaled && m <= n.max_scaled;
}

bool Grammar::top_may_complete(const GrammarStack& stack) const {
    const Frame& f = stack.top();
    const GrammarNode& n = nodes[f.node];
    if (n.kind == GrammarNodeKind::kNumber) return number_complete(n, f);
    if (n.kind == GrammarNodeKind::kLiteral) return lit_nodes[f.a].terminal >= 0;
    return false;  // strings, objects and arrays are popped as soon as their closing byte is consumed
}

void Grammar::finish_top(GrammarStack stack, std::vector<GrammarStack>& out) const {
    Frame child = stack.top();
    stack.pop();
    if (stack.empty()) {
        out.push_back(stack);
        return;
    }
    finish_child(stack, child, out);
}

void Grammar::finish_child(GrammarStack parent, const Frame& child, std::vector<GrammarStack>& out) const {
    Frame& p = parent.top();
    const GrammarNode& n = nodes[p.node];
    if (n.kind == GrammarNodeKind::kObject) {
        if (p.a == kObjInKey) {
            int32_t prop = lit_nodes[child.a].terminal;
            SURF_CHECK(prop >= 0, "key literal finished without a terminal");
            p.a = kObjInValue;
            p.b = static_cast<uint32_t>(prop) + 1;
            push_node(parent, n.properties[prop].value, out);
        } else {
            SURF_CHECK(p.a == kObjInValue, "object frame in state", p.a);
            p.a = kObjAfterValue;
            out.push_back(parent);
        }
        return;
    }
    SURF_CHECK(n.kind == GrammarNodeKind::kArray && p.a == kArrInItem, "bad parent frame", int(n.kind), p.a);
    p.a = kArrAfterItem;
    ++p.b;
    out.push_back(parent);
}

void Grammar::step(const GrammarStack& stack, uint8_t byte, std::vector<GrammarStack>& out) const {
    if (stack.empty()) return;
    const GrammarNode& n = nodes[stack.top().node];
    switch (n.kind) {
        case GrammarNodeKind::kLiteral: step_literal(stack, byte, out); return;
        case GrammarNodeKind::kString: {
            GrammarStack s = stack;
            StringStep r = string_step(s.top(), byte, n.min_length, n.max_length);
            if (r == StringStep::kInside) out.push_back(s);
            if (r == StringStep::kClosed) finish_top(s, out);
            return;
        }
        case GrammarNodeKind::kNumber: step_number(stack, n, byte, out); return;
        case GrammarNodeKind::kObject: step_object(stack, n, byte, out); return;
        case GrammarNodeKind::kArray: step_array(stack, n, byte, out); return;
        case GrammarNodeKind::kAnyOf: SURF_CHECK(false, "anyOf node on the stack");
    }
}

void Grammar::step_literal(const GrammarStack& stack, uint8_t byte, std::vector<GrammarStack>& out) const {
    const LiteralTrieNode& t = lit_nodes[stack.top().a];
    for (uint32_t e = t.edge_begin; e < t.edge_end; ++e) {
        if (lit_edge_byte[e] != byte) continue;
        GrammarStack s = stack;
        s.top().a = lit_edge_child[e];
        const LiteralTrieNode& next = lit_nodes[lit_edge_child[e]];
        if (next.terminal >= 0 && next.edge_begin == next.edge_end) {
            finish_top(s, out);
        } else {
            out.push_back(s);
        }
    }
    if (t.terminal >= 0) {  // a literal that is a prefix of another (numbers: 1 and 10) may stop here
        std::vector<GrammarStack> popped;
        finish_top(stack, popped);
        for (const GrammarStack& s : popped) step(s, byte, out);
    }
}

bool Grammar::number_accepts(const GrammarNode& n, Frame& f, uint8_t byte) const {
    if (byte == '-' && f.a == 0) {
        f.a = kNumNeg;
        return number_feasible(n, f);
    }
    if (byte >= '0' && byte <= '9') {
        uint32_t d = byte - '0';
        if (!(f.a & kNumDigit)) {
            f.a |= kNumDigit | (d == 0 ? uint32_t{kNumLeadZero} : 0u);
            f.b = 1;
            f.v = d;
            return number_feasible(n, f);
        }
        if (f.a & kNumDot) {
            uint32_t j = f.c & 0xF;
            if (j < n.frac_digits) {
                f.c = (j + 1) | ((f.c >> 4) * 10 + d) << 4;
                return number_feasible(n, f);
            }
        } else if (!(f.a & kNumLeadZero) && f.b < n.max_int_digits) {
            f.v = f.v * 10 + d;
            ++f.b;
            return number_feasible(n, f);
        }
        return false;
    }
    if (byte == '.' && (f.a & kNumDigit) && !(f.a & kNumDot) && n.frac_digits > 0) {
        f.a |= kNumDot;
        f.c = 0;
        return number_feasible(n, f);
    }
    return false;
}

void Grammar::step_number(const GrammarStack& stack, const GrammarNode& n, uint8_t byte,
                          std::vector<GrammarStack>& out) const {
    GrammarStack s = stack;
    if (number_accepts(n, s.top(), byte)) out.push_back(s);
    if (number_complete(n, stack.top())) {  // the number may end here and hand the byte to its parent
        std::vector<GrammarStack> popped;
        finish_top(stack, popped);
        for (const GrammarStack& p : popped) step(p, byte, out);
    }
}

void Grammar::step_object(const GrammarStack& stack, const GrammarNode& n, uint8_t byte,
                          std::vector<GrammarStack>& out) const {
    GrammarStack s = stack;
    Frame& f = s.top();
    uint32_t key_node = n.key_literal[f.b];
    if (f.a == kObjBeforeOpen) {
        if (byte != '{') return;
        f.a = kObjAfterOpen;
        out.push_back(s);
    } else if (f.a == kObjAfterOpen || f.a == kObjAfterValue) {
        if (byte == '}') {
            if (n.close_ok[f.b]) finish_top(s, out);
        } else if (f.a == kObjAfterValue) {
            if (byte == ',' && key_node != UINT32_MAX) {
                f.a = kObjInKey;
                s.push(Frame{key_node, nodes[key_node].trie_root, 0, 0, 0});
                out.push_back(s);
            }
        } else if (key_node != UINT32_MAX) {
            f.a = kObjInKey;
            s.push(Frame{key_node, nodes[key_node].trie_root, 0, 0, 0});
            step(s, byte, out);
        }
    }
}

void Grammar::step_array(const GrammarStack& stack, const GrammarNode& n, uint8_t byte,
                         std::vector<GrammarStack>& out) const {
    GrammarStack s = stack;
    Frame& f = s.top();
    if (f.a == kArrBeforeOpen) {
        if (byte != '[') return;
        f.a = kArrAfterOpen;
        out.push_back(s);
    } else if (f.a == kArrAfterOpen || f.a == kArrAfterItem) {
        if (byte == ']') {
            if (f.b >= n.min_items) finish_top(s, out);
        } else if (f.b < n.max_items) {
            if (f.a == kArrAfterItem) {
                if (byte != ',') return;
                f.a = kArrInItem;
                push_node(s, n.item, out);
            } else {
                f.a = kArrInItem;
                std::vector<GrammarStack> pushed;
                push_node(s, n.item, pushed);
                for (const GrammarStack& p : pushed) step(p, byte, out);
            }
        }
    }
}

bool Grammar::can_end(const GrammarStack& stack) const {
    if (stack.empty()) return true;
    if (!top_may_complete(stack)) return false;
    std::vector<GrammarStack> popped;
    finish_top(stack, popped);
    for (const GrammarStack& s : popped) {
        if (can_end(s)) return true;
    }
    return false;
}

bool Grammar::can_continue(const GrammarStack& stack) const {
    std::vector<GrammarStack> out;
    for (int b = 0; b < 256; ++b) {
        step(stack, static_cast<uint8_t>(b), out);
        if (!out.empty()) return true;
    }
    return false;
}

void dedupe_stacks(std::vector<GrammarStack>& stacks) {
    if (stacks.size() < 2) return;
    size_t kept = 0;
    for (size_t i = 0; i < stacks.size(); ++i) {
        bool dup = false;
        for (size_t j = 0; j < kept && !dup; ++j) dup = stacks[j] == stacks[i];
        if (!dup) {
            if (kept != i) stacks[kept] = stacks[i];
            ++kept;
        }
    }
    stacks.resize(kept);
}

ByteMatcher::ByteMatcher(const Grammar& grammar) : grammar_(&grammar), stacks_(grammar.initial_stacks()) {}

bool ByteMatcher::accept_byte(uint8_t byte) {
    scratch_.clear();
    for (const GrammarStack& s : stacks_) grammar_->step(s, byte, scratch_);
    if (scratch_.empty()) return false;
    dedupe_stacks(scratch_);
    std::swap(stacks_, scratch_);
    return true;
}

bool ByteMatcher::accept_bytes(const std::string& bytes) {
    std::vector<GrammarStack> saved = stacks_;
    for (unsigned char ch : bytes) {
        if (!accept_byte(ch)) {
            stacks_ = std::move(saved);
            return false;
        }
    }
    return true;
}

bool ByteMatcher::can_end() const {
    for (const GrammarStack& s : stacks_) {
        if (grammar_->can_end(s)) return true;
    }
    return false;
}

bool ByteMatcher::is_complete() const {
    if (!can_end()) return false;
    for (const GrammarStack& s : stacks_) {
        if (grammar_->can_continue(s)) return false;
    }
    return true;
}

}  // namespace surf::model
