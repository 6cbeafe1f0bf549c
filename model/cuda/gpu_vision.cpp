// The vision tower of GpuModel (C-RADIO ViT + pixel shuffle + mlp1 projector), run on its own stream over
// a batch of images at a time, and the tickets that order language-model steps after it.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <optional>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/cuda/gpu_model.h"

namespace surf::model::cuda {

uint64_t GpuModel::record_vision() {
    const uint64_t ticket = ++vision_issued_;
    cudaEvent_t& ev = vision_events_[ticket % vision_events_.size()];
    // The event's previous ticket must be complete before it is re-recorded (wait_vision relies on it).
    if (ticket > vision_events_.size()) SURF_CUDA_CHECK(cudaEventSynchronize(ev));
    SURF_CUDA_CHECK(cudaEventRecord(ev, vision_stream_));
    return ticket;
}

void GpuModel::wait_vision(uint64_t ticket) {
    if (ticket == kLatestVision) ticket = vision_issued_;
    if (ticket == 0 || ticket + vision_events_.size() <= vision_issued_) return;  // none, or long complete
    SURF_CHECK(ticket <= vision_issued_, "wait_vision: ticket ", ticket, " not issued (", vision_issued_,
               ")");
    SURF_CUDA_CHECK(cudaStreamWaitEvent(stream_, vision_events_[ticket % vision_events_.size()], 0));
}

int64_t GpuModel::encode_images(const float* pixels, int64_t n_tiles, int64_t first_row) {
    encode_images(std::vector<ImageJob>{{pixels, n_tiles, first_row}});
    return n_tiles * cfg_.image.tokens_per_tile();
}

uint64_t GpuModel::encode_images(const std::vector<ImageJob>& jobs) {
    if (!cfg_.has_vision) throw Error(ErrorKind::kUnsupported, cfg_.dir + ": this model has no vision tower");
    const int64_t n_tiles = count_image_tiles(jobs);
    embed_tiles(jobs, n_tiles);
    for (const GpuVitBlock& B : w_.vit) vit_block(B, n_tiles);
    project_images(jobs, n_tiles);
    return record_vision();
}

int64_t GpuModel::count_image_tiles(const std::vector<ImageJob>& jobs) const {
    const int64_t tpt = cfg_.image.tokens_per_tile();
    int64_t n_tiles = 0;
    for (const ImageJob& j : jobs) {
        if (j.n_tiles <= 0 || !j.pixels)
            throw Error(ErrorKind::kInvalidArgument, "encode_images: an image with no tiles");
        if (j.first_row < 0 || j.first_row + j.n_tiles * tpt > limits_.max_image_rows) {
            throw Error(ErrorKind::kResourceExhausted,
                        "encode_images: image rows " + std::to_string(j.first_row + j.n_tiles * tpt) +
                            " exceed the limit " + std::to_string(limits_.max_image_rows));
        }
        n_tiles += j.n_tiles;
    }
    if (n_tiles <= 0 || n_tiles > limits_.max_tiles) {
        throw Error(ErrorKind::kResourceExhausted, "encode_images: " + std::to_string(n_tiles) +
                                                       " tiles (limit " + std::to_string(limits_.max_tiles) +
                                                       ")");
    }
    return n_tiles;
}

// Pixels: host → pinned staging (once the previous upload has left it) → device, asynchronously; then the
// patches, their embeddings (no bias) into vit_ln_, and [prefix ; emb + pos] into the fp32 residual vit_h_.
void GpuModel::embed_tiles(const std::vector<ImageJob>& jobs, int64_t n_tiles) {
    const int64_t S = cfg_.image.tile_size, side = cfg_.image.patches_per_side(), ps = cfg_.image.patch_size;
    const int64_t n_patch = side * side, tile_floats = 3 * S * S, width = cfg_.vision.hidden_size;
    SURF_CUDA_CHECK(cudaEventSynchronize(staging_free_));
    const OpTimer::Scope timed(timer_.if_enabled(), "vit.upload_embed", vision_stream_);
    float* staging = vit_staging_.as<float>();
    for (const ImageJob& j : jobs) {
        std::memcpy(staging, j.pixels, static_cast<size_t>(j.n_tiles * tile_floats) * 4);
        staging += j.n_tiles * tile_floats;
    }
    SURF_CUDA_CHECK(cudaMemcpyAsync(vit_pixels_.get(), vit_staging_.get(),
                                    static_cast<size_t>(n_tiles * tile_floats) * 4, cudaMemcpyHostToDevice,
                                    vision_stream_));
    SURF_CUDA_CHECK(cudaEventRecord(staging_free_, vision_stream_));

    kc::patchify({vit_pixels_.as<float>(), vit_patches_.as<bf16>(), n_tiles, S, S, ps}, vision_stream_);
    kc::gemm(*vision_gemm_,
             {vit_patches_.as<bf16>(), w_.patch_embed.ptr(), nullptr, vit_ln_.get(), kc::DType::kBF16,
              n_tiles * n_patch, width, 3 * ps * ps},
             vision_stream_);
    kc::vit_tokens({vit_ln_.as<bf16>(), w_.tile_pos.as<bf16>(), w_.prefix.as<bf16>(), vit_h_.as<float>(),
                    n_tiles, n_patch, w_.n_prefix, width},
                   vision_stream_);
}

// One ViT block on every tile's tokens: x ← x + proj(Attn(LN1(x))), then x ← x + fc2(GELU(fc1(LN2(x)))).
void GpuModel::vit_block(const GpuVitBlock& B, int64_t n_tiles) {
    const int64_t side = cfg_.image.patches_per_side(), width = cfg_.vision.hidden_size;
    const int64_t n_tok_tile = w_.n_prefix + side * side, rows = n_tiles * n_tok_tile;
    const int64_t heads = cfg_.vision.n_heads, inter = cfg_.vision.intermediate_size;
    std::optional<OpTimer::Scope> timed;
    auto time_as = [&](const char* name) {
        timed.reset();
        timed.emplace(timer_.if_enabled(), name, vision_stream_);
    };
    kc::LayerNormParams ln;
    ln.x = vit_h_.get(), ln.x_dtype = kc::DType::kF32, ln.weight = B.norm1_w.ptr(), ln.bias = B.norm1_b.ptr();
    ln.y = vit_ln_.as<bf16>(), ln.rows = rows, ln.dim = width, ln.eps = cfg_.vision.norm_eps;
    time_as("vit.layernorm");
    kc::layernorm(ln, vision_stream_);
    time_as("vit.qkv");
    vit_linear(B.qkv, vit_ln_.as<bf16>(), B.qkv_b.get(), vit_big_.get(), kc::DType::kBF16, rows, 0.0f);
    const int32_t* cu_dev =
        vision_cu_.as<int32_t>();  // tile t's tokens are rows [t·n_tok_tile, (t+1)·n_tok_tile)
    kc::AttentionPrefillParams ap;
    ap.q = vit_big_.as<bf16>(), ap.k = vit_big_.as<bf16>() + width, ap.v = vit_big_.as<bf16>() + 2 * width;
    ap.q_stride = 3 * width, ap.kv_stride = 3 * width, ap.kv_rows = rows, ap.out = vit_attn_.as<bf16>(),
    ap.out_stride = width;
    ap.cu_seqlens_q = cu_dev, ap.cu_seqlens_k = cu_dev, ap.n_seq = n_tiles, ap.n_heads = heads,
    ap.n_kv_heads = heads;
    ap.head_dim = width / heads, ap.max_seqlen_q = n_tok_tile, ap.causal = false;
    ap.n_splits = 1;  // split-KV makes the vision pass slower (docs/BENCHMARKS.md)
    ap.rows_per_warp = limits_.attention_rows_per_warp;
    ap.wgmma_key_tile = limits_.vit_attention_wgmma_keys;
    ap.wgmma_warp_specialized = limits_.vit_attention_wgmma_warp_specialized;
    time_as("vit.attention");
    kc::attention_prefill(ap, vision_stream_);
    time_as("vit.proj");
    vit_linear(B.proj, vit_attn_.as<bf16>(), B.proj_b.ptr(), vit_h_.get(), kc::DType::kF32, rows, 1.0f);
    ln.weight = B.norm2_w.ptr(), ln.bias = B.norm2_b.ptr();
    time_as("vit.layernorm");
    kc::layernorm(ln, vision_stream_);
    time_as("vit.fc1");
    vit_linear(B.fc1, vit_ln_.as<bf16>(), B.fc1_b.get(), vit_big_.get(), kc::DType::kBF16, rows, 0.0f,
               limits_.vit_gelu_in_gemm ? kc::GemmActivation::kGeluTanh : kc::GemmActivation::kNone);
    if (!limits_.vit_gelu_in_gemm) {
        time_as("vit.gelu");
        kc::gelu_erf(vit_big_.as<bf16>(), rows * inter, vision_stream_);
    }
    time_as("vit.fc2");
    vit_linear(B.fc2, vit_big_.as<bf16>(), B.fc2_b.ptr(), vit_h_.get(), kc::DType::kF32, rows, 1.0f);
}

void GpuModel::vit_linear(const GpuMatrix& W, const bf16* x, const void* bias, void* y, kc::DType y_dtype,
                          int64_t rows, float beta, kc::GemmActivation act) {
    if (!W.fp8) {
        kc::GemmParams g{x, W.ptr(), bias, y, y_dtype, rows, W.rows, W.cols};
        g.beta = beta, g.activation = act;
        kc::gemm(*vision_gemm_, g, vision_stream_);
        return;
    }
    kc::Fp8QuantParams q;
    q.x = x, q.x_dtype = kc::DType::kBF16, q.q = vit_q_.as<uint8_t>(), q.scale = vit_q_scale_.as<float>();
    q.rows = rows, q.cols = W.cols;
    kc::quantize_e4m3(q, vision_stream_);
    kc::Fp8GemmParams p;
    p.x = q.q, p.x_scale = q.scale, p.w = W.codes(), p.w_scale = W.scales(), p.y = y, p.y_dtype = y_dtype;
    p.m = rows, p.n = W.rows, p.k = W.cols, p.beta = beta, p.bias = bias, p.activation = act;
    kc::fp8_gemm(*vision_fp8_gemm_, p, vision_stream_);
}

// Drops the prefix rows, pixel-shuffles, then mlp1: RMSNorm → Linear → ReLU² → Linear; the last GEMM runs per
// image, writing straight into that image's rows.
void GpuModel::project_images(const std::vector<ImageJob>& jobs, int64_t n_tiles) {
    const int64_t side = cfg_.image.patches_per_side(), width = cfg_.vision.hidden_size;
    const int64_t n_pre = w_.n_prefix, n_tok_tile = n_pre + side * side;
    const int64_t tpt = cfg_.image.tokens_per_tile(), s = cfg_.image.shuffle_factor(),
                  out_rows = n_tiles * tpt;
    const OpTimer::Scope timed(timer_.if_enabled(), "vit.shuffle_projector", vision_stream_);
    bf16* shuffled = vit_shuffled_.as<bf16>();
    bf16* hidden = shuffled + out_rows * std::max(width * s * s, cfg_.projector_hidden);
    kc::pixel_shuffle(
        {vit_h_.as<float>() + n_pre * width, kc::DType::kF32, shuffled, n_tiles, side, width, s, n_tok_tile},
        vision_stream_);
    kc::RmsNormParams rn;
    rn.x = shuffled, rn.x_dtype = kc::DType::kBF16, rn.weight = w_.proj_norm.ptr(), rn.y = hidden,
    rn.rows = out_rows, rn.dim = width * s * s, rn.eps = 1e-5f;
    kc::rmsnorm(rn, vision_stream_);
    kc::GemmParams fc1{hidden,   w_.proj_fc1.ptr(),     nullptr,      shuffled, kc::DType::kBF16,
                       out_rows, cfg_.projector_hidden, width * s * s};
    fc1.activation = kc::GemmActivation::kReluSquared;
    kc::gemm(*vision_gemm_, fc1, vision_stream_);
    int64_t row = 0;
    for (const ImageJob& j : jobs) {
        const int64_t n = j.n_tiles * tpt;
        kc::gemm(*vision_gemm_,
                 {shuffled + row * cfg_.projector_hidden, w_.proj_fc2.ptr(), nullptr,
                  image_rows_.as<bf16>() + j.first_row * cfg_.llm.hidden_size, kc::DType::kBF16, n,
                  cfg_.llm.hidden_size, cfg_.projector_hidden},
                 vision_stream_);
        row += n;
    }
}

double GpuModel::warm_up_vision(const std::vector<std::vector<int64_t>>& batches) {
    if (!cfg_.has_vision) return 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t S = cfg_.image.tile_size, tpt = cfg_.image.tokens_per_tile();
    int64_t most = 0;
    for (size_t i = 0; i < batches.size(); ++i) {
        const std::vector<int64_t>& b = batches[i];
        const bool bad_image =
            std::any_of(b.begin(), b.end(), [&](int64_t n) { return n <= 0 || n > limits_.max_tiles; });
        const int64_t tiles = bad_image ? 0 : std::accumulate(b.begin(), b.end(), int64_t{0});
        if (b.empty() || bad_image || tiles > limits_.max_tiles || tiles * tpt > limits_.max_image_rows) {
            throw Error(ErrorKind::kInvalidArgument,
                        "warm_up_vision: pass " + std::to_string(i) + " (" + std::to_string(b.size()) +
                            " images) is empty, has an image of no tiles, or exceeds the limits (" +
                            std::to_string(limits_.max_tiles) + " tiles, " +
                            std::to_string(limits_.max_image_rows) + " image rows)");
        }
        most = std::max(most, tiles);
    }
    const std::vector<float> pixels(static_cast<size_t>(most * 3 * S * S), 0.0f);
    const kc::TuneOnFirstUse tuning(*vision_gemm_);  // one pass a shape instead of three
    if (vision_fp8_gemm_) vision_fp8_gemm_->set_tune_on_first_use(true);
    // The largest pass first: the FP8 GEMMs' product scratch then grows once, not once a pass size (a
    // grown-out scratch stays allocated for graphs captured earlier).
    std::vector<std::vector<int64_t>> order = batches;
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return std::accumulate(a.begin(), a.end(), int64_t{0}) >
               std::accumulate(b.begin(), b.end(), int64_t{0});
    });
    for (const std::vector<int64_t>& b : order) {
        std::vector<ImageJob> jobs;
        int64_t tile = 0;
        for (int64_t n : b) {
            jobs.push_back({pixels.data() + tile * 3 * S * S, n, tile * tpt});
            tile += n;
        }
        encode_images(jobs);
    }
    if (vision_fp8_gemm_) vision_fp8_gemm_->set_tune_on_first_use(false);
    SURF_CUDA_CHECK(cudaStreamSynchronize(vision_stream_));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t GpuModel::put_image_rows(const bf16* device_rows, int64_t n_rows, int64_t first_row) {
    if (first_row < 0 || first_row + n_rows > limits_.max_image_rows)
        throw Error(ErrorKind::kResourceExhausted, "put_image_rows: past the image-row limit");
    const size_t row_bytes = static_cast<size_t>(cfg_.llm.hidden_size) * 2;
    SURF_CUDA_CHECK(cudaMemcpyAsync(image_rows_.as<bf16>() + first_row * cfg_.llm.hidden_size, device_rows,
                                    n_rows * row_bytes, cudaMemcpyDeviceToDevice, vision_stream_));
    return record_vision();
}

void GpuModel::copy_vision_features(int64_t n_tiles, std::vector<float>& host) const {
    const int64_t side = cfg_.image.patches_per_side(), width = cfg_.vision.hidden_size,
                  n_tok_tile = w_.n_prefix + side * side;
    std::vector<float> all(static_cast<size_t>(n_tiles * n_tok_tile * width));
    SURF_CUDA_CHECK(
        cudaMemcpyAsync(all.data(), vit_h_.get(), all.size() * 4, cudaMemcpyDeviceToHost, vision_stream_));
    SURF_CUDA_CHECK(cudaStreamSynchronize(vision_stream_));
    host.clear();
    for (int64_t t = 0; t < n_tiles; ++t) {
        const float* begin = all.data() + (t * n_tok_tile + w_.n_prefix) * width;
        host.insert(host.end(), begin, begin + side * side * width);
    }
}

}  // namespace surf::model::cuda
