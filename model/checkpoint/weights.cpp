#include "model/checkpoint/weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/error.h"

namespace surf::model {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < shape.size(); ++i)
        out << (i ? ", " : "") << (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
    out << "]";
    return out.str();
}

bool shape_matches(const std::vector<int64_t>& want, const std::vector<int64_t>& got) {
    if (want.size() != got.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
        if (want[i] >= 0 && want[i] != got[i]) return false;
    }
    return true;
}

}  // namespace

WeightPrefixes weight_prefixes(const ModelConfig& cfg) {
    if (cfg.has_vision)
        return {"language_model.backbone.", "language_model.lm_head.weight", "vision_model.radio_model.",
                "mlp1."};
    return {"backbone.", "lm_head.weight", "", ""};
}

void for_each_weight(const ModelConfig& cfg, const std::function<void(const WeightSpec&)>& fn) {
    const WeightPrefixes px = weight_prefixes(cfg);
    const LlmConfig& c = cfg.llm;
    const int64_t d = c.hidden_size;
    fn({px.backbone + "embeddings.weight", {-1, d}});
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        const std::string p = px.backbone + "layers." + std::to_string(i) + ".";
        fn({p + "norm.weight", {d}});
        switch (c.layers[i]) {
            case LayerKind::kMamba2:
                fn({p + "mixer.in_proj.weight", {c.in_proj_dim(), d}});
                fn({p + "mixer.conv1d.weight", {c.conv_dim(), 1, c.conv_kernel}});
                fn({p + "mixer.conv1d.bias", {c.conv_dim()}, c.conv_bias});
                fn({p + "mixer.dt_bias", {c.mamba_n_heads}});
                fn({p + "mixer.A_log", {c.mamba_n_heads}});
                fn({p + "mixer.D", {c.mamba_n_heads}});
                fn({p + "mixer.norm.weight", {c.d_inner()}});
                fn({p + "mixer.out_proj.weight", {d, c.d_inner()}});
                break;
            case LayerKind::kAttention:
                fn({p + "mixer.q_proj.weight", {c.n_heads * c.head_dim, d}});
                fn({p + "mixer.k_proj.weight", {c.n_kv_heads * c.head_dim, d}});
                fn({p + "mixer.v_proj.weight", {c.n_kv_heads * c.head_dim, d}});
                fn({p + "mixer.o_proj.weight", {d, c.n_heads * c.head_dim}});
                break;
            case LayerKind::kMlp:
                fn({p + "mixer.up_proj.weight", {c.intermediate_size, d}});
                fn({p + "mixer.down_proj.weight", {d, c.intermediate_size}});
                break;
        }
    }
    fn({px.backbone + "norm_f.weight", {d}});
    fn({px.lm_head, {-1, d}, !c.tie_embeddings});
    if (!cfg.has_vision) return;

    const VisionConfig& v = cfg.vision;
    const int64_t w = v.hidden_size, patch_in = 3 * v.patch_size * v.patch_size;
    const std::string r = px.vision;
    fn({r + "model.patch_generator.embedder.weight", {w, patch_in}});
    fn({r + "model.patch_generator.pos_embed", {1, -1, w}});
    fn({r + "model.patch_generator.cls_token.token", {v.n_prefix, w}});
    fn({r + "model.patch_generator.video_embedder.weight", {-1, -1}, false});
    for (int64_t i = 0; i < v.n_layers; ++i) {
        const std::string b = r + "model.blocks." + std::to_string(i) + ".";
        fn({b + "norm1.weight", {w}});
        fn({b + "norm1.bias", {w}});
        fn({b + "attn.qkv.weight", {3 * w, w}});
        fn({b + "attn.qkv.bias", {3 * w}});
        fn({b + "attn.proj.weight", {w, w}});
        fn({b + "attn.proj.bias", {w}});
        fn({b + "norm2.weight", {w}});
        fn({b + "norm2.bias", {w}});
        fn({b + "mlp.fc1.weight", {v.intermediate_size, w}});
        fn({b + "mlp.fc1.bias", {v.intermediate_size}});
        fn({b + "mlp.fc2.weight", {w, v.intermediate_size}});
        fn({b + "mlp.fc2.bias", {w}});
    }
    fn({r + "input_conditioner.norm_mean", {3, 1, 1}, false});
    fn({r + "input_conditioner.norm_std", {3, 1, 1}, false});
    fn({r + "summary_idxs", {-1}, false});
    const int64_t s = cfg.image.shuffle_factor();
    fn({px.projector + "0.weight", {w * s * s}});
    fn({px.projector + "1.weight", {cfg.projector_hidden, w * s * s}});
    fn({px.projector + "3.weight", {d, cfg.projector_hidden}});
}

