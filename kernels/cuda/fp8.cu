// FP8 E4M3 quantization and the W8A8 GEMM (ops.h). The E4M3 conversion is kernels/cpu/fp8.cpp's
// f32_to_e4m3, bit for bit: clamp to ±448, round to nearest even (subnormals included). The GEMM is the
// column-major product yᵀ[n, m] = wq[n, k]·xqᵀ as in gemm.cu (A = w transposed, B = x), both operands
// K-major.
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/cuda/fp8_common.cuh"
#include "kernels/cuda/fp8_cutlass.h"

namespace surf::kernels::cuda {

namespace {

constexpr int kQuantThreads = 256;

// f32_to_e4m3 of kernels/cpu/fp8.cpp on the device.
__device__ __forceinline__ uint8_t e4m3_code(float x) {
    const uint32_t bits = __float_as_uint(x);
    const uint32_t sign = (bits >> 24) & 0x80u;
    const uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);   // NaN
    if (abs_bits >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // |x| ≥ 448: clamped
    if (abs_bits < 0x3c800000u) {  // |x| < 2^-6: a multiple of 2^-9 (x · 2^9 exact, rounded half to even)
        return static_cast<uint8_t>(
            sign | static_cast<uint32_t>(__float2int_rn(__uint_as_float(abs_bits) * 512.0f)));
    }
    const uint32_t rounded = abs_bits + 0x7ffffu + ((abs_bits >> 20) & 1u);
    return static_cast<uint8_t>(sign | ((rounded >> 20) - ((127u - 7u) << 3)));
}

template <typename T>
__device__ __forceinline__ float load_value(const T* x, int64_t i) {
    return detail::to_float(x[i]);
}

// The row's scale (detail::e4m3_row_scale) from each thread's part of the amax; every thread of the block
// calls it.
__device__ __forceinline__ float row_scale(float static_scale, float amax, float* scratch) {
    if (static_scale > 0.0f) return static_scale;
    return detail::e4m3_row_scale(0.0f, detail::block_max(amax, scratch));
}

// One block a row, any dtype, stride and width: the row's amax (unless the scale is static), then the codes.
template <typename T>
__global__ void __launch_bounds__(kQuantThreads) quantize_e4m3_kernel(Fp8QuantParams p, int64_t ldx) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    const int64_t r = blockIdx.x;
    const T* x = static_cast<const T*>(p.x) + r * ldx;
    float amax = 0.0f;
    if (p.static_scale <= 0.0f) {
        for (int64_t i = threadIdx.x; i < p.cols; i += blockDim.x)
            amax = fmaxf(amax, fabsf(load_value(x, i)));
    }
    const float scale = row_scale(p.static_scale, amax, scratch);
    if (threadIdx.x == 0) p.scale[r] = scale;
    uint8_t* q = p.q + r * p.cols;
    for (int64_t i = threadIdx.x; i < p.cols; i += blockDim.x)
        q[i] = e4m3_code(__fdiv_rn(load_value(x, i), scale));
}

// The activations' kernel: bf16 rows of a multiple of 8 columns (16-byte aligned rows) up to
// kQuantThreads · 8 · kVecChunks wide. Each thread loads its 16-byte chunks once into registers, the block
// reduces the amax, and each chunk's eight codes leave as one 8-byte store: one read and one write of the
// row. The codes come from the hardware conversion (cvt.rn.satfinite.e4m3x2.f32: round to nearest even, ±448
// at saturation, as e4m3_code; a NaN becomes an E4M3 NaN whose sign bit may differ from e4m3_code's).
constexpr int kVecChunks = 12;  // rows up to 24,576 columns

// A row's 16-byte bf16 chunks first, first + kStride, … (at most kChunks, those below `chunks`) loaded into
// raw; returns their amax.
template <int kChunks, int kStride>
__device__ __forceinline__ float load_bf16_chunks(const uint4* x, int chunks, int first,
                                                  uint4 (&raw)[kChunks]) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
        const int c = first + j * kStride;
        if (c < chunks) {
            raw[j] = x[c];
            float v[8];
            detail::unpack_bf16x8(raw[j], v);
#pragma unroll
            for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
        }
    }
    return amax;
}

// The chunks load_bf16_chunks loaded, as E4M3 codes at `scale`: one 8-byte store a chunk.
template <int kChunks, int kStride>
__device__ __forceinline__ void store_e4m3_chunks(const uint4 (&raw)[kChunks], int chunks, int first,
                                                  float scale, uint2* q) {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
        const int c = first + j * kStride;
        if (c < chunks) {
            float v[8];
            detail::unpack_bf16x8(raw[j], v);
            q[c] = detail::e4m3x8(v, scale);
        }
    }
}

