// The GPU forward pass against the golden fixtures (HF transformers reference, fp32 math over the
// fixture weights): bf16 weights and activations with fp32 accumulation, fp32 residual and SSM state,
// held to the bf16 threshold (logits max|Δ|/max|ref| ≤ 2e-2, as the CPU parity tests), greedy continuations
// compared with the reference (all 32 tokens, image and text prompt, on greedy_bf16, whose every step is
// decisive), and prefill(N) = prefill(k) + decode(N−k) on the GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>

#include <cuda_runtime_api.h>

#include "model/checkpoint/safetensors.h"
#include "model/cpu/cpu_model.h"
#include "model/cuda/gpu_model.h"
#include "model/sampler.h"
#include "tests/gpu/gpu_model_test_util.h"

using namespace surf::model;
using namespace surf::model::cuda;
using surf::gpu_test::golden_fixture;
using surf::gpu_test::max_rel_err;
using surf::gpu_test::pages_for;

namespace {

// n token ids drawn uniformly from a vocabulary of V.
std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t V, int64_t n) {
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(V - 1));
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = tok(rng);
    return t;
}

// One step on two models fed the same rows: their logits (the same row count asserted).
std::pair<std::vector<float>, std::vector<float>> step_both(GpuModel& a, GpuModel& b,
                                                            const std::vector<SeqStep>& step) {
    const int64_t rows_a = a.forward(step), rows_b = b.forward(step);
    REQUIRE(rows_a == rows_b);
    std::pair<std::vector<float>, std::vector<float>> out;
    a.copy_logits_to_host(rows_a, out.first);
    b.copy_logits_to_host(rows_b, out.second);
    REQUIRE(out.first.size() == out.second.size());
    return out;
}

GpuLimits small_limits() {
    GpuLimits L;
    L.max_tokens = 512, L.max_seqs = 8, L.max_slots = 8, L.page_size = 16, L.kv_pages = 256,
    L.max_context = 1024;
    L.max_logit_rows = 256, L.max_image_rows = 512, L.max_tiles = 16;
    return L;
}

// Greedy decode of n tokens from the given last-row logits.
std::vector<int64_t> greedy(GpuModel& model, SeqStep seq, std::vector<float> logits, int n) {
    const int64_t V = model.config().llm.vocab_size;
    std::vector<int64_t> out;
    for (int i = 0; i < n; ++i) {
        const int32_t next = sample_token(logits.data() + logits.size() - V, V, SamplingParams{}, 0);
        out.push_back(next);
        seq.past += static_cast<int64_t>(seq.tokens.size());
        seq.tokens = {next};
        seq.all_logits = false;
        seq.pages = pages_for(seq.past + 1, model.limits().page_size, seq.pages.front());
        model.forward({seq});
        model.copy_logits_to_host(1, logits);
    }
    return out;
}

// Top-1 minus top-2 logit of each greedy step of the reference continuation, relative to the row's
// max |logit|, from the CPU backend (which matches the reference to ~1e-6).
std::vector<double> reference_margins(const std::string& dir, const std::vector<float>& pixels,
                                      const Checkpoint& expected) {
    auto cpu = surf::model::cpu::CpuModel::load(dir);
    Tensor px;
    px.data = pixels;
    px.shape = expected.get("pixel_values").shape;
    const Tensor image = cpu->encode_images(px);
    const auto ids64 = expected.to_i64("input_ids");
    const auto greedy64 = expected.to_i64("greedy_tokens");
    std::vector<int32_t> tokens(ids64.begin(), ids64.end());
    tokens.insert(tokens.end(), greedy64.begin(), greedy64.end() - 1);
    auto state = cpu->new_state();
    surf::model::cpu::ForwardInput in;
    in.tokens = &tokens, in.image_embeds = &image, in.image_token_id = cpu->config().image_context_token_id,
    in.all_logits = true;
    const Tensor logits = cpu->forward(state, in);
    const int64_t V = cpu->config().llm.vocab_size, first = static_cast<int64_t>(ids64.size()) - 1;
    std::vector<double> margins;
    for (size_t i = 0; i < greedy64.size(); ++i) {
        const float* row = logits.ptr() + (first + static_cast<int64_t>(i)) * V;
        float top1 = -INFINITY, top2 = -INFINITY, mx = 0;
        for (int64_t v = 0; v < V; ++v) {
            mx = std::max(mx, std::fabs(row[v]));
            if (row[v] > top1)
                top2 = top1, top1 = row[v];
            else if (row[v] > top2)
                top2 = row[v];
        }
        margins.push_back((top1 - top2) / mx);
    }
    return margins;
}

