// CudaEngine's token sampling for one step (model/cuda/cuda_engine.cpp only): the sampled rows' parameters
// and JSON-schema masks staged in pinned memory (masks computed on the host), the sampler kernels over the
// model's logits rows, the tokens written to GpuModel::sampled_tokens() and copied back. Two staging sets,
// each with its own events: the engine issues step N + 1 (and its sampling) before it reads step N's tokens,
// so N's staged parameters and its tokens on the host must survive N + 1's staging.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/cuda/device_buffer.h"
#include "model/cuda/gpu_model.h"
#include "model/scheduler.h"

namespace surf::model::cuda::engine_detail {

// Per-row sampling parameters and masks, laid out the same way in the pinned staging buffer and its device
// mirror: [seed | step | temperature | top_k | top_p] for `cap` rows (8-byte arrays first, so every array
// is aligned for any cap), then the masks from a 16-byte boundary.
struct SampleArrays {
    uint64_t* seed;
    uint64_t* step;
    float* temperature;
    int32_t* top_k;
    float* top_p;
    uint32_t* masks;

    // Bytes before the masks.
    static size_t param_bytes(size_t cap) { return (cap * (8 + 8 + 4 + 4 + 4) + 15) / 16 * 16; }
    static SampleArrays at(void* base, size_t cap) {
        SampleArrays a;
        a.seed = static_cast<uint64_t*>(base);
        a.step = a.seed + cap;
        a.temperature = reinterpret_cast<float*>(a.step + cap);
        a.top_k = reinterpret_cast<int32_t*>(a.temperature + cap);
        a.top_p = reinterpret_cast<float*>(a.top_k + cap);
        a.masks = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(base) + param_bytes(cap));
        return a;
    }
};

class StepSampling {
public:
    static constexpr int kSets = 2;

    // `output_mask`: the tokens any row may generate (all but image placeholders), one bit each.
    StepSampling(GpuModel& model, std::vector<uint32_t> output_mask);
    ~StepSampling();
    StepSampling(const StepSampling&) = delete;
    StepSampling& operator=(const StepSampling&) = delete;

    // Host part, before the GPU work: per sampled row (rows[i] indexes owners / positions) its parameters
    // and, where any row has a constraint, every row's mask into set `set`. Returns per sampled row the token
    // a complete constraint forces (its stop id), or −1.
    std::vector<int32_t> stage(int set, const std::vector<Request*>& owners,
                               const std::vector<uint64_t>& positions, const std::vector<int64_t>& rows);
    // Enqueues on the model's stream: the staged parameters up, the raw logits of the rows whose requests
    // report them (GenerateOptions::on_logits; rows that draw a token) to the host, the sampler over logits
    // rows `rows` (sequence i's logits are row i), the tokens into GpuModel::sampled_tokens()[0, rows.size())
    // and back to the host. Call with the model's stream to yourself (the engine's gpu lock), after
    // stage(set, …) and the step's forward.
    void enqueue(int set, const std::vector<int64_t>& rows);
    // Waits for set's tokens and returns them, `forced` (from stage) applied, after handing each reporting
    // row's logits to its request's on_logits (on the caller's thread, as the CPU engine does).
    std::vector<int32_t> wait(int set, const std::vector<int32_t>& forced);
    // Set's sampling span on the GPU (parameters up to tokens back), and the event its tokens' copy
    // completes.
    float sampling_ms(int set) const;
    cudaEvent_t end_event(int set) const { return sets_[set].end; }

private:
    struct Set {
        PinnedBuffer params_host, tokens_host;
        cudaEvent_t begin = nullptr, end = nullptr;
        bool any_mask = false;
        // The sampled rows (indexes into the step's rows) that report their logits, their callbacks (their
        // requests outlive the step), and the host rows the logits land in (grown on first use).
        std::vector<size_t> report_rows;
        std::vector<const std::function<void(const float*, int64_t)>*> report_to;
        PinnedBuffer logits_host;
    };
    // Which of the step's sampled rows report their logits: those with on_logits that draw a token.
    void stage_reports(Set& S, const std::vector<Request*>& owners, const std::vector<int64_t>& rows,
                       const std::vector<int32_t>& forced);
    GpuModel& model_;
    std::vector<uint32_t> output_mask_;
    DeviceBuffer output_mask_dev_;
    size_t mask_words_ = 0, cap_ = 0;
    DeviceBuffer params_dev_;  // one: stream order puts step N's kernels before N + 1's upload
    Set sets_[kSets];
};

}  // namespace surf::model::cuda::engine_detail
