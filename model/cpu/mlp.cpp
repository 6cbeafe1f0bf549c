// ReLU² MLP mixer (spec §1.3): y = down(relu(up(x))²), no bias, no gate.
#include "kernels/cpu/cpu_ops.h"
#include "model/cpu/blocks.h"

namespace surf::model::cpu {

namespace k = surf::kernels::cpu;

void mlp_mixer(const LlmConfig& cfg, const MlpWeights& w, const float* x, int64_t T, float* out) {
    const int64_t d_model = cfg.hidden_size, inter = cfg.intermediate_size;
    std::vector<float> hidden(static_cast<size_t>(T * inter));  // [T, intermediate]
    k::linear({x, w.up.ptr(), nullptr, hidden.data(), T, inter, d_model});
    k::relu_squared(hidden.data(), T * inter);
    k::linear({hidden.data(), w.down.ptr(), nullptr, out, T, d_model, inter});
}

}  // namespace surf::model::cpu