// The text-only prompt on its own slot and pages: logits within `logit_tol`, then all 32 greedy tokens
// identical to the reference.
void check_text_prompt(GpuModel& model, const std::string& name, const Checkpoint& expected,
                       double logit_tol) {
    const auto ids64 = expected.to_i64("text.input_ids");
    SeqStep seq;
    seq.slot = 1;
    seq.tokens.assign(ids64.begin(), ids64.end());
    const int64_t T = static_cast<int64_t>(seq.tokens.size());
    seq.pages = pages_for(T, model.limits().page_size, 128);  // clear of slot 0's pages
    seq.all_logits = true;
    REQUIRE(model.forward({seq}) == T);
    std::vector<float> logits;
    model.copy_logits_to_host(T, logits);
    const double err = max_rel_err(logits.data(), expected.to_f32("text.logits"));
    MESSAGE(name << " GPU text.logits rel err " << err << " (threshold " << logit_tol << ")");
    CHECK(err <= logit_tol);
    const auto want = expected.to_i64("text.greedy_tokens");
    const auto got = greedy(model, seq, logits, static_cast<int>(want.size()));
    size_t same = 0;
    while (same < want.size() && got[same] == want[same]) ++same;
    MESSAGE(name << " GPU text greedy: first " << same << " of " << want.size()
                 << " tokens identical to the reference");
    CHECK(got == want);
}

// `logit_tol`: the bf16 threshold (2e-2, as the CPU parity tests) for bf16 fixtures; fp32 fixtures also carry
// the rounding of their fp32 weights to bf16 on upload, which the bf16 fixture does not have.
// `require_all_greedy`: the fixture's every reference step has a top-1 − top-2 margin of at least 6% of
// max|logit| (3× the logits threshold), so no bf16 error within the threshold can flip one: all 32 tokens
// of the image and the text prompt must equal the reference's.
void check_fixture(const std::string& name, double logit_tol, bool require_all_greedy = false) {
    const std::string dir = golden_fixture(name);
    auto model = GpuModel::load(dir, small_limits());
    model->keep_layer_outputs(true);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const ModelConfig& cfg = model->config();

    const std::vector<float> pixels = expected.to_f32("pixel_values");
    const int64_t n_tiles = expected.get("pixel_values").shape[0];
    const int64_t rows = model->encode_images(pixels.data(), n_tiles, 0);
    std::vector<float> features;
    model->copy_vision_features(n_tiles, features);
    const double feat_err = max_rel_err(features.data(), expected.to_f32("vision.features"));
    MESSAGE(name << " GPU vision.features rel err " << feat_err);
    CHECK(feat_err <= 2e-2);
    CHECK(rows == expected.get("vision.projected").shape[0]);

    const auto ids64 = expected.to_i64("input_ids");
    SeqStep seq;
    seq.slot = 0;
    seq.tokens.assign(ids64.begin(), ids64.end());
    seq.pages = pages_for(static_cast<int64_t>(seq.tokens.size()), 16, 0);
    seq.image_row = 0;
    seq.all_logits = true;
    const int64_t T = static_cast<int64_t>(seq.tokens.size());
    const int64_t n_rows = model->forward({seq});
    REQUIRE(n_rows == T);
    std::vector<float> logits, layer;
    model->copy_logits_to_host(n_rows, logits);
    for (int64_t i = 0; i < cfg.llm.n_layers(); ++i) {
        model->copy_layer_output(i, T, layer);
        const double e = max_rel_err(layer.data(), expected.to_f32("layers." + std::to_string(i)));
        MESSAGE(name << " GPU layers." << i << " (" << std::string(layer_kind_name(cfg.llm.layers[i]))
                     << ") rel err " << e);
    }
    const double logit_err = max_rel_err(logits.data(), expected.to_f32("logits"));
    MESSAGE(name << " GPU logits rel err " << logit_err << " (threshold " << logit_tol << ")");
    CHECK(logit_err <= logit_tol);

    // Greedy: identical to the reference at every step whose reference margin exceeds twice the GPU's
    // logits error; the first difference is allowed only at a step the bf16 error can flip.
    const auto want = expected.to_i64("greedy_tokens");
    const auto got = greedy(*model, seq, logits, static_cast<int>(want.size()));
    const std::vector<double> margins = reference_margins(dir, pixels, expected);
    size_t same = 0;
    while (same < want.size() && got[same] == want[same]) ++same;
    MESSAGE(name << " GPU greedy: first " << same << " of " << want.size()
                 << " tokens identical to the reference");
    if (same < want.size()) {
        MESSAGE(name << " reference margin at the first difference: " << margins[same]
                     << " of max|logit| (GPU logits error " << logit_err << ")");
        CHECK(margins[same] < 2 * logit_err);
    }
    size_t decisive = 0;  // steps before the first low-margin one
    while (decisive < margins.size() && margins[decisive] >= 2 * logit_err) ++decisive;
    CHECK(same >= decisive);
    if (require_all_greedy) {
        MESSAGE(name << " smallest reference margin: " << *std::min_element(margins.begin(), margins.end())
                     << " of max|logit|");
        CHECK(got == want);
        check_text_prompt(*model, name, expected, logit_tol);
    }
}

}  // namespace

