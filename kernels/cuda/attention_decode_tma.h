// The TMA decode attention kernel's host side (attention_decode_tma.cu), called by attention_decode
// (attention_decode.cu) when AttentionDecodeParams::tma asks for it and the shapes allow it.
#pragma once

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace surf::kernels::cuda::flash {

// Split-KV plan of the TMA kernel: `splits` partitions of `part` keys (a multiple of 64) per (sequence, kv
// head), `items` = batch · kv heads · splits work items over `grid` persistent blocks.
struct DecodeTmaPlan {
    int splits;
    int64_t part;
    int items, grid;
};

// Whether p asks for the TMA kernel and it can run: head_dim 128, page_size a multiple of 16, cache_pages
// given, 16-byte aligned caches, GQA group ≤ 16, a compute capability 9.0 device.
bool decode_tma_usable(const AttentionDecodeParams& p);
DecodeTmaPlan plan_decode_tma(const AttentionDecodeParams& p);
// Partial results (splits > 1) go to ws_o / ws_lse in attention_decode's layout; the caller runs the combine.
void launch_decode_tma(const AttentionDecodeParams& p, float scale_log2, int64_t q_stride,
                       const DecodeTmaPlan& plan, float* ws_o, float* ws_lse, cudaStream_t stream);

}  // namespace surf::kernels::cuda::flash
