// The checkpoint on the GPU: matrices in bf16, per-channel vectors (norm weights, conv weights and bias,
// A, D, dt_bias, biases) in fp32 (kernels/cuda/ops.h conventions). Filled from the same weight table
// as the CPU backend (model/checkpoint/weights.h), or with random values drawn from a config for benchmarks.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/ops.h"
#include "model/checkpoint/config.h"
#include "model/checkpoint/safetensors.h"
#include "model/cuda/device_buffer.h"

namespace surf::model::cuda {

using bf16 = surf::kernels::cuda::bf16;

struct GpuMatrix {
    DeviceBuffer buf;
    int64_t rows = 0, cols = 0;  // [out, in]
    const bf16* ptr() const { return buf.as<bf16>(); }
};
struct GpuVector {
    DeviceBuffer buf;
    int64_t n = 0;
    const float* ptr() const { return buf.as<float>(); }
};

struct GpuLayer {
    LayerKind kind = LayerKind::kMlp;
    GpuVector norm;
    // Mamba-2
    GpuMatrix in_proj, out_proj;
    GpuVector conv_w, conv_b, dt_bias, A, D, gated_norm;
    // attention: q, k, v fused into one [q_dim + 2·kv_dim, d_model] matrix
    GpuMatrix qkv, o;
    // MLP
    GpuMatrix up, down;
};

struct GpuVitBlock {
    GpuVector norm1_w, norm1_b, norm2_w, norm2_b, proj_b,
        fc2_b;                  // fp32 (biases of GEMMs into the fp32 residual)
    DeviceBuffer qkv_b, fc1_b;  // bf16 (biases of GEMMs with bf16 output)
    GpuMatrix qkv, proj, fc1, fc2;
};

struct GpuWeights {
    GpuMatrix embeddings, lm_head;
    std::vector<GpuLayer> layers;
    GpuVector norm_f;
    // vision
    GpuMatrix patch_embed;
    DeviceBuffer tile_pos;  // [side², width] bf16: CPE resized once
    DeviceBuffer prefix;    // [n_prefix, width] bf16
    int64_t n_prefix = 0;
    std::vector<GpuVitBlock> vit;
    GpuVector proj_norm;
    GpuMatrix proj_fc1, proj_fc2;
    int64_t bytes = 0;  // device bytes held
};

// Uploads a checkpoint (after the same shape checks as the CPU loader). `cfg` gets its shape-derived
// values filled in (vocabulary rows, prefix rows). An FP8 checkpoint is kUnsupported.
GpuWeights upload_weights(ModelConfig& cfg, const Checkpoint& ckpt, cudaStream_t stream);

// Random weights drawn on the GPU from the config (benchmarks: no 26 GB file to move). Scales keep
// activations bounded: matrices ~ U(±1/sqrt(in)), norms ≈ 1, A_log = log(U(1,16)), dt_bias so that dt ≈
// 0.01–0.1.
GpuWeights random_weights(const ModelConfig& cfg, uint64_t seed, cudaStream_t stream);

}  // namespace surf::model::cuda
