// ReplicaEngine over two CPU engines of the tiny fixture model: sessions spread to the least loaded
// replica and stay there, forks follow their source, results equal a single engine's, stats add up,
// concurrent callers on both replicas work, and bad ids are errors.
#include <doctest/doctest.h>

#include <thread>

#include "kernels/base/error.h"
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
    const EngineStats st = r.stats();  // the CPU engine reports no counters: the sum is still well formed
    CHECK(st.running == 0);
}
