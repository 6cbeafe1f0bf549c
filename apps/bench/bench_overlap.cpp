// bench_overlap: can a mixed step's bandwidth-bound decode work run *beside* its compute-bound prefill GEMMs?
// At Holotron-12B shapes, one Mamba layer's pieces: the prefill rows' in_proj GEMM (924 × 22,656 × 5,120) and
// the 100 decode rows' selective state update (fp32 state, 5.2 MB a row). The GEMM is planned for all SMs but
// K (cuBLASLt SM-count target) and issued first on one stream, the state update right after on another, and
// the pair is timed against each alone. If the state update keeps most of its bandwidth on the K spare SMs
// while the GEMM loses only K/132 of its speed, a layer that splits in_proj into decode and prefill rows and
// overlaps the decode rows' state update with the prefill rows' GEMM wins (docs/BENCHMARKS.md).
// Second table: the state update alone on K SMs (the others held by apps/bench/sm_occupier.h), i.e. how
// many SMs it needs for its bandwidth, which decides whether compute-bound work can share the GPU with it.
// Third table: one vision-tower layer of a 3-tile screenshot (LayerNorm, qkv, attention, proj, LayerNorm,
// fc1, GELU, fc2 at C-RADIO-H shapes, random weights) beside the same state update, its GEMMs planned for
// all SMs or fewer, on a stream of the highest priority: the pairing an engine would make by running the
// tower inside the Mamba layers' state-update windows (docs/BENCHMARKS.md).
// Fourth table (--bulk-probe: only this one): the read bandwidth K persistent blocks get from bulk copies
// kept several stages deep (apps/bench/sm_occupier.h, bulk_read_probe): the most a state update could get
// on K SMs if its copies never waited on its own latency (docs/BENCHMARKS.md). Fifth table (--branches: only
// this one): a mixed step's Mamba branches as the engine issues them (GpuLimits:: overlap_mamba_branches):
// the prefill rows' SSD scan (one prompt chunk, on a highest-priority stream) beside the decode rows' state
// update (replay window 8, staggered counts, as in serving), each timed alone and together, with each
// kernel's span inside the pair (events on its stream): which of the two the pairing stretches.
// --branches-green N,…: that table, then the pair with each branch held to its own SMs by green contexts (the
// scan on N, the update on the rest).
// --l2-probe (only this): the L2 → SM read ceiling (apps/bench/sm_occupier.h, l2_read_probe) over
// L2-resident buffers, then the in_proj GEMM alone (the heuristic's plan, no tuning) for Nsight Compute to
// count its L2 → SM bytes against it.
// --profile-ranges: in the first and third tables, the GEMM (all SMs and 32 left), the state update, the ViT
// layer (all SMs) and their pairs run once more each between cudaProfilerStart / Stop, for Nsight Compute's
// range replay (scripts/ncu_ranges.sh): DRAM, L2 and SM throughput of concurrent kernels together.
// --serving-ssu: the first three tables with the state update as serving issues it (replay window 8, bulk
// staging, evict-first) instead of the plain one (state read and written every step).
// --wgmma-pair (only this): the in_proj GEMM by gemm_wgmma on all SMs but K beside the state update as
// serving issues it, against cuBLASLt's pair (wgmma_pair_table).
//   bench_overlap [--decode 100] [--prefill 924] [--reps 20] [--profile-ranges] [--serving-ssu] [--bulk-probe
//   | --l2-probe | --wgmma-pair | --branches | --branches-green N,N,…]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#ifdef SURF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "apps/bench/bench_profile.h"
#include "apps/bench/sm_occupier.h"
#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/green_context.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/random_fill.h"

namespace cu = surf::kernels::cuda;
using cu::bf16;

namespace {

// Holotron-12B's Mamba layer (tests/fixtures/holotron_12b/config.json).
constexpr int64_t kHidden = 5120, kHeads = 128, kHeadDim = 80, kGroups = 8, kState = 128;
// Its vision tower (C-RADIO-H): width, heads, MLP width, tokens per 512-pixel tile (1,024 patches + 8
// prefix).
constexpr int64_t kVitWidth = 1280, kVitHeads = 16, kVitInter = 5120, kVitTileTokens = 1032;
constexpr int64_t kInProj = 2 * kHeads * kHeadDim + 2 * kGroups * kState + kHeads;  // z | xBC | dt = 22,656

struct Buf {
    void* p = nullptr;
    explicit Buf(size_t bytes) { SURF_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16))); }
    ~Buf() { cudaFree(p); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    template <typename T>
    T* as() const {
        return static_cast<T*>(p);
    }
};

void fill(const Buf& b, int64_t n, bool is_bf16, float lo, float hi, uint64_t seed) {
    cu::UniformFillParams f;
    f.x = b.p, f.bf16 = is_bf16, f.n = n, f.lo = lo, f.hi = hi, f.seed = seed;
    cu::uniform_fill(f, nullptr);
}

