// A mixed step's attention pair: the decode rows' attention and the prefill rows' attention of one layer, on
// shared SMs or on split SMs (green contexts, GpuLimits::attention_green_decode_sms); the cost model that
// chooses per step, and warm_up's measurement of that model on the device.
#include <algorithm>
#include <array>
#include <cstdio>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/cuda/gpu_model.h"

namespace surf::model::cuda {

// Mean µs of an issued piece of work on a stream over 8 runs after 2 (calibrate_attention_split).
class AttentionTimer {
public:
    explicit AttentionTimer(cudaStream_t stream) : stream_(stream) {
        for (cudaEvent_t& e : ev_) SURF_CUDA_CHECK(cudaEventCreate(&e));
    }
    ~AttentionTimer() { cudaEventDestroy(ev_[0]), cudaEventDestroy(ev_[1]); }
    AttentionTimer(const AttentionTimer&) = delete;
    AttentionTimer& operator=(const AttentionTimer&) = delete;

    template <typename Issue>
    double us(Issue&& issue) {
        for (int i = 0; i < 2; ++i) issue();
        SURF_CUDA_CHECK(cudaEventRecord(ev_[0], stream_));
        for (int i = 0; i < 8; ++i) issue();
        SURF_CUDA_CHECK(cudaEventRecord(ev_[1], stream_));
        SURF_CUDA_CHECK(cudaEventSynchronize(ev_[1]));
        float ms = 0;
        SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_[0], ev_[1]));
        return 1000.0 * ms / 8;
    }

private:
    cudaStream_t stream_;
    cudaEvent_t ev_[2];
};

kc::AttentionPrefillParams GpuModel::pair_prefill_params(size_t li, const bf16* qkv, bf16* out, bool overlap,
                                                         bool green) const {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const int64_t hd = c.head_dim, q_dim = c.n_heads * hd, qkv_dim = q_dim + 2 * c.n_kv_heads * hd;
    kc::AttentionPrefillParams ap;
    ap.q = qkv + st.n_dec * qkv_dim, ap.q_stride = qkv_dim, ap.out = out + st.n_dec * q_dim,
    ap.out_stride = q_dim;
    ap.cu_seqlens_q = st.cu_pre, ap.k_cache = k_cache_[li].as<bf16>(), ap.v_cache = v_cache_[li].as<bf16>();
    ap.block_table = st.bt_pre, ap.seq_lens_k = st.lens_pre, ap.page_size = limits_.page_size,
    ap.max_pages_per_seq = st.max_pages;
    ap.n_seq = st.n_pre, ap.n_heads = c.n_heads, ap.n_kv_heads = c.n_kv_heads, ap.head_dim = hd,
    ap.max_seqlen_q = st.max_q, ap.causal = true;
    ap.workspace = prefill_ws_.get(), ap.workspace_bytes = prefill_ws_.bytes(), ap.n_tok_q = st.n_pre_tok,
    ap.max_seqlen_k = st.max_len;
    ap.n_splits = limits_.attention_splits && !overlap && !green ? 0 : 1;
    ap.rows_per_warp = limits_.attention_rows_per_warp;
    ap.wgmma_key_tile = limits_.attention_wgmma_keys;
    ap.wgmma_warp_specialized =
        limits_.attention_wgmma_warp_specialized && (!overlap || limits_.attention_ws_beside_decode);
    return ap;
}

