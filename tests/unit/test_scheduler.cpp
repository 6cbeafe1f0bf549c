// The backend-neutral Scheduler (model/scheduler.h) over a fake executor that records every call and keeps,
// per slot, the tokens fed into it: admission under slot and page limits, LRU offload and restore, forks of
// resident and offloaded sessions, stops and max_tokens across mixed steps (decode rows beside prefill
// chunks), a schema's forced end token, steps issued ahead of the previous step's tokens, cancellation, and
// the image arena and vision queue.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "model/scheduler.h"
#include "model/structured/json_schema.h"

using namespace surf;
using namespace surf::model;

namespace {

constexpr int32_t kEos = 2;
constexpr int32_t kImage = 7;  // the image-context token

// Every token the fake samples is 1000 + the position it is sampled from, so expected tokens follow from the
// prompt lengths alone; a constrained row takes its forced token, else the lowest id its mask allows.
class FakeExecutor final : public StepExecutor {
public:
    struct Forward {
        uint64_t id;
        std::vector<SeqStep> rows;
        std::vector<int64_t> sample_rows;
    };
    std::vector<Forward> forwards;
    std::map<int32_t, std::vector<int32_t>> fed;  // per slot: the tokens in its state
    std::map<uint64_t, std::vector<int32_t>> sampled;
    std::vector<std::vector<ImageJob>> encoded;
    std::vector<std::array<int64_t, 3>> copies;  // from, rows, to
    std::vector<char> rows_written = std::vector<char>(64, 0);
    int saves = 0, loads = 0;
    uint64_t ticket = 0;
    std::vector<uint32_t> output_mask;  // set for constrained requests (the vocabulary's size)

    void forward(const PlannedStep& st) override {
        forwards.push_back({st.id, st.rows, st.sample_rows});
        std::vector<int32_t> out;
        size_t k = 0;
        for (size_t i = 0; i < st.rows.size(); ++i) {
            const SeqStep& q = st.rows[i];
            std::vector<int32_t>& seq = fed[q.slot];
            REQUIRE(static_cast<int64_t>(seq.size()) == q.past);  // the slot holds what the scheduler says
            if (q.token_from >= 0)
                seq.push_back(sampled.at(st.id - 1).at(static_cast<size_t>(q.token_from)));
            else
                seq.insert(seq.end(), q.tokens.begin(), q.tokens.end());
            const auto images = std::count(q.tokens.begin(), q.tokens.end(), kImage);
            for (int64_t j = 0; j < images; ++j) CHECK(rows_written.at(static_cast<size_t>(q.image_row + j)));
            if (k < st.sample_rows.size() && st.sample_rows[k] == static_cast<int64_t>(i)) {
                out.push_back(pick(*st.owners[i], st.positions[i]));
                ++k;
            }
        }
        sampled[st.id] = out;
    }
    std::vector<int32_t> tokens(const PlannedStep& st) override { return sampled.at(st.id); }
    uint64_t encode_images(const std::vector<ImageJob>& jobs) override {
        encoded.push_back(jobs);
        for (const ImageJob& j : jobs)
            for (int64_t r = 0; r < j.n_tiles * 4; ++r)
                rows_written.at(static_cast<size_t>(j.first_row + r)) = 1;
        return ++ticket;
    }
    uint64_t copy_image_rows(int64_t from, int64_t n, int64_t to) override {
        copies.push_back({from, n, to});
        for (int64_t r = 0; r < n; ++r) rows_written.at(static_cast<size_t>(to + r)) = 1;
        return ticket;
    }
    void save(int32_t slot, const std::vector<int32_t>&, HostCopy& host) override {
        ++saves;
        const std::vector<int32_t>& seq = fed.at(slot);
        host.state.resize(seq.size() * 4 + 1);
        std::memcpy(host.state.data() + 1, seq.data(), seq.size() * 4);
    }
    void load(int32_t slot, const std::vector<int32_t>&, const HostCopy& host) override {
        ++loads;
        std::vector<int32_t>& seq = fed[slot];
        seq.resize((host.state.size() - 1) / 4);
        std::memcpy(seq.data(), host.state.data() + 1, seq.size() * 4);
    }
    void release(int32_t slot) override { fed.erase(slot); }

private:
    int32_t pick(const Request& r, uint64_t position) {
        if (!r.rules->constrained()) return 1000 + static_cast<int32_t>(position);
        if (const int32_t forced = r.rules->forced(); forced != DecodeRules::kSample) return forced;
        std::vector<uint32_t> mask(output_mask.size());
        r.rules->fill_mask(mask.data(), output_mask.data(), mask.size());
        for (size_t t = 0; t < mask.size() * 32; ++t)
            if ((mask[t / 32] >> (t % 32)) & 1u) return static_cast<int32_t>(t);
        return -1;
    }
};

SchedulerOptions small_options() {
    SchedulerOptions o;
    o.limits.max_tokens = 64, o.limits.max_seqs = 8, o.limits.max_slots = 8, o.limits.page_size = 4;
    o.limits.kv_pages = 64, o.limits.max_context = 256, o.limits.max_image_rows = 16, o.limits.max_tiles = 4;
    o.prefill_chunk = 64;
    return o;
}

GenerateOptions greedy(int32_t max_tokens, std::vector<int32_t> stops = {}) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.stop_ids = std::move(stops);
    o.ignore_eos = o.stop_ids.empty();
    return o;
}