float elapsed(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

// The middle value of a set of timings (the upper middle one for an even count); 0 for none.
double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// The fourth table: bulk_read_probe over `bytes` of src on K blocks (one an SM), per ring shape, each timed
// by `time_ms` (main's median of launches between events).
void bulk_table(const Buf& src, int64_t bytes, int sms, int reps,
                const std::function<double(const std::function<void()>&)>& time_ms, cudaStream_t s,
                const char* device) {
    Buf sink(static_cast<size_t>(sms) * 4);
    std::printf(
        "# bulk-copy read probe on %s: %.2f GB read by K persistent blocks (one an SM), one thread issuing "
        "bulk copies a "
        "ring of stages deep, four warps summing each stage; median of %d\n\n"
        "| SMs | stages x KB | ms | GB/s | GB/s per SM |\n|---|---|---|---|---|\n",
        device, bytes / 1e9, reps);
    const struct { int stages, kb; } rings[] = {{2, 20}, {4, 20}, {8, 20}, {4, 40}, {6, 32}, {10, 20}};
    for (int k : {sms, sms * 3 / 4, sms / 2, sms / 3, sms / 4, sms / 6}) {
        for (const auto& r : rings) {
            cu::BulkReadProbeParams bp;
            bp.src = src.as<float>(), bp.sink = sink.as<float>(), bp.blocks = k, bp.stages = r.stages,
            bp.stage_bytes = r.kb * 1024;
            bp.items = bytes / bp.stage_bytes;
            const double moved = static_cast<double>(bp.items) * bp.stage_bytes;
            const double ms = time_ms([&] { cu::bulk_read_probe(bp, s); }), gbs = moved / (ms * 1e-3) / 1e9;
            std::printf("| %d | %d x %d | %.3f | %.0f | %.1f |\n", k, r.stages, r.kb, ms, gbs, gbs / k);
            std::fflush(stdout);
        }
    }
}

// --l2-probe: l2_read_probe over L2-resident pieces of src (and one past the L2's size), per grid size; each
// case reads ≈ 2 GB in all.
void l2_table(const Buf& src, int sms, const std::function<double(const std::function<void()>&)>& time_ms,
              cudaStream_t s, const char* device, int reps) {
    constexpr int kMostBlocksPerSm = 16;
    Buf sink(static_cast<size_t>(sms) * kMostBlocksPerSm * 4);  // a float per block
    std::printf(
        "# L2 read probe on %s: blocks of 256 threads read an L2-resident buffer in 16-byte loads that skip "
        "the L1, ≈ 2 GB "
        "a case; median of %d\n\n| buffer MB | blocks | ms | TB/s |\n|---|---|---|---|\n",
        device, reps);
    for (int64_t mb : {8, 16, 32, 256}) {
        for (int per_sm : {2, 4, 8, kMostBlocksPerSm}) {
            cu::L2ReadProbeParams lp;
            lp.src = src.as<float>(), lp.sink = sink.as<float>(), lp.blocks = sms * per_sm,
            lp.bytes = mb << 20;
            lp.passes = static_cast<int>(std::max<int64_t>(1, (int64_t{2} << 30) / lp.bytes));
            const double ms = time_ms([&] { cu::l2_read_probe(lp, s); });
            std::printf("| %lld | %d | %.3f | %.2f |\n", (long long)mb, lp.blocks, ms,
                        static_cast<double>(lp.bytes) * lp.passes / (ms * 1e-3) / 1e12);
            std::fflush(stdout);
        }
    }
}

// The state update as a serving run issues it: replay window 8 with counts b mod 8 (one row in eight folds,
// as with staggered sessions) and bulk staging where the device has it. Owns the replay entries and counts.
constexpr int64_t kWindow = 8;
struct ReplaySsu {
    cu::SsuParams su;
    Buf entries, counts;
    explicit ReplaySsu(const cu::SsuParams& ssu0)
        : su(ssu0),
          entries(ssu0.batch * kWindow * cu::ssm_replay_entry_elems(kHeads, kHeadDim, kGroups, kState) * 2),
          counts(ssu0.batch * 4) {
        const int64_t decode = ssu0.batch;
        fill(entries, decode * kWindow * cu::ssm_replay_entry_elems(kHeads, kHeadDim, kGroups, kState), true,
             -1.0f, 1.0f, 21);
        std::vector<int32_t> count_h(static_cast<size_t>(decode));
        for (int64_t b = 0; b < decode; ++b) count_h[b] = static_cast<int32_t>(b % kWindow);
        SURF_CUDA_CHECK(cudaMemcpy(counts.p, count_h.data(), count_h.size() * 4, cudaMemcpyHostToDevice));
        su.replay = entries.p, su.replay_count = counts.as<int32_t>(), su.replay_window = kWindow,
        su.bulk_stage = cu::ssu_bulk_stage_available();
    }
};

// The SSD scan's operands for one `prefill`-token prompt: its conv output rows [prefill, x | B | C], dt_raw
// [prefill, heads] and one state slot; the head parameters (dt_bias, A, D) are the state update's.
struct SsdOperands {
    static constexpr int64_t kConvDim = kHeads * kHeadDim + 2 * kGroups * kState;
    Buf xbc, dt, ssd_state, ssd_y;
    Buf cu_seqlens, slot;
    cu::SsdVarlenParams sd;

    SsdOperands(const cu::SsuParams& ssu0, int64_t prefill)
        : xbc(prefill * kConvDim * 2),
          dt(prefill * kHeads * 2),
          ssd_state(kHeads * kHeadDim * kState * 4),
          ssd_y(prefill * kHeads * kHeadDim * 4),
          cu_seqlens(8),
          slot(4) {
        fill(xbc, prefill * kConvDim, true, -1.0f, 1.0f, 22);
        fill(dt, prefill * kHeads, true, -3.0f, 0.5f, 23);
        fill(ssd_state, kHeads * kHeadDim * kState, false, -1.0f, 1.0f, 24);
        const int32_t cu_h[2] = {0, static_cast<int32_t>(prefill)}, slot_h = 0;
        SURF_CUDA_CHECK(cudaMemcpy(cu_seqlens.p, cu_h, sizeof cu_h, cudaMemcpyHostToDevice));
        SURF_CUDA_CHECK(cudaMemcpy(slot.p, &slot_h, 4, cudaMemcpyHostToDevice));
        sd.x = xbc.as<bf16>(), sd.B = sd.x + kHeads * kHeadDim, sd.C = sd.B + kGroups * kState,
        sd.dt_raw = dt.as<bf16>();
        sd.x_stride = sd.bc_stride = kConvDim, sd.dt_stride = kHeads;
        sd.dt_bias = ssu0.dt_bias, sd.A = ssu0.A, sd.D = ssu0.D, sd.state = ssd_state.p,
        sd.state_dtype = cu::DType::kF32;
        sd.cu_seqlens = cu_seqlens.as<int32_t>(), sd.slots = slot.as<int32_t>(), sd.y = ssd_y.p,
        sd.y_dtype = cu::DType::kF32;
        sd.n_tok = prefill, sd.n_seq = 1, sd.H = kHeads, sd.P = kHeadDim, sd.G = kGroups, sd.N = kState,
        sd.chunk = 128;
    }
};

// The fifth table's timings: the SSD scan (`sd`) and the state update (`su`) issued alone or as a pair,
// forked from and joined back into the language-model stream s_main; the scan's default stream is the
// engine's branch stream (highest priority).
struct BranchPair {
    struct Times {
        double pair, ssd, ssu;
    };

    cu::SsdVarlenParams& sd;
    cu::SsuParams& su;
    int reps;
    int lo = 0, hi = 0;  // the device's stream priorities
    cudaStream_t s_main = nullptr, s_branch = nullptr;
    cudaEvent_t ev[6];  // pair start, pair end, SSD start / end, state update start / end

    BranchPair(cu::SsdVarlenParams& ssd, cu::SsuParams& ssu, int n_reps) : sd(ssd), su(ssu), reps(n_reps) {
        SURF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
        SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&s_main, cudaStreamNonBlocking));
        SURF_CUDA_CHECK(cudaStreamCreateWithPriority(&s_branch, cudaStreamNonBlocking, hi));
        for (cudaEvent_t& e : ev) SURF_CUDA_CHECK(cudaEventCreate(&e));
    }
    // At the end of the table (after an exception the streams and events are left to the process's end).
    void destroy() {
        for (cudaEvent_t e : ev) SURF_CUDA_CHECK(cudaEventDestroy(e));
        SURF_CUDA_CHECK(cudaStreamDestroy(s_main));
        SURF_CUDA_CHECK(cudaStreamDestroy(s_branch));
    }

    // Median (per column) over reps of: the pair's span on s_main, and each kernel's span on its own stream.
    // The SSD scan on ssd_stream and the state update on ssu_stream (s_branch and s_main by default).
    Times run(bool with_ssd, bool with_ssu, bool ssd_first, cudaStream_t ssd_stream = nullptr,
              cudaStream_t ssu_stream = nullptr) {
        if (!ssd_stream) ssd_stream = s_branch;
        if (!ssu_stream) ssu_stream = s_main;
        std::vector<double> pair, t_ssd, t_ssu;
        for (int r = 0; r < reps + 3; ++r) {
            SURF_CUDA_CHECK(cudaEventRecord(ev[0], s_main));
            SURF_CUDA_CHECK(cudaStreamWaitEvent(ssd_stream, ev[0], 0));
            if (ssu_stream != s_main) SURF_CUDA_CHECK(cudaStreamWaitEvent(ssu_stream, ev[0], 0));
            auto issue_ssd = [&] {
                SURF_CUDA_CHECK(cudaEventRecord(ev[2], ssd_stream));
                cu::ssd_varlen(sd, nullptr, ssd_stream);
                SURF_CUDA_CHECK(cudaEventRecord(ev[3], ssd_stream));
            };
            auto issue_ssu = [&] {
                SURF_CUDA_CHECK(cudaEventRecord(ev[4], ssu_stream));
                cu::selective_state_update(su, ssu_stream);
                SURF_CUDA_CHECK(cudaEventRecord(ev[5], ssu_stream));
            };
            if (ssd_first) {
                if (with_ssd) issue_ssd();
                if (with_ssu) issue_ssu();
            } else {
                if (with_ssu) issue_ssu();
                if (with_ssd) issue_ssd();
            }
            if (with_ssd) SURF_CUDA_CHECK(cudaStreamWaitEvent(s_main, ev[3], 0));
            if (with_ssu && ssu_stream != s_main) SURF_CUDA_CHECK(cudaStreamWaitEvent(s_main, ev[5], 0));
            SURF_CUDA_CHECK(cudaEventRecord(ev[1], s_main));
            SURF_CUDA_CHECK(cudaEventSynchronize(ev[1]));
            if (r < 3) continue;  // warm-up
            pair.push_back(elapsed(ev[0], ev[1]));
            if (with_ssd) t_ssd.push_back(elapsed(ev[2], ev[3]));
            if (with_ssu) t_ssu.push_back(elapsed(ev[4], ev[5]));
        }
        return Times{median(pair), median(t_ssd), median(t_ssu)};
    }

    // The wgmma scan (whole heads; compute capability 9.0), then the mma.sync scan in 1 and 2 head-dim
    // slices; the update's state with no L2 hint (row slices auto, whole heads) and evict-first
    // (SsuParams::l2_evict_first, auto); each pair in both orders.
    void shared_sm_rows() {
        struct SsuKind {
            int split;
            bool evict_first;
        };
        for (int ssd_split : {0, 1, 2}) {
            for (const auto& [ssu_split, evict_first] :
                 {SsuKind{0, false}, SsuKind{1, false}, SsuKind{0, true}}) {
                sd.wgmma = ssd_split == 0;
                sd.p_split = ssd_split, su.row_split = ssu_split, su.l2_evict_first = evict_first;
                const Times a_ssd = run(true, false, true), a_ssu = run(false, true, true);
                for (bool ssd_first : {true, false}) {
                    const Times t = run(true, true, ssd_first);
                    const double serial = a_ssd.ssd + a_ssu.ssu;
                    const std::string scan =
                        ssd_split == 0 ? "wgmma" : "mma.sync, " + std::to_string(ssd_split) + " slice(s)";
                    std::printf("| %s | %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f%% |\n",
                                scan.c_str(), ssu_split ? "1" : "auto",
                                evict_first ? "evict-first" : "no hint",
                                ssd_first ? "SSD first" : "SSU first", a_ssd.ssd, a_ssu.ssu, t.pair, t.ssd,
                                t.ssu, serial, 100.0 * (serial - t.pair) / serial);
                    std::fflush(stdout);
                }
            }
        }
    }

    // The two branches held to disjoint SMs (green contexts): the scan on a group of N, the update on the
    // rest.
    void green_rows(const std::vector<unsigned>& green_sizes) {
        std::printf(
            "\n# the same pair with each branch in its own green context: the SSD scan on N SMs, the state "
            "update on the "
            "other SMs; ms, median of %d\n\n| SSD scan | SSD SMs | SSU SMs | SSD alone | SSU alone | "
            "together | SSD span in the pair | "
            "SSU span in the pair | saved against the all-SM pair |\n|---|---|---|---|---|---|---|---|---|\n",
            reps);
        su.row_split = 0, su.l2_evict_first = false;
        for (bool wgmma : {true, false}) {
            sd.wgmma = wgmma, sd.p_split = wgmma ? 0 : 1;
            const Times shared = run(true, true, true);
            for (unsigned n : green_sizes) {
                cu::GreenPair g(n, hi, lo);
                const Times a_ssd = run(true, false, true, g.a, g.b),
                            a_ssu = run(false, true, true, g.a, g.b);
                const Times t = run(true, true, true, g.a, g.b);
                std::printf(
                    "| %s | %u | %u | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f%% (all-SM pair %.3f) |\n",
                    wgmma ? "wgmma" : "mma.sync, 1 slice", g.sms_a, g.sms_b, a_ssd.ssd, a_ssu.ssu, t.pair,
                    t.ssd, t.ssu, 100.0 * (shared.pair - t.pair) / shared.pair, shared.pair);
                std::fflush(stdout);
            }
        }
    }
};

