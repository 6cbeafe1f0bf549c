#include "model/cuda/gpu_model.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/checkpoint/safetensors.h"
#include "model/cuda/supported_shapes.h"

namespace surf::model::cuda {

namespace {

template <typename T>
T* offset(const DeviceBuffer& b, int64_t elements) {
    return b.as<T>() + elements;
}

// A non-blocking stream at the device's highest priority when `priority` (its kernels take SMs ahead of
// the other stream's, which then fills what they leave idle), else at the default (lowest) one.
cudaStream_t prioritised_stream(bool priority) {
    int least = 0, greatest = 0;
    SURF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t stream = nullptr;
    SURF_CUDA_CHECK(
        cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority ? greatest : least));
    return stream;
}

}  // namespace

std::unique_ptr<GpuModel> GpuModel::load(const std::string& dir, const GpuLimits& limits) {
    ModelConfig cfg = load_model_config(dir);
    check_cuda_shapes(cfg);  // before the weights are read or anything is allocated on the device
    const Checkpoint ckpt = Checkpoint::open(dir);
    cudaStream_t stream = prioritised_stream(limits.lm_stream_priority);
    GpuWeights w = upload_weights(cfg, ckpt, stream, limits.quantize);
    std::unique_ptr<GpuModel> model(new GpuModel(std::move(cfg), std::move(w), limits, stream));
    model->image_token_id_ = static_cast<int32_t>(model->cfg_.image_context_token_id);
    return model;
}

std::unique_ptr<GpuModel> GpuModel::random(ModelConfig cfg, const GpuLimits& limits, uint64_t seed) {
    check_cuda_shapes(cfg);
    cudaStream_t stream = prioritised_stream(limits.lm_stream_priority);
    GpuWeights w = random_weights(cfg, seed, stream, limits.quantize);
    return std::unique_ptr<GpuModel>(new GpuModel(std::move(cfg), std::move(w), limits, stream));
}

namespace {

// lm_head with zero rows appended up to `rows`: the logits GEMM then has an N that is a multiple of 64
// (cuBLASLt's kernels for an N like 131,075 read the weights at a third of the bandwidth); the padding
// columns of the logits are never sampled.
GpuMatrix pad_rows(GpuMatrix m, int64_t rows, cudaStream_t stream) {
    if (m.rows >= rows) return m;
    GpuMatrix out;
    out.rows = rows, out.cols = m.cols;
    out.buf = DeviceBuffer(static_cast<size_t>(rows * m.cols) * 2);
    SURF_CUDA_CHECK(
        cudaMemcpyAsync(out.buf.get(), m.buf.get(), m.buf.bytes(), cudaMemcpyDeviceToDevice, stream));
    SURF_CUDA_CHECK(
        cudaMemsetAsync(out.buf.as<uint8_t>() + m.buf.bytes(), 0, out.buf.bytes() - m.buf.bytes(), stream));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
}

// The settings an FP8 GEMM context (the language model's or the vision tower's) takes from the limits.
void configure_fp8_gemm(kc::Fp8GemmContext& ctx, const GpuLimits& limits) {
    ctx.set_autotune(limits.autotune_gemms);
    ctx.set_bf16_products(limits.fp8_bf16_products);
    ctx.set_fast_accum(limits.fp8_fast_accum);
    ctx.set_cutlass(limits.fp8_cutlass ? kc::Fp8GemmContext::Cutlass::kTuned
                                       : kc::Fp8GemmContext::Cutlass::kNever);
}

}  // namespace

