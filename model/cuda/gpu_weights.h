// The checkpoint on the GPU: matrices in bf16, per-channel vectors (norm weights, conv weights and bias,
// A, D, dt_bias, biases) in fp32 (kernels/cuda/ops.h conventions). Filled from the same weight table
// as the CPU backend (model/checkpoint/weights.h), or with random values drawn from a config for benchmarks.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/ops.h"
#include "model/checkpoint/config.h"
#include "model/checkpoint/quant_config.h"
#include "model/checkpoint/safetensors.h"
#include "model/cuda/device_buffer.h"

namespace surf::model::cuda {

using bf16 = surf::kernels::cuda::bf16;

// A matrix [out, in] in bf16, or (a language-model linear layer with Quantize::kFp8 or from an FP8
// checkpoint) in E4M3 codes with one fp32 scale per output row. An FP8 matrix's rows come in parts (q, k, v
// stacked into qkv; one part otherwise), each with its activation scheme: a static per-tensor input scale
// (ModelOpt) or 0, dynamic per token.
struct GpuMatrix {
    DeviceBuffer buf;  // [rows, cols] bf16, or E4M3 codes when fp8
    int64_t rows = 0, cols = 0;
    bool fp8 = false;
    DeviceBuffer w_scale;  // [rows] fp32 (FP8)
    struct Part {
        int64_t rows = 0;
        float input_scale = 0.0f;
    };
    std::vector<Part> parts;  // FP8: row blocks in order, covering every row
    const bf16* ptr() const { return buf.as<bf16>(); }
    const uint8_t* codes() const { return buf.as<uint8_t>(); }
    const float* scales() const { return w_scale.as<float>(); }
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
// values filled in (vocabulary rows, prefix rows). The language-model linear layers (WeightSpec::lm_linear)
// of an FP8 checkpoint keep their E4M3 codes and scales; Quantize::kFp8 quantizes those of a bf16/fp32
// checkpoint on the GPU per output channel (dynamic per-token activations), and is kInvalidArgument on a
// checkpoint that is already quantized. The lm_head, embeddings and vision tower stay bf16, as on the CPU.
GpuWeights upload_weights(ModelConfig& cfg, const Checkpoint& ckpt, cudaStream_t stream,
                          Quantize quantize = Quantize::kNone);

// Random weights drawn on the GPU from the config (benchmarks: no 26 GB file to move). Scales keep
// activations bounded: matrices ~ U(±1/sqrt(in)), norms ≈ 1, A_log = log(U(1,16)), dt_bias so that dt ≈
// 0.01–0.1. Quantize::kFp8: the language-model linear layers drawn in bf16, then quantized on the GPU.
GpuWeights random_weights(const ModelConfig& cfg, uint64_t seed, cudaStream_t stream,
                          Quantize quantize = Quantize::kNone);

// The vision tower's qkv, fc1 and fc2 of every block quantized to E4M3 on the device, per output channel, for
// dynamic per-token activations (GpuLimits::vit_fp8); proj (1,280 × 1,280 in C-RADIO) stays bf16: at k =
// n = width its FP8 GEMM plus the activations' quantization is no faster (docs/BENCHMARKS.md, bench_gemm). A
// layer whose input features are not a multiple of 16 stays bf16 too.
void quantize_vision(GpuWeights& w, cudaStream_t stream);

// Whether any language-model matrix is FP8, and the widest input (cols) of those that are (the activation
// buffer's row).
bool has_fp8(const GpuWeights& w);
int64_t fp8_max_cols(const GpuWeights& w);

}  // namespace surf::model::cuda
