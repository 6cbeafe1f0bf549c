// The CUDA engine (continuous batching, state slots, paged KV, offload, image cache, GPU sampling)
// against the golden fixtures and against itself under concurrency and memory pressure.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/error.h"
#include "model/checkpoint/safetensors.h"
#include "model/cuda/cuda_engine.h"
#include "model/engine.h"
#include "model/text/chat_template.h"
#include "tests/engine_contract.h"
#include "tests/test_util.h"

using namespace surf::model;

namespace {

std::string fixture(const std::string& name) {
    return std::string(SURF_FIXTURES_DIR) + "/golden/" + name;
}

cuda::CudaEngineOptions small_options(int64_t slots = 8) {
    cuda::CudaEngineOptions o;
    o.limits.max_tokens = 512, o.limits.max_seqs = 16, o.limits.max_slots = slots, o.limits.page_size = 16;
    // An odd number of logits rows: the sampler's per-row parameter arrays must stay aligned for any count.
    o.limits.kv_pages = 512, o.limits.max_context = 2048, o.limits.max_logit_rows = 33,
    o.limits.max_image_rows = 1024;
    o.limits.max_tiles = 16;
    // GEMM autotuning picks algorithms by timing, so two engines may round differently; these tests compare
    // engines token for token, so every engine here uses cuBLASLt's heuristic choice.
    o.limits.autotune_gemms = false;
    o.prefill_chunk = 48;  // small chunks: prompts cross several steps
    return o;
}

GenerateOptions greedy(int n) {
    GenerateOptions g;
    g.max_tokens = n;
    g.ignore_eos = true;
    return g;
}

// The fixture's chat-template prompt with its image, and the reference greedy continuation.
struct ImagePrompt {
    std::string rendered;
    std::vector<std::shared_ptr<const Image>> images;
    std::vector<int64_t> want;
    int64_t input_ids = 0;
};

ImagePrompt image_prompt(const std::string& dir) {
    std::ifstream mf(dir + "/manifest.json");
    const auto manifest = nlohmann::ordered_json::parse(mf);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    ImagePrompt p;
    p.rendered = ChatTemplate::from_model_dir(dir).render(manifest["prompt"]["messages"]);
    p.images = {std::make_shared<Image>(load_image(dir + "/image.png"))};
    p.want = expected.to_i64("greedy_tokens");
    p.input_ids = expected.get("input_ids").numel();
    return p;
}

// How many leading tokens of `got` are the reference's.
size_t leading_matches(const std::vector<int32_t>& got, const std::vector<int64_t>& want) {
    size_t same = 0;
    while (same < want.size() && same < got.size() && got[same] == want[same]) ++same;
    return same;
}

}  // namespace

TEST_CASE("CUDA engine: chat template + image prompt, chunked prefill, greedy continuation") {
    const std::string dir = fixture("tiny_fp32");
    auto engine = cuda::open_cuda_engine(dir, small_options());
    const ImagePrompt prompt = image_prompt(dir);
    const SessionId s = engine->open_session();
    const GenerateResult r =
        engine->generate(s, interleave_images(prompt.rendered, prompt.images), greedy(32));
    CHECK(r.prefill_tokens == prompt.input_ids);
    const size_t same = leading_matches(r.tokens, prompt.want);
    MESSAGE("CUDA engine greedy: " << same
                                   << " of 32 tokens identical to the reference (tiny_fp32, bf16 weights)");
    CHECK(same == prompt.want.size());
}

