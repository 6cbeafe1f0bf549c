// bench_attention: attention_prefill alone at the Holotron-12B serving shapes.
//   llm   : paged causal prefill, 40 query / 8 KV heads, head_dim 128, page 16 (pages in shuffled order),
//           4 sequences × 1024 new queries on 5000 cached keys each (one agent step of 4 sessions).
//   vit   : contiguous bidirectional attention, 16 heads, head_dim 80, 24 tiles × 794 tokens, q/k/v read from
//           fused qkv rows of stride 3·1280 (the vision tower's layout).
//   fresh : paged causal prefill of one 4096-token prompt (causal imbalance across query blocks).
//   small : paged causal prefill of 200 new queries on 3000 cached keys (few blocks: the 64-row path).
//   chunk : paged causal prefill of one 924-token chunk on 5000 cached keys (the engine's mixed step).
//   vit3  : the vision tower's pass of one 1280×720 screenshot: 3 tiles × 1,032 tokens.
// Every case runs on each kernel: mma.sync at 16 and at 32 query rows per warp (AttentionPrefillParams::
// rows_per_warp) and the Hopper wgmma kernel at key tiles of 64 and 128 (wgmma_key_tile), plain and
// warp-specialized ("ws", wgmma_warp_specialized; "wt": the same with K/V by TMA in the contiguous cases,
// kv_rows; compute capability 9.0 only, elsewhere those rows repeat the default kernel). FLOPs = 4 · (visible
// query-key pairs, causal pairs counted exactly) · heads · head_dim. Inputs are uniform random on the GPU;
// the output is checked for non-finite values.
// --pair: only the mixed step's attention layer as the engine issues it
// (GpuLimits::overlap_attention_branches): the chunk's prefill (one 924-token chunk on 5,000 cached keys) on
// a stream of the highest priority and the decode rows' attention (100 rows, 5,000 keys each) on another,
// each alone and the two together, per prefill kernel (warp-specialized: one block fills an SM; plain wgmma:
// two blocks an SM; split-KV 1 or 2) and decode kernel (plain, pipelined: AttentionDecodeParams::pipelined;
// split count auto, 4, 8), issued together or with the prefill's blocks placed first ("first": the decode
// waits for a tiny kernel on the prefill stream): which pairing shares SMs best
// (GpuLimits::attention_ws_beside_decode).
// --pair --profile-ranges: after the tables, each pairing once more between cudaProfilerStart / Stop, so that
// Nsight Compute's range replay (scripts/ncu_ranges.sh) measures the two kernels running together as one
// result.
// --pair-green N,…: only the pair on disjoint SMs (kernels/cuda/green_context.h): the decode rows on a group
// of N SMs (split counts auto, 1, 2, 4), the prefill (plain and warp-specialized wgmma) on the rest, against
// the engine's pair on all SMs. Usage: bench_attention [--reps N] [--kernel NAME] [--case NAME] (one kernel /
// case, e.g. under ncu) | --pair [--profile-ranges]
//        | --pair-green N,N,…
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#ifdef SURF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "apps/bench/bench_profile.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/green_context.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/random_fill.h"

namespace cu = surf::kernels::cuda;
using cu::bf16;

namespace {

// Device buffer freed at scope exit.
template <typename T>
struct Buffer {
    T* ptr = nullptr;
    explicit Buffer(size_t n) {
        SURF_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr), std::max<size_t>(n, 1) * sizeof(T)));
    }
    Buffer() = default;
    Buffer(Buffer&& o) noexcept : ptr(std::exchange(o.ptr, nullptr)) {}
    Buffer& operator=(Buffer&& o) noexcept {
        std::swap(ptr, o.ptr);
        return *this;
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { cudaFree(ptr); }
};

void fill(bf16* x, int64_t n, uint64_t seed) {
    cu::UniformFillParams f;
    f.x = x;
    f.n = n;
    f.seed = seed;
    cu::uniform_fill(f, nullptr);
}

