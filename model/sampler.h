// Token sampling: greedy, temperature, top-k, top-p, with a per-sequence seed and an optional
// allowed-token bitmask (structured outputs). Randomness is counter-based (seed, step) so a sequence's
// draws do not depend on batching and the CUDA sampler can reproduce them.
#pragma once

#include <cstdint>
#include <vector>

namespace surf::model {

struct SamplingParams {
    float temperature = 0.0f;  // 0 = greedy
    int32_t top_k = 0;         // 0 = off
    float top_p = 1.0f;        // 1 = off
    uint64_t seed = 0;
};

// Validates ranges; throws surf::Error(kInvalidArgument) naming the field.
void validate(const SamplingParams& params);

// Picks a token from logits [vocab]. `allowed` (vocab bits, bit i of word i/32) restricts the choice;
// when it allows nothing the result is -1. `step` indexes the draw for the seed.
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t step,
                     const uint32_t* allowed = nullptr);

}  // namespace surf::model