TEST_CASE("GPU forward: tiny fp32 fixture (weights rounded to bf16 on upload)") {
    check_fixture("tiny_fp32", 3e-2);
}
TEST_CASE("GPU forward: small bf16 fixture") {
    check_fixture("small_bf16", 2e-2);
}
TEST_CASE("GPU forward: greedy bf16 fixture (every greedy step decisive)") {
    check_fixture("greedy_bf16", 2e-2, true);
}

// GpuLimits::trailing_layers_on_logit_rows: a prompt that asks for its last row's logits only runs the last
// mixer's output projection and the layers after it on that row. small_bf16 ends "…M-" (the last Mamba
// layer's out_proj and an MLP layer on one row), tiny_fp32 "…-M" (the out_proj only). The row's logits
// against the reference's, off, on, and on with the last Mamba layer's gate z on the logits rows too
// (GpuLimits::last_mamba_gate_on_logit_rows); then the same prompt beside a decode row (two logits rows of
// many), both ways.
void check_trailing_layers(const std::string& name, double logit_tol) {
    const std::string dir = golden_fixture(name);
    auto model = GpuModel::load(dir, small_limits());
    REQUIRE(model->limits().trailing_layers_on_logit_rows);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const std::vector<float> pixels = expected.to_f32("pixel_values");
    model->encode_images(pixels.data(), expected.get("pixel_values").shape[0], 0);
    const auto ids64 = expected.to_i64("input_ids");
    const int64_t T = static_cast<int64_t>(ids64.size()), V = model->config().llm.vocab_size;
    const std::vector<float> all = expected.to_f32("logits");
    const std::vector<float> want(all.end() - V, all.end());
    SeqStep seq;
    seq.tokens.assign(ids64.begin(), ids64.end());
    seq.image_row = 0;
    seq.all_logits = false;
    struct Setting {
        bool trailing, gate;
        int32_t slot, first_page;
        const char* what;
    };
    const Setting settings[] = {{false, false, 2, 128, "every row"},
                                {true, false, 1, 64, "trailing layers on that row only"},
                                {true, true, 4, 160, "trailing layers and the last gate on that row only"}};
    auto set = [&](const Setting& s) {
        GpuLimits knobs = model->limits();
        knobs.trailing_layers_on_logit_rows = s.trailing, knobs.last_mamba_gate_on_logit_rows = s.gate;
        model->set_step_options(knobs);
    };
    std::vector<float> logits[3];
    for (int i = 0; i < 3; ++i) {
        set(settings[i]);
        seq.slot = settings[i].slot, seq.pages = pages_for(T, 16, settings[i].first_page);
        REQUIRE(model->forward({seq}) == 1);
        model->copy_logits_to_host(1, logits[i]);
        const double err = max_rel_err(logits[i].data(), want),
                     vs_all = max_rel_err(logits[i].data(), logits[0]);
        MESSAGE(name << " last row's logits, " << std::string(settings[i].what) << ": rel err " << err
                     << " (threshold " << logit_tol << "), vs every row " << vs_all);
        CHECK(err <= logit_tol);
        CHECK(vs_all <= logit_tol / 2);
    }

    // Mixed: the next token as a decode row beside the prompt again on a fresh slot (logits rows: the decode
    // row and the prompt's last, of T + 1 rows), against the same decode row alone on slot 2 (a decode-only
    // step runs every row).
    const int32_t next = sample_token(logits[1].data(), V, SamplingParams{}, 0);
    set(settings[0]);
    SeqStep dec;
    dec.slot = 2, dec.past = T, dec.tokens = {next}, dec.pages = pages_for(T + 1, 16, 128);
    REQUIRE(model->forward({dec}) == 1);
    std::vector<float> alone, mixed;
    model->copy_logits_to_host(1, alone);
    for (int i = 1; i < 3; ++i) {
        set(settings[i]);
        dec.slot = settings[i].slot, dec.pages = pages_for(T + 1, 16, settings[i].first_page);
        seq.slot = i == 1 ? 3 : 5, seq.pages = pages_for(T, 16, i == 1 ? 192 : 224);
        REQUIRE(model->forward({dec, seq}) == 2);
        model->copy_logits_to_host(2, mixed);
        const double dec_err = max_rel_err(mixed.data(), alone),
                     pre_err = max_rel_err(mixed.data() + V, want);
        MESSAGE(name << " mixed step, " << std::string(settings[i].what) << " (2 logits rows of " << T + 1
                     << "): decode row vs alone " << dec_err << ", prompt's last row vs reference "
                     << pre_err);
        CHECK(dec_err <= logit_tol / 2);
        CHECK(pre_err <= logit_tol);
    }
}

