// The Engine on the CPU backend: one CpuModel, sessions in a map. The model runs one piece of work at a time
// (an image, a chunk of a prompt, a decode step), and concurrent calls take turns in arrival order, so a long
// prompt does not hold up a short request for its whole length (batching across sessions is the CUDA engine's
// job; the CPU backend serves small models).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "base/error.h"
#include "model/cpu/cpu_model.h"
#include "model/decode_rules.h"
#include "model/dump.h"
#include "model/engine.h"
#include "model/engine_input.h"
#include "model/vision/image_tiling.h"

namespace surf::model {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Turns on the model, first come first served (a ticket lock: std::mutex promises no order).
class FairTurns {
public:
    void acquire() {
        std::unique_lock<std::mutex> lock(mu_);
        const uint64_t ticket = next_++;
        cv_.wait(lock, [&] { return serving_ == ticket; });
    }
    void release() {
        std::lock_guard<std::mutex> lock(mu_);
        ++serving_;
        cv_.notify_all();
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    uint64_t next_ = 0, serving_ = 0;
};

class Turn {
public:
    explicit Turn(FairTurns& turns) : turns_(turns) { turns_.acquire(); }
    ~Turn() { turns_.release(); }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

private:
    FairTurns& turns_;
};

bool cancelled(const GenerateOptions& options) {
    return options.is_cancelled && options.is_cancelled();
}

class CpuEngine final : public Engine {
public:
    CpuEngine(const std::string& dir, const EngineOptions& options)
        : model_(cpu::CpuModel::load(dir)), tokenizer_(load_model_tokenizer(dir)) {
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
        output_mask_ = output_token_mask(cfg.llm.vocab_size, image_ids_);
        if (cfg.has_vision) tiling_ = tiling_config_from(cfg.image);
        index_ = TokenIndex::build(token_vocabulary(tokenizer_, cfg.eos_token_ids));
    }

    const ModelConfig& config() const override { return model_->config(); }
    const Tokenizer& tokenizer() const override { return tokenizer_; }
    std::shared_ptr<const TokenIndex> token_index() const override { return index_; }
    std::string backend_name() const override { return "cpu"; }

    SessionId open_session() override {
        std::lock_guard<std::mutex> lock(mu_);
        const SessionId id = next_id_++;
        sessions_.emplace(id, Session{model_->new_state(), {}});
        return id;
    }

    SessionId fork_session(SessionId from) override {
        std::lock_guard<std::mutex> lock(mu_);
        const Session& src = get(from);
        if (src.busy)
            throw Error(ErrorKind::kInvalidArgument,
                        "session " + std::to_string(from) + " is generating: it cannot be forked now");
        const SessionId id = next_id_++;
        Session copy = src;
        sessions_.emplace(id, std::move(copy));
        return id;
    }

    // A session closed while it generates goes when that call returns.
    void close_session(SessionId id) override {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sessions_.find(id);
        if (it == sessions_.end()) return;
        if (it->second.busy)
            it->second.closing = true;
        else
            sessions_.erase(it);
    }

    GenerateResult generate(SessionId id, const std::vector<InputPart>& input,
                            const GenerateOptions& options) override {
        validate(options.sampling);
        if (options.max_tokens < 0) throw Error(ErrorKind::kInvalidArgument, "max_tokens must be ≥ 0");
        SessionUse use(*this, id);
        Session& session = use.session;
        const ModelConfig& cfg = model_->config();
        GenerateResult result;

        // Tokens to prefill: a token sampled last call but not yet fed, then the new input.
        const auto t0 = Clock::now();
        const PreparedInput prepared = prepare_input(input, cfg, &tokenizer_, image_ids_, tiling_);
        std::vector<int32_t> tokens = session.pending;
        tokens.insert(tokens.end(), prepared.tokens.begin(), prepared.tokens.end());
        if (tokens.empty())
            throw Error(ErrorKind::kInvalidArgument,
                        "generate: nothing to prefill (empty input on a session with no pending token)");
        std::vector<float> image_rows;
        for (const PreparedImage& img : prepared.images) {
            if (cancelled(options)) return cancelled_result(std::move(result));
            Tensor pixels;
            pixels.shape = {img.tiles.plan.n_tiles, 3, img.tiles.tile_size, img.tiles.tile_size};
            pixels.data = img.tiles.pixels;
            Turn turn(turns_);
            const Tensor embeds = model_->encode_images(pixels, dumper_.get());
            image_rows.insert(image_rows.end(), embeds.data.begin(), embeds.data.end());
        }
        result.image_tokens = prepared.image_tokens;
        Tensor logits;
        if (!prefill(session, tokens, image_rows, options, &logits))
            return cancelled_result(std::move(result));
        session.pending.clear();
        result.prefill_tokens = static_cast<int64_t>(tokens.size());
        result.prefill_seconds = seconds_since(t0);

        decode(session, logits, options, &result);
        result.session_tokens = session.state.n_tokens + static_cast<int64_t>(session.pending.size());
        return result;
    }

private:
    // A prompt is fed in chunks of this many tokens, a turn each, so that other calls run in between. The
    // chunks are the same whatever the load, so a call's result does not depend on other calls.
    static constexpr size_t kPrefillChunk = 2048;

    struct Session {
        cpu::SequenceState state;
        std::vector<int32_t> pending;  // sampled, not yet fed through the model
        bool busy = false;             // a call is generating on it
        bool closing = false;          // closed while busy: erased when that call returns
        bool broken = false;           // a call was cancelled inside its prompt: the state holds part of it
    };

