#include "model/engine_input.h"

#include <cstring>

#include "base/error.h"

namespace surf::model {

std::vector<uint32_t> output_token_mask(int64_t vocab, const ImageTokenIds& ids) {
    std::vector<uint32_t> mask(static_cast<size_t>((vocab + 31) / 32), ~0u);
    if (vocab % 32) mask.back() = (1u << (vocab % 32)) - 1;
    for (int32_t id : {ids.context, ids.start, ids.end}) {
        if (id >= 0 && id < vocab) mask[static_cast<size_t>(id) / 32] &= ~(1u << (id % 32));
    }
    return mask;
}

ImageTokenIds resolve_image_tokens(const ModelConfig& cfg, const Tokenizer* tokenizer) {
    ImageTokenIds ids;
    if (!cfg.has_vision) return ids;
    auto resolve = [&](const std::string& text, int64_t config_id) -> int32_t {
        if (tokenizer) {
            if (auto id = tokenizer->token_id(text)) return *id;
        }
        if (config_id >= 0) return static_cast<int32_t>(config_id);
        throw Error(ErrorKind::kFormat, cfg.dir + ": no token id for '" + text + "' (needed for images)");
    };
    ids.context = resolve(cfg.image_context_token, cfg.image_context_token_id);
    ids.start = resolve(cfg.image_start_token, cfg.image_start_token_id);
    ids.end = resolve(cfg.image_end_token, cfg.image_end_token_id);
    return ids;
}

// The image cache's key (GpuModel's arena matches on it alone): a 64-bit hash of `bytes`, 8-byte words into
// four independent lanes (each step x ← (x ^ word)·K, x ^= x >> 29 is a bijection of the lane for a given
// word, so inputs that differ in one word never meet in that lane), the tail bytewise, the lanes folded
// together at the end. Many times faster than bytewise FNV-1a, whose one dependent multiply a byte bounds it
// (docs/BENCHMARKS.md).
uint64_t content_hash(const void* data, size_t bytes, uint64_t seed) {
    constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio (odd)
    uint64_t lane[4] = {seed ^ 0x243F6A8885A308D3ull, seed ^ 0x13198A2E03707344ull,
                        seed ^ 0xA4093822299F31D0ull,
                        seed ^ 0x082EFA98EC4E6C89ull};  // hexadecimal digits of π
    const auto* p = static_cast<const uint8_t*>(data);
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32) {
        for (int l = 0; l < 4; ++l) {
            uint64_t word;
            std::memcpy(&word, p + i + 8 * l, 8);
            lane[l] = (lane[l] ^ word) * kMul;
            lane[l] ^= lane[l] >> 29;
        }
    }
    uint64_t h = static_cast<uint64_t>(bytes) * kMul;
    for (uint64_t x : lane) {
        h = (h ^ x) * kMul;
        h ^= h >> 31;
    }
    for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001B3ull;  // FNV prime
    h ^= h >> 33;
    return h * kMul ^ (h >> 29);
}

PreparedInput prepare_input(const std::vector<InputPart>& parts, const ModelConfig& cfg,
                            const Tokenizer* tokenizer, const ImageTokenIds& ids,
                            const TilingConfig& tiling) {
    PreparedInput out;
    const int64_t vocab = cfg.llm.vocab_size;
    for (const InputPart& part : parts) {
        if (part.image) {
            if (!cfg.has_vision)
                throw Error(ErrorKind::kUnsupported,
                            cfg.dir + ": this model has no vision tower; cannot take an image");
            PreparedImage img;
            img.tiles = tile_image(*part.image, tiling);
            img.n_rows = img.tiles.plan.n_tiles * cfg.image.tokens_per_tile();
            img.hash = content_hash(img.tiles.pixels.data(), img.tiles.pixels.size() * sizeof(float),
                                    static_cast<uint64_t>(img.n_rows));
            out.tokens.push_back(ids.start);
            img.first_token = static_cast<int64_t>(out.tokens.size());
            out.tokens.insert(out.tokens.end(), static_cast<size_t>(img.n_rows), ids.context);
            out.tokens.push_back(ids.end);
            out.image_tokens += img.n_rows;
            out.images.push_back(std::move(img));
            continue;
        }
        std::vector<int32_t> part_ids;
        if (!part.token_ids.empty()) {
            part_ids = part.token_ids;
        } else if (!part.text.empty()) {
            if (!tokenizer)
                throw Error(ErrorKind::kUnsupported,
                            "this engine has no tokenizer: pass token ids instead of text");
            part_ids = tokenizer->encode(part.text, /*parse_special=*/true);
        }
        for (int32_t t : part_ids) {
            if (t < 0 || t >= vocab)
                throw Error(ErrorKind::kInvalidArgument, "token id " + std::to_string(t) +
                                                             " is outside the vocabulary of " +
                                                             std::to_string(vocab));
            if (t == ids.context && ids.context >= 0) {
                throw Error(ErrorKind::kInvalidArgument, "input contains the image-context token " +
                                                             cfg.image_context_token +
                                                             "; pass images as image parts");
            }
        }
        out.tokens.insert(out.tokens.end(), part_ids.begin(), part_ids.end());
    }
    return out;
}

}  // namespace surf::model