TEST_CASE(
    "GPU trailing layers on the logits rows only: small bf16 fixture (last Mamba gate and out_proj, last "
    "MLP)") {
    check_trailing_layers("small_bf16", 2e-2);
}
TEST_CASE("GPU trailing layers on the logits rows only: tiny fp32 fixture (last Mamba gate and out_proj)") {
    check_trailing_layers("tiny_fp32", 3e-2);
}

TEST_CASE("GPU sessions: prefill(N) = prefill(k) + decode(N-k), batched with another sequence") {
    const std::string dir = golden_fixture("small_bf16");
    auto model = GpuModel::load(dir, small_limits());
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const auto ids64 = expected.to_i64("text.input_ids");
    const std::vector<int32_t> tokens(ids64.begin(), ids64.end());
    const int64_t N = static_cast<int64_t>(tokens.size()), V = model->config().llm.vocab_size;

    SeqStep full;
    full.slot = 0, full.tokens = tokens, full.pages = pages_for(N, 16, 0), full.all_logits = true;
    model->forward({full});
    std::vector<float> want;
    model->copy_logits_to_host(N, want);

    // Slot 1: prefill k tokens, then decode the rest one at a time, batched with a prefill on slot 2.
    const int64_t k = 37;
    SeqStep head;
    head.slot = 1, head.tokens.assign(tokens.begin(), tokens.begin() + k), head.pages = pages_for(N, 16, 100);
    SeqStep other;
    other.slot = 2, other.tokens.assign(tokens.begin(), tokens.begin() + 20),
    other.pages = pages_for(20, 16, 200);
    model->forward({head, other});
    std::vector<float> got;
    double worst = 0;
    for (int64_t t = k; t < N; ++t) {
        SeqStep dec;
        dec.slot = 1, dec.past = t, dec.tokens = {tokens[t]}, dec.pages = pages_for(N, 16, 100);
        SeqStep pre;  // a prefill row in the same batch: a 2-token continuation of slot 2
        pre.slot = 2, pre.past = 20 + 2 * (t - k),
        pre.tokens = {tokens[(t - k) % N], tokens[(t - k + 1) % N]};
        pre.pages = pages_for(pre.past + 2, 16, 200);
        model->forward({dec, pre});
        model->copy_logits_to_host(2, got);
        const std::vector<float> row(want.begin() + t * V, want.begin() + (t + 1) * V);
        worst = std::max(worst, max_rel_err(got.data(), row));
    }
    MESSAGE("GPU prefill(k) + decode(N-k) vs prefill(N): worst logits rel err " << worst);
    CHECK(worst <= 2e-2);
}