// The fifth table: the SSD scan of one `prefill`-token prompt beside the state update of `ssu0`'s rows
// (ReplaySsu).
void branches_table(const cu::SsuParams& ssu0, int64_t prefill, int reps, const char* device,
                    const std::vector<unsigned>& green_sizes) {
    const int64_t decode = ssu0.batch;
    ReplaySsu replay(ssu0);
    SsdOperands ssd(ssu0, prefill);
    SURF_CUDA_CHECK(cudaDeviceSynchronize());
    BranchPair branches(ssd.sd, replay.su, reps);
    std::printf(
        "# bench_overlap --branches on %s: SSD scan of one %lld-token prompt (highest-priority stream) || "
        "state update of %lld rows "
        "(fp32 state, replay window %lld, counts b mod %lld, bulk staging); ms, median of %d\n\n"
        "| SSD scan | SSU row slices | SSU state in L2 | order | SSD alone | SSU alone | together | SSD span "
        "in the pair | "
        "SSU span in the pair | serial | saved |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        device, (long long)prefill, (long long)decode, (long long)kWindow, (long long)kWindow, reps);
    branches.shared_sm_rows();
    if (!green_sizes.empty()) branches.green_rows(green_sizes);
    branches.destroy();
}

using TimeFn = std::function<double(const std::function<void()>&)>;

// --wgmma-pair (only this table): the prefill rows' in_proj GEMM by gemm_wgmma (our persistent GEMM, whose
// m-fastest tile order reads each weight tile from DRAM once) on all SMs but K, issued first, beside the
// decode rows' state update as serving issues it (ReplaySsu, L2 evict-first) on another stream, which gets
// the K SMs the GEMM's blocks leave; then the same with cuBLASLt planned for all SMs but K. With cuBLASLt the
// pair runs nearly one after the other: its in_proj plan reads the weights twice and loads the L2's partition
// fabric (docs/KERNELS.md, "the L2's partition fabric"); the table asks whether a GEMM that reads them once
// leaves the update room to run beside it.
void wgmma_pair_table(const cu::SsuParams& ssu0, const cu::GemmParams& gp, int sms, int reps,
                      const TimeFn& time_ms, cudaStream_t s_gemm, cudaStream_t s_ssu, const char* device) {
    ReplaySsu replay(ssu0);
    replay.su.l2_evict_first = true;
    const cu::SsuParams& su = replay.su;
    cudaEvent_t fork = nullptr, ssu_start = nullptr, ssu_end = nullptr;
    SURF_CUDA_CHECK(cudaEventCreate(&fork));
    SURF_CUDA_CHECK(cudaEventCreate(&ssu_start));
    SURF_CUDA_CHECK(cudaEventCreate(&ssu_end));
    auto issue_pair = [&](const std::function<void()>& gemm) {
        SURF_CUDA_CHECK(cudaEventRecord(fork, s_gemm));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(s_ssu, fork, 0));
        gemm();
        SURF_CUDA_CHECK(cudaEventRecord(ssu_start, s_ssu));
        cu::selective_state_update(su, s_ssu);
        SURF_CUDA_CHECK(cudaEventRecord(ssu_end, s_ssu));
        SURF_CUDA_CHECK(cudaStreamWaitEvent(s_gemm, ssu_end, 0));
    };
    const double ssu_ms = time_ms([&] { cu::selective_state_update(su, s_gemm); });
    cu::GemmContext tuned;
    tuned.set_autotune(true);
    const double cublas_ms = time_ms([&] { cu::gemm(tuned, gp, s_gemm); });
    const double flops = 2.0 * gp.m * gp.n * gp.k, serial = cublas_ms + ssu_ms;
    const int resident = cu::gemm_wgmma_resident_blocks(256, true);
    std::printf(
        "# bench_overlap --wgmma-pair on %s (%d SMs, gemm_wgmma 128 x 256 in pairs: %d resident blocks): "
        "in_proj %lld x %lld x %lld "
        "|| state update of %lld rows (fp32, replay window %lld, counts b mod %lld, bulk staging, "
        "evict-first); ms, median of %d\n",
        device, sms, resident, (long long)gp.m, (long long)gp.n, (long long)gp.k, (long long)su.batch,
        (long long)kWindow, (long long)kWindow, reps);
    std::printf(
        "# state update alone (all SMs): %.3f ms; cuBLASLt in_proj alone (tuned, all SMs): %.3f ms = %.0f "
        "TFLOP/s; serial = their sum %.3f ms\n\n",
        ssu_ms, cublas_ms, flops / (cublas_ms * 1e-3) / 1e12, serial);
    std::printf(
        "| GEMM | SMs left to the update | GEMM alone ms (TFLOP/s) | together ms | update's span in the pair "
        "ms | saved against serial |\n"
        "|---|---|---|---|---|---|\n");
    auto row = [&](const char* name, int spare, const std::function<void()>& gemm) {
        const double alone = time_ms(gemm);
        std::vector<double> spans;
        const double together = time_ms([&] { issue_pair(gemm); });
        for (int r = 0; r < std::min(reps, 7); ++r) {
            issue_pair(gemm);
            SURF_CUDA_CHECK(cudaEventSynchronize(ssu_end));
            spans.push_back(elapsed(ssu_start, ssu_end));
        }
        std::printf("| %s | %d | %.3f (%.0f) | %.3f | %.3f | %.0f%% |\n", name, spare, alone,
                    flops / (alone * 1e-3) / 1e12, together, median(spans),
                    100.0 * (serial - together) / serial);
        std::fflush(stdout);
    };
    for (int spare : {0, 16, 24, 32, 44, 66}) {
        if (spare >= resident) continue;
        row("gemm_wgmma", spare, [&, spare] { cu::gemm_wgmma(gp, 256, s_gemm, true, resident - spare); });
    }
    for (int spare : {0, 32, 44}) {
        cu::GemmContext ctx;
        ctx.set_autotune(true);
        ctx.set_sm_count_target(spare > 0 ? sms - spare : 0);
        row("cuBLASLt", spare, [&] { cu::gemm(ctx, gp, s_gemm); });
    }
    std::printf(
        "\n# 'SMs left' for gemm_wgmma: its persistent grid is %d blocks minus that many (whole SMs, one "
        "block each); for cuBLASLt, "
        "the plan's SM-count target. The update runs wherever blocks fit.\n",
        resident);
    for (cudaEvent_t e : {fork, ssu_start, ssu_end}) SURF_CUDA_CHECK(cudaEventDestroy(e));
}