__global__ void __launch_bounds__(kQuantThreads) quantize_e4m3_bf16x8_kernel(Fp8QuantParams p, int64_t ldx) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    const int64_t r = blockIdx.x;
    const uint4* x = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) + r * ldx);
    const int chunks = static_cast<int>(p.cols / 8), first = static_cast<int>(threadIdx.x);
    uint4 raw[kVecChunks];
    const float amax = load_bf16_chunks<kVecChunks, kQuantThreads>(x, chunks, first, raw);
    const float scale = row_scale(p.static_scale, amax, scratch);
    if (threadIdx.x == 0) p.scale[r] = scale;
    store_e4m3_chunks<kVecChunks, kQuantThreads>(raw, chunks, first, scale,
                                                 reinterpret_cast<uint2*>(p.q + r * p.cols));
}

// quantize_e4m3_bf16x8_kernel for narrow rows (the vision tower's 1,280): a warp a row, eight rows a block,
// up to kWarpChunks 16-byte chunks a lane held in registers; the amax is a warp reduction, with no block
// barrier.
constexpr int kWarpChunks = 8;  // rows up to 2,048 columns
constexpr int kWarpRowsPerBlock = 8;

__global__ void __launch_bounds__(32 * kWarpRowsPerBlock)
    quantize_e4m3_bf16x8_warp_kernel(Fp8QuantParams p, int64_t ldx) {
    detail::pdl_prologue();
    const int lane = threadIdx.x & 31;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + (threadIdx.x >> 5);
    if (r >= p.rows) return;
    const uint4* x = reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.x) + r * ldx);
    const int chunks = static_cast<int>(p.cols / 8);
    uint4 raw[kWarpChunks];
    const float amax = load_bf16_chunks<kWarpChunks, 32>(x, chunks, lane, raw);
    const float scale = detail::e4m3_row_scale(p.static_scale, detail::warp_max(amax));
    if (lane == 0) p.scale[r] = scale;
    store_e4m3_chunks<kWarpChunks, 32>(raw, chunks, lane, scale, reinterpret_cast<uint2*>(p.q + r * p.cols));
}

// Four consecutive values of the unscaled product (fp32, or bf16: 8-byte loads).
__device__ __forceinline__ void load_acc4(const float* acc, int64_t i, float (&a)[4]) {
    const float4 v = *reinterpret_cast<const float4*>(acc + i);
    a[0] = v.x, a[1] = v.y, a[2] = v.z, a[3] = v.w;
}
__device__ __forceinline__ void load_acc4(const bf16* acc, int64_t i, float (&a)[4]) {
    const uint2 v = *reinterpret_cast<const uint2*>(acc + i);
    a[0] = __uint_as_float(v.x << 16), a[1] = __uint_as_float(v.x & 0xffff0000u);
    a[2] = __uint_as_float(v.y << 16), a[3] = __uint_as_float(v.y & 0xffff0000u);
}

// The activation of an output (gemm()'s): GELU on the fp32 value; ReLU² on the value rounded to Y.
template <typename Y>
__device__ __forceinline__ float activate(float v, GemmActivation act) {
    if (act == GemmActivation::kGeluTanh) return detail::gelu_tanh(v);
    if (act == GemmActivation::kReluSquared) {
        const float r = fmaxf(detail::to_float(detail::from_float<Y>(v)), 0.0f);
        return r * r;
    }
    return v;
}

// y = act(acc · x_scale[m] · w_scale[n] + bias[n] + beta · y), rounded to Y. Rows over blockIdx.y
// (grid-strided), columns over the block: four consecutive columns a thread where n, ldy and the pointers
// allow vector accesses (kVec4), else one.
template <typename Y, bool kVec4, typename Acc>
__global__ void fp8_epilogue_kernel(const Acc* acc, Fp8GemmParams p, int64_t ldy) {
    detail::pdl_prologue();
    constexpr int kPer = kVec4 ? 4 : 1;
    const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kPer;
    if (col0 >= p.n) return;
    float ws[kPer], bias[kPer] = {};
    if constexpr (kVec4) {
        const float4 w4 = *reinterpret_cast<const float4*>(p.w_scale + col0);
        ws[0] = w4.x, ws[1] = w4.y, ws[2] = w4.z, ws[3] = w4.w;
    } else {
        ws[0] = p.w_scale[col0];
    }
    if (p.bias) {
#pragma unroll
        for (int e = 0; e < kPer; ++e) bias[e] = detail::to_float(static_cast<const Y*>(p.bias)[col0 + e]);
    }
    for (int64_t row = blockIdx.y; row < p.m; row += gridDim.y) {
        const float xs = p.x_scale[row];
        float a[kPer], v[kPer];
        if constexpr (kVec4)
            load_acc4(acc, row * p.n + col0, a);
        else
            a[0] = detail::to_float(acc[row * p.n + col0]);
        Y* y = static_cast<Y*>(p.y) + row * ldy + col0;
        Y old[kPer];
        if (p.beta != 0.0f) {
#pragma unroll
            for (int e = 0; e < kPer; ++e) old[e] = y[e];
        }
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
            v[e] = a[e] * xs * ws[e] + bias[e];
            if (p.beta != 0.0f) v[e] += p.beta * detail::to_float(old[e]);
            v[e] = activate<Y>(v[e], p.activation);
        }
        if constexpr (kVec4 && std::is_same_v<Y, float>) {
            *reinterpret_cast<float4*>(y) = make_float4(v[0], v[1], v[2], v[3]);
        } else if constexpr (kVec4) {
            const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]),
                                 hi = __floats2bfloat162_rn(v[2], v[3]);
            uint2 packed;
            packed.x = *reinterpret_cast<const uint32_t*>(&lo),
            packed.y = *reinterpret_cast<const uint32_t*>(&hi);
            *reinterpret_cast<uint2*>(y) = packed;
        } else {
            y[0] = detail::from_float<Y>(v[0]);
        }
    }
}

