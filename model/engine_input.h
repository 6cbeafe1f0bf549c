// Turning a call's input parts into what a backend consumes: token ids with image-context placeholders,
// and each image tiled (on the caller's thread, so tiling runs in parallel across callers) with the
// position of its first image-context token and a content hash for the image-embedding cache.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/checkpoint/config.h"
#include "model/engine.h"
#include "model/text/tokenizer.h"
#include "model/vision/image_tiling.h"

namespace surf::model {

struct ImageTokenIds {
    int32_t context = -1, start = -1, end = -1;  // <image>, <img>, </img>
};

// Resolves the image token ids from the tokenizer (or the config's id); throws kFormat when missing.
ImageTokenIds resolve_image_tokens(const ModelConfig& cfg, const Tokenizer* tokenizer);

// The tokens a model may generate, as a bit mask of ⌈vocab/32⌉ words: every id except the image
// placeholders, which only image parts may put in a sequence (a sampled <image> fed back as text would
// pull in image rows that do not exist).
std::vector<uint32_t> output_token_mask(int64_t vocab, const ImageTokenIds& ids);

// A 64-bit hash of `bytes` from `seed`, four independent word lanes: the key of the engine's image cache and
// of surf serve's conversation reuse, which match on it alone.
uint64_t content_hash(const void* data, size_t bytes, uint64_t seed);

struct PreparedImage {
    TiledImage tiles;         // [n_tiles, 3, S, S] normalised
    uint64_t hash = 0;        // of the tiled pixels (image-embedding cache key)
    int64_t first_token = 0;  // index in PreparedInput::tokens of its first image-context token
    int64_t n_rows = 0;       // image-context tokens = projector rows
};

struct PreparedInput {
    std::vector<int32_t> tokens;
    std::vector<PreparedImage> images;
    int64_t image_tokens = 0;
};

// Tokenizes text parts (special tokens parsed), checks raw ids against the vocabulary, tiles images.
// A text part may not contain the image-context token itself. Throws surf::Error naming the problem.
PreparedInput prepare_input(const std::vector<InputPart>& parts, const ModelConfig& cfg,
                            const Tokenizer* tokenizer, const ImageTokenIds& ids, const TilingConfig& tiling);

}  // namespace surf::model