Buffer<int32_t> upload(const std::vector<int32_t>& v) {
    Buffer<int32_t> b(v.size());
    SURF_CUDA_CHECK(cudaMemcpy(b.ptr, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return b;
}

// Mean µs per launch over `reps` launches after 3 warm-up launches, timed by events on `stream` (where fn
// issues, or joins what it issues elsewhere).
template <typename Fn>
double time_us(Fn&& fn, int reps, cudaStream_t stream = nullptr) {
    for (int i = 0; i < 3; ++i) fn();
    cudaEvent_t a, b;
    SURF_CUDA_CHECK(cudaEventCreate(&a));
    SURF_CUDA_CHECK(cudaEventCreate(&b));
    SURF_CUDA_CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < reps; ++i) fn();
    SURF_CUDA_CHECK(cudaEventRecord(b, stream));
    SURF_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    SURF_CUDA_CHECK(cudaEventDestroy(a));
    SURF_CUDA_CHECK(cudaEventDestroy(b));
    return 1e3 * ms / reps;
}

int64_t count_non_finite(const bf16* out, int64_t n) {
    std::vector<bf16> h(n);
    SURF_CUDA_CHECK(cudaMemcpy(h.data(), out, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (const bf16& v : h) bad += !std::isfinite(__bfloat162float(v));
    return bad;
}

// Which prefill kernel a row measures.
struct Kernel {
    int rows_per_warp, wgmma_key_tile;
    bool warp_specialized;
    const char* name;
    bool tma = false;  // contiguous cases: give kv_rows (the warp-specialized kernel then copies K/V by TMA)
    void apply(cu::AttentionPrefillParams& p) const {
        p.rows_per_warp = rows_per_warp, p.wgmma_key_tile = wgmma_key_tile,
        p.wgmma_warp_specialized = warp_specialized;
    }
};

void report(const char* name, const std::string& shape, const Kernel& kernel, double us, double flops,
            int64_t bad) {
    const double tflops = flops / (us * 1e-6) / 1e12;
    std::printf("| %-6s | %-52s | %-9s | %9.1f | %7.1f | %s |\n", name, shape.c_str(), kernel.name, us,
                tflops, bad ? ("NON-FINITE " + std::to_string(bad)).c_str() : "ok");
    std::fflush(stdout);
}

// Paged causal prefill: n_seq sequences of `fresh` new queries on `past` cached keys each.
void bench_paged(const char* name, int64_t n_seq, int64_t fresh, int64_t past, int64_t page,
                 const Kernel& kernel, int reps) {
    const int64_t nh = 40, nkv = 8, D = 128, len = past + fresh, pages_per_seq = (len + page - 1) / page;
    const int64_t n_pages = n_seq * pages_per_seq, n_tok = n_seq * fresh;
    std::vector<int32_t> perm(n_pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(5);
    std::shuffle(perm.begin(), perm.end(), rng);  // a long-running cache hands out pages in no order
    std::vector<int32_t> cu_q{0}, lens(n_seq, static_cast<int32_t>(len));
    for (int64_t s = 0; s < n_seq; ++s) cu_q.push_back(static_cast<int32_t>((s + 1) * fresh));
    const int64_t cache_elems = n_pages * page * nkv * D;
    Buffer<bf16> q(n_tok * nh * D), out(n_tok * nh * D), kc(cache_elems), vc(cache_elems);
    fill(q.ptr, n_tok * nh * D, 1);
    fill(kc.ptr, cache_elems, 2);
    fill(vc.ptr, cache_elems, 3);
    Buffer<int32_t> bt = upload(perm), dcu = upload(cu_q), dlens = upload(lens);
    cu::AttentionPrefillParams p;
    p.q = q.ptr;
    p.out = out.ptr;
    p.cu_seqlens_q = dcu.ptr;
    p.k_cache = kc.ptr;
    p.v_cache = vc.ptr;
    p.block_table = bt.ptr;
    p.seq_lens_k = dlens.ptr;
    p.page_size = page;
    p.max_pages_per_seq = pages_per_seq;
    p.n_seq = n_seq;
    p.n_heads = nh;
    p.n_kv_heads = nkv;
    p.head_dim = D;
    p.max_seqlen_q = fresh;
    p.causal = true;
    kernel.apply(p);
    const double us = time_us([&] { cu::attention_prefill(p, nullptr); }, reps);
    const double pairs = static_cast<double>(n_seq) * (fresh * past + fresh * (fresh + 1) / 2.0);
    char shape[160];
    std::snprintf(shape, sizeof shape, "40/8x128 paged p%lld, %lld seq x %lld new, %lld past",
                  (long long)page, (long long)n_seq, (long long)fresh, (long long)past);
    report(name, shape, kernel, us, 4.0 * pairs * nh * D, count_non_finite(out.ptr, n_tok * nh * D));
}

// Contiguous bidirectional attention over `tiles` independent tiles of `tl` tokens (fused qkv rows).
void bench_vit(const char* name, int64_t tiles, int64_t tl, const Kernel& kernel, int reps) {
    const int64_t nh = 16, D = 80, w = nh * D, n_tok = tiles * tl;
    Buffer<bf16> qkv(n_tok * 3 * w), out(n_tok * w);
    fill(qkv.ptr, n_tok * 3 * w, 4);
    std::vector<int32_t> cu(tiles + 1);
    for (int64_t i = 0; i <= tiles; ++i) cu[i] = static_cast<int32_t>(i * tl);
    Buffer<int32_t> dcu = upload(cu);
    cu::AttentionPrefillParams p;
    p.q = qkv.ptr;
    p.q_stride = 3 * w;
    p.out = out.ptr;
    p.cu_seqlens_q = dcu.ptr;
    p.k = qkv.ptr + w;
    p.v = qkv.ptr + 2 * w;
    p.kv_stride = 3 * w;
    p.cu_seqlens_k = dcu.ptr;
    p.n_seq = tiles;
    p.n_heads = nh;
    p.n_kv_heads = nh;
    p.head_dim = D;
    p.max_seqlen_q = tl;
    p.causal = false;
    p.kv_rows = kernel.tma ? n_tok : 0;
    kernel.apply(p);
    const double us = time_us([&] { cu::attention_prefill(p, nullptr); }, reps);
    char shape[160];
    std::snprintf(shape, sizeof shape, "16x80 contiguous, %lld tiles x %lld, bidirectional", (long long)tiles,
                  (long long)tl);
    report(name, shape, kernel, us, 4.0 * tiles * tl * tl * nh * D, count_non_finite(out.ptr, n_tok * w));
}

// Pages [first, first + n) of a shuffled pool as a sequence's block table.
std::vector<int32_t> take_pages(const std::vector<int32_t>& pool, int64_t first, int64_t n) {
    return {pool.begin() + first, pool.begin() + first + n};
}

// The mixed step's attention layer: prefill of one `fresh`-token chunk on `past` keys (highest-priority
// stream) beside the decode attention of `rows` rows on `past` keys each (another stream), per prefill
// kernel.
// The attention pair of a mixed step: the prefill of `fresh` new tokens on `past` (highest-priority stream)
// beside the decode of `rows` rows on `past`, at Holotron-12B's attention shapes.
class PairBench {
public:
    PairBench(int64_t fresh, int64_t past, int64_t rows, int reps);
    ~PairBench() {
        cudaEventDestroy(fork_), cudaEventDestroy(join_), cudaStreamDestroy(pre_s_),
            cudaStreamDestroy(main_s_);
    }
    PairBench(const PairBench&) = delete;
    PairBench& operator=(const PairBench&) = delete;

    // Each decode kernel alone (the times the pair tables use as their sum's decode part).
    void decode_table();
    // The pair on disjoint SMs (green contexts) for each decode group size, against the pair on all SMs.
    void green_table(const std::vector<unsigned>& green_sizes);
    // Each prefill kernel beside each decode kernel on shared SMs, against the sum of the two alone.
    void overlap_table(bool profile_ranges);

private:
    struct DecodeKind {
        bool pipelined;
        int32_t splits;  // 0 = the kernel's rule
        const char* name;
        bool evict_first = false;  // AttentionDecodeParams::l2_evict_first
        bool tma = false;          // AttentionDecodeParams::tma, at per_sm blocks an SM
        int32_t per_sm = 1;
    };
    static constexpr int32_t kMostDecodeSplits = 8;
    static constexpr int64_t nh = 40, nkv = 8, D = 128, page = 16;

    cu::AttentionPrefillParams prefill_params(int pre_splits) const;
    void set_decode(const DecodeKind& d) {
        dp_.pipelined = d.pipelined, dp_.n_splits = d.splits, dp_.l2_evict_first = d.evict_first,
        dp_.tma = d.tma, dp_.persistent_blocks_per_sm = d.per_sm;
    }
    // Mean µs per run of `fn` (which issues on main_s_, forking to other streams where it pairs and joining
    // back).
    double time_on_main(const std::function<void()>& fn) const { return time_us(fn, reps_, main_s_); }
    // Forks from main_s_ to both streams, runs the prefill on one and the decode `dd` on the other, joins
    // back.
    std::function<void()> pair_on(const cu::AttentionPrefillParams& p, cudaStream_t pre_stream,
                                  cudaStream_t dec_stream, const cu::AttentionDecodeParams& dd) const;
    void green_rows(unsigned n, cu::AttentionPrefillParams& p, const cu::AttentionDecodeParams& d,
                    double base_pair) const;
    int64_t non_finite() const {
        return count_non_finite(out_pre_.ptr, fresh_ * nh * D) +
               count_non_finite(out_dec_.ptr, rows_ * nh * D);
    }

    const int64_t fresh_, past_, rows_, len_pre_, pages_pre_, pages_dec_, n_pages_;
    const int reps_;
    const double bytes_;  // the decode's K and V, read once
    Buffer<bf16> kc_, vc_, q_pre_, out_pre_, q_dec_, out_dec_;
    Buffer<bf16> marker_{
        1024};  // "prefill first": a tiny kernel on the prefill stream that the decode waits for
    Buffer<int32_t> bt_pre_, cu_pre_, len_pre_d_, bt_dec_, lens_dec_;
    cu::AttentionDecodeParams dp_;
    Buffer<uint8_t> dws_, pws_;
    int priority_hi_ = 0;
    cudaStream_t main_s_ = nullptr, pre_s_ = nullptr;
    cudaEvent_t fork_ = nullptr, join_ = nullptr;
    std::vector<DecodeKind> decode_kinds_;
    std::vector<double> dec_us_;
};

// Page tables drawn from one shuffled pool: the prefill row's pages, then each decode row's.
PairBench::PairBench(int64_t fresh, int64_t past, int64_t rows, int reps)
    : fresh_(fresh),
      past_(past),
      rows_(rows),
      len_pre_(past + fresh),
      pages_pre_((len_pre_ + page - 1) / page),
      pages_dec_((past + page - 1) / page),
      n_pages_(pages_pre_ + rows * pages_dec_),
      reps_(reps),
      bytes_(2.0 * rows * past * nkv * D * 2),
      kc_(n_pages_ * page * nkv * D),
      vc_(n_pages_ * page * nkv * D),
      q_pre_(fresh * nh * D),
      out_pre_(fresh * nh * D),
      q_dec_(rows * nh * D),
      out_dec_(rows * nh * D),
      dws_(0),
      pws_(cu::attention_prefill_workspace_bytes(fresh, nh, D, 2)) {
    std::vector<int32_t> pool(n_pages_);
    std::iota(pool.begin(), pool.end(), 0);
    std::mt19937 rng(9);
    std::shuffle(pool.begin(), pool.end(), rng);
    const int64_t cache_elems = n_pages_ * page * nkv * D;
    fill(kc_.ptr, cache_elems, 2);
    fill(vc_.ptr, cache_elems, 3);
    fill(q_pre_.ptr, fresh * nh * D, 1);
    fill(q_dec_.ptr, rows * nh * D, 4);
    bt_pre_ = upload(take_pages(pool, 0, pages_pre_)), cu_pre_ = upload({0, static_cast<int32_t>(fresh)});
    len_pre_d_ = upload({static_cast<int32_t>(len_pre_)});
    bt_dec_ = upload(take_pages(pool, pages_pre_, rows * pages_dec_));
    lens_dec_ = upload(std::vector<int32_t>(rows, static_cast<int32_t>(past)));

    dp_.q = q_dec_.ptr, dp_.out = out_dec_.ptr, dp_.k_cache = kc_.ptr, dp_.v_cache = vc_.ptr,
    dp_.block_table = bt_dec_.ptr, dp_.seq_lens = lens_dec_.ptr;
    dp_.page_size = page, dp_.max_pages_per_seq = pages_dec_, dp_.batch = rows, dp_.n_heads = nh,
    dp_.n_kv_heads = nkv, dp_.head_dim = D;
    dp_.max_seq_len = past, dp_.cache_pages = n_pages_;
    dp_.n_splits = kMostDecodeSplits;  // the workspace for the most splits a row below forces
    size_t dws_bytes = cu::attention_decode_workspace_bytes(dp_);
    dp_.n_splits = 0;
    for (int32_t per_sm : {1, 2}) {  // the TMA kernel's own split plans
        dp_.tma = true, dp_.persistent_blocks_per_sm = per_sm;
        dws_bytes = std::max(dws_bytes, cu::attention_decode_workspace_bytes(dp_));
    }
    dp_.tma = false;
    dws_ = Buffer<uint8_t>(dws_bytes);

    int lo = 0;
    SURF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &priority_hi_));
    SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&main_s_, cudaStreamNonBlocking));
    SURF_CUDA_CHECK(cudaStreamCreateWithPriority(&pre_s_, cudaStreamNonBlocking, priority_hi_));
    SURF_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    SURF_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
    decode_kinds_ = {{false, 0, "plain"},
                     {true, 0, "pipelined"},
                     {true, 4, "pipelined, 4 splits"},
                     {true, kMostDecodeSplits, "pipelined, 8 splits"},
                     {true, 0, "pipelined, L2 evict-first", true},
                     {true, 0, "TMA, 1 block an SM, L2 evict-first", true, true, 1},
                     {true, 0, "TMA, 2 blocks an SM, L2 evict-first", true, true, 2}};
}

