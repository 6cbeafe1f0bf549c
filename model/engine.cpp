#include "model/engine.h"

#include <cstdlib>
#include <filesystem>

#include "base/data_paths.h"
#include "base/error.h"

namespace surf::model {

std::vector<InputPart> interleave_images(const std::string& text,
                                         const std::vector<std::shared_ptr<const Image>>& images,
                                         const std::string& placeholder) {
    std::vector<InputPart> parts;
    size_t start = 0, used = 0;
    for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, start)) {
        if (used == images.size()) {
            throw Error(ErrorKind::kInvalidArgument, "the prompt has more " + placeholder +
                                                         " placeholders than the " +
                                                         std::to_string(images.size()) + " images given");
        }
        if (at > start) parts.push_back(InputPart::of_text(text.substr(start, at - start)));
        parts.push_back(InputPart::of_image(images[used++]));
        start = at + placeholder.size();
    }
    if (used != images.size()) {
        throw Error(ErrorKind::kInvalidArgument,
                    std::to_string(images.size()) + " images given but the prompt has " +
                        std::to_string(used) + " " + placeholder + " placeholders");
    }
    if (start < text.size()) parts.push_back(InputPart::of_text(text.substr(start)));
    return parts;
}

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::kStop: return "stop";
        case FinishReason::kLength: return "length";
        case FinishReason::kCancelled: return "cancelled";
    }
    return "?";
}

std::string default_model_dir() {
    if (const char* env = std::getenv("SURF_MODEL"); env && *env) return env;
    return data_dir("models", nullptr) + "/surf-tiny";
}

Tokenizer load_model_tokenizer(const std::string& model_dir) {
    const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer.json";
    if (!std::filesystem::exists(path))
        throw Error(ErrorKind::kIo,
                    path.string() + ": not found (the model folder needs its tokenizer.json)");
    return Tokenizer::load(path.string());
}

TokenVocabulary token_vocabulary(const Tokenizer& tokenizer, const std::vector<int64_t>& eos_ids) {
    TokenVocabulary vocab;
    const int32_t n = tokenizer.vocab_size();
    vocab.token_bytes.resize(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; ++id) {
        if (tokenizer.is_special(id)) {
            vocab.unusable_ids.push_back(id);
            continue;
        }
        vocab.token_bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
    }
    for (int64_t id : eos_ids) vocab.end_ids.push_back(static_cast<int32_t>(id));
    return vocab;
}

EngineStats& EngineStats::operator+=(const EngineStats& o) {
    prefill_tokens += o.prefill_tokens;
    decode_tokens += o.decode_tokens;
    image_tokens += o.image_tokens;
    steps += o.steps;
    decode_only_steps += o.decode_only_steps;
    step_seconds += o.step_seconds;
    busy_seconds += o.busy_seconds;
    plan_seconds += o.plan_seconds;
    issue_seconds += o.issue_seconds;
    results_seconds += o.results_seconds;
    admission_seconds += o.admission_seconds;
    image_wait_seconds += o.image_wait_seconds;
    decode_only_seconds += o.decode_only_seconds;
    decode_only_rows += o.decode_only_rows;
    decode_only_context += o.decode_only_context;
    decode_only_gpu_seconds += o.decode_only_gpu_seconds;
    mixed_sampled_steps += o.mixed_sampled_steps;
    mixed_sampled_seconds += o.mixed_sampled_seconds;
    mixed_sampled_gpu_seconds += o.mixed_sampled_gpu_seconds;
    sampled_steps += o.sampled_steps;
    sampling_gpu_seconds += o.sampling_gpu_seconds;
    if (warm_up_notes.empty()) warm_up_notes = o.warm_up_notes;  // replicas warm up alike: one copy
    running += o.running;
    waiting += o.waiting;
    resident_sessions += o.resident_sessions;
    offloaded_sessions += o.offloaded_sessions;
    offloads += o.offloads;
    restores += o.restores;
    slots_used += o.slots_used;
    slots_total += o.slots_total;
    kv_pages_used += o.kv_pages_used;
    kv_pages_total += o.kv_pages_total;
    image_cache_hits += o.image_cache_hits;
    image_cache_misses += o.image_cache_misses;
    vision_batches += o.vision_batches;
    vision_tiles += o.vision_tiles;
    graph_steps += o.graph_steps;
    graphs_captured += o.graphs_captured;
    gemm_shapes_tuned += o.gemm_shapes_tuned;
    gemm_tune_seconds += o.gemm_tune_seconds;
    warm_up_seconds += o.warm_up_seconds;
    device_bytes += o.device_bytes;
    return *this;
}

}  // namespace surf::model
