// The Engine on the GPU: continuous batching of many sessions over one GpuModel. A scheduler thread
// admits requests (a state slot and KV pages for each; idle sessions are offloaded to host memory when
// the GPU is full) and queues their images; each step encodes one batch of queued images (from many
// requests, with an image-embedding cache keyed by content) on the vision stream while the step runs.
// Steps are mixed: one decode row per generating request plus chunked prefill of new input (of requests
// whose images are encoded) within a token budget; decode-only steps replay CUDA graphs. Sampling (with
// JSON-schema masks computed on the host while the GPU runs) happens on the GPU, and the next step is issued
// before the tokens come back (CudaEngineOptions::issue_ahead).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/cuda/gpu_model.h"
#include "model/engine.h"

namespace surf::model::cuda {

struct CudaEngineOptions {
    GpuLimits limits;
    int device = 0;
    // Tokens per step: decode rows count against it, prefill keeps at least a quarter (within
    // limits.max_tokens). 1,024 spreads a burst of prompts over the decode steps instead of stalling them:
    // higher throughput and a shorter time to first token than 2,048 or 4,096 (docs/BENCHMARKS.md).
    int64_t prefill_chunk = 1024;
    // Issue step N + 1 before step N's sampled tokens reach the host: decode rows read their input ids from
    // the device (SeqStep::token_from), so the GPU does not wait for the host's accounting, admission and
    // planning between steps. A request that may still stop on step N's token (a stop id) is planned as
    // continuing; if it stops, the token its extra row fed is simply in its session (the token the next
    // request would have fed first), and what that row sampled is dropped: the session's next request must
    // bring input (an empty one, which would continue from the pending stop token with the option off, is an
    // error naming this). Steps whose rows carry a JSON-schema constraint are not issued ahead (the next mask
    // needs the token on the host). Off: every step waits for the previous step's tokens.
    bool issue_ahead = true;
    // Before serving, tune the GEMM shapes of the decode-graph batch buckets and of a full prefill chunk
    // (GpuModel::warm_up; a few seconds at 12B): otherwise the first steps of each shape stop to tune.
    bool warm_up = true;
    // The warm-up also tunes one step at the top of every 64-row bucket below the prefill chunk (the row
    // counts of partly filled mixed steps; GpuModel::warm_up's row_buckets): a few seconds more before
    // serving, no tuning stalls inside it.
    bool warm_up_row_buckets = true;
    // Vision batches across steps (off by default): after a step, the queued images go through the vision
    // tower only once they add up to vision_min_tiles tiles, or the oldest has waited vision_max_wait_steps
    // steps, or the step had no prompt ready to prefill. Larger passes run the tower's GEMMs and attention
    // closer to their peak. 0 or 1: every step encodes what is queued. Off by default: waiting for images
    // costs serving more than the larger passes save (docs/BENCHMARKS.md).
    int64_t vision_min_tiles = 0;
    int64_t vision_max_wait_steps = 2;
    // Vision passes the warm-up runs so that their GEMM shapes are tuned before serving: each entry is one
    // pass, given as its images' tile counts (e.g. {3, 3, 3}: three 3-tile screenshots); run whether or not
    // warm_up is on. Empty: the passes warm_up_vision_tile_counts implies.
    std::vector<std::vector<int64_t>> warm_up_vision_batches;
    // With warm_up on, a model with a vision tower and no warm_up_vision_batches: one pass of every tile
    // count from 1 to limits.max_tiles (a pass's GEMM shapes depend only on its tile count), each shape tuned
    // on that pass. Otherwise a pass of a new tile count runs the heuristic's algorithms twice and stops to
    // tune on the third, a stall inside a step; with it, serving is faster (docs/BENCHMARKS.md).
    // open_engine's model::WarmUp::kSingle (one agent) turns it off: at 12B the passes of every tile count
    // add seconds to the start to save a fraction of a second of tuning.
    bool warm_up_vision_tile_counts = true;
};

std::unique_ptr<Engine> open_cuda_engine(const std::string& model_dir, const CudaEngineOptions& options);

// An engine over random weights drawn on the GPU from `cfg` (benchmarks); it has no tokenizer, so
// callers pass token-id parts and images.
std::unique_ptr<Engine> open_random_cuda_engine(const ModelConfig& cfg, const CudaEngineOptions& options,
                                                uint64_t seed);

// Makes "cuda" a backend of model::open_engine: the default options on the given device; WarmUp::kServing
// tunes a vision pass of every tile count (warm_up_vision_tile_counts). Idempotent.
void register_backend();

}  // namespace surf::model::cuda
