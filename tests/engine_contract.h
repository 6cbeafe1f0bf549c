// Engine API contracts every backend must keep, checked the same way on each (the CPU engine in the parity
// tests, the CUDA engine in the gpu tests), on the tiny fixture's chat markup.
#pragma once

#include <doctest/doctest.h>

#include "base/error.h"
#include "model/engine.h"

namespace surf::test {

// max_tokens 0 prefills only: nothing sampled, nothing left pending, and the next call continues right after
// the input; an empty input on a session with nothing pending is an error, not a silent sample.
inline void check_max_tokens_zero_prefills_only(model::Engine& engine) {
    using model::GenerateOptions, model::GenerateResult, model::InputPart;
    const model::SessionId s = engine.open_session();
    GenerateOptions none;
    none.max_tokens = 0;
    const GenerateResult r0 = engine.generate(
        s, {InputPart::of_text("<SPECIAL_11>User\nhello there\n<SPECIAL_11>Assistant\n")}, none);
    CHECK(r0.tokens.empty());
    CHECK(r0.text.empty());
    CHECK(r0.finish == model::FinishReason::kLength);
    CHECK(r0.prefill_tokens > 0);
    CHECK(r0.session_tokens == r0.prefill_tokens);  // no sampled token left pending
    GenerateOptions six;
    six.max_tokens = 6;
    six.ignore_eos = true;
    const GenerateResult r1 = engine.generate(s, {InputPart::of_text(" more")}, six);
    CHECK(r1.tokens.size() == 6);
    CHECK(r1.session_tokens == r0.session_tokens + r1.prefill_tokens + 6);
    CHECK_THROWS_AS(engine.generate(engine.open_session(), {}, six), surf::Error);
}

}  // namespace surf::test
