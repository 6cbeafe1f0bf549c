#include "model/cuda/gpu_weights.h"

#include <cmath>
#include <cstring>
#include <random>

#include "base/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/random_fill.h"
#include "model/checkpoint/dtype.h"
#include "model/checkpoint/weights.h"

namespace surf::model::cuda {

namespace kc = surf::kernels::cuda;

namespace {

// Host → device through a pageable staging vector (load time only).
DeviceBuffer upload_bf16(const std::vector<uint16_t>& host, cudaStream_t stream) {
    DeviceBuffer buf(host.size() * sizeof(uint16_t));
    SURF_CUDA_CHECK(cudaMemcpyAsync(buf.get(), host.data(), buf.bytes(), cudaMemcpyHostToDevice, stream));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return buf;
}

std::vector<uint16_t> to_bf16(const TensorInfo& info) {
    std::vector<uint16_t> out(static_cast<size_t>(info.numel()));
    if (info.dtype == DType::kBF16) {
        std::memcpy(out.data(), info.data, info.n_bytes);
        return out;
    }
    std::vector<float> f(out.size());
    convert_to_f32(info.dtype, info.data, f.size(), f.data());
    for (size_t i = 0; i < f.size(); ++i) out[i] = f32_to_bf16(f[i]);
    return out;
}

GpuMatrix matrix(const Checkpoint& ckpt, const std::string& name, cudaStream_t stream) {
    const TensorInfo& info = ckpt.get(name);
    GpuMatrix m;
    m.rows = info.shape[0];
    m.cols = info.numel() / m.rows;
    m.buf = upload_bf16(to_bf16(info), stream);
    return m;
}

GpuVector vec(const std::vector<float>& host, cudaStream_t stream) {
    GpuVector v;
    v.n = static_cast<int64_t>(host.size());
    v.buf = DeviceBuffer(host.size() * sizeof(float));
    SURF_CUDA_CHECK(cudaMemcpyAsync(v.buf.get(), host.data(), v.buf.bytes(), cudaMemcpyHostToDevice, stream));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return v;
}

GpuVector vec(const Checkpoint& ckpt, const std::string& name, cudaStream_t stream) {
    return vec(ckpt.to_f32(name), stream);
}

// Stacks row blocks of several [rows_i, cols] tensors into one matrix (q, k, v → qkv).
GpuMatrix stacked(const Checkpoint& ckpt, const std::vector<std::string>& names, cudaStream_t stream) {
    std::vector<uint16_t> all;
    GpuMatrix m;
    for (const auto& name : names) {
        const TensorInfo& info = ckpt.get(name);
        const auto part = to_bf16(info);
        all.insert(all.end(), part.begin(), part.end());
        m.rows += info.shape[0];
        m.cols = info.shape[1];
    }
    m.buf = upload_bf16(all, stream);
    return m;
}

int64_t bytes_of(const GpuWeights& w);

}  // namespace

GpuWeights upload_weights(ModelConfig& cfg, const Checkpoint& ckpt, cudaStream_t stream) {
    validate_checkpoint(cfg, ckpt);
    const WeightPrefixes px = weight_prefixes(cfg);
    const LlmConfig& c = cfg.llm;
    GpuWeights w;
    w.embeddings = matrix(ckpt, px.backbone + "embeddings.weight", stream);
    w.lm_head = matrix(ckpt, ckpt.has(px.lm_head) ? px.lm_head : px.backbone + "embeddings.weight", stream);
    w.norm_f = vec(ckpt, px.backbone + "norm_f.weight", stream);
    w.layers.resize(static_cast<size_t>(c.n_layers()));
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        const std::string p = px.backbone + "layers." + std::to_string(i) + ".";
        GpuLayer& L = w.layers[static_cast<size_t>(i)];
        L.kind = c.layers[i];
        L.norm = vec(ckpt, p + "norm.weight", stream);
        switch (L.kind) {
            case LayerKind::kMamba2: {
                L.in_proj = matrix(ckpt, p + "mixer.in_proj.weight", stream);
                L.out_proj = matrix(ckpt, p + "mixer.out_proj.weight", stream);
                L.conv_w = vec(ckpt, p + "mixer.conv1d.weight", stream);
                L.conv_b = c.conv_bias ? vec(ckpt, p + "mixer.conv1d.bias", stream)
                                       : vec(std::vector<float>(c.conv_dim(), 0.0f), stream);
                L.dt_bias = vec(ckpt, p + "mixer.dt_bias", stream);
                std::vector<float> A = ckpt.to_f32(p + "mixer.A_log");
                for (float& a : A) a = -std::exp(a);
                L.A = vec(A, stream);
                L.D = vec(ckpt, p + "mixer.D", stream);
                L.gated_norm = vec(ckpt, p + "mixer.norm.weight", stream);
                break;
            }
            case LayerKind::kAttention:
                L.qkv = stacked(
                    ckpt, {p + "mixer.q_proj.weight", p + "mixer.k_proj.weight", p + "mixer.v_proj.weight"},
                    stream);
                L.o = matrix(ckpt, p + "mixer.o_proj.weight", stream);
                break;
            case LayerKind::kMlp:
                L.up = matrix(ckpt, p + "mixer.up_proj.weight", stream);
                L.down = matrix(ckpt, p + "mixer.down_proj.weight", stream);
                break;
        }
    }
    if (cfg.has_vision) {
        const std::string r = px.vision;
        const int64_t width = cfg.vision.hidden_size, side = cfg.image.patches_per_side();
        w.patch_embed = matrix(ckpt, r + "model.patch_generator.embedder.weight", stream);
        // CPE: resize the stored grid to a tile's patch grid once, in fp32 (spec §4.3), then bf16.
        const std::vector<float> pos = ckpt.to_f32(r + "model.patch_generator.pos_embed");
        const int64_t n_pos = static_cast<int64_t>(pos.size()) / width;
        const int64_t grid = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(n_pos))));
        std::vector<float> chw(pos.size()), resized(static_cast<size_t>(width * side * side));
        for (int64_t i = 0; i < n_pos; ++i)
            for (int64_t ch = 0; ch < width; ++ch) chw[ch * n_pos + i] = pos[i * width + ch];
        surf::kernels::cpu::bilinear_resize({chw.data(), resized.data(), width, grid, grid, side, side});
        std::vector<uint16_t> tile_pos(resized.size());
        for (int64_t i = 0; i < side * side; ++i)
            for (int64_t ch = 0; ch < width; ++ch)
                tile_pos[i * width + ch] = f32_to_bf16(resized[ch * side * side + i]);
        w.tile_pos = upload_bf16(tile_pos, stream);
        const TensorInfo& cls = ckpt.get(r + "model.patch_generator.cls_token.token");
        w.n_prefix = cls.shape[0];
        w.prefix = upload_bf16(to_bf16(cls), stream);
        w.vit.resize(static_cast<size_t>(cfg.vision.n_layers));
        for (int64_t i = 0; i < cfg.vision.n_layers; ++i) {
            const std::string b = r + "model.blocks." + std::to_string(i) + ".";
            GpuVitBlock& B = w.vit[static_cast<size_t>(i)];
            B.norm1_w = vec(ckpt, b + "norm1.weight", stream);
            B.norm1_b = vec(ckpt, b + "norm1.bias", stream);
            B.norm2_w = vec(ckpt, b + "norm2.weight", stream);
            B.norm2_b = vec(ckpt, b + "norm2.bias", stream);
            B.qkv = matrix(ckpt, b + "attn.qkv.weight", stream);
            B.qkv_b = upload_bf16(to_bf16(ckpt.get(b + "attn.qkv.bias")), stream);
            B.proj = matrix(ckpt, b + "attn.proj.weight", stream);
            B.proj_b = vec(ckpt, b + "attn.proj.bias", stream);
            B.fc1 = matrix(ckpt, b + "mlp.fc1.weight", stream);
            B.fc1_b = upload_bf16(to_bf16(ckpt.get(b + "mlp.fc1.bias")), stream);
            B.fc2 = matrix(ckpt, b + "mlp.fc2.weight", stream);
            B.fc2_b = vec(ckpt, b + "mlp.fc2.bias", stream);
        }
        w.proj_norm = vec(ckpt, px.projector + "0.weight", stream);
        w.proj_fc1 = matrix(ckpt, px.projector + "1.weight", stream);
        w.proj_fc2 = matrix(ckpt, px.projector + "3.weight", stream);
    }
    w.bytes = bytes_of(w);
    return w;
}

