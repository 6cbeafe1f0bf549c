#include "model/cuda/gpu_model.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/safetensors.h"

namespace surf::model::cuda {

namespace {

template <typename T>
T* offset(const DeviceBuffer& b, int64_t elements) { return b.as<T>() + elements; }

}  // namespace

std::unique_ptr<GpuModel> GpuModel::load(const std::string& dir, const GpuLimits& limits) {
    ModelConfig cfg = load_model_config(dir);
    const Checkpoint ckpt = Checkpoint::open(dir);
    cudaStream_t stream;
    SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GpuWeights w = upload_weights(cfg, ckpt, stream);
    std::unique_ptr<GpuModel> model(new GpuModel(std::move(cfg), std::move(w), limits, stream));
    model->image_token_id_ = static_cast<int32_t>(model->cfg_.image_context_token_id);
    return model;
}

std::unique_ptr<GpuModel> GpuModel::random(ModelConfig cfg, const GpuLimits& limits, uint64_t seed) {
    cudaStream_t stream;
    SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GpuWeights w = random_weights(cfg, seed, stream);
    return std::unique_ptr<GpuModel>(new GpuModel(std::move(cfg), std::move(w), limits, stream));
}

GpuModel::GpuModel(ModelConfig cfg, GpuWeights w, const GpuLimits& limits, cudaStream_t stream)
    : cfg_(std::move(cfg)), w_(std::move(w)), limits_(limits), stream_(stream) {
    gemm_ = std::make_unique<kc::GemmContext>();
    vision_gemm_ = std::make_unique<kc::GemmContext>();
    SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&vision_stream_, cudaStreamNonBlocking));
    SURF_CUDA_CHECK(cudaEventCreateWithFlags(&vision_done_, cudaEventDisableTiming));
    allocate();
}

GpuModel::~GpuModel() {
    if (vision_stream_) {
        cudaStreamSynchronize(vision_stream_);
        cudaStreamDestroy(vision_stream_);
    }
    if (vision_done_) cudaEventDestroy(vision_done_);
    if (stream_) {
        cudaStreamSynchronize(stream_);
        cudaStreamDestroy(stream_);
    }
}

int64_t GpuModel::state_bytes_per_slot() const {
    const LlmConfig& c = cfg_.llm;
    const int64_t conv = c.conv_dim() * (c.conv_kernel - 1) * 2;
    const int64_t ssm = c.mamba_n_heads * c.mamba_head_dim * c.d_state * static_cast<int64_t>(kc::dtype_size(limits_.ssm_state));
    return c.count(LayerKind::kMamba2) * (conv + ssm);
}

int64_t GpuModel::kv_bytes_per_token() const {
    const LlmConfig& c = cfg_.llm;
    return c.count(LayerKind::kAttention) * 2 * c.n_kv_heads * c.head_dim * 2;
}

