// Kernel benchmark at the Holotron-12B shapes: measures the two ceilings on this card
// (device-to-device copy bandwidth, a large cuBLAS bf16 GEMM) and then achieved GB/s or TFLOP/s and the
// fraction of the ceiling for decode state update, decode attention, the SSD prefill scan, attention
// prefill, the memory-bound prefill ops (norms, conv1d, activations at one 4096-token LLM step and one
// 19056-row ViT batch; the ViT LayerNorm and the gated norm also at 3096 and 1024 rows) and the big GEMMs at
// batch 1, 16, 64 and 100. Inputs are random (never zeros); decode kernels and the smaller norm calls rotate
// over buffers larger than L2 together so that repeated launches do not measure the cache; the other prefill
// ops' buffers are each larger than L2 already.
// Also the token sampler (sample_tokens) at 1 / 16 / 100 rows of the Holotron vocabulary.
// Usage: bench_kernels [--quick | --ssu-only | --sampling-only | --ssd-only]   (prints a markdown table last)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "apps/bench/bench_ceilings.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace cu = surf::kernels::cuda;
using cu::bf16;

namespace {

struct Row {
    std::string kernel, shape;
    int64_t batch;
    double us, achieved;
    std::string unit;
    double pct;
};
std::vector<Row> g_rows;

void* dalloc(size_t bytes) {
    void* p = nullptr;
    SURF_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    return p;
}

// Fills with uniform values in [lo, hi) (bf16 or fp32), generated on the host in blocks.
void fill_random(void* ptr, size_t n, bool is_bf16, float lo, float hi, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    const size_t block = size_t{1} << 22;
    std::vector<float> f(std::min(n, block));
    std::vector<bf16> h(is_bf16 ? f.size() : 0);
    for (size_t off = 0; off < n; off += block) {
        const size_t m = std::min(block, n - off);
        for (size_t i = 0; i < m; ++i) f[i] = dist(rng);
        if (is_bf16) {
            for (size_t i = 0; i < m; ++i) h[i] = __float2bfloat16_rn(f[i]);
            SURF_CUDA_CHECK(
                cudaMemcpy(static_cast<bf16*>(ptr) + off, h.data(), m * 2, cudaMemcpyHostToDevice));
        } else {
            SURF_CUDA_CHECK(
                cudaMemcpy(static_cast<float*>(ptr) + off, f.data(), m * 4, cudaMemcpyHostToDevice));
        }
    }
}

// Median time in µs of `fn(i)` over `reps` launches after `warmup`, each timed with events (bench_ceilings.h
// median_ms); i counts every launch, warm-ups included, so that launches can rotate over copies of their
// operands.
double time_us(const std::function<void(int)>& fn, int reps = 20, int warmup = 3) {
    int i = 0;
    return surf::bench::median_ms([&] { fn(i++); }, reps, warmup) * 1e3;
}

void record(const std::string& kernel, const std::string& shape, int64_t batch, double us, double amount,
            bool is_flops, double ceiling) {
    const double rate = amount / (us * 1e-6) / (is_flops ? 1e12 : 1e9);
    g_rows.push_back({kernel, shape, batch, us, rate, is_flops ? "TFLOP/s" : "GB/s", 100.0 * rate / ceiling});
    std::printf("%-28s %-34s batch %4lld  %10.1f us  %8.1f %s  (%5.1f%% of ceiling)\n", kernel.c_str(),
                shape.c_str(), static_cast<long long>(batch), us, rate, is_flops ? "TFLOP/s" : "GB/s",
                100.0 * rate / ceiling);
    std::fflush(stdout);
}

// Holotron-12B's Mamba layer, in the paper's names: heads, head dim, groups, state size; the conv channels
// (x | B | C) and the in_proj output's row stride (z | xBC | dt).
constexpr int64_t H = 128, P = 80, G = 8, N = 128, conv_dim = H * P + 2 * G * N, zx_stride = 22656;

// The heads' dt_bias, A and D (3 × H fp32) on the device.
float* head_vectors() {
    auto* vec = static_cast<float*>(dalloc(3 * H * 4));
    std::vector<float> hv(3 * H);
    for (int64_t h = 0; h < H; ++h) {
        hv[h] = -0.5f;
        hv[H + h] = -1.0f - 0.01f * h;
        hv[2 * H + h] = 1.0f;
    }
    SURF_CUDA_CHECK(cudaMemcpy(vec, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
    return vec;
}

// ---- sampling: one token per row from fp32 logits (the serving engine's per-step draw) -------------
// Rows 1 / 16 / 100 over the Holotron vocabulary (131,072 + 64 padding columns), temperature 0.7
// (bench_serve's setting), then with top-k 50 and top-p 0.9 as well. Bytes: the logits read once.
void bench_sampling(double copy_gbs) {
    const int64_t vocab = 131072, stride = 131136, max_rows = 100;
    auto* logits = static_cast<float*>(dalloc(max_rows * stride * 4));
    fill_random(logits, max_rows * stride, false, -8, 8, 11);
    std::vector<float> temp_h(max_rows, 0.7f), top_p_h(max_rows, 0.9f);
    std::vector<int32_t> top_k_h(max_rows, 50);
    std::vector<uint64_t> seed_h(max_rows), step_h(max_rows, 3);
    for (int64_t r = 0; r < max_rows; ++r) seed_h[r] = static_cast<uint64_t>(r);
    auto* temp = static_cast<float*>(dalloc(max_rows * 4));
    auto* top_p = static_cast<float*>(dalloc(max_rows * 4));
    auto* top_k = static_cast<int32_t*>(dalloc(max_rows * 4));
    auto* seed = static_cast<uint64_t*>(dalloc(max_rows * 8));
    auto* step = static_cast<uint64_t*>(dalloc(max_rows * 8));
    auto* tokens = static_cast<int32_t*>(dalloc(max_rows * 4));
    SURF_CUDA_CHECK(cudaMemcpy(temp, temp_h.data(), max_rows * 4, cudaMemcpyHostToDevice));
    SURF_CUDA_CHECK(cudaMemcpy(top_p, top_p_h.data(), max_rows * 4, cudaMemcpyHostToDevice));
    SURF_CUDA_CHECK(cudaMemcpy(top_k, top_k_h.data(), max_rows * 4, cudaMemcpyHostToDevice));
    SURF_CUDA_CHECK(cudaMemcpy(seed, seed_h.data(), max_rows * 8, cudaMemcpyHostToDevice));
    SURF_CUDA_CHECK(cudaMemcpy(step, step_h.data(), max_rows * 8, cudaMemcpyHostToDevice));
    for (bool radix_only : {false, true}) {  // binned selection (the default) and the radix digits alone
        for (bool cuts : {false, true}) {
            for (int64_t rows : {int64_t{1}, int64_t{16}, max_rows}) {
                cu::SamplingParams sp;
                sp.logits = logits, sp.temperature = temp, sp.seed = seed, sp.step = step, sp.tokens = tokens;
                if (cuts) sp.top_k = top_k, sp.top_p = top_p;
                sp.rows = rows, sp.vocab = vocab, sp.logits_stride = stride, sp.radix_only = radix_only;
                const double us = time_us([&](int) { cu::sample_tokens(sp, nullptr); });
                record(std::string("sample_tokens T=0.7") + (cuts ? " top-k 50 top-p 0.9" : "") +
                           (radix_only ? " (radix only)" : ""),
                       "vocab 131072 fp32", rows, us, static_cast<double>(rows) * vocab * 4, false, copy_gbs);
            }
        }
    }
    for (void* ptr : {static_cast<void*>(logits), static_cast<void*>(temp), static_cast<void*>(top_p),
                      static_cast<void*>(top_k), static_cast<void*>(seed), static_cast<void*>(step),
                      static_cast<void*>(tokens)}) {
        SURF_CUDA_CHECK(cudaFree(ptr));
    }
}

// ---- decode: selective state update ---------------------------------------------------------------
// Its operands: 100 rows of in_proj output, the head vectors, 400 state slots (400 fp32 states = 2.1 GB ≫
// L2) that launches rotate over in sets of `batch`, visited in a scattered order, and the output rows.
struct SsuOperands {
    static constexpr int64_t max_b = 100, n_slots = 400;
    bf16* xbc = nullptr;
    float* vec = nullptr;
    void* state = nullptr;
    float* y = nullptr;
    int32_t* slots = nullptr;

    SsuOperands() {
        xbc = static_cast<bf16*>(dalloc(max_b * zx_stride * 2));
        fill_random(xbc, max_b * zx_stride, true, -1, 1, 4);
        vec = head_vectors();
        state = dalloc(n_slots * H * P * N * 4);
        fill_random(state, n_slots * H * P * N, false, -1, 1, 5);
        y = static_cast<float*>(dalloc(max_b * H * P * 4));
        std::vector<int32_t> slots_h(n_slots);
        for (int64_t i = 0; i < n_slots; ++i) slots_h[i] = static_cast<int32_t>((i * 7) % n_slots);
        slots = static_cast<int32_t*>(dalloc(n_slots * 4));
        SURF_CUDA_CHECK(cudaMemcpy(slots, slots_h.data(), n_slots * 4, cudaMemcpyHostToDevice));
    }
    void free() const {
        SURF_CUDA_CHECK(cudaFree(xbc));
        SURF_CUDA_CHECK(cudaFree(vec));
        SURF_CUDA_CHECK(cudaFree(state));
        SURF_CUDA_CHECK(cudaFree(y));
        SURF_CUDA_CHECK(cudaFree(slots));
    }

    // The update of b rows of `sdt` state, fp32 y (the slots are set per launch).
    cu::SsuParams params(cu::DType sdt, int64_t b) const {
        cu::SsuParams p;
        p.x = xbc;
        p.B = xbc + H * P;
        p.C = xbc + H * P + G * N;
        p.dt_raw = xbc + conv_dim;
        p.dt_bias = vec;
        p.A = vec + H;
        p.D = vec + 2 * H;
        p.state = state;
        p.state_dtype = sdt;
        p.y = y;
        p.y_dtype = cu::DType::kF32;
        p.batch = b;
        p.H = H;
        p.P = P;
        p.G = G;
        p.N = N;
        p.x_stride = zx_stride;
        p.bc_stride = zx_stride;
        p.dt_stride = zx_stride;
        return p;
    }

    // Median µs of the update `p`, each launch on the next set of slots.
    double time(cu::SsuParams& p) const {
        const int64_t sets = n_slots / p.batch;
        return time_us(
            [&](int i) {
                p.slots = slots + (i % sets) * p.batch;
                cu::selective_state_update(p, nullptr);
            },
            30);
    }
};

void bench_ssu_decode(const SsuOperands& s, const std::vector<int64_t>& batches, double copy_gbs) {
    for (auto sdt : {cu::DType::kF32, cu::DType::kBF16}) {
        const size_t es = cu::dtype_size(sdt);
        // The state staged by cp.async, or (100 rows) by one bulk copy a block (SsuParams::bulk_stage).
        for (int c = 0; c < static_cast<int>(batches.size()) + 1; ++c) {
            const bool bulk = c == static_cast<int>(batches.size());
            const int64_t b = bulk ? 100 : batches[c];
            cu::SsuParams p = s.params(sdt, b);
            p.bulk_stage = bulk;
            const double us = s.time(p);
            const double bytes = b * (2.0 * H * P * N * es + (H * P + 2 * G * N + H) * 2.0 + H * P * 4.0);
            record(std::string("ssu decode (state ") + (es == 4 ? "fp32)" : "bf16)") + (bulk ? " bulk" : ""),
                   "H128 P80 N128 G8", b, us, bytes, false, copy_gbs);
        }
    }
}

// Replay (SsuParams::replay_window), 100 rows: every row at count 0 (reads its state, stores its inputs),
// every row at K − 1 (reads, folds K tokens, writes), and rows staggered (count = row % K, as in serving);
// fp32 state at K = 4 / 8 / 16, bf16 state at 8, the split fp32 state (SsuParams::state_split) at 8 and 16.
// Bytes: the state read (+ written when folding; split: the high plane alone where a row does not fold) and
// the pending entries read.
void bench_ssu_replay(const SsuOperands& s, double copy_gbs) {
    struct ReplayCase {
        int64_t K;
        cu::DType sdt;
        bool split;
    };
    for (const ReplayCase& rc :
         {ReplayCase{4, cu::DType::kF32, false}, ReplayCase{8, cu::DType::kF32, false},
          ReplayCase{16, cu::DType::kF32, false}, ReplayCase{8, cu::DType::kBF16, false},
          ReplayCase{8, cu::DType::kF32, true}, ReplayCase{16, cu::DType::kF32, true}}) {
        const int64_t K = rc.K;
        const cu::DType sdt = rc.sdt;
        const int64_t b = 100, entry = cu::ssm_replay_entry_elems(H, P, G, N);
        const size_t es = cu::dtype_size(sdt);
        void* replay = dalloc(s.n_slots * K * entry * 2);
        fill_random(replay, s.n_slots * K * entry, true, -1, 1, 6);
        auto* counts = static_cast<int32_t*>(dalloc(b * 4));
        // Staging: 0 cp.async; 1 one bulk copy a block (SsuParams::bulk_stage); 2 and 3 bulk at row_split
        // 4 and 1 (staggered K = 8 only).
        const char* const modes[] = {"count 0", "count K-1", "staggered"};
        for (int c = 0; c < 3 * 4; ++c) {
            const char* mode = modes[c / 4];
            const int bulk = c % 4;
            if (bulk >= 2 && (K != 8 || mode[0] != 's')) continue;
            std::vector<int32_t> ch(static_cast<size_t>(b));
            double mean_count = 0, folds = 0;
            for (int64_t r = 0; r < b; ++r) {
                ch[r] = static_cast<int32_t>(mode[6] == '0' ? 0 : mode[6] == 'K' ? K - 1 : r % K);
                mean_count += ch[r] / static_cast<double>(b);
                folds += (ch[r] == K - 1) / static_cast<double>(b);
            }
            SURF_CUDA_CHECK(cudaMemcpy(counts, ch.data(), ch.size() * 4, cudaMemcpyHostToDevice));
            cu::SsuParams p = s.params(sdt, b);
            p.replay = replay;
            p.replay_count = counts;
            p.replay_window = K;
            p.state_split = rc.split;
            p.bulk_stage = bulk > 0;
            if (bulk >= 2) p.row_split = bulk == 2 ? 4 : 1;
            const double us = s.time(p);
            const double state_bytes =
                rc.split ? ((1.0 - folds) * 2.0 + folds * 8.0) * H * P * N : (1.0 + folds) * H * P * N * es;
            const double bytes = b * (state_bytes + (mean_count + 1.0) * entry * 2.0 + H * P * 4.0);
            record("ssu replay K=" + std::to_string(K) + " " + mode +
                       (bulk == 1   ? " bulk"
                        : bulk == 2 ? " bulk split4"
                        : bulk == 3 ? " bulk split1"
                                    : ""),
                   std::string("H128 P80 N128 G8 ") + (rc.split  ? "fp32 split"
                                                       : es == 4 ? "fp32"
                                                                 : "bf16"),
                   b, us, bytes, false, copy_gbs);
        }
        SURF_CUDA_CHECK(cudaFree(replay));
        SURF_CUDA_CHECK(cudaFree(counts));
    }
}

// ---- decode: paged attention at 4k context --------------------------------------------------------
void bench_attention_decode(const std::vector<int64_t>& batches, double copy_gbs) {
    const int64_t nh = 40, nkv = 8, D = 128, ctx = 4096, page = 16, n_seqs = 160;  // 160 × 16 MB KV ≫ L2
    const int64_t pages_per_seq = ctx / page, n_pages = n_seqs * pages_per_seq;
    auto* kc = static_cast<bf16*>(dalloc(n_pages * page * nkv * D * 2));
    auto* vc = static_cast<bf16*>(dalloc(n_pages * page * nkv * D * 2));
    fill_random(kc, n_pages * page * nkv * D, true, -1, 1, 6);
    fill_random(vc, n_pages * page * nkv * D, true, -1, 1, 7);
    std::vector<int32_t> bt(n_pages);
    std::mt19937 rng(8);
    for (int64_t i = 0; i < n_pages; ++i) bt[i] = static_cast<int32_t>(i);
    std::shuffle(bt.begin(), bt.end(), rng);
    auto* dbt = static_cast<int32_t*>(dalloc(n_pages * 4));
    SURF_CUDA_CHECK(cudaMemcpy(dbt, bt.data(), n_pages * 4, cudaMemcpyHostToDevice));
    std::vector<int32_t> lens(n_seqs, static_cast<int32_t>(ctx));
    auto* dlens = static_cast<int32_t*>(dalloc(n_seqs * 4));
    SURF_CUDA_CHECK(cudaMemcpy(dlens, lens.data(), n_seqs * 4, cudaMemcpyHostToDevice));
    auto* q = static_cast<bf16*>(dalloc(n_seqs * nh * D * 2));
    fill_random(q, n_seqs * nh * D, true, -1, 1, 9);
    auto* out = static_cast<bf16*>(dalloc(n_seqs * nh * D * 2));
    for (int64_t b : batches) {
        cu::AttentionDecodeParams p;
        p.q = q;
        p.out = out;
        p.k_cache = kc;
        p.v_cache = vc;
        p.seq_lens = dlens;
        p.page_size = page;
        p.max_pages_per_seq = pages_per_seq;
        p.batch = b;
        p.n_heads = nh;
        p.n_kv_heads = nkv;
        p.head_dim = D;
        p.max_seq_len = ctx;
        void* ws = dalloc(cu::attention_decode_workspace_bytes(p));
        const int64_t sets = n_seqs / b;
        const double us = time_us(
            [&](int i) {
                p.block_table = dbt + (i % sets) * b * pages_per_seq;
                cu::attention_decode(p, ws, nullptr);
            },
            30);
        const double bytes = b * (2.0 * ctx * nkv * D * 2 + 2.0 * nh * D * 2);
        record("attention decode (paged)",
               "40/8x128 ctx4096 page16 splits " + std::to_string(cu::attention_decode_splits(p)), b, us,
               bytes, false, copy_gbs);
        SURF_CUDA_CHECK(cudaFree(ws));
    }
    SURF_CUDA_CHECK(cudaFree(kc));
    SURF_CUDA_CHECK(cudaFree(vc));
    SURF_CUDA_CHECK(cudaFree(dbt));
    SURF_CUDA_CHECK(cudaFree(dlens));
    SURF_CUDA_CHECK(cudaFree(q));
    SURF_CUDA_CHECK(cudaFree(out));
}

// ---- prefill: SSD scan, b sequences × 1024 tokens ---------------------------------------------------
// Its operands for up to 100 sequences of `seq` tokens: conv output rows, dt_raw, the head vectors, 100
// states, the output rows, cu_seqlens (rewritten per case) and the slots.
struct SsdOperands {
    bf16 *xbc = nullptr, *dt = nullptr, *y = nullptr;
    float* vec = nullptr;
    void* state = nullptr;
    int32_t *dcu = nullptr, *dslots = nullptr;

    explicit SsdOperands(int64_t seq) {
        const int64_t max_tok = 100 * seq;
        xbc = static_cast<bf16*>(dalloc(max_tok * conv_dim * 2));
        dt = static_cast<bf16*>(dalloc(max_tok * H * 2));
        fill_random(xbc, max_tok * conv_dim, true, -1, 1, 10);
        fill_random(dt, max_tok * H, true, -3, 0.5f, 11);
        vec = head_vectors();
        state = dalloc(100 * H * P * N * 4);
        fill_random(state, 100 * H * P * N, false, -1, 1, 12);
        y = static_cast<bf16*>(dalloc(max_tok * H * P * 2));
        std::vector<int32_t> cu_h(101), slots_h(100);
        for (int i = 0; i <= 100; ++i) cu_h[i] = static_cast<int32_t>(i * seq);
        for (int i = 0; i < 100; ++i) slots_h[i] = i;
        dcu = static_cast<int32_t*>(dalloc(101 * 4));
        dslots = static_cast<int32_t*>(dalloc(100 * 4));
        SURF_CUDA_CHECK(cudaMemcpy(dcu, cu_h.data(), 101 * 4, cudaMemcpyHostToDevice));
        SURF_CUDA_CHECK(cudaMemcpy(dslots, slots_h.data(), 100 * 4, cudaMemcpyHostToDevice));
    }
    void free() const {
        for (void* ptr : {static_cast<void*>(xbc), static_cast<void*>(dt), static_cast<void*>(vec), state,
                          static_cast<void*>(y), static_cast<void*>(dcu), static_cast<void*>(dslots)}) {
            SURF_CUDA_CHECK(cudaFree(ptr));
        }
    }
};

// One row: the scan of b sequences of len tokens on the wgmma kernel or the mma.sync one.
void bench_ssd_case(const SsdOperands& s, int64_t b, int64_t len, bool wgmma, double gemm_tflops) {
    std::vector<int32_t> cu_r(b + 1);
    for (int64_t i = 0; i <= b; ++i) cu_r[i] = static_cast<int32_t>(i * len);
    SURF_CUDA_CHECK(cudaMemcpy(s.dcu, cu_r.data(), (b + 1) * 4, cudaMemcpyHostToDevice));
    cu::SsdVarlenParams p;
    p.x = s.xbc;
    p.B = s.xbc + H * P;
    p.C = s.xbc + H * P + G * N;
    p.dt_raw = s.dt;
    p.dt_bias = s.vec;
    p.A = s.vec + H;
    p.D = s.vec + 2 * H;
    p.state = s.state;
    p.cu_seqlens = s.dcu;
    p.slots = s.dslots;
    p.y = s.y;
    p.y_dtype = cu::DType::kBF16;
    p.n_tok = b * len;
    p.n_seq = b;
    p.H = H;
    p.P = P;
    p.G = G;
    p.N = N;
    p.chunk = 128;
    p.x_stride = conv_dim;
    p.bc_stride = conv_dim;
    p.dt_stride = H;
    p.wgmma = wgmma;
    const size_t ws_bytes = cu::ssd_workspace_bytes(p);
    void* ws = dalloc(ws_bytes);
    const double us = time_us([&](int) { cu::ssd_varlen(p, ws, nullptr); }, 10, 2);
    const double tok = static_cast<double>(b * len);
    const double flops = tok * (H * (2.0 * 128 * P + 4.0 * N * P) + G * 2.0 * 128 * N);  // serving.md §3.1
    record(wgmma ? "ssd prefill scan (wgmma where available)" : "ssd prefill scan (mma.sync)",
           "H128 P80 N128 chunk128 len" + std::to_string(len), b, us, flops, true, gemm_tflops);
    std::printf("    ssd: %.2f M tokens/s, %.3f us/token, workspace %zu bytes\n", tok / us, us / tok,
                ws_bytes);
    SURF_CUDA_CHECK(cudaFree(ws));
}

void bench_ssd(bool quick, const std::vector<int64_t>& batches, double gemm_tflops) {
    const int64_t seq = quick ? 512 : 1024;
    const SsdOperands s(seq);
    // b sequences of `seq` tokens, one long sequence (the engine's prefill chunk is up to ~8k tokens) and
    // one serving-step prompt (924 tokens: a screenshot and its text).
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (int64_t b : batches) runs.emplace_back(b, seq);
    runs.emplace_back(1, 8 * seq);
    runs.emplace_back(1, 924);
    for (auto [b, len] : runs)
        for (bool wgmma : {true, false})  // the wgmma kernel (compute capability 9.0), then the mma.sync one
            bench_ssd_case(s, b, len, wgmma, gemm_tflops);
    s.free();
}

// ---- prefill attention: LLM causal (paged, 4k) and ViT bidirectional (13 tiles) -----------------------
void bench_llm_prefill_attention(double gemm_tflops) {
    const int64_t nh = 40, nkv = 8, D = 128, len = 4096, page = 64, pages = len / page;
    auto* q = static_cast<bf16*>(dalloc(len * nh * D * 2));
    auto* kc = static_cast<bf16*>(dalloc(len * nkv * D * 2));
    auto* vc = static_cast<bf16*>(dalloc(len * nkv * D * 2));
    auto* out = static_cast<bf16*>(dalloc(len * nh * D * 2));
    fill_random(q, len * nh * D, true, -1, 1, 13);
    fill_random(kc, len * nkv * D, true, -1, 1, 14);
    fill_random(vc, len * nkv * D, true, -1, 1, 15);
    std::vector<int32_t> bt(pages), cu_h{0, static_cast<int32_t>(len)}, lens{static_cast<int32_t>(len)};
    for (int64_t i = 0; i < pages; ++i) bt[i] = static_cast<int32_t>(i);
    auto* dbt = static_cast<int32_t*>(dalloc(pages * 4));
    auto* dcu = static_cast<int32_t*>(dalloc(8));
    auto* dl = static_cast<int32_t*>(dalloc(4));
    SURF_CUDA_CHECK(cudaMemcpy(dbt, bt.data(), pages * 4, cudaMemcpyHostToDevice));
    SURF_CUDA_CHECK(cudaMemcpy(dcu, cu_h.data(), 8, cudaMemcpyHostToDevice));
    SURF_CUDA_CHECK(cudaMemcpy(dl, lens.data(), 4, cudaMemcpyHostToDevice));
    cu::AttentionPrefillParams p;
    p.q = q;
    p.out = out;
    p.cu_seqlens_q = dcu;
    p.k_cache = kc;
    p.v_cache = vc;
    p.block_table = dbt;
    p.seq_lens_k = dl;
    p.page_size = page;
    p.max_pages_per_seq = pages;
    p.n_seq = 1;
    p.n_heads = nh;
    p.n_kv_heads = nkv;
    p.head_dim = D;
    p.max_seqlen_q = len;
    p.causal = true;
    const double us = time_us([&](int) { cu::attention_prefill(p, nullptr); }, 10);
    record("attention prefill causal", "40/8x128 len4096 paged", 1, us, 4.0 * nh * D * len * len / 2.0, true,
           gemm_tflops);
    for (void* ptr :
         {static_cast<void*>(q), static_cast<void*>(kc), static_cast<void*>(vc), static_cast<void*>(out),
          static_cast<void*>(dbt), static_cast<void*>(dcu), static_cast<void*>(dl)}) {
        SURF_CUDA_CHECK(cudaFree(ptr));
    }
}

void bench_vit_attention(double gemm_tflops) {
    const int64_t tiles = 13, tl = 1032, vh = 16, vd = 80, w = vh * vd;
    auto* qkv = static_cast<bf16*>(dalloc(tiles * tl * 3 * w * 2));
    auto* vo = static_cast<bf16*>(dalloc(tiles * tl * w * 2));
    fill_random(qkv, tiles * tl * 3 * w, true, -1, 1, 16);
    std::vector<int32_t> tcu(tiles + 1);
    for (int64_t i = 0; i <= tiles; ++i) tcu[i] = static_cast<int32_t>(i * tl);
    auto* dtcu = static_cast<int32_t*>(dalloc((tiles + 1) * 4));
    SURF_CUDA_CHECK(cudaMemcpy(dtcu, tcu.data(), (tiles + 1) * 4, cudaMemcpyHostToDevice));
    cu::AttentionPrefillParams v;
    v.q = qkv;
    v.q_stride = 3 * w;
    v.out = vo;
    v.cu_seqlens_q = dtcu;
    v.k = qkv + w;
    v.v = qkv + 2 * w;
    v.kv_stride = 3 * w;
    v.cu_seqlens_k = dtcu;
    v.n_seq = tiles;
    v.n_heads = vh;
    v.n_kv_heads = vh;
    v.head_dim = vd;
    v.max_seqlen_q = tl;
    v.causal = false;
    const double vus = time_us([&](int) { cu::attention_prefill(v, nullptr); }, 10);
    record("attention ViT bidirectional", "16x80, 13 tiles x 1032", tiles, vus,
           4.0 * vh * vd * tl * tl * tiles, true, gemm_tflops);
    SURF_CUDA_CHECK(cudaFree(qkv));
    SURF_CUDA_CHECK(cudaFree(vo));
    SURF_CUDA_CHECK(cudaFree(dtcu));
}

// ---- prefill memory-bound ops: bytes = each input read once + each output written once ------------
// Their buffers: one 4096-token LLM prefill step and the profiled vision batch, each larger than L2.
struct MemoryOperands {
    static constexpr int64_t tok = 4096, d = 5120, d_inner = H * P,
                             proj = zx_stride;  // one 4096-token LLM prefill step
    static constexpr int64_t vit_rows = 19056, vit_w = 1280, vit_inter = 5120;  // the profiled vision batch
    static constexpr int64_t mlp_inter = 20480;
    bf16* zx = nullptr;   // [tok, z | xBC | dt] in_proj output
    float* yf = nullptr;  // fp32 rows
    bf16* out = nullptr;
    float* vec = nullptr;  // norm weight / conv w+b

    MemoryOperands() {
        zx = static_cast<bf16*>(dalloc(tok * proj * 2));
        yf = static_cast<float*>(dalloc(std::max(tok * d_inner, vit_rows * vit_w) * 4));
        out = static_cast<bf16*>(dalloc(std::max(tok * mlp_inter, vit_rows * vit_inter) * 2));
        vec = static_cast<float*>(dalloc(std::max(d_inner, conv_dim * 5) * 4));
        fill_random(zx, tok * proj, true, -2, 2, 19);
        fill_random(yf, std::max(tok * d_inner, vit_rows * vit_w), false, -2, 2, 20);
        fill_random(vec, std::max(d_inner, conv_dim * 5), false, 0.5f, 1.5f, 21);
    }
    void free() const {
        for (void* ptr : {static_cast<void*>(zx), static_cast<void*>(yf), static_cast<void*>(out),
                          static_cast<void*>(vec)}) {
            SURF_CUDA_CHECK(cudaFree(ptr));
        }
    }

    cu::GatedRmsNormParams gated_norm() const {
        cu::GatedRmsNormParams gn;
        gn.y = yf, gn.y_dtype = cu::DType::kF32, gn.z = zx, gn.z_stride = proj, gn.weight = vec, gn.out = out;
        gn.rows = tok, gn.dim = d_inner, gn.group_size = d_inner / G;
        return gn;
    }
    cu::LayerNormParams vit_layernorm() const {
        cu::LayerNormParams ln;
        ln.x = yf, ln.x_dtype = cu::DType::kF32, ln.weight = vec, ln.bias = vec + vit_w, ln.y = out;
        ln.rows = vit_rows, ln.dim = vit_w;
        return ln;
    }
};

void bench_llm_norms(const MemoryOperands& m, double copy_gbs) {
    const int64_t tok = m.tok, d = m.d, d_inner = m.d_inner;
    cu::RmsNormParams rn;
    rn.x = m.yf, rn.x_dtype = cu::DType::kF32, rn.weight = m.vec, rn.y = m.out, rn.rows = tok, rn.dim = d;
    const double rn_us = time_us([&](int) { cu::rmsnorm(rn, nullptr); });
    record("rmsnorm fp32 -> bf16", "4096 x 5120", 1, rn_us, tok * d * 6.0 + d * 4.0, false, copy_gbs);

    const cu::GatedRmsNormParams gn = m.gated_norm();
    const double gn_us = time_us([&](int) { cu::gated_rmsnorm(gn, nullptr); });
    record("gated_rmsnorm y fp32, z bf16", "4096 x 10240 group 1280", 1, gn_us,
           tok * d_inner * 8.0 + d_inner * 4.0, false, copy_gbs);
}

// conv1d varlen over the xBC slice of in_proj rows (stride 22656): one 4096-token sequence, and 16 × 256.
void bench_conv(const MemoryOperands& m, double copy_gbs) {
    const int64_t tok = m.tok, d_inner = m.d_inner, proj = m.proj;
    const int64_t max_seqs = 16;
    void* cstate = dalloc(max_seqs * conv_dim * 3 * 2);
    fill_random(cstate, max_seqs * conv_dim * 3, true, -1, 1, 22);
    auto* dcu = static_cast<int32_t*>(dalloc((max_seqs + 1) * 4));
    auto* dslots = static_cast<int32_t*>(dalloc(max_seqs * 4));
    std::vector<int32_t> slots_h(max_seqs);
    for (int64_t i = 0; i < max_seqs; ++i) slots_h[i] = static_cast<int32_t>(i);
    SURF_CUDA_CHECK(cudaMemcpy(dslots, slots_h.data(), max_seqs * 4, cudaMemcpyHostToDevice));
    for (int64_t n_seq : {int64_t{1}, max_seqs}) {
        std::vector<int32_t> cu_r(n_seq + 1);
        for (int64_t i = 0; i <= n_seq; ++i) cu_r[i] = static_cast<int32_t>(i * tok / n_seq);
        SURF_CUDA_CHECK(cudaMemcpy(dcu, cu_r.data(), (n_seq + 1) * 4, cudaMemcpyHostToDevice));
        cu::ConvVarlenParams cv;
        cv.x = m.zx + d_inner, cv.x_stride = proj, cv.weight = m.vec, cv.bias = m.vec + conv_dim * 4,
        cv.state = cstate;
        cv.state_dtype = cu::DType::kBF16, cv.cu_seqlens = dcu, cv.slots = dslots, cv.out = m.out;
        cv.n_tok = tok, cv.n_seq = n_seq, cv.channels = conv_dim, cv.K = 4;
        // The state round-trips (K-1 entries per channel and sequence); the launch restores nothing, so
        // later launches start from the previous state, which costs the same.
        const double us = time_us([&](int) { cu::causal_conv1d_varlen(cv, nullptr); });
        const double bytes = tok * conv_dim * 4.0 + n_seq * conv_dim * 3 * 2 * 2.0 + conv_dim * 5 * 4.0;
        record("conv1d_varlen + SiLU (bf16)", "4096 tok x 12288 ch, x stride 22656", n_seq, us, bytes, false,
               copy_gbs);
    }
    SURF_CUDA_CHECK(cudaFree(cstate));
    SURF_CUDA_CHECK(cudaFree(dcu));
    SURF_CUDA_CHECK(cudaFree(dslots));
}

// The ViT LayerNorm over the whole batch; then over one 3-tile batch (3096 rows, fp32 x, no residual) and
// the gated norm over a 1024-token chunk, as a serving step runs them. One call's buffers fit in L2, so
// launches rotate over slices of the buffers (8 and 4 slices, together several times L2).
void bench_step_norms(const MemoryOperands& m, double copy_gbs) {
    const int64_t vit_rows = m.vit_rows, vit_w = m.vit_w, d_inner = m.d_inner, proj = m.proj;
    const cu::LayerNormParams ln = m.vit_layernorm();
    const double ln_us = time_us([&](int) { cu::layernorm(ln, nullptr); });
    record("ViT layernorm fp32 -> bf16", "19056 x 1280 (+bias)", 1, ln_us,
           vit_rows * vit_w * 6.0 + vit_w * 8.0, false, copy_gbs);
    {
        const int64_t rows = 3096, slices = 8;
        cu::LayerNormParams sl = ln;
        sl.rows = rows;
        const double us = time_us([&](int i) {
            sl.x = m.yf + (i % slices) * rows * vit_w, sl.y = m.out + (i % slices) * rows * vit_w;
            cu::layernorm(sl, nullptr);
        });
        record("ViT layernorm fp32 -> bf16", "3096 x 1280 (+bias), 8 slices", 1, us,
               rows * vit_w * 6.0 + vit_w * 8.0, false, copy_gbs);
    }
    {
        const int64_t rows = 1024, slices = 4;
        cu::GatedRmsNormParams sg = m.gated_norm();
        sg.rows = rows;
        const double us = time_us([&](int i) {
            const int64_t s = i % slices;
            sg.y = m.yf + s * rows * d_inner, sg.z = m.zx + s * rows * proj,
            sg.out = m.out + s * rows * d_inner;
            cu::gated_rmsnorm(sg, nullptr);
        });
        record("gated_rmsnorm y fp32, z bf16", "1024 x 10240 group 1280, 4 slices", 1, us,
               rows * d_inner * 8.0 + d_inner * 4.0, false, copy_gbs);
    }
}

// In place: the values drift launch to launch but stay finite (GELU and ReLU² of bf16 values).
void bench_activations(const MemoryOperands& m, double copy_gbs) {
    const int64_t tok = m.tok, vit_rows = m.vit_rows, vit_inter = m.vit_inter, mlp_inter = m.mlp_inter;
    fill_random(m.out, vit_rows * vit_inter, true, -3, 3, 23);
    const double ge_us = time_us([&](int) { cu::gelu_erf(m.out, vit_rows * vit_inter, nullptr); });
    record("ViT gelu_erf in place (bf16)", "19056 x 5120", 1, ge_us, vit_rows * vit_inter * 4.0, false,
           copy_gbs);
    fill_random(m.out, tok * mlp_inter, true, -1, 1, 24);
    const double rs_us = time_us([&](int) { cu::relu_squared(m.out, tok * mlp_inter, nullptr); });
    record("MLP relu_squared in place (bf16)", "4096 x 20480", 1, rs_us, tok * mlp_inter * 4.0, false,
           copy_gbs);
}

// ---- GEMMs: the LLM's projections at decode batches (weight-bound) and one prefill size -------------
void bench_gemms(cu::GemmContext& gemm_ctx, const std::vector<int64_t>& batches, double copy_gbs,
                 double gemm_tflops) {
    struct Lin {
        const char* name;
        int64_t n, k;
    };
    const Lin lins[] = {{"mamba in_proj", 22656, 5120}, {"mamba out_proj", 5120, 10240},
                        {"mlp up", 20480, 5120},        {"mlp down", 5120, 20480},
                        {"attn q_proj", 5120, 5120},    {"lm_head", 131072, 5120}};
    const int64_t max_m = 4096, n_w = 4;  // rotate over 4 weight copies (in_proj weight 232 MB ≫ L2 anyway)
    for (const Lin& l : lins) {
        std::vector<bf16*> w(n_w);
        for (auto& ptr : w) {
            ptr = static_cast<bf16*>(dalloc(l.n * l.k * 2));
            fill_random(ptr, l.n * l.k, true, -0.05f, 0.05f, 17);
        }
        auto* x = static_cast<bf16*>(dalloc(max_m * l.k * 2));
        auto* y = static_cast<bf16*>(dalloc(max_m * l.n * 2));
        fill_random(x, max_m * l.k, true, -1, 1, 18);
        std::vector<int64_t> ms(batches);
        ms.push_back(max_m);
        for (int64_t m : ms) {
            const double us = time_us(
                [&](int i) {
                    cu::gemm(gemm_ctx, {x, w[i % n_w], nullptr, y, cu::DType::kBF16, m, l.n, l.k}, nullptr);
                },
                20);
            const double bytes = 2.0 * (l.n * l.k + m * l.k + m * l.n), flops = 2.0 * m * l.n * l.k;
            const std::string shape =
                std::string(l.name) + " " + std::to_string(l.n) + "x" + std::to_string(l.k);
            if (m <= 100)
                record("gemm bf16 (weight-bound)", shape, m, us, bytes, false, copy_gbs);
            else
                record("gemm bf16 (prefill)", shape, m, us, flops, true, gemm_tflops);
        }
        for (auto* ptr : w) SURF_CUDA_CHECK(cudaFree(ptr));
        SURF_CUDA_CHECK(cudaFree(x));
        SURF_CUDA_CHECK(cudaFree(y));
    }
}

// The markdown table of every row recorded.
void print_table(const char* device, double copy_gbs, double gemm_tflops) {
    std::printf("\n## Kernel benchmark (%s; copy %.0f GB/s, GEMM %.0f TFLOP/s)\n\n", device, copy_gbs,
                gemm_tflops);
    std::printf(
        "| kernel | shape | batch | time (us) | achieved | %% of ceiling |\n|---|---|---|---|---|---|\n");
    for (const Row& r : g_rows) {
        std::printf("| %s | %s | %lld | %.1f | %.1f %s | %.1f%% |\n", r.kernel.c_str(), r.shape.c_str(),
                    static_cast<long long>(r.batch), r.us, r.achieved, r.unit.c_str(), r.pct);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const bool ssu_only =
        argc > 1 && std::strcmp(argv[1], "--ssu-only") == 0;  // the state-update section only (ncu runs)
    const bool ssd_only = argc > 1 && std::strcmp(argv[1], "--ssd-only") == 0;  // the SSD scan section only
    cudaDeviceProp prop{};
    SURF_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize >> 20);
    const std::vector<int64_t> batches{1, 16, 64, 100};

    // ---- ceilings -----------------------------------------------------------------------------------
    const size_t copy_bytes = size_t{1} << 30;
    const double copy_gbs = surf::bench::copy_bandwidth() / 1e9;
    const double copy_us = 2.0 * copy_bytes / (copy_gbs * 1e9) * 1e6;
    cu::GemmContext gemm_ctx;
    const double gemm_tflops = surf::bench::gemm_ceiling() / 1e12;
    std::printf("ceilings: copy %.0f GB/s (read+write), bf16 GEMM 8192^3 %.0f TFLOP/s\n", copy_gbs,
                gemm_tflops);
    record("ceiling: D2D copy", "1 GiB", 1, copy_us, 2.0 * copy_bytes, false, copy_gbs);
    record("ceiling: cuBLASLt bf16 GEMM", "8192x8192x8192", 1,
           2.0 * 8192.0 * 8192 * 8192 / (gemm_tflops * 1e12) * 1e6, 2.0 * 8192.0 * 8192 * 8192, true,
           gemm_tflops);

    if (!ssu_only && !ssd_only) {
        bench_sampling(copy_gbs);
        if (argc > 1 && std::strcmp(argv[1], "--sampling-only") == 0) return 0;
    }
    if (!ssd_only) {
        const SsuOperands ssu;
        bench_ssu_decode(ssu, batches, copy_gbs);
        bench_ssu_replay(ssu, copy_gbs);
        ssu.free();
    }
    if (ssu_only) return 0;
    if (!ssd_only) bench_attention_decode(batches, copy_gbs);
    bench_ssd(quick, batches, gemm_tflops);
    if (!ssd_only) {
        bench_llm_prefill_attention(gemm_tflops);
        bench_vit_attention(gemm_tflops);
    }
    if (!ssd_only) {
        const MemoryOperands mem;
        bench_llm_norms(mem, copy_gbs);
        bench_conv(mem, copy_gbs);
        bench_step_norms(mem, copy_gbs);
        bench_activations(mem, copy_gbs);
        mem.free();
    }
    if (!ssd_only) bench_gemms(gemm_ctx, batches, copy_gbs, gemm_tflops);
    print_table(prop.name, copy_gbs, gemm_tflops);
    return 0;
}
