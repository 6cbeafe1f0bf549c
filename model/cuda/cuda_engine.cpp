#include "model/cuda/cuda_engine.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"
#include "model/cuda/step_sampling.h"
#include "model/engine_input.h"
#include "model/scheduler.h"

namespace surf::model::cuda {

namespace {

using namespace engine_detail;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// The scheduler's plan within the GpuModel's buffers and the engine's options.
SchedulerOptions scheduler_options(const CudaEngineOptions& o, const GpuLimits& L) {
    SchedulerOptions s;
    s.limits.max_tokens = L.max_tokens, s.limits.max_seqs = L.max_seqs, s.limits.max_slots = L.max_slots;
    s.limits.page_size = L.page_size, s.limits.kv_pages = L.kv_pages, s.limits.max_context = L.max_context;
    s.limits.max_image_rows = L.max_image_rows, s.limits.max_tiles = L.max_tiles;
    s.prefill_chunk = o.prefill_chunk;
    s.issue_ahead = o.issue_ahead;
    s.vision_min_tiles = o.vision_min_tiles, s.vision_max_wait_steps = o.vision_max_wait_steps;
    return s;
}

// A step issued on the GPU whose sampled tokens the host has not read yet.
struct IssuedStep {
    PlannedStep plan;
    bool graph = false;       // replayed from a decode graph
    Clock::time_point begin;  // when its planning began
};

// The engine is the scheduler's executor: the GpuModel's forward with sampling on the GPU (StepSampling),
// the vision tower, and state slots and KV pages saved to and loaded from host memory, each under gpu_mu_.
class CudaEngine final : public Engine, private StepExecutor {
public:
    CudaEngine(std::unique_ptr<GpuModel> model, std::optional<Tokenizer> tokenizer,
               const CudaEngineOptions& options)
        : model_(std::move(model)),
          tokenizer_(std::move(tokenizer)),
          options_(options),
          image_ids_(resolve_image_tokens(model_->config(), tokenizer_ ? &*tokenizer_ : nullptr)),
          scheduler_(scheduler_options(options, model_->limits()), *this, [this] { idle_cv_.notify_all(); }),
          sampling_(*model_, output_token_mask(model_->config().llm.vocab_size, image_ids_)) {
        const ModelConfig& cfg = model_->config();
        const GpuLimits& L = model_->limits();
        model_->set_image_token_id(image_ids_.context);
        if (cfg.has_vision) tiling_ = tiling_config_from(cfg.image);
        if (tokenizer_) index_ = TokenIndex::build(token_vocabulary(*tokenizer_, cfg.eos_token_ids));
        for (cudaEvent_t& e : step_begin_) SURF_CUDA_CHECK(cudaEventCreate(&e));
        if (options_.warm_up) {
            stats_.warm_up_seconds =
                model_->warm_up(std::min(options_.prefill_chunk, L.max_tokens), options_.warm_up_row_buckets);
            stats_.warm_up_notes = model_->attention_split_report();
            if (const std::string fp8 = model_->fp8_gemm_report(); !fp8.empty())
                stats_.warm_up_notes += (stats_.warm_up_notes.empty() ? "" : "; ") + fp8;
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
        scheduler_.fill_stats(s);
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
        return scheduler_.open();
    }

    // The copy waits for a request running on `from` to finish.
    SessionId fork_session(SessionId from) override {
        std::unique_lock<std::mutex> lock(mu_);
        idle_cv_.wait(lock, [&] { return !scheduler_.known(from) || !scheduler_.session(from).busy; });
        return scheduler_.fork(from);
    }

    void close_session(SessionId id) override {
        std::unique_lock<std::mutex> lock(mu_);
        idle_cv_.wait(lock, [&] { return !scheduler_.known(id) || !scheduler_.session(id).busy; });
        scheduler_.close(id);
    }

    GenerateResult generate(SessionId id, const std::vector<InputPart>& input,
                            const GenerateOptions& options) override {
        validate(options.sampling);
        if (options.max_tokens < 0) throw Error(ErrorKind::kInvalidArgument, "max_tokens must be ≥ 0");
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
            scheduler_.submit(std::move(req));
        }
        cv_.notify_all();
        return future.get();
    }

private:
    // --- the executor (StepExecutor) -----------------------------------------------------------------------