cu::AttentionPrefillParams PairBench::prefill_params(int pre_splits) const {
    cu::AttentionPrefillParams p;
    p.q = q_pre_.ptr, p.out = out_pre_.ptr, p.cu_seqlens_q = cu_pre_.ptr, p.k_cache = kc_.ptr,
    p.v_cache = vc_.ptr, p.block_table = bt_pre_.ptr;
    p.seq_lens_k = len_pre_d_.ptr, p.page_size = page, p.max_pages_per_seq = pages_pre_, p.n_seq = 1,
    p.n_heads = nh, p.n_kv_heads = nkv;
    p.head_dim = D, p.max_seqlen_q = fresh_, p.causal = true, p.n_splits = pre_splits;
    p.workspace = pws_.ptr, p.workspace_bytes = cu::attention_prefill_workspace_bytes(fresh_, nh, D, 2),
    p.n_tok_q = fresh_, p.max_seqlen_k = len_pre_;
    return p;
}

std::function<void()> PairBench::pair_on(const cu::AttentionPrefillParams& p, cudaStream_t pre_stream,
                                         cudaStream_t dec_stream, const cu::AttentionDecodeParams& dd) const {
    return [this, &p, pre_stream, dec_stream, dd] {
        SURF_CUDA_CHECK(cudaEventRecord(fork_, main_s_));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(pre_stream, fork_, 0));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(dec_stream, fork_, 0));
        cu::attention_prefill(p, pre_stream);
        cu::attention_decode(dd, dws_.ptr, dec_stream);
        SURF_CUDA_CHECK(cudaEventRecord(join_, pre_stream));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(main_s_, join_, 0));
        SURF_CUDA_CHECK(cudaEventRecord(join_, dec_stream));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(main_s_, join_, 0));
    };
}