TEST_CASE(
    "GPU long prompt: chunked prefill (1024, 2048, 48 tokens a step) ends in the whole prompt's logits") {
    // A 3,284-token prompt, as the agent's first policy call on the tiny model: chunk boundaries far into
    // the context (past up to 3,072), SSD chunks of 16, every layer kind. The steps are queued back to back,
    // so the per-step metadata staging buffer must not be rewritten for the next step while the previous
    // step's upload from it is still queued (that gives NaN logits at 1,024-token chunks).
    const std::string dir = golden_fixture("tiny_fp32");
    GpuLimits L;
    L.max_tokens = 4096, L.max_seqs = 8, L.max_slots = 8, L.page_size = 16, L.kv_pages = 1024,
    L.max_context = 8192;
    L.max_logit_rows = 16, L.max_image_rows = 512, L.max_tiles = 16;
    auto model = GpuModel::load(dir, L);
    const int64_t N = 3284, V = model->config().llm.vocab_size;
    std::mt19937 rng(7);
    std::vector<int32_t> tokens(N);
    for (auto& t : tokens) t = static_cast<int32_t>(rng() % 1000);
    std::vector<float> want;
    int32_t slot = 0;
    for (int64_t chunk : {N, int64_t{2048}, int64_t{1024}, int64_t{48}}) {
        const std::vector<int32_t> pages = pages_for(N, 16, 256 * slot);
        std::vector<float> got;
        for (int64_t past = 0; past < N; past += chunk) {
            SeqStep s;
            s.slot = slot, s.past = past, s.pages = pages;
            s.tokens.assign(tokens.begin() + past, tokens.begin() + std::min(N, past + chunk));
            // No synchronisation between the steps (only the last one is read back), as when the engine
            // prefills a long prompt alone: steps without sampled rows follow each other back to back.
            const bool last = past + chunk >= N;
            model->keep_layer_outputs(last);
            model->forward({s});
            if (!last) continue;
            model->copy_logits_to_host(1, got);
            // Where a non-finite value first appears, if any (diagnostics for a failure).
            for (int64_t layer = 0; layer < model->config().llm.n_layers(); ++layer) {
                std::vector<float> h;
                model->copy_layer_output(layer, static_cast<int64_t>(s.tokens.size()), h);
                const auto bad = std::find_if(h.begin(), h.end(), [](float v) { return !std::isfinite(v); });
                if (bad != h.end()) {
                    MESSAGE("chunks of "
                            << chunk << ": first non-finite value after layer " << layer << " at token "
                            << (bad - h.begin()) / model->config().llm.hidden_size << " of the last chunk");
                    break;
                }
            }
        }
        if (chunk == N) {
            want = got;
        } else {
            const double err = max_rel_err(got.data(), want);
            MESSAGE("prefill in chunks of " << chunk << " vs whole: last logits rel err " << err);
            CHECK(err <= 2e-2);
        }
        ++slot;
    }
    REQUIRE(want.size() == static_cast<size_t>(V));
    CHECK(std::all_of(want.begin(), want.end(), [](float v) { return std::isfinite(v); }));
}