    // The step's sampling parameters and masks staged on the host, then its forward and sampling enqueued on
    // the model's stream (staging set = step id mod StepSampling::kSets, so a step issued ahead never stages
    // over the one in flight).
    void forward(const PlannedStep& st) override {
        const int set = static_cast<int>(st.id % StepSampling::kSets);
        forced_[set] = sampling_.stage(set, st.owners, st.positions, st.sample_rows);
        issue_start_ = Clock::now();
        std::lock_guard<std::mutex> gpu(gpu_mu_);
        const int64_t launches = model_->decode_graph_launches();
        SURF_CUDA_CHECK(cudaEventRecord(step_begin_[set], model_->stream()));
        model_->forward(st.rows, st.vision_ticket);
        issued_graph_ = model_->decode_graph_launches() > launches;
        graphs_captured_ = model_->decode_graphs_captured();
        issued_tunes_ = model_->gemm_tune_totals();
        if (!st.sample_rows.empty()) sampling_.enqueue(set, st.sample_rows);
    }

    std::vector<int32_t> tokens(const PlannedStep& st) override {
        if (st.sample_rows.empty()) return {};
        const int set = static_cast<int>(st.id % StepSampling::kSets);
        return sampling_.wait(set, forced_[set]);
    }

    uint64_t encode_images(const std::vector<ImageJob>& jobs) override {
        std::lock_guard<std::mutex> gpu(gpu_mu_);
        return model_->encode_images(jobs);
    }

    uint64_t copy_image_rows(int64_t from_row, int64_t n_rows, int64_t to_row) override {
        std::lock_guard<std::mutex> gpu(gpu_mu_);
        return model_->put_image_rows(model_->image_rows() + from_row * model_->config().llm.hidden_size,
                                      n_rows, to_row);
    }

    // Called on the scheduler thread (offload) and on callers' threads (fork).
    void save(int32_t slot, const std::vector<int32_t>& pages, HostCopy& host) override {
        DeviceGuard device(options_.device);
        std::lock_guard<std::mutex> gpu(gpu_mu_);
        model_->save_slot(slot, host.state);
        model_->save_pages(pages, host.kv);
    }

    void load(int32_t slot, const std::vector<int32_t>& pages, const HostCopy& host) override {
        std::lock_guard<std::mutex> gpu(gpu_mu_);
        model_->load_slot(slot, host.state);
        model_->load_pages(pages, host.kv);
    }

    // --- the scheduler thread ------------------------------------------------------------------------------

    void loop() {
        SURF_CUDA_CHECK(cudaSetDevice(options_.device));
        for (;;) {
            {
                const auto top = Clock::now();
                std::unique_lock<std::mutex> lock(mu_);
                if (busy_since_) stats_.admission_seconds += since(top);  // the wait for the lock, while busy
                if (busy_since_ && !scheduler_.has_work() && !in_flight_) {
                    stats_.busy_seconds += since(*busy_since_);
                    busy_since_.reset();
                }
                if (!in_flight_) scheduler_.forget_retired();
                cv_.wait(lock, [&] { return stop_ || scheduler_.has_work() || in_flight_; });
                if (!busy_since_) busy_since_ = Clock::now();
                if (stop_) {
                    if (in_flight_)
                        cudaStreamSynchronize(model_->stream());  // nothing it wrote is read again
                    in_flight_.reset();
                    scheduler_.fail_all(Error(ErrorKind::kCancelled, "the engine is shutting down"));
                    return;
                }
                const auto admit_start = Clock::now();
                scheduler_.admit_waiting();
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
                scheduler_.fail_running(std::make_exception_ptr(e));
            }
        }
    }

