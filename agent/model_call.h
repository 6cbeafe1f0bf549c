// One model call as traces record it, and the retry-with-feedback helper every module uses: a reply that
// does not parse (or is out of range) is answered with the profile's feedback turn naming the error, at
// most `retries` times; then the last error is thrown as Error(kModelOutput).
#pragma once

#include <functional>
#include <string>

#include "agent/chat.h"
#include "agent/profile.h"
#include "agent/prompt_renderer.h"

namespace surf::agent {

struct ModelCall {
    std::string role;  // policy, localizer, validator
    int step = 0;
    int attempt = 0;        // 0 = first try, 1.. = retries after malformed output
    std::string feed_mode;  // prefix / splice / fresh
    int64_t prefill_tokens = 0;
    int64_t image_tokens = 0;
    int64_t output_tokens = 0;
    int64_t session_tokens = 0;
    int images = 0;
    std::string finish;  // stop / length / cancelled
    std::string output;
    std::string error;  // parse / validation error, "" if the output was used
    double prefill_seconds = 0, decode_seconds = 0, latency_seconds = 0;
};

using ModelCallSink = std::function<void(const ModelCall&)>;

// Asks `first`, parses the reply with `parse` (which throws Error(kModelOutput) when it is unusable); on
// failure asks the feedback turn and parses again, up to settings.retries more times. Every call goes to
// `sink`. `should_stop` (may be empty) cancels generation between tokens.
template <typename T>
T ask_parsed(Chat& chat, Message first, const model::GenerateOptions& options, int retries,
             const PromptTemplate& feedback, const std::string& role, int step, const ModelCallSink& sink,
             const std::function<T(const std::string&)>& parse);

}  // namespace surf::agent

#include "agent/model_call_impl.h"