std::vector<int32_t> range(int32_t first, int32_t n) {
    std::vector<int32_t> v;
    for (int32_t i = 0; i < n; ++i) v.push_back(first + i);
    return v;
}

// One image of one tile, its 4 rows taken by the tokens at `first_token`.
PreparedImage image(uint64_t hash, int64_t first_token) {
    PreparedImage img;
    img.tiles.plan.n_tiles = 1;
    img.tiles.pixels.assign(12, 0.5f);
    img.hash = hash, img.first_token = first_token, img.n_rows = 4;
    return img;
}

struct Harness {
    explicit Harness(const SchedulerOptions& o) : sched(o, exec) {}
    FakeExecutor exec;
    Scheduler sched;
    std::optional<PlannedStep> in_flight;
    std::shared_ptr<const TokenIndex> index;
    const Tokenizer* tokenizer = nullptr;

    std::future<GenerateResult> submit(SessionId s, std::vector<int32_t> tokens, const GenerateOptions& o,
                                       std::vector<PreparedImage> images = {}) {
        auto r = std::make_unique<Request>();
        r->session = s;
        r->options = o;
        r->input.tokens = std::move(tokens);
        for (const PreparedImage& img : images) r->input.image_tokens += img.n_rows;
        r->input.images = std::move(images);
        r->rules.emplace(o, std::vector<int64_t>{kEos}, index, tokenizer);
        r->started = SchedulerClock::now();
        std::future<GenerateResult> f = r->done.get_future();
        sched.submit(std::move(r));
        return f;
    }

    // One turn as the CPU engine runs it: admission, images, one step planned, run, sampled and accounted.
    std::optional<PlannedStep> turn() {
        sched.forget_retired();
        sched.admit_waiting();
        sched.poll_image_cancels();
        sched.finish_cancelled();
        if (sched.vision_batch_due()) {
            const VisionBatch batch = sched.take_vision_batch();
            if (!batch.jobs.empty()) sched.vision_done(batch, exec.encode_images(batch.jobs), std::nullopt);
        }
        sched.poll_prefill_cancels();
        std::optional<PlannedStep> st = sched.plan_step(nullptr);
        if (!st) return st;
        exec.forward(*st);
        sched.mark_issued(*st);
        sched.poll_sample_cancels(*st);
        sched.accept_tokens(*st, exec.tokens(*st));
        sched.settle(*st);
        return st;
    }

