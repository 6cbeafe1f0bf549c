// CudaEngine's bookkeeping records (model/cuda/cuda_engine.cpp and step_sampling.cpp only): a session's
// residency, a request in flight, an image waiting for the vision tower, a step issued on the GPU, and the
// layout of the per-row sampling parameters.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <optional>
#include <vector>

#include "model/decode_rules.h"
#include "model/engine.h"
#include "model/engine_input.h"
#include "model/text/tokenizer.h"

namespace surf::model::cuda::engine_detail {

using Clock = std::chrono::steady_clock;

// A session: where its state lives (a GPU slot and KV pages, or host copies when offloaded) and how
// many tokens it holds.
struct Session {
    int32_t slot = -1;             // -1: not resident
    std::vector<int32_t> pages;    // KV pages (resident) covering `past` tokens (+ reserved room while busy)
    int64_t past = 0;              // tokens fed through the model
    std::vector<int32_t> pending;  // sampled, not yet fed
    bool last_fed_ahead = false;   // its last request ended on a token a step issued ahead had already fed
    std::vector<uint8_t> host_state, host_kv;  // offloaded copies
    int64_t host_pages = 0;                    // pages' worth of KV in host_kv
    bool busy = false;                         // a request is admitted on it
    uint64_t last_used = 0;
};

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

struct Request;

// An image of an admitted request waiting for the vision tower, and the arena row it goes to.
struct VisionJob {
    Request* request = nullptr;
    size_t image = 0;
    int64_t row = 0;
    int64_t queued_at_step = 0;  // EngineStats::steps when it was queued (vision batching across steps)
};

struct Request {
    SessionId session = 0;
    PreparedInput input;
    std::vector<int32_t> tokens;  // pending + input tokens to prefill
    GenerateOptions options;
    int64_t prefill_pos = 0;     // tokens of `tokens` already fed
    int64_t image_region = -1;   // its region of the image arena (first row), -1 if no images
    int pending_images = 0;      // images still queued for the vision tower (no prefill until 0)
    uint64_t vision_ticket = 0;  // the vision work its image rows come from (the forward waits for it)
    bool decoding = false;    // its prompt is fed: every step it is in samples (set when that step is issued)
    int32_t last_token = -1;  // to feed on the next decode step (once the host has it)
    // The step (CudaEngine's issued-step id) whose sampler draws its newest token and that token's index
    // among the step's sampled tokens: a step issued before that one's tokens reach the host feeds it from
    // the device.
    uint64_t sampled_in_step = 0;
    int32_t sampled_index = -1;
    uint64_t fed_in_step = 0;          // the last step that fed a token from the device (SeqStep::token_from)
    std::optional<DecodeRules> rules;  // stop ids, the schema's constraint, streamed text (set at admission)
    GenerateResult result;
    Clock::time_point started, first_token_time;
    std::promise<GenerateResult> done;
};

// A step issued on the GPU whose sampled tokens the host has not read yet.
struct IssuedStep {
    uint64_t id = 0;
    int set = 0;                       // StepSampling's staging set and the engine's step-begin event
    std::vector<Request*> owners;      // per row (decode rows first)
    std::vector<int64_t> fed;          // per row: tokens it fed
    std::vector<char> prefill;         // per row: a prefill chunk (else a decode row)
    std::vector<int64_t> sample_rows;  // rows that sample, ascending
    std::vector<int32_t> forced;       // per sampled row: the token a complete constraint forces, or −1
    int64_t n_dec = 0, decode_context = 0;
    bool decode_only = false, graph = false;
    Clock::time_point begin;  // when its planning began
};

// Image rows consumed by tokens [0, pos) of r.tokens (input images start after the pending tokens).
inline int64_t image_rows_before(const Request& r, int64_t pos) {
    const int64_t offset = static_cast<int64_t>(r.tokens.size() - r.input.tokens.size());
    int64_t rows = 0;
    for (const PreparedImage& img : r.input.images) {
        const int64_t begin = offset + img.first_token, end = begin + img.n_rows;
        rows += std::clamp<int64_t>(pos - begin, 0, end - begin);
    }
    return rows;
}

}  // namespace surf::model::cuda::engine_detail