void GpuModel::allocate() {
    const LlmConfig& c = cfg_.llm;
    const GpuLimits& L = limits_;
    if (L.max_tokens <= 0 || L.max_seqs <= 0 || L.max_slots <= 0 || L.page_size <= 0 || L.kv_pages <= 0) {
        throw Error(ErrorKind::kInvalidArgument, "GPU limits must be positive");
    }
    const int64_t T = L.max_tokens, d = c.hidden_size;
    const int64_t conv_slot = c.conv_dim() * (c.conv_kernel - 1);
    const int64_t ssm_slot = c.mamba_n_heads * c.mamba_head_dim * c.d_state;
    const int64_t kv_page = L.page_size * c.n_kv_heads * c.head_dim;
    conv_state_.resize(static_cast<size_t>(c.n_layers()));
    ssm_state_.resize(static_cast<size_t>(c.n_layers()));
    k_cache_.resize(static_cast<size_t>(c.n_layers()));
    v_cache_.resize(static_cast<size_t>(c.n_layers()));
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        if (c.layers[i] == LayerKind::kMamba2) {
            conv_state_[i] = DeviceBuffer(static_cast<size_t>(L.max_slots * conv_slot) * 2);
            ssm_state_[i] = DeviceBuffer(static_cast<size_t>(L.max_slots * ssm_slot) * kc::dtype_size(L.ssm_state));
            SURF_CUDA_CHECK(cudaMemsetAsync(conv_state_[i].get(), 0, conv_state_[i].bytes(), stream_));
            SURF_CUDA_CHECK(cudaMemsetAsync(ssm_state_[i].get(), 0, ssm_state_[i].bytes(), stream_));
        } else if (c.layers[i] == LayerKind::kAttention) {
            k_cache_[i] = DeviceBuffer(static_cast<size_t>(L.kv_pages * kv_page) * 2);
            v_cache_[i] = DeviceBuffer(static_cast<size_t>(L.kv_pages * kv_page) * 2);
        }
    }
    const int64_t qkv_dim = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim;
    const int64_t big = std::max({c.count(LayerKind::kMamba2) ? c.in_proj_dim() : 0, c.count(LayerKind::kAttention) ? qkv_dim : 0,
                                  c.count(LayerKind::kMlp) ? c.intermediate_size : 0});
    const int64_t wide = std::max({d, c.d_inner(), c.n_heads * c.head_dim});
    residual_ = DeviceBuffer(static_cast<size_t>(T * d) * 4);
    normed_ = DeviceBuffer(static_cast<size_t>(T * wide) * 2);
    big_ = DeviceBuffer(static_cast<size_t>(T * big) * 2);
    xbc_ = DeviceBuffer(static_cast<size_t>(T * std::max<int64_t>(c.conv_dim(), 1)) * 2);
    y_ = DeviceBuffer(static_cast<size_t>(T * std::max<int64_t>(c.d_inner(), 1)) * 4);
    logits_ = DeviceBuffer(static_cast<size_t>(L.max_logit_rows * c.vocab_size) * 4);
    logit_in_ = DeviceBuffer(static_cast<size_t>(L.max_logit_rows * d) * 4);
    image_rows_ = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(L.max_image_rows, 1) * d) * 2);

    const int64_t max_pages = (L.max_context + L.page_size - 1) / L.page_size;
    if (c.count(LayerKind::kMamba2)) {
        kc::SsdVarlenParams sp;
        sp.n_tok = T, sp.n_seq = L.max_seqs, sp.H = c.mamba_n_heads, sp.P = c.mamba_head_dim, sp.G = c.n_groups, sp.N = c.d_state;
        sp.chunk = c.chunk_size;
        ssd_ws_ = DeviceBuffer(kc::ssd_workspace_bytes(sp));
    }
    if (c.count(LayerKind::kAttention)) {
        // The split count depends on the batch and the longest context, so size for the worst case.
        kc::AttentionDecodeParams dp;
        dp.n_heads = c.n_heads, dp.n_kv_heads = c.n_kv_heads, dp.head_dim = c.head_dim;
        dp.page_size = L.page_size, dp.max_pages_per_seq = max_pages;
        size_t ws = 0;
        for (int64_t b = 1; b <= L.max_seqs; ++b) {
            for (int64_t len = L.page_size; len < 2 * L.max_context; len *= 2) {
                dp.batch = b, dp.max_seq_len = std::min(len, L.max_context);
                ws = std::max(ws, kc::attention_decode_workspace_bytes(dp));
            }
        }
        decode_ws_ = DeviceBuffer(ws);
    }
    kc::EmbedParams ep;
    ep.n_tok = T, ep.n_seq = L.max_seqs, ep.dim = d;
    embed_ws_ = DeviceBuffer(kc::embed_workspace_bytes(ep));

    const size_t meta_words = static_cast<size_t>(2 * T + 10 * L.max_seqs + 8 + 2 * L.max_seqs * max_pages) + static_cast<size_t>(L.max_seqs);
    meta_host_ = PinnedBuffer(meta_words * 4);
    meta_dev_ = DeviceBuffer(meta_words * 4);

    if (cfg_.has_vision) {
        const int64_t S = cfg_.image.tile_size, side = cfg_.image.patches_per_side(), width = cfg_.vision.hidden_size;
        const int64_t n_patch = side * side, n_tok_tile = w_.n_prefix + n_patch, tiles = L.max_tiles;
        const int64_t rows = tiles * n_tok_tile, s = cfg_.image.shuffle_factor();
        vit_pixels_ = DeviceBuffer(static_cast<size_t>(tiles * 3 * S * S) * 4);
        vit_patches_ = DeviceBuffer(static_cast<size_t>(tiles * n_patch * 3 * cfg_.image.patch_size * cfg_.image.patch_size) * 2);
        vit_h_ = DeviceBuffer(static_cast<size_t>(rows * width) * 4);
        vit_ln_ = DeviceBuffer(static_cast<size_t>(rows * width) * 2);
        vit_attn_ = DeviceBuffer(static_cast<size_t>(rows * width) * 2);
        vit_big_ = DeviceBuffer(static_cast<size_t>(rows * std::max({3 * width, cfg_.vision.intermediate_size, width})) * 2);
        const int64_t proj_rows = tiles * cfg_.image.tokens_per_tile();
        vision_cu_ = DeviceBuffer(static_cast<size_t>(tiles + 1) * 4);
        vit_shuffled_ = DeviceBuffer(static_cast<size_t>(proj_rows * std::max(width * s * s, cfg_.projector_hidden)) * 2 * 2);
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

int64_t GpuModel::encode_images(const float* pixels, int64_t n_tiles, int64_t first_row) {
    if (!cfg_.has_vision) throw Error(ErrorKind::kUnsupported, cfg_.dir + ": this model has no vision tower");
    const int64_t S = cfg_.image.tile_size, side = cfg_.image.patches_per_side(), width = cfg_.vision.hidden_size;
    const int64_t n_patch = side * side, n_pre = w_.n_prefix, n_tok_tile = n_pre + n_patch, rows = n_tiles * n_tok_tile;
    const int64_t tpt = cfg_.image.tokens_per_tile(), s = cfg_.image.shuffle_factor(), out_rows = n_tiles * tpt;
    const int64_t heads = cfg_.vision.n_heads, inter = cfg_.vision.intermediate_size, ps = cfg_.image.patch_size;
    if (n_tiles <= 0 || n_tiles > limits_.max_tiles) {
        throw Error(ErrorKind::kResourceExhausted, "encode_images: " + std::to_string(n_tiles) + " tiles (limit " + std::to_string(limits_.max_tiles) + ")");
    }
    if (first_row < 0 || first_row + out_rows > limits_.max_image_rows) {
        throw Error(ErrorKind::kResourceExhausted, "encode_images: image rows " + std::to_string(first_row + out_rows) + " exceed the limit " +
                                                       std::to_string(limits_.max_image_rows));
    }
    SURF_CUDA_CHECK(cudaMemcpyAsync(vit_pixels_.get(), pixels, static_cast<size_t>(n_tiles * 3 * S * S) * 4, cudaMemcpyHostToDevice, vision_stream_));
    kc::patchify({vit_pixels_.as<float>(), vit_patches_.as<bf16>(), n_tiles, S, S, ps}, vision_stream_);
    // Patch embeddings (no bias) into vit_ln_, then [prefix ; emb + pos] into the fp32 residual.
    kc::gemm(*vision_gemm_, {vit_patches_.as<bf16>(), w_.patch_embed.ptr(), nullptr, vit_ln_.get(), kc::DType::kBF16, n_tiles * n_patch, width, 3 * ps * ps}, vision_stream_);
    kc::vit_tokens({vit_ln_.as<bf16>(), w_.tile_pos.as<bf16>(), w_.prefix.as<bf16>(), vit_h_.as<float>(), n_tiles, n_patch, n_pre, width}, vision_stream_);

    std::vector<int32_t> cu(static_cast<size_t>(n_tiles + 1));
    for (int64_t t = 0; t <= n_tiles; ++t) cu[t] = static_cast<int32_t>(t * n_tok_tile);
    int32_t* cu_dev = vision_cu_.as<int32_t>();
    SURF_CUDA_CHECK(cudaMemcpyAsync(cu_dev, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice, vision_stream_));
    for (const GpuVitBlock& B : w_.vit) {
        // x ← x + proj(Attn(LN1(x)))
        kc::LayerNormParams ln;
        ln.x = vit_h_.get(), ln.x_dtype = kc::DType::kF32, ln.weight = B.norm1_w.ptr(), ln.bias = B.norm1_b.ptr();
        ln.y = vit_ln_.as<bf16>(), ln.rows = rows, ln.dim = width, ln.eps = cfg_.vision.norm_eps;
        kc::layernorm(ln, vision_stream_);
        kc::gemm(*vision_gemm_, {vit_ln_.as<bf16>(), B.qkv.ptr(), B.qkv_b.get(), vit_big_.get(), kc::DType::kBF16, rows, 3 * width, width}, vision_stream_);
        kc::AttentionPrefillParams ap;
        ap.q = vit_big_.as<bf16>(), ap.k = vit_big_.as<bf16>() + width, ap.v = vit_big_.as<bf16>() + 2 * width;
        ap.q_stride = 3 * width, ap.kv_stride = 3 * width, ap.out = vit_attn_.as<bf16>(), ap.out_stride = width;
        ap.cu_seqlens_q = cu_dev, ap.cu_seqlens_k = cu_dev, ap.n_seq = n_tiles, ap.n_heads = heads, ap.n_kv_heads = heads;
        ap.head_dim = width / heads, ap.max_seqlen_q = n_tok_tile, ap.causal = false;
        kc::attention_prefill(ap, vision_stream_);
        kc::GemmParams proj{vit_attn_.as<bf16>(), B.proj.ptr(), B.proj_b.ptr(), vit_h_.get(), kc::DType::kF32, rows, width, width};
        proj.beta = 1.0f;
        kc::gemm(*vision_gemm_, proj, vision_stream_);
        // x ← x + fc2(GELU(fc1(LN2(x))))
        ln.weight = B.norm2_w.ptr(), ln.bias = B.norm2_b.ptr();
        kc::layernorm(ln, vision_stream_);
        kc::gemm(*vision_gemm_, {vit_ln_.as<bf16>(), B.fc1.ptr(), B.fc1_b.get(), vit_big_.get(), kc::DType::kBF16, rows, inter, width}, vision_stream_);
        kc::gelu_erf(vit_big_.as<bf16>(), rows * inter, vision_stream_);
        kc::GemmParams fc2{vit_big_.as<bf16>(), B.fc2.ptr(), B.fc2_b.ptr(), vit_h_.get(), kc::DType::kF32, rows, width, inter};
        fc2.beta = 1.0f;
        kc::gemm(*vision_gemm_, fc2, vision_stream_);
    }
    // Drop the prefix rows, pixel-shuffle, then mlp1: RMSNorm → Linear → ReLU² → Linear.
    bf16* shuffled = vit_shuffled_.as<bf16>();
    bf16* hidden = shuffled + out_rows * std::max(width * s * s, cfg_.projector_hidden);
    kc::pixel_shuffle({vit_h_.as<float>() + n_pre * width, kc::DType::kF32, shuffled, n_tiles, side, width, s, n_tok_tile}, vision_stream_);
    kc::RmsNormParams rn;
    rn.x = shuffled, rn.x_dtype = kc::DType::kBF16, rn.weight = w_.proj_norm.ptr(), rn.y = hidden, rn.rows = out_rows, rn.dim = width * s * s, rn.eps = 1e-5f;
    kc::rmsnorm(rn, vision_stream_);
    kc::gemm(*vision_gemm_, {hidden, w_.proj_fc1.ptr(), nullptr, shuffled, kc::DType::kBF16, out_rows, cfg_.projector_hidden, width * s * s}, vision_stream_);
    kc::relu_squared(shuffled, out_rows * cfg_.projector_hidden, vision_stream_);
    kc::gemm(*vision_gemm_, {shuffled, w_.proj_fc2.ptr(), nullptr, image_rows_.as<bf16>() + first_row * cfg_.llm.hidden_size, kc::DType::kBF16, out_rows,
                      cfg_.llm.hidden_size, cfg_.projector_hidden},
             vision_stream_);
    SURF_CUDA_CHECK(cudaEventRecord(vision_done_, vision_stream_));
    return out_rows;
}

void GpuModel::put_image_rows(const bf16* device_rows, int64_t n_rows, int64_t first_row) {
    if (first_row < 0 || first_row + n_rows > limits_.max_image_rows) throw Error(ErrorKind::kResourceExhausted, "put_image_rows: past the image-row limit");
    const size_t row_bytes = static_cast<size_t>(cfg_.llm.hidden_size) * 2;
    SURF_CUDA_CHECK(cudaMemcpyAsync(image_rows_.as<bf16>() + first_row * cfg_.llm.hidden_size, device_rows, n_rows * row_bytes,
                                    cudaMemcpyDeviceToDevice, vision_stream_));
    SURF_CUDA_CHECK(cudaEventRecord(vision_done_, vision_stream_));
}

void GpuModel::copy_vision_features(int64_t n_tiles, std::vector<float>& host) const {
    const int64_t side = cfg_.image.patches_per_side(), width = cfg_.vision.hidden_size, n_tok_tile = w_.n_prefix + side * side;
    std::vector<float> all(static_cast<size_t>(n_tiles * n_tok_tile * width));
    SURF_CUDA_CHECK(cudaMemcpyAsync(all.data(), vit_h_.get(), all.size() * 4, cudaMemcpyDeviceToHost, vision_stream_));
    SURF_CUDA_CHECK(cudaStreamSynchronize(vision_stream_));
    host.clear();
    for (int64_t t = 0; t < n_tiles; ++t) {
        const float* begin = all.data() + (t * n_tok_tile + w_.n_prefix) * width;
        host.insert(host.end(), begin, begin + side * side * width);
    }
}

}  // namespace surf::model::cuda

