// Soak benchmark of `surf serve`: a server under long mixed load stays answering, and its memory and
// file descriptors stay flat.
//
//   bench_soak --model DIR [--seconds 300] [--clients 4] [--slow 64] [--hostile 1] [--disconnect 1]
//              [--max-tokens 8] [--serve-arg ARG]...
//
// Starts `surf serve` on a free loopback port (the surf next to this program) and runs, side by side:
//   clients     chat completions in a loop (stream and not, alternating), the load whose rate is reported;
//   slow        connections that send a request's first bytes and then one byte every second, never
//               finishing their headers (reconnecting whenever the server drops them);
//   hostile     malformed requests in turn (JSON nested 100,000 deep, invalid UTF-8, numbers out of range,
//               fields of the wrong type), each of which must be refused with 400;
//   disconnect  requests for 256 tokens whose client hangs up after 50 ms;
//   a prober    GET /health every 100 ms with a 5 s limit: its latency under the rest is the measure.
// The server's resident memory and open descriptors are read from /proc before the load (after a warm-up),
// every 5 s, and 2 s after the load ends. Under load the server's working set (a buffer per connection, the
// allocator's arenas per thread) first grows; a leak is growth after that, so the check compares the sample
// at a fifth of the run (at least 60 s in) with the last one under load. Exit code 1 when the server died, a
// /health probe failed, a hostile request got anything but 400, memory grew past --max-rss-growth-mb in that
// span, or the descriptors after the load exceed those before by more than --max-fd-growth.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/data_paths.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Options {
    std::string model;
    double seconds = 300;
    int clients = 4, slow = 64, hostile = 1, disconnect = 1, max_tokens = 8;
    double max_rss_growth_mb = 16;
    int max_fd_growth = 8;
    std::vector<std::string> serve_args;
};

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(
        stderr,
        "bench_soak: %s\nusage: bench_soak --model DIR [--seconds 300] [--clients 4] [--slow 64] "
        "[--hostile 1] [--disconnect 1] [--max-tokens 8] [--max-rss-growth-mb 16] [--max-fd-growth 8] "
        "[--serve-arg ARG]...\n",
        why.c_str());
    std::exit(2);
}

double number(const std::string& flag, const char* text, double lo, double hi) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (!end || *end || !(v >= lo && v <= hi)) {
        char range[96];
        std::snprintf(range, sizeof range, " wants a number from %g to %g, got '", lo, hi);
        usage(flag + range + text + "'");
    }
    return v;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage(a + " needs a value");
        const char* v = argv[++i];
        if (a == "--model")
            o.model = v;
        else if (a == "--seconds")
            o.seconds = number(a, v, 1, 7 * 86400);
        else if (a == "--clients")
            o.clients = static_cast<int>(number(a, v, 0, 256));
        else if (a == "--slow")
            o.slow = static_cast<int>(number(a, v, 0, 4000));
        else if (a == "--hostile")
            o.hostile = static_cast<int>(number(a, v, 0, 64));
        else if (a == "--disconnect")
            o.disconnect = static_cast<int>(number(a, v, 0, 64));
        else if (a == "--max-tokens")
            o.max_tokens = static_cast<int>(number(a, v, 1, 4096));
        else if (a == "--max-rss-growth-mb")
            o.max_rss_growth_mb = number(a, v, 0, 1e6);
        else if (a == "--max-fd-growth")
            o.max_fd_growth = static_cast<int>(number(a, v, 0, 1e6));
        else if (a == "--serve-arg")
            o.serve_args.push_back(v);
        else
            usage("unknown flag " + a);
    }
    if (o.model.empty()) usage("--model DIR is required");
    return o;
}

// ---- one HTTP exchange over a plain socket (Connection: close) ----

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

