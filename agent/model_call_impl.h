// Template definition of ask_parsed (agent/model_call.h).
#pragma once

#include "base/error.h"

namespace surf::agent {

template <typename T>
T ask_parsed(Chat& chat, Message first, const model::GenerateOptions& options, int retries,
             const PromptTemplate& feedback, const std::string& role, int step, const ModelCallSink& sink,
             const std::function<T(const std::string&)>& parse) {
    Message next = std::move(first);
    std::string last_error;
    for (int attempt = 0; attempt <= retries; ++attempt) {
        const TurnReport turn = chat.ask(std::move(next), options);
        ModelCall call;
        call.role = role;
        call.step = step;
        call.attempt = attempt;
        call.feed_mode = turn.feed_mode;
        call.prefill_tokens = turn.result.prefill_tokens;
        call.image_tokens = turn.result.image_tokens;
        call.output_tokens = turn.result.output_tokens();
        call.session_tokens = turn.result.session_tokens;
        call.images = turn.images_fed;
        call.finish = model::finish_reason_name(turn.result.finish);
        call.output = turn.result.text;
        call.prefill_seconds = turn.result.prefill_seconds;
        call.decode_seconds = turn.result.decode_seconds;
        call.latency_seconds = turn.latency_seconds;
        if (turn.result.finish == model::FinishReason::kCancelled) {
            call.error = "cancelled";
            if (sink) sink(call);
            throw Error(ErrorKind::kCancelled, role + ": generation cancelled");
        }
        try {
            T value = parse(turn.result.text);
            if (sink) sink(call);
            return value;
        } catch (const Error& e) {
            if (e.kind() != ErrorKind::kModelOutput) throw;
            last_error = e.what();
            if (turn.result.finish == model::FinishReason::kLength) {
                last_error += " (the reply was cut at " + std::to_string(options.max_tokens) + " tokens)";
            }
            call.error = last_error;
            if (sink) sink(call);
        }
        next = Message{"user", feedback.render({{"error", last_error}}), {}};
    }
    throw Error(ErrorKind::kModelOutput, role + ": no usable output after " + std::to_string(retries + 1) +
                                             " attempts; last error: " + last_error);
}

}  // namespace surf::agent