    // One turn as the CUDA engine runs it: the next step issued before the one in flight completes where
    // can_issue_ahead allows. Returns the step issued.
    std::optional<PlannedStep> ahead_turn() {
        if (!in_flight) sched.forget_retired();
        sched.admit_waiting();
        if (in_flight && !sched.can_issue_ahead(*in_flight)) complete_in_flight();
        std::optional<PlannedStep> next = sched.plan_step(in_flight ? &*in_flight : nullptr);
        if (next) {
            exec.forward(*next);
            sched.mark_issued(*next);
        }
        if (in_flight) complete_in_flight();
        in_flight = std::move(next);
        return in_flight;
    }
    void complete_in_flight() {
        sched.accept_tokens(*in_flight, exec.tokens(*in_flight));
        sched.settle(*in_flight);
        in_flight.reset();
    }

    void run(bool ahead = false) {
        for (int i = 0; i < 200 && (sched.has_work() || in_flight); ++i) ahead ? ahead_turn() : turn();
        REQUIRE_FALSE(sched.has_work());
    }
    EngineStats stats() const {
        EngineStats s;
        sched.fill_stats(s);
        return s;
    }
};

}  // namespace

TEST_CASE(
    "scheduler: admission within slots and pages, LRU offload of idle sessions, restore on their next "
    "request") {
    SchedulerOptions o = small_options();
    o.limits.max_slots = 2, o.limits.kv_pages = 6;
    Harness h(o);
    const SessionId a = h.sched.open(), b = h.sched.open(), c = h.sched.open();
    auto fa = h.submit(a, range(10, 6), greedy(2));
    auto fb = h.submit(b, range(10, 6), greedy(2));
    const std::optional<PlannedStep> first = h.turn();
    REQUIRE(first);
    CHECK(first->rows.size() == 2);
    CHECK(first->n_dec == 0);
    CHECK(first->sample_rows == std::vector<int64_t>{0, 1});
    CHECK(first->rows[0].slot == 0);
    CHECK(first->rows[1].slot == 1);
    h.run();
    const GenerateResult ra = fa.get();
    CHECK(ra.tokens == std::vector<int32_t>{1005, 1006});
    CHECK(ra.finish == FinishReason::kLength);
    CHECK(ra.session_tokens == 8);  // 7 fed, the last token pending
    CHECK(h.sched.session(a).pending == std::vector<int32_t>{1006});
    CHECK(fb.get().tokens == ra.tokens);
    CHECK(h.stats().kv_pages_used == 4);  // each keeps the pages of past + 1 tokens

    // No slot left: c's admission offloads a, the least recently used idle session.
    auto fc = h.submit(c, range(40, 6), greedy(2));
    h.run();
    CHECK(fc.get().tokens == std::vector<int32_t>{1005, 1006});
    CHECK(h.sched.session(a).slot == -1);
    CHECK(h.sched.session(a).host.pages == 2);
    CHECK(h.sched.session(c).slot == 0);
    CHECK(h.stats().offloads == 1);
    CHECK(h.stats().offloaded_sessions == 1);

    // a's next request restores it (offloading b, now the least recently used) and continues exactly.
    auto fa2 = h.submit(a, {20, 21}, greedy(2));
    h.run();
    CHECK(fa2.get().tokens == std::vector<int32_t>{1009, 1010});
    CHECK(h.sched.session(b).slot == -1);
    const int32_t slot = h.sched.session(a).slot;
    CHECK(h.exec.fed.at(slot) == std::vector<int32_t>{10, 11, 12, 13, 14, 15, 1005, 1006, 20, 21, 1009});
    CHECK(h.stats().offloads == 2);
    CHECK(h.stats().restores == 1);
    CHECK(h.exec.loads == 1);
}

TEST_CASE("scheduler: a request waits while busy sessions hold the pages it needs") {
    SchedulerOptions o = small_options();
    o.limits.max_slots = 3, o.limits.kv_pages = 6;
    Harness h(o);
    const SessionId x = h.sched.open(), y = h.sched.open(), z = h.sched.open();
    auto fx = h.submit(x, range(10, 8), greedy(4));  // 12 tokens: 3 pages each
    auto fy = h.submit(y, range(10, 8), greedy(4));
    auto fz = h.submit(z, range(10, 8), greedy(4));
    REQUIRE(h.turn());
    CHECK(h.stats().running == 2);
    CHECK(h.stats().waiting == 1);
    CHECK(h.sched.session(z).slot == -1);  // a slot is free, the pages are not
    h.run();
    CHECK(fx.get().tokens.size() == 4);
    CHECK(fy.get().tokens.size() == 4);
    CHECK(fz.get().tokens == std::vector<int32_t>{1007, 1008, 1009, 1010});
    CHECK(h.stats().offloads == 1);  // x, idle, gave its pages to z
    CHECK(h.sched.session(x).slot == -1);
}