kc::AttentionDecodeParams GpuModel::pair_decode_params(size_t li, const bf16* qkv, bf16* out,
                                                       const kc::GreenPair* green) const {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    kc::AttentionDecodeParams dp;
    dp.q = qkv, dp.q_stride = c.n_heads * c.head_dim + 2 * c.n_kv_heads * c.head_dim, dp.out = out;
    dp.k_cache = k_cache_[li].as<bf16>(), dp.v_cache = v_cache_[li].as<bf16>();
    dp.block_table = st.bt_dec, dp.seq_lens = st.lens_dec, dp.page_size = limits_.page_size,
    dp.max_pages_per_seq = st.max_pages;
    // Split over the decode rows' longest context, not the step's: a prefill row's longer one would leave
    // each decode row's last split short (decode-only steps: the graph's padded length).
    dp.batch = st.n_dec, dp.n_heads = c.n_heads, dp.n_kv_heads = c.n_kv_heads, dp.head_dim = c.head_dim;
    dp.max_seq_len = st.n_pre > 0 ? st.max_len_dec : st.max_len;
    dp.pipelined = limits_.decode_attention_pipelined;
    dp.l2_evict_first = limits_.l2_evict_first;
    dp.tma = limits_.decode_attention_tma,
    dp.cache_pages = limits_.kv_pages + 1;  // the scratch page included
    dp.persistent_blocks_per_sm = st.n_pre > 0 ? 1 : limits_.decode_tma_blocks_per_sm;
    if (green)
        dp.tma = true, dp.persistent_blocks_per_sm = 2, dp.sm_count = static_cast<int32_t>(green->sms_a);
    SURF_CHECK(kc::attention_decode_workspace_bytes(dp) <= decode_ws_.bytes(), "decode workspace too small");
    return dp;
}

bool GpuModel::tma_decode_usable(size_t li) {
    if (tma_decode_usable_ < 0) {
        // Layer- and step-independent (head dim, pages, cache alignment, device): asked once, before any
        // green context exists.
        kc::AttentionDecodeParams dp = pair_decode_params(li, big_.as<bf16>(), normed_.as<bf16>(), nullptr);
        dp.tma = true;
        tma_decode_usable_ = kc::attention_decode_tma_usable(dp) ? 1 : 0;
    }
    return tma_decode_usable_ == 1;
}

void GpuModel::attention_pair(size_t li, const bf16* qkv, bf16* out, kc::GreenPair* green) {
    const Step& st = step_;
    // Both kinds of rows on disjoint SMs (green), or the prefill rows on their own stream at the highest
    // priority (overlap) beside the decode rows. The prefill goes first, except beside the TMA decode kernel,
    // whose one block an SM goes first so that every SM keeps it beside a prefill block.
    const bool overlap = !green && overlap_branches(limits_.overlap_attention_branches);
    cudaStream_t pre_stream = overlap ? branch_stream_ : stream_;
    if (green) {
        // stream_ → both green streams → stream_; the prefill first (its blocks fill the other SMs at once).
        const kc::AttentionPrefillParams ap = pair_prefill_params(li, qkv, out, false, true);
        const kc::AttentionDecodeParams dp = pair_decode_params(li, qkv, out, green);
        SURF_CUDA_CHECK(cudaEventRecord(branch_fork_, stream_));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(green->b, branch_fork_, 0));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(green->a, branch_fork_, 0));
        kc::attention_prefill(ap, green->b);
        kc::attention_decode(dp, decode_ws_.get(), green->a);
        for (cudaStream_t s : {green->b, green->a}) {
            SURF_CUDA_CHECK(cudaEventRecord(branch_join_, s));
            SURF_CUDA_CHECK(cudaStreamWaitEvent(stream_, branch_join_, 0));
        }
        ++green_pairs_;
        return;
    }
    if (overlap) fork_branch();
    auto prefill = [&] {
        const kc::AttentionPrefillParams ap = pair_prefill_params(li, qkv, out, overlap, false);
        auto timed = timer_.scope("attn.prefill", pre_stream);
        kc::attention_prefill(ap, pre_stream);
    };
    auto decode = [&] {
        const kc::AttentionDecodeParams dp = pair_decode_params(li, qkv, out, nullptr);
        auto timed = timer_.scope("attn.decode", stream_);
        kc::attention_decode(dp, decode_ws_.get(), stream_);
    };
    if (limits_.decode_attention_tma && st.n_dec > 0) decode();
    if (st.n_pre > 0) prefill();
    if (!limits_.decode_attention_tma && st.n_dec > 0) decode();
    if (overlap) join_branch();
}

