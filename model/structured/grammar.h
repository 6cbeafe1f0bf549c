// Grammar for JSON-schema-constrained decoding, and its byte-level matcher.
//
// A Grammar is a tree of nodes (literal sets, strings, numbers, objects, arrays, alternatives) compiled
// from a JSON schema by model/structured/json_schema.h. The matcher walks it one byte at a time with a stack
// of frames (one frame per open value, like a pushdown automaton); where the grammar is ambiguous (anyOf, a
// number that may stop or go on) it keeps a small set of stacks and drops those that die. The schema subset
// is non-recursive, so stacks are bounded by the schema's nesting depth.
//
// Every live stack can always be completed (string/number/array bounds are checked prefix by prefix),
// so constrained decoding never paints itself into a corner.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace surf::model {

enum class GrammarNodeKind : uint8_t {
    kLiteral,  // one of a fixed set of byte strings (const, enum, true/false/null, object keys)
    kString,   // a JSON string with code-point length bounds
    kNumber,   // a JSON integer or decimal number with bounds
    kObject,   // an object with properties in schema order
    kArray,    // an array of one item schema
    kAnyOf,    // one of several alternatives (never on the stack: expanded when pushed)
};

// Byte trie node of a literal set; edges and terminals live in Grammar::lit_*.
struct LiteralTrieNode {
    uint32_t edge_begin = 0;
    uint32_t edge_end = 0;
    int32_t terminal = -1;  // value id when a literal ends here, else -1
};

struct ObjectProperty {
    std::string key;
    uint32_t value = 0;  // node index
    bool required = false;
};

struct GrammarNode {
    GrammarNodeKind kind = GrammarNodeKind::kLiteral;
    // kLiteral: the root of its trie in Grammar::lit_nodes.
    uint32_t trie_root = 0;
    // kString: length in Unicode code points (JSON Schema counts code points).
    uint32_t min_length = 0;
    uint32_t max_length = UINT32_MAX;
    // kNumber: bounds in units of 10^-frac_digits, inclusive. frac_digits = 0 for integers.
    int64_t min_scaled = 0;
    int64_t max_scaled = 0;
    uint8_t frac_digits = 0;
    uint8_t max_int_digits = 19;
    // kObject: properties in schema order; key_literal[i] is the kLiteral node matching `"key":` for the
    // keys that may come next after i properties were passed (terminal = property index), close_ok[i]
    // says whether `}` may come there (no required property left).
    std::vector<ObjectProperty> properties;
    std::vector<uint32_t> key_literal;  // [n_properties + 1], UINT32_MAX when no key may follow
    std::vector<uint8_t> close_ok;      // [n_properties + 1]
    // kArray
    uint32_t item = 0;
    uint32_t min_items = 0;
    uint32_t max_items = UINT32_MAX;
    // kAnyOf
    std::vector<uint32_t> alternatives;
};

// One open value on the matcher stack. Meaning of a/b/c/v per kind is in grammar.cpp.
struct Frame {
    uint32_t node;
    uint32_t a;
    uint32_t b;
    uint32_t c;
    uint64_t v;
};
static_assert(sizeof(Frame) == 24, "Frame is compared with memcmp: no padding");

constexpr uint32_t kMaxGrammarDepth = 32;

// A matcher stack. Copies move only the live frames (stacks are copied per trie node during mask walks).
class GrammarStack {
public:
    GrammarStack() = default;
    GrammarStack(const GrammarStack& other) : depth_(other.depth_) {
        std::memcpy(frames_, other.frames_, depth_ * sizeof(Frame));
    }
    GrammarStack& operator=(const GrammarStack& other) {
        depth_ = other.depth_;
        std::memcpy(frames_, other.frames_, depth_ * sizeof(Frame));
        return *this;
    }
    bool operator==(const GrammarStack& other) const {
        return depth_ == other.depth_ && std::memcmp(frames_, other.frames_, depth_ * sizeof(Frame)) == 0;
    }
    uint32_t depth() const { return depth_; }
    bool empty() const { return depth_ == 0; }
    Frame& top() { return frames_[depth_ - 1]; }
    const Frame& top() const { return frames_[depth_ - 1]; }
    const Frame& at(uint32_t i) const { return frames_[i]; }
    void push(const Frame& f);
    void pop() { --depth_; }

private:
    uint32_t depth_ = 0;
    Frame frames_[kMaxGrammarDepth];
};

