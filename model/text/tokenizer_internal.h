// Internals of model/tokenizer.* shared by tokenizer.cpp, tokenizer_text.cpp and tokenizer_bpe.cpp.
// Not part of the public API.
#pragma once

#include "base/utf8.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace surf::model::tokenizer_detail {

// ---- UTF-8 and Unicode helpers (tokenizer_text.cpp) ----

// Appends `bytes` to out as valid UTF-8, replacing each maximal invalid subpart with U+FFFD (Rust's
// String::from_utf8_lossy, which HF uses). With final_chunk=false an incomplete sequence at the end is
// not consumed. Returns the number of bytes consumed.
size_t append_utf8_lossy(std::string_view bytes, bool final_chunk, std::string& out);
bool is_valid_utf8(std::string_view bytes);
using surf::append_utf8;
// Decodes the code point at text[pos] (text is valid UTF-8); sets *len.
uint32_t decode_utf8(std::string_view text, size_t pos, size_t* len);
// Unicode White_Space (Rust char::is_whitespace, Oniguruma \s).
bool is_white_space(uint32_t cp);

// GPT-2 byte ↔ unicode table of HF's ByteLevel.
struct ByteLevelTable {
    std::string byte_to_utf8[256];                     // byte → its stand-in character, UTF-8 encoded
    std::unordered_map<uint32_t, uint8_t> cp_to_byte;  // stand-in code point → byte
};
const ByteLevelTable& byte_level_table();
// Undoes the byte-level mapping when every character of token is a stand-in (HF ByteLevel decoder).
std::optional<std::string> byte_level_decode(std::string_view token);

// PCRE2 (UTF + UCP, JIT) regex with Oniguruma-like \s. Immutable; matching is thread-safe.
class Regex {
public:
    // literal=true matches the pattern text verbatim (HF SplitPattern::String). where names the field.
    Regex(const std::string& pattern, bool literal, const std::string& where);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    // All matches, left to right, like onig's find_iter: [start, end) byte offsets.
    void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

private:
    void* code_ = nullptr;  // pcre2_code_8*
    bool jit_ = false;      // JIT compiled (falls back to the interpreter otherwise)
};

// ---- pipeline components ----

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct NormalizerStep {
    enum class Kind { kPrepend, kReplace, kStrip } kind;
    std::string text;                // Prepend text, Replace content
    std::shared_ptr<Regex> pattern;  // Replace pattern
    bool strip_left = false, strip_right = false;
};

struct PreTokenizerStep {
    enum class Kind { kSplit, kByteLevel } kind;
    std::shared_ptr<Regex> pattern;  // Split pattern; ByteLevel's GPT-2 regex when use_regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
};

struct DecoderStep {
    enum class Kind { kByteLevel, kByteFallback, kFuse, kStrip, kReplace } kind;
    explicit DecoderStep(Kind k) : kind(k) {}
    std::string pattern, content;  // Replace: pattern → content; Strip: content (one character)
    int start = 0, stop = 0;       // Strip counts
};

struct AddedToken {
    std::string content;
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Leftmost-longest multi-string matcher (HF uses Aho-Corasick with LeftmostLongest).
class TokenTrie {
public:
    void add(std::string_view text, int32_t value);
    bool empty() const { return nodes_.size() <= 1; }
    // Leftmost-longest match starting at or after from; false when none.
    bool find(std::string_view text, size_t from, size_t* start, size_t* end, int32_t* value) const;

private:
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
        int32_t value = -1;
    };
    std::vector<Node> nodes_{Node{}};
    bool first_byte_[256] = {};
};

