// The CPU backend: fp32 math over bf16/f16/f32 checkpoints, with FP8 E4M3 GEMMs in the language model's
// linear layers of an FP8 checkpoint or after quantize-on-load (the SSM state stays fp32). It is the oracle
// for the CUDA backend and runs small models (fixtures) end to end in CI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/checkpoint/config.h"
#include "model/checkpoint/tensor.h"
#include "model/checkpoint/weights.h"
#include "model/cpu/blocks.h"
#include "model/dump.h"

namespace surf::model::cpu {

// Everything the language model carries between calls for one sequence: conv + SSM state of every
// Mamba layer and the KV of every attention layer (empty entries for the other kinds).
struct SequenceState {
    std::vector<MambaState> mamba;  // [n_layers]
    std::vector<KvCache> kv;        // [n_layers]
    int64_t n_tokens = 0;
};

struct ForwardInput {
    const std::vector<int32_t>* tokens = nullptr;  // [T] new tokens
    const Tensor* image_embeds =
        nullptr;  // [n_image_tokens, d_model] rows for the image-context tokens, in order
    int64_t image_token_id = -1;
    bool all_logits = false;  // logits for every new token, else only the last
    Dumper* dumper = nullptr;
};

class CpuModel {
public:
    // Loads config.json and the safetensors weights of a model folder; Quantize::kFp8 quantizes the
    // language model's linear layers on load (load_weights).
    static std::unique_ptr<CpuModel> load(const std::string& dir, Quantize quantize = Quantize::kNone);
    CpuModel(ModelConfig cfg, ModelWeights weights);

    const ModelConfig& config() const { return cfg_; }
    SequenceState new_state() const;

    // pixel_values [n_tiles, 3, S, S] → image embeddings [n_tiles · tokens_per_tile, d_model].
    Tensor encode_images(const Tensor& pixel_values, Dumper* dumper = nullptr) const;

    // Runs the new tokens through the LM, continuing `state`; returns logits [T or 1, vocab].
    Tensor forward(SequenceState& state, const ForwardInput& input) const;

private:
    ModelConfig cfg_;
    ModelWeights w_;
    Tensor tile_pos_;  // CPE position embedding for one tile, computed once
};

}  // namespace surf::model::cpu
