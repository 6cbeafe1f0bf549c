#include "model/cuda/gpu_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

// The FP8 GEMM reads K-major E4M3 rows 16 bytes at a time.
void check_fp8_cols(const std::string& name, int64_t cols) {
    if (cols % 16 != 0)
        throw Error(ErrorKind::kUnsupported, name + ": " + std::to_string(cols) +
                                                 " input features; the CUDA FP8 GEMM needs a multiple of 16");
}

// A [rows, cols] bf16 or fp32 matrix on the device quantized per output row (Quantize::kFp8), one part with
// dynamic per-token activations.
GpuMatrix quantize_on_device(const void* x, kc::DType dtype, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
    GpuMatrix m;
    m.rows = rows, m.cols = cols, m.fp8 = true;
    m.buf = DeviceBuffer(static_cast<size_t>(rows * cols));
    m.w_scale = DeviceBuffer(static_cast<size_t>(rows) * 4);
    m.parts = {{rows, 0.0f}};
    kc::Fp8QuantParams p;
    p.x = x, p.x_dtype = dtype, p.q = m.buf.as<uint8_t>(), p.scale = m.w_scale.as<float>(), p.rows = rows,
    p.cols = cols;
    kc::quantize_e4m3(p, stream);
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return m;
}

// An FP8 checkpoint's scale tensor as the CPU loader reads it: finite and positive, else kFormat.
std::vector<float> checked_scale(const Checkpoint& ckpt, const WeightSpec& spec) {
    std::vector<float> values = ckpt.to_f32(spec.name);
    for (float v : values) {
        if (!(std::isfinite(v) && v > 0.0f))
            throw Error(ErrorKind::kFormat, ckpt.get(spec.name).file + ": " + spec.name + " holds " +
                                                std::to_string(v) + ", not a finite positive scale");
    }
    return values;
}

// A language-model linear layer's row blocks (q, k, v, or one weight) and the scale tensors that follow each.
struct LinearGroup {
    std::vector<WeightSpec> weights, scales;
    int64_t rows() const {
        int64_t n = 0;
        for (const WeightSpec& w : weights) n += w.shape[0];
        return n;
    }
};

// Where a weight's values come from: the checkpoint (upload_weights) or a seeded draw on the GPU
// (random_weights). Both give the engine's form of a role: A = −exp(A_log), the position table resized to
// a tile's patch grid, zeros for a conv bias the model lacks.
class Source {
public:
    virtual ~Source() = default;
    virtual GpuMatrix matrix(const WeightSpec& s) = 0;
    virtual GpuMatrix stacked(const std::vector<WeightSpec>& parts) = 0;  // row blocks (q, k, v → qkv)
    // A language-model linear layer (its row blocks stacked): bf16, or FP8 from the checkpoint or quantized.
    virtual GpuMatrix linear(const LinearGroup& group) = 0;
    virtual GpuVector vector(const WeightSpec& s) = 0;       // fp32
    virtual DeviceBuffer bf16(const WeightSpec& s) = 0;      // bf16, any shape
    virtual DeviceBuffer tile_pos(const WeightSpec& s) = 0;  // [side², width] bf16
    virtual int64_t rows(const WeightSpec& s) = 0;
};

class CheckpointSource final : public Source {
public:
    CheckpointSource(const ModelConfig& cfg, const Checkpoint& ckpt, cudaStream_t stream, Quantize quantize)
        : cfg_(cfg), ckpt_(ckpt), stream_(stream), quantize_(quantize) {}

