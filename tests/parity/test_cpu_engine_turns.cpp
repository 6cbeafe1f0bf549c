// The CPU engine under concurrent calls: calls take turns on the model in arrival order, a long prompt is fed
// in chunks while others wait, and a call can be cancelled between its prompt's chunks.
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>

#include "base/error.h"
#include "model/engine.h"
#include "model/vision/image.h"

using namespace surf::model;

namespace {

std::string fixture(const std::string& name) {
    return std::string(SURF_FIXTURES_DIR) + "/golden/" + name;
}

// n ordinary text token ids (the fixture's vocabulary: control tokens below 20, image tokens at the end).
InputPart tokens(int n, int seed = 0) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(20 + (i * 37 + seed * 11) % 900);
    return InputPart::of_tokens(std::move(ids));
}

// Calls that keep asking for turns on their own sessions until stopped.
struct Noise {
    explicit Noise(Engine& engine) {
        for (int k = 0; k < 2; ++k) {
            threads.emplace_back([&engine, this] {
                const SessionId s = engine.open_session();
                GenerateOptions o;
                o.max_tokens = 1;
                while (!stop) {
                    engine.generate(s, {InputPart::of_text("x")}, o);
                    ++calls;
                }
            });
        }
    }
    ~Noise() {
        stop = true;
        for (auto& t : threads) t.join();
    }
    std::atomic<bool> stop{false};
    std::atomic<int> calls{0};
    std::vector<std::thread> threads;
};

GenerateOptions greedy(int32_t n) {
    GenerateOptions o;
    o.max_tokens = n;
    o.ignore_eos = true;
    return o;
}

}  // namespace

TEST_CASE("a short call finishes before a long prompt that started first") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));
    const SessionId long_session = engine->open_session(), short_session = engine->open_session();
    std::promise<void> started;
    std::atomic<bool> signalled{false}, long_done{false};
    GenerateOptions long_options = greedy(1);
    long_options.is_cancelled = [&] {
        if (!signalled.exchange(true)) started.set_value();
        return false;
    };
    std::thread long_call([&] {
        const GenerateResult r = engine->generate(long_session, {tokens(30000)}, long_options);
        CHECK(r.prefill_tokens == 30000);
        long_done = true;
    });
    started.get_future().wait();
    const GenerateResult r = engine->generate(short_session, {InputPart::of_text("hello there")}, greedy(4));
    const bool long_was_running = !long_done;
    long_call.join();
    CHECK(r.tokens.size() == 4);
    CHECK(long_was_running);
}

TEST_CASE(
    "a prompt fed in chunks between other calls gives the tokens of another split, an image across a chunk") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));
    auto image = std::make_shared<Image>(load_image(fixture("tiny_fp32") + "/image.png"));
    // The image's tokens start about 2,031 tokens in: the first chunk (2,048) ends inside them.
    const std::vector<InputPart> input = {tokens(2030), InputPart::of_image(image), tokens(1500, 1)};
    GenerateResult whole;
    int others = 0;
    {
        Noise noise(*engine);
        whole = engine->generate(engine->open_session(), input, greedy(12));
        others = noise.calls;
    }
    CHECK(others > 0);

    // The same input in two calls: 1,000 tokens, then the rest, whose first chunk holds the whole image.
    const SessionId split = engine->open_session();
    GenerateOptions prefill_only;
    prefill_only.max_tokens = 0;
    engine->generate(split, {tokens(1000)}, prefill_only);
    std::vector<int32_t> rest = tokens(2030).token_ids;
    rest.erase(rest.begin(), rest.begin() + 1000);
    const GenerateResult parts = engine->generate(
        split, {InputPart::of_tokens(rest), InputPart::of_image(image), tokens(1500, 1)}, greedy(12));
    CHECK(whole.image_tokens > 20);
    CHECK(whole.prefill_tokens == parts.prefill_tokens + 1000);
    CHECK(whole.tokens == parts.tokens);
}

TEST_CASE("a call cancelled inside its prompt stops there, and its session refuses further calls") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));

    // Cancelled before anything is fed: the session stays usable.
    const SessionId before = engine->open_session();
    GenerateOptions now = greedy(4);
    now.is_cancelled = [] { return true; };
    const GenerateResult none = engine->generate(before, {tokens(6000)}, now);
    CHECK(none.finish == FinishReason::kCancelled);
    CHECK(none.tokens.empty());
    CHECK(engine->generate(before, {InputPart::of_text("hi")}, greedy(2)).tokens.size() == 2);

    // Cancelled after the first of three chunks.
    const SessionId inside = engine->open_session();
    int polls = 0;
    GenerateOptions later = greedy(4);
    later.is_cancelled = [&] { return ++polls > 1; };
    const GenerateResult cut = engine->generate(inside, {tokens(6000)}, later);
    CHECK(cut.finish == FinishReason::kCancelled);
    CHECK(cut.tokens.empty());
    CHECK(polls == 2);
    CHECK_THROWS_AS(engine->generate(inside, {InputPart::of_text("more")}, greedy(1)), surf::Error);
    engine->close_session(inside);
}

TEST_CASE("a call cancelled while it decodes keeps a consistent session") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));
    const SessionId s = engine->open_session();
    int steps = 0;
    GenerateOptions o = greedy(10);
    o.is_cancelled = [&] { return ++steps > 4; };  // one poll for the prompt, then one a decode step
    const GenerateResult r = engine->generate(s, {InputPart::of_text("hello there")}, o);
    CHECK(r.finish == FinishReason::kCancelled);
    CHECK(r.tokens.size() == 3);
    CHECK(engine->generate(s, {InputPart::of_text(" again")}, greedy(2)).tokens.size() == 2);
}

TEST_CASE(
    "a session cannot serve two calls at once, and one closed while it generates goes when the call "
    "returns") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));
    const SessionId s = engine->open_session();
    std::promise<void> inside;
    std::atomic<bool> once{false};
    std::atomic<bool> release{false};
    GenerateOptions o = greedy(2);
    o.is_cancelled = [&] {
        if (!once.exchange(true)) inside.set_value();
        while (!release) std::this_thread::yield();
        return false;
    };
    std::thread call([&] { engine->generate(s, {InputPart::of_text("hello")}, o); });
    inside.get_future().wait();
    CHECK_THROWS_AS(engine->generate(s, {InputPart::of_text("again")}, greedy(1)), surf::Error);
    CHECK_THROWS_AS(engine->fork_session(s), surf::Error);
    engine->close_session(s);
    release = true;
    call.join();
    CHECK_THROWS_AS(engine->generate(s, {InputPart::of_text("gone")}, greedy(1)), surf::Error);
}
