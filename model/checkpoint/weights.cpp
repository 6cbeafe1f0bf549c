#include "model/checkpoint/weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/error.h"
#include "kernels/cpu/fp8.h"

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
    if (want.empty()) return got.empty() || (got.size() == 1 && got[0] == 1);  // a scalar
    if (want.size() != got.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
        if (want[i] >= 0 && want[i] != got[i]) return false;
    }
    return true;
}

bool dtype_allowed(WeightDType want, DType got) {
    switch (want) {
        case WeightDType::kAny: return true;
        case WeightDType::kE4M3: return got == DType::kF8E4M3;
        case WeightDType::kFloat: return got == DType::kF32 || got == DType::kF16 || got == DType::kBF16;
    }
    return false;
}

// The dtypes a tensor may have, and why, for a mismatch message.
std::string dtype_expectation(const ModelConfig& cfg, const WeightSpec& spec, DType got) {
    if (spec.dtype == WeightDType::kE4M3)
        return std::string("F8_E4M3 (") + cfg.quant.source + ": " + quant_method_name(cfg.quant.method) +
               " quantizes it)";
    const std::string floats = "F32, F16 or BF16";
    if (got != DType::kF8E4M3 || spec.role == WeightRole::kWeightScale ||
        spec.role == WeightRole::kInputScale)
        return floats;
    if (!spec.lm_linear) return floats + " (surf runs FP8 only in the language model's linear layers)";
    if (cfg.quant.method == QuantMethod::kNone)
        return floats +
               " (an F8_E4M3 weight needs a quantization_config in config.json or hf_quant_config.json)";
    return floats + " (" + cfg.quant.source + " leaves it unquantized)";
}

}  // namespace

WeightPrefixes weight_prefixes(const ModelConfig& cfg) {
    if (cfg.has_vision)
        return {"language_model.backbone.", "language_model.lm_head.weight", "vision_model.radio_model.",
                "mlp1."};
    return {"backbone.", "lm_head.weight", "", ""};
}

