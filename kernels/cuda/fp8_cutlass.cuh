// The CUTLASS FP8 GEMM of fp8_cutlass.h as a template over tile, cluster and schedule; each
// fp8_cutlass_c<N>.cu instantiates one config (a translation unit each, since a CUTLASS kernel takes long to
// compile).
//
// x [m, k] and w [n, k] are both K-major: A = x row-major, B = w column-major (CUTLASS's "TN"). The mainloop
// accumulates with fast accumulation (the FP8FastAccum schedules: no promotion into fp32 registers along k,
// as cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM). The epilogue is a visitor tree over the fp32 accumulators:
// acc · w_scale[n] · x_scale[m] + bias[n] (a null bias reads as zeros), then per output kind GELU, or + C = y
// for the residual, rounded once to y's type.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "kernels/cuda/fp8_cutlass.h"

namespace surf::kernels::cuda::fp8_cutlass::detail {

namespace fusion = cutlass::epilogue::fusion;

template <class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule, class Scheduler,
          Out kOut>
struct ScaledGemm {
    using E4M3 = cutlass::float_e4m3_t;
    static constexpr bool kResidual = kOut == Out::kResidual;
    using ElementD = std::conditional_t<kResidual, float, cutlass::bfloat16_t>;
    using ElementC = std::conditional_t<kResidual, float, void>;
    using ElementBias = ElementD;
    static constexpr int kAlignD = 16 / static_cast<int>(sizeof(ElementD));
    static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
    using RowStride = cute::Stride<cute::_0, cute::_1, cute::_0>;

    // acc · w_scale[n] (a row vector), then · x_scale[m] (a column vector) + bias[n] (a row vector).
    using ScaleW = fusion::Sm90RowBroadcast<0, TileShape, float, float, RowStride>;
    using ScaleX =
        fusion::Sm90ColBroadcast<0, TileShape, float, float, cute::Stride<cute::_1, cute::_0, cute::_0>>;
    using Bias = fusion::Sm90RowBroadcast<0, TileShape, ElementBias, float, RowStride, kAlignD>;
    using AccW = fusion::Sm90EVT<fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>,
                                 fusion::Sm90AccFetch, ScaleW>;
    template <class Element>
    using ScaledBias =
        fusion::Sm90EVT<fusion::Sm90Compute<cutlass::homogeneous_multiply_add, Element, float, kRound>, AccW,
                        ScaleX, Bias>;
    using Gelu =
        fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::GELU_taylor, ElementD, float, kRound>,
                        ScaledBias<float>>;
    using BiasPlusC = fusion::Sm90EVT<fusion::Sm90Compute<cutlass::plus, float, float, kRound>, Bias,
                                      fusion::Sm90SrcFetch<float>>;
    using PlusC =
        fusion::Sm90EVT<fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementD, float, kRound>, AccW,
                        ScaleX, BiasPlusC>;
    using Visitor =
        std::conditional_t<kOut == Out::kResidual, PlusC,
                           std::conditional_t<kOut == Out::kBf16Gelu, Gelu, ScaledBias<ElementD>>>;

    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, cutlass::layout::RowMajor,
        kAlignD, ElementD, cutlass::layout::RowMajor, kAlignD, EpilogueSchedule, Visitor>::CollectiveOp;
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, E4M3, cutlass::layout::RowMajor, 16, E4M3,
        cutlass::layout::ColumnMajor, 16, float, TileShape, ClusterShape,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
            sizeof(typename Epilogue::SharedStorage))>,
        KernelSchedule>::CollectiveOp;
    using Kernel =
        cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

