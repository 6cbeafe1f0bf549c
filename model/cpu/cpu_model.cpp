#include "model/cpu/cpu_model.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "model/checkpoint/safetensors.h"
#include "model/cpu/vision.h"

namespace surf::model::cpu {

namespace k = surf::kernels::cpu;

std::unique_ptr<CpuModel> CpuModel::load(const std::string& dir, Quantize quantize) {
    ModelConfig cfg = load_model_config(dir);
    Checkpoint ckpt = Checkpoint::open(dir);
    ModelWeights weights = load_weights(cfg, ckpt, quantize);
    return std::make_unique<CpuModel>(std::move(cfg), std::move(weights));
}

CpuModel::CpuModel(ModelConfig cfg, ModelWeights weights) : cfg_(std::move(cfg)), w_(std::move(weights)) {
    if (cfg_.has_vision) tile_pos_ = tile_position_embedding(cfg_, w_.vision);
}

SequenceState CpuModel::new_state() const {
    const LlmConfig& c = cfg_.llm;
    SequenceState s;
    s.mamba.resize(static_cast<size_t>(c.n_layers()));
    s.kv.resize(static_cast<size_t>(c.n_layers()));
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        if (c.layers[i] != LayerKind::kMamba2) continue;
        s.mamba[i].conv = Tensor({c.conv_dim(), c.conv_kernel - 1});
        s.mamba[i].ssm = Tensor({c.mamba_n_heads, c.mamba_head_dim, c.d_state});
    }
    return s;
}

Tensor CpuModel::encode_images(const Tensor& pixel_values, Dumper* dumper) const {
    if (!cfg_.has_vision) throw Error(ErrorKind::kUnsupported, cfg_.dir + ": this model has no vision tower");
    const Tensor features = vit_forward(cfg_, w_.vision, tile_pos_, pixel_values, dumper);
    return project_features(cfg_, w_.vision, features, dumper);
}

Tensor CpuModel::forward(SequenceState& state, const ForwardInput& in) const {
    const LlmConfig& c = cfg_.llm;
    const std::vector<int32_t>& tokens = *in.tokens;
    const int64_t T = static_cast<int64_t>(tokens.size()), d = c.hidden_size, V = c.vocab_size;
    if (T == 0) throw Error(ErrorKind::kInvalidArgument, "forward: no tokens");

    // Embeddings, with image-context rows replaced by the projector's output in order (spec §3.2 step 5).
    std::vector<float> h(static_cast<size_t>(T * d));
    int64_t next_image_row = 0;
    const int64_t n_image_rows = in.image_embeds ? in.image_embeds->dim(0) : 0;
    for (int64_t t = 0; t < T; ++t) {
        const int32_t id = tokens[t];
        if (id < 0 || id >= V)
            throw Error(ErrorKind::kInvalidArgument, "forward: token id " + std::to_string(id) +
                                                         " is outside the vocabulary of " +
                                                         std::to_string(V));
        const float* src = w_.embeddings.ptr() + static_cast<int64_t>(id) * d;
        if (id == in.image_token_id && in.image_token_id >= 0) {
            if (next_image_row >= n_image_rows) {
                throw Error(ErrorKind::kInvalidArgument,
                            "forward: more image-context tokens than image embedding rows (" +
                                std::to_string(n_image_rows) + ")");
            }
            src = in.image_embeds->ptr() + next_image_row++ * d;
        }
        std::copy(src, src + d, h.begin() + t * d);
    }
    if (next_image_row != n_image_rows) {
        throw Error(ErrorKind::kInvalidArgument,
                    "forward: " + std::to_string(n_image_rows) + " image embedding rows but " +
                        std::to_string(next_image_row) + " image-context tokens");
    }
    dump(in.dumper, "embeds", h.data(), {T, d});

    // Blocks: h ← h + mixer(RMSNorm(h)), residual stream kept in fp32 (spec §1.2, §1.7).
    std::vector<float> normed(h.size()), mixed(h.size());
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        const LayerWeights& L = w_.layers[static_cast<size_t>(i)];
        k::rmsnorm({h.data(), nullptr, L.norm.ptr(), normed.data(), T, d, c.norm_eps});
        switch (L.kind) {
            case LayerKind::kMamba2:
                mamba2_mixer(c, L.mamba, normed.data(), T, state.mamba[i], mixed.data());
                break;
            case LayerKind::kAttention:
                attention_mixer(c, L.attn, normed.data(), T, state.kv[i], mixed.data());
                break;
            case LayerKind::kMlp: mlp_mixer(c, L.mlp, normed.data(), T, mixed.data()); break;
        }
        for (size_t j = 0; j < h.size(); ++j) h[j] += mixed[j];
        dump(in.dumper, "layers." + std::to_string(i), h.data(), {T, d});
    }
    state.n_tokens += T;

    const int64_t first = in.all_logits ? 0 : T - 1, rows = T - first;
    k::rmsnorm({h.data() + first * d, nullptr, w_.norm_f.ptr(), normed.data(), rows, d, c.norm_eps});
    dump(in.dumper, "norm_f", normed.data(), {rows, d});
    Tensor logits({rows, V});
    k::linear({normed.data(), w_.lm_head.ptr(), nullptr, logits.ptr(), rows, V, d});
    dump(in.dumper, "logits", logits.ptr(), logits.shape);
    return logits;
}

}  // namespace surf::model::cpu