TEST_CASE(
    "CUDA engine: vision batches across steps (min tiles, max wait) serve every image; warm-up of vision "
    "passes") {
    // A tile minimum no queue reaches: images go through the tower only when their wait runs out or a step
    // has nothing to prefill, so an image request must still finish while text prompts keep the steps busy.
    const std::string dir = fixture("tiny_fp32");
    cuda::CudaEngineOptions o = small_options();
    o.vision_min_tiles = 1000, o.vision_max_wait_steps = 2;
    o.warm_up_vision_batches = {{1}, {2, 1}};
    for (const std::vector<std::vector<int64_t>>& bad :
         {std::vector<std::vector<int64_t>>{{}}, {{0}}, {{3, 14}}}) {  // max_tiles is 16
        cuda::CudaEngineOptions wrong = o;
        wrong.warm_up_vision_batches = bad;
        CHECK_THROWS_AS(cuda::open_cuda_engine(dir, wrong), surf::Error);
    }
    auto engine = cuda::open_cuda_engine(dir, o);
    CHECK(engine->stats().warm_up_seconds > 0.0);
    const ImagePrompt prompt = image_prompt(dir);
    // Alone: nothing else to prefill, so the image is encoded at once; the result is the reference's.
    const SessionId alone = engine->open_session();
    const GenerateResult a =
        engine->generate(alone, interleave_images(prompt.rendered, prompt.images), greedy(32));
    CHECK(leading_matches(a.tokens, prompt.want) == prompt.want.size());
    // Beside two long text prompts (prefill chunks of 48 tokens keep every step busy): the image waits at
    // most 2 steps. The image is new to the cache (a copy with one pixel changed), so it is encoded again.
    auto changed = std::make_shared<Image>(*prompt.images[0]);
    changed->pixels[0] ^= 1;
    std::vector<std::shared_ptr<const Image>> other = {changed};
    std::string long_text;
    for (int i = 0; i < 40; ++i) long_text += "<SPECIAL_11>User\nitem " + std::to_string(i) + " again\n";
    GenerateResult image_result, text_results[2];
    std::thread t_image([&] {
        image_result =
            engine->generate(engine->open_session(), interleave_images(prompt.rendered, other), greedy(32));
    });
    std::thread t0([&] {
        text_results[0] =
            engine->generate(engine->open_session(), {InputPart::of_text(long_text)}, greedy(8));
    });
    std::thread t1([&] {
        text_results[1] =
            engine->generate(engine->open_session(), {InputPart::of_text(long_text + " more")}, greedy(8));
    });
    t_image.join(), t0.join(), t1.join();
    CHECK(image_result.tokens.size() == 32);
    CHECK(text_results[0].tokens.size() == 8);
    CHECK(text_results[1].tokens.size() == 8);
    const EngineStats st = engine->stats();
    CHECK(st.vision_batches >= 2);
    MESSAGE("vision batching across steps: " << st.vision_batches << " vision passes, " << st.steps
                                             << " steps; the batched image request "
                                             << leading_matches(image_result.tokens, prompt.want)
                                             << " of 32 tokens as the reference (one pixel differs)");
}

TEST_CASE("CUDA engine: offload/restore is exact; concurrent batching keeps sessions apart") {
    const std::string dir = fixture("small_bf16");
    std::vector<std::string> prompts;
    for (int i = 0; i < 12; ++i)
        prompts.push_back("<SPECIAL_11>User\nsession " + std::to_string(i) + " asks about item " +
                          std::to_string(i * 7) + "\n<SPECIAL_11>Assistant\n");
    auto two_turns = [&](Engine& engine, SessionId id, size_t i, int turn) {
        return engine.generate(id, {InputPart::of_text(turn == 0 ? prompts[i] : " and then?")}, greedy(12))
            .tokens;
    };
    // Alone: one session at a time, both turns back to back, plenty of slots.
    std::vector<std::vector<int32_t>> alone(prompts.size());
    {
        auto engine = cuda::open_cuda_engine(dir, small_options(16));
        for (size_t i = 0; i < prompts.size(); ++i) {
            const SessionId s = engine->open_session();
            alone[i] = two_turns(*engine, s, i, 0);
            const auto b = two_turns(*engine, s, i, 1);
            alone[i].insert(alone[i].end(), b.begin(), b.end());
            engine->close_session(s);
        }
    }
    // Offload: the same requests one at a time (so every step has the same shape as above), turn 1 for
    // all sessions, then turn 2 for all, with 4 state slots for 12 sessions: each session is moved to host
    // memory between its turns and restored. A byte copy must change nothing: all 12 identical.
    {
        auto engine = cuda::open_cuda_engine(dir, small_options(4));
        std::vector<SessionId> ids;
        std::vector<std::vector<int32_t>> out(prompts.size());
        for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(engine->open_session());
        for (int turn = 0; turn < 2; ++turn)
            for (size_t i = 0; i < prompts.size(); ++i) {
                const auto t = two_turns(*engine, ids[i], i, turn);
                out[i].insert(out[i].end(), t.begin(), t.end());
            }
        const EngineStats st = engine->stats();
        MESSAGE("sequential with 4 slots: offloads " << st.offloads << ", restores " << st.restores);
        CHECK(st.offloads >= 8);
        CHECK(st.restores >= 8);
        for (size_t i = 0; i < prompts.size(); ++i) CHECK(out[i] == alone[i]);
    }
    // Concurrent: 12 threads at once share batched steps (and are offloaded under the 4-slot limit).
    // Batched prefill splits prompts into different chunks than alone, which moves logits by ~1e-3
    // (bf16 tensor-core SSD); near-tied greedy choices of this random model can flip. A session mixed up
    // with another (wrong slot, wrong pages) would differ from its alone run in every case, so most
    // sessions must still be identical.
    auto engine = cuda::open_cuda_engine(dir, small_options(4));
    std::vector<std::vector<int32_t>> together(prompts.size());
    std::vector<SessionId> ids;
    for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(engine->open_session());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < prompts.size(); ++i) {
        threads.emplace_back([&, i] {
            together[i] = two_turns(*engine, ids[i], i, 0);
            const auto b = two_turns(*engine, ids[i], i, 1);
            together[i].insert(together[i].end(), b.begin(), b.end());
        });
    }
    for (auto& t : threads) t.join();
    const EngineStats st = engine->stats();
    MESSAGE("concurrent with 4 slots: offloads " << st.offloads << ", restores " << st.restores << ", steps "
                                                 << st.steps);
    CHECK(st.offloads > 0);
    int identical = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        identical += together[i] == alone[i];
        CHECK(together[i].size() == 24);
        // The first token of each session comes from its own prompt: same as alone unless near-tied.
    }
    MESSAGE(identical << " of " << prompts.size() << " sessions identical between batched and alone");
    CHECK(identical >= 8);
}

