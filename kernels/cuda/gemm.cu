// bf16 GEMMs with fp32 accumulation through cuBLASLt. Row-major y[m,n] = x[m,k]·w[n,k]ᵀ is the
// column-major product yᵀ[n,m] = op(w)ᵀ-view: A = w (k×n col-major, transposed), B = x (k×m col-major),
// D = yᵀ (n×m col-major, ld = ldy). The bias epilogue adds bias[n] along D's rows, i.e. per output feature.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

constexpr int kMaxCandidates = 8;

// One planned shape: descriptors, the algorithm in use and (autotuning) the heuristic's candidates, which
// are timed once the shape recurs (planning costs tens of µs, tuning a few GEMMs' worth).
struct GemmPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    cublasLtMatmulAlgo_t candidates[kMaxCandidates]{};
    int n_candidates = 0;
    int uses = 0;
    bool tuned = false;
    bool use_gemv = false;  // the small-m kernel instead of cuBLASLt (GemmContext::set_small_m_kernel)
    bool reused = false;    // took a neighbour's choice (tuned_neighbour) instead of timing its own
    int wgmma_tile_n =
        0;  // > 0: gemm_wgmma at this tile width instead of cuBLASLt (GemmContext::set_wgmma_gemm)
};

// m, n, k, ldx, ldw, ldy, y dtype, bias, beta ≠ 0, alignment, activation.
using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool, bool, int, int>;

int alignment_of(const void* ptr, int64_t ld, size_t elem) {
    // The largest power of two ≤ 256 dividing the address and the row pitch in bytes.
    uint64_t v = reinterpret_cast<uint64_t>(ptr) | static_cast<uint64_t>(ld * static_cast<int64_t>(elem));
    int align = 256;
    while (align > 1 && (v % static_cast<uint64_t>(align)) != 0) align >>= 1;
    return align;
}

// Row counts up to this are tuned on first use: decode steps (captured into graphs right after a shape's
// first, kernel-by-kernel step; no tuning can run inside a capture) and small batches. Larger ones are
// prefill and mixed steps, whose row count varies with the work queued: each is tuned on its own, once it has
// run kTuneAfterUses times, so that one-off row counts (the tail chunk of a prompt) cost no tuning. Sharing a
// tuned algorithm across row counts is not safe: an algorithm tuned at one m can run another m of the same
// shape far slower than that shape's own pick (docs/BENCHMARKS.md). GemmContext::set_reuse_tuned_in_bucket
// (off by default) relaxes this within 64-row buckets only (same tile counts), and only to an algorithm the
// heuristic also lists for the new row count; and up to 128 rows to a shape tuned for at most 7 rows more
// (tuned_neighbour).
constexpr int64_t kTuneOnFirstUseRows = 128;
constexpr int kTuneAfterUses = 3;

}  // namespace

struct GemmContext::Impl {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    std::map<PlanKey, GemmPlan> plans;
    bool autotune = false;
    bool reuse_in_bucket = false;
    bool tune_first_use = false;  // set_tune_on_first_use
    GemmContext::SmallM small_m = GemmContext::SmallM::kTuned;
    int small_m_k_split = 0;  // gemv's k_split
    GemmContext::WgmmaGemm wgmma = GemmContext::WgmmaGemm::kNever;
    int64_t reused = 0;
    int sm_target = 0;
    std::vector<GemmContext::TuneRecord> log;
    void* scratch = nullptr;  // tuning output
    size_t scratch_bytes = 0;
    cudaEvent_t ev[kMaxCandidates + 5] =
        {};  // tuning: before the warm-up runs, after them, after each candidate, the small-m kernel and
             // gemm_wgmma's two tile widths

    void* scratch_of(size_t bytes) {
        if (bytes > scratch_bytes) {
            if (scratch) SURF_CUDA_CHECK(cudaFree(scratch));
            scratch = nullptr;
            SURF_CUDA_CHECK(cudaMalloc(&scratch, bytes));
            scratch_bytes = bytes;
        }
        return scratch;
    }
};