    static typename Gemm::Arguments arguments(const Fp8GemmParams& p, int64_t ldy) {
        using StrideA = typename Kernel::StrideA;
        using StrideB = typename Kernel::StrideB;
        using StrideC = typename Kernel::StrideC;
        using StrideD = typename Kernel::StrideD;
        const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
        const StrideA sa = cute::make_stride(int64_t{p.k}, cute::Int<1>{}, int64_t{0});
        const StrideB sb = cute::make_stride(int64_t{p.k}, cute::Int<1>{}, int64_t{0});
        const StrideD sd = cute::make_stride(int64_t{ldy}, cute::Int<1>{}, int64_t{0});
        const typename AccW::Arguments acc_w{{}, {p.w_scale, 0.0f, {}}, {}};
        const typename ScaleX::Arguments scale_x{p.x_scale, 0.0f, {}};
        const typename Bias::Arguments bias{static_cast<const ElementBias*>(p.bias), ElementBias(0), {}};
        typename Visitor::Arguments visit{};
        if constexpr (kOut == Out::kResidual)
            visit = {acc_w, scale_x, {bias, {}, {}}, {}};
        else if constexpr (kOut == Out::kBf16Gelu)
            visit = {{acc_w, scale_x, bias, {}}, {}};
        else
            visit = {acc_w, scale_x, bias, {}};
        const auto* c = kResidual ? static_cast<const ElementD*>(p.y) : nullptr;
        StrideC sc{};
        if constexpr (kResidual) sc = cute::make_stride(int64_t{ldy}, cute::Int<1>{}, int64_t{0});
        return typename Gemm::Arguments{
            cutlass::gemm::GemmUniversalMode::kGemm,
            {m, n, k, 1},
            {reinterpret_cast<const E4M3*>(p.x), sa, reinterpret_cast<const E4M3*>(p.w), sb},
            {visit, c, sc, static_cast<ElementD*>(p.y), sd}};
    }

    static size_t workspace_bytes(const Fp8GemmParams& p, int64_t ldy) {
        return Gemm::get_workspace_size(arguments(p, ldy));
    }

    static bool run(const Fp8GemmParams& p, int64_t ldy, void* workspace, cudaStream_t stream) {
        Gemm gemm;
        const typename Gemm::Arguments args = arguments(p, ldy);
        if (gemm.can_implement(args) != cutlass::Status::kSuccess) return false;
        if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return false;
        return gemm.run(stream) == cutlass::Status::kSuccess;
    }
};

// Config N's kernel for p's output kind.
template <template <Out> class Config>
size_t workspace_bytes_of(const Fp8GemmParams& p, int64_t ldy) {
    switch (out_of(p)) {
        case Out::kResidual: return Config<Out::kResidual>::workspace_bytes(p, ldy);
        case Out::kBf16Gelu: return Config<Out::kBf16Gelu>::workspace_bytes(p, ldy);
        default: return Config<Out::kBf16>::workspace_bytes(p, ldy);
    }
}
template <template <Out> class Config>
bool run_of(const Fp8GemmParams& p, int64_t ldy, void* ws, cudaStream_t stream) {
    switch (out_of(p)) {
        case Out::kResidual: return Config<Out::kResidual>::run(p, ldy, ws, stream);
        case Out::kBf16Gelu: return Config<Out::kBf16Gelu>::run(p, ldy, ws, stream);
        default: return Config<Out::kBf16>::run(p, ldy, ws, stream);
    }
}

}  // namespace surf::kernels::cuda::fp8_cutlass::detail

// Defines config N's two entry points of fp8_cutlass.h over ScaledGemm<Tile, Cluster, Kernel, Epilogue,
// Scheduler, ·>.
#define SURF_FP8_CUTLASS_CONFIG(N, TILE, CLUSTER, KERNEL_SCHEDULE, EPILOGUE_SCHEDULE, SCHEDULER)      \
    namespace surf::kernels::cuda::fp8_cutlass::detail {                                              \
    template <Out kOut>                                                                               \
    using Config##N = ScaledGemm<TILE, CLUSTER, KERNEL_SCHEDULE, EPILOGUE_SCHEDULE, SCHEDULER, kOut>; \
    size_t workspace_bytes_c##N(const Fp8GemmParams& p, int64_t ldy) {                                \
        return workspace_bytes_of<Config##N>(p, ldy);                                                 \
    }                                                                                                 \
    bool run_c##N(const Fp8GemmParams& p, int64_t ldy, void* ws, cudaStream_t stream) {               \
        return run_of<Config##N>(p, ldy, ws, stream);                                                 \
    }                                                                                                 \
    }