    GpuMatrix matrix(const WeightSpec& s) override {
        const bool tied = s.role == WeightRole::kLmHead && !ckpt_.has(s.name);
        return cuda::matrix(ckpt_, tied ? weight_prefixes(cfg_).backbone + "embeddings.weight" : s.name,
                            stream_);
    }
    GpuMatrix stacked(const std::vector<WeightSpec>& parts) override {
        std::vector<std::string> names;
        for (const WeightSpec& p : parts) names.push_back(p.name);
        return cuda::stacked(ckpt_, names, stream_);
    }
    GpuMatrix linear(const LinearGroup& g) override {
        const bool e4m3 = g.weights.front().dtype == WeightDType::kE4M3;
        for (const WeightSpec& w : g.weights) {
            if ((w.dtype == WeightDType::kE4M3) != e4m3)
                throw Error(ErrorKind::kUnsupported,
                            ckpt_.path() + ": " + w.name +
                                ": q, k and v quantized differently (the CUDA backend "
                                "stacks them into one GEMM)");
        }
        if (e4m3) return checkpoint_fp8(g);
        if (quantize_ != Quantize::kFp8)
            return g.weights.size() == 1 ? matrix(g.weights.front()) : stacked(g.weights);
        std::vector<float> host;
        for (const WeightSpec& w : g.weights) {
            const std::vector<float> part = ckpt_.to_f32(w.name);
            host.insert(host.end(), part.begin(), part.end());
        }
        const int64_t rows = g.rows(), cols = static_cast<int64_t>(host.size()) / rows;
        check_fp8_cols(g.weights.front().name, cols);
        DeviceBuffer staging(host.size() * 4);
        SURF_CUDA_CHECK(
            cudaMemcpyAsync(staging.get(), host.data(), staging.bytes(), cudaMemcpyHostToDevice, stream_));
        return quantize_on_device(staging.get(), kc::DType::kF32, rows, cols, stream_);
    }
    GpuVector vector(const WeightSpec& s) override {
        if (s.role == WeightRole::kMambaConvB && !cfg_.llm.conv_bias)
            return vec(std::vector<float>(static_cast<size_t>(cfg_.llm.conv_dim()), 0.0f), stream_);
        std::vector<float> host = ckpt_.to_f32(s.name);
        if (s.role == WeightRole::kMambaALog)
            for (float& a : host) a = -std::exp(a);
        return vec(host, stream_);
    }
    DeviceBuffer bf16(const WeightSpec& s) override {
        return upload_bf16(to_bf16(ckpt_.get(s.name)), stream_);
    }
    int64_t rows(const WeightSpec& s) override { return ckpt_.get(s.name).shape[0]; }

    // CPE: the stored grid resized to a tile's patch grid once, in fp32 (spec §4.3), then bf16.
    DeviceBuffer tile_pos(const WeightSpec& s) override {
        const int64_t width = cfg_.vision.hidden_size, side = cfg_.image.patches_per_side();
        const std::vector<float> pos = ckpt_.to_f32(s.name);
        const int64_t n_pos = static_cast<int64_t>(pos.size()) / width;
        const int64_t grid = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(n_pos))));
        std::vector<float> chw(pos.size()), resized(static_cast<size_t>(width * side * side));
        for (int64_t i = 0; i < n_pos; ++i)
            for (int64_t ch = 0; ch < width; ++ch) chw[ch * n_pos + i] = pos[i * width + ch];
        surf::kernels::cpu::bilinear_resize({chw.data(), resized.data(), width, grid, grid, side, side});
        std::vector<uint16_t> out(resized.size());
        for (int64_t i = 0; i < side * side; ++i)
            for (int64_t ch = 0; ch < width; ++ch)
                out[i * width + ch] = f32_to_bf16(resized[ch * side * side + i]);
        return upload_bf16(out, stream_);
    }

private:
    // An FP8 checkpoint's layer: E4M3 codes as stored, each part's weight scale on its rows (a per-tensor
    // scale repeated) and its static input scale (ModelOpt) or dynamic per-token activations.
    GpuMatrix checkpoint_fp8(const LinearGroup& g) {
        GpuMatrix m;
        m.fp8 = true;
        std::vector<uint8_t> codes;
        std::vector<float> scales;
        for (const WeightSpec& w : g.weights) {
            const TensorInfo& info = ckpt_.get(w.name);
            const uint8_t* data = static_cast<const uint8_t*>(info.data);
            for (size_t i = 0; i < info.n_bytes; ++i) {
                if ((data[i] & 0x7f) == 0x7f)
                    throw Error(ErrorKind::kFormat, info.file + ": " + w.name + " holds the E4M3 NaN code");
            }
            codes.insert(codes.end(), data, data + info.n_bytes);
            m.cols = info.shape[1];
            GpuMatrix::Part part{info.shape[0], 0.0f};
            for (const WeightSpec& sc : g.scales) {
                if (sc.scales != w.role) continue;
                const std::vector<float> v = checked_scale(ckpt_, sc);
                if (sc.role == WeightRole::kInputScale) {
                    part.input_scale = v[0];
                } else {
                    for (int64_t r = 0; r < part.rows; ++r) scales.push_back(v.size() == 1 ? v[0] : v[r]);
                }
            }
            m.rows += part.rows;
            m.parts.push_back(part);
        }
        check_fp8_cols(g.weights.front().name, m.cols);
        SURF_CHECK(static_cast<int64_t>(scales.size()) == m.rows, "FP8 weight scales: ", scales.size(),
                   " for ", m.rows, " rows");
        m.buf = DeviceBuffer(codes.size());
        SURF_CUDA_CHECK(
            cudaMemcpyAsync(m.buf.get(), codes.data(), codes.size(), cudaMemcpyHostToDevice, stream_));
        m.w_scale = vec(scales, stream_).buf;
        return m;
    }

    const ModelConfig& cfg_;
    const Checkpoint& ckpt_;
    cudaStream_t stream_;
    Quantize quantize_;
};

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