namespace {

struct RandomDraw {
    uint64_t seed;
    cudaStream_t stream;
    uint64_t counter = 0;

    GpuMatrix matrix(int64_t rows, int64_t cols) {
        GpuMatrix m;
        m.rows = rows, m.cols = cols;
        m.buf = DeviceBuffer(static_cast<size_t>(rows * cols) * 2);
        const float bound = 1.0f / std::sqrt(static_cast<float>(cols));
        kc::uniform_fill({m.buf.get(), true, rows * cols, -bound, bound, seed + 7919 * ++counter}, stream);
        return m;
    }
    GpuVector vector(int64_t n, float lo, float hi) {
        GpuVector v;
        v.n = n;
        v.buf = DeviceBuffer(static_cast<size_t>(n) * 4);
        kc::uniform_fill({v.buf.get(), false, n, lo, hi, seed + 7919 * ++counter}, stream);
        return v;
    }
    DeviceBuffer raw_bf16(int64_t n, float lo, float hi) {
        DeviceBuffer b(static_cast<size_t>(n) * 2);
        kc::uniform_fill({b.get(), true, n, lo, hi, seed + 7919 * ++counter}, stream);
        return b;
    }
};

int64_t bytes_of(const GpuWeights& w) {
    int64_t total =
        static_cast<int64_t>(w.embeddings.buf.bytes() + w.lm_head.buf.bytes() + w.norm_f.buf.bytes());
    for (const auto& L : w.layers) {
        for (const DeviceBuffer* b :
             {&L.norm.buf, &L.in_proj.buf, &L.out_proj.buf, &L.conv_w.buf, &L.conv_b.buf, &L.dt_bias.buf,
              &L.A.buf, &L.D.buf, &L.gated_norm.buf, &L.qkv.buf, &L.o.buf, &L.up.buf, &L.down.buf}) {
            total += static_cast<int64_t>(b->bytes());
        }
    }
    total += static_cast<int64_t>(w.patch_embed.buf.bytes() + w.tile_pos.bytes() + w.prefix.bytes() +
                                  w.proj_norm.buf.bytes() + w.proj_fc1.buf.bytes() + w.proj_fc2.buf.bytes());
    for (const auto& B : w.vit) {
        for (const DeviceBuffer* b :
             {&B.norm1_w.buf, &B.norm1_b.buf, &B.norm2_w.buf, &B.norm2_b.buf, &B.qkv_b, &B.proj_b.buf,
              &B.fc1_b, &B.fc2_b.buf, &B.qkv.buf, &B.proj.buf, &B.fc1.buf, &B.fc2.buf}) {
            total += static_cast<int64_t>(b->bytes());
        }
    }
    return total;
}

}  // namespace