GpuModel::GpuModel(ModelConfig cfg, GpuWeights w, const GpuLimits& limits, cudaStream_t stream)
    : cfg_(std::move(cfg)), w_(std::move(w)), limits_(limits), stream_(stream) {
    w_.lm_head = pad_rows(std::move(w_.lm_head), logits_stride(), stream_);
    kc::set_programmatic_launch(limits_.programmatic_launch);
    gemm_ = std::make_unique<kc::GemmContext>();
    vision_gemm_ = std::make_unique<kc::GemmContext>();
    gemm_->set_autotune(limits_.autotune_gemms);
    gemm_->set_reuse_tuned_in_bucket(limits_.gemm_reuse_tuned_in_bucket);
    gemm_->set_small_m_kernel(limits_.small_m_kernel ? kc::GemmContext::SmallM::kTuned
                                                     : kc::GemmContext::SmallM::kNever);
    gemm_->set_small_m_k_split(limits_.small_m_k_split);
    vision_gemm_->set_autotune(limits_.autotune_gemms);
    const auto wgmma = limits_.gemm_wgmma         ? kc::GemmContext::WgmmaGemm::kTuned
                       : limits_.gemm_wgmma_relu2 ? kc::GemmContext::WgmmaGemm::kReluSquared
                                                  : kc::GemmContext::WgmmaGemm::kNever;
    gemm_->set_wgmma_gemm(wgmma);
    vision_gemm_->set_wgmma_gemm(wgmma);
    vision_gemm_->set_sm_count_target(limits_.vision_gemm_sms);
    gemm_->set_sm_count_target(limits_.lm_gemm_sms);
    if (has_fp8(w_)) {
        fp8_gemm_ = std::make_unique<kc::Fp8GemmContext>();
        configure_fp8_gemm(*fp8_gemm_, limits_);
        fp8_gemm_->set_small_m_kernel(limits_.small_m_kernel);
        if (limits_.vit_fp8 && cfg_.has_vision) {
            quantize_vision(w_, stream_);
            vision_fp8_gemm_ = std::make_unique<kc::Fp8GemmContext>();
            configure_fp8_gemm(*vision_fp8_gemm_, limits_);
        }
    }
    vision_stream_ = prioritised_stream(limits_.vision_stream_priority);
    vision_events_.assign(32, nullptr);
    for (cudaEvent_t& ev : vision_events_)
        SURF_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    SURF_CUDA_CHECK(cudaEventCreateWithFlags(&staging_free_, cudaEventDisableTiming));
    SURF_CUDA_CHECK(cudaEventCreateWithFlags(&meta_uploaded_, cudaEventDisableTiming));
    SURF_CUDA_CHECK(cudaEventRecord(staging_free_, vision_stream_));
    branch_stream_ = prioritised_stream(true);
    int device = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&device));
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&device_sms_, cudaDevAttrMultiProcessorCount, device));
    for (cudaEvent_t* ev : {&branch_fork_, &branch_ready_, &branch_join_})
        SURF_CUDA_CHECK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
    allocate();
    if (limits_.decode_graphs)
        graphs_ = std::make_unique<DecodeGraphs>(std::min(limits_.max_seqs, limits_.max_tokens));
}

GpuModel::~GpuModel() {
    green_.clear();  // their streams synchronised and destroyed first
    if (vision_stream_) {
        cudaStreamSynchronize(vision_stream_);
        cudaStreamDestroy(vision_stream_);
    }
    for (cudaEvent_t ev : vision_events_) {
        if (ev) cudaEventDestroy(ev);
    }
    if (branch_stream_) {
        cudaStreamSynchronize(branch_stream_);
        cudaStreamDestroy(branch_stream_);
    }
    for (cudaEvent_t ev : {branch_fork_, branch_ready_, branch_join_}) {
        if (ev) cudaEventDestroy(ev);
    }
    if (staging_free_) cudaEventDestroy(staging_free_);
    if (meta_uploaded_) cudaEventDestroy(meta_uploaded_);
    if (stream_) {
        cudaStreamSynchronize(stream_);
        cudaStreamDestroy(stream_);
    }
}

std::vector<kc::GemmContext::TuneRecord> GpuModel::gemm_tune_log() const {
    std::vector<kc::GemmContext::TuneRecord> log = gemm_->tune_log();
    const auto& vision = vision_gemm_->tune_log();
    log.insert(log.end(), vision.begin(), vision.end());
    return log;
}

