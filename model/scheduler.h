// The backend-neutral scheduler both engines run on: the session table (where each session's state lives: a
// state slot and KV pages in the executor, or host copies when offloaded; its pending token), the slot and
// page pools with LRU offload when they are full, admission of waiting requests, the image arena and the
// queue of images for the vision tower, the plan of each batched step (decode rows first, then prefill chunks
// within a token budget, prompts waiting for their images left out), which steps may be issued before the
// previous step's tokens are back, and the accounting of sampled tokens through DecodeRules. The executor
// (model/executor.h) runs what it plans; the engine's thread drives the steps.
//
// Not thread-safe: the engine holds its lock around every call, except where a function says that it touches
// only the running requests, which belong to the thread that drives steps (the CPU engine calls those without
// the lock so that a request's callbacks never run under it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/error.h"
#include "model/decode_rules.h"
#include "model/engine.h"
#include "model/engine_input.h"
#include "model/executor.h"
#include "model/image_arena.h"

namespace surf::model {

using SchedulerClock = std::chrono::steady_clock;

// A session: where its state lives (a slot and KV pages, or host copies when offloaded) and how many tokens
// it holds.
struct Session {
    int32_t slot = -1;             // -1: not resident
    std::vector<int32_t> pages;    // KV pages (resident) covering `past` tokens (+ reserved room while busy)
    int64_t past = 0;              // tokens fed through the model
    std::vector<int32_t> pending;  // sampled, not yet fed
    bool last_fed_ahead = false;   // its last request ended on a token a step issued ahead had already fed
    HostCopy host;                 // offloaded copies
    bool busy = false;             // a request is admitted on it
    bool broken = false;           // a request was cancelled inside its prompt: the state holds part of it
    uint64_t last_used = 0;
};

struct Request;

// An image of an admitted request waiting for the vision tower, and the arena row it goes to.
struct VisionJob {
    Request* request = nullptr;
    size_t image = 0;
    int64_t row = 0;
    int64_t queued_at_step = 0;  // steps completed when it was queued (vision batching across steps)
};

struct Request {
    SessionId session = 0;
    PreparedInput input;
    std::vector<int32_t> tokens;  // pending + input tokens to prefill
    GenerateOptions options;
    int64_t prefill_pos = 0;     // tokens of `tokens` already fed; −1 once finished
    int64_t image_region = -1;   // its region of the image arena (first row), -1 if no images
    int pending_images = 0;      // images still queued for the vision tower (no prefill until 0)
    uint64_t vision_ticket = 0;  // the vision work its image rows come from (the forward waits for it)
    bool decoding = false;    // its prompt is fed: every step it is in samples (set when that step is issued)
    int32_t last_token = -1;  // to feed on the next decode step (once the host has it)
    // The step whose sampler draws its newest token and that token's index among the step's sampled tokens:
    // a step issued before that one's tokens reach the host feeds it from the device.
    uint64_t sampled_in_step = 0;
    int32_t sampled_index = -1;
    uint64_t fed_in_step = 0;          // the last step that fed a token from the device (SeqStep::token_from)
    std::optional<DecodeRules> rules;  // stop ids, the schema's constraint, streamed text (set before submit)
    bool cancelled = false;            // its is_cancelled said so before a prompt chunk or an image
    std::exception_ptr failure;        // one of its callbacks threw: the request fails with it
    std::optional<DecodeRules::Outcome> ended;  // its reply ended (accept_tokens); finished by settle
    GenerateResult result;
    SchedulerClock::time_point started, first_token_time;
    std::promise<GenerateResult> done;

