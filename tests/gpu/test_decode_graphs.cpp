// Decode-only steps replayed from CUDA graphs (padded batches, scratch slot and page for the padding rows)
// against the same steps run kernel by kernel: same logits and states within the bf16 noise of different
// GEMM shapes, and sessions outside the batch left bit-identical (the padding rows never touch them).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/checkpoint/safetensors.h"
#include "model/cuda/gpu_model.h"
#include "model/sampler.h"
#include "tests/gpu/gpu_model_test_util.h"

using namespace surf::model;
using namespace surf::model::cuda;
using surf::gpu_test::golden_fixture;
using surf::gpu_test::max_rel_err;
using surf::gpu_test::pages_for;

namespace {

std::vector<uint8_t> slot_bytes(GpuModel& m, int32_t slot) {  // (save_slot folds pending replay tokens)
    std::vector<uint8_t> bytes;
    m.save_slot(slot, bytes);
    return bytes;
}

}  // namespace

TEST_CASE("decode graphs: graph steps match kernel-by-kernel steps; idle sessions untouched") {
    const std::string dir = golden_fixture("small_bf16");
    GpuLimits L;
    L.max_tokens = 512, L.max_seqs = 16, L.max_slots = 8, L.page_size = 16, L.kv_pages = 512,
    L.max_context = 1024;
    L.max_logit_rows = 64, L.max_image_rows = 512, L.max_tiles = 4;
    GpuLimits no_graphs = L;
    no_graphs.decode_graphs = false;
    auto with = GpuModel::load(dir, L);
    auto without = GpuModel::load(dir, no_graphs);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const auto ids64 = expected.to_i64("text.input_ids");
    const std::vector<int32_t> prompt(ids64.begin(), ids64.end());
    const int64_t V = with->config().llm.vocab_size;

    // Six sessions with prompts of different lengths (slots 0..5, 64 pages each); slot 5 stays idle.
    const int n_sessions = 6;
    std::vector<SeqStep> seqs;
    for (int i = 0; i < n_sessions; ++i) {
        SeqStep s;
        s.slot = i,
        s.tokens.assign(prompt.begin(), prompt.begin() + static_cast<long>(prompt.size()) - 3 * i);
        s.pages = pages_for(1024, 16, 64 * i);
        seqs.push_back(s);
    }
    for (GpuModel* m : {with.get(), without.get()}) m->forward(seqs);
    std::vector<float> logits;
    without->copy_logits_to_host(n_sessions, logits);
    std::vector<int32_t> next(n_sessions);
    for (int i = 0; i < n_sessions; ++i)
        next[i] = sample_token(logits.data() + i * V, V, SamplingParams{}, 0);
    for (int i = 0; i < n_sessions; ++i) seqs[i].past = static_cast<int64_t>(seqs[i].tokens.size());
    const std::vector<uint8_t> idle_before = slot_bytes(*with, 5);

    // Decode-only steps over 5, then 3, then 1 of the sessions (padded to 8, 4 and 1 rows in the graph
    // model); the tokens fed are the kernel-by-kernel model's greedy choices, for both models.
    double worst = 0;
    for (int step = 0; step < 12; ++step) {
        const int batch = step < 4 ? 5 : step < 8 ? 3 : 1;
        std::vector<SeqStep> dec;
        for (int i = 0; i < batch; ++i) {
            SeqStep s = seqs[i];
            s.tokens = {next[i]};
            dec.push_back(s);
        }
        std::vector<float> a, b;
        REQUIRE(with->forward(dec) == batch);
        with->copy_logits_to_host(batch, a);
        REQUIRE(without->forward(dec) == batch);
        without->copy_logits_to_host(batch, b);
        const double err = max_rel_err(a.data(), b);
        worst = std::max(worst, err);
        for (int i = 0; i < batch; ++i) {
            next[i] = sample_token(b.data() + i * V, V, SamplingParams{}, 0);
            seqs[i].past += 1;
        }
    }
    MESSAGE("decode graphs: " << with->decode_graphs_captured() << " graphs captured, "
                              << with->decode_graph_launches()
                              << " launches; worst logits rel err vs kernel-by-kernel " << worst);
    CHECK(with->decode_graphs_captured() == 3);
    CHECK(with->decode_graph_launches() == 9);  // each shape's first step runs kernel by kernel
    CHECK(without->decode_graph_launches() == 0);
    CHECK(worst <= 1e-2);
    // The idle session's state (conv + SSM) is bit-identical after twelve padded graph steps.
    CHECK(slot_bytes(*with, 5) == idle_before);
}