namespace {

// What cuBLASLt and the small-m kernel compute of p: p without a ReLU² activation, which gemm() runs after
// them as its own pass (run_relu2_pass). gemm_wgmma takes p whole.
GemmParams linear_part(const GemmParams& p) {
    GemmParams lin = p;
    if (lin.activation == GemmActivation::kReluSquared) lin.activation = GemmActivation::kNone;
    return lin;
}
void run_relu2_pass(const GemmParams& p, void* y, cudaStream_t stream) {
    if (p.activation == GemmActivation::kReluSquared) relu_squared(static_cast<bf16*>(y), p.m * p.n, stream);
}

// Times the plan's candidates on this call's shape (output to scratch) and keeps the fastest; not while the
// stream is being captured (the plan keeps its algorithm and is tuned on a later use). All candidates run
// back to back on the stream (each once untimed, then kTimedRuns times between two events) and the host
// waits once, at the end: a tuning costs the GPU about 3·candidates GEMMs and the host one synchronisation.
void tune_plan(GemmContext::Impl& impl, GemmPlan& plan, const GemmParams& p, size_t y_elem,
               cudaStream_t stream) {
    constexpr int kTimedRuns = 2;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    SURF_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return;
    plan.tuned = true;
    const bool time_gemv = impl.small_m == GemmContext::SmallM::kTuned && gemv_supported(linear_part(p));
    const bool time_wgmma = impl.wgmma == GemmContext::WgmmaGemm::kTuned && gemm_wgmma_supported(p);
    if (plan.n_candidates <= 1 && !time_gemv && !time_wgmma) return;
    if (!impl.ev[0]) {
        for (cudaEvent_t& e : impl.ev) SURF_CUDA_CHECK(cudaEventCreate(&e));
    }
    const int64_t ldy = p.ldy ? p.ldy : p.n;
    void* out = impl.scratch_of(static_cast<size_t>(p.m * ldy) * y_elem);
    // A cuBLASLt candidate's and the small-m kernel's times include their ReLU² pass, if any.
    auto run = [&](int i) {
        const bool ok = cublasLtMatmul(impl.handle, plan.op, &p.alpha, p.w, plan.a, p.x, plan.b, &p.beta, out,
                                       plan.d, out, plan.d, &plan.candidates[i], impl.workspace,
                                       impl.workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS;
        if (ok) run_relu2_pass(p, out, stream);
        return ok;
    };
    GemmParams scratch_params = p;  // the small-m kernel and gemm_wgmma write where the candidates do
    scratch_params.y = out;
    auto run_gemv = [&] {
        gemv(linear_part(scratch_params), stream, impl.small_m_k_split);
        run_relu2_pass(p, out, stream);
    };
    constexpr int kTileWidths[2] = {256, 128};
    const int n = plan.n_candidates;
    bool ok[kMaxCandidates] = {};
    // ev[0] … warm-up runs … ev[1] … candidate i's timed runs … ev[i + 2] … the small-m kernel's … ev[n + 2]
    // … gemm_wgmma tile 256 … ev[n + 3] … tile 128 … ev[n + 4].
    SURF_CUDA_CHECK(cudaEventRecord(impl.ev[0], stream));
    for (int i = 0; i < n; ++i) ok[i] = run(i);
    if (time_gemv) run_gemv();
    if (time_wgmma) {
        for (int tile_n : kTileWidths) gemm_wgmma(scratch_params, tile_n, stream);
    }
    SURF_CUDA_CHECK(cudaEventRecord(impl.ev[1], stream));
    for (int i = 0; i < n; ++i) {
        for (int r = 0; r < kTimedRuns && ok[i]; ++r) ok[i] = run(i);
        SURF_CUDA_CHECK(cudaEventRecord(impl.ev[i + 2], stream));
    }
    if (time_gemv) {
        for (int r = 0; r < kTimedRuns; ++r) run_gemv();
    }
    SURF_CUDA_CHECK(cudaEventRecord(impl.ev[n + 2], stream));
    if (time_wgmma) {
        for (int w = 0; w < 2; ++w) {
            for (int r = 0; r < kTimedRuns; ++r) gemm_wgmma(scratch_params, kTileWidths[w], stream);
            SURF_CUDA_CHECK(cudaEventRecord(impl.ev[n + 3 + w], stream));
        }
    }
    const int last = time_wgmma ? n + 4 : n + 2;
    SURF_CUDA_CHECK(cudaEventSynchronize(impl.ev[last]));
    GemmContext::TuneRecord rec;
    rec.m = p.m, rec.n = p.n, rec.k = p.k, rec.candidates = n;
    float best = std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) {
        float ms = std::numeric_limits<float>::infinity();
        if (ok[i]) {
            SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, impl.ev[i + 1], impl.ev[i + 2]));
            ms /= kTimedRuns;
        }
        const float us = ms * 1e3f;
        if (i == 0) rec.heuristic_us = us;
        if (us < best) {
            best = us;
            rec.chosen = i;
        }
    }
    rec.best_us = best;
    if (time_gemv) {
        float ms = 0;
        SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, impl.ev[n + 1], impl.ev[n + 2]));
        rec.gemv_timed = true;
        rec.gemv_us = ms * 1e3f / kTimedRuns;
        rec.gemv_chosen = plan.use_gemv = rec.gemv_us < best;
        if (plan.use_gemv) best = rec.gemv_us;
    }
    if (time_wgmma) {
        for (int w = 0; w < 2; ++w) {
            float ms = 0;
            SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, impl.ev[n + 2 + w], impl.ev[n + 3 + w]));
            const float us = ms * 1e3f / kTimedRuns;
            if (!rec.wgmma_timed || us < rec.wgmma_us) rec.wgmma_us = us, rec.wgmma_tile_n = kTileWidths[w];
            rec.wgmma_timed = true;
        }
        rec.wgmma_chosen = rec.wgmma_us < best;
        if (rec.wgmma_chosen) {
            plan.wgmma_tile_n = rec.wgmma_tile_n;
            plan.use_gemv = rec.gemv_chosen = false;
        }
    }
    SURF_CUDA_CHECK(cudaEventElapsedTime(&rec.tune_ms, impl.ev[0], impl.ev[last]));
    plan.algo = plan.candidates[rec.chosen];
    impl.log.push_back(rec);
}