TEST_CASE("scheduler: forks of a resident and of an offloaded session, several forks of one session") {
    SchedulerOptions o = small_options();
    o.limits.max_slots = 1;
    Harness h(o);
    const SessionId s = h.sched.open();
    auto fs = h.submit(s, {10, 11, 12}, greedy(2));
    h.run();
    CHECK(fs.get().tokens == std::vector<int32_t>{1002, 1003});
    const SessionId f1 = h.sched.fork(s), f2 = h.sched.fork(s);
    CHECK(h.exec.saves == 2);  // resident: saved from its slot
    CHECK(h.sched.session(f1).slot == -1);
    CHECK(h.sched.session(f1).past == 4);
    CHECK(h.sched.session(f1).pending == std::vector<int32_t>{1003});
    CHECK(h.sched.session(f1).host.pages == 1);

    const std::vector<int32_t> expect_fed = {10, 11, 12, 1002, 1003, 30, 1005};
    auto f1r = h.submit(f1, {30}, greedy(2));
    h.run();
    CHECK(f1r.get().tokens == std::vector<int32_t>{1005, 1006});
    CHECK(h.exec.fed.at(0) == expect_fed);
    CHECK(h.sched.session(s).slot == -1);  // offloaded for f1 (one slot)
    const SessionId f3 = h.sched.fork(s);
    CHECK(h.exec.saves == 3);  // offloaded: its host copy is copied, nothing saved
    CHECK(h.sched.session(f3).host.state == h.sched.session(s).host.state);
    for (SessionId id : {f2, f3, s}) {
        auto r = h.submit(id, {30}, greedy(2));
        h.run();
        CHECK(r.get().tokens == std::vector<int32_t>{1005, 1006});
        CHECK(h.exec.fed.at(0) == expect_fed);
    }
    CHECK(h.stats().restores == 4);

    // Three forks of one session restored and prefilled beside it in one step.
    Harness m(small_options());
    const SessionId t = m.sched.open();
    auto ft = m.submit(t, {10, 11, 12}, greedy(2));
    m.run();
    ft.get();
    std::vector<std::future<GenerateResult>> all;
    for (SessionId id : {m.sched.fork(t), m.sched.fork(t), m.sched.fork(t), t})
        all.push_back(m.submit(id, {30}, greedy(2)));
    const std::optional<PlannedStep> st = m.turn();
    REQUIRE(st);
    CHECK(st->rows.size() == 4);
    for (const SeqStep& q : st->rows) {
        CHECK(q.past == 4);
        CHECK(q.tokens == std::vector<int32_t>{1003, 30});
        CHECK(m.exec.fed.at(q.slot) == std::vector<int32_t>{10, 11, 12, 1002, 1003, 30});
    }
    m.run();
    for (auto& f : all) CHECK(f.get().tokens == std::vector<int32_t>{1005, 1006});
    CHECK(m.stats().restores == 3);
}

