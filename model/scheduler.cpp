// The scheduler's sessions, admission, images, cancellation and failures (model/scheduler.h); the step plan
// and the accounting of sampled tokens are in scheduler_steps.cpp.
#include <algorithm>
#include <string>

#include "model/scheduler.h"

namespace surf::model {

namespace {

double since(SchedulerClock::time_point t) {
    return std::chrono::duration<double>(SchedulerClock::now() - t).count();
}

}  // namespace

int32_t IdPool::take() {
    if (!freed_.empty()) {
        const int32_t id = freed_.back();
        freed_.pop_back();
        return id;
    }
    return static_cast<int32_t>(next_++);
}

int64_t image_rows_before(const Request& r, int64_t pos) {
    const int64_t offset = static_cast<int64_t>(r.tokens.size() - r.input.tokens.size());
    int64_t rows = 0;
    for (const PreparedImage& img : r.input.images) {
        const int64_t begin = offset + img.first_token, end = begin + img.n_rows;
        rows += std::clamp<int64_t>(pos - begin, 0, end - begin);
    }
    return rows;
}

Scheduler::Scheduler(const SchedulerOptions& options, StepExecutor& executor, std::function<void()> on_idle)
    : options_(options),
      executor_(executor),
      on_idle_(std::move(on_idle)),
      slots_(options.limits.max_slots),
      pages_(options.limits.kv_pages),
      arena_(options.limits.max_image_rows) {}

int64_t Scheduler::pages_for(int64_t tokens) const {
    return (tokens + options_.limits.page_size - 1) / options_.limits.page_size;
}

// --- sessions -------------------------------------------------------------------------------------------

SessionId Scheduler::open() {
    const SessionId id = next_session_++;
    sessions_[id] = Session{};
    return id;
}

SessionId Scheduler::fork(SessionId from) {
    Session& src = session_ref(from);
    const SessionId id = next_session_++;
    Session copy;
    copy.past = src.past;
    copy.pending = src.pending;
    copy.last_fed_ahead = src.last_fed_ahead;
    copy.last_used = ++clock_;
    if (src.slot >= 0) {
        // A copy of the state and KV on the host, restored on the fork's first request.
        const int64_t used = pages_for(src.past);
        executor_.save(src.slot, std::vector<int32_t>(src.pages.begin(), src.pages.begin() + used),
                       copy.host);
        copy.host.pages = used;
    } else {
        copy.host = src.host;
    }
    sessions_[id] = std::move(copy);
    return id;
}

void Scheduler::close(SessionId id) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    release_resident(it->second);
    sessions_.erase(it);
}

const Session& Scheduler::session(SessionId id) const {
    auto it = sessions_.find(id);
    if (it == sessions_.end())
        throw Error(ErrorKind::kInvalidArgument, "unknown session " + std::to_string(id));
    return it->second;
}

Session& Scheduler::session_ref(SessionId id) {
    return const_cast<Session&>(session(id));
}

void Scheduler::release_resident(Session& s) {
    if (s.slot >= 0) {
        slots_.give(s.slot);
        executor_.release(s.slot);
    }
    for (int32_t p : s.pages) pages_.give(p);
    s.slot = -1;
    s.pages.clear();
}

// Moves the least recently used idle resident session to host memory. False if none.
bool Scheduler::offload_one() {
    Session* victim = nullptr;
    for (auto& [id, s] : sessions_) {
        if (s.busy || s.slot < 0) continue;
        if (!victim || s.last_used < victim->last_used) victim = &s;
    }
    if (!victim) return false;
    const int64_t used = pages_for(victim->past);
    executor_.save(victim->slot, std::vector<int32_t>(victim->pages.begin(), victim->pages.begin() + used),
                   victim->host);
    victim->host.pages = used;
    release_resident(*victim);
    ++counters_.offloads;
    return true;
}

// --- requests -------------------------------------------------------------------------------------------

void Scheduler::submit(std::unique_ptr<Request> req) {
    const SessionId id = req->session;
    const Session& sess = session(id);
    if (sess.broken) {
        throw Error(ErrorKind::kInvalidArgument,
                    "session " + std::to_string(id) +
                        " was cancelled in the middle of its prompt; open a new session");
    }
    const SchedulerLimits& L = options_.limits;
    const int64_t total = sess.past + static_cast<int64_t>(sess.pending.size() + req->input.tokens.size()) +
                          req->options.max_tokens;
    if (total > L.max_context) {
        throw Error(ErrorKind::kResourceExhausted,
                    "session " + std::to_string(id) + " would reach " + std::to_string(total) +
                        " tokens, over the engine's context limit of " + std::to_string(L.max_context));
    }
    if (pages_for(total) > L.kv_pages)
        throw Error(ErrorKind::kResourceExhausted, "the request needs more KV pages than the pool holds");
    int64_t rows = 0;
    for (const PreparedImage& img : req->input.images) rows += img.n_rows;
    if (rows > arena_.rows()) {
        // One region holds a request's image rows; an arena smaller than that would never admit it.
        if (!options_.grow_image_rows) {
            throw Error(ErrorKind::kResourceExhausted, "the request's images take " + std::to_string(rows) +
                                                           " image rows, over the engine's limit of " +
                                                           std::to_string(arena_.rows()));
        }
        arena_.grow(rows - arena_.rows());
    }
    waiting_.push_back(std::move(req));
}

