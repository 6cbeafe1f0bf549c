// Browser process lifecycle against real Chromium: crash detection and transparent restart, hang
// detection, parallel isolated sessions, clean shutdown without orphans.
#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "tests/browser/test_http_server.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

using namespace surf;
using namespace surf::tools;
using namespace std::chrono_literals;

namespace {

std::string pages_dir() {
    return std::string(SURF_SOURCE_DIR) + "/tests/browser/pages";
}

// Processes whose process group is `pgid` (Chromium and its helpers all stay in the group we gave it).
int processes_in_group(pid_t pgid) {
    int count = 0;
    DIR* dir = ::opendir("/proc");
    if (!dir) return -1;
    while (dirent* e = ::readdir(dir)) {
        pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
        if (pid <= 0) continue;
        if (::getpgid(pid) == pgid) {
            // A zombie still counts as an orphan only if nobody reaps it; ours are reaped, so skip state Z.
            std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
            std::string line;
            std::getline(stat, line);
            size_t close = line.rfind(')');
            if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') continue;
            ++count;
        }
    }
    ::closedir(dir);
    return count;
}

bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (condition()) return true;
        std::this_thread::sleep_for(20ms);
    }
    return condition();
}

}  // namespace

TEST_CASE("a killed browser is detected; waiting sessions get kBrowser; the next command restarts it") {
    test::TestHttpServer server(pages_dir());
    auto browser = Browser::launch();
    auto session = browser->new_session();
    REQUIRE(session->navigate(server.url("/click.html")).ok());
    const pid_t first = browser->pid();
    REQUIRE(first > 0);

    // A command in flight when the process dies fails at once with a browser error, not a timeout.
    std::atomic<int> kind{-1};
    std::thread waiter([&] {
        try {
            session->evaluate("new Promise(resolve => setTimeout(resolve, 8000))");
            kind = 0;
        } catch (const Error& e) {
            kind = static_cast<int>(e.kind());
        }
    });
    std::this_thread::sleep_for(300ms);
    auto killed_at = std::chrono::steady_clock::now();
    REQUIRE(::kill(first, SIGKILL) == 0);
    waiter.join();
    auto noticed = std::chrono::steady_clock::now() - killed_at;
    CHECK(kind == static_cast<int>(ErrorKind::kBrowser));
    CHECK(noticed < 2s);
    CHECK_FALSE(browser->running());
    CHECK(wait_until([&] { return processes_in_group(first) == 0; }, 3s));

    // The next command relaunches the browser and rebuilds the session's context on it.
    NavigationResult nav = session->navigate(server.url("/click.html"));
    CHECK(nav.ok());
    CHECK(browser->running());
    CHECK(browser->pid() != first);
    CHECK(browser->launches() == 2);
    CHECK(session->restarts() == 1);
    session->click(200, 140);
    CHECK(session->title() == "clicked");
    auto events = session->take_events();
    bool restarted = false;
    for (const auto& e : events) {
        if (e.kind == SessionEventKind::kBrowserRestarted) {
            restarted = true;
            CHECK(e.message.find("lost") != std::string::npos);
            CHECK(e.message.find("signal 9") != std::string::npos);
        }
    }
    CHECK(restarted);
    // A second session created after the restart works too.
    auto other = browser->new_session();
    CHECK(other->navigate(server.url("/blank.html")).ok());
}

TEST_CASE("a hung browser is detected by the liveness probe, killed and restarted") {
    BrowserOptions options;
    options.hang_probe_timeout = 1000ms;
    auto browser = Browser::launch(options);
    SessionOptions session_options;
    session_options.command_timeout = 1500ms;
    auto session = browser->new_session(session_options);
    REQUIRE(session->evaluate("1 + 1") == 2);
    const pid_t first = browser->pid();
    REQUIRE(::kill(first, SIGSTOP) == 0);  // the browser process stops answering
    auto started = std::chrono::steady_clock::now();
    try {
        session->evaluate("2 + 2");
        FAIL("a command to a stopped browser returned");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kBrowser);
        MESSAGE("hung browser: ", std::string(e.what()));
    }
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    CHECK(session->evaluate("3 + 3") == 6);
    CHECK(browser->pid() != first);
    CHECK(wait_until([&] { return processes_in_group(first) == 0; }, 3s));
}