std::string GpuModel::fp8_gemm_report() const {
    if (!fp8_gemm_) return "";
    const int64_t n = fp8_gemm_->planned(), cutlass = fp8_gemm_->cutlass_planned();
    return "FP8 GEMM shapes planned: " + std::to_string(n) + " (" +
           std::to_string(fp8_gemm_->epilogue_planned()) + " with cuBLASLt's epilogue pass), " +
           std::to_string(cutlass) + " of them on CUTLASS" +
           (kc::Fp8GemmContext::cutlass_available() ? "" : " (not built)") +
           "; rows of at most 4 on fp8_gemv";
}

std::pair<int64_t, double> GpuModel::gemm_tune_totals() const {
    int64_t n = 0;
    double ms = 0;
    for (const kc::GemmContext* g : {gemm_.get(), vision_gemm_.get()}) {
        for (const auto& r : g->tune_log()) ms += r.tune_ms;
        n += static_cast<int64_t>(g->tune_log().size());
    }
    return {n, ms * 1e-3};
}

int64_t GpuModel::state_bytes_per_slot() const {
    const LlmConfig& c = cfg_.llm;
    const int64_t conv = c.conv_dim() * (c.conv_kernel - 1) * 2;
    const int64_t ssm = c.mamba_n_heads * c.mamba_head_dim * c.d_state *
                        static_cast<int64_t>(kc::dtype_size(limits_.ssm_state));
    return c.count(LayerKind::kMamba2) * (conv + ssm);
}

int64_t GpuModel::kv_bytes_per_token() const {
    const LlmConfig& c = cfg_.llm;
    return c.count(LayerKind::kAttention) * 2 * c.n_kv_heads * c.head_dim * 2;
}

void GpuModel::allocate() {
    check_limits();
    allocate_state();
    allocate_activations();
    allocate_step_workspaces();
    if (cfg_.has_vision) allocate_vision();
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::check_limits() const {
    const GpuLimits& L = limits_;
    if (L.max_tokens <= 0 || L.max_seqs <= 0 || L.max_slots <= 0 || L.page_size <= 0 || L.kv_pages <= 0) {
        throw Error(ErrorKind::kInvalidArgument, "GPU limits must be positive");
    }
    if (L.decode_tma_blocks_per_sm != 1 && L.decode_tma_blocks_per_sm != 2) {
        throw Error(ErrorKind::kInvalidArgument, "GPU limits: decode_tma_blocks_per_sm " +
                                                     std::to_string(L.decode_tma_blocks_per_sm) +
                                                     " (1 or 2)");
    }
    if (L.ssm_replay_window != 0 && (L.ssm_replay_window < 2 || L.ssm_replay_window > 32)) {
        throw Error(
            ErrorKind::kInvalidArgument,
            "GPU limits: ssm_replay_window " + std::to_string(L.ssm_replay_window) + " (0 = off, or 2..32)");
    }
}

void GpuModel::allocate_state() {
    const LlmConfig& c = cfg_.llm;
    const GpuLimits& L = limits_;
    const int64_t conv_slot = c.conv_dim() * (c.conv_kernel - 1);
    const int64_t ssm_slot = c.mamba_n_heads * c.mamba_head_dim * c.d_state;
    const int64_t kv_page = L.page_size * c.n_kv_heads * c.head_dim;
    // One slot and one page past the limits: the scratch targets of the padding rows of graph steps.
    scratch_slot_ = static_cast<int32_t>(L.max_slots);
    scratch_page_ = static_cast<int32_t>(L.kv_pages);
    const int64_t slots = L.max_slots + 1, pages = L.kv_pages + 1;
    conv_state_.resize(static_cast<size_t>(c.n_layers()));
    ssm_state_.resize(static_cast<size_t>(c.n_layers()));
    k_cache_.resize(static_cast<size_t>(c.n_layers()));
    v_cache_.resize(static_cast<size_t>(c.n_layers()));
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        if (c.layers[i] == LayerKind::kMamba2) {
            conv_state_[i] = DeviceBuffer(static_cast<size_t>(slots * conv_slot) * 2);
            ssm_state_[i] = DeviceBuffer(static_cast<size_t>(slots * ssm_slot) * kc::dtype_size(L.ssm_state));
            SURF_CUDA_CHECK(cudaMemsetAsync(conv_state_[i].get(), 0, conv_state_[i].bytes(), stream_));
            SURF_CUDA_CHECK(cudaMemsetAsync(ssm_state_[i].get(), 0, ssm_state_[i].bytes(), stream_));
            if (L.ssm_replay_window > 0) {
                const int64_t entry =
                    kc::ssm_replay_entry_elems(c.mamba_n_heads, c.mamba_head_dim, c.n_groups, c.d_state);
                if (ssm_replay_.empty()) ssm_replay_.resize(static_cast<size_t>(c.n_layers()));
                ssm_replay_[i] = DeviceBuffer(static_cast<size_t>(slots * L.ssm_replay_window * entry) * 2);
            }
        } else if (c.layers[i] == LayerKind::kAttention) {
            k_cache_[i] = DeviceBuffer(static_cast<size_t>(pages * kv_page) * 2);
            v_cache_[i] = DeviceBuffer(static_cast<size_t>(pages * kv_page) * 2);
        }
    }
    if (!ssm_replay_.empty()) {
        replay_count_.assign(static_cast<size_t>(slots), 0);
        fold_meta_ = DeviceBuffer(2 * sizeof(int32_t));
    }
}

