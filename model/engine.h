// The engine: ONE model instance per process (per GPU), shared by every caller. Callers talk in
// sessions: a session keeps its recurrent state (conv + SSM per Mamba layer) and its attention KV between
// calls, so each call prefills only what it appends. A call appends input parts (chat-formatted text,
// images) and generates, optionally constrained to a JSON schema. Thread-safe: the policy, localizer
// and validator of many agents call concurrently; the backend batches what it can.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/checkpoint/config.h"
#include "model/sampler.h"
#include "model/structured/json_schema.h"
#include "model/structured/token_constraint.h"
#include "model/text/tokenizer.h"
#include "model/vision/image.h"

namespace surf::model {

// One piece of input: text (may contain special tokens such as <SPECIAL_11>), an image, which the engine
// tiles and expands to <img> + <image>×(tokens per tile · tiles) + </img>, or raw token ids (benchmarks,
// callers that tokenize themselves).
struct InputPart {
    std::string text;
    std::shared_ptr<const Image> image;
    std::vector<int32_t> token_ids;

    static InputPart of_text(std::string t) { return {std::move(t), nullptr, {}}; }
    static InputPart of_image(std::shared_ptr<const Image> i) { return {"", std::move(i), {}}; }
    static InputPart of_tokens(std::vector<int32_t> ids) { return {"", nullptr, std::move(ids)}; }
};

// Splits text with one image placeholder per image ("<image>" by default) into parts; throws
// kInvalidArgument when the placeholder count differs from the image count.
std::vector<InputPart> interleave_images(const std::string& text,
                                         const std::vector<std::shared_ptr<const Image>>& images,
                                         const std::string& placeholder = "<image>");

struct GenerateOptions {
    int32_t max_tokens = 256;
    SamplingParams sampling;
    std::shared_ptr<const CompiledSchema> schema;   // constrain the output to a JSON value of this schema
    std::vector<int32_t> stop_ids;                  // empty: the model's eos ids
    bool ignore_eos = false;                        // generate exactly max_tokens (benchmarks, parity)
    std::function<bool(std::string_view)> on_text;  // streamed UTF-8 text; return false to cancel
    std::function<void(const float*, int64_t)> on_logits;  // the logits [vocab] each token is sampled from
    // Polled before the call's images are encoded and between the prompt's chunks, and on the CPU backend
    // also between decode steps (a server passes "the client hung up"; on_text returning false cancels a
    // decode on every backend): true ends the call with FinishReason::kCancelled. A call cancelled inside its
    // prompt leaves the session holding part of it, so the session refuses further calls.
    std::function<bool()> is_cancelled;
};

enum class FinishReason { kStop, kLength, kCancelled };
const char* finish_reason_name(FinishReason reason);

struct GenerateResult {
    std::string text;             // generated text (stop token excluded)
    std::vector<int32_t> tokens;  // generated ids (stop token included when it stopped on one)
    FinishReason finish = FinishReason::kLength;
    int64_t prefill_tokens = 0;    // tokens prefilled by this call (the appended input)
    int64_t image_tokens = 0;      // of which image-context tokens
    int64_t session_tokens = 0;    // tokens in the session after this call
    int64_t reported_tokens = -1;  // generated tokens as a backend without ids (remote) counts them; -1: none
    int64_t output_tokens() const {
        return reported_tokens >= 0 ? reported_tokens : static_cast<int64_t>(tokens.size());
    }
    double prefill_seconds = 0.0;
    double decode_seconds = 0.0;
};

using SessionId = uint64_t;

// Counters for monitoring and benchmarks (cumulative unless noted).
struct EngineStats {
    int64_t prefill_tokens = 0, decode_tokens = 0, image_tokens = 0;
    int64_t steps = 0, decode_only_steps = 0;
    // Wall time of batched steps (one issued before the previous step ended counts from that end).
    double step_seconds = 0.0, decode_only_seconds = 0.0;
    // Wall time with requests waiting or running; what step_seconds leaves of it is the scheduler's own work
    // between steps (admission, results, vision launches).
    double busy_seconds = 0.0;
    // The CUDA engine's scheduler thread, host time (s): planning each step (rows, pages) before its forward
    // is issued, issuing the forward (metadata packed and uploaded, kernels enqueued), accounting a step's
    // sampled tokens after it, admitting requests between steps (the wait for the lock included), and passes
    // in which every running request waited for its images (their vision batches issued).
    double plan_seconds = 0.0, issue_seconds = 0.0, results_seconds = 0.0, admission_seconds = 0.0,
           image_wait_seconds = 0.0;
    int64_t decode_only_rows = 0;            // sequences summed over decode-only steps
    int64_t decode_only_context = 0;         // KV tokens read, summed over those sequences
    double decode_only_gpu_seconds = 0.0;    // GPU span of those steps (first op to sampled tokens);
                                             // the rest of their wall time is host work between steps
    int64_t mixed_sampled_steps = 0;         // steps with prefill rows that sampled a token
    double mixed_sampled_seconds = 0.0;      // their wall time
    double mixed_sampled_gpu_seconds = 0.0;  // their language-model stream's span, as above
    int64_t sampled_steps = 0;               // steps that sampled (decode-only and mixed)
    double sampling_gpu_seconds = 0.0;  // the sampling part of their spans (upload, kernels, tokens back)
    int64_t running = 0, waiting = 0;   // now
    int64_t resident_sessions = 0, offloaded_sessions = 0, offloads = 0, restores = 0;
    int64_t slots_used = 0, slots_total = 0, kv_pages_used = 0, kv_pages_total = 0;
    int64_t image_cache_hits = 0, image_cache_misses = 0;
    int64_t vision_batches = 0, vision_tiles = 0;  // vision-tower passes and the tiles they encoded
    int64_t graph_steps = 0, graphs_captured = 0;  // decode-only steps replayed from CUDA graphs
    int64_t gemm_shapes_tuned = 0;                 // GEMM shapes whose cuBLASLt candidates were timed
    double gemm_tune_seconds = 0.0;                // GPU time of those tuning runs (inside steps)
    double warm_up_seconds = 0.0;                  // the engine's warm-up before serving (GEMM tuning)
    std::string warm_up_notes;  // what the warm-up measured and chose (backend's words; "" if nothing)
    int64_t device_bytes = 0;   // allocated on the device (weights + state + workspaces)