// fp8_epilogue_kernel's bf16 results and their quantization (p.fp8_out) in one pass: a block a row, each
// thread's four-column chunks held in registers between the row's amax and the codes. Rows of a multiple of
// 4 columns up to kRowThreads · 4 · kRowChunks (the language model's MLP width and below).
constexpr int kRowThreads = 512;
constexpr int kRowChunks = 12;  // rows up to 24,576 columns

template <typename Acc>
__global__ void __launch_bounds__(kRowThreads)
    fp8_epilogue_rows_kernel(const Acc* acc, Fp8GemmParams p, int64_t ldy) {
    detail::pdl_prologue();
    __shared__ float scratch[32];
    const int64_t row = blockIdx.x;
    const int chunks = static_cast<int>(p.n / 4);
    const float xs = p.x_scale[row];
    const Acc* a_row = acc + row * p.n;
    const float4* w4 = reinterpret_cast<const float4*>(p.w_scale);
    uint2* y = reinterpret_cast<uint2*>(static_cast<bf16*>(p.y) + row * ldy);
    float v[kRowChunks][4];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j) {
        const int c = threadIdx.x + j * kRowThreads;
        if (c >= chunks) continue;
        float a[4];
        load_acc4(a_row, int64_t{c} * 4, a);
        const float4 ws = w4[c];
        v[j][0] = a[0] * xs * ws.x, v[j][1] = a[1] * xs * ws.y, v[j][2] = a[2] * xs * ws.z,
        v[j][3] = a[3] * xs * ws.w;
        if (p.bias) {
            float b[4];
            load_acc4(static_cast<const bf16*>(p.bias), int64_t{c} * 4, b);
#pragma unroll
            for (int e = 0; e < 4; ++e) v[j][e] += b[e];
        }
        if (p.beta != 0.0f) {
            float o[4];
            load_acc4(static_cast<const bf16*>(p.y) + row * ldy, int64_t{c} * 4, o);
#pragma unroll
            for (int e = 0; e < 4; ++e) v[j][e] += p.beta * o[e];
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            v[j][e] = detail::bf16_rounded(activate<bf16>(v[j][e], p.activation));
            amax = fmaxf(amax, fabsf(v[j][e]));
        }
        if (p.fp8_out.keep_y)
            y[c] = make_uint2(detail::pack_bf16x2(v[j][0], v[j][1]), detail::pack_bf16x2(v[j][2], v[j][3]));
    }
    const float scale = row_scale(p.fp8_out.static_scale, amax, scratch);
    if (threadIdx.x == 0) p.fp8_out.scale[row] = scale;
    uint32_t* q = reinterpret_cast<uint32_t*>(p.fp8_out.q + row * p.n);
#pragma unroll
    for (int j = 0; j < kRowChunks; ++j) {
        const int c = threadIdx.x + j * kRowThreads;
        if (c < chunks) q[c] = detail::e4m3x4(v[j], scale);
    }
}

}  // namespace

void quantize_e4m3(const Fp8QuantParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.q && p.scale, "quantize_e4m3: null pointer");
    SURF_CHECK(p.rows >= 0 && p.cols > 0, "quantize_e4m3: rows ", p.rows, " cols ", p.cols);
    SURF_CHECK(p.static_scale >= 0.0f, "quantize_e4m3: static scale ", p.static_scale);
    if (p.rows == 0) return;
    const int64_t ldx = p.ldx ? p.ldx : p.cols;
    SURF_CHECK(ldx >= p.cols, "quantize_e4m3: row stride ", ldx, " < cols ", p.cols);
    const dim3 grid(static_cast<unsigned>(p.rows));
    const bool vec = p.x_dtype == DType::kBF16 && p.cols % 8 == 0 && ldx % 8 == 0 &&
                     reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(p.q) % 8 == 0 &&
                     p.cols <= int64_t{kQuantThreads} * 8 * kVecChunks;
    if (vec && p.cols <= 32 * 8 * kWarpChunks)
        detail::launch_kernel(quantize_e4m3_bf16x8_warp_kernel,
                              static_cast<unsigned>((p.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock),
                              32 * kWarpRowsPerBlock, 0, stream, p, ldx);
    else if (vec)
        detail::launch_kernel(quantize_e4m3_bf16x8_kernel, grid, kQuantThreads, 0, stream, p, ldx);
    else if (p.x_dtype == DType::kBF16)
        detail::launch_kernel(quantize_e4m3_kernel<bf16>, grid, kQuantThreads, 0, stream, p, ldx);
    else
        detail::launch_kernel(quantize_e4m3_kernel<float>, grid, kQuantThreads, 0, stream, p, ldx);
    SURF_CUDA_CHECK_LAUNCH();
}