    bool finished() const { return prefill_pos < 0; }
};

// One batched step as planned: rows of the running requests (decode rows first, then prefill chunks) and
// which of them sample.
struct PlannedStep {
    uint64_t id = 0;                   // ascending from 1
    std::vector<SeqStep> rows;         // what the executor runs
    std::vector<Request*> owners;      // per row
    std::vector<uint64_t> positions;   // per row: index in its sequence of the token its logits come from
    std::vector<int64_t> fed;          // per row: tokens it feeds
    std::vector<char> prefill;         // per row: a prefill chunk (else a decode row)
    std::vector<int64_t> sample_rows;  // rows that sample, ascending
    std::vector<char> cancelled;       // per sampled row: its request was cancelled before sampling
    int64_t n_dec = 0;                 // decode rows (the first n_dec rows)
    int64_t decode_context = 0;        // KV tokens the decode rows read (set when issued)
    bool decode_only = false;
    uint64_t vision_ticket = 0;  // the vision work the prefill rows' images need
};

// Images taken from the queue for one pass of the vision tower.
struct VisionBatch {
    std::vector<ImageJob> jobs;
    std::vector<VisionJob> taken;
};

// The executor's capacities the scheduler plans within.
struct SchedulerLimits {
    int64_t max_tokens = 4096;      // tokens per step (decode rows + prefill rows)
    int64_t max_seqs = 128;         // sequences per step, and requests running at once
    int64_t max_slots = 128;        // state slots (sessions resident in the executor)
    int64_t page_size = 16;         // KV tokens per page
    int64_t kv_pages = 8192;        // pages in the pool
    int64_t max_context = 32768;    // tokens per session
    int64_t max_image_rows = 8192;  // rows of the image-row buffer
    int64_t max_tiles = 32;         // tiles per vision pass
};

struct SchedulerOptions {
    SchedulerLimits limits;
    // Tokens per step: decode rows count against it, prefill keeps at least a quarter (within
    // limits.max_tokens). With fixed_chunks, each prompt instead takes a chunk of exactly this many tokens
    // (its last chunk: what is left) every step, whatever else runs, so that a request's chunks, and with a
    // backend that runs rows one by one its results, never depend on other requests.
    int64_t prefill_chunk = 1024;
    bool fixed_chunks = false;
    // Steps may be planned before the previous step's tokens reach the host (CudaEngineOptions::issue_ahead).
    bool issue_ahead = false;
    // Vision batches across steps (CudaEngineOptions::vision_min_tiles, vision_max_wait_steps).
    int64_t vision_min_tiles = 0;
    int64_t vision_max_wait_steps = 2;
    // A request whose images need more rows than the image arena holds grows it (a backend that keeps image
    // rows in host memory); otherwise the request fails.
    bool grow_image_rows = false;
};

// Ids 0 … capacity − 1, handed out lowest first, freed ones reused last in first out. Ids never handed out
// are not stored, so a pool may be as large as int32 allows (the CPU engine's slots and pages).
class IdPool {
public:
    explicit IdPool(int64_t capacity) : capacity_(capacity) {}
    int64_t capacity() const { return capacity_; }
    int64_t free() const { return capacity_ - next_ + static_cast<int64_t>(freed_.size()); }
    int64_t used() const { return capacity_ - free(); }
    int32_t take();  // free() > 0
    void give(int32_t id) { freed_.push_back(id); }

private:
    int64_t capacity_;
    int64_t next_ = 0;
    std::vector<int32_t> freed_;
};

class Scheduler {
public:
    // `on_idle` runs (under the engine's lock) whenever a session's request ends.
    Scheduler(const SchedulerOptions& options, StepExecutor& executor, std::function<void()> on_idle = {});

    const SchedulerOptions& options() const { return options_; }
    int64_t pages_for(int64_t tokens) const;

    // --- sessions ---
    SessionId open();
    // A copy of `from` (not busy) held on the host, restored on the fork's first request. Throws
    // kInvalidArgument for an unknown id.
    SessionId fork(SessionId from);
    // Frees an idle session's slot and pages; an unknown id is ignored.
    void close(SessionId id);
    const Session& session(SessionId id) const;  // throws kInvalidArgument for an unknown id
    bool known(SessionId id) const { return sessions_.count(id) > 0; }

    // --- requests ---
    // Queues a request (its session, options, rules, input and `started` set). Throws surf::Error when its
    // session is unknown or broken, or it would not fit the context, the page pool or the image arena.
    void submit(std::unique_ptr<Request> request);
    bool has_work() const { return !waiting_.empty() || !running_.empty(); }
    bool has_running() const { return !running_.empty(); }
    // Moves waiting requests, in arrival order and one per session at a time, to running while slots, pages
    // and image rows allow (offloading idle sessions to make room). Fails requests that cannot run.
    void admit_waiting();

    // --- vision ---
    // Whether the queued images go through the vision tower now: always when batching across steps is off;
    // else once they add up to vision_min_tiles tiles, once the oldest has waited vision_max_wait_steps
    // steps, or when the last step prefilled nothing (holding images back would stall).
    bool vision_batch_due() const;
    // One pass's worth of queued images (FIFO, up to limits.max_tiles tiles; at least one image).
    VisionBatch take_vision_batch();
    // After the executor encoded `batch` (ticket) or refused it (failure: its requests fail).
    void vision_done(const VisionBatch& batch, uint64_t ticket, const std::optional<Error>& failure);

