// The CPU backend's StepExecutor (model/executor.h) over one CpuModel: a step's rows run one sequence after
// another, each on its slot's SequenceState, and sampled rows are sampled on the host; image rows live in a
// host buffer that grows with the arena. The engine (model/cpu_engine.cpp) calls forward, tokens and
// encode_images from its step thread; save, load, copy_image_rows and release come through the Scheduler
// under the engine's lock, possibly while a step runs (on other slots).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "model/checkpoint/tensor.h"
#include "model/cpu/cpu_model.h"
#include "model/dump.h"
#include "model/executor.h"

namespace surf::model {

class CpuExecutor final : public StepExecutor {
public:
    // `output_mask`: the tokens any row may generate (all but image placeholders), one bit each.
    CpuExecutor(const cpu::CpuModel& model, Dumper* dumper, int32_t image_token_id,
                std::vector<uint32_t> output_mask);

    void forward(const PlannedStep& step) override;
    std::vector<int32_t> tokens(const PlannedStep& step) override;
    uint64_t encode_images(const std::vector<ImageJob>& jobs) override;
    uint64_t copy_image_rows(int64_t from_row, int64_t n_rows, int64_t to_row) override;
    void save(int32_t slot, const std::vector<int32_t>& pages, HostCopy& host) override;
    void load(int32_t slot, const std::vector<int32_t>& pages, const HostCopy& host) override;
    void release(int32_t slot) override;

private:
    // The slot's state, created empty on first use (a node of states_: stays put while others come and go).
    cpu::SequenceState& state(int32_t slot);
    // Image rows [first, first + n) of the buffer, grown to hold them.
    float* image_rows(int64_t first, int64_t n);

    const cpu::CpuModel& model_;
    Dumper* dumper_;
    int32_t image_token_id_;
    std::vector<uint32_t> output_mask_;
    std::mutex states_mu_;  // the map itself (each state belongs to its session's request or its lock holder)
    std::map<int32_t, cpu::SequenceState> states_;
    std::vector<float> image_rows_;  // [rows, d_model]
    uint64_t vision_ticket_ = 0;
    // The last forward's logits per sampled row ([vocab] each) and each row's sampling counter: the tokens in
    // its sequence after the row.
    std::vector<Tensor> logits_;
    std::vector<uint64_t> counters_;
};

}  // namespace surf::model