TEST_CASE("8 sessions in parallel in one browser never see each other's cookies") {
    std::atomic<int> cookie_echoes{0};
    test::TestHttpServer server(pages_dir(), [&](const test::HttpRequest& req, test::HttpResponse& res) {
        if (req.path == "/set") {  // Set-Cookie: who=<query>
            res.headers.push_back("Set-Cookie: who=" + req.query + "; Path=/");
            res.body = "<html><body>set</body></html>";
            return true;
        }
        if (req.path == "/echo") {  // the Cookie header the browser sent, as the page text
            auto it = req.headers.find("cookie");
            res.body = "<html><body><pre id=c>" + (it == req.headers.end() ? std::string() : it->second) +
                       "</pre></body></html>";
            ++cookie_echoes;
            return true;
        }
        return false;
    });
    auto browser = Browser::launch();
    constexpr int kSessions = 8;
    std::vector<std::unique_ptr<BrowserSession>> sessions(kSessions);
    std::vector<std::string> seen_server(kSessions), seen_page(kSessions), typed(kSessions),
        failures(kSessions);
    auto started = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < kSessions; ++i) {
        threads.emplace_back([&, i] {
            try {
                sessions[i] = browser->new_session();
                BrowserSession& s = *sessions[i];
                const std::string me = "s" + std::to_string(i);
                if (!s.navigate(server.url("/set?" + me)).ok()) failures[i] = "set failed";
                s.evaluate("document.cookie = 'js" + std::to_string(i) + "=1; path=/'");
                s.evaluate("localStorage.setItem('owner', '" + me + "')");
                if (!s.navigate(server.url("/echo")).ok()) failures[i] = "echo failed";
                seen_server[i] = s.evaluate("document.getElementById('c').textContent").get<std::string>();
                seen_page[i] =
                    s.evaluate("document.cookie + '|' + localStorage.getItem('owner')").get<std::string>();
                // Input goes to each session's own tab even though all run at once.
                s.navigate(server.url("/input.html"));
                s.click(250, 215);
                s.type_text(me);
                typed[i] = s.evaluate("document.getElementById('other').value").get<std::string>();
            } catch (const std::exception& e) {
                failures[i] = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();
    MESSAGE("8 parallel sessions took ",
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
                .count(),
            " ms");
    for (int i = 0; i < kSessions; ++i) {
        const std::string me = "s" + std::to_string(i);
        const std::string js = "js" + std::to_string(i) + "=1";
        CHECK_MESSAGE(failures[i].empty(), failures[i]);
        // The server saw this session's cookie and nobody else's (a cookie set from JavaScript reaches
        // the network service asynchronously, so it may or may not be in that request).
        CHECK(seen_server[i].find("who=" + me) != std::string::npos);
        for (int j = 0; j < kSessions; ++j) {
            if (j == i) continue;
            CHECK(seen_server[i].find("who=s" + std::to_string(j)) == std::string::npos);
            CHECK(seen_server[i].find("js" + std::to_string(j) + "=") == std::string::npos);
            CHECK(seen_page[i].find("s" + std::to_string(j)) == std::string::npos);
        }
        CHECK(seen_page[i].find("who=" + me) != std::string::npos);
        CHECK(seen_page[i].find(js) != std::string::npos);
        CHECK(seen_page[i].find("|" + me) != std::string::npos);
        CHECK(std::count(seen_page[i].begin(), seen_page[i].end(), '=') == 2);
        CHECK(typed[i] == me);
    }
    CHECK(cookie_echoes == kSessions);
    CHECK(browser->launches() == 1);
}

TEST_CASE("shutdown closes the browser without orphans and removes the temporary profile") {
    auto browser = Browser::launch();
    auto session = browser->new_session();
    REQUIRE(session->navigate("data:text/html,<title>x</title><p>hello</p>").ok());
    const pid_t pid = browser->pid();
    const auto work_dir = browser->work_dir();
    CHECK(processes_in_group(pid) >= 2);  // browser + at least one helper (renderer, zygote, ...)
    CHECK(std::filesystem::exists(work_dir));
    CHECK(browser->version().find("Chrome/") == 0);
    browser->shutdown();
    CHECK(processes_in_group(pid) == 0);
    CHECK_FALSE(std::filesystem::exists(work_dir));
    try {
        session->evaluate("1");
        FAIL("a session of a shut-down browser still answered");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kBrowser);
    }
    session.reset();  // a session may outlive shutdown and is destroyed cleanly
}

TEST_CASE("a missing browser binary is a clear error") {
    BrowserOptions options;
    options.executable = "/nonexistent/chromium";
    try {
        Browser::launch(options);
        FAIL("launch of a missing binary succeeded");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kBrowser);
        CHECK(std::string(e.what()).find("/nonexistent/chromium") != std::string::npos);
    }
}
