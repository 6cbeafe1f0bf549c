// The process-wide switch for programmatic dependent launch (ops.h set_programmatic_launch; the launches
// themselves: common.cuh launch_kernel).
#include <atomic>

#include "kernels/cuda/ops.h"

namespace surf::kernels::cuda {

namespace {
std::atomic<bool> programmatic_launch_on{true};
}  // namespace

void set_programmatic_launch(bool on) {
    programmatic_launch_on.store(on, std::memory_order_relaxed);
}
bool programmatic_launch() {
    return programmatic_launch_on.load(std::memory_order_relaxed);
}

}  // namespace surf::kernels::cuda