bool has_candidate(const GemmPlan& plan, const cublasLtMatmulAlgo_t& algo) {
    for (int i = 0; i < plan.n_candidates; ++i) {
        if (std::memcmp(&plan.candidates[i], &algo, sizeof(cublasLtMatmulAlgo_t)) == 0) return true;
    }
    return false;
}

// A tuned plan of the same shape except m whose choice carries over to m: over 128 rows one with the same
// ⌈m/64⌉ (same tile counts), up to 128 rows one for m' in (m, m + 7] (the decode buckets, every 4 rows above
// 16, and the logits' rows, rounded to 8, lie within that of any m: a partly filled mixed step then runs a
// warmed-up shape's choice instead of stopping to tune its own). Its algorithm must be one of `plan`'s
// heuristic candidates for m (so valid here), unless it chose the small-m kernel, which takes any m. Only
// shapes that were timed themselves count (no chains of hand-me-downs). Else null.
const GemmPlan* tuned_neighbour(const GemmContext::Impl& impl, const PlanKey& key, const GemmPlan& plan) {
    const int64_t m = std::get<0>(key), bucket = (m + 63) / 64;
    const GemmPlan* best = nullptr;
    int64_t best_m = 0;
    for (const auto& [other_key, other] : impl.plans) {
        const int64_t m2 = std::get<0>(other_key);
        if (!other.tuned || other.reused)
            continue;  // choices are passed on from shapes timed themselves only
        if (m > kTuneOnFirstUseRows ? (m2 + 63) / 64 != bucket : (m2 <= m || m2 > m + 7)) continue;
        PlanKey same_m = other_key;
        std::get<0>(same_m) = m;
        if (same_m != key) continue;
        const bool valid = (other.use_gemv && m <= kTuneOnFirstUseRows) || other.wgmma_tile_n > 0 ||
                           has_candidate(plan, other.algo);
        if (valid && (!best || m2 < best_m)) best = &other, best_m = m2;  // the nearest
    }
    return best;
}

}  // namespace