TEST_CASE("CUDA engine: JSON-schema output, fork, stop tokens, errors") {
    auto engine = cuda::open_cuda_engine(fixture("tiny_fp32"), small_options());
    const auto schema = compile_json_schema_text(
        R"({"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":1000},
        "y":{"type":"integer","minimum":0,"maximum":1000}},"required":["x","y"]})");
    const SessionId s = engine->open_session();
    GenerateOptions g;
    g.max_tokens = 40;
    g.schema = schema;
    g.sampling.temperature = 1.0f;
    g.sampling.seed = 3;
    const GenerateResult r = engine->generate(
        s, {InputPart::of_text("<SPECIAL_11>User\nclick the button\n<SPECIAL_11>Assistant\n")}, g);
    INFO("output: " << r.text);
    const auto j = nlohmann::json::parse(r.text);
    CHECK(j["x"].get<int>() >= 0);
    CHECK(j["y"].get<int>() <= 1000);
    CHECK(r.finish == FinishReason::kStop);

    const SessionId f = engine->fork_session(s);
    const auto a = engine->generate(f, {InputPart::of_text(" next")}, greedy(6)).tokens;
    const auto b = engine->generate(s, {InputPart::of_text(" next")}, greedy(6)).tokens;
    CHECK(a == b);
    CHECK_THROWS_AS(engine->generate(999, {InputPart::of_text("x")}, greedy(2)), surf::Error);
    CHECK_THROWS_AS(engine->generate(s, {InputPart::of_tokens({1 << 30})}, greedy(2)), surf::Error);
}

TEST_CASE(
    "CUDA engine: max_tokens 0 prefills only: nothing sampled, nothing pending, the next call continues from "
    "the input") {
    auto engine = cuda::open_cuda_engine(fixture("tiny_fp32"), small_options());
    surf::test::check_max_tokens_zero_prefills_only(*engine);
}