void for_each_weight(const ModelConfig& cfg, const std::function<void(const WeightSpec&)>& fn) {
    using R = WeightRole;
    const WeightPrefixes px = weight_prefixes(cfg);
    const LlmConfig& c = cfg.llm;
    const int64_t d = c.hidden_size;
    int64_t block = -1;  // the LLM layer or ViT block the next per-block entries belong to
    auto add = [&](std::string name, std::vector<int64_t> shape, R role, bool required = true) {
        fn({std::move(name), std::move(shape), required, role, block,
            role == R::kIgnored ? WeightDType::kAny : WeightDType::kFloat});
    };
    // A language-model linear layer [out, in]; in FP8 when the quantization config says so, followed by its
    // scales: ModelOpt a per-tensor weight_scale and input_scale, compressed-tensors a weight_scale per row.
    auto add_linear = [&](const std::string& module, std::vector<int64_t> shape, R role) {
        const bool fp8 = cfg.quant.quantizes(module);
        const int64_t out = shape[0];
        fn({module + ".weight", std::move(shape), true, role, block,
            fp8 ? WeightDType::kE4M3 : WeightDType::kFloat, true});
        if (!fp8) return;
        const bool per_tensor = cfg.quant.method == QuantMethod::kModelOptFp8;
        fn({module + ".weight_scale", per_tensor ? std::vector<int64_t>{} : std::vector<int64_t>{out, 1},
            true, R::kWeightScale, block, WeightDType::kFloat, false, role});
        if (per_tensor)
            fn({module + ".input_scale", {}, true, R::kInputScale, block, WeightDType::kFloat, false, role});
    };
    add(px.backbone + "embeddings.weight", {-1, d}, R::kEmbeddings);
    for (block = 0; block < c.n_layers(); ++block) {
        const std::string p = px.backbone + "layers." + std::to_string(block) + ".";
        add(p + "norm.weight", {d}, R::kLayerNorm);
        switch (c.layers[block]) {
            case LayerKind::kMamba2:
                add_linear(p + "mixer.in_proj", {c.in_proj_dim(), d}, R::kMambaInProj);
                add(p + "mixer.conv1d.weight", {c.conv_dim(), 1, c.conv_kernel}, R::kMambaConvW);
                add(p + "mixer.conv1d.bias", {c.conv_dim()}, R::kMambaConvB, c.conv_bias);
                add(p + "mixer.dt_bias", {c.mamba_n_heads}, R::kMambaDtBias);
                add(p + "mixer.A_log", {c.mamba_n_heads}, R::kMambaALog);
                add(p + "mixer.D", {c.mamba_n_heads}, R::kMambaD);
                add(p + "mixer.norm.weight", {c.d_inner()}, R::kMambaNorm);
                add_linear(p + "mixer.out_proj", {d, c.d_inner()}, R::kMambaOutProj);
                break;
            case LayerKind::kAttention:
                add_linear(p + "mixer.q_proj", {c.n_heads * c.head_dim, d}, R::kAttnQ);
                add_linear(p + "mixer.k_proj", {c.n_kv_heads * c.head_dim, d}, R::kAttnK);
                add_linear(p + "mixer.v_proj", {c.n_kv_heads * c.head_dim, d}, R::kAttnV);
                add_linear(p + "mixer.o_proj", {d, c.n_heads * c.head_dim}, R::kAttnO);
                break;
            case LayerKind::kMlp:
                add_linear(p + "mixer.up_proj", {c.intermediate_size, d}, R::kMlpUp);
                add_linear(p + "mixer.down_proj", {d, c.intermediate_size}, R::kMlpDown);
                break;
        }
    }
    block = -1;
    add(px.backbone + "norm_f.weight", {d}, R::kFinalNorm);
    add(px.lm_head, {-1, d}, R::kLmHead, !c.tie_embeddings);
    if (!cfg.has_vision) return;

    const VisionConfig& v = cfg.vision;
    const int64_t w = v.hidden_size, patch_in = 3 * v.patch_size * v.patch_size;
    const std::string r = px.vision;
    add(r + "model.patch_generator.embedder.weight", {w, patch_in}, R::kPatchEmbed);
    add(r + "model.patch_generator.pos_embed", {1, -1, w}, R::kPosEmbed);
    add(r + "model.patch_generator.cls_token.token", {v.n_prefix, w}, R::kPrefix);
    add(r + "model.patch_generator.video_embedder.weight", {-1, -1}, R::kIgnored, false);
    for (block = 0; block < v.n_layers; ++block) {
        const std::string b = r + "model.blocks." + std::to_string(block) + ".";
        add(b + "norm1.weight", {w}, R::kVitNorm1W);
        add(b + "norm1.bias", {w}, R::kVitNorm1B);
        add(b + "attn.qkv.weight", {3 * w, w}, R::kVitQkvW);
        add(b + "attn.qkv.bias", {3 * w}, R::kVitQkvB);
        add(b + "attn.proj.weight", {w, w}, R::kVitProjW);
        add(b + "attn.proj.bias", {w}, R::kVitProjB);
        add(b + "norm2.weight", {w}, R::kVitNorm2W);
        add(b + "norm2.bias", {w}, R::kVitNorm2B);
        add(b + "mlp.fc1.weight", {v.intermediate_size, w}, R::kVitFc1W);
        add(b + "mlp.fc1.bias", {v.intermediate_size}, R::kVitFc1B);
        add(b + "mlp.fc2.weight", {w, v.intermediate_size}, R::kVitFc2W);
        add(b + "mlp.fc2.bias", {w}, R::kVitFc2B);
    }
    block = -1;
    add(r + "input_conditioner.norm_mean", {3, 1, 1}, R::kIgnored, false);
    add(r + "input_conditioner.norm_std", {3, 1, 1}, R::kIgnored, false);
    add(r + "summary_idxs", {-1}, R::kIgnored, false);
    const int64_t s = cfg.image.shuffle_factor();
    add(px.projector + "0.weight", {w * s * s}, R::kProjNorm);
    add(px.projector + "1.weight", {cfg.projector_hidden, w * s * s}, R::kProjFc1);
    add(px.projector + "3.weight", {d, cfg.projector_hidden}, R::kProjFc2);
}

WeightSpec resolved_from_config(const ModelConfig& cfg, WeightSpec spec, int64_t default_prefix) {
    switch (spec.role) {
        case WeightRole::kEmbeddings:
        case WeightRole::kLmHead: spec.shape[0] = cfg.llm.vocab_size; break;
        case WeightRole::kPosEmbed: {
            const int64_t g = cfg.vision.max_img_size / cfg.vision.patch_size;
            spec.shape[1] = g * g;
            break;
        }
        case WeightRole::kPrefix:
            spec.shape[0] = cfg.vision.n_prefix > 0 ? cfg.vision.n_prefix : default_prefix;
            break;
        default: break;
    }
    return spec;
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
        if (!dtype_allowed(spec.dtype, info->dtype)) {
            report.dtype_mismatches.push_back(spec.name + " (" + info->file + "): expected " +
                                              dtype_expectation(cfg, spec, info->dtype) + ", got " +
                                              dtype_name(info->dtype));
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
        for (const auto& m : report.dtype_mismatches) msg << "\n  " << m;
        throw Error(ErrorKind::kFormat, msg.str());
    }
}