struct Options {
    int64_t decode = 100, prefill = 924;
    int reps = 20;
    bool bulk_only = false, branches_only = false, profile_ranges = false, l2_only = false,
         wgmma_pair_only = false, serving_ssu = false;
    std::vector<unsigned>
        green_sizes;  // --branches-green N,N,…: the pair also with each branch in a green context
};

// --branches-green's list of SM counts into o.green_sizes; false after reporting an item that is not one.
bool parse_green_sizes(const std::string& list, Options& o) {
    for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, comma - at);
        const bool digits =
            !item.empty() && item.size() <= 6 && item.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || std::stoul(item) == 0) {
            std::fprintf(stderr, "bench_overlap: --branches-green %s: '%s' is not a positive SM count\n",
                         list.c_str(), item.c_str());
            return false;
        }
        o.green_sizes.push_back(static_cast<unsigned>(std::stoul(item)));
        at = comma + 1;
    }
    return true;
}

// The flags into `o`; 0, or the exit status 2 after a usage message. A flag that lacks its value is unknown.
int parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--bulk-probe")
            o.bulk_only = true;
        else if (a == "--branches")
            o.branches_only = true;
        else if (a == "--l2-probe")
            o.l2_only = true;
        else if (a == "--wgmma-pair")
            o.wgmma_pair_only = true;
        else if (a == "--serving-ssu")
            o.serving_ssu = true;
        else if (a == "--profile-ranges")
            o.profile_ranges = true;
        else if (i + 1 < argc && a == "--branches-green") {
            o.branches_only = true;
            if (!parse_green_sizes(argv[++i], o)) return 2;
        } else if (i + 1 < argc && a == "--decode")
            o.decode = std::atoll(argv[++i]);
        else if (i + 1 < argc && a == "--prefill")
            o.prefill = std::atoll(argv[++i]);
        else if (i + 1 < argc && a == "--reps")
            o.reps = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr,
                         "usage: bench_overlap [--decode 100] [--prefill 924] [--reps 20] [--profile-ranges] "
                         "[--serving-ssu] [--bulk-probe | --l2-probe | --wgmma-pair | --branches | "
                         "--branches-green N,N,…]\n");
            return 2;
        }
    }
    if (o.decode < 1 || o.prefill < 1 || o.reps < 1) {
        std::fprintf(stderr, "bench_overlap: --decode, --prefill and --reps must be ≥ 1\n");
        return 2;
    }
    return 0;
}

