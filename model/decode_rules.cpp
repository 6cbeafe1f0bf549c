#include "model/decode_rules.h"

#include <algorithm>
#include <string>

namespace surf::model {

std::vector<int64_t> stop_ids(const GenerateOptions& options, const std::vector<int64_t>& eos_ids) {
    if (!options.stop_ids.empty()) return {options.stop_ids.begin(), options.stop_ids.end()};
    if (options.ignore_eos) return {};
    return eos_ids;
}

DecodeRules::DecodeRules(const GenerateOptions& options, const std::vector<int64_t>& eos_ids,
                         std::shared_ptr<const TokenIndex> index, const Tokenizer* tokenizer)
    : max_tokens_(options.max_tokens), on_text_(options.on_text), stops_(stop_ids(options, eos_ids)) {
    if (options.schema) {
        if (!index) throw Error(ErrorKind::kUnsupported, "structured output needs a tokenizer");
        constraint_.emplace(options.schema, std::move(index));
    }
    if (tokenizer) stream_.emplace(*tokenizer, /*skip_special=*/true);
}

int32_t DecodeRules::forced() const {
    if (!constraint_ || !constraint_->is_complete()) return kSample;
    return stops_.empty() ? -1 : static_cast<int32_t>(stops_.front());
}

void DecodeRules::fill_mask(uint32_t* mask, const uint32_t* generable, size_t words) const {
    std::fill(mask, mask + words, 0u);
    constraint_->fill_allowed(mask);
    if (constraint_->can_end()) {
        for (int64_t s : stops_) mask[static_cast<size_t>(s) / 32] |= 1u << (s % 32);
    }
    for (size_t w = 0; w < words; ++w) mask[w] &= generable[w];
}

DecodeRules::Outcome DecodeRules::accept(int32_t token, GenerateResult& result) {
    if (max_tokens_ == 0) return {true, FinishReason::kLength, std::nullopt, -1};  // prefill only
    if (token < 0) {
        return {true, FinishReason::kStop,
                Error(ErrorKind::kModelOutput, "the output constraint allows no token at step " +
                                                   std::to_string(result.tokens.size())),
                -1};
    }
    result.tokens.push_back(token);
    if (std::find(stops_.begin(), stops_.end(), token) != stops_.end())
        return {true, FinishReason::kStop, std::nullopt, token};
    if (constraint_ && !constraint_->try_accept(token)) {
        return {true, FinishReason::kStop,
                Error(ErrorKind::kModelOutput,
                      "sampled token " + std::to_string(token) + " broke the output constraint"),
                token};
    }
    if (stream_) {
        const std::string piece = stream_->push(token);
        result.text += piece;
        if (on_text_ && !piece.empty() && !on_text_(piece))
            return {true, FinishReason::kCancelled, std::nullopt, token};
    }
    if (static_cast<int64_t>(result.tokens.size()) >= max_tokens_)
        return {true, FinishReason::kLength, std::nullopt, token};
    return {};
}

void DecodeRules::flush(GenerateResult& result) {
    if (!stream_) return;
    const std::string tail = stream_->flush();
    result.text += tail;
    if (on_text_ && !tail.empty()) on_text_(tail);
}

}  // namespace surf::model