void GemmContext::set_autotune(bool on) {
    impl_->autotune = on;
}
void GemmContext::set_reuse_tuned_in_bucket(bool on) {
    impl_->reuse_in_bucket = on;
}
void GemmContext::set_tune_on_first_use(bool on) {
    impl_->tune_first_use = on;
}
void GemmContext::set_small_m_kernel(SmallM mode) {
    impl_->small_m = mode;
}
void GemmContext::set_small_m_k_split(int k_split) {
    SURF_CHECK(k_split == 0 || k_split == 1 || k_split == 2 || k_split == 4 || k_split == 8,
               "GemmContext: small-m k split ", k_split, " (0 = automatic, 1, 2, 4 or 8)");
    impl_->small_m_k_split = k_split;
}
void GemmContext::set_wgmma_gemm(WgmmaGemm mode) {
    impl_->wgmma = mode;
}
int64_t GemmContext::reused_count() const {
    return impl_->reused;
}

void GemmContext::set_sm_count_target(int sms) {
    SURF_CHECK(sms >= 0, "gemm: SM count target ", sms);
    impl_->sm_target = sms;
}
const std::vector<GemmContext::TuneRecord>& GemmContext::tune_log() const {
    return impl_->log;
}

GemmContext::GemmContext(size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
    SURF_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
    impl_->workspace_bytes = workspace_bytes;
    if (workspace_bytes > 0) SURF_CUDA_CHECK(cudaMalloc(&impl_->workspace, workspace_bytes));
}

GemmContext::~GemmContext() {
    for (auto& [key, plan] : impl_->plans) {
        cublasLtMatrixLayoutDestroy(plan.a);
        cublasLtMatrixLayoutDestroy(plan.b);
        cublasLtMatrixLayoutDestroy(plan.d);
        cublasLtMatmulDescDestroy(plan.op);
    }
    if (impl_->workspace) cudaFree(impl_->workspace);
    if (impl_->scratch) cudaFree(impl_->scratch);
    for (cudaEvent_t e : impl_->ev) {
        if (e) cudaEventDestroy(e);
    }
    if (impl_->handle) cublasLtDestroy(impl_->handle);
}