    // A call's hold on its session: marks it busy, and on return idle again (or erased, if it was closed).
    struct SessionUse {
        SessionUse(CpuEngine& engine, SessionId id) : engine(engine), id(id), session(engine.claim(id)) {}
        ~SessionUse() { engine.unclaim(id); }
        CpuEngine& engine;
        SessionId id;
        Session& session;
    };

    Session& claim(SessionId id) {
        std::lock_guard<std::mutex> lock(mu_);
        Session& s = get(id);
        if (s.busy)
            throw Error(ErrorKind::kInvalidArgument,
                        "session " + std::to_string(id) + " is already generating");
        if (s.broken) {
            throw Error(ErrorKind::kInvalidArgument,
                        "session " + std::to_string(id) +
                            " was cancelled in the middle of its prompt; open a new session");
        }
        s.busy = true;
        return s;
    }

    void unclaim(SessionId id) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = sessions_.find(id);
        if (it == sessions_.end()) return;
        it->second.busy = false;
        if (it->second.closing) sessions_.erase(it);
    }

    static GenerateResult cancelled_result(GenerateResult result) {
        result.finish = FinishReason::kCancelled;
        return result;
    }

    // Feeds the prompt a chunk per turn. Returns false when the call is cancelled first (the session then
    // holds the chunks fed so far and is marked broken).
    bool prefill(Session& session, const std::vector<int32_t>& tokens, const std::vector<float>& image_rows,
                 const GenerateOptions& options, Tensor* logits) {
        const int64_t d = model_->config().llm.hidden_size;
        size_t done = 0, rows_done = 0;
        while (done < tokens.size()) {
            if (cancelled(options)) {
                session.broken = done > 0;
                return false;
            }
            Turn turn(turns_);
            const size_t n = std::min(kPrefillChunk, tokens.size() - done);
            const std::vector<int32_t> piece(tokens.begin() + static_cast<long>(done),
                                             tokens.begin() + static_cast<long>(done + n));
            const auto images = static_cast<size_t>(
                std::count(piece.begin(), piece.end(), static_cast<int32_t>(image_ids_.context)));
            Tensor rows;
            rows.shape = {static_cast<int64_t>(images), d};
            rows.data.assign(image_rows.begin() + static_cast<long>(rows_done * d),
                             image_rows.begin() + static_cast<long>((rows_done + images) * d));
            cpu::ForwardInput in;
            in.tokens = &piece;
            in.image_embeds = images > 0 ? &rows : nullptr;
            in.image_token_id = image_ids_.context;
            in.dumper = dumper_.get();
            *logits = model_->forward(session.state, in);
            done += n;
            rows_done += images;
        }
        return true;
    }

    Session& get(SessionId id) {
        auto it = sessions_.find(id);
        if (it == sessions_.end())
            throw Error(ErrorKind::kInvalidArgument, "unknown session " + std::to_string(id));
        return it->second;
    }

    // The decode loop: sample (under the schema's mask) and feed each token until DecodeRules ends the reply.
    void decode(Session& session, Tensor logits, const GenerateOptions& options, GenerateResult* result) {
        const auto t0 = Clock::now();
        const int64_t V = model_->config().llm.vocab_size;
        DecodeRules rules(options, model_->config().eos_token_ids, index_, &tokenizer_);
        std::vector<uint32_t> mask(rules.constrained() ? (static_cast<size_t>(V) + 31) / 32 : 0);
        result->finish = FinishReason::kLength;
        for (int32_t step = 0; step < options.max_tokens; ++step) {
            if (cancelled(options)) {
                result->finish = FinishReason::kCancelled;
                break;
            }
            int32_t token = rules.forced();
            if (token == DecodeRules::kSample) {
                const uint32_t* allowed = output_mask_.data();
                if (rules.constrained()) {
                    rules.fill_mask(mask.data(), output_mask_.data(), mask.size());
                    allowed = mask.data();
                }
                if (options.on_logits) options.on_logits(logits.ptr(), V);
                token = sample_token(logits.ptr(), V, options.sampling,
                                     static_cast<uint64_t>(session.state.n_tokens), allowed);
            }
            const DecodeRules::Outcome out = rules.accept(token, *result);
            if (out.done) {
                if (out.error) throw *out.error;
                if (out.pending >= 0) session.pending = {out.pending};
                result->finish = out.finish;
                break;
            }
            std::vector<int32_t> one = {token};
            cpu::ForwardInput in;
            in.tokens = &one;
            Turn turn(turns_);
            logits = model_->forward(session.state, in);
        }
        rules.flush(*result);
        result->decode_seconds = seconds_since(t0);
    }

    std::unique_ptr<cpu::CpuModel> model_;
    std::unique_ptr<Dumper> dumper_;
    Tokenizer tokenizer_;
    std::shared_ptr<const TokenIndex> index_;
    TilingConfig tiling_;
    ImageTokenIds image_ids_;
    std::vector<uint32_t> output_mask_;  // generable tokens (no image placeholders)
    std::mutex mu_;                      // the session map and the sessions' flags
    FairTurns turns_;                    // the model
    std::map<SessionId, Session> sessions_;
    SessionId next_id_ = 1;
};

}  // namespace

std::unique_ptr<Engine> open_cpu_engine(const std::string& model_dir, const EngineOptions& options) {
    return std::make_unique<CpuEngine>(model_dir, options);
}

}  // namespace surf::model