namespace surf::model::cuda {

int64_t GpuModel::forward(const std::vector<SeqStep>& seqs) {
    const LlmConfig& c = cfg_.llm;
    const GpuLimits& L = limits_;
    const int64_t n_seq = static_cast<int64_t>(seqs.size()), d = c.hidden_size;
    if (n_seq == 0) return 0;
    if (n_seq > L.max_seqs) throw Error(ErrorKind::kResourceExhausted, "forward: " + std::to_string(n_seq) + " sequences (limit " + std::to_string(L.max_seqs) + ")");
    Step& st = step_;
    st = Step{};
    int64_t logit_rows = 0;
    bool in_decode = true;
    for (const SeqStep& s : seqs) {
        const int64_t n = static_cast<int64_t>(s.tokens.size());
        if (n == 0) throw Error(ErrorKind::kInvalidArgument, "forward: a sequence with no tokens");
        if (s.slot < 0 || s.slot >= L.max_slots) throw Error(ErrorKind::kInvalidArgument, "forward: state slot " + std::to_string(s.slot) + " out of range");
        if (s.past + n > L.max_context) throw Error(ErrorKind::kResourceExhausted, "forward: context " + std::to_string(s.past + n) + " exceeds " + std::to_string(L.max_context));
        if (static_cast<int64_t>(s.pages.size()) * L.page_size < s.past + n) throw Error(ErrorKind::kInvalidArgument, "forward: KV pages do not cover the sequence");
        if (s.is_decode()) {
            if (!in_decode) throw Error(ErrorKind::kInvalidArgument, "forward: decode rows must come before prefill rows");
            ++st.n_dec;
        } else {
            in_decode = false;
            ++st.n_pre;
            st.n_pre_tok += n;
            st.max_q = std::max(st.max_q, n);
        }
        st.n_tok += n;
        st.max_pages = std::max<int64_t>(st.max_pages, static_cast<int64_t>(s.pages.size()));
        st.max_len = std::max(st.max_len, s.past + n);
        logit_rows += s.all_logits ? n : 1;
    }
    if (st.n_tok > L.max_tokens) throw Error(ErrorKind::kResourceExhausted, "forward: " + std::to_string(st.n_tok) + " tokens (limit " + std::to_string(L.max_tokens) + ")");
    if (logit_rows > L.max_logit_rows) throw Error(ErrorKind::kResourceExhausted, "forward: " + std::to_string(logit_rows) + " logits rows (limit " + std::to_string(L.max_logit_rows) + ")");

    // Per-step metadata, packed into one pinned buffer and uploaded with one copy.
    int32_t* host = meta_host_.as<int32_t>();
    int64_t at = 0;
    auto region = [&](int64_t words) {
        const int64_t start = at;
        at += words;
        return start;
    };
    const int64_t o_ids = region(st.n_tok), o_cu_all = region(n_seq + 1), o_img = region(n_seq);
    const int64_t o_slots_dec = region(st.n_dec), o_lens_dec = region(st.n_dec), o_bt_dec = region(st.n_dec * st.max_pages);
    const int64_t o_slots_pre = region(st.n_pre), o_cu_pre = region(st.n_pre + 1), o_lens_pre = region(st.n_pre);
    const int64_t o_bt_pre = region(st.n_pre * st.max_pages), o_slot_map = region(st.n_tok);
    const int64_t o_init = region((st.n_pre + 3) / 4);  // uint8 flags
    SURF_CHECK(static_cast<size_t>(at) * 4 <= meta_host_.bytes(), "metadata overflow");
    uint8_t* has_init = reinterpret_cast<uint8_t*>(host + o_init);
    int64_t tok = 0, pre_tok = 0;
    host[o_cu_all] = 0;
    host[o_cu_pre] = 0;
    for (int64_t i = 0; i < n_seq; ++i) {
        const SeqStep& s = seqs[i];
        const int64_t n = static_cast<int64_t>(s.tokens.size());
        for (int64_t j = 0; j < n; ++j) {
            host[o_ids + tok + j] = s.tokens[j];
            const int64_t pos = s.past + j;
            host[o_slot_map + tok + j] = static_cast<int32_t>(s.pages[pos / L.page_size] * L.page_size + pos % L.page_size);
        }
        tok += n;
        host[o_cu_all + i + 1] = static_cast<int32_t>(tok);
        host[o_img + i] = static_cast<int32_t>(std::max<int64_t>(s.image_row, 0));
        int32_t* bt;
        if (i < st.n_dec) {
            host[o_slots_dec + i] = s.slot;
            host[o_lens_dec + i] = static_cast<int32_t>(s.past + 1);
            bt = host + o_bt_dec + i * st.max_pages;
        } else {
            const int64_t k = i - st.n_dec;
            host[o_slots_pre + k] = s.slot;
            pre_tok += n;
            host[o_cu_pre + k + 1] = static_cast<int32_t>(pre_tok);
            host[o_lens_pre + k] = static_cast<int32_t>(s.past + n);
            has_init[k] = s.past > 0 ? 1 : 0;
            bt = host + o_bt_pre + k * st.max_pages;
        }
        for (int64_t p = 0; p < st.max_pages; ++p) bt[p] = p < static_cast<int64_t>(s.pages.size()) ? s.pages[p] : 0;
    }
    int32_t* dev = meta_dev_.as<int32_t>();
    SURF_CUDA_CHECK(cudaMemcpyAsync(dev, host, static_cast<size_t>(at) * 4, cudaMemcpyHostToDevice, stream_));
    st.slots_dec = dev + o_slots_dec, st.lens_dec = dev + o_lens_dec, st.bt_dec = dev + o_bt_dec;
    st.slots_pre = dev + o_slots_pre, st.cu_pre = dev + o_cu_pre, st.lens_pre = dev + o_lens_pre, st.bt_pre = dev + o_bt_pre;
    st.slot_mapping = dev + o_slot_map, st.has_init_pre = reinterpret_cast<const uint8_t*>(dev + o_init);

    // Embeddings (image rows merged) into the fp32 residual stream, once the vision stream has written them.
    SURF_CUDA_CHECK(cudaStreamWaitEvent(stream_, vision_done_, 0));
    kc::EmbedParams ep;
    ep.ids = dev + o_ids, ep.table = w_.embeddings.ptr(), ep.image_rows = image_rows_.as<bf16>(), ep.cu_seqlens = dev + o_cu_all;
    ep.image_row_offset = dev + o_img, ep.out = residual_.get(), ep.out_dtype = kc::DType::kF32;
    ep.n_tok = st.n_tok, ep.n_seq = n_seq, ep.dim = d, ep.vocab = w_.embeddings.rows, ep.n_image_rows = L.max_image_rows;
    ep.image_token_id = image_token_id_;
    kc::embed_tokens(ep, embed_ws_.get(), stream_);

    if (keep_layers_ && layer_out_.size() != static_cast<size_t>(c.n_layers())) {
        layer_out_.clear();
        for (int64_t i = 0; i < c.n_layers(); ++i) layer_out_.emplace_back(static_cast<size_t>(L.max_tokens * d) * 4);
    }
    for (size_t li = 0; li < w_.layers.size(); ++li) {
        const GpuLayer& layer = w_.layers[li];
        // h ← h + mixer(RMSNorm(h)); the mixer's last GEMM adds into the fp32 residual (beta = 1).
        kc::RmsNormParams rn;
        rn.x = residual_.get(), rn.x_dtype = kc::DType::kF32, rn.weight = layer.norm.ptr(), rn.y = normed_.as<bf16>();
        rn.rows = st.n_tok, rn.dim = d, rn.eps = c.norm_eps;
        kc::rmsnorm(rn, stream_);
        switch (layer.kind) {
            case LayerKind::kMamba2: mamba_layer(li, layer); break;
            case LayerKind::kAttention: attention_layer(li, layer); break;
            case LayerKind::kMlp: mlp_layer(layer); break;
        }
        if (keep_layers_) {
            SURF_CUDA_CHECK(cudaMemcpyAsync(layer_out_[li].get(), residual_.get(), static_cast<size_t>(st.n_tok * d) * 4, cudaMemcpyDeviceToDevice, stream_));
        }
    }

    // Logits rows: gather the rows that need logits, final norm, lm_head.
    int64_t row = 0, t0 = 0;
    for (const SeqStep& s : seqs) {
        const int64_t n = static_cast<int64_t>(s.tokens.size()), first = s.all_logits ? t0 : t0 + n - 1, count = s.all_logits ? n : 1;
        SURF_CUDA_CHECK(cudaMemcpyAsync(logit_in_.as<float>() + row * d, residual_.as<float>() + first * d, static_cast<size_t>(count * d) * 4,
                                        cudaMemcpyDeviceToDevice, stream_));
        row += count;
        t0 += n;
    }
    kc::RmsNormParams fn;
    fn.x = logit_in_.get(), fn.x_dtype = kc::DType::kF32, fn.weight = w_.norm_f.ptr(), fn.y = normed_.as<bf16>();
    fn.rows = logit_rows, fn.dim = d, fn.eps = c.norm_eps;
    kc::rmsnorm(fn, stream_);
    kc::gemm(*gemm_, {normed_.as<bf16>(), w_.lm_head.ptr(), nullptr, logits_.get(), kc::DType::kF32, logit_rows, w_.lm_head.rows, d}, stream_);
    return logit_rows;
}

void GpuModel::mamba_layer(size_t li, const GpuLayer& W) {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const int64_t proj = c.in_proj_dim(), d_inner = c.d_inner(), conv_dim = c.conv_dim(), H = c.mamba_n_heads, P = c.mamba_head_dim;
    const int64_t G = c.n_groups, N = c.d_state, d = c.hidden_size;
    bf16* zx = big_.as<bf16>();    // [n_tok, z | xBC | dt]
    bf16* xbc = xbc_.as<bf16>();   // [n_tok, conv_dim] after conv + SiLU
    float* y = y_.as<float>();     // [n_tok, H·P]
    kc::gemm(*gemm_, {normed_.as<bf16>(), W.in_proj.ptr(), nullptr, zx, kc::DType::kBF16, st.n_tok, proj, d}, stream_);
    const float dt_max = c.dt_max > 0.0f ? c.dt_max : std::numeric_limits<float>::infinity();
    if (st.n_dec > 0) {
        kc::ConvUpdateParams cu;
        cu.x = zx + d_inner, cu.x_stride = proj, cu.weight = W.conv_w.ptr(), cu.bias = W.conv_b.ptr();
        cu.state = conv_state_[li].get(), cu.state_dtype = kc::DType::kBF16, cu.slots = st.slots_dec, cu.out = xbc;
        cu.batch = st.n_dec, cu.channels = conv_dim, cu.K = c.conv_kernel;
        kc::causal_conv1d_update(cu, stream_);
        kc::SsuParams su;
        su.x = xbc, su.B = xbc + d_inner, su.C = xbc + d_inner + G * N, su.x_stride = conv_dim, su.bc_stride = conv_dim;
        su.dt_raw = zx + d_inner + conv_dim, su.dt_stride = proj, su.dt_bias = W.dt_bias.ptr(), su.A = W.A.ptr(), su.D = W.D.ptr();
        su.state = ssm_state_[li].get(), su.state_dtype = limits_.ssm_state, su.slots = st.slots_dec, su.y = y, su.y_dtype = kc::DType::kF32;
        su.batch = st.n_dec, su.H = H, su.P = P, su.G = G, su.N = N, su.dt_min = c.dt_min, su.dt_max = dt_max;
        kc::selective_state_update(su, stream_);
    }
    if (st.n_pre > 0) {
        const int64_t t0 = st.n_dec;
        kc::ConvVarlenParams cv;
        cv.x = zx + t0 * proj + d_inner, cv.x_stride = proj, cv.weight = W.conv_w.ptr(), cv.bias = W.conv_b.ptr();
        cv.state = conv_state_[li].get(), cv.state_dtype = kc::DType::kBF16, cv.cu_seqlens = st.cu_pre, cv.slots = st.slots_pre;
        cv.has_initial_state = st.has_init_pre, cv.out = xbc + t0 * conv_dim, cv.n_tok = st.n_pre_tok, cv.n_seq = st.n_pre;
        cv.channels = conv_dim, cv.K = c.conv_kernel;
        kc::causal_conv1d_varlen(cv, stream_);
        kc::SsdVarlenParams sp;
        bf16* xb = xbc + t0 * conv_dim;
        sp.x = xb, sp.B = xb + d_inner, sp.C = xb + d_inner + G * N, sp.x_stride = conv_dim, sp.bc_stride = conv_dim;
        sp.dt_raw = zx + t0 * proj + d_inner + conv_dim, sp.dt_stride = proj, sp.dt_bias = W.dt_bias.ptr(), sp.A = W.A.ptr(), sp.D = W.D.ptr();
        sp.state = ssm_state_[li].get(), sp.state_dtype = limits_.ssm_state, sp.cu_seqlens = st.cu_pre, sp.slots = st.slots_pre;
        sp.has_initial_state = st.has_init_pre, sp.y = y + t0 * H * P, sp.y_dtype = kc::DType::kF32;
        sp.n_tok = st.n_pre_tok, sp.n_seq = st.n_pre, sp.H = H, sp.P = P, sp.G = G, sp.N = N, sp.chunk = c.chunk_size;
        sp.dt_min = c.dt_min, sp.dt_max = dt_max;
        SURF_CHECK(kc::ssd_workspace_bytes(sp) <= ssd_ws_.bytes(), "ssd workspace too small");
        kc::ssd_varlen(sp, ssd_ws_.get(), stream_);
    }
    kc::GatedRmsNormParams gn;
    gn.y = y, gn.y_dtype = kc::DType::kF32, gn.z = zx, gn.z_stride = proj, gn.weight = W.gated_norm.ptr(), gn.out = normed_.as<bf16>();
    gn.rows = st.n_tok, gn.dim = d_inner, gn.group_size = d_inner / G, gn.eps = c.norm_eps;
    kc::gated_rmsnorm(gn, stream_);
    kc::GemmParams out{normed_.as<bf16>(), W.out_proj.ptr(), nullptr, residual_.get(), kc::DType::kF32, st.n_tok, d, d_inner};
    out.beta = 1.0f;
    kc::gemm(*gemm_, out, stream_);
}

void GpuModel::attention_layer(size_t li, const GpuLayer& W) {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const int64_t hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.n_kv_heads * hd, qkv_dim = q_dim + 2 * kv_dim, d = c.hidden_size;
    bf16* qkv = big_.as<bf16>();      // [n_tok, q | k | v]
    bf16* out = normed_.as<bf16>();   // [n_tok, n_heads, hd] (the norm output is consumed by the qkv GEMM first)
    kc::gemm(*gemm_, {normed_.as<bf16>(), W.qkv.ptr(), nullptr, qkv, kc::DType::kBF16, st.n_tok, qkv_dim, d}, stream_);
    kc::KvAppendParams ka;
    ka.k = qkv + q_dim, ka.v = qkv + q_dim + kv_dim, ka.k_stride = qkv_dim, ka.v_stride = qkv_dim;
    ka.k_cache = k_cache_[li].as<bf16>(), ka.v_cache = v_cache_[li].as<bf16>(), ka.slot_mapping = st.slot_mapping;
    ka.n_tok = st.n_tok, ka.n_kv_heads = c.n_kv_heads, ka.head_dim = hd;
    kc::kv_cache_append(ka, stream_);
    if (st.n_dec > 0) {
        kc::AttentionDecodeParams dp;
        dp.q = qkv, dp.q_stride = qkv_dim, dp.out = out, dp.k_cache = k_cache_[li].as<bf16>(), dp.v_cache = v_cache_[li].as<bf16>();
        dp.block_table = st.bt_dec, dp.seq_lens = st.lens_dec, dp.page_size = limits_.page_size, dp.max_pages_per_seq = st.max_pages;
        dp.batch = st.n_dec, dp.n_heads = c.n_heads, dp.n_kv_heads = c.n_kv_heads, dp.head_dim = hd, dp.max_seq_len = st.max_len;
        SURF_CHECK(kc::attention_decode_workspace_bytes(dp) <= decode_ws_.bytes(), "decode workspace too small");
        kc::attention_decode(dp, decode_ws_.get(), stream_);
    }
    if (st.n_pre > 0) {
        kc::AttentionPrefillParams ap;
        ap.q = qkv + st.n_dec * qkv_dim, ap.q_stride = qkv_dim, ap.out = out + st.n_dec * q_dim, ap.out_stride = q_dim;
        ap.cu_seqlens_q = st.cu_pre, ap.k_cache = k_cache_[li].as<bf16>(), ap.v_cache = v_cache_[li].as<bf16>();
        ap.block_table = st.bt_pre, ap.seq_lens_k = st.lens_pre, ap.page_size = limits_.page_size, ap.max_pages_per_seq = st.max_pages;
        ap.n_seq = st.n_pre, ap.n_heads = c.n_heads, ap.n_kv_heads = c.n_kv_heads, ap.head_dim = hd, ap.max_seqlen_q = st.max_q, ap.causal = true;
        kc::attention_prefill(ap, stream_);
    }
    kc::GemmParams o{out, W.o.ptr(), nullptr, residual_.get(), kc::DType::kF32, st.n_tok, d, q_dim};
    o.beta = 1.0f;
    kc::gemm(*gemm_, o, stream_);
}

void GpuModel::mlp_layer(const GpuLayer& W) {
    const LlmConfig& c = cfg_.llm;
    const int64_t n = step_.n_tok, d = c.hidden_size, inter = c.intermediate_size;
    bf16* hidden = big_.as<bf16>();  // [n_tok, intermediate]
    kc::gemm(*gemm_, {normed_.as<bf16>(), W.up.ptr(), nullptr, hidden, kc::DType::kBF16, n, inter, d}, stream_);
    kc::relu_squared(hidden, n * inter, stream_);
    kc::GemmParams down{hidden, W.down.ptr(), nullptr, residual_.get(), kc::DType::kF32, n, d, inter};
    down.beta = 1.0f;
    kc::gemm(*gemm_, down, stream_);
}

void GpuModel::copy_logits_to_host(int64_t rows, std::vector<float>& host) {
    host.resize(static_cast<size_t>(rows * cfg_.llm.vocab_size));
    SURF_CUDA_CHECK(cudaMemcpyAsync(host.data(), logits_.get(), host.size() * 4, cudaMemcpyDeviceToHost, stream_));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::copy_layer_output(int64_t layer, int64_t n_tok, std::vector<float>& host) const {
    SURF_CHECK(keep_layers_ && layer >= 0 && static_cast<size_t>(layer) < layer_out_.size(), "layer outputs not kept");
    host.resize(static_cast<size_t>(n_tok * cfg_.llm.hidden_size));
    SURF_CUDA_CHECK(cudaMemcpyAsync(host.data(), layer_out_[layer].get(), host.size() * 4, cudaMemcpyDeviceToHost, stream_));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// --- state slots and pages ----------------------------------------------------------------------------

namespace {

size_t conv_slot_bytes(const LlmConfig& c) { return static_cast<size_t>(c.conv_dim() * (c.conv_kernel - 1)) * 2; }
size_t ssm_slot_bytes(const LlmConfig& c, kc::DType t) {
    return static_cast<size_t>(c.mamba_n_heads * c.mamba_head_dim * c.d_state) * kc::dtype_size(t);
}

}  // namespace

void GpuModel::copy_slot(int32_t from, int32_t to) {
    const LlmConfig& c = cfg_.llm;
    const size_t cb = conv_slot_bytes(c), sb = ssm_slot_bytes(c, limits_.ssm_state);
    for (size_t li = 0; li < conv_state_.size(); ++li) {
        if (c.layers[li] != LayerKind::kMamba2) continue;
        SURF_CUDA_CHECK(cudaMemcpyAsync(conv_state_[li].as<uint8_t>() + to * cb, conv_state_[li].as<uint8_t>() + from * cb, cb, cudaMemcpyDeviceToDevice, stream_));
        SURF_CUDA_CHECK(cudaMemcpyAsync(ssm_state_[li].as<uint8_t>() + to * sb, ssm_state_[li].as<uint8_t>() + from * sb, sb, cudaMemcpyDeviceToDevice, stream_));
    }
}

void GpuModel::save_slot(int32_t slot, std::vector<uint8_t>& host) const {
    const LlmConfig& c = cfg_.llm;
    const size_t cb = conv_slot_bytes(c), sb = ssm_slot_bytes(c, limits_.ssm_state);
    host.resize(static_cast<size_t>(c.count(LayerKind::kMamba2)) * (cb + sb));
    size_t at = 0;
    for (size_t li = 0; li < conv_state_.size(); ++li) {
        if (c.layers[li] != LayerKind::kMamba2) continue;
        SURF_CUDA_CHECK(cudaMemcpyAsync(host.data() + at, conv_state_[li].as<uint8_t>() + slot * cb, cb, cudaMemcpyDeviceToHost, stream_));
        SURF_CUDA_CHECK(cudaMemcpyAsync(host.data() + at + cb, ssm_state_[li].as<uint8_t>() + slot * sb, sb, cudaMemcpyDeviceToHost, stream_));
        at += cb + sb;
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::load_slot(int32_t slot, const std::vector<uint8_t>& host) {
    const LlmConfig& c = cfg_.llm;
    const size_t cb = conv_slot_bytes(c), sb = ssm_slot_bytes(c, limits_.ssm_state);
    SURF_CHECK(host.size() == static_cast<size_t>(c.count(LayerKind::kMamba2)) * (cb + sb), "load_slot: wrong size");
    size_t at = 0;
    for (size_t li = 0; li < conv_state_.size(); ++li) {
        if (c.layers[li] != LayerKind::kMamba2) continue;
        SURF_CUDA_CHECK(cudaMemcpyAsync(conv_state_[li].as<uint8_t>() + slot * cb, host.data() + at, cb, cudaMemcpyHostToDevice, stream_));
        SURF_CUDA_CHECK(cudaMemcpyAsync(ssm_state_[li].as<uint8_t>() + slot * sb, host.data() + at + cb, sb, cudaMemcpyHostToDevice, stream_));
        at += cb + sb;
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::copy_pages(const std::vector<int32_t>& from, const std::vector<int32_t>& to) {
    const LlmConfig& c = cfg_.llm;
    SURF_CHECK(from.size() == to.size(), "copy_pages: sizes");
    const size_t pb = static_cast<size_t>(limits_.page_size * c.n_kv_heads * c.head_dim) * 2;
    for (size_t li = 0; li < k_cache_.size(); ++li) {
        if (c.layers[li] != LayerKind::kAttention) continue;
        for (size_t i = 0; i < from.size(); ++i) {
            for (const DeviceBuffer* cache : {&k_cache_[li], &v_cache_[li]}) {
                SURF_CUDA_CHECK(cudaMemcpyAsync(cache->as<uint8_t>() + to[i] * pb, cache->as<uint8_t>() + from[i] * pb, pb, cudaMemcpyDeviceToDevice, stream_));
            }
        }
    }
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
                SURF_CUDA_CHECK(cudaMemcpyAsync(host.data() + at, cache->as<uint8_t>() + p * pb, pb, cudaMemcpyDeviceToHost, stream_));
                at += pb;
            }
        }
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::load_pages(const std::vector<int32_t>& pages, const std::vector<uint8_t>& host) {
    const LlmConfig& c = cfg_.llm;
    const size_t pb = static_cast<size_t>(limits_.page_size * c.n_kv_heads * c.head_dim) * 2;
    SURF_CHECK(host.size() == static_cast<size_t>(c.count(LayerKind::kAttention)) * 2 * pages.size() * pb, "load_pages: wrong size");
    size_t at = 0;
    for (size_t li = 0; li < k_cache_.size(); ++li) {
        if (c.layers[li] != LayerKind::kAttention) continue;
        for (DeviceBuffer* cache : {&k_cache_[li], &v_cache_[li]}) {
            for (int32_t p : pages) {
                SURF_CUDA_CHECK(cudaMemcpyAsync(cache->as<uint8_t>() + p * pb, host.data() + at, pb, cudaMemcpyHostToDevice, stream_));
                at += pb;
            }
        }
    }
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace surf::model::cuda