void quantize_e4m3(const Fp8RowOut& out, const bf16* y, int64_t rows, int64_t cols, int64_t ldy,
                   cudaStream_t stream) {
    Fp8QuantParams q;
    q.x = y, q.x_dtype = DType::kBF16, q.q = out.q, q.scale = out.scale, q.static_scale = out.static_scale;
    q.rows = rows, q.cols = cols, q.ldx = ldy;
    quantize_e4m3(q, stream);
}

// --- the GEMM --------------------------------------------------------------------------------------------

namespace {

constexpr int kMaxCandidates = 8;
constexpr int64_t kTuneOnFirstUseRows = 128;
constexpr int kTuneAfterUses = 3;

struct Fp8Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    cublasLtMatmulAlgo_t candidates[kMaxCandidates]{};
    int n_candidates = 0;
    int uses = 0;
    bool tuned = false;
    bool epilogue = false;  // unit scales into the scratch, then fp8_epilogue_kernel
    bool acc_bf16 = false;  // the epilogue path's scratch in bf16
    int cutlass = -1;       // the fp8_cutlass config this shape runs on; -1: cuBLASLt
};

// m, n, k, ldy, y dtype, beta ≠ 0, y's alignment, activation + 8 with a bias.
using Fp8Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, bool, int, int>;

int alignment_of(const void* ptr, int64_t ld, size_t elem) {
    uint64_t v = reinterpret_cast<uint64_t>(ptr) | static_cast<uint64_t>(ld * static_cast<int64_t>(elem));
    int align = 256;
    while (align > 1 && (v % static_cast<uint64_t>(align)) != 0) align >>= 1;
    return align;
}

}  // namespace

struct Fp8GemmContext::Impl {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    std::map<Fp8Key, Fp8Plan> plans;
    bool autotune = false, tune_first_use = false, force_epilogue = false, small_m = true, acc_bf16 = false;
    bool fast_accum = false;
    Fp8GemmContext::Cutlass cutlass = Fp8GemmContext::Cutlass::kTuned;
    int cutlass_config = 0;  // kAlways's
    int64_t epilogue_plans = 0, cutlass_plans = 0;
    // [m, n] fp32 or bf16: the epilogue path's GEMM output. A larger shape takes a new buffer and the old one
    // stays allocated until the context goes: decode graphs captured earlier still write to it.
    void* acc = nullptr;
    size_t acc_bytes = 0;
    std::vector<void*> retired;
    void* scratch = nullptr;  // tuning output
    size_t scratch_bytes = 0;
    void* y_scratch = nullptr;  // tuning's y when whole ways (matmul + epilogue, CUTLASS) are timed
    size_t y_scratch_bytes = 0;
    cudaEvent_t ev[kMaxCandidates + 2] = {};

    static void* grow(void*& buf, size_t& have, size_t bytes) {
        if (bytes > have) {
            if (buf) SURF_CUDA_CHECK(cudaFree(buf));
            buf = nullptr;
            SURF_CUDA_CHECK(cudaMalloc(&buf, bytes));
            have = bytes;
        }
        return buf;
    }
};

Fp8GemmContext::Fp8GemmContext(size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
    SURF_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
    impl_->workspace_bytes = workspace_bytes;
    if (workspace_bytes > 0) SURF_CUDA_CHECK(cudaMalloc(&impl_->workspace, workspace_bytes));
}

Fp8GemmContext::~Fp8GemmContext() {
    for (auto& [key, plan] : impl_->plans) {
        cublasLtMatrixLayoutDestroy(plan.a);
        cublasLtMatrixLayoutDestroy(plan.b);
        cublasLtMatrixLayoutDestroy(plan.d);
        cublasLtMatmulDescDestroy(plan.op);
    }
    for (void* b : {impl_->workspace, impl_->acc, impl_->scratch, impl_->y_scratch}) {
        if (b) cudaFree(b);
    }
    for (void* b : impl_->retired) cudaFree(b);
    for (cudaEvent_t e : impl_->ev) {
        if (e) cudaEventDestroy(e);
    }
    if (impl_->handle) cublasLtDestroy(impl_->handle);
}

