// The Engine on the CPU backend: one CpuModel behind a CpuExecutor, driven by the backend-neutral Scheduler
// from a step thread. Each step runs the work of every running call one sequence after another: a decode step
// per generating call and a prompt chunk of a fixed size per prefilling one, so a long prompt does not hold
// up a short request for its whole length, and a call's chunks, hence its result, do not depend on other
// calls (batching across sessions for speed is the CUDA engine's job; the CPU backend serves small models).
// GenerateOptions::is_cancelled is polled before a call's images are encoded, before each chunk of its prompt
// and before each token is sampled.
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "base/error.h"
#include "model/cpu/cpu_model.h"
#include "model/cpu_executor.h"
#include "model/decode_rules.h"
#include "model/dump.h"
#include "model/engine.h"
#include "model/engine_input.h"
#include "model/scheduler.h"
#include "model/vision/image_tiling.h"

namespace surf::model {

namespace {

// The scheduler's plan for the CPU: slots, pages, context, rows and tiles bounded only by memory (the state
// of a session lives in host memory and grows with it), prompts in fixed chunks, steps never issued ahead
// (each row runs to the end before tokens() returns), every queued image encoded before the next step, and an
// image cache of about 64 MiB that grows for a request whose images need more.
SchedulerOptions cpu_scheduler_options(const ModelConfig& cfg) {
    constexpr int64_t kUnbounded = std::numeric_limits<int32_t>::max();
    constexpr int64_t kImageCacheBytes = int64_t{64} << 20;
    SchedulerOptions o;
    SchedulerLimits& L = o.limits;
    L.max_tokens = L.max_seqs = L.max_slots = L.kv_pages = L.max_tiles = kUnbounded;
    L.page_size = int64_t{1} << 20;
    L.max_context = kUnbounded * L.page_size;
    L.max_image_rows = kImageCacheBytes / (cfg.llm.hidden_size * static_cast<int64_t>(sizeof(float)));
    // A prompt is fed in chunks of this many tokens, a step each, so that other calls run in between.
    o.prefill_chunk = 2048;
    o.fixed_chunks = true;
    o.issue_ahead = false;
    o.grow_image_rows = true;
    return o;
}

// "cpu", and the FP8 scheme of the language model's GEMMs when there is one.
std::string backend_description(const ModelConfig& cfg, Quantize quantize) {
    if (quantize == Quantize::kFp8) return "cpu, fp8 on load";
    if (cfg.quant.method != QuantMethod::kNone)
        return std::string("cpu, ") + quant_method_name(cfg.quant.method);
    return "cpu";
}

class CpuEngine final : public Engine {
public:
    CpuEngine(const std::string& dir, const EngineOptions& options)
        : model_(cpu::CpuModel::load(dir, options.quantize)),
          tokenizer_(load_model_tokenizer(dir)),
          name_(backend_description(model_->config(), options.quantize)) {
        if (!options.dump_pattern.empty())
            dumper_ = std::make_unique<Dumper>(options.dump_pattern, options.dump_path);
        const ModelConfig& cfg = model_->config();
        if (tokenizer_.vocab_size() > cfg.llm.vocab_size) {
            throw Error(ErrorKind::kFormat,
                        dir + "/tokenizer.json: " + std::to_string(tokenizer_.vocab_size()) +
                            " tokens but the model has " + std::to_string(cfg.llm.vocab_size) +
                            " embedding rows");
        }
        image_ids_ = resolve_image_tokens(cfg, &tokenizer_);
        if (cfg.has_vision) tiling_ = tiling_config_from(cfg.image);
        index_ = TokenIndex::build(token_vocabulary(tokenizer_, cfg.eos_token_ids));
        executor_ = std::make_unique<CpuExecutor>(*model_, dumper_.get(), image_ids_.context,
                                                  output_token_mask(cfg.llm.vocab_size, image_ids_));
        scheduler_ = std::make_unique<Scheduler>(cpu_scheduler_options(cfg), *executor_);
        worker_ = std::thread([this] { loop(); });
    }

    ~CpuEngine() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        worker_.join();
    }

    const ModelConfig& config() const override { return model_->config(); }
    const Tokenizer& tokenizer() const override { return tokenizer_; }
    std::shared_ptr<const TokenIndex> token_index() const override { return index_; }
    std::string backend_name() const override { return name_; }

    // The scheduler's counters (the pools' sizes are left out: the CPU's are bounded only by memory).
    EngineStats stats() const override {
        std::lock_guard<std::mutex> lock(mu_);
        EngineStats s;
        scheduler_->fill_stats(s);
        s.slots_total = s.kv_pages_total = 0;
        return s;
    }

    SessionId open_session() override {
        std::lock_guard<std::mutex> lock(mu_);
        return scheduler_->open();
    }

    SessionId fork_session(SessionId from) override {
        std::lock_guard<std::mutex> lock(mu_);
        scheduler_->session(from);  // unknown: throws
        if (claimed_.count(from))
            throw Error(ErrorKind::kInvalidArgument,
                        "session " + std::to_string(from) + " is generating: it cannot be forked now");
        return scheduler_->fork(from);
    }