LinearWeight* linear_slot(ModelWeights& w, WeightRole role, int64_t layer) {
    using R = WeightRole;
    const size_t i = static_cast<size_t>(std::max<int64_t>(layer, 0));
    switch (role) {
        case R::kMambaInProj: return &w.layers[i].mamba.in_proj;
        case R::kMambaOutProj: return &w.layers[i].mamba.out_proj;
        case R::kAttnQ: return &w.layers[i].attn.q;
        case R::kAttnK: return &w.layers[i].attn.k;
        case R::kAttnV: return &w.layers[i].attn.v;
        case R::kAttnO: return &w.layers[i].attn.o;
        case R::kMlpUp: return &w.layers[i].mlp.up;
        case R::kMlpDown: return &w.layers[i].mlp.down;
        default: return nullptr;
    }
}

namespace {

// Where a role lives in the host weights; nullptr for the tensors the engine does not read and for scales.
Tensor* host_slot(ModelWeights& w, const WeightSpec& s) {
    using R = WeightRole;
    const size_t i = static_cast<size_t>(std::max<int64_t>(s.layer, 0));
    switch (s.role) {
        case R::kIgnored:
        case R::kWeightScale:
        case R::kInputScale: return nullptr;
        case R::kMambaInProj:
        case R::kMambaOutProj:
        case R::kAttnQ:
        case R::kAttnK:
        case R::kAttnV:
        case R::kAttnO:
        case R::kMlpUp:
        case R::kMlpDown: return &linear_slot(w, s.role, s.layer)->w;
        case R::kEmbeddings: return &w.embeddings;
        case R::kLayerNorm: return &w.layers[i].norm;
        case R::kFinalNorm: return &w.norm_f;
        case R::kLmHead: return &w.lm_head;
        case R::kMambaConvW: return &w.layers[i].mamba.conv_w;
        case R::kMambaConvB: return &w.layers[i].mamba.conv_b;
        case R::kMambaDtBias: return &w.layers[i].mamba.dt_bias;
        case R::kMambaALog: return &w.layers[i].mamba.A;
        case R::kMambaD: return &w.layers[i].mamba.D;
        case R::kMambaNorm: return &w.layers[i].mamba.norm;
        case R::kPatchEmbed: return &w.vision.patch_embed;
        case R::kPosEmbed: return &w.vision.pos_embed;
        case R::kPrefix: return &w.vision.prefix;
        case R::kVitNorm1W: return &w.vision.blocks[i].norm1_w;
        case R::kVitNorm1B: return &w.vision.blocks[i].norm1_b;
        case R::kVitQkvW: return &w.vision.blocks[i].qkv_w;
        case R::kVitQkvB: return &w.vision.blocks[i].qkv_b;
        case R::kVitProjW: return &w.vision.blocks[i].proj_w;
        case R::kVitProjB: return &w.vision.blocks[i].proj_b;
        case R::kVitNorm2W: return &w.vision.blocks[i].norm2_w;
        case R::kVitNorm2B: return &w.vision.blocks[i].norm2_b;
        case R::kVitFc1W: return &w.vision.blocks[i].fc1_w;
        case R::kVitFc1B: return &w.vision.blocks[i].fc1_b;
        case R::kVitFc2W: return &w.vision.blocks[i].fc2_w;
        case R::kVitFc2B: return &w.vision.blocks[i].fc2_b;
        case R::kProjNorm: return &w.vision.proj_norm;
        case R::kProjFc1: return &w.vision.proj_fc1;
        case R::kProjFc2: return &w.vision.proj_fc2;
    }
    return nullptr;
}

// The position table as the ViT reads it: [grid², width] on a square grid at least a tile's patch grid.
void check_pos_embed(const ModelConfig& cfg, const Checkpoint& ckpt, VisionWeights& v) {
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
}

// An FP8 checkpoint's scale tensor attached to its linear layer: the weight scale per output row (a
// per-tensor scale repeated), or the static input scale. Scales must be finite and positive.
void load_scale(ModelWeights& w, const WeightSpec& spec, const Checkpoint& ckpt) {
    LinearWeight& linear = *linear_slot(w, spec.scales, spec.layer);
    const std::vector<float> values = ckpt.to_f32(spec.name);
    for (float v : values) {
        if (!(std::isfinite(v) && v > 0.0f)) {
            const TensorInfo& info = ckpt.get(spec.name);
            throw Error(ErrorKind::kFormat, info.file + ": " + spec.name + " holds " + std::to_string(v) +
                                                ", not a finite positive scale");
        }
    }
    if (spec.role == WeightRole::kInputScale) {
        linear.input_scale = values[0];
        linear.act = ActivationQuant::kStaticPerTensor;
    } else {
        const size_t rows = static_cast<size_t>(linear.w.dim(0));
        linear.w_scale = values.size() == 1 ? std::vector<float>(rows, values[0]) : values;
        if (linear.act == ActivationQuant::kNone) linear.act = ActivationQuant::kDynamicPerToken;
    }
}

// An FP8 weight holding the NaN code (S.1111.111) is a corrupt checkpoint, not a weight.
void check_no_nan(const Tensor& t, const TensorInfo& info) {
    for (float v : t.data) {
        if (std::isnan(v))
            throw Error(ErrorKind::kFormat, info.file + ": " + info.name + " holds the E4M3 NaN code");
    }
}

// --quantize fp8: per-output-channel E4M3 weights, dynamic per-token activations.
void quantize_linear(LinearWeight& linear) {
    linear.w_scale.resize(static_cast<size_t>(linear.w.dim(0)));
    kernels::cpu::quantize_rows_e4m3(
        {linear.w.ptr(), linear.w.ptr(), linear.w_scale.data(), linear.w.dim(0), linear.w.dim(1)});
    linear.act = ActivationQuant::kDynamicPerToken;
}

}  // namespace

