// ReplicaEngine over two CPU engines of the tiny fixture model: sessions spread to the least loaded
// replica and stay there, forks follow their source, results equal a single engine's, stats add up,
// concurrent callers on both replicas work, and bad ids are errors. Also open_engine's backends by name.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "base/error.h"
#include "model/replicas.h"

using namespace surf;
using namespace surf::model;

namespace {

const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

std::shared_ptr<Engine> cpu() {
    return std::shared_ptr<Engine>(open_cpu_engine(kModel));
}

GenerateOptions greedy(int n) {
    GenerateOptions o;
    o.max_tokens = n;
    o.ignore_eos = true;
    return o;
}

}  // namespace

TEST_CASE("replicas: least-loaded placement, sticky sessions, forks on their source's replica") {
    ReplicaEngine r({cpu(), cpu()});
    CHECK(r.size() == 2);
    CHECK(r.backend_name() == "2 replicas [cpu, cpu]");
    const SessionId a = r.open_session(), b = r.open_session(), c = r.open_session(), d = r.open_session();
    CHECK(r.replica_of(a) != r.replica_of(b));
    CHECK(r.replica_of(c) != r.replica_of(d));
    CHECK(r.loads()[0].sessions == 2);
    CHECK(r.loads()[1].sessions == 2);

    // Closing both sessions of replica 1 makes it the least loaded: the next two opens go there.
    const size_t one = r.replica_of(b);
    r.close_session(b);
    r.close_session(r.replica_of(c) == one ? c : d);
    const SessionId e = r.open_session();
    CHECK(r.replica_of(e) == one);

    // A session generates on its replica every call; a fork lands on the same replica.
    const std::vector<InputPart> hello = {
        InputPart::of_text("<SPECIAL_11>User\nhello\n<SPECIAL_11>Assistant\n")};
    r.generate(a, hello, greedy(3));
    const SessionId f = r.fork_session(a);
    CHECK(r.replica_of(f) == r.replica_of(a));
    CHECK(r.loads()[r.replica_of(a)].generated == 1);
    r.generate(f, {InputPart::of_text(" more")}, greedy(2));
    CHECK(r.loads()[r.replica_of(a)].generated == 2);
    CHECK(r.loads()[0].generating == 0);
    CHECK(r.loads()[1].generating == 0);
    // Every open and fork counts where it was placed; closing does not take it back.
    CHECK(r.loads()[0].placed + r.loads()[1].placed == 6);
    CHECK(r.loads()[one].placed == 3 + (r.replica_of(a) == one ? 1 : 0));

    CHECK_THROWS_AS(r.generate(9999, hello, greedy(1)), Error);
    CHECK_THROWS_AS(r.fork_session(9999), Error);
    CHECK_THROWS_AS(r.close_session(9999), Error);
    CHECK_THROWS_AS(ReplicaEngine({}), Error);
    CHECK_THROWS_AS(ReplicaEngine({cpu(), nullptr}), Error);
}

TEST_CASE("replicas: same results as one engine, from concurrent callers on both replicas") {
    auto single = cpu();
    ReplicaEngine r({cpu(), cpu()});
    const std::vector<InputPart> prompt = {InputPart::of_text(
        "<SPECIAL_10>System\n\n<SPECIAL_11>User\nfind the kettle\n<SPECIAL_11>Assistant\n")};
    const SessionId s = single->open_session();
    const GenerateResult want = single->generate(s, prompt, greedy(12));

    constexpr int kThreads = 6;
    std::vector<GenerateResult> got(kThreads);
    std::vector<size_t> placed(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            const SessionId id = r.open_session();
            placed[t] = r.replica_of(id);
            got[t] = r.generate(id, prompt, greedy(12));
            r.close_session(id);
        });
    }
    for (auto& t : threads) t.join();
    int on_zero = 0;
    for (int t = 0; t < kThreads; ++t) {
        CHECK(got[t].tokens == want.tokens);
        CHECK(got[t].text == want.text);
        on_zero += placed[t] == 0;
    }
    CHECK(on_zero > 0);
    CHECK(on_zero < kThreads);
    CHECK(r.loads()[0].sessions == 0);
    CHECK(r.loads()[1].sessions == 0);
    CHECK(r.loads()[0].generated + r.loads()[1].generated == kThreads);
    const EngineStats st = r.stats();  // the two CPU engines' counters summed
    CHECK(st.running == 0);
}