    // A session closed while it generates goes when that call returns.
    void close_session(SessionId id) override {
        std::lock_guard<std::mutex> lock(mu_);
        if (claimed_.count(id))
            closing_.insert(id);
        else
            scheduler_->close(id);
    }

    GenerateResult generate(SessionId id, const std::vector<InputPart>& input,
                            const GenerateOptions& options) override {
        validate(options.sampling);
        if (options.max_tokens < 0) throw Error(ErrorKind::kInvalidArgument, "max_tokens must be ≥ 0");
        Claim claim(*this, id);
        auto req = std::make_unique<Request>();
        req->session = id;
        req->options = options;
        req->started = SchedulerClock::now();
        // Tokenizing and tiling run on the caller's thread.
        req->input = prepare_input(input, model_->config(), &tokenizer_, image_ids_, tiling_);
        req->rules.emplace(options, model_->config().eos_token_ids, index_, &tokenizer_);
        std::future<GenerateResult> future = req->done.get_future();
        {
            std::lock_guard<std::mutex> lock(mu_);
            scheduler_->submit(std::move(req));
        }
        cv_.notify_all();
        return future.get();
    }

private:
    // A call's hold on its session, from generate() until it returns: no other call, no fork meanwhile; a
    // close waits for the release.
    class Claim {
    public:
        Claim(CpuEngine& engine, SessionId id) : engine_(engine), id_(id) {
            std::lock_guard<std::mutex> lock(engine_.mu_);
            const Session& s = engine_.scheduler_->session(id);
            if (engine_.claimed_.count(id))
                throw Error(ErrorKind::kInvalidArgument,
                            "session " + std::to_string(id) + " is already generating");
            if (s.broken) {
                throw Error(ErrorKind::kInvalidArgument,
                            "session " + std::to_string(id) +
                                " was cancelled in the middle of its prompt; open a new session");
            }
            engine_.claimed_.insert(id);
        }
        ~Claim() {
            std::lock_guard<std::mutex> lock(engine_.mu_);
            engine_.claimed_.erase(id_);
            if (engine_.closing_.erase(id_)) engine_.scheduler_->close(id_);
        }
        Claim(const Claim&) = delete;
        Claim& operator=(const Claim&) = delete;

    private:
        CpuEngine& engine_;
        SessionId id_;
    };

    void loop() {
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(mu_);
                scheduler_->forget_retired();
                cv_.wait(lock, [&] { return stop_ || scheduler_->has_work(); });
                if (stop_) {
                    scheduler_->fail_all(Error(ErrorKind::kCancelled, "the engine is shutting down"));
                    return;
                }
                scheduler_->admit_waiting();
            }
            try {
                run_step();
            } catch (const std::exception&) {
                // A step the model refused: its calls fail with the reason (their sessions keep what was fed
                // before).
                std::lock_guard<std::mutex> lock(mu_);
                scheduler_->fail_running(std::current_exception());
            }
        }
    }

    // One turn: the queued images encoded, then one step planned, run, sampled and accounted. The polls, the
    // model and the calls' callbacks run without the lock.
    void run_step() {
        encode_images();
        scheduler_->poll_prefill_cancels();
        std::optional<PlannedStep> step;
        {
            std::lock_guard<std::mutex> lock(mu_);
            step = scheduler_->plan_step(nullptr);
        }
        if (!step) return;
        executor_->forward(*step);
        {
            std::lock_guard<std::mutex> lock(mu_);
            scheduler_->mark_issued(*step);
        }
        scheduler_->poll_sample_cancels(*step);
        const std::vector<int32_t> tokens = executor_->tokens(*step);
        scheduler_->accept_tokens(*step, tokens);
        std::lock_guard<std::mutex> lock(mu_);
        scheduler_->settle(*step);
    }

    void encode_images() {
        scheduler_->poll_image_cancels();
        VisionBatch batch;
        {
            std::lock_guard<std::mutex> lock(mu_);
            scheduler_->finish_cancelled();
            batch = scheduler_->take_vision_batch();
        }
        if (batch.jobs.empty()) return;
        std::optional<Error> failure;
        uint64_t ticket = 0;
        try {
            ticket = executor_->encode_images(batch.jobs);
        } catch (const Error& e) {
            failure = e;
        }
        std::lock_guard<std::mutex> lock(mu_);
        scheduler_->vision_done(batch, ticket, failure);
    }

    std::unique_ptr<cpu::CpuModel> model_;
    std::unique_ptr<Dumper> dumper_;
    Tokenizer tokenizer_;
    std::string name_;
    std::shared_ptr<const TokenIndex> index_;
    TilingConfig tiling_;
    ImageTokenIds image_ids_;
    std::unique_ptr<CpuExecutor> executor_;
    std::unique_ptr<Scheduler> scheduler_;
    mutable std::mutex mu_;  // the scheduler (sessions, queues) and the claims
    std::condition_variable cv_;
    std::set<SessionId> claimed_;  // sessions a call is generating on
    std::set<SessionId> closing_;  // closed while claimed: closed when the call returns
    bool stop_ = false;
    std::thread worker_;
};

}  // namespace

std::unique_ptr<Engine> open_cpu_engine(const std::string& model_dir, const EngineOptions& options) {
    return std::make_unique<CpuEngine>(model_dir, options);
}

}  // namespace surf::model