ModelWeights load_weights(ModelConfig& cfg, const Checkpoint& ckpt, Quantize quantize) {
    if (quantize != Quantize::kNone && cfg.quant.method != QuantMethod::kNone) {
        throw Error(ErrorKind::kInvalidArgument,
                    std::string("quantize ") + quantize_name(quantize) + ": " + ckpt.path() +
                        " is already quantized (" + cfg.quant.source + ": " +
                        quant_method_name(cfg.quant.method) + "); load it without quantizing");
    }
    validate_checkpoint(cfg, ckpt);
    const LlmConfig& c = cfg.llm;
    ModelWeights w;
    w.layers.resize(static_cast<size_t>(c.n_layers()));
    for (int64_t i = 0; i < c.n_layers(); ++i) w.layers[static_cast<size_t>(i)].kind = c.layers[i];
    if (cfg.has_vision) w.vision.blocks.resize(static_cast<size_t>(cfg.vision.n_layers));
    for_each_weight(cfg, [&](const WeightSpec& spec) {
        if (spec.role == WeightRole::kWeightScale || spec.role == WeightRole::kInputScale)
            return load_scale(w, spec, ckpt);
        Tensor* slot = host_slot(w, spec);
        if (spec.role == WeightRole::kMambaConvB && !c.conv_bias) return;  // the model has none
        if (slot && ckpt.has(spec.name)) *slot = load(ckpt, spec.name);    // E4M3 values decode exactly
        if (spec.dtype == WeightDType::kE4M3) check_no_nan(*slot, ckpt.get(spec.name));
        if (spec.lm_linear && quantize == Quantize::kFp8)
            quantize_linear(*linear_slot(w, spec.role, spec.layer));
    });
    for (LayerWeights& L : w.layers) {
        if (L.kind != LayerKind::kMamba2) continue;
        L.mamba.conv_w.shape = {c.conv_dim(), c.conv_kernel};
        if (L.mamba.conv_b.data.empty()) L.mamba.conv_b = Tensor({c.conv_dim()});  // no conv bias: zeros
        for (float& a : L.mamba.A.data) a = -std::exp(a);                          // A = −exp(A_log)
    }
    if (w.lm_head.data.empty()) w.lm_head = w.embeddings;  // tied
    if (w.lm_head.dim(0) != w.embeddings.dim(0)) {
        throw Error(ErrorKind::kFormat, ckpt.path() + ": lm_head has " + std::to_string(w.lm_head.dim(0)) +
                                            " rows but embeddings have " +
                                            std::to_string(w.embeddings.dim(0)));
    }
    if (cfg.has_vision) check_pos_embed(cfg, ckpt, w.vision);
    return w;
}

}  // namespace surf::model