void Fp8GemmContext::set_autotune(bool on) {
    impl_->autotune = on;
}
void Fp8GemmContext::set_tune_on_first_use(bool on) {
    impl_->tune_first_use = on;
}
void Fp8GemmContext::set_force_epilogue(bool on) {
    impl_->force_epilogue = on;
}
void Fp8GemmContext::set_small_m_kernel(bool on) {
    impl_->small_m = on;
}
void Fp8GemmContext::set_bf16_products(bool on) {
    SURF_CHECK(impl_->plans.empty(), "Fp8GemmContext::set_bf16_products: after the first GEMM");
    impl_->acc_bf16 = on;
}

void Fp8GemmContext::set_fast_accum(bool on) {
    SURF_CHECK(impl_->plans.empty(), "Fp8GemmContext::set_fast_accum: after the first GEMM");
    impl_->fast_accum = on;
}
void Fp8GemmContext::set_cutlass(Cutlass mode, int config) {
    SURF_CHECK(config >= 0 && config < fp8_cutlass::kConfigs, "Fp8GemmContext::set_cutlass: config ", config,
               " (0 to ", fp8_cutlass::kConfigs - 1, ")");
    impl_->cutlass = mode;
    impl_->cutlass_config = config;
}
bool Fp8GemmContext::cutlass_available() {
    return fp8_cutlass::available();
}

int64_t Fp8GemmContext::planned() const {
    return static_cast<int64_t>(impl_->plans.size());
}
int64_t Fp8GemmContext::epilogue_planned() const {
    return impl_->epilogue_plans;
}
int64_t Fp8GemmContext::cutlass_planned() const {
    return impl_->cutlass_plans;
}

namespace {

// Descriptors and heuristic candidates of one way to run p: with the scale vectors in cuBLASLt, or
// (epilogue) unit scales into an fp32 or (acc_bf16) bf16 [m, n] output with beta 0. False where cuBLASLt
// offers no algorithm.
bool make_plan(Fp8GemmContext::Impl& impl, const Fp8GemmParams& p, int64_t ldy, int align, bool epilogue,
               bool acc_bf16, Fp8Plan& plan) {
    plan.acc_bf16 = epilogue && acc_bf16;
    const cudaDataType_t y_type =
        plan.acc_bf16 ? CUDA_R_16BF : (epilogue || p.y_dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF);
    const int64_t ld_d = epilogue ? p.n : ldy;
    SURF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
    SURF_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
    SURF_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
    const int8_t fast_accum = impl.fast_accum ? 1 : 0;
    SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                                     sizeof(fast_accum)));
    if (!epilogue) {
        const cublasLtMatmulMatrixScale_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        for (auto attr : {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE}) {
            if (cublasLtMatmulDescSetAttribute(plan.op, attr, &outer, sizeof(outer)) != CUBLAS_STATUS_SUCCESS)
                return false;
        }
    }
    SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_8F_E4M3, p.k, p.n, p.k));
    SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_8F_E4M3, p.k, p.m, p.k));
    SURF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, y_type, p.n, p.m, ld_d));
    cublasLtMatmulPreference_t pref = nullptr;
    SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = impl.workspace_bytes;
    SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &ws, sizeof(ws)));
    const uint32_t a16 = 16, a_d = static_cast<uint32_t>(epilogue ? 16 : align);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES})
        SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &a16, sizeof(a16)));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        SURF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &a_d, sizeof(a_d)));
    cublasLtMatmulHeuristicResult_t results[kMaxCandidates]{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(impl.handle, plan.op, plan.a, plan.b, plan.d, plan.d, pref,
                                       impl.autotune ? kMaxCandidates : 1, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0) return false;
    plan.algo = results[0].algo;
    for (int i = 0; i < found; ++i) plan.candidates[i] = results[i].algo;
    plan.n_candidates = found;
    plan.tuned = !impl.autotune;
    plan.epilogue = epilogue;
    return true;
}

void destroy_plan(Fp8Plan& plan) {
    if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.d) cublasLtMatrixLayoutDestroy(plan.d);
    if (plan.op) cublasLtMatmulDescDestroy(plan.op);
    plan = Fp8Plan{};
}

// One cuBLASLt run of the plan's algorithm `algo` into `out` (the plan's D layout).
cublasStatus_t run_matmul(Fp8GemmContext::Impl& impl, Fp8Plan& plan, const cublasLtMatmulAlgo_t& algo,
                          const Fp8GemmParams& p, void* out, cudaStream_t stream) {
    const float alpha = 1.0f, beta = plan.epilogue ? 0.0f : p.beta;
    if (!plan.epilogue) {
        SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                         &p.w_scale, sizeof(p.w_scale)));
        SURF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                         &p.x_scale, sizeof(p.x_scale)));
    }
    return cublasLtMatmul(impl.handle, plan.op, &alpha, p.w, plan.a, p.x, plan.b, &beta, out, plan.d, out,
                          plan.d, &algo, impl.workspace, impl.workspace_bytes, stream);
}

