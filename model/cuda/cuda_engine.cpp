#include "model/cuda/cuda_engine.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/cuda/engine_records.h"
#include "model/cuda/step_sampling.h"
#include "model/engine_input.h"
#include "model/image_arena.h"

namespace surf::model::cuda {

namespace {

using namespace engine_detail;
double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

class CudaEngine final : public Engine {
public:
    CudaEngine(std::unique_ptr<GpuModel> model, std::optional<Tokenizer> tokenizer,
               const CudaEngineOptions& options)
        : model_(std::move(model)),
          tokenizer_(std::move(tokenizer)),
          options_(options),
          image_ids_(resolve_image_tokens(model_->config(), tokenizer_ ? &*tokenizer_ : nullptr)),
          arena_(model_->limits().max_image_rows),
          sampling_(*model_, output_token_mask(model_->config().llm.vocab_size, image_ids_)) {
        const ModelConfig& cfg = model_->config();
        const GpuLimits& L = model_->limits();
        model_->set_image_token_id(image_ids_.context);
        if (cfg.has_vision) tiling_ = tiling_config_from(cfg.image);
        if (tokenizer_) index_ = TokenIndex::build(token_vocabulary(*tokenizer_, cfg.eos_token_ids));
        for (int32_t s = static_cast<int32_t>(L.max_slots) - 1; s >= 0; --s) free_slots_.push_back(s);
        for (int32_t p = static_cast<int32_t>(L.kv_pages) - 1; p >= 0; --p) free_pages_.push_back(p);
        for (cudaEvent_t& e : step_begin_) SURF_CUDA_CHECK(cudaEventCreate(&e));
        if (options_.warm_up) {
            stats_.warm_up_seconds =
                model_->warm_up(std::min(options_.prefill_chunk, L.max_tokens), options_.warm_up_row_buckets);
            stats_.warm_up_notes = model_->attention_split_report();
        }
        if (cfg.has_vision) {
            std::vector<std::vector<int64_t>> passes = options_.warm_up_vision_batches;
            if (passes.empty() && options_.warm_up && options_.warm_up_vision_tile_counts) {
                const int64_t most = std::min(L.max_tiles, L.max_image_rows / cfg.image.tokens_per_tile());
                for (int64_t tiles = 1; tiles <= most; ++tiles)
                    passes.push_back(std::vector<int64_t>(static_cast<size_t>(tiles), 1));
            }
            if (!passes.empty()) stats_.warm_up_seconds += model_->warm_up_vision(passes);
        }
        worker_ = std::thread([this] { loop(); });
    }

    ~CudaEngine() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        worker_.join();
        for (cudaEvent_t e : step_begin_) cudaEventDestroy(e);
    }

    const ModelConfig& config() const override { return model_->config(); }
    const Tokenizer& tokenizer() const override {
        if (!tokenizer_)
            throw Error(ErrorKind::kUnsupported, "this engine (random weights) has no tokenizer");
        return *tokenizer_;
    }
    std::shared_ptr<const TokenIndex> token_index() const override { return index_; }
    std::string backend_name() const override {
        cudaDeviceProp prop{};
        cudaGetDeviceProperties(&prop, options_.device);
        return std::string("cuda:") + std::to_string(options_.device) + " " + prop.name;
    }

    EngineStats stats() const override {
        std::lock_guard<std::mutex> lock(mu_);
        EngineStats s = stats_;
        if (busy_since_) s.busy_seconds += since(*busy_since_);
        s.running = static_cast<int64_t>(running_.size());
        s.waiting = static_cast<int64_t>(waiting_.size());
        s.slots_total = model_->limits().max_slots;
        s.slots_used = s.slots_total - static_cast<int64_t>(free_slots_.size());
        s.kv_pages_total = model_->limits().kv_pages;
        s.kv_pages_used = s.kv_pages_total - static_cast<int64_t>(free_pages_.size());
        s.resident_sessions = s.slots_used;
        s.offloaded_sessions = 0;
        for (const auto& [id, sess] : sessions_)
            s.offloaded_sessions += (sess.slot < 0 && !sess.host_state.empty());
        size_t free_b = 0, total_b = 0;
        DeviceGuard device(options_.device);
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
            s.device_bytes = static_cast<int64_t>(total_b - free_b);
        s.graphs_captured = graphs_captured_;
        s.gemm_shapes_tuned = gemm_tunes_.first;
        s.gemm_tune_seconds = gemm_tunes_.second;
        return s;
    }