TEST_CASE(
    "GPU warm-up: tunes the decode buckets' and the prefill chunk's GEMMs, leaves real sequences alone") {
    // Tuning needs random-access candidates, so autotuning on (small_limits leaves it at its default, on).
    const std::string dir = golden_fixture("small_bf16");
    auto model = GpuModel::load(dir, small_limits());
    REQUIRE(model->limits().autotune_gemms);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const auto ids64 = expected.to_i64("text.input_ids");
    const std::vector<int32_t> tokens(ids64.begin(), ids64.end());
    const int64_t N = static_cast<int64_t>(tokens.size());
    auto last_logits = [&](int32_t slot) {
        SeqStep s;
        s.slot = slot, s.tokens = tokens, s.pages = pages_for(N, 16, 64 * slot);
        model->forward({s});
        std::vector<float> got;
        model->copy_logits_to_host(1, got);
        return got;
    };
    const std::vector<float> before = last_logits(0);
    const double seconds = model->warm_up(256);
    MESSAGE("warm-up: " << seconds << " s, " << model->gemm_tune_totals().first << " GEMM shapes tuned");
    CHECK(model->gemm_tune_totals().first > 0);
    // The warm-up's steps ran on the scratch slot and page only: the same prompt on another slot gives the
    // same logits (up to the tuned algorithms' summation order).
    CHECK(max_rel_err(last_logits(1).data(), before) <= 1e-2);
    // Decode steps at a batch bucket (here 4 rows, padded from 3), a 256-row prefill step and a 192-row one
    // (the top of the 64-row bucket below it, which the warm-up tunes too) tune nothing.
    const int64_t tuned = model->gemm_tune_totals().first;
    std::vector<SeqStep> rows;
    for (int32_t slot : {0, 1}) {
        SeqStep d;
        d.slot = slot, d.past = N, d.tokens = {tokens[0]}, d.pages = pages_for(N + 1, 16, 64 * slot);
        rows.push_back(d);
    }
    model->forward(rows);
    SeqStep pre;
    pre.slot = 2, pre.tokens.assign(256, 5), pre.pages = pages_for(256, 16, 128);
    for (int i = 0; i < 3; ++i) model->forward({pre});
    SeqStep part;
    part.slot = 3, part.tokens.assign(192, 7), part.pages = pages_for(192, 16, 192);
    for (int i = 0; i < 3; ++i) model->forward({part});
    CHECK(model->gemm_tune_totals().first == tuned);
    // Nor does a mixed step of 256 rows with 3 logits rows (two decode rows and a prompt ending in it): the
    // trailing layers past the last mixer run on those rows, as GEMMs over 8 rows (LogitRows::gemm_rows),
    // which the warm-up tuned.
    REQUIRE(model->limits().trailing_layers_on_logit_rows);
    std::vector<SeqStep> mixed = rows;
    for (SeqStep& d : mixed) d.past += 1, d.pages = pages_for(N + 2, 16, 64 * d.slot);
    SeqStep prompt;
    prompt.slot = 4, prompt.tokens.assign(254, 9), prompt.pages = pages_for(254, 16, 240);
    mixed.push_back(prompt);
    for (int i = 0; i < 3; ++i) {
        model->forward(mixed);
        for (SeqStep& d : mixed) {
            if (d.slot != 4) d.past += 1, d.pages = pages_for(d.past + 1, 16, 64 * d.slot);
        }
    }
    CHECK(model->gemm_tune_totals().first == tuned);
}