template <typename Acc>
void launch_epilogue(const Acc* acc, const Fp8GemmParams& p, int64_t ldy, cudaStream_t stream) {
    constexpr int kThreads = 256;
    const size_t y_bytes = dtype_size(p.y_dtype);
    const bool vec4 = p.n % 4 == 0 && ldy % 4 == 0 && reinterpret_cast<uintptr_t>(p.y) % (4 * y_bytes) == 0 &&
                      reinterpret_cast<uintptr_t>(p.w_scale) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(p.bias) % (4 * y_bytes) == 0;
    const int64_t threads_per_row = vec4 ? p.n / 4 : p.n;
    const dim3 grid(static_cast<unsigned>((threads_per_row + kThreads - 1) / kThreads),
                    static_cast<unsigned>(std::min<int64_t>(p.m, 65535)));
    if (p.y_dtype == DType::kF32)
        detail::launch_kernel(
            vec4 ? fp8_epilogue_kernel<float, true, Acc> : fp8_epilogue_kernel<float, false, Acc>, grid,
            kThreads, 0, stream, acc, p, ldy);
    else
        detail::launch_kernel(
            vec4 ? fp8_epilogue_kernel<bf16, true, Acc> : fp8_epilogue_kernel<bf16, false, Acc>, grid,
            kThreads, 0, stream, acc, p, ldy);
    SURF_CUDA_CHECK_LAUNCH();
}

// Whether fp8_epilogue_rows_kernel takes p (with its FP8 output).
bool rows_epilogue_supported(const Fp8GemmParams& p, int64_t ldy) {
    return p.fp8_out.q && p.y_dtype == DType::kBF16 && p.n % 4 == 0 && ldy % 4 == 0 &&
           p.n <= int64_t{kRowThreads} * 4 * kRowChunks && p.m <= 0x7fffffff &&
           reinterpret_cast<uintptr_t>(p.y) % 8 == 0 && reinterpret_cast<uintptr_t>(p.w_scale) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(p.fp8_out.q) % 4 == 0 && reinterpret_cast<uintptr_t>(p.bias) % 8 == 0;
}

// p.fp8_out from the bf16 y already written (the paths without a fused quantization).
void quantize_output(const Fp8GemmParams& p, int64_t ldy, cudaStream_t stream) {
    quantize_e4m3(p.fp8_out, static_cast<const bf16*>(p.y), p.m, p.n, ldy, stream);
}

// The epilogue path after the matmul: the row kernel where it also quantizes, else the epilogue kernel and
// (for an FP8 output) quantize_e4m3.
template <typename Acc>
void run_epilogue(const Acc* acc, const Fp8GemmParams& p, int64_t ldy, cudaStream_t stream) {
    if (rows_epilogue_supported(p, ldy)) {
        detail::launch_kernel(fp8_epilogue_rows_kernel<Acc>, static_cast<unsigned>(p.m), kRowThreads, 0,
                              stream, acc, p, ldy);
        SURF_CUDA_CHECK_LAUNCH();
        return;
    }
    launch_epilogue(acc, p, ldy, stream);
    if (p.fp8_out.q) quantize_output(p, ldy, stream);
}

// cuBLASLt's way of p with the plan's algorithm, into p.y: the matmul, then the epilogue kernel (epilogue
// plans; the row kernel where it also quantizes) or the ReLU² pass, then the quantization unless fused.
void run_cublaslt(Fp8GemmContext::Impl& impl, Fp8Plan& plan, const Fp8GemmParams& p, int64_t ldy,
                  cudaStream_t stream) {
    if (!plan.epilogue) {
        const bool relu2 = p.activation == GemmActivation::kReluSquared;
        SURF_CUBLAS_CHECK(run_matmul(impl, plan, plan.algo, p, p.y, stream));
        if (relu2) relu_squared(static_cast<bf16*>(p.y), p.m * p.n, stream);
        if (p.fp8_out.q) quantize_output(p, ldy, stream);
        return;
    }
    // The scratch grows outside graph capture (a decode graph's shapes run uncaptured first).
    const size_t acc_bytes = static_cast<size_t>(p.m * p.n) * (plan.acc_bf16 ? 2 : 4);
    if (acc_bytes > impl.acc_bytes) {
        if (impl.acc) impl.retired.push_back(impl.acc);
        SURF_CUDA_CHECK(cudaMalloc(&impl.acc, acc_bytes));
        impl.acc_bytes = acc_bytes;
    }
    SURF_CUBLAS_CHECK(run_matmul(impl, plan, plan.algo, p, impl.acc, stream));
    if (plan.acc_bf16)
        run_epilogue(static_cast<const bf16*>(impl.acc), p, ldy, stream);
    else
        run_epilogue(static_cast<const float*>(impl.acc), p, ldy, stream);
}

