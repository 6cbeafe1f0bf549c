// The remote backend over two `surf serve` processes on loopback (tiny fixture model, CPU, prefix cache on),
// as `surf eval --model URL1,URL2` runs it: concurrent agent-style chats spread over both servers, each
// chat's turns stay on its server (every later turn starts from that server's prefix cache), killing one
// server mid-run moves its chats and every new chat to the other, and with both down the error names each
// server. Also RemoteEndpoints' placement and bad lists, without servers.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "agent/remote/remote_chat.h"
#include "base/error.h"
#include "tests/http_client.h"
#include "tests/serve_process.h"

using namespace surf;

namespace {

const std::string kModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

std::unique_ptr<test::ServeProcess> serve() {
    return std::make_unique<test::ServeProcess>(std::vector<std::string>{
        "--model", kModel, "--model-name", "tiny", "--prefix-cache", "64", "--access-log", "off"});
}

// A counter or gauge from the server's /metrics.
double metric(const test::ServeProcess& s, const std::string& name) {
    const test::HttpReply r = test::http_request("GET", s.origin() + "/metrics");
    const size_t at = r.body.find("\n" + name + " ");
    REQUIRE_MESSAGE(at != std::string::npos, name);
    return std::stod(r.body.substr(at + name.size() + 2));
}

// Chat completions a server answered: its requests, less the GET /models of open_remote_chat_model. A
// request's duration is observed just after its response is sent, so the count is read until it reaches
// `expected` (at most 5 s).
double chats_answered(const test::ServeProcess& s, double expected) {
    double got = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    do {
        got = metric(s, "surf_request_duration_seconds_count") - 1;
        if (got == expected) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    return got;
}

agent::RemoteChatOptions replicas(const std::string& first, const std::vector<std::string>& more) {
    agent::RemoteChatOptions o;
    o.client.base_url = first;
    o.more_base_urls = more;
    o.client.model_name = "tiny";
    o.client.max_retries = 1;
    o.client.backoff_seconds = 0.01;
    o.client.backoff_max_seconds = 0.02;
    o.tokenizer_dir = kModel;
    return o;
}

// `turns` agent-style turns on `chat`, each a new user message; false when a turn failed.
bool take_turns(agent::Chat& chat, int id, int first_turn, int turns) {
    model::GenerateOptions g;
    g.max_tokens = 6;
    g.ignore_eos = true;
    try {
        for (int t = first_turn; t < first_turn + turns; ++t) {
            chat.ask(
                agent::Message{"user", "session " + std::to_string(id) + " step " + std::to_string(t), {}},
                g);
        }
        return true;
    } catch (const Error& e) {
        MESSAGE("session " << id << ": " << e.what());
        return false;
    }
}

// Runs take_turns on chats [begin, end) at once; the number that failed.
int run_chats(std::vector<std::unique_ptr<agent::Chat>>& chats, size_t begin, size_t end, int first_turn,
              int turns) {
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (size_t i = begin; i < end; ++i) {
        threads.emplace_back([&, i] {
            if (!take_turns(*chats[i], static_cast<int>(i), first_turn, turns)) ++failed;
        });
    }
    for (auto& t : threads) t.join();
    return failed.load();
}

}  // namespace

TEST_CASE("remote replicas: spread, sticky chats, failover when one server dies, an error naming both") {
    auto a = serve(), b = serve();
    auto model = agent::open_remote_chat_model(replicas(a->url(), {b->url()}));
    CHECK(model->name() == "remote " + a->url() + ", " + b->url() + " (tiny)");
    const int n = 8;
    std::vector<std::unique_ptr<agent::Chat>> chats;
    auto open_chats = [&](int count) {
        for (int i = 0; i < count; ++i) {
            chats.push_back(model->open_chat({false, "<SPECIAL_12>"}));
            chats.back()->reset({agent::Message{"system", "You browse the web.", {}}});
        }
    };

    // n chats of 3 turns at once: half on each server, each chat's later turns from its server's cache.
    open_chats(n);
    REQUIRE(run_chats(chats, 0, n, 0, 3) == 0);
    auto loads = model->endpoints().loads();
    REQUIRE(loads.size() == 2);
    CHECK(loads[0].chats == n / 2);
    CHECK(loads[0].calls == 3 * n / 2);
    CHECK(loads[1].calls == 3 * n / 2);
    CHECK(chats_answered(*a, 3 * n / 2) == 3 * n / 2);
    CHECK(chats_answered(*b, 3 * n / 2) == 3 * n / 2);
    CHECK(metric(*a, "surf_prefix_cache_hits_total") == 2 * n / 2);
    CHECK(metric(*b, "surf_prefix_cache_hits_total") == 2 * n / 2);

    // Server a dies between turns. The chats take a 4th turn: a's move to b, re-sending their conversations.
    a->kill_now();
    CHECK(run_chats(chats, 0, n, 3, 1) == 0);
    loads = model->endpoints().loads();
    CHECK(loads[0].down);
    CHECK(loads[0].failed >= 1);
    CHECK(loads[0].chats == 0);
    CHECK(loads[0].calls == 3 * n / 2);
    CHECK(loads[1].chats == n);
    // New chats go to b only, and run there.
    open_chats(n);
    CHECK(model->endpoints().loads()[1].chats == 2 * n);
    CHECK(run_chats(chats, n, 2 * n, 0, 2) == 0);
    CHECK(chats_answered(*b, 3 * n / 2 + n + 2 * n) == 3 * n / 2 + n + 2 * n);
    // b's own chats hit its cache on their 4th turn and the new chats on their 2nd; the moved ones missed.
    CHECK(metric(*b, "surf_prefix_cache_hits_total") == n + n / 2 + n);

    // Both down: a clear error naming each server.
    b->kill_now();
    auto late = model->open_chat({false, "<SPECIAL_12>"});
    try {
        late->ask(agent::Message{"user", "anyone?", {}}, model::GenerateOptions{});
        FAIL("expected an error");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kUnavailable);
        const std::string what = e.what();
        CHECK(what.find("none of the 2 servers answered") != std::string::npos);
        CHECK(what.find(a->url()) != std::string::npos);
        CHECK(what.find(b->url()) != std::string::npos);
    }
    CHECK(late->messages().empty());  // the conversation holds what it held before
}

