// The narrow interface between the backend-neutral Scheduler (model/scheduler.h) and a backend: forward a
// planned step and hand back its sampled tokens, encode a batch of images into image rows, save and load a
// session's state slot and KV pages as host bytes. The CPU engine (model/cpu_engine.cpp) and the CUDA engine
// (model/cuda/cuda_engine.cpp) implement it; the scheduler decides everything else.
#pragma once

#include <cstdint>
#include <vector>

namespace surf::model {

// One sequence of a batched step. Decode rows (n_tokens == 1, past > 0) come before prefill rows.
struct SeqStep {
    int32_t slot = -1;            // state slot
    int64_t past = 0;             // tokens already in the state / KV
    std::vector<int32_t> tokens;  // new tokens
    std::vector<int32_t> pages;   // KV pages covering past + tokens.size() tokens, in order
    int64_t image_row = -1;       // first image row (in the image-row buffer) its image tokens take, or -1
    bool all_logits = false;      // logits for every new token (else the last only)
    // A decode row whose input id is still on the device: the previous step's sampled token number
    // token_from (a step issued before that step's tokens reach the host); `tokens` then holds one
    // placeholder. −1: the id is tokens[0].
    int32_t token_from = -1;
    bool is_decode() const { return tokens.size() == 1 && past > 0; }
};

// One image for the vision tower: its tiles' pixels [n_tiles, 3, S, S] fp32 on the host, and the first
// row of the image-row buffer its n_tiles · tokens_per_tile projected rows go to.
struct ImageJob {
    const float* pixels = nullptr;
    int64_t n_tiles = 0;
    int64_t first_row = 0;
};

// A session's state moved to host memory (offloaded, or a fork's copy): the state slot's bytes, the KV
// pages' bytes and how many pages they hold. Empty state: nothing saved.
struct HostCopy {
    std::vector<uint8_t> state, kv;
    int64_t pages = 0;
    bool empty() const { return state.empty(); }
};

struct PlannedStep;

class StepExecutor {
public:
    virtual ~StepExecutor() = default;

    // Runs (or enqueues) the forward of step.rows and the sampling of step.sample_rows; the rows' image
    // tokens read image rows written by the vision work up to step.vision_ticket.
    virtual void forward(const PlannedStep& step) = 0;
    // The step's sampled tokens, one per entry of step.sample_rows (waiting for them where the forward was
    // only enqueued); an entry the step marks cancelled, or whose request generates nothing (max_tokens 0),
    // may hold −1.
    virtual std::vector<int32_t> tokens(const PlannedStep& step) = 0;

    // One batch of images into their image rows. Returns a ticket a later forward's rows wait for (tickets
    // are ordered: a later ticket covers every earlier one). Throws surf::Error for an image it refuses.
    virtual uint64_t encode_images(const std::vector<ImageJob>& jobs) = 0;
    // Copies n_rows image rows from `from_row` to `to_row` (an image-cache hit), ordered after the encode
    // that wrote them; returns a ticket as encode_images does.
    virtual uint64_t copy_image_rows(int64_t from_row, int64_t n_rows, int64_t to_row) = 0;

    // The state in `slot` and the KV in `pages` (the ones holding tokens) into `host`, and back.
    virtual void save(int32_t slot, const std::vector<int32_t>& pages, HostCopy& host) = 0;
    virtual void load(int32_t slot, const std::vector<int32_t>& pages, const HostCopy& host) = 0;
    // The slot no longer belongs to a session (closed or offloaded): a backend that holds per-slot memory
    // frees it; the slot's next session starts from an empty state.
    virtual void release(int32_t /*slot*/) {}
};

}  // namespace surf::model