void Scheduler::admit_waiting() {
    const int64_t max_running = options_.limits.max_seqs;
    for (auto it = waiting_.begin();
         it != waiting_.end() && static_cast<int64_t>(running_.size()) < max_running;) {
        Request& req = **it;
        auto sit = sessions_.find(req.session);
        if (sit == sessions_.end()) {
            req.done.set_exception(std::make_exception_ptr(
                Error(ErrorKind::kInvalidArgument, "unknown session " + std::to_string(req.session))));
            it = waiting_.erase(it);
            continue;
        }
        if (sit->second.busy) {  // one request per session at a time, in arrival order
            ++it;
            continue;
        }
        if (!admit(req)) break;
        if (req.tokens.empty()) {
            const bool fed = sit->second.last_fed_ahead;
            unadmit(req);
            req.done.set_exception(std::make_exception_ptr(Error(
                ErrorKind::kInvalidArgument,
                fed ? "generate: nothing to prefill: session " + std::to_string(req.session) +
                          " ended its last request on a stop token that is already in its state "
                          "(CudaEngineOptions::issue_ahead); pass new input to continue"
                    : std::string(
                          "generate: nothing to prefill (empty input on a session with no pending token)"))));
            it = waiting_.erase(it);
            continue;
        }
        try {
            if (!place_images(req)) {
                unadmit(req);
                break;
            }
        } catch (const Error&) {
            drop_vision_jobs(req);
            if (req.image_region >= 0) arena_.unpin(req.image_region, ++clock_);
            unadmit(req);
            req.done.set_exception(std::current_exception());
            it = waiting_.erase(it);
            continue;
        }
        req.result.image_tokens = req.input.image_tokens;
        running_.push_back(std::move(*it));
        it = waiting_.erase(it);
    }
}

// Gives the request's session a slot and pages for its whole request; false if the executor is full of busy
// sessions (the request waits).
bool Scheduler::admit(Request& req) {
    Session& s = session_ref(req.session);
    req.tokens = s.pending;
    req.tokens.insert(req.tokens.end(), req.input.tokens.begin(), req.input.tokens.end());
    const int64_t need_pages =
        pages_for(s.past + static_cast<int64_t>(req.tokens.size()) + req.options.max_tokens);
    const int64_t have_pages = s.slot >= 0 ? static_cast<int64_t>(s.pages.size()) : 0;
    const int64_t extra = std::max<int64_t>(0, need_pages - have_pages);
    const int64_t want_pages = s.slot < 0 ? need_pages : extra;
    s.busy = true;  // not a candidate for offloading while we make room for it
    while ((s.slot < 0 && slots_.free() == 0) || pages_.free() < want_pages) {
        if (!offload_one()) {
            s.busy = false;
            return false;
        }
    }
    if (s.slot < 0) {
        s.slot = slots_.take();
        const bool restore = !s.host.empty();
        for (int64_t i = 0; i < need_pages; ++i) s.pages.push_back(pages_.take());
        if (restore) {
            executor_.load(s.slot, std::vector<int32_t>(s.pages.begin(), s.pages.begin() + s.host.pages),
                           s.host);
            s.host.state.clear();
            s.host.kv.clear();
            ++counters_.restores;
        }
    } else {
        for (int64_t i = 0; i < extra; ++i) s.pages.push_back(pages_.take());
    }
    s.pending.clear();
    s.busy = true;
    s.last_used = ++clock_;
    return true;
}

void Scheduler::unadmit(Request& req) {
    Session& s = session_ref(req.session);
    s.busy = false;
    s.pending = std::vector<int32_t>(
        req.tokens.begin(),
        req.tokens.begin() + static_cast<long>(req.tokens.size() - req.input.tokens.size()));
    if (on_idle_) on_idle_();
}