TEST_CASE(
    "scheduler: stops, max_tokens and a schema's end token across steps mixing decode rows and prefill "
    "chunks") {
    SchedulerOptions o = small_options();
    o.prefill_chunk = 8;
    Harness h(o);
    const Tokenizer tokenizer = load_model_tokenizer(SURF_FIXTURES_DIR "/golden/tiny_fp32");
    h.index = TokenIndex::build(token_vocabulary(tokenizer, {kEos}));
    h.tokenizer = &tokenizer;
    h.exec.output_mask.assign(static_cast<size_t>(tokenizer.vocab_size() + 31) / 32, ~0u);
    const SessionId a = h.sched.open(), b = h.sched.open(), c = h.sched.open();
    auto fa = h.submit(a, {10, 11, 12, 13}, greedy(10, {1007}));
    REQUIRE(h.turn());
    auto fb = h.submit(b, range(100, 20), greedy(2));
    GenerateOptions schema = greedy(12);
    schema.schema = compile_json_schema_text(R"({"type":"boolean"})");
    schema.ignore_eos = false;
    auto fc = h.submit(c, range(200, 3), schema);
    // a decodes; b's prompt takes what the decode row leaves of the 8-token budget, c waits for room.
    const std::optional<PlannedStep> mixed = h.turn();
    REQUIRE(mixed);
    CHECK(mixed->n_dec == 1);
    REQUIRE(mixed->rows.size() == 2);
    CHECK(mixed->rows[1].tokens.size() == 7);  // min(max(8 − 1, 8 / 4), 64 − 1)
    CHECK(mixed->sample_rows == std::vector<int64_t>{0});
    h.run();
    const GenerateResult ra = fa.get();
    CHECK(ra.finish == FinishReason::kStop);
    CHECK(ra.tokens == std::vector<int32_t>{1003, 1004, 1005, 1006, 1007});
    CHECK(h.sched.session(a).pending == std::vector<int32_t>{1007});
    const GenerateResult rb = fb.get();
    CHECK(rb.finish == FinishReason::kLength);
    CHECK(rb.tokens == std::vector<int32_t>{1019, 1020});
    CHECK(h.sched.session(b).pending == std::vector<int32_t>{1020});
    const GenerateResult rc = fc.get();
    CHECK(rc.finish == FinishReason::kStop);
    CHECK(rc.tokens.back() == kEos);  // forced once the value is complete
    CHECK(nlohmann::json::parse(rc.text).is_boolean());
    // Some step decoded a's row beside a prefill chunk and both sampled.
    bool both = false;
    for (const auto& f : h.exec.forwards)
        both |= f.rows.size() >= 2 && f.sample_rows.size() >= 2 && f.rows[0].is_decode();
    CHECK(both);
}

TEST_CASE(
    "scheduler: steps issued ahead feed the previous step's token from the device; a row planned ahead "
    "of a stop feeds the stop token") {
    SchedulerOptions o = small_options();
    o.issue_ahead = true;
    Harness h(o);
    const SessionId a = h.sched.open(), b = h.sched.open();
    auto fa = h.submit(a, {10, 11, 12}, greedy(10, {1005}));
    auto fb = h.submit(b, {20, 21, 22}, greedy(2));
    h.run(/*ahead=*/true);
    const GenerateResult ra = fa.get();
    CHECK(ra.finish == FinishReason::kStop);
    CHECK(ra.tokens == std::vector<int32_t>{1002, 1003, 1004, 1005});
    // The step planned ahead of the stop fed it: nothing pending, the session holds it.
    CHECK(h.sched.session(a).pending.empty());
    CHECK(h.sched.session(a).last_fed_ahead);
    CHECK(ra.session_tokens == 7);
    // b stops at max_tokens: its last token is never planned ahead, so it stays pending.
    const GenerateResult rb = fb.get();
    CHECK(rb.tokens == std::vector<int32_t>{1002, 1003});
    CHECK(h.sched.session(b).pending == std::vector<int32_t>{1003});
    CHECK(rb.session_tokens == 5);
    int ahead_rows = 0;
    for (const auto& f : h.exec.forwards)
        for (const SeqStep& q : f.rows) ahead_rows += q.token_from >= 0;
    CHECK(ahead_rows == 5);  // a's 4 decode rows, b's 1
    CHECK(h.exec.fed.at(h.sched.session(a).slot) == std::vector<int32_t>{10, 11, 12, 1002, 1003, 1004, 1005});

    // An empty request cannot continue from a stop token already in the state; new input can.
    auto empty = h.submit(a, {}, greedy(2));
    h.run(true);
    CHECK_THROWS_WITH_AS(empty.get(), doctest::Contains("already in its state"), Error);
    auto more = h.submit(a, {40}, greedy(2));
    h.run(true);
    CHECK(more.get().tokens == std::vector<int32_t>{1007, 1008});

    // Steps that wait for the tokens: the same tokens, the stop token pending instead.
    SchedulerOptions w = small_options();
    Harness waits(w);
    const SessionId wa = waits.sched.open();
    auto fw = waits.submit(wa, {10, 11, 12}, greedy(10, {1005}));
    waits.run(true);
    const GenerateResult rw = fw.get();
    CHECK(rw.tokens == ra.tokens);
    CHECK(rw.session_tokens == ra.session_tokens);
    CHECK(waits.sched.session(wa).pending == std::vector<int32_t>{1005});
    for (const auto& f : waits.exec.forwards)
        for (const SeqStep& q : f.rows) CHECK(q.token_from == -1);
}

