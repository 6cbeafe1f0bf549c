// fp8_cutlass.h's dispatch over the configs (fp8_cutlass_c<N>.cu), built with or without CUTLASS.
#include "kernels/cuda/fp8_cutlass.h"

namespace surf::kernels::cuda::fp8_cutlass {

const char* config_name(int config) {
    static const char* const kNames[kConfigs] = {"128x128 ping-pong 2x1", "64x128 ping-pong 2x1",
                                                 "128x128 cooperative 1x2",
                                                 "128x128 cooperative 1x2 stream-K"};
    return config >= 0 && config < kConfigs ? kNames[config] : "?";
}

bool supports(const Fp8GemmParams& p, int64_t ldy) {
    const bool bf16_out =
        p.y_dtype == DType::kBF16 && p.beta == 0.0f && p.activation != GemmActivation::kReluSquared;
    const bool residual = p.y_dtype == DType::kF32 && p.beta == 1.0f && p.activation == GemmActivation::kNone;
    const int64_t y_bytes = p.y_dtype == DType::kF32 ? 4 : 2;
    const bool bias_ok = !p.bias || (reinterpret_cast<uintptr_t>(p.bias) % 16 == 0 && p.n % 8 == 0);
    return available() && (bf16_out || residual) && bias_ok && !p.fp8_out.q && p.k % 16 == 0 &&
           (ldy * y_bytes) % 16 == 0 && reinterpret_cast<uintptr_t>(p.y) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0 &&
           p.m <= 0x7fffffff && p.n <= 0x7fffffff && p.k <= 0x7fffffff;
}

#if SURF_HAVE_CUTLASS

bool available() {
    return true;
}

size_t workspace_bytes(int config, const Fp8GemmParams& p, int64_t ldy) {
    switch (config) {
        case 0: return detail::workspace_bytes_c0(p, ldy);
        case 1: return detail::workspace_bytes_c1(p, ldy);
        case 2: return detail::workspace_bytes_c2(p, ldy);
        case 3: return detail::workspace_bytes_c3(p, ldy);
        default: return 0;
    }
}

bool run(int config, const Fp8GemmParams& p, int64_t ldy, void* workspace, size_t workspace_size,
         cudaStream_t stream) {
    if (!supports(p, ldy) || workspace_bytes(config, p, ldy) > workspace_size) return false;
    switch (config) {
        case 0: return detail::run_c0(p, ldy, workspace, stream);
        case 1: return detail::run_c1(p, ldy, workspace, stream);
        case 2: return detail::run_c2(p, ldy, workspace, stream);
        case 3: return detail::run_c3(p, ldy, workspace, stream);
        default: return false;
    }
}

#else

bool available() {
    return false;
}

size_t workspace_bytes(int, const Fp8GemmParams&, int64_t) {
    return 0;
}

bool run(int, const Fp8GemmParams&, int64_t, void*, size_t, cudaStream_t) {
    return false;
}

#endif

}  // namespace surf::kernels::cuda::fp8_cutlass