void PairBench::decode_table() {
    std::printf(
        "\n### --pair: prefill of %lld new tokens on %lld past (highest-priority stream) beside decode of "
        "%lld rows on %lld past (%d splits)\n\n",
        (long long)fresh_, (long long)past_, (long long)rows_, (long long)past_,
        cu::attention_decode_splits(dp_));
    std::printf("| decode kernel | alone us | GB/s |\n|---|---|---|\n");
    dec_us_.clear();
    for (const DecodeKind& d : decode_kinds_) {
        set_decode(d);
        const double us = time_on_main([&] { cu::attention_decode(dp_, dws_.ptr, main_s_); });
        dec_us_.push_back(us);
        std::printf("| %s (%d splits) | %.1f | %.0f |\n", d.name, cu::attention_decode_splits(dp_), us,
                    bytes_ / (us * 1e-6) / 1e9);
    }
}

// The decode rows on a group of N SMs, the chunk's prefill on the rest, against the engine's pair on all SMs
// (plain wgmma prefill on the high-priority stream, pipelined decode).
void PairBench::green_table(const std::vector<unsigned>& green_sizes) {
    cu::AttentionPrefillParams p = prefill_params(1);
    cu::AttentionDecodeParams d = dp_;
    d.pipelined = true, d.l2_evict_first = true, d.n_splits = 0, d.tma = false;
    const Kernel plain{0, 64, false, "wgmma 64"}, ws{0, 64, true, "wgmma 64ws"};
    plain.apply(p);
    const double base_pre = time_on_main([&] { cu::attention_prefill(p, main_s_); });
    const double base_dec = time_on_main([&] { cu::attention_decode(d, dws_.ptr, main_s_); });
    const double base_pair = time_on_main(pair_on(p, pre_s_, main_s_, d));
    ws.apply(p);
    const double base_ws = time_on_main([&] { cu::attention_prefill(p, main_s_); });
    std::printf(
        "\n### --pair-green: the decode rows on N SMs, the prefill on the rest (green contexts)\n\nAll "
        "SMs: prefill alone %.1f us "
        "(wgmma 64; ws %.1f), decode alone %.1f us (%.0f GB/s), the engine's pair %.1f us\n\n| decode "
        "SMs | prefill SMs | decode kernel, splits | "
        "decode alone us (GB/s) | prefill kernel | prefill alone us | pair us | pair / all-SM pair "
        "|\n|---|---|---|---|---|---|---|---|\n",
        base_ws, base_pre, base_dec, bytes_ / (base_dec * 1e-6) / 1e9, base_pair);
    for (unsigned n : green_sizes) green_rows(n, p, d, base_pair);
}