CheckpointReport check_checkpoint(const ModelConfig& cfg, const Checkpoint& ckpt) {
    CheckpointReport report;
    std::set<std::string> known;
    for_each_weight(cfg, [&](const WeightSpec& spec) {
        known.insert(spec.name);
        const TensorInfo* info = ckpt.find(spec.name);
        if (!info) {
            if (spec.required) report.missing.push_back(spec.name);
            return;
        }
        if (!shape_matches(spec.shape, info->shape)) {
            report.shape_mismatches.push_back(spec.name + ": expected " + shape_str(spec.shape) + ", got " +
                                              info->shape_string());
            return;
        }
        if (spec.required) report.n_parameters += info->numel();
    });
    for (const std::string& name : ckpt.names()) {
        if (!known.count(name)) report.unexpected.push_back(name);
    }
    return report;
}

namespace {

Tensor load(const Checkpoint& ckpt, const std::string& name) {
    Tensor t;
    t.data = ckpt.to_f32(name);
    t.shape = ckpt.get(name).shape;
    return t;
}

}  // namespace

void validate_checkpoint(ModelConfig& cfg, const Checkpoint& ckpt) {
    // Shape-derived values first (spec: read the vocabulary rows and the prefix-token count from the
    // tensors).
    const WeightPrefixes px = weight_prefixes(cfg);
    if (const TensorInfo* emb = ckpt.find(px.backbone + "embeddings.weight"); emb && emb->shape.size() == 2) {
        if (emb->shape[0] < cfg.llm.vocab_size) {
            throw Error(ErrorKind::kFormat, emb->file + ": " + emb->name + " has " +
                                                std::to_string(emb->shape[0]) +
                                                " rows, fewer than the config's vocab_size " +
                                                std::to_string(cfg.llm.vocab_size));
        }
        cfg.llm.vocab_size = emb->shape[0];
    }
    if (cfg.has_vision) {
        if (const TensorInfo* cls = ckpt.find(px.vision + "model.patch_generator.cls_token.token");
            cls && cls->shape.size() == 2) {
            if (cfg.vision.n_prefix >= 0 && cfg.vision.n_prefix != cls->shape[0]) {
                throw Error(ErrorKind::kFormat,
                            cls->file + ": " + cls->name + " has " + std::to_string(cls->shape[0]) +
                                " rows but the config implies " + std::to_string(cfg.vision.n_prefix) +
                                " cls+register tokens");
            }
            cfg.vision.n_prefix = cls->shape[0];
        }
    }
    const CheckpointReport report = check_checkpoint(cfg, ckpt);
    if (!report.ok()) {
        std::ostringstream msg;
        msg << ckpt.path() << ": the checkpoint does not match its config.json:";
        for (size_t i = 0; i < report.missing.size() && i < 20; ++i)
            msg << "\n  missing tensor " << report.missing[i];
        if (report.missing.size() > 20) msg << "\n  … and " << report.missing.size() - 20 << " more missing";
        for (const auto& m : report.shape_mismatches) msg << "\n  " << m;
        throw Error(ErrorKind::kFormat, msg.str());
    }
}

