#include "model/engine.h"

#include <filesystem>

#include "kernels/base/error.h"

namespace surf::model {

std::vector<InputPart> interleave_images(const std::string& text, const std::vector<std::shared_ptr<const Image>>& images,
                                         const std::string& placeholder) {
    std::vector<InputPart> parts;
    size_t start = 0, used = 0;
    for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, start)) {
        if (used == images.size()) {
            throw Error(ErrorKind::kInvalidArgument, "the prompt has more " + placeholder + " placeholders than the " +
                                                         std::to_string(images.size()) + " images given");
        }
        if (at > start) parts.push_back(InputPart::of_text(text.substr(start, at - start)));
        parts.push_back(InputPart::of_image(images[used++]));
        start = at + placeholder.size();
    }
    if (used != images.size()) {
        throw Error(ErrorKind::kInvalidArgument, std::to_string(images.size()) + " images given but the prompt has " +
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

Tokenizer load_model_tokenizer(const std::string& model_dir) {
    const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer.json";
    if (!std::filesystem::exists(path)) throw Error(ErrorKind::kIo, path.string() + ": not found (the model folder needs its tokenizer.json)");
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

}  // namespace surf::model
