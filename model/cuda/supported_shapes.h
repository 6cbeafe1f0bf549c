// The model shapes the CUDA backend's kernels run, checked against a config before anything is allocated on
// the device: a checkpoint outside them is refused at load with every offending config.json field named,
// instead of failing a kernel's internal check in the middle of a forward pass. Plain C++ (no CUDA headers),
// built into surf::model so that CPU CI tests it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/checkpoint/config.h"

namespace surf::model::cuda {

// One shape the kernels do not run: the config.json field (or expression of fields) as the user finds it in
// the file, e.g. "llm_config.ssm_state_size", its value, and what the kernels support.
struct ShapeProblem {
    std::string field;
    int64_t value = 0;
    std::string supported;
};

// Every shape of `cfg` the CUDA kernels do not run, in config order (language model, then vision tower);
// empty when the CUDA backend can run it. Constraints that depend on a GpuLimits option are those of its
// default.
std::vector<ShapeProblem> unsupported_cuda_shapes(const ModelConfig& cfg);

// Throws surf::Error(kUnsupported) listing every problem of unsupported_cuda_shapes(cfg) in one message that
// names cfg's config.json (from cfg.dir) and --backend cpu as the way to run the model; returns otherwise.
void check_cuda_shapes(const ModelConfig& cfg);

}  // namespace surf::model::cuda