TEST_CASE(
    "GPU mixed steps: the prefill rows' branches on a second stream give the same logits, bit for bit") {
    // GpuLimits::overlap_mamba_branches / overlap_attention_branches only move the prefill rows' conv, SSD
    // scan and attention to another stream (ordered by events): the same kernels on the same data. GEMM
    // algorithms from the heuristic (no tuning) so both models run identical GEMMs.
    const std::string dir = golden_fixture("small_bf16");
    GpuLimits L = small_limits();
    L.autotune_gemms = false;
    auto serial = GpuModel::load(dir, L);
    L.overlap_mamba_branches = L.overlap_attention_branches = true;
    auto overlapped = GpuModel::load(dir, L);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const auto ids64 = expected.to_i64("text.input_ids");
    const std::vector<int32_t> tokens(ids64.begin(), ids64.end());
    const int64_t N = static_cast<int64_t>(tokens.size()), V = serial->config().llm.vocab_size;
    REQUIRE(N > 40);

    // Slots 0 and 1 start with prompts; then each step decodes slot 0 and slot 2 while slot 1 prefills
    // 3 more tokens (decode rows first, as forward requires).
    std::vector<SeqStep> step;
    for (int32_t slot : {0, 1, 2}) {
        SeqStep s;
        s.slot = slot, s.tokens.assign(tokens.begin(), tokens.begin() + 20 + 5 * slot),
        s.pages = pages_for(N + 64, 16, 100 * slot);
        step.push_back(s);
    }
    int64_t past[3] = {20, 25, 30};
    int64_t steps_compared = 0;
    for (int it = 0; it < 6; ++it) {
        const auto [a, b] = step_both(*serial, *overlapped, step);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        CHECK(std::all_of(a.begin(), a.end(), [](float v) { return std::isfinite(v); }));
        ++steps_compared;
        // Next step: decode rows for slots 0 and 2 (their greedy-free next token: the prompt's), then 3
        // tokens of slot 1.
        step.clear();
        for (int32_t slot : {0, 2}) {
            SeqStep d;
            d.slot = slot, d.past = past[slot], d.tokens = {tokens[past[slot] % N]},
            d.pages = pages_for(N + 64, 16, 100 * slot);
            past[slot] += 1;
            step.push_back(d);
        }
        SeqStep pre;
        pre.slot = 1, pre.past = past[1], pre.pages = pages_for(N + 64, 16, 100);
        for (int j = 0; j < 3; ++j) pre.tokens.push_back(tokens[(past[1] + j) % N]);
        past[1] += 3;
        step.push_back(pre);
    }
    MESSAGE("mixed steps compared bit for bit: " << steps_compared << " (" << V << " logits per row)");
}

TEST_CASE(
    "GPU mixed steps: the attention pair on split SMs (green contexts, TMA decode) matches the pair on "
    "shared SMs") {
    // GpuLimits::attention_green_decode_sms runs a mixed step's decode attention on the TMA kernel on its own
    // SMs and the prefill attention on the rest: other kernels, split plans and summation orders than the
    // shared pair, so the logits agree to bf16 rounding, not bit for bit. The TMA kernel needs head_dim 128:
    // the small fixture's shapes with head_dim 128 and random weights (both models from one seed).
    ModelConfig cfg = load_model_config(golden_fixture("small_bf16"));
    cfg.llm.head_dim = 128;
    GpuLimits L = small_limits();
    L.autotune_gemms = false;
    L.attention_green_decode_sms = 0;
    auto shared = GpuModel::random(cfg, L, 11);
    L.attention_green_decode_sms = 16;
    auto split = GpuModel::random(cfg, L, 11);
    const int64_t V = cfg.llm.vocab_size;
    std::mt19937 rng(3);
    auto tokens = [&](int64_t n) { return random_tokens(rng, V, n); };
    // Slots 0–3 start with prompts of 300–480 tokens (several decode splits); then each step decodes slots 0,
    // 2, 3 while slot 1 prefills 40 more tokens.
    std::vector<SeqStep> step;
    int64_t past[4] = {0, 0, 0, 0};
    for (int32_t slot = 0; slot < 4; ++slot) {
        SeqStep s;
        s.slot = slot, s.tokens = tokens(300 + 60 * slot), s.pages = pages_for(1000, 16, 64 * slot);
        past[slot] = static_cast<int64_t>(s.tokens.size());
        REQUIRE(shared->forward({s}) == split->forward({s}));
    }
    double worst = 0;
    for (int it = 0; it < 4; ++it) {
        step.clear();
        for (int32_t slot : {0, 2, 3}) {
            SeqStep d;
            d.slot = slot, d.past = past[slot], d.tokens = tokens(1),
            d.pages = pages_for(1000, 16, 64 * slot);
            past[slot] += 1;
            step.push_back(d);
        }
        SeqStep pre;
        pre.slot = 1, pre.past = past[1], pre.tokens = tokens(40), pre.pages = pages_for(1000, 16, 64);
        past[1] += 40;
        step.push_back(pre);
        const auto [a, b] = step_both(*shared, *split, step);
        const double err = max_rel_err(b.data(), a);
        worst = std::max(worst, err);
        CHECK(err < 2e-2);
    }
    cudaDeviceProp prop{};
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    if (prop.major == 9 && prop.minor == 0) {
        CHECK(split->green_attention_pairs() == 4 * 2);  // 4 mixed steps × the fixture's 2 attention layers
    } else {
        CHECK(split->green_attention_pairs() == 0);  // no TMA decode here: the shared pair ran
    }
    MESSAGE("split-SM pair against the shared pair: logits max rel err " << worst << ", pairs on split SMs "
                                                                         << split->green_attention_pairs());
}