// The range a vector or bias of a role is drawn from: norms ≈ 1, A itself in [−16, −1], dt_bias so that
// softplus gives dt ≈ 0.01–0.13, small biases.
std::pair<float, float> random_range(WeightRole role) {
    using R = WeightRole;
    switch (role) {
        case R::kMambaConvW: return {-0.5f, 0.5f};
        case R::kMambaConvB: return {-0.1f, 0.1f};
        case R::kMambaDtBias: return {-4.5f, -2.0f};
        case R::kMambaALog: return {-16.0f, -1.0f};
        case R::kMambaD: return {0.5f, 1.5f};
        case R::kPrefix: return {-0.5f, 0.5f};
        case R::kPosEmbed: return {-0.1f, 0.1f};
        case R::kVitNorm1B:
        case R::kVitNorm2B:
        case R::kVitQkvB:
        case R::kVitProjB:
        case R::kVitFc1B:
        case R::kVitFc2B: return {-0.05f, 0.05f};
        default: return {0.9f, 1.1f};
    }
}

class RandomSource final : public Source {
public:
    RandomSource(const ModelConfig& cfg, uint64_t seed, cudaStream_t stream, Quantize quantize)
        : cfg_(cfg), draw_{seed, stream}, quantize_(quantize) {}

    GpuMatrix matrix(const WeightSpec& s) override {
        const WeightSpec r = resolve(s);
        return draw_.matrix(r.shape[0], numel(r) / r.shape[0]);
    }
    GpuMatrix stacked(const std::vector<WeightSpec>& parts) override {
        int64_t rows = 0;
        for (const WeightSpec& p : parts) rows += p.shape[0];
        return draw_.matrix(rows, parts.front().shape[1]);
    }
    GpuMatrix linear(const LinearGroup& g) override {
        GpuMatrix m = g.weights.size() == 1 ? matrix(g.weights.front()) : stacked(g.weights);
        if (quantize_ != Quantize::kFp8) return m;
        check_fp8_cols(g.weights.front().name, m.cols);
        return quantize_on_device(m.buf.get(), kc::DType::kBF16, m.rows, m.cols, draw_.stream);
    }
    GpuVector vector(const WeightSpec& s) override {
        const auto [lo, hi] = random_range(s.role);
        return draw_.vector(numel(resolve(s)), lo, hi);
    }
    DeviceBuffer bf16(const WeightSpec& s) override {
        const auto [lo, hi] = random_range(s.role);
        return draw_.raw_bf16(numel(resolve(s)), lo, hi);
    }
    DeviceBuffer tile_pos(const WeightSpec& s) override {
        const int64_t side = cfg_.image.patches_per_side();
        const auto [lo, hi] = random_range(s.role);
        return draw_.raw_bf16(side * side * cfg_.vision.hidden_size, lo, hi);
    }
    int64_t rows(const WeightSpec& s) override { return resolve(s).shape[0]; }

private:
    WeightSpec resolve(const WeightSpec& s) const { return resolved_from_config(cfg_, s, 8); }
    static int64_t numel(const WeightSpec& s) {
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        return n;
    }

    const ModelConfig& cfg_;
    RandomDraw draw_;
    Quantize quantize_;
};