constexpr int kTimedRuns = 2;

void create_events(Fp8GemmContext::Impl& impl) {
    if (!impl.ev[0]) {
        for (cudaEvent_t& e : impl.ev) SURF_CUDA_CHECK(cudaEventCreate(&e));
    }
}

// Runs way(0 .. n-1) once each (warm-up; false: the way does not take the problem), then kTimedRuns times
// each between events, and returns the fastest way that ran; n ≤ kMaxCandidates + 1 (one event per way and
// one before).
int fastest_way(Fp8GemmContext::Impl& impl, int n, const std::function<bool(int)>& way, cudaStream_t stream) {
    SURF_CHECK(n >= 1 && n <= kMaxCandidates + 1, "fp8_gemm: ", n, " ways to time");
    create_events(impl);
    bool ok[kMaxCandidates + 1] = {};
    for (int i = 0; i < n; ++i) ok[i] = way(i);
    SURF_CUDA_CHECK(cudaEventRecord(impl.ev[0], stream));
    for (int i = 0; i < n; ++i) {
        for (int r = 0; r < kTimedRuns && ok[i]; ++r) ok[i] = way(i);
        SURF_CUDA_CHECK(cudaEventRecord(impl.ev[i + 1], stream));
    }
    SURF_CUDA_CHECK(cudaEventSynchronize(impl.ev[n]));
    float best = std::numeric_limits<float>::infinity();
    int chosen = 0;
    for (int i = 0; i < n; ++i) {
        float ms = 0;
        SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, impl.ev[i], impl.ev[i + 1]));
        if (ok[i] && ms < best) best = ms, chosen = i;
    }
    return chosen;
}

// Times the candidates on a scratch output and keeps the fastest; not while the stream is captured.
void tune_plan(Fp8GemmContext::Impl& impl, Fp8Plan& plan, const Fp8GemmParams& p, int64_t ldy,
               cudaStream_t stream) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    SURF_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return;
    plan.tuned = true;
    if (plan.n_candidates <= 1) return;
    const size_t bytes = static_cast<size_t>(p.m * (plan.epilogue ? p.n : ldy)) *
                         (plan.acc_bf16 ? 2 : (plan.epilogue || p.y_dtype == DType::kF32 ? 4 : 2));
    void* out = Fp8GemmContext::Impl::grow(impl.scratch, impl.scratch_bytes, bytes);
    SURF_CUDA_CHECK(cudaMemsetAsync(out, 0, bytes, stream));
    plan.algo = plan.candidates[fastest_way(
        impl, plan.n_candidates,
        [&](int i) {
            return run_matmul(impl, plan, plan.candidates[i], p, out, stream) == CUBLAS_STATUS_SUCCESS;
        },
        stream)];
}

// Times the plan's cuBLASLt way whole (matmul, then the epilogue pass) against each CUTLASS config on a
// scratch y, and runs the shape on the fastest from now on.
void pick_cutlass(Fp8GemmContext::Impl& impl, Fp8Plan& plan, const Fp8GemmParams& p, int64_t ldy,
                  cudaStream_t stream) {
    Fp8GemmParams t = p;
    const size_t y_bytes = static_cast<size_t>(p.m * ldy) * dtype_size(p.y_dtype);
    t.y = Fp8GemmContext::Impl::grow(impl.y_scratch, impl.y_scratch_bytes, y_bytes);
    SURF_CUDA_CHECK(cudaMemsetAsync(t.y, 0, y_bytes, stream));
    auto run_way = [&](int way) {  // way 0: cuBLASLt; way c + 1: config c
        if (way == 0) {
            run_cublaslt(impl, plan, t, ldy, stream);
            return true;
        }
        return fp8_cutlass::run(way - 1, t, ldy, impl.workspace, impl.workspace_bytes, stream);
    };
    const int chosen = fastest_way(impl, 1 + fp8_cutlass::kConfigs, run_way, stream);
    plan.cutlass = chosen - 1;
    if (plan.cutlass >= 0) ++impl.cutlass_plans;
}

// A new shape takes CUTLASS where a tuned shape of the same n, k, y and ⌈m / 64⌉ runs on it (its tile counts
// along m are the same): mixed steps' row counts vary by a few rows from step to step, and each would
// otherwise run its first uses on cuBLASLt and then stall the step for its own tuning.
void take_bucket_choice(Fp8GemmContext::Impl& impl, const Fp8Key& key, Fp8Plan& plan) {
    if (impl.cutlass != Fp8GemmContext::Cutlass::kTuned) return;
    auto bucket = [](int64_t m) { return (m + 63) / 64; };
    for (const auto& [other, tuned] : impl.plans) {
        Fp8Key same = other;
        std::get<0>(same) = std::get<0>(key);
        if (same == key && tuned.tuned && tuned.cutlass >= 0 &&
            bucket(std::get<0>(other)) == bucket(std::get<0>(key))) {
            plan.cutlass = tuned.cutlass, plan.tuned = true;
            ++impl.cutlass_plans;
            return;
        }
    }
}

