// Model configuration: the checkpoint's config.json (NemotronH_Nano_VL_V2 with nested llm_config and
// vision_config, or a text-only NemotronHForCausalLM), generation_config.json and
// preprocessor_config.json. Plain data (DESIGN.md rule 4): a layer's kind is a field.
// Values the spec tags as unconfirmed (vocabulary rows, prefix-token count, position grid) are
// cross-checked against tensor shapes when the weights load (model/checkpoint/weights.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/checkpoint/quant_config.h"

namespace surf::model {

enum class LayerKind { kMamba2, kAttention, kMlp };
const char* layer_kind_name(LayerKind kind);
char layer_kind_char(LayerKind kind);  // 'M', '*', '-' as in hybrid_override_pattern

struct LlmConfig {
    int64_t hidden_size = 0;        // d_model
    std::vector<LayerKind> layers;  // one kind per block, from hybrid_override_pattern
    int64_t intermediate_size = 0;  // MLP block width
    int64_t n_heads = 0;            // attention query heads
    int64_t n_kv_heads = 0;         // attention key/value heads (GQA)
    int64_t head_dim = 0;           // attention head dim
    int64_t mamba_n_heads = 0;      // H
    int64_t mamba_head_dim = 0;     // P
    int64_t d_state = 0;            // N
    int64_t n_groups = 0;           // G
    int64_t conv_kernel = 4;        // K
    int64_t chunk_size = 128;       // SSD chunk (math does not depend on it)
    bool conv_bias = true;
    float norm_eps = 1e-5f;
    float dt_min = 0.0f;  // time_step_limit lower bound (0 = no clamp)
    float dt_max = 0.0f;  // time_step_limit upper bound (0 = no clamp)
    // The upper clamp the kernels apply: dt_max, or +inf when it is 0 (no clamp).
    float dt_upper() const { return dt_max > 0.0f ? dt_max : std::numeric_limits<float>::infinity(); }
    int64_t vocab_size = 0;  // embedding rows
    bool tie_embeddings = false;
    int64_t max_position_embeddings = 0;  // the context length the model was trained for (0 = not stated)

    int64_t n_layers() const { return static_cast<int64_t>(layers.size()); }
    int64_t d_inner() const { return mamba_n_heads * mamba_head_dim; }
    int64_t conv_dim() const { return d_inner() + 2 * n_groups * d_state; }
    int64_t in_proj_dim() const { return d_inner() + conv_dim() + mamba_n_heads; }
    int64_t count(LayerKind kind) const;
    std::string pattern() const;  // "M-M*..." rebuilt from `layers`
};

struct VisionConfig {
    int64_t hidden_size = 0;  // ViT width
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t intermediate_size = 0;
    int64_t patch_size = 16;
    int64_t max_img_size =
        2048;               // CPE position grid = max_img_size / patch_size per side (checked vs pos_embed)
    int64_t n_prefix = -1;  // cls + register rows; -1 = read from cls_token.token's shape
    float norm_eps = 1e-6f;
};

struct ImageConfig {
    int64_t tile_size = 512;  // force_image_size
    int64_t patch_size = 16;
    double downsample_ratio = 0.5;  // pixel shuffle 2×2
    int64_t max_tiles = 12;
    bool use_thumbnail = true;
    std::array<float, 3> norm_mean = {0.48145466f, 0.4578275f, 0.40821073f};
    std::array<float, 3> norm_std = {0.26862954f, 0.26130258f, 0.27577711f};
    std::string ps_version = "v2";

    int64_t patches_per_side() const { return tile_size / patch_size; }
    int64_t shuffle_factor() const;   // 1 / downsample_ratio (2)
    int64_t tokens_per_tile() const;  // (patches_per_side / shuffle)^2 = 256
};

struct ModelConfig {
    std::string dir;
    std::string architecture;  // "NemotronH_Nano_VL_V2" or "NemotronHForCausalLM"
    LlmConfig llm;
    // The config.json object that holds the llm fields: "llm_config" or "text_config", "" for the top level.
    std::string llm_key;
    bool has_vision = false;
    VisionConfig vision;
    ImageConfig image;
    int64_t projector_hidden = 0;  // mlp1 hidden width
    std::string image_context_token = "<image>";
    std::string image_start_token = "<img>";
    std::string image_end_token = "</img>";
    int64_t image_context_token_id = -1;  // from config when present; otherwise from the tokenizer
    int64_t image_start_token_id = -1;    // likewise (img_start_token_id / img_end_token_id)
    int64_t image_end_token_id = -1;
    int64_t bos_token_id = -1;
    std::vector<int64_t> eos_token_ids;  // generation stops on any of these
    QuantConfig quant;                   // an FP8 checkpoint's quantization config (method kNone: none)
};

// Reads config.json (+ generation_config.json, preprocessor_config.json, hf_quant_config.json when present)
// from `dir`.
// Throws surf::Error(kIo / kFormat / kConfig / kUnsupported) naming the file and field.
ModelConfig load_model_config(const std::string& dir);

// Parses a hybrid pattern string ("M-M*-") into layer kinds; throws kConfig naming the bad character.
std::vector<LayerKind> parse_layer_pattern(const std::string& pattern, const std::string& where);

}  // namespace surf::model