    // Adds every counter of `o` (engines serving side by side, e.g. one replica per GPU).
    EngineStats& operator+=(const EngineStats& o);
};

class Engine {
public:
    virtual ~Engine() = default;

    virtual const ModelConfig& config() const = 0;
    virtual const Tokenizer& tokenizer() const = 0;
    // The vocabulary index structured outputs compile against (built once per engine).
    virtual std::shared_ptr<const TokenIndex> token_index() const = 0;
    // A short description ("cpu", "cuda:0 H100") for logs.
    virtual std::string backend_name() const = 0;
    virtual EngineStats stats() const { return {}; }

    virtual SessionId open_session() = 0;
    // A new session holding a copy of `from`'s state: a localizer or validator call on the fork never
    // disturbs the original. Throws kInvalidArgument for an unknown id.
    virtual SessionId fork_session(SessionId from) = 0;
    virtual void close_session(SessionId id) = 0;

    // Appends `input` to the session, then generates up to options.max_tokens tokens (0: prefill only —
    // nothing is sampled and the next call continues right after the input, on every backend). Throws
    // surf::Error for bad input (unknown session, unreadable image, a too-long prompt).
    virtual GenerateResult generate(SessionId id, const std::vector<InputPart>& input,
                                    const GenerateOptions& options) = 0;
};

struct EngineOptions {
    // Named intermediates to dump (DESIGN.md rule 10): a regex over names such as "layers.3" or
    // "vision.features" (the CLI takes it from SURF_DUMP), written to dump_path as safetensors.
    std::string dump_pattern;
    std::string dump_path = "surf_dump.safetensors";
    // FP8 E4M3 on load for the language model's linear layers of a bf16/fp32 checkpoint (per-output-channel
    // weight scales, dynamic per-token activation scales). An FP8 checkpoint runs in FP8 without it. A
    // backend that does not support it refuses it (open_engine).
    Quantize quantize = Quantize::kNone;
};

// Loads a model folder (config.json, safetensors, tokenizer.json) on the CPU backend.
std::unique_ptr<Engine> open_cpu_engine(const std::string& model_dir, const EngineOptions& options = {});

// What a GPU engine tunes before its first request. kServing: the language model's shapes and one vision pass
// of every tile count (a few seconds more at 12B; then no image size stops a step to tune: servers,
// evaluations with many agents). kSingle: the language model's shapes only (one agent sees few image sizes; a
// new size runs the heuristic's GEMMs twice and tunes on its third pass, a fraction of a second in all). The
// CPU backend tunes nothing.
enum class WarmUp { kServing, kSingle };

// Loads a model folder on a backend by name: "cpu", or a registered one ("cuda", on GPU `device`, once the
// program has linked surf::cuda and called surf::model::cuda::register_backend()). `field` names where the
// name came from ("--backend", "AgentConfig.backend") in errors. `options` go to the backend; one registered
// without FP8 refuses options.quantize (kUnsupported) rather than load the model unquantized.
std::unique_ptr<Engine> open_engine(const std::string& model_dir, const std::string& backend,
                                    const std::string& field, int device = 0,
                                    WarmUp warm_up = WarmUp::kServing, const EngineOptions& options = {});

// A backend open_engine can open by name: the model folder, the device, the warm-up and the options.
using EngineFactory = std::function<std::unique_ptr<Engine>(const std::string& model_dir, int device, WarmUp,
                                                            const EngineOptions& options)>;
// Makes `name` a backend of open_engine (replacing one of that name). Thread-safe. `runs_fp8`: the backend
// honours EngineOptions::quantize; open_engine refuses it for one that does not.
void register_engine_backend(const std::string& name, EngineFactory factory, bool runs_fp8 = false);

// The model used when a command names none: $SURF_MODEL when set, else surf-tiny, the small web-agent model
// shipped with surf (models/surf-tiny, installed or in the source tree: base/data_paths.h).
std::string default_model_dir();

// The tokenizer of a model folder: tokenizer.json in the folder.
Tokenizer load_model_tokenizer(const std::string& model_dir);

// The vocabulary as structured outputs see it: each token's bytes, eos ids as end tokens, special
// tokens unusable.
TokenVocabulary token_vocabulary(const Tokenizer& tokenizer, const std::vector<int64_t>& eos_ids);

}  // namespace surf::model
