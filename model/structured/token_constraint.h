// Vocabulary-level constraint for JSON-schema-constrained decoding (docs/STRUCTURED_OUTPUT.md).
//
//   auto index  = TokenIndex::build(vocab);                 // once per vocabulary (immutable, shared)
//   auto schema = compile_json_schema_text(text);           // once per schema
//   (model/structured/json_schema.h) TokenConstraint c(schema, index);                       // one per
//   sequence loop: c.fill_allowed(mask); apply_token_bitmask(logits, mask, V); sample t; c.accept(t);
//         stop when t is an end id (accepted only if c.can_end()) or c.is_complete().
//
// The mask is computed by walking a byte trie of the vocabulary against the grammar state, pruning a
// subtree as soon as its prefix is rejected. Inside a free string (most decode steps of an agent's
// "thought"), the set of tokens that stay inside the string, or end exactly at its closing quote, does not
// depend on the rest of the grammar: it is computed once per string state and vocabulary, cached, and
// copied; only tokens running past the closing quote are checked against the enclosing value.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/structured/grammar.h"
#include "model/structured/json_schema.h"

namespace surf::model {

// What the constraint needs to know about a tokenizer, independent of its implementation.
struct TokenVocabulary {
    std::vector<std::string> token_bytes;  // [vocab_size] raw bytes of each token; empty = never generated
    std::vector<int32_t> end_ids;          // EOS ids: allowed only once the JSON value is complete
    std::vector<int32_t> unusable_ids;     // extra ids never to generate (special tokens with text)
};

// Per-vocabulary index: byte trie over all usable tokens plus a lazily filled, thread-safe cache of
// string-state masks. Build once per tokenizer; share between every schema and sequence.
class TokenIndex {
public:
    static std::shared_ptr<const TokenIndex> build(const TokenVocabulary& vocab);

    int32_t vocab_size() const { return vocab_size_; }
    size_t mask_words() const { return (static_cast<size_t>(vocab_size_) + 31) / 32; }
    const std::string& token_bytes(int32_t id) const { return token_bytes_[id]; }
    bool is_end(int32_t id) const;
    bool is_usable(int32_t id) const;  // has bytes, is not an end id and not flagged unusable
    const std::vector<int32_t>& end_ids() const { return end_ids_; }
    uint32_t max_token_bytes() const { return max_token_bytes_; }
    size_t trie_nodes() const { return nodes_.size(); }

    // Trie: node 0 is the root (empty prefix); a node's edges are contiguous, sorted by byte.
    struct Node {
        uint32_t edge_begin;
        uint32_t edge_end;
        uint32_t token_begin;  // tokens whose bytes end exactly here: tokens_[token_begin, token_end)
        uint32_t token_end;
    };
    const Node& node(uint32_t i) const { return nodes_[i]; }
    uint8_t edge_byte(uint32_t e) const { return edge_byte_[e]; }
    uint32_t edge_child(uint32_t e) const { return edge_child_[e]; }
    const int32_t* tokens_at(const Node& n) const { return tokens_.data() + n.token_begin; }

    // Cached mask of a string state (see the file comment). `exits` are the trie nodes just past a
    // closing quote that have children: tokens below them continue into the enclosing value.
    struct StringEntry {
        std::vector<uint32_t> mask;
        std::vector<uint32_t> exits;
    };
    // `frame` is a string frame strictly inside the string; min/max bound its length.
    const StringEntry& string_entry(const Frame& frame, uint32_t min_length, uint32_t max_length) const;
    size_t string_cache_size() const;
    uint64_t id() const { return id_; }  // unique per index in this process (memo keys)

private:
    TokenIndex() = default;
    void build_string_entry(StringEntry& entry, uint32_t node, Frame f, uint32_t min_length,
                            uint32_t max_length) const;

    uint64_t id_ = 0;
    int32_t vocab_size_ = 0;
    std::vector<std::string> token_bytes_;
    std::vector<int32_t> end_ids_;
    std::vector<uint8_t> usable_;
    uint32_t max_token_bytes_ = 0;
    std::vector<Node> nodes_;
    std::vector<uint8_t> edge_byte_;
    std::vector<uint32_t> edge_child_;
    std::vector<int32_t> tokens_;

    mutable std::shared_mutex cache_mutex_;
    mutable std::unordered_map<uint64_t, std::unique_ptr<StringEntry>> string_cache_;
};

// Per-sequence constraint state. Not thread-safe per instance (each sequence owns one); the schema and
// the index it points to are shared and immutable.
class TokenConstraint {
public:
    TokenConstraint(std::shared_ptr<const CompiledSchema> schema, std::shared_ptr<const TokenIndex> index);
    TokenConstraint(const TokenConstraint& other);
    TokenConstraint& operator=(const TokenConstraint& other);

    // Write vocab_size bits (index->mask_words() words): bit i set = token i may be sampled next.
    void fill_allowed(uint32_t* bitmask_words) const;
    // Advance by a sampled token; throws Error(kInvalidArgument) naming the token if it is not allowed
    // (the state is then unchanged).
    void accept(int32_t token);
    bool try_accept(int32_t token);  // same, returning false instead of throwing
    // The JSON value is complete: an end token may be sampled now.
    bool can_end() const;
    // Nothing but an end token may follow (or an end token was accepted).
    bool is_complete() const;
    bool ended() const { return ended_; }  // an end token was accepted
    // Cheap copy for forking a sequence (beam / parallel sampling).
    TokenConstraint clone() const { return *this; }

    const TokenIndex& index() const { return *index_; }
    const std::string& generated_bytes() const { return generated_; }

private:
    void walk(uint32_t trie_node, const std::vector<GrammarStack>& stacks, uint32_t depth,
              std::vector<int32_t>& allowed) const;
    // Allowed tokens for walking `stacks` from the trie nodes `starts` (memoised in the schema).
    const std::vector<int32_t>& memo_walk(const void* tag, const std::vector<uint32_t>& starts,
                                          const std::vector<GrammarStack>& stacks) const;

    std::shared_ptr<const CompiledSchema> schema_;
    std::shared_ptr<const TokenIndex> index_;
    ByteMatcher matcher_;
    bool ended_ = false;
    std::string generated_;
    mutable std::vector<std::vector<GrammarStack>> scratch_;    // per trie depth, reused across walks
    mutable std::string key_;                                   // memo key scratch
    mutable std::vector<int32_t> uncached_;                     // result when the memo is full
    mutable std::shared_ptr<const std::vector<int32_t>> last_;  // keeps the memo entry in use alive
};

// logits[i] = -inf where bit i of the mask is clear. The sampler calls this on the CPU backend.
void apply_token_bitmask(float* logits, const uint32_t* bitmask_words, int32_t vocab_size);
// Batched form: logits [batch, logits_stride] f32, masks [batch, mask_words] (rows without a constraint
// can pass an all-ones mask or be skipped by the caller).
void apply_token_bitmask_batch(float* logits, size_t logits_stride, const uint32_t* masks, size_t mask_words,
                               int32_t batch, int32_t vocab_size);

// Deterministic synthetic byte-level vocabulary for tests and benchmarks: the 256 single bytes, then
// English words with and without a leading space, JSON punctuation runs (`":"`, `"},{"`, ...), digit runs,
// whole and split UTF-8 characters, until `size` tokens. The last id is an end token with empty bytes.
TokenVocabulary synthetic_byte_vocabulary(int32_t size, uint64_t seed = 1);

}  // namespace surf::model