constexpr int64_t kSlotFloats = kHeads * kHeadDim * kState;  // one decode row's fp32 state

// One Mamba layer's operands. GEMM: normed rows [prefill, hidden] · in_proj [22,656, hidden]ᵀ → [prefill,
// 22,656] bf16. State update: decode rows of the in_proj output, slots 0..decode-1, fp32 state.
struct MambaOperands {
    int64_t decode, prefill;
    Buf x, w, y;
    Buf zx, state, ssu_y;
    Buf dt_bias, A, D, slots;
    cu::SsuParams sp;

    MambaOperands(int64_t n_decode, int64_t n_prefill)
        : decode(n_decode),
          prefill(n_prefill),
          x(prefill * kHidden * 2),
          w(kInProj * kHidden * 2),
          y(prefill * kInProj * 2),
          zx(decode * kInProj * 2),
          state(decode * kSlotFloats * 4),
          ssu_y(decode * kHeads * kHeadDim * 4),
          dt_bias(kHeads * 4),
          A(kHeads * 4),
          D(kHeads * 4),
          slots(decode * 4) {
        fill(x, prefill * kHidden, true, -1.0f, 1.0f, 1);
        fill(w, kInProj * kHidden, true, -0.02f, 0.02f, 2);
        fill(zx, decode * kInProj, true, -1.0f, 1.0f, 3);
        fill(state, decode * kSlotFloats, false, -1.0f, 1.0f, 4);
        fill(dt_bias, kHeads, false, -1.0f, 0.0f, 5);
        fill(A, kHeads, false, -4.0f, -0.5f, 6);
        fill(D, kHeads, false, -1.0f, 1.0f, 7);
        std::vector<int32_t> slot_ids(static_cast<size_t>(decode));
        for (int64_t i = 0; i < decode; ++i) slot_ids[i] = static_cast<int32_t>(i);
        SURF_CUDA_CHECK(cudaMemcpy(slots.p, slot_ids.data(), slot_ids.size() * 4, cudaMemcpyHostToDevice));
        const bf16* xbc = zx.as<bf16>() + kHeads * kHeadDim;  // after z
        sp.x = xbc, sp.B = xbc + kHeads * kHeadDim, sp.C = sp.B + kGroups * kState,
        sp.dt_raw = xbc + kHeads * kHeadDim + 2 * kGroups * kState;
        sp.dt_bias = dt_bias.as<float>(), sp.A = A.as<float>(), sp.D = D.as<float>(), sp.state = state.p,
        sp.state_dtype = cu::DType::kF32;
        sp.slots = slots.as<int32_t>(), sp.y = ssu_y.p, sp.y_dtype = cu::DType::kF32;
        sp.batch = decode, sp.H = kHeads, sp.P = kHeadDim, sp.G = kGroups, sp.N = kState;
        sp.x_stride = sp.bc_stride = sp.dt_stride = kInProj;
        SURF_CUDA_CHECK(cudaDeviceSynchronize());
    }

    cu::GemmParams in_proj() const {
        return cu::GemmParams{x.as<bf16>(),     w.as<bf16>(), nullptr, y.p,
                              cu::DType::kBF16, prefill,      kInProj, kHidden};
    }
};