    SessionId open_session() override {
        std::lock_guard<std::mutex> lock(mu_);
        const SessionId id = next_session_++;
        sessions_[id] = Session{};
        return id;
    }

    SessionId fork_session(SessionId from) override {
        std::unique_lock<std::mutex> lock(mu_);
        idle_cv_.wait(lock, [&] { return !sessions_.count(from) || !sessions_.at(from).busy; });
        Session& src = session(from);
        const SessionId id = next_session_++;
        Session copy;
        copy.past = src.past;
        copy.pending = src.pending;
        copy.last_fed_ahead = src.last_fed_ahead;
        copy.last_used = ++clock_;
        if (src.slot >= 0) {
            // Fork on the host: a copy of the state and KV, restored on the fork's first request.
            DeviceGuard device(options_.device);
            std::lock_guard<std::mutex> gpu(gpu_mu_);
            model_->save_slot(src.slot, copy.host_state);
            const int64_t used = pages_for(src.past);
            model_->save_pages(std::vector<int32_t>(src.pages.begin(), src.pages.begin() + used),
                               copy.host_kv);
            copy.host_pages = used;
        } else {
            copy.host_state = src.host_state;
            copy.host_kv = src.host_kv;
            copy.host_pages = src.host_pages;
        }
        sessions_[id] = std::move(copy);
        return id;
    }

    void close_session(SessionId id) override {
        std::unique_lock<std::mutex> lock(mu_);
        idle_cv_.wait(lock, [&] { return !sessions_.count(id) || !sessions_.at(id).busy; });
        auto it = sessions_.find(id);
        if (it == sessions_.end()) return;
        release_resident(it->second);
        sessions_.erase(it);
    }

    GenerateResult generate(SessionId id, const std::vector<InputPart>& input,
                            const GenerateOptions& options) override {
        validate(options.sampling);
        if (options.max_tokens < 0) throw Error(ErrorKind::kInvalidArgument, "max_tokens must be ≥ 0");
        if (options.on_logits) {
            throw Error(ErrorKind::kUnsupported,
                        "the CUDA engine does not report logits (GenerateOptions::on_logits): they stay on "
                        "the device; the CPU engine reports them");
        }
        auto req = std::make_unique<Request>();
        req->session = id;
        req->options = options;
        req->started = Clock::now();
        // Tokenizing and tiling run on the caller's thread.
        req->input =
            prepare_input(input, model_->config(), tokenizer_ ? &*tokenizer_ : nullptr, image_ids_, tiling_);
        for (const PreparedImage& img : req->input.images) {
            if (img.tiles.plan.n_tiles > model_->limits().max_tiles) {
                throw Error(ErrorKind::kResourceExhausted, "an image of " +
                                                               std::to_string(img.tiles.plan.n_tiles) +
                                                               " tiles exceeds the engine's limit of " +
                                                               std::to_string(model_->limits().max_tiles));
            }
        }
        req->rules.emplace(options, model_->config().eos_token_ids, index_,
                           tokenizer_ ? &*tokenizer_ : nullptr);
        std::future<GenerateResult> future = req->done.get_future();
        {
            std::lock_guard<std::mutex> lock(mu_);
            Session& sess = session(id);
            const int64_t total = sess.past +
                                  static_cast<int64_t>(sess.pending.size() + req->input.tokens.size()) +
                                  options.max_tokens;
            if (total > model_->limits().max_context) {
                throw Error(ErrorKind::kResourceExhausted,
                            "session " + std::to_string(id) + " would reach " + std::to_string(total) +
                                " tokens, over the engine's context limit of " +
                                std::to_string(model_->limits().max_context));
            }
            if (pages_for(total) > model_->limits().kv_pages)
                throw Error(ErrorKind::kResourceExhausted,
                            "the request needs more KV pages than the pool holds");
            waiting_.push_back(std::move(req));
        }
        cv_.notify_all();
        return future.get();
    }

private:
    int64_t pages_for(int64_t tokens) const {
        return (tokens + model_->limits().page_size - 1) / model_->limits().page_size;
    }

    Session& session(SessionId id) {
        auto it = sessions_.find(id);
        if (it == sessions_.end())
            throw Error(ErrorKind::kInvalidArgument, "unknown session " + std::to_string(id));
        return it->second;
    }

    // --- resources (mu_ held) ---------------------------------------------------------------------