    // --- steps ---
    // Whether the next step may be planned before `in_flight` returns its tokens: issue_ahead is on and none
    // of its sampled rows has a constraint (the next mask needs the token).
    bool can_issue_ahead(const PlannedStep& in_flight) const;
    // The next step over the running requests, or nullopt when no request has anything to run. With a step
    // in flight, a request whose newest token that step is still drawing decodes it from the device
    // (SeqStep::token_from), unless that token is its last.
    std::optional<PlannedStep> plan_step(const PlannedStep* in_flight);
    // Once the executor has the step: what it feeds is in the sessions (a step planned next starts after it).
    void mark_issued(PlannedStep& step);
    // The step's sampled tokens (one per sample row) through each request's DecodeRules: tokens appended,
    // text streamed, replies that end marked. Touches only the step's requests.
    void accept_tokens(const PlannedStep& step, const std::vector<int32_t>& tokens);
    // After accept_tokens: counts the step, finishes the requests whose reply ended, frees their image rows.
    void settle(const PlannedStep& step);
    // Finished requests stay alive while a step in flight may name them; with nothing in flight they go.
    void forget_retired() { retired_.clear(); }
    int64_t steps() const { return steps_; }
    bool last_step_prefilled() const { return last_step_prefilled_; }

    // --- cancellation (GenerateOptions::is_cancelled; both engines poll) ---
    // Each touches only the running requests. Polls the requests whose images the next vision pass takes,
    // then those the next step gives a prompt chunk: a cancelled one is marked, and finishes at the next
    // finish_cancelled (plan_step calls it). True when one was marked: an engine with a step in flight
    // completes that step first, since finishing a request releases its images and pages.
    bool poll_image_cancels();
    bool poll_prefill_cancels();
    // After the step's forward, before its sampling: a sampled row whose request is cancelled samples
    // nothing and ends the reply there (the tokens fed so far stay in the session).
    void poll_sample_cancels(PlannedStep& step);
    // Finishes the requests marked cancelled: one cancelled inside its prompt leaves its session broken.
    void finish_cancelled();

    // --- failures ---
    // Every running request fails with `error` (a step the executor refused).
    void fail_running(std::exception_ptr error);
    // Every waiting and running request fails with `error` (the engine is shutting down).
    void fail_all(const Error& error);

    // Running, waiting, sessions, slots, pages and the scheduler's counters into `stats`.
    void fill_stats(EngineStats& stats) const;

private:
    Session& session_ref(SessionId id);
    void release_resident(Session& s);
    bool offload_one();
    bool admit(Request& req);
    void unadmit(Request& req);
    bool place_images(Request& req);
    void drop_vision_jobs(const Request& r);
    void release_images(Request& r);
    void restore_pending(Request& r);
    // Ends a request: the rules' text flushed, then finish().
    void end(Request& r, FinishReason reason, int32_t last, bool fed, std::exception_ptr error = nullptr);
    // `last`: the request's last sampled token, pending in its session unless `fed` (already fed). With
    // `error`, the call fails with it.
    void finish(Request& r, FinishReason reason, int32_t last, bool fed, std::exception_ptr error = nullptr);
    void finish_done();
    bool wants_prefill(const Request& r) const {
        return !r.decoding && r.pending_images == 0 && !r.cancelled;
    }

    SchedulerOptions options_;
    StepExecutor& executor_;
    std::function<void()> on_idle_;
    std::map<SessionId, Session> sessions_;
    SessionId next_session_ = 1;
    uint64_t clock_ = 0;  // orders use: sessions (offload) and image regions (eviction)
    std::deque<std::unique_ptr<Request>> waiting_;
    std::vector<std::unique_ptr<Request>> running_;
    std::vector<std::unique_ptr<Request>> retired_;  // finished, possibly still named by a step in flight
    IdPool slots_, pages_;
    ImageArena arena_;
    std::deque<VisionJob> vision_queue_;  // images of admitted requests not yet encoded
    uint64_t next_step_id_ = 1;
    int64_t steps_ = 0;
    bool last_step_prefilled_ = false;
    EngineStats counters_;  // prefill/decode/image tokens, offloads, restores, image cache, vision passes
};

// Image rows consumed by tokens [0, pos) of r.tokens (input images start after the pending tokens).
int64_t image_rows_before(const Request& r, int64_t pos);

}  // namespace surf::model
