// Conversation reuse for `surf serve` (docs/SERVE.md): an agent behind the OpenAI API re-sends its whole
// conversation on every call. The cache keeps engine sessions whose state is exactly "after this prompt
// prefix" and hands the next request a fork of the longest one its own prompt extends, so only the new tail
// is prefilled. Prefixes are compared as the engine sees them — token ids of the text (tokenized as the
// engine does it) and each image's content hash — never as text (BPE merges differently at a seam). Sessions
// are evicted least recently used first; the engine offloads idle ones to host memory as the GPU fills.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "model/engine.h"

namespace surf::serve {

// A prompt as units: a text token id (≥ 0), or an image (its key < 0, derived from its pixels' hash).
struct PromptUnits {
    std::vector<int64_t> keys;
    std::vector<std::shared_ptr<const model::Image>> images;  // per unit; null for tokens

    size_t size() const { return keys.size(); }
    // Units [begin, end) as engine input parts: runs of token ids and images, in order.
    std::vector<model::InputPart> parts(size_t begin, size_t end) const;
};

// Splits `parts` (text and image parts, as interleave_images makes them) into units, tokenizing text as the
// engine's prepare_input does (special tokens parsed).
PromptUnits prompt_units(const std::vector<model::InputPart>& parts, const model::Tokenizer& tokenizer);

class PrefixCache {
public:
    // At most `capacity` sessions are kept (each holds a Mamba state and its KV pages); 0 disables the cache.
    PrefixCache(model::Engine& engine, size_t capacity) : engine_(engine), capacity_(capacity) {}
    ~PrefixCache();
    PrefixCache(const PrefixCache&) = delete;
    PrefixCache& operator=(const PrefixCache&) = delete;

    struct Hit {
        model::SessionId session = 0;  // a fresh fork, the caller's to close
        size_t units = 0;              // prompt units it already holds
        int64_t engine_tokens = 0;     // the engine's tokens for them (images count their rows)
    };
    // A fork of the longest cached prefix of `prompt` no longer than `max_units` units, or nullopt.
    std::optional<Hit> fork_longest_prefix(const PromptUnits& prompt, size_t max_units);
    // Keeps a fork of `session` (whose state is exactly after prompt units [0, units)) for later requests,
    // replacing an entry with the same prefix and evicting the least recently used beyond capacity.
    void insert(const PromptUnits& prompt, size_t units, int64_t engine_tokens, model::SessionId session);

    size_t size() const;
    int64_t hits() const { return hits_.load(); }
    int64_t hit_tokens() const { return hit_tokens_.load(); }

private:
    struct Entry {
        std::vector<int64_t> keys;
        model::SessionId session = 0;
        int64_t engine_tokens = 0;
        uint64_t last_used = 0;
    };
    model::Engine& engine_;
    size_t capacity_;
    mutable std::mutex
        mu_;  // held while forking an entry, so that eviction never closes a session being forked
    std::vector<Entry> entries_;
    uint64_t clock_ = 0;
    std::atomic<int64_t> hits_{0}, hit_tokens_{0};
};

}  // namespace surf::serve