// String frame sub-states (Frame::a of a kString frame). Exposed for the token-level string cache.
enum StringState : uint32_t {
    kStrBeforeOpen = 0,
    kStrNormal = 1,         // inside, at a character boundary
    kStrEscape = 2,         // after a backslash
    kStrHex = 3,            // inside \uXXXX; c = digits | mode << 4 | value << 8
    kStrUtf8 = 4,           // inside a multi-byte UTF-8 character; c = pending | lo << 8 | hi << 16
    kStrNeedBackslash = 5,  // after a high surrogate escape: a low surrogate escape must follow
    kStrNeedU = 6,
};

// Result of feeding one byte to a string frame in isolation.
enum class StringStep : uint8_t { kDead, kInside, kClosed };

// Advance a string frame (a, b = code points so far, c) by one byte. min/max bound b at the closing quote.
StringStep string_step(Frame& f, uint8_t byte, uint32_t min_length, uint32_t max_length);

struct Grammar {
    std::vector<GrammarNode> nodes;
    uint32_t root = 0;
    std::vector<LiteralTrieNode> lit_nodes;
    std::vector<uint8_t> lit_edge_byte;
    std::vector<uint32_t> lit_edge_child;
    uint32_t max_depth = 0;  // deepest stack the grammar can build

    // Add a kLiteral node for these byte strings (terminal ids = positions in `values`).
    uint32_t add_literal_node(const std::vector<std::string>& values);

    // Initial stacks (the root pushed; several when the root is an alternative).
    std::vector<GrammarStack> initial_stacks() const;
    // All successors of `stack` after `byte`, appended to `out` (nothing when the byte is not allowed).
    void step(const GrammarStack& stack, uint8_t byte, std::vector<GrammarStack>& out) const;
    // Stacks after the top frame (which must be complete) is popped and its parent told.
    void finish_top(GrammarStack stack, std::vector<GrammarStack>& out) const;
    // Whether the value can end here (the stack is empty or every open frame may complete now).
    bool can_end(const GrammarStack& stack) const;
    // Whether the stack may still consume a byte.
    bool can_continue(const GrammarStack& stack) const;

private:
    // step() for a top frame of each kind (n is the top frame's node).
    void step_literal(const GrammarStack& stack, uint8_t byte, std::vector<GrammarStack>& out) const;
    void step_number(const GrammarStack& stack, const GrammarNode& n, uint8_t byte,
                     std::vector<GrammarStack>& out) const;
    void step_object(const GrammarStack& stack, const GrammarNode& n, uint8_t byte,
                     std::vector<GrammarStack>& out) const;
    void step_array(const GrammarStack& stack, const GrammarNode& n, uint8_t byte,
                    std::vector<GrammarStack>& out) const;
    // Advances a number frame by one byte; true when the byte is part of a number the bounds still allow.
    bool number_accepts(const GrammarNode& n, Frame& f, uint8_t byte) const;
    void push_node(GrammarStack stack, uint32_t node, std::vector<GrammarStack>& out) const;
    void finish_child(GrammarStack parent, const Frame& child, std::vector<GrammarStack>& out) const;
    bool number_feasible(const GrammarNode& n, const Frame& f) const;
    bool number_complete(const GrammarNode& n, const Frame& f) const;
    bool top_may_complete(const GrammarStack& stack) const;
};

// Byte-level matcher over a set of stacks: the reference semantics that token masks must agree with.
class ByteMatcher {
public:
    explicit ByteMatcher(const Grammar& grammar);
    // Consume one byte; returns false (and leaves the state unchanged) if it is not allowed.
    bool accept_byte(uint8_t byte);
    bool accept_bytes(const std::string& bytes);  // all or nothing
    bool can_end() const;
    bool is_complete() const;  // can end and no byte may follow
    const std::vector<GrammarStack>& stacks() const { return stacks_; }
    void set_stacks(std::vector<GrammarStack> stacks) { stacks_ = std::move(stacks); }

private:
    const Grammar* grammar_;
    std::vector<GrammarStack> stacks_;
    std::vector<GrammarStack> scratch_;
};

// Remove duplicate stacks in place (keeps first occurrences).
void dedupe_stacks(std::vector<GrammarStack>& stacks);

}  // namespace surf::model
