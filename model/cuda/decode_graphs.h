// CUDA graphs for decode-only steps. A decode step over B sequences launches ~10 kernels per layer;
// at small batches the launches, not the GPU, set the pace. The step's kernels read every per-step
// value (tokens, slots, block tables, lengths) from device metadata at fixed offsets, so one captured
// graph per (padded batch, padded block-table width) replays any step of that shape.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace surf::model::cuda {

class DecodeGraphs {
public:
    // Batch buckets up to `max_batch`: 1, 2, 4, 8, 12, 16, then every 4 (padding costs at most 3 rows,
    // ≤ 3% of a batch of 100).
    explicit DecodeGraphs(int64_t max_batch);
    ~DecodeGraphs();
    DecodeGraphs(const DecodeGraphs&) = delete;
    DecodeGraphs& operator=(const DecodeGraphs&) = delete;

    // The bucket a batch of `n` rows is padded to (n ≤ max_batch).
    int64_t batch_bucket(int64_t n) const;
    const std::vector<int64_t>& batch_buckets() const { return buckets_; }
    // Block-table width bucket: the next power of two ≥ `pages` (≥ 4) up to 64, then the next multiple of 64
    // (1,024 tokens of 16), capped at `max_pages`: the split-KV grid of decode attention follows this
    // width, so it should not run far past the longest context.
    static int64_t pages_bucket(int64_t pages, int64_t max_pages);

    // Runs a step of shape (batch, pages) on `stream`: the first one kernel by kernel through `enqueue`
    // (which must only enqueue work on `stream`, and the same work every time; GEMM plans and tuning happen
    // then, outside any capture), after which the same enqueue is captured into a graph (not run); later
    // steps are launches of that graph.
    void launch(int64_t batch, int64_t pages, cudaStream_t stream, const std::function<void()>& enqueue);

    int64_t captured() const { return static_cast<int64_t>(graphs_.size()); }
    int64_t launches() const { return launches_; }

private:
    std::vector<int64_t> buckets_;
    std::map<std::pair<int64_t, int64_t>, cudaGraphExec_t> graphs_;
    int64_t launches_ = 0;
};

}  // namespace surf::model::cuda