bool send_all(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
        const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

const char* const kHealthRequest = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

// The reply's status (0 when none came within timeout_ms or the connection failed).
int exchange(int port, const std::string& request, int timeout_ms) {
    const int fd = connect_to(port);
    if (fd < 0) return 0;
    int status = 0;
    std::string got;
    const auto start = Clock::now();
    if (send_all(fd, request)) {
        char buf[16384];
        while (true) {
            const int left = timeout_ms - static_cast<int>(seconds_since(start) * 1000);
            pollfd p{fd, POLLIN, 0};
            if (left <= 0 || ::poll(&p, 1, left) <= 0) break;
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            if (got.size() < 64) got.append(buf, static_cast<size_t>(n));
        }
        if (got.rfind("HTTP/1.", 0) == 0 && got.size() >= 12) status = std::atoi(got.c_str() + 9);
    }
    ::close(fd);
    return status;
}

std::string post(const std::string& path, const std::string& body) {
    return "POST " + path +
           " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n" +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string chat_body(int max_tokens, bool stream, int k) {
    return std::string(R"({"model":"soak","max_tokens":)") + std::to_string(max_tokens) + R"(,"stream":)" +
           (stream ? "true" : "false") + R"(,"messages":[{"role":"user","content":"Request )" +
           std::to_string(k) + R"(: name one colour."}]})";
}

// Bodies that must each be refused with 400, never crash the server or get 500.
std::vector<std::string> hostile_bodies() {
    std::string nested =
        R"({"model":"soak","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":)";
    nested += std::string(100000, '[') + std::string(100000, ']') + "}";
    return {
        nested,
        std::string(R"({"model":"soak","messages":[{"role":"user","content":"bad )") + "\xff\xfe" + R"("}]})",
        R"({"model":"soak","messages":[{"role":"user","content":"hi"}],"max_tokens":)" +
            std::string(400, '9') + "}",
        R"({"model":"soak","messages":[{"role":"user","content":"hi"}],"temperature":1e999})",
        R"({"model":"soak","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":"yes"}})",
        R"({"model":"soak","messages":[{"role":"user","content":"hi"}],"response_format":{"type":5}})",
        R"({"model":"soak","messages":"not a list"})",
        R"({"model":"soak","messages":[{"role":"user","content":"hi"}])",
    };
}

// ---- the server process ----

int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = 0;
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    if (fd >= 0) ::close(fd);
    return port;
}

// The surf beside this program: build/apps/bench_soak → build/surf; libexec/surf/bench_soak → bin/surf.
fs::path surf_binary() {
    const fs::path dir = surf::program_dir();
    for (const fs::path& p : {dir.parent_path() / "surf", dir.parent_path().parent_path() / "bin" / "surf"})
        if (fs::exists(p)) return p;
    return "surf";
}

pid_t start_server(const Options& o, int port) {
    std::vector<std::string> args = {
        surf_binary().string(), "serve",        "--model", o.model,        "--port",
        std::to_string(port),   "--model-name", "soak",    "--access-log", "off"};
    args.insert(args.end(), o.serve_args.begin(), o.serve_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
        std::fprintf(stderr, "bench_soak: cannot start %s\n", argv[0]);
        std::exit(1);
    }
    return pid;
}

bool alive(pid_t pid) {
    return ::waitpid(pid, nullptr, WNOHANG) == 0;
}

struct ProcSample {
    double t = 0, rss_mb = 0;
    int fds = 0;
};

ProcSample sample(pid_t pid, Clock::time_point t0) {
    ProcSample s;
    s.t = seconds_since(t0);
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmRSS:", 0) == 0) s.rss_mb = std::atof(line.c_str() + 6) / 1024.0;
    std::error_code ec;
    for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
         !ec && it != fs::directory_iterator(); it.increment(ec))
        ++s.fds;
    return s;
}

// ---- the load ----

struct Counters {
    std::mutex mu;
    std::vector<double> chat_latency, health_latency;
    std::map<int, int64_t> chat_status, hostile_status;
    int64_t health_failed = 0, slow_opened = 0, slow_dropped = 0, disconnects = 0;
};

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void client_loop(int port, int id, const Options& o, const std::atomic<bool>& stop, Counters& c) {
    for (int k = 0; !stop; ++k) {
        const auto t = Clock::now();
        const int status = exchange(
            port, post("/v1/chat/completions", chat_body(o.max_tokens, k % 2, id * 100000 + k)), 120000);
        std::lock_guard<std::mutex> lock(c.mu);
        ++c.chat_status[status];
        if (status == 200) c.chat_latency.push_back(seconds_since(t));
    }
}