TEST_CASE("scheduler: a step with a constrained row in flight is not planned ahead") {
    SchedulerOptions o = small_options();
    o.issue_ahead = true;
    Harness h(o);
    const Tokenizer tokenizer = load_model_tokenizer(SURF_FIXTURES_DIR "/golden/tiny_fp32");
    h.index = TokenIndex::build(token_vocabulary(tokenizer, {kEos}));
    h.exec.output_mask.assign(static_cast<size_t>(tokenizer.vocab_size() + 31) / 32, ~0u);
    GenerateOptions schema = greedy(12);
    schema.schema = compile_json_schema_text(R"({"type":"boolean"})");
    schema.ignore_eos = false;
    auto f = h.submit(h.sched.open(), {10, 11}, schema);
    const std::optional<PlannedStep> first = h.ahead_turn();
    REQUIRE(first);
    CHECK_FALSE(h.sched.can_issue_ahead(*first));
    h.run(true);
    CHECK(f.get().finish == FinishReason::kStop);
    for (const auto& fw : h.exec.forwards)
        for (const SeqStep& q : fw.rows) CHECK(q.token_from == -1);
}

TEST_CASE(
    "scheduler: cancellation before a prompt chunk, before anything is fed, and before a sampled token") {
    SchedulerOptions o = small_options();
    o.prefill_chunk = 4;
    o.fixed_chunks = true;
    Harness h(o);
    // After the first of three chunks: the session holds part of the prompt and refuses further requests.
    const SessionId x = h.sched.open();
    int polls = 0;
    GenerateOptions later = greedy(4);
    later.is_cancelled = [&] { return ++polls > 1; };
    auto fx = h.submit(x, range(10, 10), later);
    h.run();
    const GenerateResult rx = fx.get();
    CHECK(rx.finish == FinishReason::kCancelled);
    CHECK(rx.tokens.empty());
    CHECK(polls == 2);
    CHECK(h.sched.session(x).past == 4);
    CHECK(h.sched.session(x).broken);
    CHECK_THROWS_AS(h.submit(x, {1}, greedy(1)), Error);

    // Before anything is fed: the token pending from the last request stays pending.
    const SessionId y = h.sched.open();
    auto fy = h.submit(y, {10, 11}, greedy(1));
    h.run();
    CHECK(fy.get().tokens == std::vector<int32_t>{1001});
    GenerateOptions now = greedy(4);
    now.is_cancelled = [] { return true; };
    auto fy2 = h.submit(y, {12}, now);
    h.run();
    CHECK(fy2.get().finish == FinishReason::kCancelled);
    CHECK(h.sched.session(y).pending == std::vector<int32_t>{1001});
    CHECK_FALSE(h.sched.session(y).broken);

    // While decoding (one poll for the prompt's chunk, then one per sampled token), beside a prompt fed in
    // fixed chunks whatever else runs.
    const SessionId z = h.sched.open(), w = h.sched.open();
    int steps = 0;
    GenerateOptions decoding = greedy(10);
    decoding.is_cancelled = [&] { return ++steps > 3; };
    auto fz = h.submit(z, {10, 11}, decoding);
    auto fw = h.submit(w, range(50, 10), greedy(1));
    std::vector<size_t> w_chunks;
    while (h.sched.has_work()) {
        const std::optional<PlannedStep> st = h.turn();
        REQUIRE(st);
        for (size_t i = 0; i < st->rows.size(); ++i)
            if (st->prefill[i] && st->owners[i]->session == w) w_chunks.push_back(st->rows[i].tokens.size());
    }
    const GenerateResult rz = fz.get();
    CHECK(rz.finish == FinishReason::kCancelled);
    CHECK(rz.tokens == std::vector<int32_t>{1001, 1002});
    CHECK(h.sched.session(z).past == 4);  // both tokens fed; the third was never sampled
    CHECK(h.sched.session(z).pending.empty());
    CHECK(w_chunks == std::vector<size_t>{4, 4, 2});
    CHECK(fw.get().tokens == std::vector<int32_t>{1009});
}