// One vision-tower layer over 3 tiles (C-RADIO-H shapes, random weights): LayerNorm, qkv, attention, proj,
// LayerNorm, fc1, GELU, fc2.
struct VitLayer {
    static constexpr int64_t kTiles = 3, kRows = kTiles * kVitTileTokens, kW3 = 3 * kVitWidth;
    Buf vh, vln, vbig, vattn;
    Buf n_w, n_b, w_qkv, b_qkv, w_proj, b_proj, w_fc1, b_fc1, w_fc2, b_fc2;
    Buf vcu;

    VitLayer()
        : vh(kRows * kVitWidth * 4),
          vln(kRows * kVitWidth * 2),
          vbig(kRows * kVitInter * 2),
          vattn(kRows * kVitWidth * 2),
          n_w(kVitWidth * 4),
          n_b(kVitWidth * 4),
          w_qkv(kW3 * kVitWidth * 2),
          b_qkv(kW3 * 2),
          w_proj(kVitWidth * kVitWidth * 2),
          b_proj(kVitWidth * 4),
          w_fc1(kVitInter * kVitWidth * 2),
          b_fc1(kVitInter * 2),
          w_fc2(kVitWidth * kVitInter * 2),
          b_fc2(kVitWidth * 4),
          vcu((kTiles + 1) * 4) {
        fill(vh, kRows * kVitWidth, false, -1.0f, 1.0f, 11);
        fill(n_w, kVitWidth, false, 0.5f, 1.5f, 12);
        fill(n_b, kVitWidth, false, -0.1f, 0.1f, 13);
        fill(w_qkv, kW3 * kVitWidth, true, -0.03f, 0.03f, 14);
        fill(b_qkv, kW3, true, -0.1f, 0.1f, 15);
        fill(w_proj, kVitWidth * kVitWidth, true, -0.03f, 0.03f, 16);
        fill(b_proj, kVitWidth, false, -0.1f, 0.1f, 17);
        fill(w_fc1, kVitInter * kVitWidth, true, -0.03f, 0.03f, 18);
        fill(b_fc1, kVitInter, true, -0.1f, 0.1f, 19);
        fill(w_fc2, kVitWidth * kVitInter, true, -0.015f, 0.015f, 20);
        fill(b_fc2, kVitWidth, false, -0.1f, 0.1f, 21);
        std::vector<int32_t> tile_cu(static_cast<size_t>(kTiles + 1));
        for (int64_t t = 0; t <= kTiles; ++t) tile_cu[t] = static_cast<int32_t>(t * kVitTileTokens);
        SURF_CUDA_CHECK(cudaMemcpy(vcu.p, tile_cu.data(), tile_cu.size() * 4, cudaMemcpyHostToDevice));
    }

    void issue(cu::GemmContext& ctx, cudaStream_t st) const {
        const int64_t rows = kRows, w3 = kW3;
        cu::LayerNormParams ln;
        ln.x = vh.p, ln.x_dtype = cu::DType::kF32, ln.weight = n_w.as<float>(), ln.bias = n_b.as<float>(),
        ln.y = vln.as<bf16>();
        ln.rows = rows, ln.dim = kVitWidth, ln.eps = 1e-6f;
        cu::layernorm(ln, st);
        cu::gemm(ctx,
                 {vln.as<bf16>(), w_qkv.as<bf16>(), b_qkv.p, vbig.p, cu::DType::kBF16, rows, w3, kVitWidth},
                 st);
        cu::AttentionPrefillParams ap;
        ap.q = vbig.as<bf16>(), ap.k = vbig.as<bf16>() + kVitWidth, ap.v = vbig.as<bf16>() + 2 * kVitWidth;
        ap.q_stride = w3, ap.kv_stride = w3, ap.out = vattn.as<bf16>(), ap.out_stride = kVitWidth;
        ap.cu_seqlens_q = ap.cu_seqlens_k = vcu.as<int32_t>(), ap.n_seq = kTiles,
        ap.n_heads = ap.n_kv_heads = kVitHeads;
        ap.head_dim = kVitWidth / kVitHeads, ap.max_seqlen_q = kVitTileTokens, ap.causal = false,
        ap.n_splits = 1;
        cu::attention_prefill(ap, st);
        cu::GemmParams proj{vattn.as<bf16>(), w_proj.as<bf16>(), b_proj.p, vh.p, cu::DType::kF32, rows,
                            kVitWidth,        kVitWidth};
        proj.beta = 1.0f;
        cu::gemm(ctx, proj, st);
        cu::layernorm(ln, st);
        cu::gemm(
            ctx,
            {vln.as<bf16>(), w_fc1.as<bf16>(), b_fc1.p, vbig.p, cu::DType::kBF16, rows, kVitInter, kVitWidth},
            st);
        cu::gelu_erf(vbig.as<bf16>(), rows * kVitInter, st);
        cu::GemmParams fc2{vbig.as<bf16>(), w_fc2.as<bf16>(), b_fc2.p, vh.p, cu::DType::kF32, rows,
                           kVitWidth,       kVitInter};
        fc2.beta = 1.0f;
        cu::gemm(ctx, fc2, st);
    }
};

// The first three tables' shared setup: the layer's operands, the GEMM and state-update streams, the events,
// and the state update (plain, or as serving issues it with --serving-ssu).
struct OverlapBench {
    const Options& o;
    const MambaOperands& m;
    int sms;
    const char* device;
    cudaStream_t s_gemm = nullptr, s_ssu = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr, e_ssu = nullptr;
    double state_bytes = 0, gemm_flops = 0;
    std::unique_ptr<ReplaySsu> serving;
    const cu::SsuParams* ssu_params = nullptr;
    double ssu_ms = 0;  // the state update alone on all SMs (gemm_pair_table measures it)