TEST_CASE("GPU warm-up measures the attention pair on split SMs, and its mixed steps match the shared pair") {
    // GpuLimits::attention_green_decode_sms = −1 (auto): warm_up times the shared pair and each split count
    // on a 100-row decode beside a prefill chunk (GpuModel::calibrate_attention_split); each mixed step then
    // takes the count its model predicts fastest, or shares the SMs. Timings on these small shapes say
    // nothing about speed: the test checks that the measurement ran and is sane, and that mixed steps after
    // it agree with a model that never splits.
    ModelConfig cfg = load_model_config(golden_fixture("small_bf16"));
    cfg.llm.head_dim = 128;
    GpuLimits L = small_limits();
    L.autotune_gemms = false;
    L.max_tokens = 1024, L.max_seqs = 128, L.max_slots = 128, L.kv_pages = 8192, L.max_context = 4096;
    L.attention_green_decode_sms = 0;
    auto shared = GpuModel::random(cfg, L, 13);
    L.attention_green_decode_sms = -1;
    auto split = GpuModel::random(cfg, L, 13);
    split->warm_up(1024, false);
    cudaDeviceProp prop{};
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    const AttentionSplitModel& m = split->attention_split_model();
    MESSAGE("warm-up: " << split->attention_split_report());
    if (prop.major == 9 && prop.minor == 0) {
        REQUIRE(m.measured);
        CHECK(m.decode_bytes_per_s > 1e10);
        CHECK(m.prefill_flops_per_s > 1e11);
        CHECK(m.shared_prefill_share >= 0.0);
        CHECK(m.shared_prefill_share <= 1.0);
        const auto counts = split->attention_split_counts();
        CHECK(!counts.empty());
        for (const auto& [sms, k] : counts) {
            CHECK(sms >= 40);
            CHECK(sms + 16 <= prop.multiProcessorCount);
            CHECK(k.measured);
            CHECK(k.split_us > 0);
            CHECK(k.shared_us > 0);
            CHECK(k.decode_factor > 0.5);  // fewer SMs than all: not much faster than on all of them
            CHECK(k.prefill_factor > 0.5);
            CHECK(k.overhead > 0.5);
        }
        CHECK(split->green_attention_pairs() == 0);  // the calibration's launches are not counted as steps'
    } else {
        CHECK(!m.measured);  // no TMA decode here: nothing to split
        CHECK(split->attention_split_report().empty());
    }
    // Mixed steps after the warm-up: 24 decode rows on ≈ 600 keys beside a 300-token chunk; whichever way the
    // split model chose, the logits agree with the shared model's to bf16 rounding.
    const int64_t V = cfg.llm.vocab_size;
    std::mt19937 rng(5);
    auto tokens = [&](int64_t n) { return random_tokens(rng, V, n); };
    std::vector<SeqStep> prompts;
    for (int32_t slot = 0; slot < 25; ++slot) {
        SeqStep s;
        s.slot = slot, s.tokens = tokens(slot == 24 ? 200 : 600), s.pages = pages_for(1200, 16, 80 * slot);
        prompts.push_back(s);
        REQUIRE(shared->forward({s}) == split->forward({s}));
    }
    double worst = 0;
    for (int it = 0; it < 2; ++it) {
        std::vector<SeqStep> step;
        for (int32_t slot = 0; slot < 24; ++slot) {
            SeqStep d = prompts[slot];
            d.past = 600 + it, d.tokens = tokens(1);
            step.push_back(d);
        }
        SeqStep pre = prompts[24];
        pre.past = 200 + 300 * it, pre.tokens = tokens(300);
        step.push_back(pre);
        const auto [a, b] = step_both(*shared, *split, step);
        const double err = max_rel_err(b.data(), a);
        worst = std::max(worst, err);
        CHECK(err < 2e-2);
    }
    MESSAGE("after the warm-up: logits max rel err "
            << worst << " against the shared pair, pairs on split SMs " << split->green_attention_pairs());
}