void GpuModel::allocate_activations() {
    const LlmConfig& c = cfg_.llm;
    const GpuLimits& L = limits_;
    const int64_t T = L.max_tokens, d = c.hidden_size;
    const int64_t qkv_dim = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim;
    const int64_t big = std::max({c.count(LayerKind::kMamba2) ? c.in_proj_dim() : 0,
                                  c.count(LayerKind::kAttention) ? qkv_dim : 0,
                                  c.count(LayerKind::kMlp) ? c.intermediate_size : 0});
    const int64_t wide = std::max({d, c.d_inner(), c.n_heads * c.head_dim});
    residual_ = DeviceBuffer(static_cast<size_t>(T * d) * 4);
    normed_ = DeviceBuffer(static_cast<size_t>(T * wide) * 2);
    big_ = DeviceBuffer(static_cast<size_t>(T * big) * 2);
    xbc_ = DeviceBuffer(static_cast<size_t>(T * std::max<int64_t>(c.conv_dim(), 1)) * 2);
    y_ = DeviceBuffer(static_cast<size_t>(T * std::max<int64_t>(c.d_inner(), 1)) * 4);
    logits_ = DeviceBuffer(static_cast<size_t>(L.max_logit_rows * logits_stride()) * 4);
    logit_in_ = DeviceBuffer(static_cast<size_t>(L.max_logit_rows * d) * 4);
    sampled_tokens_ = DeviceBuffer(static_cast<size_t>(L.max_logit_rows) * 4);
    SURF_CUDA_CHECK(cudaMemset(sampled_tokens_.get(), 0, sampled_tokens_.bytes()));
    // The trailing layers' GEMMs also run over the rows past a step's logits rows (LogitRows::gemm_rows),
    // adding into them: never read, but initialized.
    SURF_CUDA_CHECK(cudaMemset(logit_in_.get(), 0, logit_in_.bytes()));
    image_rows_ = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(L.max_image_rows, 1) * d) * 2);
    if (fp8_gemm_) {
        fp8_cols_ = fp8_max_cols(w_);
        fp8_x_ = DeviceBuffer(static_cast<size_t>(T * fp8_cols_));
        fp8_x_scale_ = DeviceBuffer(static_cast<size_t>(T) * 4);
    }
}