    OverlapBench(const Options& options, const MambaOperands& ops, int n_sms, const char* name)
        : o(options), m(ops), sms(n_sms), device(name) {
        SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&s_gemm, cudaStreamNonBlocking));
        SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&s_ssu, cudaStreamNonBlocking));
        SURF_CUDA_CHECK(cudaEventCreate(&e0));
        SURF_CUDA_CHECK(cudaEventCreate(&e1));
        SURF_CUDA_CHECK(cudaEventCreate(&e_ssu));
        // Read + written every step; with --serving-ssu read every step and written one step in kWindow.
        state_bytes =
            (o.serving_ssu ? 1.0 + 1.0 / kWindow : 2.0) * static_cast<double>(o.decode) * kSlotFloats * 4;
        gemm_flops = 2.0 * o.prefill * kInProj * kHidden;
        // --serving-ssu: the first three tables' state update as serving issues it (ReplaySsu: replay window
        // 8, bulk staging, evict-first; ≈ 0.6 GB a layer instead of the plain update's 1.05 GB read +
        // written).
        if (o.serving_ssu) {
            serving = std::make_unique<ReplaySsu>(m.sp);
            serving->su.l2_evict_first = true;
        }
        ssu_params = serving ? &serving->su : &m.sp;
    }

    void ssu(cudaStream_t s) const { cu::selective_state_update(*ssu_params, s); }

    // Median over reps of `issue` between events on s_gemm (s_ssu joined back into it).
    double time_ms(const std::function<void()>& issue) const {
        for (int i = 0; i < 3; ++i) issue();
        SURF_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<double> t;
        for (int r = 0; r < o.reps; ++r) {
            SURF_CUDA_CHECK(cudaEventRecord(e0, s_gemm));
            issue();
            SURF_CUDA_CHECK(cudaEventRecord(e1, s_gemm));
            SURF_CUDA_CHECK(cudaEventSynchronize(e1));
            t.push_back(elapsed(e0, e1));
        }
        return median(t);
    }

    TimeFn time_fn() const {
        return [this](const std::function<void()>& issue) { return time_ms(issue); };
    }

    // --profile-ranges: `issue` once between cudaProfilerStart / Stop (one Nsight Compute range), named on
    // stdout.
    void profile_range(const char* name, const std::function<void()>& issue) const {
        if (!o.profile_ranges) return;
        surf::bench::profiler_range(issue);
        std::printf("(profile range: %s)\n", name);
    }

    // --l2-probe: the L2 read ceiling, then the in_proj GEMM alone on the heuristic's first plan.
    void l2_probe() const {
        l2_table(m.state, sms, time_fn(), s_gemm, device, o.reps);
        const cu::GemmParams gp = m.in_proj();
        cu::GemmContext ctx;  // the heuristic's first plan, as under a profiler
        const double ms = time_ms([&] { cu::gemm(ctx, gp, s_gemm); });
        std::printf(
            "\n# in_proj GEMM %lld x %lld x %lld alone (the heuristic's plan): %.3f ms = %.0f TFLOP/s\n",
            (long long)o.prefill, (long long)kInProj, (long long)kHidden, ms,
            gemm_flops / (ms * 1e-3) / 1e12);
    }

    // The first table: the in_proj GEMM planned for all SMs but K beside the state update, in both orders.
    void gemm_pair_table() {
        ssu_ms = time_ms([&] { ssu(s_gemm); });  // (the modes above have their own state updates or none)
        std::printf(
            "# bench_overlap on %s (%d SMs): in_proj GEMM %lld x %lld x %lld bf16 || state update of %lld "
            "rows (fp32 state, %.2f GB "
            "read + written); median of %d\n",
            device, sms, (long long)o.prefill, (long long)kInProj, (long long)kHidden, (long long)o.decode,
            state_bytes / 1e9, o.reps);
        std::printf("# state update alone (all SMs): %.3f ms = %.0f GB/s\n\n", ssu_ms,
                    state_bytes / (ssu_ms * 1e-3) / 1e9);
        std::printf(
            "| SMs left to the state update | GEMM alone ms (TFLOP/s) | together, GEMM first ms | together, "
            "state update first ms | "
            "serial (full-GPU GEMM + state update) ms | saved |\n|---|---|---|---|---|---|\n");
        double full_gemm_ms = 0;
        for (int spare : {0, 8, 16, 24, 32, 48, 66}) {
            if (spare >= sms) continue;
            cu::GemmContext ctx;
            ctx.set_autotune(!o.profile_ranges);  // profiled: the heuristic's plan, the same in every replay
            ctx.set_sm_count_target(spare > 0 ? sms - spare : 0);
            const cu::GemmParams gp = m.in_proj();
            const double gemm_ms = time_ms([&] { cu::gemm(ctx, gp, s_gemm); });
            if (spare == 0) full_gemm_ms = gemm_ms;
            auto issue_pair = [&](bool gemm_first) {
                SURF_CUDA_CHECK(cudaEventRecord(e_ssu, s_gemm));
                SURF_CUDA_CHECK(cudaStreamWaitEvent(s_ssu, e_ssu, 0));
                if (gemm_first) {
                    cu::gemm(ctx, gp, s_gemm);
                    ssu(s_ssu);
                } else {
                    ssu(s_ssu);
                    cu::gemm(ctx, gp, s_gemm);
                }
                SURF_CUDA_CHECK(cudaEventRecord(e_ssu, s_ssu));
                SURF_CUDA_CHECK(cudaStreamWaitEvent(s_gemm, e_ssu, 0));
            };
            auto pair = [&](bool gemm_first) { return time_ms([&] { issue_pair(gemm_first); }); };
            const double a = pair(true), b = pair(false), serial = full_gemm_ms + ssu_ms;
            if (spare == 0) profile_range("state update alone", [&] { ssu(s_gemm); });
            if (spare == 0 || spare == 32) {
                const std::string tag = spare ? " (GEMM planned for " + std::to_string(sms - spare) + " SMs)"
                                              : " (GEMM on all SMs)";
                profile_range(("in_proj GEMM alone" + tag).c_str(), [&] { cu::gemm(ctx, gp, s_gemm); });
                profile_range(("in_proj GEMM first || state update" + tag).c_str(),
                              [&] { issue_pair(true); });
            }
            std::printf("| %d | %.3f (%.0f) | %.3f | %.3f | %.3f | %.0f%% |\n", spare, gemm_ms,
                        gemm_flops / (gemm_ms * 1e-3) / 1e12, a, b, serial,
                        100.0 * (serial - std::min(a, b)) / serial);
            std::fflush(stdout);
        }
        std::printf(
            "\n# 'SMs left' 0 = the GEMM planned for the whole device (plain stream concurrency). A Mamba "
            "layer of the mixed step "
            "runs in_proj over all rows, then the state update: serial is what it does today.\n");
    }

    // The second table: the state update alone on K SMs, the others held by occupy_sms (no other work): how
    // its bandwidth scales with the SMs it gets. If a fraction of the SMs already reaches most of the copy
    // bandwidth, compute-bound work (the vision tower, prefill GEMMs) can run on the rest at little cost to
    // it.
    void ssu_scaling_table() const {
        int* started = nullptr;
        SURF_CUDA_CHECK(
            cudaHostAlloc(reinterpret_cast<void**>(&started), sms * sizeof(int), cudaHostAllocMapped));
        int* started_dev = nullptr;
        SURF_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&started_dev), started, 0));
        std::printf(
            "\n| SMs the state update runs on (others held) | ms (median of %d) | GB/s | %% of its all-SM "
            "bandwidth | GB/s per SM |\n"
            "|---|---|---|---|---|\n",
            std::min(o.reps, 7));
        for (int k : {sms, sms * 3 / 4, sms / 2, sms / 3, sms / 4, sms / 6}) {
            std::vector<double> t;
            for (int r = 0; r < std::min(o.reps, 7); ++r) {
                std::fill(started, started + sms, 0);
                cu::SmOccupyParams op;
                op.blocks = sms - k, op.nanoseconds = 50'000'000,
                op.started = started_dev;  // 50 ms ≫ the update
                cu::occupy_sms(op, s_gemm);
                const auto t0 = std::chrono::steady_clock::now();
                while (!cu::all_started(started, op.blocks)) {
                    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5))
                        throw surf::Error(
                            surf::ErrorKind::kTimeout,
                            "bench_overlap: the occupy_sms blocks were not all resident after 5 s");
                }
                SURF_CUDA_CHECK(cudaEventRecord(e0, s_ssu));
                ssu(s_ssu);
                SURF_CUDA_CHECK(cudaEventRecord(e1, s_ssu));
                SURF_CUDA_CHECK(cudaEventSynchronize(e1));
                t.push_back(elapsed(e0, e1));
                SURF_CUDA_CHECK(cudaDeviceSynchronize());
            }
            const double ms = median(t), gbs = state_bytes / (ms * 1e-3) / 1e9;
            std::printf("| %d | %.3f | %.0f | %.0f%% | %.1f |\n", k, ms, gbs, 100.0 * ssu_ms / ms, gbs / k);
            std::fflush(stdout);
        }
        SURF_CUDA_CHECK(cudaFreeHost(started));
    }

    // The third table: one ViT layer over 3 tiles, on a highest-priority stream, beside the state update.
    void vit_pair_table() const {
        const VitLayer vit;
        int least = 0, greatest = 0;
        SURF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        cudaStream_t s_vit;
        SURF_CUDA_CHECK(cudaStreamCreateWithPriority(&s_vit, cudaStreamNonBlocking, greatest));
        std::printf(
            "\n# one ViT layer, %lld tiles x %lld tokens (C-RADIO-H shapes), on a highest-priority stream || "
            "the state update above\n\n"
            "| ViT GEMMs planned for | ViT layer alone ms | state update alone ms | together, ViT first ms | "
            "together, state update "
            "first ms | serial (all-SM ViT + update) ms | saved |\n|---|---|---|---|---|---|---|\n",
            (long long)VitLayer::kTiles, (long long)kVitTileTokens);
        double full_vit_ms = 0;
        for (int cap : {0, 110, 88, 66}) {
            if (cap >= sms) continue;
            cu::GemmContext vctx;
            vctx.set_autotune(!o.profile_ranges);  // profiled: the heuristic's plan, the same in every replay
            vctx.set_sm_count_target(cap);
            const double vit_ms = time_ms([&] { vit.issue(vctx, s_gemm); });
            if (cap == 0) full_vit_ms = vit_ms;
            auto issue_pair = [&](bool vit_first) {
                SURF_CUDA_CHECK(cudaEventRecord(e_ssu, s_gemm));
                SURF_CUDA_CHECK(cudaStreamWaitEvent(s_vit, e_ssu, 0));
                SURF_CUDA_CHECK(cudaStreamWaitEvent(s_ssu, e_ssu, 0));
                if (vit_first) {
                    vit.issue(vctx, s_vit);
                    ssu(s_ssu);
                } else {
                    ssu(s_ssu);
                    vit.issue(vctx, s_vit);
                }
                for (cudaStream_t st : {s_vit, s_ssu}) {
                    SURF_CUDA_CHECK(cudaEventRecord(e_ssu, st));
                    SURF_CUDA_CHECK(cudaStreamWaitEvent(s_gemm, e_ssu, 0));
                }
            };
            auto pair = [&](bool vit_first) { return time_ms([&] { issue_pair(vit_first); }); };
            const double a = pair(true), b = pair(false), serial = full_vit_ms + ssu_ms;
            if (cap == 0) {
                profile_range("ViT layer alone (all SMs)", [&] { vit.issue(vctx, s_gemm); });
                profile_range("ViT layer first || state update (all SMs)", [&] { issue_pair(true); });
            }
            std::printf("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f%% |\n",
                        cap ? std::to_string(cap).c_str() : "all SMs", vit_ms, ssu_ms, a, b, serial,
                        100.0 * (serial - std::min(a, b)) / serial);
            std::fflush(stdout);
        }
        SURF_CUDA_CHECK(cudaStreamDestroy(s_vit));
    }
};

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (const int status = parse(argc, argv, o)) return status;
    try {
        int sms = 0;
        SURF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        cudaDeviceProp prop{};
        SURF_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        const MambaOperands m(o.decode, o.prefill);
        OverlapBench bench(o, m, sms, prop.name);
        if (o.l2_only) {
            bench.l2_probe();
            return 0;
        }
        if (o.bulk_only) {
            bulk_table(m.state, o.decode * kSlotFloats * 4, sms, o.reps, bench.time_fn(), bench.s_gemm,
                       prop.name);
            return 0;
        }
        if (o.branches_only) {
            branches_table(m.sp, o.prefill, o.reps, prop.name, o.green_sizes);
            return 0;
        }
        if (o.wgmma_pair_only) {
            wgmma_pair_table(m.sp, m.in_proj(), sms, o.reps, bench.time_fn(), bench.s_gemm, bench.s_ssu,
                             prop.name);
            return 0;
        }
        bench.gemm_pair_table();
        bench.ssu_scaling_table();
        bench.vit_pair_table();
    } catch (const surf::Error& e) {
        std::fprintf(stderr, "bench_overlap: %s\n", e.what());
        return 2;
    }
    return 0;
}

#else
int main() {
    std::fprintf(stderr, "bench_overlap: built without CUDA\n");
    return 2;
}
#endif
