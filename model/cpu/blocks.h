// The CPU backend's blocks, one file each (DESIGN.md rule 5). Each reads like the equations of
// spec/holotron.md and is built from the reference kernels in kernels/cpu.
#pragma once

#include <cstdint>
#include <vector>

#include "model/checkpoint/config.h"
#include "model/checkpoint/tensor.h"
#include "model/checkpoint/weights.h"

namespace surf::model::cpu {

// Recurrent state of one Mamba-2 layer for one sequence.
struct MambaState {
    Tensor conv;  // [conv_dim, K-1] the last K-1 pre-conv xBC inputs, oldest first
    Tensor ssm;   // [H, P, N] fp32
};

// Attention KV of one layer for one sequence, growing by appended tokens.
struct KvCache {
    std::vector<float> k;  // [n_tokens, n_kv_heads, head_dim]
    std::vector<float> v;  // [n_tokens, n_kv_heads, head_dim]
};

// y [rows, out] = x [rows, in] · Wᵀ: the fp32 GEMM, or for an FP8 layer the E4M3 GEMM of kernels/cpu/fp8.h
// (activations quantized per token or with the static input scale, fp32 accumulation, then rescaled).
void project(const LinearWeight& w, const float* x, int64_t rows, float* y);

// out [T, d_model] = Mamba2Mixer(x [T, d_model]) continuing `state` (spec §1.5, §2).
void mamba2_mixer(const LlmConfig& cfg, const MambaWeights& w, const float* x, int64_t T, MambaState& state,
                  float* out);

// out [T, d_model] = Attention(x [T, d_model]) with the new tokens appended to `cache` (spec §1.4).
void attention_mixer(const LlmConfig& cfg, const AttentionWeights& w, const float* x, int64_t T,
                     KvCache& cache, float* out);

// out [T, d_model] = down(relu(up(x))²) (spec §1.3).
void mlp_mixer(const LlmConfig& cfg, const MlpWeights& w, const float* x, int64_t T, float* out);

}  // namespace surf::model::cpu