// Finds arena rows for the request's images (cache hits copied now, misses queued for the vision tower).
// False if the arena is full of pinned regions.
bool Scheduler::place_images(Request& req) {
    if (req.input.images.empty()) return true;
    int64_t rows = 0;
    for (const PreparedImage& img : req.input.images) rows += img.n_rows;
    const std::optional<int64_t> first = arena_.allocate(rows, ++clock_);
    if (!first) return false;
    req.image_region = *first;
    int64_t at = *first;
    for (size_t i = 0; i < req.input.images.size(); ++i) {
        const PreparedImage& img = req.input.images[i];
        const std::optional<int64_t> hit = arena_.find(img.hash);
        if (hit) {
            // The copy is ordered after the encode that wrote the source rows.
            const uint64_t ticket = executor_.copy_image_rows(*hit, img.n_rows, at);
            req.vision_ticket = std::max(req.vision_ticket, ticket);
            ++counters_.image_cache_hits;
        } else {
            // Encoded in a batch with other requests' images; cached once enqueued.
            vision_queue_.push_back({&req, i, at, steps_});
            ++req.pending_images;
            ++counters_.image_cache_misses;
        }
        arena_.place(*first, img.hash, at, hit.has_value());
        at += img.n_rows;
    }
    return true;
}

void Scheduler::drop_vision_jobs(const Request& r) {
    vision_queue_.erase(std::remove_if(vision_queue_.begin(), vision_queue_.end(),
                                       [&](const VisionJob& q) { return q.request == &r; }),
                        vision_queue_.end());
}

// Returns the request's image rows to the arena (once its prompt is fed, or it ended).
void Scheduler::release_images(Request& r) {
    if (r.image_region < 0) return;
    arena_.unpin(r.image_region, ++clock_);
    r.image_region = -1;
}

// A request that ends before feeding anything: the tokens carried over from the last request stay pending.
void Scheduler::restore_pending(Request& r) {
    sessions_.at(r.session).pending.assign(r.tokens.begin(),
                                           r.tokens.end() - static_cast<long>(r.input.tokens.size()));
}

// --- vision ---------------------------------------------------------------------------------------------

bool Scheduler::vision_batch_due() const {
    if (options_.vision_min_tiles <= 1) return true;
    if (vision_queue_.empty()) return false;
    if (!last_step_prefilled_ ||
        steps_ - vision_queue_.front().queued_at_step >= options_.vision_max_wait_steps)
        return true;
    int64_t tiles = 0;
    for (const VisionJob& j : vision_queue_) tiles += j.request->input.images[j.image].tiles.plan.n_tiles;
    return tiles >= options_.vision_min_tiles;
}

VisionBatch Scheduler::take_vision_batch() {
    VisionBatch batch;
    int64_t tiles = 0;
    while (!vision_queue_.empty()) {
        const VisionJob& j = vision_queue_.front();
        const PreparedImage& img = j.request->input.images[j.image];
        if (tiles > 0 && tiles + img.tiles.plan.n_tiles > options_.limits.max_tiles) break;
        tiles += img.tiles.plan.n_tiles;
        batch.jobs.push_back({img.tiles.pixels.data(), img.tiles.plan.n_tiles, j.row});
        batch.taken.push_back(j);
        vision_queue_.pop_front();
    }
    return batch;
}

void Scheduler::vision_done(const VisionBatch& batch, uint64_t ticket, const std::optional<Error>& failure) {
    for (const VisionJob& j : batch.taken) {
        Request& r = *j.request;
        --r.pending_images;
        if (failure) continue;
        r.vision_ticket = std::max(r.vision_ticket, ticket);
        arena_.cache(r.input.images[j.image].hash, j.row);
        counters_.vision_tiles += r.input.images[j.image].tiles.plan.n_tiles;
    }
    if (!failure) {
        ++counters_.vision_batches;
        return;
    }
    // A failed batch fails its requests (and drops their other queued images).
    for (const VisionJob& j : batch.taken) {
        Request& r = *j.request;
        if (r.finished()) continue;
        drop_vision_jobs(r);
        release_images(r);
        restore_pending(r);  // nothing was fed
        end(r, FinishReason::kStop, -1, false, std::make_exception_ptr(*failure));
    }
    finish_done();
}

// --- ending requests ------------------------------------------------------------------------------------

void Scheduler::end(Request& r, FinishReason reason, int32_t last, bool fed, std::exception_ptr error) {
    try {
        r.rules->flush(r.result);
    } catch (...) {
        if (!error) error = std::current_exception();  // on_text threw
    }
    finish(r, reason, last, fed, std::move(error));
}

