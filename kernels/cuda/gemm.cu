// bf16 GEMMs with fp32 accumulation through cuBLASLt. Row-major y[m,n] = x[m,k]·w[n,k]ᵀ is the
// column-major product yᵀ[n,m] = op(w)ᵀ-view: A = w (k×n col-major, transposed), B = x (k×m col-major),
// D = yᵀ (n×m col-major, ld = ldy). The bias epilogue adds bias[n] along D's rows, i.e. per output feature.
#include <cstring>
#include <map>
#include <tuple>

#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

// One planned shape: descriptors and the algorithm the heuristic chose (planning costs tens of µs).
struct GemmPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
};

using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool, bool, int>;

int alignment_of(const void* ptr, int64_t ld, size_t elem) {
    // The largest power of two ≤ 256 dividing the address and the row pitch in bytes.
    uint64_t v = reinterpret_cast<uint64_t>(ptr) | static_cast<uint64_t>(ld * static_cast<int64_t>(elem));
    int align = 256;
    while (align > 1 && (v % static_cast<uint64_t>(align)) != 0) align >>= 1;
    return align;
}

}  // namespace

struct GemmContext::Impl {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    std::map<PlanKey, GemmPlan> plans;
};

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
    if (impl_->handle) cublasLtDestroy(impl_->handle);
}

void gemm(GemmContext& ctx, const GemmParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.w && p.y, "gemm: null pointer");
    SURF_CHECK(p.m > 0 && p.n > 0 && p.k > 0, "gemm: m ", p.m, " n ", p.n, " k ", p.k);
    const int64_t ldx = p.ldx ? p.ldx : p.k, ldw = p.ldw ? p.ldw : p.k, ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldx >= p.k && ldw >= p.k && ldy >= p.n, "gemm: leading dims ", ldx, " ", ldw, " ", ldy);
    const size_t y_elem = dtype_size(p.y_dtype);
    const int align_a = alignment_of(p.w, ldw, 2), align_b = alignment_of(p.x, ldx, 2);
    const int align_d = alignment_of(p.y, ldy, y_elem);
    const int align = std::min(align_a, std::min(align_b, align_d));
    const PlanKey key{p.m, p.n, p.k, ldx, ldw, ldy, static_cast<int>(p.y_dtype), p.bias != nullptr,
                      p.beta != 0.0f, align};
    auto* impl = ctx.impl();
    auto it = impl->plans.find(key);
    if (it == impl->plans.end()) {
        GemmPlan plan;
        const cudaDataType_t y_type = p.y_dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
        SURF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
        SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
        SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
        if (p.bias) {
            const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
            SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
        }
        SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, p.k, p.n, ldw));
        SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, p.k, p.m, ldx));
        SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, y_type, p.n, p.m, ldy));
        cublasLtMatmulPreference_t pref = nullptr;
        SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        const uint64_t ws = impl->workspace_bytes;
        SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        const uint32_t a32 = static_cast<uint32_t>(align);
        for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
            SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &a32, sizeof(a32)));
        }
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        SURF_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(impl->handle, plan.op, plan.a, plan.b, plan.d, plan.d,
                                                         pref, 1, &result, &found));
        cublasLtMatmulPreferenceDestroy(pref);
        SURF_CHECK(found > 0, "gemm: cuBLASLt has no algorithm for m ", p.m, " n ", p.n, " k ", p.k, " align ", align);
        plan.algo = result.algo;
        it = impl->plans.emplace(key, plan).first;
    }
    GemmPlan& plan = it->second;
    if (p.bias) {
        SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
    }
    SURF_CUBLAS_CHECK(cublasLtMatmul(impl->handle, plan.op, &p.alpha, p.w, plan.a, p.x, plan.b, &p.beta, p.y, plan.d,
                                     p.y, plan.d, &plan.algo, impl->workspace, impl->workspace_bytes, stream));
}

}  // namespace surf::kernels::cuda
