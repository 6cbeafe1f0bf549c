// ReLU² MLP mixer (spec §1.3): y = down(relu(up(x))²), no bias, no gate.
#include "kernels/cpu/cpu_ops.h"
#include "model/cpu/blocks.h"

namespace surf::model::cpu {

namespace k = surf::kernels::cpu;

void mlp_mixer(const LlmConfig& cfg, const MlpWeights& w, const float* x, int64_t T, float* out) {
    const int64_t inter = cfg.intermediate_size;
    std::vector<float> hidden(static_cast<size_t>(T * inter));  // [T, intermediate]
    project(w.up, x, T, hidden.data());
    k::relu_squared(hidden.data(), T * inter);
    project(w.down, hidden.data(), T, out);
}

}  // namespace surf::model::cpu