void Scheduler::finish(Request& r, FinishReason reason, int32_t last, bool fed, std::exception_ptr error) {
    Session& s = sessions_.at(r.session);
    if (last >= 0 && !fed) s.pending = {last};
    s.last_fed_ahead = last >= 0 && fed;
    // Keep the pages that hold the state; return the reserved rest.
    const int64_t keep = pages_for(s.past + 1);
    while (static_cast<int64_t>(s.pages.size()) > keep) {
        pages_.give(s.pages.back());
        s.pages.pop_back();
    }
    s.busy = false;
    s.last_used = ++clock_;
    r.result.finish = reason;
    r.result.session_tokens = s.past + static_cast<int64_t>(s.pending.size());
    r.result.decode_seconds = r.decoding && !r.result.tokens.empty() ? since(r.first_token_time) : 0.0;
    if (error)
        r.done.set_exception(std::move(error));
    else
        r.done.set_value(std::move(r.result));
    r.decoding = false;
    r.prefill_pos = -1;  // marks done
    if (on_idle_) on_idle_();
}

// Moves finished requests out of running_; they stay alive (retired_) until no step in flight names them.
void Scheduler::finish_done() {
    auto done = std::stable_partition(running_.begin(), running_.end(),
                                      [](const std::unique_ptr<Request>& r) { return !r->finished(); });
    for (auto it = done; it != running_.end(); ++it) retired_.push_back(std::move(*it));
    running_.erase(done, running_.end());
}

// --- cancellation ---------------------------------------------------------------------------------------

namespace {

// Polls the request's is_cancelled; one that throws cancels it too, and the call fails with the exception.
bool asks_to_cancel(Request& r) {
    if (!r.options.is_cancelled) return false;
    try {
        return r.options.is_cancelled();
    } catch (...) {
        r.failure = std::current_exception();
        return true;
    }
}

}  // namespace

bool Scheduler::poll_image_cancels() {
    if (!vision_batch_due()) return false;
    bool any = false;
    for (auto& r : running_) {
        if (r->pending_images > 0 && !r->cancelled && asks_to_cancel(*r)) r->cancelled = any = true;
    }
    return any;
}

bool Scheduler::poll_prefill_cancels() {
    bool any = false;
    for (auto& r : running_) {
        if (wants_prefill(*r) && asks_to_cancel(*r)) r->cancelled = any = true;
    }
    return any;
}

void Scheduler::poll_sample_cancels(PlannedStep& step) {
    for (size_t k = 0; k < step.sample_rows.size(); ++k) {
        Request& r = *step.owners[static_cast<size_t>(step.sample_rows[k])];
        if (r.options.max_tokens > 0 && asks_to_cancel(r)) step.cancelled[k] = 1;
    }
}

void Scheduler::finish_cancelled() {
    bool any = false;
    for (auto& r : running_) {
        if (!r->cancelled || r->finished()) continue;
        if (r->decoding) {  // its prompt's last chunk completed after the poll: decode-time cancels apply
            r->cancelled = false;
            continue;
        }
        drop_vision_jobs(*r);
        release_images(*r);
        if (r->prefill_pos == 0)
            restore_pending(*r);
        else
            sessions_.at(r->session).broken = true;  // the state holds part of the prompt
        end(*r, FinishReason::kCancelled, -1, false, r->failure);
        any = true;
    }
    if (any) finish_done();
}

// --- failures and stats ---------------------------------------------------------------------------------

void Scheduler::fail_running(std::exception_ptr error) {
    for (auto& r : running_) {
        if (r->finished()) continue;
        drop_vision_jobs(*r);
        release_images(*r);
        end(*r, FinishReason::kStop, -1, false, error);
    }
    finish_done();
}

void Scheduler::fail_all(const Error& error) {
    for (auto& r : waiting_) r->done.set_exception(std::make_exception_ptr(error));
    for (auto& r : running_) r->done.set_exception(std::make_exception_ptr(error));
    waiting_.clear();
    running_.clear();
    vision_queue_.clear();
}

void Scheduler::fill_stats(EngineStats& s) const {
    s.prefill_tokens = counters_.prefill_tokens;
    s.decode_tokens = counters_.decode_tokens;
    s.image_tokens = counters_.image_tokens;
    s.steps = steps_;
    s.offloads = counters_.offloads;
    s.restores = counters_.restores;
    s.image_cache_hits = counters_.image_cache_hits;
    s.image_cache_misses = counters_.image_cache_misses;
    s.vision_batches = counters_.vision_batches;
    s.vision_tiles = counters_.vision_tiles;
    s.running = static_cast<int64_t>(running_.size());
    s.waiting = static_cast<int64_t>(waiting_.size());
    s.slots_total = slots_.capacity();
    s.slots_used = slots_.used();
    s.kv_pages_total = pages_.capacity();
    s.kv_pages_used = pages_.used();
    s.resident_sessions = s.slots_used;
    s.offloaded_sessions = 0;
    for (const auto& [id, sess] : sessions_) s.offloaded_sessions += (sess.slot < 0 && !sess.host.empty());
}

}  // namespace surf::model