// One group size's rows: four decode variants, each beside both prefill kernels.
void PairBench::green_rows(unsigned n, cu::AttentionPrefillParams& p, const cu::AttentionDecodeParams& d,
                           double base_pair) const {
    const Kernel plain{0, 64, false, "wgmma 64"}, ws{0, 64, true, "wgmma 64ws"};
    cu::GreenPair g(n, priority_hi_, priority_hi_);
    struct GreenDecode {
        int32_t splits;
        bool tma;
        int32_t per_sm;
    };
    for (const GreenDecode& gd : {GreenDecode{0, false, 1}, GreenDecode{2, false, 1}, GreenDecode{0, true, 1},
                                  GreenDecode{0, true, 2}}) {
        cu::AttentionDecodeParams dd = d;
        dd.n_splits = gd.splits, dd.tma = gd.tma, dd.persistent_blocks_per_sm = gd.per_sm,
        dd.sm_count = static_cast<int32_t>(g.sms_a);
        const double dec_alone = time_us([&] { cu::attention_decode(dd, dws_.ptr, g.a); }, reps_, g.a);
        for (const Kernel& k : {plain, ws}) {
            k.apply(p);
            const double pre_alone = time_us([&] { cu::attention_prefill(p, g.b); }, reps_, g.b);
            const double both = time_on_main(pair_on(p, g.b, g.a, dd));
            const int64_t bad = non_finite();
            std::printf("| %u | %u | %s%d | %.1f (%.0f) | %s | %.1f | %.1f | %.3f |%s\n", g.sms_a, g.sms_b,
                        gd.tma ? (gd.per_sm == 1 ? "TMA 1/SM, " : "TMA 2/SM, ") : "pipelined, ",
                        cu::attention_decode_splits(dd), dec_alone, bytes_ / (dec_alone * 1e-6) / 1e9, k.name,
                        pre_alone, both, both / base_pair,
                        bad ? (" NON-FINITE " + std::to_string(bad)).c_str() : "");
            std::fflush(stdout);
        }
    }
}