namespace {

// Every EngineStats counter (all 8-byte fields, besides the one string warm_up_notes; the static_assert below
// catches a new one left out here and in EngineStats::operator+=).
// clang-format off
#define SURF_ENGINE_STATS_FIELDS(X) \
    X(prefill_tokens) X(decode_tokens) X(image_tokens) X(steps) X(decode_only_steps) X(step_seconds)       \
    X(busy_seconds) X(plan_seconds) X(issue_seconds) X(results_seconds) X(admission_seconds)               \
    X(image_wait_seconds) X(decode_only_seconds) X(decode_only_rows) X(decode_only_context)                \
    X(decode_only_gpu_seconds) X(mixed_sampled_steps) X(mixed_sampled_seconds)                             \
    X(mixed_sampled_gpu_seconds) X(sampled_steps) X(sampling_gpu_seconds) X(running) X(waiting)            \
    X(resident_sessions) X(offloaded_sessions) X(offloads) X(restores) X(slots_used) X(slots_total)        \
    X(kv_pages_used) X(kv_pages_total) X(image_cache_hits) X(image_cache_misses) X(vision_batches)         \
    X(vision_tiles) X(graph_steps) X(graphs_captured) X(gemm_shapes_tuned) X(gemm_tune_seconds)            \
    X(warm_up_seconds) X(device_bytes)
// clang-format on
#define SURF_COUNT_FIELD(f) +1
static_assert(sizeof(EngineStats) == 8 * (0 SURF_ENGINE_STATS_FIELDS(SURF_COUNT_FIELD)) + sizeof(std::string),
              "an EngineStats field is missing from this list (and maybe from EngineStats::operator+=)");

// Field i (from 1) set to scale · i.
EngineStats numbered_stats(int scale) {
    EngineStats s;
    int i = 0;
#define SURF_SET_FIELD(f) s.f = scale * ++i;
    SURF_ENGINE_STATS_FIELDS(SURF_SET_FIELD)
#undef SURF_SET_FIELD
    return s;
}

// A CPU engine that reports the given counters (the CPU engine itself reports none).
class FixedStatsEngine : public Engine {
public:
    FixedStatsEngine(std::shared_ptr<Engine> inner, EngineStats stats)
        : inner_(std::move(inner)), stats_(stats) {}
    const ModelConfig& config() const override { return inner_->config(); }
    const Tokenizer& tokenizer() const override { return inner_->tokenizer(); }
    std::shared_ptr<const TokenIndex> token_index() const override { return inner_->token_index(); }
    std::string backend_name() const override { return "fixed-stats"; }
    EngineStats stats() const override { return stats_; }
    SessionId open_session() override { return inner_->open_session(); }
    SessionId fork_session(SessionId from) override { return inner_->fork_session(from); }
    void close_session(SessionId id) override { inner_->close_session(id); }
    GenerateResult generate(SessionId id, const std::vector<InputPart>& input,
                            const GenerateOptions& options) override {
        return inner_->generate(id, input, options);
    }

private:
    std::shared_ptr<Engine> inner_;
    EngineStats stats_;
};

}  // namespace

TEST_CASE("replicas: stats add every counter of every replica") {
    const EngineStats want = numbered_stats(101);
    auto check_all = [&](const EngineStats& got, const char* what) {
#define SURF_CHECK_FIELD(f) CHECK_MESSAGE(got.f == want.f, (std::string(what) + ": " + #f));
        SURF_ENGINE_STATS_FIELDS(SURF_CHECK_FIELD)
#undef SURF_CHECK_FIELD
    };
    EngineStats sum = numbered_stats(1);
    sum += numbered_stats(100);
    check_all(sum, "operator+=");
    // The warm-up notes are not summed: replicas warm up alike, so the first non-empty one stands for all.
    EngineStats noted, other;
    other.warm_up_notes = "attention pair: 64 SMs";
    noted += other;
    CHECK(noted.warm_up_notes == "attention pair: 64 SMs");
    other.warm_up_notes = "another replica's";
    noted += other;
    CHECK(noted.warm_up_notes == "attention pair: 64 SMs");
    const auto engine = cpu();
    ReplicaEngine r({std::make_shared<FixedStatsEngine>(engine, numbered_stats(1)),
                     std::make_shared<FixedStatsEngine>(engine, numbered_stats(100))});
    check_all(r.stats(), "ReplicaEngine::stats");
}

TEST_CASE("open_engine: cpu always, other backends once registered, clear errors otherwise") {
    CHECK(open_engine(kModel, "cpu", "--backend")->backend_name() == "cpu");
    try {
        open_engine(kModel, "tpu", "--backend");
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kInvalidArgument);
        CHECK(std::string(e.what()).find("--backend \"tpu\"") != std::string::npos);
    }
    // This program does not link surf::cuda, so "cuda" is not there, whatever the build has.
    try {
        open_engine(kModel, "cuda", "AgentConfig.backend");
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kUnsupported);
        CHECK(std::string(e.what()).find("register_backend") != std::string::npos);
    }
    // A registered backend gets the folder, the device and the warm-up.
    int seen_device = -1;
    register_engine_backend("two", [&](const std::string& dir, int device, WarmUp, const EngineOptions&) {
        seen_device = device;
        return std::unique_ptr<Engine>(std::make_unique<ReplicaEngine>(
            std::vector<std::shared_ptr<Engine>>{cpu(), std::shared_ptr<Engine>(open_cpu_engine(dir))}));
    });
    CHECK(open_engine(kModel, "two", "--backend", 3)->backend_name() == "2 replicas [cpu, cpu]");
    CHECK(seen_device == 3);
}