    // One turn of the scheduler: the queued images to the vision tower, the next step issued (before the step
    // in flight is completed where Scheduler::can_issue_ahead allows), then the step in flight completed. The
    // running requests and the vision queue belong to this thread, so it reads them without the lock.
    void run_once() {
        // Images first: a step issued now may prefill them (it waits for the vision stream; the tower
        // overlaps the step in flight).
        if (scheduler_.vision_batch_due()) encode_queued_images();
        // A request cancelled inside its prompt finishes at the next plan, which releases its pages and
        // images: the step in flight, which may read them, completes first.
        const bool cancels = scheduler_.poll_prefill_cancels();
        if (in_flight_ && (cancels || !scheduler_.can_issue_ahead(in_flight_->plan))) complete_in_flight();
        std::optional<IssuedStep> next = issue_step();
        if (in_flight_) complete_in_flight();
        in_flight_ = std::move(next);
        if (in_flight_ || !scheduler_.has_running()) return;
        // Nothing issued and nothing in flight: every running request waits for its images.
        const auto t0 = Clock::now();
        encode_queued_images();
        std::lock_guard<std::mutex> lock(mu_);
        stats_.image_wait_seconds += since(t0);
    }

    void complete_in_flight() {
        std::optional<IssuedStep> st = std::move(in_flight_);
        in_flight_.reset();
        complete(*st);
    }

    // Plans one batched step (Scheduler::plan_step), issues its forward and sampling, and accounts what it
    // feeds. Nothing to run: nullopt.
    std::optional<IssuedStep> issue_step() {
        IssuedStep st;
        st.begin = Clock::now();
        {
            std::lock_guard<std::mutex> lock(mu_);
            std::optional<PlannedStep> plan = scheduler_.plan_step(in_flight_ ? &in_flight_->plan : nullptr);
            if (!plan) return std::nullopt;
            st.plan = std::move(*plan);
        }
        forward(st.plan);
        // Issued: what the step feeds is in the sessions now (a step planned next starts after it).
        std::lock_guard<std::mutex> lock(mu_);
        stats_.plan_seconds += std::chrono::duration<double>(issue_start_ - st.begin).count();
        stats_.issue_seconds += since(issue_start_);
        gemm_tunes_ = issued_tunes_;
        st.graph = issued_graph_;
        scheduler_.mark_issued(st.plan);
        return st;
    }

    // Reads a step's sampled tokens (waiting for them) and accounts them: its times, then the tokens appended
    // and requests finished (Scheduler::accept_tokens, settle).
    void complete(const IssuedStep& st) {
        const std::vector<int32_t> sampled = tokens(st.plan);
        std::lock_guard<std::mutex> lock(mu_);
        const auto results_start = Clock::now();
        account_step_times(st, results_start);
        scheduler_.accept_tokens(st.plan, sampled);
        scheduler_.settle(st.plan);
        stats_.results_seconds += since(results_start);
    }

    // mu_ held. The step's wall time: from its planning, or from the previous step's end where it was issued
    // ahead; a step that sampled ends with its tokens' copy (every decode row samples): the language-model
    // stream's span; the vision tower's stream is not in it.
    void account_step_times(const IssuedStep& st, Clock::time_point results_start) {
        const PlannedStep& p = st.plan;
        const double dt =
            std::chrono::duration<double>(results_start - std::max(st.begin, last_step_end_)).count();
        last_step_end_ = results_start;
        stats_.graph_steps += st.graph ? 1 : 0;
        stats_.step_seconds += dt;
        float gpu_ms = 0;
        if (!p.sample_rows.empty()) {
            const int set = static_cast<int>(p.id % StepSampling::kSets);
            SURF_CUDA_CHECK(cudaEventElapsedTime(&gpu_ms, step_begin_[set], sampling_.end_event(set)));
            stats_.sampling_gpu_seconds += sampling_.sampling_ms(set) * 1e-3;
            ++stats_.sampled_steps;
        }
        if (p.decode_only) {
            stats_.decode_only_gpu_seconds += gpu_ms * 1e-3;
            ++stats_.decode_only_steps;
            stats_.decode_only_seconds += dt;
            stats_.decode_only_rows += p.n_dec;
            stats_.decode_only_context += p.decode_context;
        } else if (!p.sample_rows.empty()) {
            stats_.mixed_sampled_gpu_seconds += gpu_ms * 1e-3;
            ++stats_.mixed_sampled_steps;
            stats_.mixed_sampled_seconds += dt;
        }
    }