void gemm(GemmContext& ctx, const GemmParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.w && p.y, "gemm: null pointer");
    SURF_CHECK(p.m > 0 && p.n > 0 && p.k > 0, "gemm: m ", p.m, " n ", p.n, " k ", p.k);
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k, ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldx >= p.k && ldw >= p.k && ldy >= p.n, "gemm: leading dims ", ldx, " ", ldw, " ", ldy);
    SURF_CHECK(p.activation != GemmActivation::kReluSquared || (p.y_dtype == DType::kBF16 && ldy == p.n),
               "gemm: ReLU² needs a bf16 y with row stride n (", ldy, " for n ", p.n, ")");
    const size_t y_elem = dtype_size(p.y_dtype);
    const int align_a = alignment_of(p.w, ldw, 2), align_b = alignment_of(p.x, ldx, 2);
    const int align_d = alignment_of(p.y, ldy, y_elem);
    const int align = std::min(align_a, std::min(align_b, align_d));
    const PlanKey key{p.m,
                      p.n,
                      p.k,
                      ldx,
                      ldw,
                      ldy,
                      static_cast<int>(p.y_dtype),
                      p.bias != nullptr,
                      p.beta != 0.0f,
                      align,
                      static_cast<int>(p.activation)};
    auto* impl = ctx.impl();
    auto it = impl->plans.find(key);
    if (it == impl->plans.end()) {
        GemmPlan plan;
        const cudaDataType_t y_type = p.y_dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
        SURF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
        SURF_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
        SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans,
                                                         sizeof(no_trans)));
        const bool gelu = p.activation == GemmActivation::kGeluTanh;
        if (p.bias || gelu) {
            const cublasLtEpilogue_t epi =
                gelu ? (p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                     : CUBLASLT_EPILOGUE_BIAS;
            SURF_CUBLAS_CHECK(
                cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
        }
        if (impl->sm_target > 0) {
            const int32_t sms = impl->sm_target;
            SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                                             &sms, sizeof(sms)));
        }
        SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, p.k, p.n, ldw));
        SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, p.k, p.m, ldx));
        SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, y_type, p.n, p.m, ldy));
        cublasLtMatmulPreference_t pref = nullptr;
        SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        const uint64_t ws = impl->workspace_bytes;
        SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &ws, sizeof(ws)));
        const uint32_t a32 = static_cast<uint32_t>(align);
        for (auto attr :
             {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
            SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &a32, sizeof(a32)));
        }
        cublasLtMatmulHeuristicResult_t results[kMaxCandidates]{};
        int found = 0;
        SURF_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(impl->handle, plan.op, plan.a, plan.b, plan.d,
                                                         plan.d, pref, impl->autotune ? kMaxCandidates : 1,
                                                         results, &found));
        cublasLtMatmulPreferenceDestroy(pref);
        SURF_CHECK(found > 0, "gemm: cuBLASLt has no algorithm for m ", p.m, " n ", p.n, " k ", p.k,
                   " align ", align);
        plan.algo = results[0].algo;
        for (int i = 0; i < found; ++i) plan.candidates[i] = results[i].algo;
        plan.n_candidates = found;
        plan.tuned = !impl->autotune;
        if (!plan.tuned && impl->reuse_in_bucket) {
            if (const GemmPlan* other = tuned_neighbour(*impl, key, plan)) {
                if (has_candidate(plan, other->algo))
                    plan.algo = other->algo;  // (else the small-m kernel or gemm_wgmma, with the heuristic's
                                              // pick behind it)
                plan.use_gemv = other->use_gemv;
                plan.wgmma_tile_n = other->wgmma_tile_n;
                plan.tuned = plan.reused = true;
                ++impl->reused;
            }
        }
        it = impl->plans.emplace(key, plan).first;
    }
    GemmPlan& plan = it->second;
    if (p.bias) {
        SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias,
                                                         sizeof(p.bias)));
    }
    // GemmContext::WgmmaGemm::kReluSquared: a large ReLU² GEMM runs gemm_wgmma with the activation in its
    // epilogue, untimed (its plan is never tuned: no cuBLASLt candidate would run).
    const bool fused_relu2 = impl->wgmma == GemmContext::WgmmaGemm::kReluSquared &&
                             p.activation == GemmActivation::kReluSquared &&
                             p.m >= GemmContext::kWgmmaReluSquaredMinRows && gemm_wgmma_supported(p);
    if (fused_relu2) {
        gemm_wgmma(p, 256, stream);
        return;
    }
    if (!plan.tuned &&
        ++plan.uses >= (p.m <= kTuneOnFirstUseRows || impl->tune_first_use ? 1 : kTuneAfterUses))
        tune_plan(*impl, plan, p, y_elem, stream);
    // The plan's key fixes the shape, strides and the smallest alignment, not each pointer's: check them.
    const GemmParams lin = linear_part(p);
    if ((plan.use_gemv || impl->small_m == GemmContext::SmallM::kAlways) && gemv_supported(lin)) {
        gemv(lin, stream, impl->small_m_k_split);
        run_relu2_pass(p, p.y, stream);
        return;
    }
    const bool always_wgmma = impl->wgmma == GemmContext::WgmmaGemm::kAlways;
    if ((plan.wgmma_tile_n > 0 || always_wgmma) && gemm_wgmma_supported(p)) {
        gemm_wgmma(p, plan.wgmma_tile_n > 0 ? plan.wgmma_tile_n : 256, stream);
        return;
    }
    SURF_CUBLAS_CHECK(cublasLtMatmul(impl->handle, plan.op, &p.alpha, p.w, plan.a, p.x, plan.b, &p.beta, p.y,
                                     plan.d, p.y, plan.d, &plan.algo, impl->workspace, impl->workspace_bytes,
                                     stream));
    run_relu2_pass(p, p.y, stream);
}

}  // namespace surf::kernels::cuda