TEST_CASE(
    "CUDA engine: steps issued ahead of the previous step's tokens match steps that wait for them; a stop "
    "id's token stays in the session") {
    const std::string dir = fixture("small_bf16");
    cuda::CudaEngineOptions wait_o = small_options(), ahead_o = small_options();
    wait_o.issue_ahead = false, ahead_o.issue_ahead = true;
    auto waits = cuda::open_cuda_engine(dir, wait_o);
    auto ahead = cuda::open_cuda_engine(dir, ahead_o);
    // One session at a time, so both engines run the same steps (prompts over several 48-token chunks, decode
    // steps from graphs): the only difference is where a decode row's input id comes from. Token for token
    // identical.
    std::string history;
    for (int i = 0; i < 30; ++i) history += "<SPECIAL_11>User\nline " + std::to_string(i) + " of the page\n";
    const std::vector<std::string> turns = {history + "<SPECIAL_11>Assistant\n", " and then?", "x"};
    const SessionId sw = waits->open_session(), sa = ahead->open_session();
    for (size_t t = 0; t < turns.size(); ++t) {
        const int n = t == 2 ? 1 : 16;  // max_tokens 1: the prompt's own step draws the only token
        const GenerateResult w = waits->generate(sw, {InputPart::of_text(turns[t])}, greedy(n));
        const GenerateResult a = ahead->generate(sa, {InputPart::of_text(turns[t])}, greedy(n));
        CHECK(a.tokens == w.tokens);
        CHECK(a.tokens.size() == static_cast<size_t>(n));
        CHECK(a.prefill_tokens == w.prefill_tokens);
        CHECK(a.session_tokens == w.session_tokens);
    }
    // A stop id met mid-way: both stop on it with the same tokens. The engine that issued ahead has already
    // fed the stop token (the extra row it planned for a request that might continue), so its next request
    // prefills one token less; the sessions hold the same tokens either way.
    const SessionId qw = waits->open_session(), qa = ahead->open_session();
    const SessionId pw = waits->open_session();
    const std::string prompt = "<SPECIAL_11>User\nwhere is the search box?\n<SPECIAL_11>Assistant\n";
    const std::vector<int32_t> free_run =
        waits->generate(pw, {InputPart::of_text(prompt)}, greedy(16)).tokens;
    size_t at = 3;
    while (at < free_run.size() && std::find(free_run.begin(), free_run.begin() + static_cast<long>(at),
                                             free_run[at]) != free_run.begin() + static_cast<long>(at))
        ++at;
    REQUIRE(at < free_run.size());  // a token not seen before it, to stop on
    GenerateOptions stop = greedy(16);
    stop.stop_ids = {free_run[at]};
    const GenerateResult w1 = waits->generate(qw, {InputPart::of_text(prompt)}, stop);
    const GenerateResult a1 = ahead->generate(qa, {InputPart::of_text(prompt)}, stop);
    CHECK(w1.finish == FinishReason::kStop);
    CHECK(a1.finish == FinishReason::kStop);
    CHECK(w1.tokens == std::vector<int32_t>(free_run.begin(), free_run.begin() + static_cast<long>(at) + 1));
    CHECK(a1.tokens == w1.tokens);
    CHECK(a1.session_tokens == w1.session_tokens);
    // A fork right after the stop: a copy of the session with the fed token in it (the copy waits for the
    // step).
    const SessionId fa = ahead->fork_session(qa);
    const GenerateResult w2 = waits->generate(qw, {InputPart::of_text(" go on")}, greedy(8));
    const GenerateResult a2 = ahead->generate(qa, {InputPart::of_text(" go on")}, greedy(8));
    CHECK(a2.prefill_tokens + 1 == w2.prefill_tokens);
    CHECK(a2.session_tokens == w2.session_tokens);
    CHECK(a2.tokens.size() == 8);
    // The stop token went in by a decode row there and as a prompt token here: the same model, other kernels.
    MESSAGE("after a stop id: " << leading_matches(a2.tokens,
                                                   std::vector<int64_t>(w2.tokens.begin(), w2.tokens.end()))
                                << " of 8 tokens identical");
    // An empty request continues from the pending stop token where steps wait; issued ahead, that token is
    // already in the state (with no logits kept for what follows it): an error that says so.
    const SessionId ew = waits->open_session(), ea = ahead->open_session();
    CHECK(waits->generate(ew, {InputPart::of_text(prompt)}, stop).finish == FinishReason::kStop);
    CHECK(ahead->generate(ea, {InputPart::of_text(prompt)}, stop).finish == FinishReason::kStop);
    CHECK(waits->generate(ew, {}, greedy(2)).tokens.size() == 2);
    CHECK_THROWS_WITH_AS(ahead->generate(ea, {}, greedy(2)), doctest::Contains("already in its state"),
                         surf::Error);
    CHECK(ahead->generate(ea, {InputPart::of_text(" go on")}, greedy(2)).tokens.size() == 2);
    const GenerateResult f2 = ahead->generate(fa, {InputPart::of_text(" go on")}, greedy(8));
    CHECK(f2.tokens == a2.tokens);
    CHECK(f2.prefill_tokens == a2.prefill_tokens);
    const EngineStats st = ahead->stats();
    MESSAGE("issued ahead: " << st.steps << " steps, " << st.graph_steps << " from graphs");
    CHECK(st.graph_steps > 0);
}