Fp8Plan& plan_for(Fp8GemmContext::Impl& impl, const Fp8GemmParams& p, int64_t ldy) {
    const int align = alignment_of(p.y, ldy, dtype_size(p.y_dtype));
    const Fp8Key key{p.m,
                     p.n,
                     p.k,
                     ldy,
                     static_cast<int>(p.y_dtype),
                     p.beta != 0.0f,
                     align,
                     static_cast<int>(p.activation) + (p.bias ? 8 : 0)};
    auto it = impl.plans.find(key);
    if (it != impl.plans.end()) return it->second;
    Fp8Plan plan;
    // cuBLASLt's scale vectors come without bias or GELU here: those shapes take the epilogue path.
    const bool epilogue_only = impl.force_epilogue || p.bias || p.activation == GemmActivation::kGeluTanh;
    if (epilogue_only || !make_plan(impl, p, ldy, align, false, false, plan)) {
        // bf16 products where asked for and cuBLASLt has an algorithm (a bf16 D's columns of n elements
        // must be 16-byte multiples), else fp32.
        destroy_plan(plan);
        bool made = impl.acc_bf16 && make_plan(impl, p, ldy, align, true, true, plan);
        if (!made) {
            destroy_plan(plan);
            made = make_plan(impl, p, ldy, align, true, false, plan);
        }
        SURF_CHECK(made, "fp8_gemm: cuBLASLt has no E4M3 algorithm for m ", p.m, " n ", p.n, " k ", p.k);
        ++impl.epilogue_plans;
    }
    take_bucket_choice(impl, key, plan);
    return impl.plans.emplace(key, plan).first->second;
}

}  // namespace

void fp8_gemm(Fp8GemmContext& ctx, const Fp8GemmParams& p, cudaStream_t stream) {
    SURF_CHECK(p.x && p.x_scale && p.w && p.w_scale && p.y, "fp8_gemm: null pointer");
    SURF_CHECK(p.m > 0 && p.n > 0 && p.k > 0 && p.k % 16 == 0, "fp8_gemm: m ", p.m, " n ", p.n, " k ", p.k,
               " (k a multiple of 16)");
    SURF_CHECK(reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0,
               "fp8_gemm: x and w must be 16-byte aligned");
    const int64_t ldy = p.ldy ? p.ldy : p.n;
    SURF_CHECK(ldy >= p.n, "fp8_gemm: ldy ", ldy, " < n ", p.n);
    SURF_CHECK(
        p.activation == GemmActivation::kNone ||
            (p.activation == GemmActivation::kReluSquared && p.y_dtype == DType::kBF16 && ldy == p.n) ||
            (p.activation == GemmActivation::kGeluTanh && p.y_dtype == DType::kBF16),
        "fp8_gemm: activation needs ReLU² on a bf16 y with row stride n, or GELU on a bf16 y");
    SURF_CHECK(!p.fp8_out.q || (p.fp8_out.scale && p.y_dtype == DType::kBF16),
               "fp8_gemm: an FP8 output needs its scales and a bf16 y");
    Fp8GemmContext::Impl& impl = *ctx.impl();
    const bool cutlass_takes = impl.fast_accum && fp8_cutlass::supports(p, ldy);
    if (impl.small_m && !impl.force_epilogue && fp8_gemv_supported(p)) {
        fp8_gemv(p, stream);
        if (p.fp8_out.q) quantize_output(p, ldy, stream);
        return;
    }
    if (impl.cutlass == Fp8GemmContext::Cutlass::kAlways && cutlass_takes) {
        SURF_CHECK(
            fp8_cutlass::run(impl.cutlass_config, p, ldy, impl.workspace, impl.workspace_bytes, stream),
            "fp8_gemm: CUTLASS config ", impl.cutlass_config, " refused m ", p.m, " n ", p.n, " k ", p.k);
        return;
    }
    Fp8Plan& plan = plan_for(impl, p, ldy);
    if (!plan.tuned &&
        ++plan.uses >= (p.m <= kTuneOnFirstUseRows || impl.tune_first_use ? 1 : kTuneAfterUses)) {
        tune_plan(impl, plan, p, ldy, stream);
        if (plan.tuned && impl.cutlass == Fp8GemmContext::Cutlass::kTuned && cutlass_takes)
            pick_cutlass(impl, plan, p, ldy, stream);
    }
    if (plan.cutlass >= 0 &&
        fp8_cutlass::run(plan.cutlass, p, ldy, impl.workspace, impl.workspace_bytes, stream))
        return;
    run_cublaslt(impl, plan, p, ldy, stream);
}

}  // namespace surf::kernels::cuda
