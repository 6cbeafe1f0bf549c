// Sessions: continuing a sequence must not change the math. For every kind of state,
// prefill(N) = prefill(k) + decode(N−k) = prefill(k) + prefill(N−k), with k inside a chunk and on a
// chunk boundary; logits and states compared separately.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "model/checkpoint/safetensors.h"
#include "model/cpu/cpu_model.h"

using namespace surf::model;
using surf::model::cpu::CpuModel;

namespace {

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double diff = 0, ref = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
        ref = std::max(ref, static_cast<double>(std::fabs(b[i])));
    }
    return ref > 0 ? diff / ref : diff;
}

Tensor run(const CpuModel& model, cpu::SequenceState& state, const std::vector<int32_t>& tokens, bool all) {
    cpu::ForwardInput in;
    in.tokens = &tokens;
    in.all_logits = all;
    return model.forward(state, in);
}

void compare_states(const CpuModel& model, const cpu::SequenceState& a, const cpu::SequenceState& b) {
    const LlmConfig& c = model.config().llm;
    for (int64_t i = 0; i < c.n_layers(); ++i) {
        INFO("layer " << i);
        if (c.layers[i] == LayerKind::kMamba2) {
            CHECK(max_rel(a.mamba[i].conv.data, b.mamba[i].conv.data) <= 1e-5);
            CHECK(max_rel(a.mamba[i].ssm.data, b.mamba[i].ssm.data) <= 1e-4);
        } else if (c.layers[i] == LayerKind::kAttention) {
            CHECK(max_rel(a.kv[i].k, b.kv[i].k) <= 1e-5);
            CHECK(max_rel(a.kv[i].v, b.kv[i].v) <= 1e-5);
        }
    }
    CHECK(a.n_tokens == b.n_tokens);
}

}  // namespace

TEST_CASE("prefill(N) = prefill(k) + decode(N-k) = prefill(k) + prefill(N-k)") {
    const std::string dir = std::string(SURF_FIXTURES_DIR) + "/golden/tiny_fp32";
    auto model = CpuModel::load(dir);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const auto ids = expected.to_i64("text.input_ids");
    const std::vector<int32_t> tokens(ids.begin(), ids.end());
    const int64_t N = static_cast<int64_t>(tokens.size()), chunk = model->config().llm.chunk_size,
                  V = model->config().llm.vocab_size;
    REQUIRE(N > chunk + 2);

    cpu::SequenceState full = model->new_state();
    const Tensor full_logits = run(*model, full, tokens, true);

    for (int64_t k : {chunk / 2 + 1, chunk, N - 1}) {
        INFO("split at k = " << k);
        const std::vector<int32_t> head(tokens.begin(), tokens.begin() + k),
            tail(tokens.begin() + k, tokens.end());

        // prefill(k) + prefill(N-k)
        cpu::SequenceState two = model->new_state();
        run(*model, two, head, false);
        const Tensor tail_logits = run(*model, two, tail, true);
        const std::vector<float> want(full_logits.data.begin() + k * V, full_logits.data.end());
        CHECK(max_rel(tail_logits.data, want) <= 1e-4);
        compare_states(*model, two, full);

        // prefill(k) + decode one token at a time
        cpu::SequenceState stepped = model->new_state();
        run(*model, stepped, head, false);
        std::vector<float> decoded;
        for (int32_t t : tail) {
            const Tensor l = run(*model, stepped, {t}, false);
            decoded.insert(decoded.end(), l.data.begin(), l.data.end());
        }
        CHECK(max_rel(decoded, want) <= 1e-4);
        compare_states(*model, stepped, full);
    }
}