// Byte-pair merges with the exact order of HF's Word::merge_all, plus a word cache.
class Bpe {
public:
    struct Options {
        std::optional<std::string> unk_token;
        std::string continuing_subword_prefix, end_of_word_suffix;
        bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
        bool byte_level = false;  // pieces are raw bytes mapped through the ByteLevel table
    };
    // vocab: token string → id; merges: pairs of token strings in rank order. where names the file.
    void build(const std::unordered_map<std::string, int32_t>& vocab,
               const std::vector<std::pair<std::string, std::string>>& merges, Options options,
               const std::string& where);
    void tokenize(std::string_view piece, std::vector<int32_t>& out) const;

private:
    struct MergeTable {  // open addressing: (left id, right id) → (rank, merged id)
        std::vector<uint64_t> keys;
        std::vector<std::pair<uint32_t, int32_t>> values;
        uint64_t mask = 0;
        void insert(uint64_t key, std::pair<uint32_t, int32_t> value);
        const std::pair<uint32_t, int32_t>* find(uint64_t key) const;
    };
    void initial_symbols(std::string_view piece, std::vector<int32_t>& symbols) const;
    void merge(std::vector<int32_t>& symbols) const;
    void merge_with_heap(std::vector<int32_t>& symbols) const;
    std::optional<int32_t> whole_word(std::string_view piece) const;

    Options options_;
    const std::unordered_map<std::string, int32_t>* vocab_ = nullptr;
    std::unordered_map<std::string, int32_t> raw_vocab_;  // byte_level: raw bytes → id
    MergeTable merges_;
    int32_t unk_id_ = -1;
    // byte_level: the symbols one input byte starts as (its stand-in's id, or byte-fallback ids);
    // byte_is_unk marks bytes that become <unk> (or vanish when there is none).
    std::vector<int32_t> byte_symbols_[256];
    bool byte_is_unk_[256] = {};

    // Word cache: open addressing over (hash, key, ids) kept in arenas; fills up to half its slots and
    // then stops growing (HF's cache also stops inserting when full).
    struct CacheSlot {
        uint64_t hash = 0;
        uint32_t key_offset = 0, ids_offset = 0;
        uint16_t key_len = 0, ids_len = 0;  // key_len 0: empty slot
    };
    mutable std::mutex cache_mutex_;
    mutable std::vector<CacheSlot> cache_slots_;
    mutable std::string cache_keys_;
    mutable std::vector<int32_t> cache_ids_;
    mutable size_t cache_used_ = 0;
};

struct TokenizerData {
    std::string source;  // file path, for messages

    std::unordered_map<std::string, int32_t> vocab;  // model vocabulary
    std::vector<std::string> model_tokens;           // id → model token ("" with has_model_token false)
    std::vector<uint8_t> has_model_token;
    Bpe bpe;

    std::unordered_map<int32_t, AddedToken> added_by_id;
    std::unordered_map<std::string, int32_t> added_by_content;
    std::unordered_map<int32_t, std::string> added_normalized;  // id → normalized content, when different
    std::unordered_set<std::string> special_contents;
    TokenTrie raw_trie, normalized_trie;  // added tokens matched before / after normalization
    bool has_single_word = false;

    std::vector<NormalizerStep> normalizers;
    std::vector<PreTokenizerStep> pre_tokenizers;
    bool has_decoder = false;
    std::vector<DecoderStep> decoders;
    int32_t vocab_size = 0;
    std::vector<uint8_t> special_by_id;
    // When the decoder is exactly ByteLevel: each id's bytes, so decode is a concatenation.
    std::vector<std::string> byte_level_bytes;

    // Pipeline pieces (tokenizer_text.cpp).
    std::string normalize(std::string_view text) const;
    // Splits text into pre-tokens; pieces may point into arena.
    void pre_tokenize(std::string_view text, std::vector<std::string_view>& pieces,
                      std::vector<std::unique_ptr<std::string>>& arena) const;
    std::optional<std::string> id_to_token(int32_t id) const;
    std::string run_decoders(std::vector<std::string> tokens) const;
};

// Word boundary test of HF's single_word added tokens (Rust regex \w on the neighbouring character).
bool is_word_char(uint32_t cp);

}  // namespace surf::model::tokenizer_detail