int64_t bytes_of(const GpuWeights& w) {
    int64_t total =
        static_cast<int64_t>(w.embeddings.buf.bytes() + w.lm_head.buf.bytes() + w.norm_f.buf.bytes());
    for (const auto& L : w.layers) {
        for (const DeviceBuffer* b :
             {&L.norm.buf, &L.in_proj.buf, &L.out_proj.buf, &L.conv_w.buf, &L.conv_b.buf, &L.dt_bias.buf,
              &L.A.buf, &L.D.buf, &L.gated_norm.buf, &L.qkv.buf, &L.o.buf, &L.up.buf, &L.down.buf,
              &L.in_proj.w_scale, &L.out_proj.w_scale, &L.qkv.w_scale, &L.o.w_scale, &L.up.w_scale,
              &L.down.w_scale}) {
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

// The language-model linear layers, where the forward reads them.
GpuMatrix& linear_slot(GpuWeights& w, WeightRole role, int64_t layer) {
    using R = WeightRole;
    GpuLayer& L = w.layers[static_cast<size_t>(layer)];
    switch (role) {
        case R::kMambaInProj: return L.in_proj;
        case R::kMambaOutProj: return L.out_proj;
        case R::kAttnQ:
        case R::kAttnK:
        case R::kAttnV: return L.qkv;
        case R::kAttnO: return L.o;
        case R::kMlpUp: return L.up;
        case R::kMlpDown: return L.down;
        default: SURF_CHECK(false, "not a language-model linear role");
    }
    return L.in_proj;
}

// Whether s continues the pending linear layer: a scale of one of its weights, or k / v after q / k.
bool continues(const LinearGroup& g, const WeightSpec& s) {
    using R = WeightRole;
    if (g.weights.empty()) return false;
    if (s.role == R::kWeightScale || s.role == R::kInputScale) return true;
    const R last = g.weights.back().role;
    return (s.role == R::kAttnK && last == R::kAttnQ) || (s.role == R::kAttnV && last == R::kAttnK);
}

// Puts the pending linear layer (its weights and scales, complete) where the forward reads it.
void flush(GpuWeights& w, LinearGroup& g, Source& src) {
    if (g.weights.empty()) return;
    const WeightSpec& first = g.weights.front();
    linear_slot(w, first.role, first.layer) = src.linear(g);
    g = LinearGroup{};
}

// Puts one table entry where the GPU forward reads it. A language-model linear layer waits in `pending`
// until its scales (FP8 checkpoints) and, for q and k, the other row blocks of qkv have come.
void bind(GpuWeights& w, const WeightSpec& s, Source& src, LinearGroup& pending) {
    using R = WeightRole;
    if (!continues(pending, s)) flush(w, pending, src);
    if (s.lm_linear) {
        pending.weights.push_back(s);
        return;
    }
    if (s.role == R::kWeightScale || s.role == R::kInputScale) {
        pending.scales.push_back(s);
        return;
    }
    const size_t i = static_cast<size_t>(std::max<int64_t>(s.layer, 0));
    switch (s.role) {
        case R::kIgnored: break;
        case R::kEmbeddings: w.embeddings = src.matrix(s); break;
        case R::kLayerNorm: w.layers[i].norm = src.vector(s); break;
        case R::kFinalNorm: w.norm_f = src.vector(s); break;
        case R::kLmHead: w.lm_head = src.matrix(s); break;
        case R::kMambaConvW: w.layers[i].conv_w = src.vector(s); break;
        case R::kMambaConvB: w.layers[i].conv_b = src.vector(s); break;
        case R::kMambaDtBias: w.layers[i].dt_bias = src.vector(s); break;
        case R::kMambaALog: w.layers[i].A = src.vector(s); break;
        case R::kMambaD: w.layers[i].D = src.vector(s); break;
        case R::kMambaNorm: w.layers[i].gated_norm = src.vector(s); break;
        case R::kMambaInProj:
        case R::kMambaOutProj:
        case R::kAttnQ:
        case R::kAttnK:
        case R::kAttnV:
        case R::kAttnO:
        case R::kMlpUp:
        case R::kMlpDown:
        case R::kWeightScale:
        case R::kInputScale: break;  // (above)
        case R::kPatchEmbed: w.patch_embed = src.matrix(s); break;
        case R::kPosEmbed: w.tile_pos = src.tile_pos(s); break;
        case R::kPrefix:
            w.n_prefix = src.rows(s);
            w.prefix = src.bf16(s);
            break;
        case R::kVitNorm1W: w.vit[i].norm1_w = src.vector(s); break;
        case R::kVitNorm1B: w.vit[i].norm1_b = src.vector(s); break;
        case R::kVitQkvW: w.vit[i].qkv = src.matrix(s); break;
        case R::kVitQkvB: w.vit[i].qkv_b = src.bf16(s); break;
        case R::kVitProjW: w.vit[i].proj = src.matrix(s); break;
        case R::kVitProjB: w.vit[i].proj_b = src.vector(s); break;
        case R::kVitNorm2W: w.vit[i].norm2_w = src.vector(s); break;
        case R::kVitNorm2B: w.vit[i].norm2_b = src.vector(s); break;
        case R::kVitFc1W: w.vit[i].fc1 = src.matrix(s); break;
        case R::kVitFc1B: w.vit[i].fc1_b = src.bf16(s); break;
        case R::kVitFc2W: w.vit[i].fc2 = src.matrix(s); break;
        case R::kVitFc2B: w.vit[i].fc2_b = src.vector(s); break;
        case R::kProjNorm: w.proj_norm = src.vector(s); break;
        case R::kProjFc1: w.proj_fc1 = src.matrix(s); break;
        case R::kProjFc2: w.proj_fc2 = src.matrix(s); break;
    }
}

GpuWeights build(const ModelConfig& cfg, Source& src) {
    GpuWeights w;
    w.layers.resize(static_cast<size_t>(cfg.llm.n_layers()));
    for (int64_t i = 0; i < cfg.llm.n_layers(); ++i)
        w.layers[static_cast<size_t>(i)].kind = cfg.llm.layers[i];
    if (cfg.has_vision) w.vit.resize(static_cast<size_t>(cfg.vision.n_layers));
    LinearGroup pending;
    for_each_weight(cfg, [&](const WeightSpec& spec) { bind(w, spec, src, pending); });
    flush(w, pending, src);
    w.bytes = bytes_of(w);
    return w;
}

}  // namespace

GpuWeights upload_weights(ModelConfig& cfg, const Checkpoint& ckpt, cudaStream_t stream, Quantize quantize) {
    if (quantize != Quantize::kNone && cfg.quant.method != QuantMethod::kNone) {
        throw Error(ErrorKind::kInvalidArgument,
                    std::string("quantize ") + quantize_name(quantize) + ": " + ckpt.path() +
                        " is already quantized (" + cfg.quant.source + ": " +
                        quant_method_name(cfg.quant.method) + "); load it without quantizing");
    }
    validate_checkpoint(cfg, ckpt);
    CheckpointSource src(cfg, ckpt, stream, quantize);
    return build(cfg, src);
}

GpuWeights random_weights(const ModelConfig& cfg, uint64_t seed, cudaStream_t stream, Quantize quantize) {
    RandomSource src(cfg, seed, stream, quantize);
    GpuWeights w = build(cfg, src);
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return w;
}

void quantize_vision(GpuWeights& w, cudaStream_t stream) {
    for (GpuVitBlock& b : w.vit) {
        for (GpuMatrix* m : {&b.qkv, &b.fc1, &b.fc2}) {
            // The FP8 GEMMs need k a multiple of 16; a layer without it stays bf16 (vit_linear takes either).
            if (m->fp8 || m->cols % 16 != 0) continue;
            GpuMatrix q = quantize_on_device(m->buf.get(), kc::DType::kBF16, m->rows, m->cols, stream);
            w.bytes += static_cast<int64_t>(q.buf.bytes() + q.w_scale.bytes()) -
                       static_cast<int64_t>(m->buf.bytes());
            *m = std::move(q);  // quantize_on_device has synchronised: the bf16 buffer is free to go
        }
    }
}

bool has_fp8(const GpuWeights& w) {
    return fp8_max_cols(w) > 0;
}

int64_t fp8_max_cols(const GpuWeights& w) {
    int64_t cols = 0;
    for (const GpuLayer& L : w.layers) {
        for (const GpuMatrix* m : {&L.in_proj, &L.out_proj, &L.qkv, &L.o, &L.up, &L.down}) {
            if (m->fp8) cols = std::max(cols, m->cols);
        }
    }
    return cols;
}

}  // namespace surf::model::cuda
