// The weight table (DESIGN.md rule 6): every tensor of a Holotron checkpoint is declared once here with
// its name, expected shape and dtype, whether it is required and its role. An FP8 checkpoint's quantization
// config (ModelConfig::quant) decides which language-model linear weights the table expects in F8_E4M3 and
// adds their scale tensors. Loading on the CPU (load_weights) and
// the GPU (upload_weights), random weights for benchmarks, shape checks and the "missing / unexpected
// tensors" report of `surf inspect` all walk this one table; a backend binds each role to its storage.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/checkpoint/config.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/tensor.h"

namespace surf::model {

// What a tensor is to the engine. Roles inside a block come with the block's index (WeightSpec::layer).
enum class WeightRole {
    kIgnored,  // part of the checkpoint layout that the engine does not read
    kEmbeddings,
    kLayerNorm,
    kFinalNorm,
    kLmHead,  // absent when tied: the embeddings serve
    kMambaInProj,
    kMambaConvW,
    kMambaConvB,  // absent without conv_bias: zeros serve
    kMambaDtBias,
    kMambaALog,
    kMambaD,
    kMambaNorm,
    kMambaOutProj,
    kAttnQ,
    kAttnK,
    kAttnV,
    kAttnO,
    kMlpUp,
    kMlpDown,
    kPatchEmbed,
    kPosEmbed,
    kPrefix,  // cls + register tokens
    kVitNorm1W,
    kVitNorm1B,
    kVitQkvW,
    kVitQkvB,
    kVitProjW,
    kVitProjB,
    kVitNorm2W,
    kVitNorm2B,
    kVitFc1W,
    kVitFc1B,
    kVitFc2W,
    kVitFc2B,
    kProjNorm,     // mlp1.0
    kProjFc1,      // mlp1.1
    kProjFc2,      // mlp1.3
    kWeightScale,  // an FP8 linear weight's scale (WeightSpec::scales names the weight's role)
    kInputScale,   // an FP8 linear layer's static activation scale (ModelOpt)
};

// The dtypes a tensor may be stored in.
enum class WeightDType {
    kFloat,  // F32, F16 or BF16
    kE4M3,   // F8_E4M3 (a linear weight the quantization config quantizes)
    kAny,    // not read by the engine
};

struct WeightSpec {
    std::string name;            // full checkpoint name
    std::vector<int64_t> shape;  // expected shape; a dimension of -1 is read from the checkpoint; [] a scalar
                                 // (stored as [] or [1])
    bool required = true;
    WeightRole role = WeightRole::kIgnored;
    int64_t layer = -1;  // LLM layer or ViT block of a per-block role
    WeightDType dtype = WeightDType::kFloat;
    bool lm_linear = false;  // a language-model linear layer: FP8 on load or in the checkpoint
    WeightRole scales = WeightRole::kIgnored;  // kWeightScale / kInputScale: the role of the weight it scales
};

// Checkpoint name prefixes: the VL layout nests the LLM under "language_model.".
struct WeightPrefixes {
    std::string backbone;   // "language_model.backbone." or "backbone."
    std::string lm_head;    // full name of the lm_head weight
    std::string vision;     // "vision_model.radio_model."
    std::string projector;  // "mlp1."
};
WeightPrefixes weight_prefixes(const ModelConfig& cfg);

// Fills the shape-derived config values (vocabulary rows from the embeddings, prefix-token rows from
// cls_token.token), checks every tensor against the table, and throws kFormat listing the problems.
void validate_checkpoint(ModelConfig& cfg, const Checkpoint& ckpt);

// Calls fn for every tensor the config implies, in checkpoint order (LLM, vision, projector); q, k and v
// of an attention layer come in that order, one after the other (an FP8 checkpoint's scales follow each).
void for_each_weight(const ModelConfig& cfg, const std::function<void(const WeightSpec&)>& fn);

// The spec with every -1 dimension filled from the config, for weights made without a checkpoint:
// vocabulary rows, the ViT's position grid at its largest image, and n_prefix (or `default_prefix` when the
// config leaves it to the checkpoint).
WeightSpec resolved_from_config(const ModelConfig& cfg, WeightSpec spec, int64_t default_prefix);

struct CheckpointReport {
    std::vector<std::string> missing;           // required by the table, absent from the file
    std::vector<std::string> unexpected;        // in the file, not in the table
    std::vector<std::string> shape_mismatches;  // "name: expected [..], got [..]"
    std::vector<std::string> dtype_mismatches;  // "name (file): expected .., got .."
    int64_t n_parameters = 0;                   // elements of the tensors the table names
    bool ok() const { return missing.empty() && shape_mismatches.empty() && dtype_mismatches.empty(); }
};
CheckpointReport check_checkpoint(const ModelConfig& cfg, const Checkpoint& ckpt);

// How the input of an FP8 linear layer is quantized (activations are E4M3 with fp32 scales).
enum class ActivationQuant {
    kNone,             // an unquantized layer: fp32 GEMM
    kDynamicPerToken,  // scale = max|x_row| / 448 per token, computed at run time
    kStaticPerTensor,  // the checkpoint's calibrated input_scale (ModelOpt)
};

// A linear layer's weight as the CPU forward reads it: fp32 values, or FP8 E4M3 values (held exactly in fp32)
// with one scale per output row and the activation scheme of its input.
struct LinearWeight {
    Tensor w;                    // [out, in]
    std::vector<float> w_scale;  // [out] FP8 only; a per-tensor scale is repeated on every row
    ActivationQuant act = ActivationQuant::kNone;
    float input_scale = 0.0f;  // kStaticPerTensor
    bool fp8() const { return act != ActivationQuant::kNone; }
};

struct MambaWeights {
    LinearWeight in_proj;   // [in_proj_dim, d_model]
    Tensor conv_w;          // [conv_dim, K]
    Tensor conv_b;          // [conv_dim]
    Tensor dt_bias;         // [H]
    Tensor A;               // [H] = −exp(A_log)
    Tensor D;               // [H]
    Tensor norm;            // [d_inner]
    LinearWeight out_proj;  // [d_model, d_inner]
};
struct AttentionWeights {
    LinearWeight q, k, v,
        o;  // [n_heads·head_dim, d_model], [n_kv·head_dim, d_model] ×2, [d_model, n_heads·head_dim]
};
struct MlpWeights {
    LinearWeight up, down;  // [intermediate, d_model], [d_model, intermediate]
};
struct LayerWeights {
    LayerKind kind = LayerKind::kMlp;
    Tensor norm;  // [d_model]
    MambaWeights mamba;
    AttentionWeights attn;
    MlpWeights mlp;
};
struct VitBlockWeights {
    Tensor norm1_w, norm1_b, qkv_w, qkv_b, proj_w, proj_b, norm2_w, norm2_b, fc1_w, fc1_b, fc2_w, fc2_b;
};
struct VisionWeights {
    Tensor patch_embed;  // [width, 3·patch²]
    Tensor pos_embed;    // [grid·grid, width]
    int64_t pos_grid = 0;
    Tensor prefix;  // [n_prefix, width] cls + register tokens
    std::vector<VitBlockWeights> blocks;
    Tensor proj_norm;  // mlp1.0 [width·s²]
    Tensor proj_fc1;   // mlp1.1 [projector_hidden, width·s²]
    Tensor proj_fc2;   // mlp1.3 [d_model, projector_hidden]
};
struct ModelWeights {
    Tensor embeddings;  // [vocab, d_model]
    std::vector<LayerWeights> layers;
    Tensor norm_f;   // [d_model]
    Tensor lm_head;  // [vocab, d_model]
    VisionWeights vision;
};

// Loads every tensor into fp32 host tensors after check_checkpoint; throws kFormat listing the
// missing tensors and shape and dtype mismatches. Fills cfg's shape-derived values (vocab rows, prefix rows).
// The linear layers of an FP8 checkpoint keep their E4M3 values and scales (scales that are not finite and
// positive are kFormat errors); Quantize::kFp8 quantizes a bf16/fp32 checkpoint's language-model linear
// layers (WeightSpec::lm_linear) per output channel, with dynamic per-token activations, and is
// kInvalidArgument on a checkpoint that is already quantized.
ModelWeights load_weights(ModelConfig& cfg, const Checkpoint& ckpt, Quantize quantize = Quantize::kNone);

// The weights of one row of the table that is a language-model linear layer; nullptr for other roles.
LinearWeight* linear_slot(ModelWeights& w, WeightRole role, int64_t layer);

}  // namespace surf::model
