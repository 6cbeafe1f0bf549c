#include "model/cuda/decode_graphs.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"

namespace surf::model::cuda {

DecodeGraphs::DecodeGraphs(int64_t max_batch) {
    for (int64_t b : {1, 2, 4, 8, 12, 16}) {
        if (b < max_batch) buckets_.push_back(b);
    }
    // Then every 4 rows: a padding row costs a full state update (~1% of a 100-row step), a graph only
    // its capture and a few MB.
    for (int64_t b = 20; b < max_batch; b += 4) buckets_.push_back(b);
    buckets_.push_back(max_batch);
}

DecodeGraphs::~DecodeGraphs() {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
}

int64_t DecodeGraphs::batch_bucket(int64_t n) const {
    const auto it = std::lower_bound(buckets_.begin(), buckets_.end(), n);
    SURF_CHECK(it != buckets_.end(), "decode graph: batch ", n, " over the limit ", buckets_.back());
    return *it;
}

int64_t DecodeGraphs::pages_bucket(int64_t pages, int64_t max_pages) {
    int64_t p = 4;
    while (p < pages && p < 64) p *= 2;
    if (p < pages) p = (pages + 63) / 64 * 64;
    return std::min(p, max_pages);
}

void DecodeGraphs::launch(int64_t batch, int64_t pages, cudaStream_t stream,
                          const std::function<void()>& enqueue) {
    const auto key = std::make_pair(batch, pages);
    const auto it = graphs_.find(key);
    if (it != graphs_.end()) {
        SURF_CUDA_CHECK(cudaGraphLaunch(it->second, stream));
        ++launches_;
        return;
    }
    // A new shape: run it kernel by kernel (GEMM plans and tuning happen then, outside any capture), then
    // capture the same enqueue into a graph for its next steps while the GPU is still running this one: the
    // capture and instantiation (milliseconds of host time) hide behind the step instead of leaving the GPU
    // idle before the shape's second step (serving meets new shapes until late in a run). Work already queued
    // on the stream is not part of the capture.
    enqueue();
    cudaGraph_t graph = nullptr;
    // Thread-local mode: other threads' CUDA calls (client threads saving a slot) do not break the capture.
    SURF_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
        enqueue();
    } catch (...) {
        cudaStreamEndCapture(stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
    }
    SURF_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    SURF_CUDA_CHECK(err);
    graphs_.emplace(key, exec);
}

}  // namespace surf::model::cuda
