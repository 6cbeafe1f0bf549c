#include "model/structured/token_constraint.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <limits>
#include <mutex>
#include <random>
#include <string_view>
#include <unordered_set>

#include "base/check.h"
#include "base/error.h"

namespace surf::model {
namespace {

inline void set_bit(uint32_t* mask, int32_t i) {
    mask[i >> 5] |= 1u << (i & 31);
}

// Concatenation without operator+ (GCC 12 raises a false -Wrestrict on `" " + s`).
std::string cat(std::string_view a, std::string_view b, std::string_view c = {}) {
    std::string out;
    out.reserve(a.size() + b.size() + c.size());
    out.append(a).append(b).append(c);
    return out;
}

std::string printable(const std::string& bytes) {
    std::string out;
    for (unsigned char ch : bytes) {
        if (ch >= 0x20 && ch < 0x7F && ch != '\\') {
            out += static_cast<char>(ch);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", ch);
            out += buf;
        }
    }
    return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------- index

std::shared_ptr<const TokenIndex> TokenIndex::build(const TokenVocabulary& vocab) {
    static std::atomic<uint64_t> next_id{1};
    std::shared_ptr<TokenIndex> index(new TokenIndex());
    index->id_ = next_id++;
    index->vocab_size_ = static_cast<int32_t>(vocab.token_bytes.size());
    index->token_bytes_ = vocab.token_bytes;
    index->usable_.assign(vocab.token_bytes.size(), 1);
    for (int32_t id : vocab.end_ids) {
        if (id < 0 || id >= index->vocab_size_) {
            throw Error(ErrorKind::kInvalidArgument, "TokenVocabulary: end id " + std::to_string(id) +
                                                         " is outside the vocabulary of " +
                                                         std::to_string(index->vocab_size_));
        }
        index->end_ids_.push_back(id);
        index->usable_[id] = 0;
    }
    for (int32_t id : vocab.unusable_ids) {
        if (id >= 0 && id < index->vocab_size_) index->usable_[id] = 0;
    }
    // Build the trie over token ids sorted by bytes: each node's children then appear in byte order and
    // a node's edges can be laid out contiguously in one pass over a temporary child-list trie.
    struct Tmp {
        std::vector<std::pair<uint8_t, uint32_t>> children;
        std::vector<int32_t> tokens;
    };
    std::vector<Tmp> tmp(1);
    std::vector<int32_t> order;
    for (int32_t id = 0; id < index->vocab_size_; ++id) {
        if (index->usable_[id] && !vocab.token_bytes[id].empty())
            order.push_back(id);
        else
            index->usable_[id] = 0;
    }
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return vocab.token_bytes[a] < vocab.token_bytes[b]; });
    std::vector<uint32_t> path(1, 0);  // trie node for each prefix length of the previous token
    std::string prev;
    for (int32_t id : order) {
        const std::string& bytes = vocab.token_bytes[id];
        size_t common = 0;
        while (common < prev.size() && common < bytes.size() && prev[common] == bytes[common]) ++common;
        path.resize(common + 1);
        for (size_t i = common; i < bytes.size(); ++i) {
            uint32_t child = static_cast<uint32_t>(tmp.size());
            tmp[path.back()].children.push_back({static_cast<uint8_t>(bytes[i]), child});
            tmp.emplace_back();
            path.push_back(child);
        }
        tmp[path.back()].tokens.push_back(id);
        prev = bytes;
        index->max_token_bytes_ =
            std::max<uint32_t>(index->max_token_bytes_, static_cast<uint32_t>(bytes.size()));
    }
    index->nodes_.resize(tmp.size());
    for (size_t i = 0; i < tmp.size(); ++i) {
        Node& n = index->nodes_[i];
        n.edge_begin = static_cast<uint32_t>(index->edge_byte_.size());
        for (auto& [b, child] : tmp[i].children) {
            index->edge_byte_.push_back(b);
            index->edge_child_.push_back(child);
        }
        n.edge_end = static_cast<uint32_t>(index->edge_byte_.size());
        n.token_begin = static_cast<uint32_t>(index->tokens_.size());
        index->tokens_.insert(index->tokens_.end(), tmp[i].tokens.begin(), tmp[i].tokens.end());
        n.token_end = static_cast<uint32_t>(index->tokens_.size());
    }
    return index;
}

bool TokenIndex::is_end(int32_t id) const {
    return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

bool TokenIndex::is_usable(int32_t id) const {
    return id >= 0 && id < vocab_size_ && usable_[id];
}

void TokenIndex::build_string_entry(StringEntry& entry, uint32_t trie_node, Frame f, uint32_t min_length,
                                    uint32_t max_length) const {
    const Node& n = nodes_[trie_node];
    for (uint32_t e = n.edge_begin; e < n.edge_end; ++e) {
        Frame g = f;
        StringStep r = string_step(g, edge_byte_[e], min_length, max_length);
        if (r == StringStep::kDead) continue;
        uint32_t child = edge_child_[e];
        const Node& c = nodes_[child];
        for (uint32_t t = c.token_begin; t < c.token_end; ++t) set_bit(entry.mask.data(), tokens_[t]);
        if (c.edge_begin == c.edge_end) continue;
        if (r == StringStep::kClosed) {
            entry.exits.push_back(child);
        } else {
            build_string_entry(entry, child, g, min_length, max_length);
        }
    }
}

const TokenIndex::StringEntry& TokenIndex::string_entry(const Frame& frame, uint32_t min_length,
                                                        uint32_t max_length) const {
    // Only the distance to the length bounds matters, and only up to the longest token.
    uint32_t cap = max_token_bytes_ + 1;
    uint32_t rem_min = min_length > frame.b ? std::min(min_length - frame.b, cap) : 0;
    uint32_t rem_max = max_length >= frame.b ? std::min(max_length - frame.b, cap) : 0;
    SURF_CHECK(frame.a != kStrBeforeOpen && frame.a < 8 && frame.c < (1u << 24), "bad string frame", frame.a);
    uint64_t key = static_cast<uint64_t>(frame.a) | static_cast<uint64_t>(frame.c) << 3 |
                   static_cast<uint64_t>(std::min<uint32_t>(rem_min, 0xFFFF)) << 27 |
                   static_cast<uint64_t>(std::min<uint32_t>(rem_max, 0xFFFF)) << 43;
    {
        std::shared_lock<std::shared_mutex> lock(cache_mutex_);
        auto it = string_cache_.find(key);
        if (it != string_cache_.end()) return *it->second;
    }
    auto entry = std::make_unique<StringEntry>();
    entry->mask.assign(mask_words(), 0);
    Frame f = frame;
    f.b = 0;
    build_string_entry(*entry, 0, f, rem_min, rem_max >= cap ? UINT32_MAX : rem_max);
    std::unique_lock<std::shared_mutex> lock(cache_mutex_);
    auto [it, inserted] = string_cache_.emplace(key, std::move(entry));
    return *it->second;  // a concurrent builder may have won; both entries are identical
}

size_t TokenIndex::string_cache_size() const {
    std::shared_lock<std::shared_mutex> lock(cache_mutex_);
    return string_cache_.size();
}

// --------------------------------------------------------------------------------------- constraint

TokenConstraint::TokenConstraint(std::shared_ptr<const CompiledSchema> schema,
                                 std::shared_ptr<const TokenIndex> index)
    : schema_(std::move(schema)), index_(std::move(index)), matcher_(schema_->grammar) {}

TokenConstraint::TokenConstraint(const TokenConstraint& other)
    : schema_(other.schema_),
      index_(other.index_),
      matcher_(other.matcher_),
      ended_(other.ended_),
      generated_(other.generated_) {}

TokenConstraint& TokenConstraint::operator=(const TokenConstraint& other) {
    schema_ = other.schema_;
    index_ = other.index_;
    matcher_ = other.matcher_;
    ended_ = other.ended_;
    generated_ = other.generated_;
    return *this;
}

void TokenConstraint::walk(uint32_t trie_node, const std::vector<GrammarStack>& stacks, uint32_t depth,
                           std::vector<int32_t>& allowed) const {
    const Grammar& g = schema_->grammar;
    const TokenIndex& ix = *index_;
    const TokenIndex::Node& n = ix.node(trie_node);
    for (uint32_t e = n.edge_begin; e < n.edge_end; ++e) {
        std::vector<GrammarStack>& next = scratch_[depth];
        next.clear();
        uint8_t byte = ix.edge_byte(e);
        for (const GrammarStack& s : stacks) g.step(s, byte, next);
        if (next.empty()) continue;
        uint32_t child = ix.edge_child(e);
        const TokenIndex::Node& c = ix.node(child);
        allowed.insert(allowed.end(), ix.tokens_at(c), ix.tokens_at(c) + (c.token_end - c.token_begin));
        if (c.edge_begin == c.edge_end) continue;
        dedupe_stacks(next);
        walk(child, next, depth + 1, allowed);
    }
}

const std::vector<int32_t>& TokenConstraint::memo_walk(const void* tag, const std::vector<uint32_t>& starts,
                                                       const std::vector<GrammarStack>& stacks) const {
    // The allowed set is a function of (vocabulary, start nodes, stacks): memoise it in the schema, so a
    // state is walked once per process rather than once per step per sequence.
    constexpr size_t kMemoLimit = 200000;
    key_.clear();
    uint64_t index_id = index_->id();
    key_.append(reinterpret_cast<const char*>(&index_id), sizeof index_id);
    key_.append(reinterpret_cast<const char*>(&tag), sizeof tag);
    for (const GrammarStack& s : stacks) {
        uint32_t depth = s.depth();
        key_.append(reinterpret_cast<const char*>(&depth), sizeof depth);
        for (uint32_t i = 0; i < depth; ++i)
            key_.append(reinterpret_cast<const char*>(&s.at(i)), sizeof(Frame));
    }
    {
        std::shared_lock<std::shared_mutex> lock(schema_->memo_mutex);
        auto it = schema_->token_memo.find(key_);
        if (it != schema_->token_memo.end()) {
            last_ = it->second;
            return *last_;
        }
    }
    auto allowed = std::make_shared<std::vector<int32_t>>();
    for (uint32_t start : starts) walk(start, stacks, 0, *allowed);
    std::unique_lock<std::shared_mutex> lock(schema_->memo_mutex);
    if (schema_->token_memo.size() >= kMemoLimit) {  // e.g. unbounded integers: too many states to keep
        uncached_ = std::move(*allowed);
        return uncached_;
    }
    last_ = schema_->token_memo.emplace(key_, std::move(allowed)).first->second;
    return *last_;
}

void TokenConstraint::fill_allowed(uint32_t* mask) const {
    const TokenIndex& ix = *index_;
    std::fill(mask, mask + ix.mask_words(), 0u);
    if (ended_) return;
    const Grammar& g = schema_->grammar;
    // One scratch level per trie depth, sized up front: walk() holds references into it while recursing.
    if (scratch_.size() < ix.max_token_bytes() + 1) scratch_.resize(ix.max_token_bytes() + 1);
    static const std::vector<uint32_t> kRoot = {0};
    std::vector<GrammarStack> single(1), parents;
    for (const GrammarStack& s : matcher_.stacks()) {
        if (s.empty()) continue;
        const Frame& top = s.top();
        const GrammarNode& node = g.nodes[top.node];
        if (node.kind == GrammarNodeKind::kString && top.a != kStrBeforeOpen) {
            const TokenIndex::StringEntry& entry = ix.string_entry(top, node.min_length, node.max_length);
            for (size_t w = 0; w < entry.mask.size(); ++w) mask[w] |= entry.mask[w];
            if (entry.exits.empty()) continue;
            parents.clear();
            g.finish_top(s, parents);  // the enclosing value right after the closing quote
            for (int32_t t : memo_walk(&entry, entry.exits, parents)) set_bit(mask, t);
        } else {
            single[0] = s;
            for (int32_t t : memo_walk(nullptr, kRoot, single)) set_bit(mask, t);
        }
    }
    if (matcher_.can_end()) {
        for (int32_t id : ix.end_ids()) set_bit(mask, id);
    }
}

bool TokenConstraint::try_accept(int32_t token) {
    if (ended_ || token < 0 || token >= index_->vocab_size()) return false;
    if (index_->is_end(token)) {
        if (!matcher_.can_end()) return false;
        ended_ = true;
        return true;
    }
    if (!index_->is_usable(token)) return false;
    const std::string& bytes = index_->token_bytes(token);
    if (!matcher_.accept_bytes(bytes)) return false;
    generated_ += bytes;
    return true;
}

void TokenConstraint::accept(int32_t token) {
    if (try_accept(token)) return;
    std::string what = token >= 0 && token < index_->vocab_size()
                           ? cat("\"", printable(index_->token_bytes(token)), "\"")
                           : "(outside the vocabulary)";
    throw Error(ErrorKind::kInvalidArgument, "structured output: token " + std::to_string(token) + " " +
                                                 what + " is not allowed by the JSON schema after \"" +
                                                 printable(generated_) + "\"" +
                                                 (ended_ ? " (the sequence already ended)" : ""));
}

bool TokenConstraint::can_end() const {
    return !ended_ && matcher_.can_end();
}

bool TokenConstraint::is_complete() const {
    return ended_ || matcher_.is_complete();
}

// -------------------------------------------------------------------------------------------- masks

void apply_token_bitmask(float* logits, const uint32_t* mask, int32_t vocab_size) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const int32_t full_words = vocab_size / 32;
    for (int32_t w = 0; w < full_words; ++w) {
        uint32_t bits = mask[w];
        if (bits == 0xFFFFFFFFu) continue;
        float* row = logits + static_cast<size_t>(w) * 32;
        if (bits == 0) {
            std::fill(row, row + 32, neg_inf);
            continue;
        }
        // Visit only the cleared bits: masks are mostly all-allowed (inside strings) or all-denied words.
        for (uint32_t zeros = ~bits; zeros != 0; zeros &= zeros - 1) row[__builtin_ctz(zeros)] = neg_inf;
    }
    for (int32_t i = full_words * 32; i < vocab_size; ++i) {
        if (!(mask[i >> 5] >> (i & 31) & 1u)) logits[i] = neg_inf;
    }
}

void apply_token_bitmask_batch(float* logits, size_t logits_stride, const uint32_t* masks, size_t mask_words,
                               int32_t batch, int32_t vocab_size) {
    for (int32_t b = 0; b < batch; ++b) {
        apply_token_bitmask(logits + b * logits_stride, masks + b * mask_words, vocab_size);
    }
}

// ---------------------------------------------------------------------------- synthetic vocabulary

namespace {

// Common words of web-agent replies, JSON punctuation pieces, UTF-8 characters and syllables: the pieces
// synthetic_byte_vocabulary builds its tokens from.
const char* const kWords[] = {
    "the",     "of",      "and",       "to",     "in",     "is",    "for",        "on",      "that",
    "with",    "click",   "write",     "scroll", "goto",   "back",  "refresh",    "wait",    "answer",
    "element", "content", "button",    "search", "page",   "link",  "the search", "result",  "first",
    "next",    "login",   "cart",      "price",  "flight", "hotel", "I",          "need",    "should",
    "will",    "now",     "then",      "find",   "open",   "type",  "into",       "field",   "box",
    "menu",    "top",     "bottom",    "left",   "right",  "up",    "down",       "thought", "note",
    "action",  "url",     "http",      "https",  "://",    "www",   ".com",       ".org",    "x",
    "y",       "seconds", "direction", "task",   "done",
};
const char* const kPunct[] = {
    "\":\"",
    "\",\"",
    "\"},{\"",
    "\":{\"",
    "\"}",
    "\"]",
    "\":[",
    "},{",
    "{\"",
    "\"}}",
    "\":",
    "\",",
    "\"}]",
    "],\"",
    "},\"",
    "\":[{\"",
    "{}",
    "[]",
    ",\"",
    ":\"",
    "\"\"",
    "\\\"",
    "\\n",
    "\\\\",
    "\\u00",
    "\\u",
    "\\ud83d",
    "\\ude00",
    ".\"",
    ",\"",
    "?\"",
    "!\"",
    ")\"",
    "\".",
    "\")",
    ".\",\"",
    "\":\"click",
    "\":\"write",
    "\":\"scroll",
    "\":\"answer",
    "{\"thought\":\"",
    "\",\"note\":\"",
    "\",\"action\":{\"type\":\"",
    "\"x\":",
    "\"y\":",
    ",\"y\":",
    "{\"x\":",
    "}}",
    "]}",
    "\n",
    "  ",
    "\t",
    " \"",
    "\" ",
    "true",
    "false",
    "null",
    ":true",
    ":false",
    ":null",
    "-1",
    "0.",
    ".5",
};
const char* const kUtf8[] = {"é", "ü", "ñ",    "ß", "中", "文", "日本", "語",
                             "€", "😀", "🙂", "→", "ç",  "ö",  "å"};
const char* const kSyllables[] = {
    "ba", "be", "bi", "bo", "ca",  "ce",   "co", "da",  "de", "di",   "do",   "fa",  "fe", "ga",
    "ge", "ha", "he", "hi", "ing", "tion", "er", "est", "ly", "ment", "ness", "pre", "re", "un",
    "ka", "la", "le", "li", "lo",  "ma",   "me", "mi",  "mo", "na",   "ne",   "ni",  "no", "pa",
    "pe", "pi", "po", "ra", "ri",  "ro",   "sa", "se",  "si", "so",   "ta",   "te",  "ti", "to",
    "va", "ve", "vi", "wa", "we",  "xa",   "ya", "za",  "ze", "qu",   "st",   "th",  "sh"};

// Tokens in order, each once, up to size − 1 (the last id is the end token).
struct VocabBuilder {
    int32_t size;
    std::vector<std::string> tokens;
    std::unordered_set<std::string> seen;
    bool full() const { return static_cast<int32_t>(tokens.size()) >= size - 1; }
    void add(const std::string& t) {
        if (!full() && !t.empty() && seen.insert(t).second) tokens.push_back(t);
    }
};

// Each word bare, after a space, capitalised, and touching JSON quotes, commas or a period.
void add_words(VocabBuilder& v) {
    for (const char* w : kWords) {
        std::string s(w);
        v.add(s);
        v.add(cat(" ", s));
        std::string cap = s;
        cap[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(cap[0])));
        v.add(cap);
        v.add(cat(" ", cap));
        v.add(cat(s, "\""));
        v.add(cat(s, "\","));
        v.add(cat("\"", s));
        v.add(cat("\"", s, "\":"));
        v.add(cat(s, "."));
    }
}

void add_numbers(VocabBuilder& v) {
    for (int i = 0; i < 1000; ++i) v.add(std::to_string(i));
    for (int i = 0; i < 100; ++i) v.add(cat(i < 10 ? "0" : "", std::to_string(i)));
    for (int i = 0; i < 100; ++i) v.add(cat(":", std::to_string(i)));
    for (int i = 0; i < 100; ++i) v.add(cat(std::to_string(i), ","));
    for (int i = 0; i < 100; ++i) v.add(cat(std::to_string(i), "}"));
}

// UTF-8: whole characters, and pieces that split a character (a token boundary inside a code point).
void add_utf8(VocabBuilder& v) {
    for (const char* u : kUtf8) {
        std::string s(u);
        v.add(s);
        v.add(cat(" ", s));
        for (size_t cut = 1; cut < s.size(); ++cut) {
            v.add(s.substr(0, cut));
            v.add(s.substr(cut));
            v.add(cat("a", s.substr(0, cut)));
            v.add(cat(s.substr(cut), "b"));
        }
    }
}

// Pseudo-words from syllables fill the rest (realistic lengths, shared prefixes, leading spaces), in roughly
// the mix of a real BPE vocabulary: half with a leading space, few touching a quote.
void add_pseudo_words(VocabBuilder& v, uint64_t seed) {
    const int n_syll = static_cast<int>(std::size(kSyllables));
    std::mt19937_64 rng(seed);
    while (!v.full()) {
        int parts = 1 + static_cast<int>(rng() % 4);
        std::string w;
        for (int i = 0; i < parts; ++i) w += kSyllables[rng() % n_syll];
        uint64_t style = rng() % 50;
        if (style < 25)
            w = cat(" ", w);
        else if (style < 30)
            w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));
        else if (style == 30)
            w.push_back('"');
        else if (style == 31)
            w = cat("\"", w);
        else if (style == 32)
            w = cat(w, "\",");
        v.add(w);
    }
}

}  // namespace

TokenVocabulary synthetic_byte_vocabulary(int32_t size, uint64_t seed) {
    SURF_CHECK(size > 300, "synthetic vocabulary too small", size);
    VocabBuilder v{size, {}, {}};
    for (int b = 0; b < 256; ++b) v.add(std::string(1, static_cast<char>(b)));
    add_words(v);
    for (const char* p : kPunct) v.add(p);
    add_numbers(v);
    add_utf8(v);
    add_pseudo_words(v, seed);
    TokenVocabulary vocab;
    vocab.token_bytes = std::move(v.tokens);
    vocab.token_bytes.push_back("");  // end token
    vocab.end_ids.push_back(size - 1);
    return vocab;
}

}  // namespace surf::model