    // One batch of queued images (Scheduler::take_vision_batch) through the vision tower. The requests stay
    // running while their images are queued, so their pixels stay alive.
    void encode_queued_images() {
        if (scheduler_.poll_image_cancels() && in_flight_) complete_in_flight();  // as for prefill cancels
        VisionBatch batch;
        {
            std::lock_guard<std::mutex> lock(mu_);
            scheduler_.finish_cancelled();
            batch = scheduler_.take_vision_batch();
        }
        if (batch.jobs.empty()) return;
        std::optional<Error> failure;
        uint64_t ticket = 0;
        try {
            ticket = encode_images(batch.jobs);
        } catch (const Error& e) {
            failure = e;
        }
        std::lock_guard<std::mutex> lock(mu_);
        scheduler_.vision_done(batch, ticket, failure);
    }

    std::unique_ptr<GpuModel> model_;
    std::optional<Tokenizer> tokenizer_;
    CudaEngineOptions options_;
    std::shared_ptr<const TokenIndex> index_;
    ImageTokenIds image_ids_;
    TilingConfig tiling_;

    mutable std::mutex mu_;  // the scheduler (sessions, queues, resources), stats
    std::mutex gpu_mu_;      // the model's stream and buffers
    std::condition_variable cv_, idle_cv_;
    bool stop_ = false;
    std::thread worker_;
    Scheduler scheduler_;
    int64_t graphs_captured_ = 0;
    std::pair<int64_t, double> gemm_tunes_{0, 0.0};  // GEMM shapes tuned so far and the seconds it took
    std::optional<Clock::time_point>
        busy_since_;  // start of the current busy period (EngineStats::busy_seconds)
    StepSampling sampling_;
    cudaEvent_t step_begin_[StepSampling::kSets] =
        {};  // a step's GPU span starts here (ends with its sampling)
    // Per staging set, the tokens a complete constraint forces (StepSampling::stage); of the last forward,
    // its issue start, whether it replayed a graph, and the GEMM tuning totals after it.
    std::vector<int32_t> forced_[StepSampling::kSets];
    Clock::time_point issue_start_{};
    bool issued_graph_ = false;
    std::pair<int64_t, double> issued_tunes_{0, 0.0};
    std::optional<IssuedStep> in_flight_;  // issued, tokens not read yet
    Clock::time_point last_step_end_{};
    EngineStats stats_;  // the engine's times and GPU counters (the scheduler keeps the rest)
};

}  // namespace

std::unique_ptr<Engine> open_cuda_engine(const std::string& model_dir, const CudaEngineOptions& options) {
    DeviceGuard device(options.device);
    auto model = GpuModel::load(model_dir, options.limits);
    return std::make_unique<CudaEngine>(std::move(model), load_model_tokenizer(model_dir), options);
}

void register_backend() {
    register_engine_backend(
        "cuda",
        [](const std::string& model_dir, int device, WarmUp warm_up, const EngineOptions& engine_options) {
            // The scheduler offloads sessions beyond its resident slots, so any concurrency fits the
            // defaults.
            CudaEngineOptions options;
            options.device = device;
            options.warm_up_vision_tile_counts = warm_up == WarmUp::kServing;
            options.limits.quantize = engine_options.quantize;
            return open_cuda_engine(model_dir, options);
        },
        true);
}

std::unique_ptr<Engine> open_random_cuda_engine(const ModelConfig& cfg, const CudaEngineOptions& options,
                                                uint64_t seed) {
    DeviceGuard device(options.device);
    auto model = GpuModel::random(cfg, options.limits, seed);
    return std::make_unique<CudaEngine>(std::move(model), std::nullopt, options);
}

}  // namespace surf::model::cuda