void PairBench::overlap_table(bool profile_ranges) {
    std::printf(
        "\n\"first\": the prefill stream runs a tiny kernel, the decode waits for it, so the prefill's "
        "blocks are placed before the "
        "decode's; \"after\": the decode is issued before the prefill (the engine's order beside the TMA "
        "decode)\n\n| prefill kernel (split-KV) | decode kernel | prefill alone us | decode alone us | sum "
        "us | together us | hidden us | together / sum |\n"
        "|---|---|---|---|---|---|---|---|\n");
    struct PrefillKind {
        Kernel k;
        int pre_splits;  // the engine: 1 where the branch overlaps
        bool first;
        bool after = false;  // issued after the decode
    };
    for (const auto& [k, pre_splits, first, after] :
         std::vector<PrefillKind>{{Kernel{0, 64, true, "wgmma 64ws"}, 1, false},
                                  {Kernel{0, 64, false, "wgmma 64"}, 1, false},
                                  {Kernel{0, 64, false, "wgmma 64"}, 2, false},
                                  {Kernel{0, 64, true, "wgmma 64ws"}, 1, true},
                                  {Kernel{0, 64, false, "wgmma 64"}, 1, true},
                                  {Kernel{0, 64, false, "wgmma 64"}, 1, false, true},
                                  {Kernel{0, 64, true, "wgmma 64ws"}, 1, false, true}}) {
        cu::AttentionPrefillParams p = prefill_params(pre_splits);
        k.apply(p);
        const double pre_us = time_on_main([&] { cu::attention_prefill(p, main_s_); });
        for (size_t di = 0; di < decode_kinds_.size(); ++di) {
            const DecodeKind& d = decode_kinds_[di];
            if (pre_splits != 1 && d.splits != 0)
                continue;  // split-KV prefill: beside the decode's own split rule only
            if (after != d.tma)
                continue;  // the TMA decode is measured issued first, the others as the engine issues them
            set_decode(d);
            auto pair = [&, first = first, after = after] {
                SURF_CUDA_CHECK(cudaEventRecord(fork_, main_s_));
                SURF_CUDA_CHECK(cudaStreamWaitEvent(pre_s_, fork_, 0));
                if (first) {
                    cu::UniformFillParams f;
                    f.x = marker_.ptr, f.n = 1024, f.seed = 8;
                    cu::uniform_fill(f, pre_s_);
                    SURF_CUDA_CHECK(cudaEventRecord(fork_, pre_s_));
                    SURF_CUDA_CHECK(cudaStreamWaitEvent(main_s_, fork_, 0));
                }
                if (after) cu::attention_decode(dp_, dws_.ptr, main_s_);
                cu::attention_prefill(p, pre_s_);
                if (!after) cu::attention_decode(dp_, dws_.ptr, main_s_);
                SURF_CUDA_CHECK(cudaEventRecord(join_, pre_s_));
                SURF_CUDA_CHECK(cudaStreamWaitEvent(main_s_, join_, 0));
            };
            const double both_us = time_on_main(pair), sum = pre_us + dec_us_[di];
            if (profile_ranges && !first && pre_splits == 1 && d.splits == 0) {
                // one range each: prefill alone, decode alone, the pair
                for (const std::function<void()>& run : std::vector<std::function<void()>>{
                         [&] { cu::attention_prefill(p, main_s_); },
                         [&] { cu::attention_decode(dp_, dws_.ptr, main_s_); }, pair}) {
                    surf::bench::profiler_range(run);
                }
                std::printf("(profile ranges: %s (%d) / %s: prefill alone, decode alone, together)\n", k.name,
                            pre_splits, d.name);
            }
            const int64_t bad = non_finite();
            std::printf("| %s (%d)%s%s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f |%s\n", k.name,
                        pre_splits, first ? " first" : "", after ? " after" : "", d.name, pre_us,
                        sum - pre_us, sum, both_us, sum - both_us, both_us / sum,
                        bad ? (" NON-FINITE " + std::to_string(bad)).c_str() : "");
            std::fflush(stdout);
        }
    }
}

