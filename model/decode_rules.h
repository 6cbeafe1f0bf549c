// The rules every backend applies to one request's generated tokens, written once: which ids stop the reply,
// what the schema's constraint allows next (and the end token it forces once the value is complete), the text
// streamed to on_text, what ends the reply (a stop id, max_tokens, on_text returning false, a token the
// constraint refuses or no allowed token at all) and which token a finished reply leaves pending in its
// session (sampled but not yet fed through the model). The CPU engine runs it one request at a time; the CUDA
// engine holds one per request of a batch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "model/engine.h"
#include "model/structured/token_constraint.h"
#include "model/text/tokenizer.h"

namespace surf::model {

// The ids that end a request: its own stop ids, else the model's eos ids unless it ignores them.
std::vector<int64_t> stop_ids(const GenerateOptions& options, const std::vector<int64_t>& eos_ids);

class DecodeRules {
public:
    // `index` is needed when options.schema is set; `tokenizer` null: no text (token ids only).
    DecodeRules(const GenerateOptions& options, const std::vector<int64_t>& eos_ids,
                std::shared_ptr<const TokenIndex> index, const Tokenizer* tokenizer);

    const std::vector<int64_t>& stops() const { return stops_; }
    bool constrained() const { return constraint_.has_value(); }

    // What the next step's token is when the model does not sample it: the first stop id once the constraint
    // is complete (-1 when there is none, which accept() turns into an error), else kSample.
    static constexpr int32_t kSample = -2;
    int32_t forced() const;
    // The allowed-token mask for the next step of a constrained request (`words` 32-bit words): the tokens
    // the constraint allows, and the stop ids once the value may end, within `generable`.
    void fill_mask(uint32_t* mask, const uint32_t* generable, size_t words) const;

    struct Outcome {
        bool done = false;
        FinishReason finish = FinishReason::kLength;
        std::optional<Error> error;  // the call fails with it (the reply so far is lost)
        int32_t pending = -1;        // the token a finished reply leaves pending in the session (-1: none)
    };
    // Takes the step's token (sampled or forced; negative: no token was allowed) into `result`: its id, its
    // text (streamed to on_text). A request with max_tokens 0 ends at its first step without a token.
    Outcome accept(int32_t token, GenerateResult& result);
    // At the end of a reply: the text the stream still holds, into `result` and to on_text.
    void flush(GenerateResult& result);

private:
    int32_t max_tokens_;
    std::function<bool(std::string_view)> on_text_;
    std::vector<int64_t> stops_;
    std::optional<TokenConstraint> constraint_;
    std::optional<StreamDecoder> stream_;
};

}  // namespace surf::model