void GpuModel::allocate_step_workspaces() {
    const LlmConfig& c = cfg_.llm;
    const GpuLimits& L = limits_;
    const int64_t T = L.max_tokens, d = c.hidden_size;
    const int64_t max_pages = (L.max_context + L.page_size - 1) / L.page_size;
    if (c.count(LayerKind::kMamba2)) {
        kc::SsdVarlenParams sp;
        sp.n_tok = T, sp.n_seq = L.max_seqs, sp.H = c.mamba_n_heads, sp.P = c.mamba_head_dim,
        sp.G = c.n_groups, sp.N = c.d_state;
        sp.chunk = c.chunk_size;
        ssd_ws_ = DeviceBuffer(kc::ssd_workspace_bytes(sp));
    }
    if (c.count(LayerKind::kAttention)) allocate_attention_workspaces(max_pages);
    kc::EmbedParams ep;
    ep.n_tok = T, ep.n_seq = L.max_seqs, ep.dim = d;
    embed_ws_ = DeviceBuffer(kc::embed_workspace_bytes(ep));

    const size_t meta_words =
        static_cast<size_t>(2 * T + 13 * L.max_seqs + 8 + 2 * L.max_seqs * max_pages) +
        static_cast<size_t>(L.max_seqs) +
        static_cast<size_t>(std::max(L.max_seqs, L.max_logit_rows));  // the last: fed_from
    meta_host_ = PinnedBuffer(meta_words * 4);
    meta_dev_ = DeviceBuffer(meta_words * 4);
}

void GpuModel::allocate_attention_workspaces(int64_t max_pages) {
    const LlmConfig& c = cfg_.llm;
    const GpuLimits& L = limits_;
    const int64_t T = L.max_tokens, pages = L.kv_pages + 1;
    // The split count depends on the batch and the longest context, so size for the worst case.
    kc::AttentionDecodeParams dp;
    dp.n_heads = c.n_heads, dp.n_kv_heads = c.n_kv_heads, dp.head_dim = c.head_dim;
    dp.page_size = L.page_size, dp.max_pages_per_seq = max_pages, dp.cache_pages = pages;
    size_t ws = 0;
    // The split count never exceeds min(⌈len/128⌉, ⌈8·SMs / (batch·kv_heads)⌉) (attention.cu's plan), so
    // this bounds every length a step can plan with; the planned sizes at powers of two are checked too.
    const int64_t sms = device_sms_;
    for (int64_t b = 1; b <= L.max_seqs; ++b) {
        const int64_t base = b * c.n_kv_heads;
        const int64_t splits = std::min((L.max_context + 127) / 128, (8 * sms + base - 1) / base);
        ws = std::max(ws, static_cast<size_t>(b * c.n_heads * splits * (c.head_dim + 1)) * 4);
        for (int64_t len = L.page_size; len < 2 * L.max_context; len *= 2) {
            dp.batch = b, dp.max_seq_len = std::min(len, L.max_context);
            // Either kernel (GpuLimits::decode_attention_tma flips between steps, set_step_options), the
            // TMA one at either grid it plans with (one or two blocks an SM: its split plan depends on
            // the grid).
            for (const auto& [tma, per_sm] : {std::pair{false, 1}, std::pair{true, 1}, std::pair{true, 2}}) {
                dp.tma = tma, dp.persistent_blocks_per_sm = per_sm;
                ws = std::max(ws, kc::attention_decode_workspace_bytes(dp));
            }
        }
    }
    decode_ws_ = DeviceBuffer(ws);
    // Split-KV prefill: up to 4 splits of up to 2,048 query tokens (longer steps have blocks enough).
    if (L.attention_splits)
        prefill_ws_ = DeviceBuffer(
            kc::attention_prefill_workspace_bytes(std::min<int64_t>(T, 2048), c.n_heads, c.head_dim, 4));
}