kc::GreenPair* GpuModel::green_for_step(size_t li) {
    const Step& st = step_;
    const int knob = limits_.attention_green_decode_sms;
    if (knob == 0 || st.n_pre == 0 || st.n_dec == 0) return nullptr;
    if (!tma_decode_usable(li)) return nullptr;
    const LlmConfig& c = cfg_.llm;
    const AttentionSplitModel& m = split_model_;
    const double decode_s =
        st.dec_keys * static_cast<double>(c.n_kv_heads * c.head_dim) * 4.0 / m.decode_bytes_per_s;
    const double prefill_s =
        st.pre_pairs * 4.0 * static_cast<double>(c.n_heads * c.head_dim) / m.prefill_flops_per_s;
    const double shared = decode_s + m.shared_prefill_share * prefill_s;
    auto split_time = [&](const AttentionSplitCount& k) {
        return k.overhead * std::max(k.decode_factor * decode_s, k.prefill_factor * prefill_s);
    };
    int best = 0;
    double best_s = 0.97 * shared;  // a split must win by 3% (the model's spread between shapes)
    if (knob > 0) {
        if (!green_.count(knob)) green_pair(knob);  // H100 factors until warm_up measures them
        const double s = split_time(green_.at(knob).cost);
        if (s < best_s) best = knob;
    } else {
        for (const auto& [sms, g] : green_) {
            if (!g.cost.measured || !g.pair) continue;
            const double s = split_time(g.cost);
            if (s < best_s) best = sms, best_s = s;
        }
    }
    return best > 0 ? green_pair(best) : nullptr;
}

kc::GreenPair* GpuModel::green_pair(int want) {
    auto found = green_.find(want);
    if (found != green_.end()) return found->second.pair.get();
    GreenSplit& g = green_[want];  // a refusal stays recorded as a null pair
    if (want + 16 > device_sms_) {
        std::fprintf(stderr,
                     "surf: attention_green_decode_sms %d leaves too few of the device's %d SMs for the "
                     "prefill; the attention pair shares every SM\n",
                     want, device_sms_);
        return nullptr;
    }
    int lo = 0, hi = 0;
    SURF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    try {
        g.pair = std::make_unique<kc::GreenPair>(static_cast<unsigned>(want), hi, hi);
    } catch (const Error& e) {
        std::fprintf(stderr, "surf: attention_green_decode_sms %d: %s; the attention pair shares every SM\n",
                     want, e.what());
    }
    return g.pair.get();
}

std::vector<std::pair<int, AttentionSplitCount>> GpuModel::attention_split_counts() const {
    std::vector<std::pair<int, AttentionSplitCount>> out;
    for (const auto& [sms, g] : green_) {
        if (g.pair) out.emplace_back(static_cast<int>(g.pair->sms_a), g.cost);
    }
    return out;
}

std::string GpuModel::attention_split_report() const {
    const AttentionSplitModel& m = split_model_;
    if (!m.measured) return "";
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "attention pair (100 decode rows on 5,000 keys beside a prefill chunk, or less where the "
                  "limits say): alone on all SMs "
                  "decode %.2f TB/s, prefill %.0f TFLOP/s; shared ≈ decode + %.2f · prefill",
                  m.decode_bytes_per_s / 1e12, m.prefill_flops_per_s / 1e12, m.shared_prefill_share);
    std::string out = buf;
    double shared_us = 0;
    for (const auto& [sms, k] : attention_split_counts()) {
        if (!k.measured) continue;
        shared_us = k.shared_us;
        std::snprintf(buf, sizeof buf, "%s%d SMs %.0f us (x%.2f / x%.2f)",
                      out.find(" SMs ") == std::string::npos ? "; split, decode on " : ", ", sms, k.split_us,
                      k.decode_factor, k.prefill_factor);
        out += buf;
    }
    if (shared_us > 0) {
        std::snprintf(buf, sizeof buf,
                      ", against %.0f us shared; each mixed step takes the count predicted fastest where it "
                      "beats sharing by 3%%",
                      shared_us);
        out += buf;
    } else {
        out += "; no split measured (the knob off, or green contexts refused)";
    }
    return out;
}