TEST_CASE(
    "CUDA engine: a call cancelled inside its prompt stops there, and its session refuses further calls") {
    auto engine = cuda::open_cuda_engine(fixture("tiny_fp32"), small_options());
    std::string long_prompt;  // about 300 tokens: several 48-token chunks
    for (int i = 0; i < 30; ++i)
        long_prompt += "<SPECIAL_11>User\nline " + std::to_string(i) + " of the page\n";

    // Cancelled before anything is fed: the session stays usable.
    const SessionId before = engine->open_session();
    GenerateOptions now = greedy(4);
    now.is_cancelled = [] { return true; };
    const GenerateResult none = engine->generate(before, {InputPart::of_text(long_prompt)}, now);
    CHECK(none.finish == FinishReason::kCancelled);
    CHECK(none.tokens.empty());
    CHECK(engine->generate(before, {InputPart::of_text("hi")}, greedy(2)).tokens.size() == 2);

    // Cancelled after the first chunk was issued (the poll before the second chunk's plan says so).
    const SessionId inside = engine->open_session();
    int polls = 0;
    GenerateOptions later = greedy(4);
    later.is_cancelled = [&] { return ++polls > 1; };
    const GenerateResult cut = engine->generate(inside, {InputPart::of_text(long_prompt)}, later);
    CHECK(cut.finish == FinishReason::kCancelled);
    CHECK(cut.tokens.empty());
    CHECK(polls == 2);
    CHECK_THROWS_AS(engine->generate(inside, {InputPart::of_text("more")}, greedy(1)), surf::Error);
    engine->close_session(inside);

    // An image request cancelled before its image is encoded: nothing fed, the session stays usable, and
    // another session's image request beside it is unaffected.
    const ImagePrompt p = image_prompt(fixture("tiny_fp32"));
    const SessionId pic = engine->open_session();
    GenerateOptions cancel_image = greedy(4);
    cancel_image.is_cancelled = [] { return true; };
    const GenerateResult dropped =
        engine->generate(pic, interleave_images(p.rendered, p.images), cancel_image);
    CHECK(dropped.finish == FinishReason::kCancelled);
    CHECK(dropped.tokens.empty());
    const SessionId other = engine->open_session();
    const GenerateResult kept = engine->generate(other, interleave_images(p.rendered, p.images), greedy(32));
    CHECK(leading_matches(kept.tokens, p.want) == p.want.size());
    CHECK(engine->generate(pic, {InputPart::of_text("hi")}, greedy(2)).tokens.size() == 2);
}

TEST_CASE("CUDA engine: on_logits reports the logits each token is drawn from, as the CPU engine does") {
    const std::string dir = fixture("tiny_fp32");
    auto engine = cuda::open_cuda_engine(dir, small_options());
    auto cpu = open_cpu_engine(dir);
    const ImagePrompt p = image_prompt(dir);
    std::vector<float> gpu_rows, cpu_rows;
    int64_t vocab = 0;
    GenerateOptions g = greedy(32), c = greedy(32);
    g.on_logits = [&](const float* row, int64_t v) {
        gpu_rows.insert(gpu_rows.end(), row, row + v), vocab = v;
    };
    c.on_logits = [&](const float* row, int64_t v) { cpu_rows.insert(cpu_rows.end(), row, row + v); };
    const GenerateResult rg =
        engine->generate(engine->open_session(), interleave_images(p.rendered, p.images), g);
    const GenerateResult rc = cpu->generate(cpu->open_session(), interleave_images(p.rendered, p.images), c);
    REQUIRE(vocab > 0);
    REQUIRE(gpu_rows.size() == rg.tokens.size() * static_cast<size_t>(vocab));
    REQUIRE(rg.tokens == rc.tokens);
    REQUIRE(cpu_rows.size() == gpu_rows.size());
    // Each row is the one its greedy token was drawn from, and the rows are the CPU engine's within the bf16
    // GPU tests' logits tolerance (tiny_fp32 at bf16 weights: 3e-2).
    for (size_t t = 0; t < rg.tokens.size(); ++t) {
        const float* row = gpu_rows.data() + t * static_cast<size_t>(vocab);
        CHECK(std::max_element(row, row + vocab) - row == rg.tokens[t]);
    }
    const double err = surf::test::relative_error(gpu_rows.data(), cpu_rows);
    MESSAGE("on_logits: " << rg.tokens.size() << " rows, rel err against the CPU engine " << err);
    CHECK(err <= 3e-2);
}