ModelWeights load_weights(ModelConfig& cfg, const Checkpoint& ckpt) {
    validate_checkpoint(cfg, ckpt);
    const WeightPrefixes px = weight_prefixes(cfg);
    ModelWeights w;
    const LlmConfig& c = cfg.llm;
    w.embeddings = load(ckpt, px.backbone + "embeddings.weight");
    w.layers.resize(static_cast<size_t>(c.n_layers()));
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        const std::string p = px.backbone + "layers." + std::to_string(i) + ".mixer.";
        LayerWeights& L = w.layers[static_cast<size_t>(i)];
        L.kind = c.layers[i];
        L.norm = load(ckpt, px.backbone + "layers." + std::to_string(i) + ".norm.weight");
        switch (L.kind) {
            case LayerKind::kMamba2: {
                MambaWeights& m = L.mamba;
                m.in_proj = load(ckpt, p + "in_proj.weight");
                m.conv_w = load(ckpt, p + "conv1d.weight");
                m.conv_w.shape = {c.conv_dim(), c.conv_kernel};
                if (c.conv_bias)
                    m.conv_b = load(ckpt, p + "conv1d.bias");
                else
                    m.conv_b = Tensor({c.conv_dim()});
                m.dt_bias = load(ckpt, p + "dt_bias");
                m.A = load(ckpt, p + "A_log");
                for (float& a : m.A.data) a = -std::exp(a);
                m.D = load(ckpt, p + "D");
                m.norm = load(ckpt, p + "norm.weight");
                m.out_proj = load(ckpt, p + "out_proj.weight");
                break;
            }
            case LayerKind::kAttention:
                L.attn.q = load(ckpt, p + "q_proj.weight");
                L.attn.k = load(ckpt, p + "k_proj.weight");
                L.attn.v = load(ckpt, p + "v_proj.weight");
                L.attn.o = load(ckpt, p + "o_proj.weight");
                break;
            case LayerKind::kMlp:
                L.mlp.up = load(ckpt, p + "up_proj.weight");
                L.mlp.down = load(ckpt, p + "down_proj.weight");
                break;
        }
    }
    w.norm_f = load(ckpt, px.backbone + "norm_f.weight");
    w.lm_head = ckpt.has(px.lm_head) ? load(ckpt, px.lm_head) : w.embeddings;
    if (w.lm_head.dim(0) != w.embeddings.dim(0)) {
        throw Error(ErrorKind::kFormat, ckpt.path() + ": lm_head has " + std::to_string(w.lm_head.dim(0)) +
                                            " rows but embeddings have " +
                                            std::to_string(w.embeddings.dim(0)));
    }
    if (!cfg.has_vision) return w;

    const std::string r = px.vision;
    VisionWeights& v = w.vision;
    v.patch_embed = load(ckpt, r + "model.patch_generator.embedder.weight");
    v.pos_embed = load(ckpt, r + "model.patch_generator.pos_embed");
    const int64_t n_pos = v.pos_embed.dim(1);
    v.pos_grid = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(n_pos))));
    if (v.pos_grid * v.pos_grid != n_pos) {
        throw Error(ErrorKind::kFormat, ckpt.path() + ": pos_embed has " + std::to_string(n_pos) +
                                            " positions, not a square grid");
    }
    if (v.pos_grid < cfg.image.patches_per_side()) {
        throw Error(ErrorKind::kUnsupported, ckpt.path() + ": pos_embed grid " + std::to_string(v.pos_grid) +
                                                 " is smaller than a tile's patch grid " +
                                                 std::to_string(cfg.image.patches_per_side()));
    }
    v.pos_embed.shape = {n_pos, cfg.vision.hidden_size};
    v.prefix = load(ckpt, r + "model.patch_generator.cls_token.token");
    v.blocks.resize(static_cast<size_t>(cfg.vision.n_layers));
    for (int64_t i = 0; i < cfg.vision.n_layers; ++i) {
        const std::string b = r + "model.blocks." + std::to_string(i) + ".";
        VitBlockWeights& B = v.blocks[static_cast<size_t>(i)];
        B.norm1_w = load(ckpt, b + "norm1.weight");
        B.norm1_b = load(ckpt, b + "norm1.bias");
        B.qkv_w = load(ckpt, b + "attn.qkv.weight");
        B.qkv_b = load(ckpt, b + "attn.qkv.bias");
        B.proj_w = load(ckpt, b + "attn.proj.weight");
        B.proj_b = load(ckpt, b + "attn.proj.bias");
        B.norm2_w = load(ckpt, b + "norm2.weight");
        B.norm2_b = load(ckpt, b + "norm2.bias");
        B.fc1_w = load(ckpt, b + "mlp.fc1.weight");
        B.fc1_b = load(ckpt, b + "mlp.fc1.bias");
        B.fc2_w = load(ckpt, b + "mlp.fc2.weight");
        B.fc2_b = load(ckpt, b + "mlp.fc2.bias");
    }
    v.proj_norm = load(ckpt, px.projector + "0.weight");
    v.proj_fc1 = load(ckpt, px.projector + "1.weight");
    v.proj_fc2 = load(ckpt, px.projector + "3.weight");
    return w;
}

}  // namespace surf::model
