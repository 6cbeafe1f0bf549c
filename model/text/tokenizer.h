// Hugging Face tokenizer.json (byte-level BPE) for the Holotron / Nemotron-H vocabulary (spec/holotron.md
// §6.3).
//
// Reproduces HF `tokenizers` exactly for the components Nemotron- and Mistral-family (Tekken-derived)
// tokenizers use: added/special tokens matched whole before anything else (single_word / lstrip / rstrip /
// normalized honoured), normalizers Prepend / Replace / Strip, pre-tokenizers Split (regex or string, every
// behaviour, invert) and ByteLevel, the BPE model (ignore_merges, byte_fallback, unk, merges as "a b" or
// [a, b]) and decoders ByteLevel / ByteFallback / Fuse / Strip / Replace. Anything else in the file is an
// error naming the component, never a silent approximation.
//
// Known gap: the regex engine (PCRE2 10.42) knows Unicode 14, HF's Oniguruma a later version, so the
// general category of characters assigned after Unicode 14 may differ. The post-processor (BOS/EOS
// insertion) is not applied: the VL prompt is tokenized without it (spec §6.1), callers add ids explicitly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace surf::model {

namespace tokenizer_detail {
struct TokenizerData;
}

class Tokenizer {
public:
    // path: a tokenizer.json file or a checkpoint folder holding one. Throws surf::Error naming the file and
    // the offending field (kIo, kFormat, kUnsupported).
    static Tokenizer load(const std::string& path);
    // The same from JSON text; source names it in error messages.
    static Tokenizer from_json(std::string_view json_text, const std::string& source);

    // HF encode(text, add_special_tokens=False). parse_special=false treats special tokens as plain text
    // (HF encode_special_tokens=True); non-special added tokens still match. Invalid UTF-8 in text is read
    // as U+FFFD (HF only accepts valid Unicode).
    std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
    // HF decode: unknown ids are dropped, invalid UTF-8 becomes U+FFFD.
    std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

    // The raw bytes a token stands for (byte-level mapping undone, <0xXX> fallback bytes resolved), possibly
    // an incomplete UTF-8 sequence. Empty for an unknown id.
    std::string token_bytes(int32_t id) const;
    // The token's string as stored in tokenizer.json (e.g. "Ġhello"); nullopt for an unknown id.
    std::optional<std::string> token_string(int32_t id) const;
    // One past the largest id (model vocabulary and added tokens).
    int32_t vocab_size() const;
    // Id of a token string as stored in tokenizer.json (added tokens first, like HF token_to_id).
    std::optional<int32_t> token_id(std::string_view token) const;
    bool is_special(int32_t id) const;

private:
    explicit Tokenizer(std::shared_ptr<const tokenizer_detail::TokenizerData> data)
        : data_(std::move(data)) {}
    // Immutable after load (the BPE word cache inside is internally locked), so copies share it and
    // concurrent encode/decode calls are safe.
    std::shared_ptr<const tokenizer_detail::TokenizerData> data_;
};

// Incremental detokenization for streamed generation: push() returns the text completed by this token and
// never a partial UTF-8 character (incomplete bytes wait for the next token). The concatenation of all
// push() results and flush() equals decode(all ids) for ByteLevel / ByteFallback+Fuse decoders.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false)
        : tokenizer_(&tokenizer), skip_special_(skip_special) {}
    std::string push(int32_t id);
    // Emits what is still held; bytes that never completed a character become U+FFFD.
    std::string flush();

private:
    const Tokenizer* tokenizer_;
    bool skip_special_;
    std::string pending_;  // bytes of an unfinished UTF-8 character
};

}  // namespace surf::model
