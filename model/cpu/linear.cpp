// The language model's linear layers on the CPU: fp32, or FP8 E4M3 weights and activations.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/fp8.h"
#include "model/cpu/blocks.h"

namespace surf::model::cpu {

namespace k = surf::kernels::cpu;

void project(const LinearWeight& w, const float* x, int64_t rows, float* y) {
    const int64_t out = w.w.dim(0), in = w.w.dim(1);
    if (!w.fp8()) {
        k::linear({x, w.w.ptr(), nullptr, y, rows, out, in});
        return;
    }
    const float input_scale = w.act == ActivationQuant::kStaticPerTensor ? w.input_scale : 0.0f;
    k::fp8_linear({x, w.w.ptr(), w.w_scale.data(), input_scale, y, rows, out, in});
}

}  // namespace surf::model::cpu