void bench_pair(int64_t fresh, int64_t past, int64_t rows, int reps, bool profile_ranges,
                const std::vector<unsigned>& green_sizes) {
    PairBench bench(fresh, past, rows, reps);
    bench.decode_table();
    if (!green_sizes.empty())
        bench.green_table(green_sizes);
    else
        bench.overlap_table(profile_ranges);
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 20;
    bool pair = false, profile_ranges = false;
    std::vector<unsigned> green_sizes;   // --pair-green N,N,…
    std::string only_kernel, only_case;  // empty = all
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--pair") == 0) {
            pair = true;
        } else if (std::strcmp(argv[i], "--pair-green") == 0 && i + 1 < argc) {
            pair = true;
            for (const char* at = argv[++i]; *at;) {
                char* end = nullptr;
                const long n = std::strtol(at, &end, 10);
                if (end == at || n <= 0 || n > 1024 || (*end != ',' && *end != '\0')) {
                    std::fprintf(stderr, "bench_attention: --pair-green %s: expected SM counts like 44,66\n",
                                 argv[i]);
                    return 2;
                }
                green_sizes.push_back(static_cast<unsigned>(n));
                at = *end == ',' ? end + 1 : end;
            }
        } else if (std::strcmp(argv[i], "--profile-ranges") == 0) {
            profile_ranges = true;
        } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = std::max(1, std::atoi(argv[++i]));
        } else if (std::strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) {
            only_kernel = argv[++i];
        } else if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
            only_case = argv[++i];
        } else {
            std::fprintf(
                stderr,
                "usage: bench_attention [--reps N] [--kernel \"mma 16\"|\"mma 32\"|\"wgmma 64\"|\"wgmma "
                "128\"|\"wgmma 64ws\"|\"wgmma 128ws\"|\"wgmma 64wt\"|\"wgmma 128wt\"|\"wgmma 208wt\"] "
                "[--case NAME] | --pair [--profile-ranges] | --pair-green N,N,…\n");
            return 2;
        }
    }
    cudaDeviceProp prop{};
    SURF_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# %s, %d SMs; mean of %d launches after 3 warm-ups\n", prop.name, prop.multiProcessorCount,
                reps);
    if (pair) {
        bench_pair(924, 5000, 100, reps, profile_ranges, green_sizes);
        return 0;
    }
    std::printf("| case   | shape%48s| kernel    |        us | TFLOP/s | output |\n", "");
    std::printf("|--------|%s|-----------|-----------|---------|--------|\n", std::string(54, '-').c_str());
    for (const Kernel& k :
         {Kernel{16, 0, false, "mma 16"}, Kernel{32, 0, false, "mma 32"}, Kernel{0, 64, false, "wgmma 64"},
          Kernel{0, 128, false, "wgmma 128"}, Kernel{0, 64, true, "wgmma 64ws"},
          Kernel{0, 128, true, "wgmma 128ws"}, Kernel{0, 64, true, "wgmma 64wt", true},
          Kernel{0, 128, true, "wgmma 128wt", true}, Kernel{0, 208, true, "wgmma 208wt", true}}) {
        if (!only_kernel.empty() && only_kernel != k.name) continue;
        auto want = [&](const char* name) { return only_case.empty() || only_case == name; };
        if (want("llm")) bench_paged("llm", 4, 1024, 5000, 16, k, reps);
        if (want("chunk")) bench_paged("chunk", 1, 924, 5000, 16, k, reps);
        if (want("vit")) bench_vit("vit", 24, 794, k, reps);
        if (want("vit3")) bench_vit("vit3", 3, 1032, k, reps);
        if (want("fresh")) bench_paged("fresh", 1, 4096, 0, 16, k, reps);
        if (want("small")) bench_paged("small", 1, 200, 3000, 16, k, reps);
    }
    return 0;
}

#else
#include <cstdio>
int main() {
    std::fprintf(stderr, "bench_attention: built without CUDA\n");
    return 2;
}
#endif