    void release_resident(Session& s) {
        if (s.slot >= 0) free_slots_.push_back(s.slot);
        free_pages_.insert(free_pages_.end(), s.pages.begin(), s.pages.end());
        s.slot = -1;
        s.pages.clear();
    }

    // Moves the least recently used idle resident session to host memory. False if none.
    bool offload_one() {
        Session* victim = nullptr;
        for (auto& [id, s] : sessions_) {
            if (s.busy || s.slot < 0) continue;
            if (!victim || s.last_used < victim->last_used) victim = &s;
        }
        if (!victim) return false;
        {
            std::lock_guard<std::mutex> gpu(gpu_mu_);
            model_->save_slot(victim->slot, victim->host_state);
            const int64_t used = pages_for(victim->past);
            model_->save_pages(std::vector<int32_t>(victim->pages.begin(), victim->pages.begin() + used),
                               victim->host_kv);
            victim->host_pages = used;
        }
        release_resident(*victim);
        ++stats_.offloads;
        return true;
    }

    // Gives the request's session a slot and pages for its whole request; false if the GPU is full of
    // busy sessions (the request waits).
    bool admit(Request& req) {
        Session& s = session(req.session);
        req.tokens = s.pending;
        req.tokens.insert(req.tokens.end(), req.input.tokens.begin(), req.input.tokens.end());
        const int64_t need_pages =
            pages_for(s.past + static_cast<int64_t>(req.tokens.size()) + req.options.max_tokens);
        const int64_t have_pages = s.slot >= 0 ? static_cast<int64_t>(s.pages.size()) : 0;
        const int64_t extra = std::max<int64_t>(0, need_pages - have_pages);
        const int64_t want_pages = s.slot < 0 ? need_pages : extra;
        s.busy = true;  // not a candidate for offloading while we make room for it
        while ((s.slot < 0 && free_slots_.empty()) || static_cast<int64_t>(free_pages_.size()) < want_pages) {
            if (!offload_one()) {
                s.busy = false;
                return false;
            }
        }
        if (s.slot < 0) {
            s.slot = free_slots_.back();
            free_slots_.pop_back();
            const bool restore = !s.host_state.empty();
            for (int64_t i = 0; i < need_pages; ++i) {
                s.pages.push_back(free_pages_.back());
                free_pages_.pop_back();
            }
            if (restore) {
                std::lock_guard<std::mutex> gpu(gpu_mu_);
                model_->load_slot(s.slot, s.host_state);
                model_->load_pages(std::vector<int32_t>(s.pages.begin(), s.pages.begin() + s.host_pages),
                                   s.host_kv);
                s.host_state.clear();
                s.host_kv.clear();
                ++stats_.restores;
            }
        } else {
            for (int64_t i = 0; i < extra; ++i) {
                s.pages.push_back(free_pages_.back());
                free_pages_.pop_back();
            }
        }
        s.pending.clear();
        s.busy = true;
        s.last_used = ++clock_;
        return true;
    }