TEST_CASE(
    "scheduler: images wait for the vision tower, a cached image is copied, the arena bounds a request") {
    Harness h(small_options());
    const SessionId a = h.sched.open(), b = h.sched.open();
    const std::vector<int32_t> prompt = {10, kImage, kImage, kImage, kImage, 11};
    auto fa = h.submit(a, prompt, greedy(1), {image(0xAB, 1)});
    const std::optional<PlannedStep> st = h.turn();
    REQUIRE(st);
    REQUIRE(h.exec.encoded.size() == 1);
    CHECK(st->rows[0].image_row == h.exec.encoded[0][0].first_row);
    CHECK(fa.get().image_tokens == 4);
    auto fb = h.submit(b, prompt, greedy(1), {image(0xAB, 1)});
    h.run();
    CHECK(fb.get().tokens == std::vector<int32_t>{1005});
    CHECK(h.exec.encoded.size() == 1);  // the second request's image is a cache hit
    CHECK(h.exec.copies.size() == 1);
    CHECK(h.stats().image_cache_hits == 1);
    CHECK(h.stats().image_cache_misses == 1);
    // Five images of 4 rows: more than the 16-row arena holds.
    std::vector<int32_t> five;
    std::vector<PreparedImage> images;
    for (int i = 0; i < 5; ++i) {
        images.push_back(image(0x100 + i, static_cast<int64_t>(five.size())));
        five.insert(five.end(), 4, kImage);
    }
    CHECK_THROWS_AS(h.submit(a, five, greedy(1), images), Error);
    SchedulerOptions grows = small_options();
    grows.grow_image_rows = true;
    Harness g(grows);
    g.exec.rows_written.resize(64);
    auto fg = g.submit(g.sched.open(), five, greedy(1), images);
    g.run();
    CHECK(fg.get().image_tokens == 20);
}

TEST_CASE("scheduler: vision batches across steps hold an image back while other prompts prefill") {
    SchedulerOptions o = small_options();
    o.prefill_chunk = 8;
    o.vision_min_tiles = 100, o.vision_max_wait_steps = 2;
    Harness h(o);
    const SessionId text = h.sched.open(), pic = h.sched.open();
    auto ft = h.submit(text, range(10, 28), greedy(1));
    REQUIRE(h.turn());  // the text prompt's first chunk
    auto fp = h.submit(pic, {10, kImage, kImage, kImage, kImage}, greedy(1), {image(0xCD, 1)});
    std::vector<bool> pic_rows;
    for (int i = 0; i < 4; ++i) {
        const std::optional<PlannedStep> st = h.turn();
        REQUIRE(st);
        bool has = false;
        for (const Request* r : st->owners) has |= r->session == pic;
        pic_rows.push_back(has);
    }
    // Queued before the second step: held for two steps while the text prompt prefills, then encoded and
    // prefilled beside the text prompt's last chunk.
    CHECK(pic_rows == std::vector<bool>{false, false, true, true});
    h.run();
    CHECK(fp.get().tokens.size() == 1);
    CHECK(ft.get().tokens.size() == 1);
    CHECK(h.stats().vision_batches == 1);
}