void GpuModel::allocate_vision() {
    const GpuLimits& L = limits_;
    const int64_t S = cfg_.image.tile_size, side = cfg_.image.patches_per_side(),
                  width = cfg_.vision.hidden_size;
    const int64_t n_patch = side * side, n_tok_tile = w_.n_prefix + n_patch, tiles = L.max_tiles;
    const int64_t rows = tiles * n_tok_tile, s = cfg_.image.shuffle_factor();
    vit_pixels_ = DeviceBuffer(static_cast<size_t>(tiles * 3 * S * S) * 4);
    vit_patches_ = DeviceBuffer(
        static_cast<size_t>(tiles * n_patch * 3 * cfg_.image.patch_size * cfg_.image.patch_size) * 2);
    vit_h_ = DeviceBuffer(static_cast<size_t>(rows * width) * 4);
    vit_ln_ = DeviceBuffer(static_cast<size_t>(rows * width) * 2);
    vit_attn_ = DeviceBuffer(static_cast<size_t>(rows * width) * 2);
    vit_big_ = DeviceBuffer(
        static_cast<size_t>(rows * std::max({3 * width, cfg_.vision.intermediate_size, width})) * 2);
    if (vision_fp8_gemm_) {
        vit_q_ = DeviceBuffer(static_cast<size_t>(rows * std::max(width, cfg_.vision.intermediate_size)));
        vit_q_scale_ = DeviceBuffer(static_cast<size_t>(rows) * 4);
    }
    const int64_t proj_rows = tiles * cfg_.image.tokens_per_tile();
    vision_cu_ = DeviceBuffer(static_cast<size_t>(tiles + 1) * 4);
    std::vector<int32_t> cu(static_cast<size_t>(tiles + 1));
    for (int64_t t = 0; t <= tiles; ++t) cu[t] = static_cast<int32_t>(t * n_tok_tile);
    SURF_CUDA_CHECK(cudaMemcpy(vision_cu_.get(), cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
    vit_staging_ = PinnedBuffer(static_cast<size_t>(tiles * 3 * S * S) * 4);
    vit_shuffled_ =
        DeviceBuffer(static_cast<size_t>(proj_rows * std::max(width * s * s, cfg_.projector_hidden)) * 2 * 2);
}

// --- state slots and pages ----------------------------------------------------------------------------

namespace {

size_t conv_slot_bytes(const LlmConfig& c) {
    return static_cast<size_t>(c.conv_dim() * (c.conv_kernel - 1)) * 2;
}
size_t ssm_slot_bytes(const LlmConfig& c, kc::DType t) {
    return static_cast<size_t>(c.mamba_n_heads * c.mamba_head_dim * c.d_state) * kc::dtype_size(t);
}

}  // namespace

void GpuModel::fold_replay(size_t li, const int32_t* slots, const int32_t* counts, int64_t n,
                           cudaStream_t stream) {
    const LlmConfig& c = cfg_.llm;
    const GpuLayer& W = w_.layers[li];
    kc::SsuParams f;
    f.dt_bias = W.dt_bias.ptr(), f.A = W.A.ptr(), f.state = ssm_state_[li].get(),
    f.state_dtype = limits_.ssm_state, f.state_split = limits_.state_split_applies(), f.slots = slots;
    f.batch = n, f.H = c.mamba_n_heads, f.P = c.mamba_head_dim, f.G = c.n_groups, f.N = c.d_state;
    f.dt_min = c.dt_min, f.dt_max = c.dt_upper(), f.row_split = limits_.ssu_split;
    f.bulk_stage = limits_.ssu_bulk_stage;
    f.l2_evict_first = limits_.l2_evict_first;
    f.replay = ssm_replay_[li].get(), f.replay_count = counts, f.replay_window = limits_.ssm_replay_window;
    kc::ssm_replay_fold(f, stream);
}

void GpuModel::save_slot(int32_t slot, std::vector<uint8_t>& host) {
    const LlmConfig& c = cfg_.llm;
    const size_t cb = conv_slot_bytes(c), sb = ssm_slot_bytes(c, limits_.ssm_state);
    if (!replay_count_.empty() && replay_count_[slot] > 0) {
        const int32_t meta[2] = {slot, replay_count_[slot]};
        SURF_CUDA_CHECK(
            cudaMemcpyAsync(fold_meta_.get(), meta, sizeof(meta), cudaMemcpyHostToDevice, stream_));
        for (size_t li = 0; li < ssm_state_.size(); ++li) {
            if (c.layers[li] == LayerKind::kMamba2)
                fold_replay(li, fold_meta_.as<int32_t>(), fold_meta_.as<int32_t>() + 1, 1, stream_);
        }
        replay_count_[slot] = 0;
    }
    host.resize(static_cast<size_t>(c.count(LayerKind::kMamba2)) * (cb + sb));
    size_t at = 0;
    for (size_t li = 0; li < conv_state_.size(); ++li) {
        if (c.layers[li] != LayerKind::kMamba2) continue;
        SURF_CUDA_CHECK(cudaMemcpyAsync(host.data() + at, conv_state_[li].as<uint8_t>() + slot * cb, cb,
                                        cudaMemcpyDeviceToHost, stream_));
        SURF_CUDA_CHECK(cudaMemcpyAsync(host.data() + at + cb, ssm_state_[li].as<uint8_t>() + slot * sb, sb,
                                        cudaMemcpyDeviceToHost, stream_));
        at += cb + sb;
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::load_slot(int32_t slot, const std::vector<uint8_t>& host) {
    const LlmConfig& c = cfg_.llm;
    const size_t cb = conv_slot_bytes(c), sb = ssm_slot_bytes(c, limits_.ssm_state);
    SURF_CHECK(host.size() == static_cast<size_t>(c.count(LayerKind::kMamba2)) * (cb + sb),
               "load_slot: wrong size");
    if (!replay_count_.empty())
        replay_count_[slot] = 0;  // the host copy is the plain state (save_slot folds)
    size_t at = 0;
    for (size_t li = 0; li < conv_state_.size(); ++li) {
        if (c.layers[li] != LayerKind::kMamba2) continue;
        SURF_CUDA_CHECK(cudaMemcpyAsync(conv_state_[li].as<uint8_t>() + slot * cb, host.data() + at, cb,
                                        cudaMemcpyHostToDevice, stream_));
        SURF_CUDA_CHECK(cudaMemcpyAsync(ssm_state_[li].as<uint8_t>() + slot * sb, host.data() + at + cb, sb,
                                        cudaMemcpyHostToDevice, stream_));
        at += cb + sb;
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::save_pages(const std::vector<int32_t>& pages, std::vector<uint8_t>& host) const {
    const LlmConfig& c = cfg_.llm;
    const size_t pb = static_cast<size_t>(limits_.page_size * c.n_kv_heads * c.head_dim) * 2;
    host.resize(static_cast<size_t>(c.count(LayerKind::kAttention)) * 2 * pages.size() * pb);
    size_t at = 0;
    for (size_t li = 0; li < k_cache_.size(); ++li) {
        if (c.layers[li] != LayerKind::kAttention) continue;
        for (const DeviceBuffer* cache : {&k_cache_[li], &v_cache_[li]}) {
            for (int32_t p : pages) {
                SURF_CUDA_CHECK(cudaMemcpyAsync(host.data() + at, cache->as<uint8_t>() + p * pb, pb,
                                                cudaMemcpyDeviceToHost, stream_));
                at += pb;
            }
        }
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::load_pages(const std::vector<int32_t>& pages, const std::vector<uint8_t>& host) {
    const LlmConfig& c = cfg_.llm;
    const size_t pb = static_cast<size_t>(limits_.page_size * c.n_kv_heads * c.head_dim) * 2;
    SURF_CHECK(host.size() == static_cast<size_t>(c.count(LayerKind::kAttention)) * 2 * pages.size() * pb,
               "load_pages: wrong size");
    size_t at = 0;
    for (size_t li = 0; li < k_cache_.size(); ++li) {
        if (c.layers[li] != LayerKind::kAttention) continue;
        for (DeviceBuffer* cache : {&k_cache_[li], &v_cache_[li]}) {
            for (int32_t p : pages) {
                SURF_CUDA_CHECK(cudaMemcpyAsync(cache->as<uint8_t>() + p * pb, host.data() + at, pb,
                                                cudaMemcpyHostToDevice, stream_));
                at += pb;
            }
        }
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace surf::model::cuda