    // Finds arena rows for the request's images (cache hits copied now, misses queued for the vision
    // tower). False if the arena is full of pinned regions.
    bool place_images(Request& req) {
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
                // The copy is ordered after the encode that wrote the source rows (one vision stream).
                std::lock_guard<std::mutex> gpu(gpu_mu_);
                const uint64_t ticket = model_->put_image_rows(
                    model_->image_rows() + *hit * model_->config().llm.hidden_size, img.n_rows, at);
                req.vision_ticket = std::max(req.vision_ticket, ticket);
                ++stats_.image_cache_hits;
            } else {
                // Encoded in a batch with other requests' images by the step loop; cached once enqueued.
                vision_queue_.push_back({&req, i, at, stats_.steps});
                ++req.pending_images;
                ++stats_.image_cache_misses;
            }
            arena_.place(*first, img.hash, at, hit.has_value());
            at += img.n_rows;
        }
        return true;
    }

    // --- the scheduler ------------------------------------------------------------------------------

    void loop() {
        SURF_CUDA_CHECK(cudaSetDevice(options_.device));
        for (;;) {
            {
                const auto top = Clock::now();
                std::unique_lock<std::mutex> lock(mu_);
                if (busy_since_) stats_.admission_seconds += since(top);  // the wait for the lock, while busy
                if (busy_since_ && waiting_.empty() && running_.empty() && !in_flight_) {
                    stats_.busy_seconds += since(*busy_since_);
                    busy_since_.reset();
                }
                if (!in_flight_) retired_.clear();
                cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty() || in_flight_; });
                if (!busy_since_) busy_since_ = Clock::now();
                if (stop_) {
                    if (in_flight_)
                        cudaStreamSynchronize(model_->stream());  // nothing it wrote is read again
                    in_flight_.reset();
                    fail_all(lock);
                    return;
                }
                const auto admit_start = Clock::now();
                admit_waiting();
                stats_.admission_seconds += since(admit_start);
            }
            try {
                run_once();
            } catch (const Error& e) {
                // A step the model refused (a limit the admission checks missed): its requests fail with the
                // reason instead of the scheduler thread dying (their sessions keep what was fed before).
                if (in_flight_) {
                    std::optional<IssuedStep> st = std::move(in_flight_);
                    in_flight_.reset();
                    try {
                        complete(*st);
                    } catch (const Error&) {
                        cudaStreamSynchronize(model_->stream());
                    }
                }
                std::lock_guard<std::mutex> lock(mu_);
                for (auto& r : running_) {
                    drop_vision_jobs(*r);
                    release_images(*r);
                    finish(*r, FinishReason::kStop, -1, false, e);
                }
                finish_done();
            }
        }
    }

    void fail_all(std::unique_lock<std::mutex>&) {
        for (auto& r : waiting_)
            r->done.set_exception(
                std::make_exception_ptr(Error(ErrorKind::kCancelled, "the engine is shutting down")));
        for (auto& r : running_)
            r->done.set_exception(
                std::make_exception_ptr(Error(ErrorKind::kCancelled, "the engine is shutting down")));
        waiting_.clear();
        running_.clear();
        vision_queue_.clear();
    }

    void admit_waiting() {
        const int64_t max_running = model_->limits().max_seqs;
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
                req.done.set_exception(std::make_exception_ptr(
                    Error(ErrorKind::kInvalidArgument,
                          fed ? "generate: nothing to prefill: session " + std::to_string(req.session) +
                                    " ended its last request on a stop token that is already in its state "
                                    "(CudaEngineOptions::issue_ahead); pass new input to continue"
                              : std::string("generate: nothing to prefill"))));
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
                if (req.image_region >= 0) unpin(req.image_region);
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

    void unadmit(Request& req) {
        Session& s = session(req.session);
        s.busy = false;
        s.pending = std::vector<int32_t>(
            req.tokens.begin(),
            req.tokens.begin() + static_cast<long>(req.tokens.size() - req.input.tokens.size()));
        idle_cv_.notify_all();
    }

    // One turn of the scheduler: the queued images to the vision tower, the next step issued (before the step
    // in flight is completed where CudaEngineOptions::issue_ahead allows), then the step in flight completed.
    void run_once() {
        // Images first: a step issued now may prefill them (it waits for the vision stream; the tower
        // overlaps the step in flight).
        if (vision_batch_due(last_step_prefilled_)) encode_queued_images();
        if (in_flight_ && !can_issue_ahead()) complete_in_flight();
        std::optional<IssuedStep> next = issue_step();
        if (in_flight_) complete_in_flight();
        in_flight_ = std::move(next);
        if (in_flight_ || running_.empty()) return;
        // Nothing issued and nothing in flight: every running request waits for its images.
        const auto t0 = Clock::now();
        encode_queued_images();
        std::lock_guard<std::mutex> lock(mu_);
        stats_.image_wait_seconds += since(t0);
    }

    // Whether the next step may be planned before the step in flight returns its tokens: none of that step's
    // sampled rows has a constraint (its next mask needs the token).
    bool can_issue_ahead() const {
        if (!options_.issue_ahead) return false;
        for (int64_t i : in_flight_->sample_rows) {
            if (in_flight_->owners[static_cast<size_t>(i)]->rules->constrained()) return false;
        }
        return true;
    }

    void complete_in_flight() {
        std::optional<IssuedStep> st = std::move(in_flight_);
        in_flight_.reset();
        complete(*st);
    }

    // Plans one batched step over the running requests (decode rows first, the model's order, then prefill
    // chunks within the token budget), issues its forward and sampling, and accounts what it feeds. With a
    // step in flight, a request whose newest token that step is still drawing decodes it from the device,
    // unless it reaches max_tokens there. Nothing to run: nullopt.
    std::optional<IssuedStep> issue_step() {
        IssuedStep st;
        st.begin = Clock::now();
        const GpuLimits& L = model_->limits();
        const uint64_t ahead_of = in_flight_ ? in_flight_->id : 0;
        std::vector<SeqStep> decode_rows, prefill_rows;
        std::vector<Request*> decode_owners, prefill_owners;
        std::vector<uint64_t> decode_pos,
            prefill_pos;             // sampling counters: position of the sampled-from token
        uint64_t vision_ticket = 0;  // the vision work the prefill rows' images need
        {
            std::lock_guard<std::mutex> lock(mu_);
            int64_t budget = std::min(options_.prefill_chunk, L.max_tokens);
            for (auto& r : running_) {
                if (!r->decoding) continue;
                const Session& s = sessions_.at(r->session);
                SeqStep q;
                q.slot = s.slot, q.past = s.past, q.pages = s.pages;
                if (ahead_of != 0 && r->sampled_in_step == ahead_of) {
                    if (static_cast<int64_t>(r->result.tokens.size()) + 1 >= r->options.max_tokens)
                        continue;  // its last token
                    q.tokens = {0}, q.token_from = r->sampled_index;
                } else {
                    q.tokens = {r->last_token};
                }
                decode_pos.push_back(static_cast<uint64_t>(s.past));
                decode_rows.push_back(std::move(q));
                decode_owners.push_back(r.get());
            }
            // Decode rows count against the chunk (so a step's GEMMs keep one shape while prompts are
            // prefilled), but prefill keeps at least a quarter of it.
            const int64_t n_dec_rows = static_cast<int64_t>(decode_rows.size());
            budget = std::min(std::max(budget - n_dec_rows, budget / 4), L.max_tokens - n_dec_rows);
            for (auto& r : running_) {
                if (r->decoding || r->pending_images > 0 || budget <= 0 ||
                    static_cast<int64_t>(decode_rows.size() + prefill_rows.size()) >= L.max_seqs) {
                    continue;
                }
                vision_ticket = std::max(vision_ticket, r->vision_ticket);
                const Session& s = sessions_.at(r->session);
                const int64_t n = std::min(static_cast<int64_t>(r->tokens.size()) - r->prefill_pos, budget);
                SeqStep q;
                q.slot = s.slot, q.past = s.past, q.pages = s.pages;
                q.tokens.assign(r->tokens.begin() + r->prefill_pos, r->tokens.begin() + r->prefill_pos + n);
                if (r->image_region >= 0)
                    q.image_row = r->image_region + image_rows_before(*r, r->prefill_pos);
                budget -= n;
                // A one-token chunk on a sequence with state runs as a decode row.
                const bool as_decode = q.is_decode();
                (as_decode ? decode_pos : prefill_pos).push_back(static_cast<uint64_t>(s.past + n - 1));
                (as_decode ? decode_rows : prefill_rows).push_back(std::move(q));
                (as_decode ? decode_owners : prefill_owners).push_back(r.get());
            }
        }
        st.n_dec = static_cast<int64_t>(decode_rows.size());
        std::vector<SeqStep> seqs = std::move(decode_rows);
        seqs.insert(seqs.end(), std::make_move_iterator(prefill_rows.begin()),
                    std::make_move_iterator(prefill_rows.end()));
        st.owners = std::move(decode_owners);
        st.owners.insert(st.owners.end(), prefill_owners.begin(), prefill_owners.end());
        std::vector<uint64_t> positions = std::move(decode_pos);
        positions.insert(positions.end(), prefill_pos.begin(), prefill_pos.end());
        if (seqs.empty()) return std::nullopt;
        // Rows that sample: decode rows, and prefill rows whose chunk ends the prompt.
        for (size_t i = 0; i < seqs.size(); ++i) {
            const Request& r = *st.owners[i];
            const int64_t n = static_cast<int64_t>(seqs[i].tokens.size());
            st.fed.push_back(n);
            st.prefill.push_back(!r.decoding);
            if (r.decoding || r.prefill_pos + n == static_cast<int64_t>(r.tokens.size()))
                st.sample_rows.push_back(static_cast<int64_t>(i));
        }
        st.decode_only =
            std::all_of(st.owners.begin(), st.owners.end(), [](const Request* r) { return r->decoding; });
        st.set = static_cast<int>(next_step_id_ % StepSampling::kSets);
        st.forced = sampling_.stage(st.set, st.owners, positions, st.sample_rows);

        const auto issue_start = Clock::now();
        std::pair<int64_t, double> tunes;
        {
            std::lock_guard<std::mutex> gpu(gpu_mu_);
            const int64_t launches = model_->decode_graph_launches();
            SURF_CUDA_CHECK(cudaEventRecord(step_begin_[st.set], model_->stream()));
            model_->forward(seqs, vision_ticket);
            st.graph = model_->decode_graph_launches() > launches;
            graphs_captured_ = model_->decode_graphs_captured();
            tunes = model_->gemm_tune_totals();
            if (!st.sample_rows.empty()) sampling_.enqueue(st.set, st.sample_rows);
        }
        // Issued: what the step feeds is in the sessions now (a step planned next starts after it).
        std::lock_guard<std::mutex> lock(mu_);
        st.id = next_step_id_++;
        stats_.plan_seconds += std::chrono::duration<double>(issue_start - st.begin).count();
        stats_.issue_seconds += since(issue_start);
        gemm_tunes_ = tunes;
        last_step_prefilled_ = !prefill_owners.empty();
        size_t k = 0;
        for (size_t i = 0; i < seqs.size(); ++i) {
            Request& r = *st.owners[i];
            Session& s = sessions_.at(r.session);
            const int64_t n = st.fed[i];
            s.past += n;
            if (seqs[i].token_from >= 0) r.fed_in_step = st.id;
            if (st.prefill[i]) {
                r.prefill_pos += n;
                stats_.prefill_tokens += n;
                r.result.prefill_tokens += n;
            } else {
                ++stats_.decode_tokens;
                st.decode_context += s.past;
            }
            if (k < st.sample_rows.size() && st.sample_rows[k] == static_cast<int64_t>(i)) {
                r.decoding = true;
                r.sampled_in_step = st.id;
                r.sampled_index = static_cast<int32_t>(k);
                ++k;
            }
        }
        return st;
    }

    // Reads a step's sampled tokens (waiting for them) and accounts them: tokens appended, requests finished.
    void complete(const IssuedStep& st) {
        std::vector<int32_t> sampled;
        if (!st.sample_rows.empty()) sampled = sampling_.wait(st.set, st.forced);
        std::lock_guard<std::mutex> lock(mu_);
        const auto results_start = Clock::now();
        // The step's wall time: from its planning, or from the previous step's end where it was issued ahead.
        const double dt =
            std::chrono::duration<double>(results_start - std::max(st.begin, last_step_end_)).count();
        last_step_end_ = results_start;
        ++stats_.steps;
        stats_.graph_steps += st.graph ? 1 : 0;
        stats_.step_seconds += dt;
        // A step that sampled ends with its tokens' copy (every decode row samples): the language-model
        // stream's span; the vision tower's stream is not in it.
        float gpu_ms = 0;
        if (!st.sample_rows.empty()) {
            SURF_CUDA_CHECK(cudaEventElapsedTime(&gpu_ms, step_begin_[st.set], sampling_.end_event(st.set)));
            stats_.sampling_gpu_seconds += sampling_.sampling_ms(st.set) * 1e-3;
            ++stats_.sampled_steps;
        }
        if (st.decode_only) {
            stats_.decode_only_gpu_seconds += gpu_ms * 1e-3;
            ++stats_.decode_only_steps;
            stats_.decode_only_seconds += dt;
            stats_.decode_only_rows += st.n_dec;
            stats_.decode_only_context += st.decode_context;
        } else if (!st.sample_rows.empty()) {
            stats_.mixed_sampled_gpu_seconds += gpu_ms * 1e-3;
            ++stats_.mixed_sampled_steps;
            stats_.mixed_sampled_seconds += dt;
        }
        const size_t retired_before = retired_.size();
        for (size_t k = 0; k < st.sample_rows.size(); ++k) {
            const size_t i = static_cast<size_t>(st.sample_rows[k]);
            Request& r = *st.owners[i];
            // Finished while this step was in flight (it stopped on the token this row fed): what it drew is
            // dropped.
            if (r.prefill_pos < 0) continue;
            if (st.prefill[i]) {
                r.result.prefill_seconds = since(r.started);
                stats_.image_tokens += r.input.image_tokens;
                release_images(r);
            }
            accept_token(r, sampled[k], r.fed_in_step > st.id);
        }
        finish_done();
        // Requests retired before this step completed are in no step still in flight.
        retired_.erase(retired_.begin(), retired_.begin() + static_cast<long>(retired_before));
        stats_.results_seconds += since(results_start);
    }

    // Whether the queued images go through the vision tower after this step: always when batching across
    // steps is off; else once they add up to vision_min_tiles tiles, once the oldest has waited
    // vision_max_wait_steps steps, or when the step prefilled nothing (holding images back would stall).
    bool vision_batch_due(bool step_had_prefill) {
        if (options_.vision_min_tiles <= 1) return true;
        std::lock_guard<std::mutex> lock(mu_);
        if (vision_queue_.empty()) return false;
        if (!step_had_prefill ||
            stats_.steps - vision_queue_.front().queued_at_step >= options_.vision_max_wait_steps)
            return true;
        int64_t tiles = 0;
        for (const VisionJob& j : vision_queue_) tiles += j.request->input.images[j.image].tiles.plan.n_tiles;
        return tiles >= options_.vision_min_tiles;
    }

    // One batch of queued images (FIFO, up to the model's tile limit) through the vision tower. Runs on
    // the scheduler thread; the requests stay in running_ while queued, so their pixels stay alive.
    void encode_queued_images() {
        std::vector<ImageJob> jobs;
        std::vector<VisionJob> taken;
        {
            std::lock_guard<std::mutex> lock(mu_);
            int64_t tiles = 0;
            while (!vision_queue_.empty()) {
                const VisionJob& j = vision_queue_.front();
                const PreparedImage& img = j.request->input.images[j.image];
                if (tiles > 0 && tiles + img.tiles.plan.n_tiles > model_->limits().max_tiles) break;
                tiles += img.tiles.plan.n_tiles;
                jobs.push_back({img.tiles.pixels.data(), img.tiles.plan.n_tiles, j.row});
                taken.push_back(j);
                vision_queue_.pop_front();
            }
        }
        if (jobs.empty()) return;
        std::optional<Error> failure;
        uint64_t ticket = 0;
        try {
            std::lock_guard<std::mutex> gpu(gpu_mu_);
            ticket = model_->encode_images(jobs);
        } catch (const Error& e) {
            failure = e;
        }
        std::lock_guard<std::mutex> lock(mu_);
        for (const VisionJob& j : taken) {
            Request& r = *j.request;
            --r.pending_images;
            if (failure) continue;
            r.vision_ticket = std::max(r.vision_ticket, ticket);
            arena_.cache(r.input.images[j.image].hash, j.row);
            stats_.vision_tiles += r.input.images[j.image].tiles.plan.n_tiles;
        }
        if (!failure) {
            ++stats_.vision_batches;
            return;
        }
        // A failed batch fails its requests (and drops their other queued images).
        for (const VisionJob& j : taken) {
            Request& r = *j.request;
            if (r.prefill_pos < 0) continue;
            drop_vision_jobs(r);
            release_images(r);
            // Nothing was fed: the tokens carried over from the last request stay pending.
            sessions_.at(r.session).pending.assign(r.tokens.begin(),
                                                   r.tokens.end() - static_cast<long>(r.input.tokens.size()));
            finish(r, FinishReason::kStop, -1, false, *failure);
        }
        finish_done();
    }

    void drop_vision_jobs(const Request& r) {
        vision_queue_.erase(std::remove_if(vision_queue_.begin(), vision_queue_.end(),
                                           [&](const VisionJob& q) { return q.request == &r; }),
                            vision_queue_.end());
    }

    void unpin(int64_t region) { arena_.unpin(region, ++clock_); }

    // mu_ held. Records a sampled token (DecodeRules); finishes the request when the rules end its reply.
    // `fed`: a step issued ahead already fed the token (SeqStep::token_from), so a finish leaves nothing
    // pending.
    void accept_token(Request& r, int32_t token, bool fed) {
        if (r.result.tokens.empty()) r.first_token_time = Clock::now();
        DecodeRules::Outcome out = r.rules->accept(token, r.result);
        if (out.done) {
            finish(r, out.finish, out.pending, fed, std::move(out.error));
            return;
        }
        r.last_token = token;
    }

    // mu_ held. `last`: the request's last sampled token, pending in its session unless `fed` (already fed).
    void finish(Request& r, FinishReason reason, int32_t last, bool fed,
                std::optional<Error> error = std::nullopt) {
        Session& s = sessions_.at(r.session);
        if (last >= 0 && !fed) s.pending = {last};
        s.last_fed_ahead = last >= 0 && fed;
        r.rules->flush(r.result);
        // Keep the pages that hold the state; return the reserved rest.
        const int64_t keep = pages_for(s.past + 1);
        while (static_cast<int64_t>(s.pages.size()) > keep) {
            free_pages_.push_back(s.pages.back());
            s.pages.pop_back();
        }
        s.busy = false;
        s.last_used = ++clock_;
        r.result.finish = reason;
        r.result.session_tokens = s.past + static_cast<int64_t>(s.pending.size());
        r.result.decode_seconds = r.decoding && !r.result.tokens.empty() ? since(r.first_token_time) : 0.0;
        if (error)
            r.done.set_exception(std::make_exception_ptr(*error));
        else
            r.done.set_value(std::move(r.result));
        r.decoding = false;
        r.prefill_pos = -1;  // marks done
        idle_cv_.notify_all();
    }

    // Moves finished requests out of running_; they stay alive (retired_) until no step in flight names them.
    void finish_done() {
        auto done =
            std::stable_partition(running_.begin(), running_.end(),
                                  [](const std::unique_ptr<Request>& r) { return r->prefill_pos >= 0; });
        for (auto it = done; it != running_.end(); ++it) retired_.push_back(std::move(*it));
        running_.erase(done, running_.end());
    }

    // Returns the request's image rows to the arena (once its prompt is fed, or it failed).
    void release_images(Request& r) {
        if (r.image_region < 0) return;
        unpin(r.image_region);
        r.image_region = -1;
    }

    std::unique_ptr<GpuModel> model_;
    std::optional<Tokenizer> tokenizer_;
    CudaEngineOptions options_;
    std::shared_ptr<const TokenIndex> index_;
    ImageTokenIds image_ids_;
    TilingConfig tiling_;

    mutable std::mutex mu_;  // sessions, queues, resources, stats
    std::mutex gpu_mu_;      // the model's stream and buffers
    std::condition_variable cv_, idle_cv_;
    bool stop_ = false;
    std::thread worker_;
    std::map<SessionId, Session> sessions_;
    SessionId next_session_ = 1;
    uint64_t clock_ = 0;
    std::deque<std::unique_ptr<Request>> waiting_;
    std::vector<std::unique_ptr<Request>> running_;
    std::vector<int32_t> free_slots_, free_pages_;
    ImageArena arena_;                    // the model's image rows and the embedding cache
    std::deque<VisionJob> vision_queue_;  // images of admitted requests not yet encoded
    int64_t graphs_captured_ = 0;
    std::pair<int64_t, double> gemm_tunes_{0, 0.0};  // GEMM shapes tuned so far and the seconds it took
    std::optional<Clock::time_point>
        busy_since_;  // start of the current busy period (EngineStats::busy_seconds)
    StepSampling sampling_;
    cudaEvent_t step_begin_[StepSampling::kSets] =
        {};                                // a step's GPU span starts here (ends with its sampling)
    std::optional<IssuedStep> in_flight_;  // issued, tokens not read yet
    uint64_t next_step_id_ = 1;
    bool last_step_prefilled_ = false;  // (vision batching across steps)
    Clock::time_point last_step_end_{};
    std::vector<std::unique_ptr<Request>> retired_;  // finished, possibly still named by the step in flight
    EngineStats stats_;
};

}  // namespace

std::unique_ptr<Engine> open_cuda_engine(const std::string& model_dir, const CudaEngineOptions& options) {
    DeviceGuard device(options.device);
    auto model = GpuModel::load(model_dir, options.limits);
    return std::make_unique<CudaEngine>(std::move(model), load_model_tokenizer(model_dir), options);
}

void register_backend() {
    register_engine_backend("cuda", [](const std::string& model_dir, int device, WarmUp warm_up) {
        // The scheduler offloads sessions beyond its resident slots, so any concurrency fits the defaults.
        CudaEngineOptions options;
        options.device = device;
        options.warm_up_vision_tile_counts = warm_up == WarmUp::kServing;
        return open_cuda_engine(model_dir, options);
    });
}

std::unique_ptr<Engine> open_random_cuda_engine(const ModelConfig& cfg, const CudaEngineOptions& options,
                                                uint64_t seed) {
    DeviceGuard device(options.device);
    auto model = GpuModel::random(cfg, options.limits, seed);
    return std::make_unique<CudaEngine>(std::move(model), std::nullopt, options);
}

}  // namespace surf::model::cuda