void GpuModel::calibrate_attention_split(int64_t prefill_tokens) {
    const int knob = limits_.attention_green_decode_sms;
    size_t li = 0;
    while (li < w_.layers.size() && w_.layers[li].kind != LayerKind::kAttention) ++li;
    if (knob == 0 || li == w_.layers.size()) return;
    DeviceBuffer meta;
    if (!stage_calibration_step(prefill_tokens, meta)) return;
    struct ClearStep {
        Step& s;
        ~ClearStep() { s = Step{}; }  // its metadata dies with `meta`
    } clear{step_};
    if (!tma_decode_usable(li)) return;
    AttentionTimer timer(stream_);
    measure_split_counts(li, timer, measure_shared_pair(li, timer));
    SURF_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// The shape: serving C = 100's mixed step (100 decode rows on ≈ 5,000 keys beside the rest of a chunk on
// ≈ 5,000 past), within the limits and the free KV pages (warm_up runs before any sequence holds one), staged
// in step_ with its metadata (decode lens and block tables, then the prefill row's cu_seqlens, length and
// block table) in `meta`. False where it does not fit.
bool GpuModel::stage_calibration_step(int64_t prefill_tokens, DeviceBuffer& meta) {
    const GpuLimits& L = limits_;
    const int64_t ps = L.page_size;
    const int64_t rows = std::min<int64_t>({100, L.max_seqs - 1, L.max_logit_rows - 1});
    const int64_t chunk = std::min(prefill_tokens, L.max_tokens) - rows;
    if (rows < 16 || chunk < 128) return false;
    auto pages_for = [&](int64_t past) {
        return rows * ((past + 1 + ps - 1) / ps) + (past + chunk + ps - 1) / ps;
    };
    int64_t past = std::min<int64_t>(5000, L.max_context - chunk);
    while (past >= 1024 && pages_for(past) > L.kv_pages) past -= 256;
    if (past < 1024) return false;
    Step& st = step_;
    st = Step{};
    st.n_dec = rows, st.n_pre = 1, st.n_pre_tok = chunk, st.n_tok = rows + chunk, st.max_q = chunk;
    st.max_len = std::max(past + 1, past + chunk), st.max_len_dec = past + 1;
    st.max_pages = (st.max_len + ps - 1) / ps;
    st.dec_keys = static_cast<double>(rows * (past + 1));
    st.pre_pairs = static_cast<double>(chunk) * (static_cast<double>(past) + (chunk + 1) / 2.0);
    std::vector<int32_t> host(static_cast<size_t>(rows + rows * st.max_pages + 3 + st.max_pages), 0);
    int32_t* lens_dec = host.data();
    int32_t* bt_dec = lens_dec + rows;
    int32_t* cu_pre = bt_dec + rows * st.max_pages;
    int32_t* lens_pre = cu_pre + 2;
    int32_t* bt_pre = lens_pre + 1;
    int32_t page = 0;
    const int64_t dec_pages = (past + 1 + ps - 1) / ps;
    for (int64_t r = 0; r < rows; ++r) {
        lens_dec[r] = static_cast<int32_t>(past + 1);
        for (int64_t p = 0; p < dec_pages; ++p) bt_dec[r * st.max_pages + p] = page++;
    }
    cu_pre[1] = static_cast<int32_t>(chunk), lens_pre[0] = static_cast<int32_t>(past + chunk);
    for (int64_t p = 0; p < st.max_pages; ++p) bt_pre[p] = page++;
    SURF_CHECK(page <= L.kv_pages, "calibrate_attention_split: ", page, " pages of ", L.kv_pages);
    meta = DeviceBuffer(host.size() * 4);
    SURF_CUDA_CHECK(
        cudaMemcpyAsync(meta.get(), host.data(), host.size() * 4, cudaMemcpyHostToDevice, stream_));
    const int32_t* dev = meta.as<int32_t>();
    st.lens_dec = dev, st.bt_dec = dev + rows, st.cu_pre = st.bt_dec + rows * st.max_pages,
    st.lens_pre = st.cu_pre + 2;
    st.bt_pre = st.lens_pre + 1;
    return true;
}

// The shared pair as a step runs it, and its two kernels alone on every SM: AttentionSplitModel. Returns the
// µs of decode alone, prefill alone and the shared pair.
std::array<double, 3> GpuModel::measure_shared_pair(size_t li, AttentionTimer& timer) {
    const LlmConfig& c = cfg_.llm;
    const Step& st = step_;
    const bf16* qkv = big_.as<bf16>();
    bf16* out = normed_.as<bf16>();
    const bool overlap = overlap_branches(limits_.overlap_attention_branches);
    const kc::AttentionDecodeParams dp_all = pair_decode_params(li, qkv, out, nullptr);
    const kc::AttentionPrefillParams ap_all = pair_prefill_params(li, qkv, out, overlap, false);
    const double decode_us = timer.us([&] { kc::attention_decode(dp_all, decode_ws_.get(), stream_); });
    const double prefill_us = timer.us([&] { kc::attention_prefill(ap_all, stream_); });
    const double shared_us = timer.us([&] { attention_pair(li, qkv, out, nullptr); });
    AttentionSplitModel m;
    m.decode_bytes_per_s =
        st.dec_keys * static_cast<double>(c.n_kv_heads * c.head_dim) * 4.0 / (decode_us * 1e-6);
    m.prefill_flops_per_s =
        st.pre_pairs * 4.0 * static_cast<double>(c.n_heads * c.head_dim) / (prefill_us * 1e-6);
    m.shared_prefill_share = std::clamp((shared_us - decode_us) / prefill_us, 0.0, 1.0);
    m.measured = true;
    split_model_ = m;
    return {decode_us, prefill_us, shared_us};
}

// Each split count (the knob's, or 40, 48, … SMs for the decode rows while 40 are left): its kernels alone on
// their halves and the pair, against the shared pair measured before.
void GpuModel::measure_split_counts(size_t li, AttentionTimer& timer, const std::array<double, 3>& shared) {
    const int knob = limits_.attention_green_decode_sms;
    const bf16* qkv = big_.as<bf16>();
    bf16* out = normed_.as<bf16>();
    const auto [decode_us, prefill_us, shared_us] = shared;
    auto on = [&](cudaStream_t s, auto&& launch) {  // forked from stream_ and joined back
        SURF_CUDA_CHECK(cudaEventRecord(branch_fork_, stream_));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(s, branch_fork_, 0));
        launch(s);
        SURF_CUDA_CHECK(cudaEventRecord(branch_join_, s));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(stream_, branch_join_, 0));
    };
    std::vector<int> counts;
    if (knob > 0)
        counts.push_back(knob);
    else
        for (int n = 40; n + 40 <= device_sms_; n += 8) counts.push_back(n);
    const int64_t pairs_before = green_pairs_;
    for (int n : counts) {
        kc::GreenPair* g = green_pair(n);
        if (!g) continue;
        const kc::AttentionDecodeParams dp = pair_decode_params(li, qkv, out, g);
        const kc::AttentionPrefillParams ap = pair_prefill_params(li, qkv, out, false, true);
        const double d_us = timer.us(
            [&] { on(g->a, [&](cudaStream_t s) { kc::attention_decode(dp, decode_ws_.get(), s); }); });
        const double p_us =
            timer.us([&] { on(g->b, [&](cudaStream_t s) { kc::attention_prefill(ap, s); }); });
        const double pair_us = timer.us([&] { attention_pair(li, qkv, out, g); });
        AttentionSplitCount& k = green_.at(n).cost;
        k.decode_factor = d_us / decode_us, k.prefill_factor = p_us / prefill_us;
        k.overhead = pair_us / std::max(d_us, p_us);
        k.shared_us = shared_us, k.split_us = pair_us, k.measured = true;
    }
    green_pairs_ = pairs_before;  // the counter is for steps
}

}  // namespace surf::model::cuda