GpuWeights random_weights(const ModelConfig& cfg, uint64_t seed, cudaStream_t stream) {
    RandomDraw draw{seed, stream};
    const LlmConfig& c = cfg.llm;
    const int64_t d = c.hidden_size;
    GpuWeights w;
    w.embeddings = draw.matrix(c.vocab_size, d);
    w.lm_head = draw.matrix(c.vocab_size, d);
    w.norm_f = draw.vector(d, 0.9f, 1.1f);
    w.layers.resize(static_cast<size_t>(c.n_layers()));
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        GpuLayer& L = w.layers[static_cast<size_t>(i)];
        L.kind = c.layers[i];
        L.norm = draw.vector(d, 0.9f, 1.1f);
        switch (L.kind) {
            case LayerKind::kMamba2:
                L.in_proj = draw.matrix(c.in_proj_dim(), d);
                L.out_proj = draw.matrix(d, c.d_inner());
                L.conv_w = draw.vector(c.conv_dim() * c.conv_kernel, -0.5f, 0.5f);
                L.conv_b = draw.vector(c.conv_dim(), -0.1f, 0.1f);
                L.dt_bias = draw.vector(c.mamba_n_heads, -4.5f, -2.0f);  // softplus → dt ≈ 0.01–0.13
                L.A = draw.vector(c.mamba_n_heads, -16.0f, -1.0f);
                L.D = draw.vector(c.mamba_n_heads, 0.5f, 1.5f);
                L.gated_norm = draw.vector(c.d_inner(), 0.9f, 1.1f);
                break;
            case LayerKind::kAttention:
                L.qkv = draw.matrix((c.n_heads + 2 * c.n_kv_heads) * c.head_dim, d);
                L.o = draw.matrix(d, c.n_heads * c.head_dim);
                break;
            case LayerKind::kMlp:
                L.up = draw.matrix(c.intermediate_size, d);
                L.down = draw.matrix(d, c.intermediate_size);
                break;
        }
    }
    if (cfg.has_vision) {
        const VisionConfig& v = cfg.vision;
        const int64_t width = v.hidden_size, side = cfg.image.patches_per_side(),
                      s = cfg.image.shuffle_factor();
        w.patch_embed = draw.matrix(width, 3 * v.patch_size * v.patch_size);
        w.tile_pos = draw.raw_bf16(side * side * width, -0.1f, 0.1f);
        w.n_prefix = v.n_prefix > 0 ? v.n_prefix : 8;
        w.prefix = draw.raw_bf16(w.n_prefix * width, -0.5f, 0.5f);
        w.vit.resize(static_cast<size_t>(v.n_layers));
        for (auto& B : w.vit) {
            B.norm1_w = draw.vector(width, 0.9f, 1.1f);
            B.norm1_b = draw.vector(width, -0.05f, 0.05f);
            B.norm2_w = draw.vector(width, 0.9f, 1.1f);
            B.norm2_b = draw.vector(width, -0.05f, 0.05f);
            B.qkv = draw.matrix(3 * width, width);
            B.qkv_b = draw.raw_bf16(3 * width, -0.05f, 0.05f);
            B.proj = draw.matrix(width, width);
            B.proj_b = draw.vector(width, -0.05f, 0.05f);
            B.fc1 = draw.matrix(v.intermediate_size, width);
            B.fc1_b = draw.raw_bf16(v.intermediate_size, -0.05f, 0.05f);
            B.fc2 = draw.matrix(width, v.intermediate_size);
            B.fc2_b = draw.vector(width, -0.05f, 0.05f);
        }
        w.proj_norm = draw.vector(width * s * s, 0.9f, 1.1f);
        w.proj_fc1 = draw.matrix(cfg.projector_hidden, width * s * s);
        w.proj_fc2 = draw.matrix(d, cfg.projector_hidden);
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream));
    w.bytes = bytes_of(w);
    return w;
}

}  // namespace surf::model::cuda