// Holds a connection that never finishes its headers, one byte a second; reconnects when dropped.
void slow_loop(int port, const std::atomic<bool>& stop, Counters& c) {
    while (!stop) {
        const int fd = connect_to(port);
        if (fd < 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            continue;
        }
        {
            std::lock_guard<std::mutex> lock(c.mu);
            ++c.slow_opened;
        }
        bool ok = send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
        while (ok && !stop) {
            std::this_thread::sleep_for(std::chrono::seconds(1));
            pollfd p{fd, POLLIN | POLLRDHUP, 0};
            if (::poll(&p, 1, 0) > 0) break;  // the server answered (408) or closed
            ok = send_all(fd, "a");
        }
        ::close(fd);
        if (!stop) {
            std::lock_guard<std::mutex> lock(c.mu);
            ++c.slow_dropped;
        }
    }
}

void hostile_loop(int port, const std::atomic<bool>& stop, Counters& c) {
    const std::vector<std::string> bodies = hostile_bodies();
    for (size_t k = 0; !stop; ++k) {
        const int status = exchange(port, post("/v1/chat/completions", bodies[k % bodies.size()]), 30000);
        {
            std::lock_guard<std::mutex> lock(c.mu);
            ++c.hostile_status[status];
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

void disconnect_loop(int port, const std::atomic<bool>& stop, Counters& c) {
    for (int k = 0; !stop; ++k) {
        const int fd = connect_to(port);
        if (fd >= 0) {
            send_all(fd, post("/v1/chat/completions", chat_body(256, false, -k)));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            ::close(fd);
            std::lock_guard<std::mutex> lock(c.mu);
            ++c.disconnects;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

void health_loop(int port, const std::atomic<bool>& stop, Counters& c) {
    while (!stop) {
        const auto t = Clock::now();
        const int status = exchange(port, kHealthRequest, 5000);
        {
            std::lock_guard<std::mutex> lock(c.mu);
            if (status == 200)
                c.health_latency.push_back(seconds_since(t));
            else
                ++c.health_failed;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

bool wait_healthy(int port, pid_t pid) {
    for (int i = 0; i < 1200 && alive(pid); ++i) {
        if (exchange(port, kHealthRequest, 1000) == 200) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

std::string statuses(const std::map<int, int64_t>& m) {
    std::string s;
    for (const auto& [k, v] : m)
        s += (s.empty() ? "" : ", ") + (k ? std::to_string(k) : "none") + ": " + std::to_string(v);
    return s.empty() ? "-" : s;
}

int report(const Options& o, const std::vector<ProcSample>& samples, Counters& c, double elapsed, bool died) {
    const int64_t ok = c.chat_status.count(200) ? c.chat_status.at(200) : 0;
    int64_t hostile_wrong = 0;
    for (const auto& [k, v] : c.hostile_status)
        if (k != 400) hostile_wrong += v;
    const ProcSample& before = samples.front();
    const ProcSample& after = samples.back();
    // The working set settles in the first minute; a run too short to have a settled sample before its last
    // one under load says so instead of judging memory.
    const ProcSample& loaded = samples[samples.size() >= 2 ? samples.size() - 2 : 0];
    size_t k = 1;
    while (k < samples.size() && samples[k].t < std::max(60.0, elapsed / 5)) ++k;
    const bool judged = k + 1 < samples.size() && samples[k].t < loaded.t;
    const ProcSample& settled = judged ? samples[k] : loaded;
    double rss_max = 0;
    int fd_max = 0;
    for (const auto& s : samples) rss_max = std::max(rss_max, s.rss_mb), fd_max = std::max(fd_max, s.fds);
    std::printf(
        "surf serve soak: %.0f s, %d clients (max_tokens %d), %d slow connections, %d hostile, %d "
        "disconnecting\n",
        elapsed, o.clients, o.max_tokens, o.slow, o.hostile, o.disconnect);
    std::printf("chat completions: %lld ok (%.2f req/s), statuses {%s}, latency p50 %.3f s p99 %.3f s\n",
                static_cast<long long>(ok), static_cast<double>(ok) / elapsed,
                statuses(c.chat_status).c_str(), percentile(c.chat_latency, 0.5),
                percentile(c.chat_latency, 0.99));
    std::printf(
        "/health every 100 ms: %zu answered, %lld failed, latency p50 %.1f ms p99 %.1f ms max %.1f ms\n",
        c.health_latency.size(), static_cast<long long>(c.health_failed),
        1000 * percentile(c.health_latency, 0.5), 1000 * percentile(c.health_latency, 0.99),
        1000 * percentile(c.health_latency, 1.0));
    std::printf(
        "slow connections: %lld opened, %lld dropped by the server; hostile statuses {%s}; %lld hang-ups\n",
        static_cast<long long>(c.slow_opened), static_cast<long long>(c.slow_dropped),
        statuses(c.hostile_status).c_str(), static_cast<long long>(c.disconnects));
    std::printf(
        "server RSS: %.1f MB before the load, %.1f MB at %.0f s, %.1f MB at %.0f s, %.1f MB after (max "
        "%.1f)\n",
        before.rss_mb, settled.rss_mb, settled.t, loaded.rss_mb, loaded.t, after.rss_mb, rss_max);
    std::printf("server descriptors: %d before the load, %d after (max %d, the held connections included)\n",
                before.fds, after.fds, fd_max);
    std::vector<std::string> failed;
    if (died) failed.push_back("the server died");
    if (c.health_failed) failed.push_back("/health failed");
    if (hostile_wrong) failed.push_back("a hostile request got other than 400");
    if (!judged) std::printf("memory not judged: the run is too short to settle (120 s or more judges it)\n");
    if (judged && loaded.rss_mb - settled.rss_mb > o.max_rss_growth_mb)
        failed.push_back("memory grew under steady load");
    if (after.fds - before.fds > o.max_fd_growth) failed.push_back("descriptors grew");
    if (!ok && o.clients) failed.push_back("no completion succeeded");
    for (const auto& f : failed) std::printf("FAIL: %s\n", f.c_str());
    if (failed.empty()) std::printf("PASS\n");
    return failed.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const int port = free_port();
    const pid_t pid = start_server(o, port);
    if (!wait_healthy(port, pid)) {
        std::fprintf(stderr, "bench_soak: surf serve did not answer /health within 120 s\n");
        ::kill(pid, SIGKILL);
        return 1;
    }
    // Warm-up: a few requests, so that the allocations of the first requests are in the baseline.
    for (int k = 0; k < 4; ++k)
        exchange(port, post("/v1/chat/completions", chat_body(o.max_tokens, k % 2, k)), 120000);
    const auto t0 = Clock::now();
    std::vector<ProcSample> samples = {sample(pid, t0)};
    std::atomic<bool> stop{false};
    Counters c;
    std::vector<std::thread> threads;
    for (int i = 0; i < o.clients; ++i)
        threads.emplace_back(client_loop, port, i, std::cref(o), std::cref(stop), std::ref(c));
    for (int i = 0; i < o.slow; ++i) threads.emplace_back(slow_loop, port, std::cref(stop), std::ref(c));
    for (int i = 0; i < o.hostile; ++i)
        threads.emplace_back(hostile_loop, port, std::cref(stop), std::ref(c));
    for (int i = 0; i < o.disconnect; ++i)
        threads.emplace_back(disconnect_loop, port, std::cref(stop), std::ref(c));
    threads.emplace_back(health_loop, port, std::cref(stop), std::ref(c));
    bool died = false;
    while (seconds_since(t0) < o.seconds) {
        std::this_thread::sleep_for(std::chrono::seconds(5));
        if (!alive(pid)) {
            died = true;
            break;
        }
        samples.push_back(sample(pid, t0));
        if (samples.size() % 6 == 1) {  // every 30 s
            std::lock_guard<std::mutex> lock(c.mu);
            std::printf("%6.0f s: RSS %.1f MB, %d descriptors, %zu completions, %zu health probes\n",
                        samples.back().t, samples.back().rss_mb, samples.back().fds, c.chat_latency.size(),
                        c.health_latency.size());
            std::fflush(stdout);
        }
    }
    stop = true;
    for (auto& t : threads) t.join();
    const double elapsed = seconds_since(t0);
    // Descriptors and memory once the load has gone: held connections closed, generations ended.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    if (!died && alive(pid))
        samples.push_back(sample(pid, t0));
    else
        died = true;
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    return report(o, samples, c, elapsed, died);
}