TEST_CASE("remote replicas: placement without servers, and bad lists") {
    agent::RemoteClientOptions o;
    o.model_name = "m";
    agent::RemoteEndpoints e(o, {"http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1", "http://127.0.0.1:11/v1"},
                             30);
    // Fewest chats first, lowest index on a tie.
    CHECK(e.place() == 0);
    CHECK(e.place() == 1);
    CHECK(e.place() == 2);
    e.leave(1);
    CHECK(e.place() == 1);
    CHECK(e.place() == 0);
    CHECK(e.loads()[0].chats == 2);

    // No server answers: each is tried once, marked down, and named in the error.
    o.max_retries = 0;
    agent::RemoteEndpoints none(o, {"http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"}, 30);
    size_t at = none.place();
    agent::ChatCall call;
    CHECK_THROWS_WITH_AS(none.chat(at, call), doctest::Contains("none of the 2 servers answered"), Error);
    CHECK(none.loads()[0].down);
    CHECK(none.loads()[1].down);
    CHECK(none.loads()[0].failed + none.loads()[1].failed == 2);

    CHECK_THROWS_WITH_AS(agent::RemoteEndpoints(o, {}, 30), doctest::Contains("no server URL"), Error);
    CHECK_THROWS_WITH_AS(agent::RemoteEndpoints(o, {"http://h:1/v1", "http://h:1/v1/"}, 30),
                         doctest::Contains("listed twice"), Error);
    CHECK_THROWS_WITH_AS(agent::RemoteEndpoints(o, {"http://h:1/v1", "h:2/v1"}, 30),
                         doctest::Contains("h:2/v1"), Error);
}
