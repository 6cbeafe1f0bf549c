// Page actions against real Chromium and local pages (tests/browser/pages/) served on 127.0.0.1.
// Host names under .test are mapped to 127.0.0.1 by a host-resolver rule, so the navigation guard can
// be exercised with real host names on a closed network.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "base/error.h"
#include "tests/browser/test_http_server.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

using namespace surf;
using namespace surf::tools;
using namespace std::chrono_literals;

namespace {

struct Env {
    test::TestHttpServer server{
        std::string(SURF_SOURCE_DIR) + "/tests/browser/pages",
        [](const test::HttpRequest& req, test::HttpResponse& res) {
            if (req.path == "/hang") {  // headers and half a page, then nothing
                res.body = "<html><head><title>hanging</title></head><body><p>partial";
                res.never_finish = true;
                return true;
            }
            if (req.path == "/download") {
                res.content_type = "application/octet-stream";
                res.headers.push_back("Content-Disposition: attachment; filename=\"report.txt\"");
                res.body = "downloaded bytes";
                return true;
            }
            if (req.path == "/slow-target") {  // answers well after an action's grace period
                std::this_thread::sleep_for(1500ms);
                res.body =
                    "<html><head><title>slow target</title></head><body><p id=\"p\">slow</p></body></html>";
                return true;
            }
            if (req.path == "/status500") {
                res.status = 500;
                res.body = "<html><body>server error page</body></html>";
                return true;
            }
            return false;
        }};
    std::shared_ptr<Browser> browser;
    Env() {
        BrowserOptions options;
        // The DNS failure must not depend on this host's resolver (one without network can take seconds).
        options.extra_args.push_back(
            "--host-resolver-rules=MAP *.test 127.0.0.1, MAP surf-no-such-host.invalid ~NOTFOUND");
        browser = Browser::launch(options);
    }
};

Env& env() {
    static Env e;
    return e;
}

std::string page(const std::string& path, const std::string& host = "127.0.0.1") {
    return env().server.url(path, host);
}

bool has_event(const std::vector<SessionEvent>& events, SessionEventKind kind,
               const std::string& needle = "") {
    return std::any_of(events.begin(), events.end(), [&](const SessionEvent& e) {
        return e.kind == kind && (needle.empty() || e.message.find(needle) != std::string::npos ||
                                  e.url.find(needle) != std::string::npos);
    });
}

// A port nothing listens on (bound, then released).
int closed_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

}  // namespace

TEST_CASE("a click at known coordinates changes the page; double and right click; keys reach the page") {
    auto session = env().browser->new_session();
    NavigationResult nav = session->navigate(page("/click.html"));
    REQUIRE_MESSAGE(nav.ok(), nav.describe());
    CHECK(nav.http_status == 200);
    CHECK(session->title() == "click test");

    session->click(50, 50);  // empty background
    CHECK(session->title() == "click test");
    session->click(200, 140);  // inside the 200x80 box at (100,100)
    CHECK(session->title() == "clicked");
    CHECK(session->evaluate("clicks[0]") == "click@200,140");

    session->double_click(150, 120);
    CHECK(session->evaluate("clicks.includes('dblclick')") == true);
    session->right_click(150, 120);
    CHECK(session->evaluate("clicks.includes('contextmenu')") == true);
    session->move_mouse(160, 130);
    CHECK(session->evaluate("hover > 0") == true);

    session->press("Escape");
    session->press("shift+Tab");
    CHECK(session->evaluate("clicks.includes('key:Escape')") == true);
    CHECK(session->evaluate("clicks.includes('key:Tab+shift')") == true);

    CHECK_THROWS_AS(session->click(-1, 10), Error);
    CHECK_THROWS_AS(session->click(1280, 10), Error);
    CHECK_THROWS_AS(session->press("ctrl+nosuchkey"), Error);
}

TEST_CASE("typed text lands in the focused input; clearing works; Enter submits") {
    auto session = env().browser->new_session();
    REQUIRE(session->navigate(page("/input.html")).ok());
    session->click(250, 115);
    session->press("End");
    session->type_text(" world");
    CHECK(session->evaluate("document.getElementById('name').value") == "prefilled world");

    session->type_text("fresh text", /*clear_first=*/true);
    CHECK(session->evaluate("document.getElementById('name').value") == "fresh text");

    session->press("Enter");
    CHECK(session->evaluate("window.submitted") == "fresh text");

    session->clear_focused();
    CHECK(session->evaluate("document.getElementById('name').value") == "");

    session->press("Tab");  // focus moves to the second input
    CHECK(session->evaluate("document.activeElement.id") == "other");
    session->type_text("two\n");
    CHECK(session->evaluate("document.getElementById('other').value") == "two");
    CHECK(session->evaluate("window.submitted") == "two");
    session->press("ctrl+a");
    session->press("Backspace");
    CHECK(session->evaluate("document.getElementById('other').value") == "");
}

TEST_CASE("a wheel scroll at a point moves the inner scrollable div under it") {
    auto session = env().browser->new_session();
    REQUIRE(session->navigate(page("/scroll.html")).ok());
    CHECK(session->evaluate("document.getElementById('box').scrollTop") == 0);
    session->scroll(250, 200, 0, 400);
    CHECK(session->wait_for("document.getElementById('box').scrollTop > 0", 3s));
    CHECK(session->evaluate("document.scrollingElement.scrollTop") == 0);
    double after = session->evaluate("document.getElementById('box').scrollTop").get<double>();
    session->scroll(250, 200, 0, -100);
    CHECK(session->wait_for("document.getElementById('box').scrollTop < " + std::to_string(after), 3s));
}

TEST_CASE("target=_blank and window.open activate the new tab; closing falls back to the previous one") {
    auto session = env().browser->new_session();
    REQUIRE(session->navigate(page("/popup.html")).ok());
    REQUIRE(session->tab_count() == 1);

    session->click(200, 120);  // <a target=_blank>
    CHECK(session->tab_count() == 2);
    CHECK(session->url().find("/target.html") != std::string::npos);
    CHECK(session->evaluate("document.getElementById('p').textContent") == "target");
    CHECK(has_event(session->take_events(), SessionEventKind::kPopupOpened));
    auto tabs = session->tabs();
    REQUIRE(tabs.size() == 2);
    CHECK(tabs[1].active);

    session->close_active_tab();
    CHECK(session->tab_count() == 1);
    CHECK(session->url().find("/popup.html") != std::string::npos);

    session->click(200, 220);  // window.open
    CHECK(session->tab_count() == 2);
    CHECK(session->url().find("via=open") != std::string::npos);
    session->click(200, 120);  // the popup's own window.close() button
    session->settle();
    CHECK(session->tab_count() == 1);
    CHECK(session->url().find("/popup.html") != std::string::npos);
    CHECK(has_event(session->take_events(), SessionEventKind::kTabClosed));
}

TEST_CASE("a popup is settled before the click returns: a slow first page; a blank popup does not hang") {
    auto session = env().browser->new_session();
    REQUIRE(session->navigate(page("/popup.html")).ok());

    // The popup's load starts before it attaches (so no frameStartedLoading reaches us) and outlasts
    // the click's grace period: the click must still wait for it.
    session->click(200, 520);  // <a target=_blank> to /slow-target
    CHECK(session->tab_count() == 2);
    CHECK(session->url().find("/slow-target") != std::string::npos);
    CHECK(session->evaluate("document.getElementById('p').textContent") == "slow");
    session->close_active_tab();

    // window.open('') never navigates: the wait for its first navigation is bounded.
    const auto started = std::chrono::steady_clock::now();
    session->click(200, 620);
    const auto elapsed = std::chrono::steady_clock::now() - started;
    CHECK(elapsed < 5s);
    CHECK(session->tab_count() == 2);
    CHECK(session->url() == "about:blank");
    CHECK(has_event(session->take_events(), SessionEventKind::kPopupOpened));
}

TEST_CASE("JavaScript dialogs never block: answered by policy and recorded") {
    auto session = env().browser->new_session();
    NavigationResult nav = session->navigate(page("/dialogs.html"));
    REQUIRE_MESSAGE(nav.ok(), nav.describe());
    CHECK(session->title() == "after dialogs");
    CHECK(session->evaluate("window.confirmed") == true);
    CHECK(session->evaluate("window.prompted") == "");
    auto events = session->take_events();
    CHECK(has_event(events, SessionEventKind::kDialog, "hello from alert"));
    CHECK(has_event(events, SessionEventKind::kDialog, "sure?"));
    session->click(200, 120);
    CHECK(session->title() == "after click alert");
    CHECK(has_event(session->take_events(), SessionEventKind::kDialog, "clicked alert"));

    SessionOptions dismiss;
    dismiss.dialog_policy = DialogPolicy::kDismiss;
    auto other = env().browser->new_session(dismiss);
    REQUIRE(other->navigate(page("/dialogs.html")).ok());
    CHECK(other->evaluate("window.confirmed") == false);
    CHECK(other->evaluate("window.prompted") == nullptr);
}

TEST_CASE("navigation guard: denied hosts are refused before and during navigation, popups too") {
    SessionOptions options;
    options.guard = NavigationGuard({"allowed.test"}, {"ads.allowed.test"});
    auto session = env().browser->new_session(options);
    REQUIRE(session->navigate(page("/popup.html", "allowed.test")).ok());
    REQUIRE(session->navigate(page("/blank.html", "www.allowed.test")).ok());

    try {
        session->navigate(page("/target.html", "badallowed.test"));
        FAIL("navigation to a host outside the allow-list was not refused");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kNavigationDenied);
        CHECK(std::string(e.what()).find("badallowed.test") != std::string::npos);
        CHECK(std::string(e.what()).find("allow-list") != std::string::npos);
    }
    try {
        session->navigate(page("/target.html", "ads.allowed.test"));
        FAIL("navigation to a denied host was not refused");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kNavigationDenied);
        CHECK(std::string(e.what()).find("deny rule 'ads.allowed.test'") != std::string::npos);
    }
    const int target_hits = env().server.requests("/target.html");

    // A link the page follows by itself is intercepted (Fetch) and never reaches the server.
    REQUIRE(session->navigate(page("/popup.html", "allowed.test")).ok());
    session->take_events();
    session->click(200, 320);  // same-tab link to denied.test
    CHECK(has_event(session->take_events(), SessionEventKind::kNavigationDenied, "denied.test"));
    CHECK(session->url() == page("/popup.html", "allowed.test"));  // still on the page it was on
    session->click(200, 420);                                      // window.open to denied.test
    session->settle();
    CHECK(has_event(session->take_events(), SessionEventKind::kNavigationDenied, "denied.test"));
    CHECK(session->wait_for("true", 100ms));
    CHECK(session->tab_count() == 1);
    CHECK(session->url() == page("/popup.html", "allowed.test"));
    CHECK(env().server.requests("/target.html") == target_hits);
}

TEST_CASE("navigation guard: an allowed page's subresources to a denied host never leave the browser") {
    SessionOptions options;
    options.guard = NavigationGuard({"allowed.test"}, {});
    auto session = env().browser->new_session(options);
    REQUIRE(session->navigate(page("/subresources.html", "allowed.test")).ok());
    CHECK(session->wait_for("window.sent === true", 2s));
    CHECK(session->wait_for("document.images[1].complete", 2s));
    for (int i = 0; i < 40 && env().server.requests("/ws-allowed") == 0; ++i)
        std::this_thread::sleep_for(50ms);
    CHECK(env().server.requests("/ws-allowed") == 1);  // a handshake to an allowed host reaches the server
    std::this_thread::sleep_for(300ms);  // a request the guard let through would have reached the server
    for (const char* path : {"/sub-frame.html", "/sub-img.png", "/sub-script.js", "/sub-fetch", "/sub-xhr",
                             "/sub-beacon", "/sub-ws", "/sub-worker"}) {
        const std::string where = path;
        CAPTURE(where);
        CHECK(env().server.requests(path) == 0);
    }
    CHECK(env().server.requests("/sub-allowed.png") == 1);
    CHECK(session->url() == page("/subresources.html", "allowed.test"));
    // Refused subresources are no navigation: the agent's observation is not flooded with them.
    CHECK(!has_event(session->take_events(), SessionEventKind::kNavigationDenied, "denied.test"));
}

TEST_CASE("navigation guard: under a deny-list alone, WebSockets and workers never reach a denied host") {
    // The denied host names are unresolvable in a browser launched with them (BrowserOptions::deny_hosts), so
    // the connections Fetch never sees fail too; the test's own resolver rules follow surf's.
    BrowserOptions bo;
    bo.extra_args.push_back("--host-resolver-rules=MAP *.test 127.0.0.1");
    bo.deny_hosts = {"denied.test", "*.ads.test"};
    auto browser = Browser::launch(bo);
    SessionOptions options;
    options.guard = NavigationGuard({}, bo.deny_hosts);
    auto session = browser->new_session(options);
    const int ws_before = env().server.requests("/ws-allowed");
    REQUIRE(session->navigate(page("/subresources.html", "allowed.test")).ok());
    CHECK(session->wait_for("window.sent === true", 2s));
    for (int i = 0; i < 40 && env().server.requests("/ws-allowed") == ws_before; ++i)
        std::this_thread::sleep_for(50ms);
    CHECK(env().server.requests("/ws-allowed") == ws_before + 1);  // an allowed host's handshake gets through
    std::this_thread::sleep_for(300ms);
    for (const char* path : {"/sub-frame.html", "/sub-img.png", "/sub-fetch", "/sub-ws", "/sub-worker"}) {
        const std::string where = path;
        CAPTURE(where);
        CHECK(env().server.requests(path) == 0);
    }
    // Pages on other hosts still load, a subdomain rule leaves its parent alone, and a denied host is refused
    // by the guard with its reason (not a resolver error).
    CHECK(session->navigate(page("/blank.html", "ads.test")).ok());
    CHECK_THROWS_AS(session->navigate(page("/blank.html", "x.ads.test")), Error);
    browser->shutdown();
}

TEST_CASE("navigation guard: an IP-address deny rule stops WebSockets and workers to that address") {
    // A page on an allowed loopback host opens a WebSocket to 127.0.0.2, and a dedicated and a shared worker
    // fetch from it: connections Fetch does not see (the handshake, the shared worker's request), with no
    // host name for resolver rules to unmap. With "127.0.0.2" denied, none reaches it, while the page, a
    // fetch, a worker's fetch and a WebSocket handshake to the allowed host still go through the session's
    // proxy.
    const std::string pages = std::string(SURF_SOURCE_DIR) + "/tests/browser/pages";
    test::TestHttpServer denied(pages, nullptr, "127.0.0.2");
    test::TestHttpServer site(pages, [](const test::HttpRequest& req, test::HttpResponse& res) {
        if (req.path != "/fetch-allowed" && req.path != "/worker-allowed") return false;
        res.content_type = "text/plain";
        res.body = req.path == "/fetch-allowed" ? "fetched" : "worker fetched";
        return true;
    });
    const std::string url =
        site.url("/address_deny.html?denied=127.0.0.2:" + std::to_string(denied.port()), "localhost");
    const auto wait_until = [](const std::function<bool()>& done) {
        for (int i = 0; i < 60 && !done(); ++i) std::this_thread::sleep_for(50ms);
        return done();
    };
    const std::string all_results =
        "['ws_denied', 'ws_allowed', 'fetch_allowed', 'worker_denied', 'worker_allowed', 'shared_denied']"
        ".every(k => k in results)";

    // Without the rule the page does reach 127.0.0.2 all three ways, so the checks below are not vacuous.
    {
        auto open = env().browser->new_session();
        REQUIRE(open->navigate(url).ok());
        CHECK(open->wait_for(all_results, 5s));
        CHECK(wait_until([&] {
            return denied.requests("/ip-ws") == 1 && denied.requests("/ip-worker") == 1 &&
                   denied.requests("/ip-shared-worker") == 1;
        }));
    }
    const int seen = denied.connections();
    const int ws_allowed = site.requests("/ws-allowed");

    SessionOptions options;
    options.guard = NavigationGuard({}, {"127.0.0.2"});
    auto session = env().browser->new_session(options);
    CHECK(session->filtering_proxy());
    REQUIRE(session->navigate(url).ok());
    CHECK(session->wait_for(all_results, 5s));
    CHECK(session->evaluate("results.fetch_allowed") == "fetched");
    CHECK(session->evaluate("results.worker_allowed") == "worker fetched");
    CHECK(session->evaluate("results.ws_denied") == "error");
    CHECK(wait_until([&] { return site.requests("/ws-allowed") == ws_allowed + 1; }));
    std::this_thread::sleep_for(300ms);  // a connection the proxy let through would have arrived by now
    CHECK(denied.connections() == seen);
    const std::vector<std::string> log = session->proxy_log();
    std::string log_text;
    for (const std::string& line : log) log_text += line + "\n";
    CAPTURE(log_text);
    CHECK(std::count_if(log.begin(), log.end(), [](const std::string& line) {
              return line.rfind("403 ", 0) == 0 && line.find("deny rule '127.0.0.2'") != std::string::npos;
          }) >= 2);
    // The guard still refuses a navigation there itself; data: pages never meet the proxy.
    CHECK_THROWS_AS(session->navigate(denied.url("/blank.html")), Error);
    CHECK(session->navigate("data:text/html,<title>data page</title>").ok());
    CHECK(session->title() == "data page");
    CHECK(denied.connections() == seen);
}

TEST_CASE("resolver deny rules: host names and their subdomains, IP addresses left to Fetch") {
    CHECK(NavigationGuard({}, {"Denied.test", "*.ads.test", "10.0.0.1"}).resolver_deny_rules() ==
          "MAP denied.test ~NOTFOUND, MAP *.denied.test ~NOTFOUND, MAP *.ads.test ~NOTFOUND");
    CHECK(NavigationGuard({"example.com"}, {}).resolver_deny_rules().empty());
}

TEST_CASE(
    "resolver rules a launched deny-list leaves out: a parent or the same rule covers, IP rules never "
    "count") {
    const NavigationGuard g({}, {"ads.test", "*.track.test", "a.b.test", "10.0.0.1", "x.test"});
    CHECK(g.resolver_rules_missing({"ads.test", "track.test", "b.test"}) ==
          std::vector<std::string>{"x.test"});
    CHECK(g.resolver_rules_missing({"*.track.test", "*.b.test", "ads.test", "X.test"}).empty());
    CHECK(g.resolver_rules_missing({}) ==
          std::vector<std::string>{"ads.test", "*.track.test", "a.b.test", "x.test"});
    // A subdomain rule does not cover the host itself.
    CHECK(NavigationGuard({}, {"ads.test"}).resolver_rules_missing({"*.ads.test"}) ==
          std::vector<std::string>{"ads.test"});
}

TEST_CASE("navigation guard: a file: page's script cannot leave the start page's folder") {
    const std::string dir = std::filesystem::temp_directory_path().string() + "/surf_file_root_test";
    std::filesystem::create_directories(dir + "/site");
    std::ofstream(dir + "/site/start.html")
        << "<html><head><title>start</title></head><body><a id=next href='next.html'>next</a></body></html>";
    std::ofstream(dir + "/site/next.html")
        << "<html><head><title>next</title></head><body>next</body></html>";
    std::ofstream(dir + "/secret.txt") << "secret";
    SessionOptions options;
    options.guard = NavigationGuard({}, {}, LocalSchemes::kFileAlways);
    options.guard.set_file_root(dir + "/site");
    auto session = env().browser->new_session(options);
    REQUIRE(session->navigate("file://" + dir + "/site/start.html").ok());
    session->take_events();
    // The script's navigation is asynchronous: wait (bounded) for the guard's verdict.
    const auto denied = [&](const std::string& needle) {
        for (int i = 0; i < 60; ++i) {
            if (has_event(session->take_events(), SessionEventKind::kNavigationDenied, needle)) return true;
            std::this_thread::sleep_for(50ms);
        }
        return false;
    };
    session->evaluate("location.href = 'file://" + dir + "/secret.txt'");
    CHECK(denied("secret.txt"));
    session->settle();
    CHECK(session->url() == "file://" + dir + "/site/start.html");
    CHECK(session->evaluate("document.title") == "start");
    session->evaluate("location.href = 'file:///etc/hostname'");
    CHECK(denied("/etc/hostname"));
    session->settle();
    CHECK(session->evaluate("document.title") == "start");
    // Inside the folder, pages open as usual.
    session->evaluate("document.getElementById('next').click()");
    CHECK(session->wait_for("document.title === 'next'", 3s));
    std::filesystem::remove_all(dir);
}

TEST_CASE("navigation failures are reported, not swallowed") {
    SessionOptions options;
    options.navigation_timeout = 3s;
    auto session = env().browser->new_session(options);

    NavigationResult missing = session->navigate(page("/no-such-page.html"));
    CHECK(missing.outcome == NavigationOutcome::kHttpError);
    CHECK(missing.http_status == 404);
    NavigationResult error = session->navigate(page("/status500"));
    CHECK(error.outcome == NavigationOutcome::kHttpError);
    CHECK(error.http_status == 500);

    NavigationResult refused = session->navigate("http://127.0.0.1:" + std::to_string(closed_port()) + "/");
    CHECK(refused.outcome == NavigationOutcome::kNetworkError);
    CHECK(refused.error_text == "net::ERR_CONNECTION_REFUSED");
    NavigationResult dns = session->navigate("http://surf-no-such-host.invalid/");
    CHECK(dns.outcome == NavigationOutcome::kNetworkError);
    CHECK(dns.error_text == "net::ERR_NAME_NOT_RESOLVED");
    MESSAGE("DNS failure: ", dns.describe());
    CHECK_THROWS_AS(session->navigate("no-scheme.example.com"), Error);

    // A page that never finishes loading returns within the timeout, and the tab stays usable.
    auto started = std::chrono::steady_clock::now();
    NavigationResult hang = session->navigate(page("/hang"));
    auto took = std::chrono::steady_clock::now() - started;
    CHECK(hang.outcome == NavigationOutcome::kTimeout);
    CHECK(took < 3s + 2s);
    MESSAGE("never-finishing page: ", hang.describe());
    CHECK(session->navigate(page("/blank.html")).ok());
}

TEST_CASE("history, reload, URL, title and evaluate") {
    auto session = env().browser->new_session();
    REQUIRE(session->navigate(page("/blank.html")).ok());
    REQUIRE(session->navigate(page("/click.html")).ok());
    NavigationResult back = session->back();
    CHECK(back.ok());
    CHECK(session->url() == page("/blank.html"));
    CHECK(session->title() == "blank");
    CHECK(session->forward().ok());
    CHECK(session->url() == page("/click.html"));
    CHECK(session->forward().outcome == NavigationOutcome::kNoHistory);
    session->evaluate("window.marker = 1");
    CHECK(session->reload().ok());
    CHECK(session->evaluate("typeof window.marker") == "undefined");
    CHECK(session->evaluate("1 + 2") == 3);
    CHECK(session->evaluate("Promise.resolve('async')") == "async");
    CHECK_THROWS_AS(session->evaluate("throw new Error('boom')"), Error);
}

TEST_CASE("screenshots: PNG and JPEG, viewport and clip, exact pixel <-> CSS mapping") {
    auto session = env().browser->new_session();
    REQUIRE(session->navigate(page("/click.html")).ok());
    Screenshot png = session->screenshot();
    CHECK(png.width == 1280);
    CHECK(png.height == 720);
    CHECK(png.bytes.size() > 1000);
    ScreenshotOptions jpeg_options;
    jpeg_options.format = ImageFormat::kJpeg;
    jpeg_options.jpeg_quality = 80;
    Screenshot jpeg = session->screenshot(jpeg_options);
    CHECK(jpeg.width == 1280);
    CHECK(jpeg.height == 720);
    CHECK(jpeg.bytes[0] == 0xFF);

    SessionOptions hidpi;
    hidpi.viewport = {800, 600, 2.0};
    auto retina = env().browser->new_session(hidpi);
    REQUIRE(retina->navigate(page("/click.html")).ok());
    CHECK(retina->evaluate("[innerWidth, innerHeight, devicePixelRatio]") == nlohmann::json({800, 600, 2}));
    Screenshot big = retina->screenshot();
    CHECK(big.width == 1600);
    CHECK(big.height == 1200);
    // The box's centre in image pixels maps back to CSS (200, 140), which the click then hits.
    CssPoint p = big.css_from_pixel(400, 280);
    CHECK(p.x == doctest::Approx(200));
    CHECK(p.y == doctest::Approx(140));
    CssPoint q = big.pixel_from_css(p.x, p.y);
    CHECK(q.x == doctest::Approx(400));
    retina->click(p.x, p.y);
    CHECK(retina->evaluate("clicks[0]") == "click@200,140");

    ScreenshotOptions clip_options;
    clip_options.clip = CssRect{100, 100, 200, 80};
    Screenshot clip = retina->screenshot(clip_options);
    CHECK(clip.width == 400);
    CHECK(clip.height == 160);
    CssPoint c = clip.css_from_pixel(0, 0);
    CHECK(c.x == doctest::Approx(100));
    CHECK(c.y == doctest::Approx(100));
}

TEST_CASE("downloads are denied by default or saved per session; file choosers never hang") {
    auto session = env().browser->new_session();
    REQUIRE(session->navigate(page("/files.html")).ok());
    session->click(200, 120);
    CHECK(session->wait_for("true", 500ms));
    auto events = session->take_events();
    CHECK(has_event(events, SessionEventKind::kDownload, "refused"));
    CHECK_FALSE(std::filesystem::exists(session->download_dir() / "report.txt"));
    session->click(200, 220);  // the file input: intercepted, nothing opens
    CHECK(has_event(session->take_events(), SessionEventKind::kFileChooser));
    CHECK(session->evaluate("document.getElementById('file').files.length") == 0);
    CHECK(session->evaluate("1") == 1);  // still responsive

    SessionOptions allow;
    allow.allow_downloads = true;
    auto saver = env().browser->new_session(allow);
    REQUIRE(saver->navigate(page("/files.html")).ok());
    saver->click(200, 120);
    const auto file = saver->download_dir() / "report.txt";
    for (int i = 0; i < 100 && !std::filesystem::exists(file); ++i) std::this_thread::sleep_for(50ms);
    REQUIRE(std::filesystem::exists(file));
    std::ifstream in(file);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(content == "downloaded bytes");
    CHECK(has_event(saver->take_events(), SessionEventKind::kDownload, "report.txt"));

    // With upload files set, the intercepted chooser fills the input.
    const auto upload = std::filesystem::temp_directory_path() / "surf-browser-upload.txt";
    std::ofstream(upload) << "upload";
    saver->set_upload_files({upload.string()});
    saver->click(200, 220);
    CHECK(saver->wait_for("document.getElementById('file').files.length === 1", 3s));
    std::filesystem::remove(upload);
}

TEST_CASE("storage state: cookies and localStorage saved from one session start another logged in") {
    nlohmann::json state;
    {
        auto first = env().browser->new_session();
        REQUIRE(first->navigate(page("/blank.html")).ok());
        first->evaluate(
            "document.cookie = 'sid=abc123; path=/'; document.cookie = 'theme=dark; path=/; max-age=3600';"
            "localStorage.setItem('token', 't-42'); true");
        state = first->storage_state();
    }
    MESSAGE(state.dump());
    REQUIRE(state["cookies"].size() == 2);
    CHECK(state["cookies"][0]["domain"] == "127.0.0.1");
    REQUIRE(state["origins"].size() == 1);
    CHECK(state["origins"][0]["localStorage"][0] == nlohmann::json({{"name", "token"}, {"value", "t-42"}}));

    SessionOptions options;
    options.storage_state = state;
    auto second = env().browser->new_session(options);
    REQUIRE(second->navigate(page("/blank.html")).ok());
    const std::string cookies = second->evaluate("document.cookie").get<std::string>();
    CHECK(cookies.find("sid=abc123") != std::string::npos);
    CHECK(cookies.find("theme=dark") != std::string::npos);
    CHECK(second->evaluate("localStorage.getItem('token')") == "t-42");
    // The page's own later writes are kept across its navigations.
    second->evaluate("localStorage.setItem('token', 'newer'); true");
    REQUIRE(second->navigate(page("/click.html")).ok());
    CHECK(second->evaluate("localStorage.getItem('token')") == "newer");
    // A second tab of the session shares the restored storage and keeps the page's write.
    second->evaluate("window.open('/blank.html'); true");
    for (int i = 0; i < 50 && second->tab_count() < 2; ++i) std::this_thread::sleep_for(100ms);
    REQUIRE(second->tab_count() == 2);
    second->settle();
    CHECK(second->evaluate("localStorage.getItem('token')") == "newer");
    CHECK(second->storage_state()["origins"][0]["localStorage"] ==
          nlohmann::json::array({{{"name", "token"}, {"value", "newer"}}}));  // the mark is not saved
    // A fresh session has none of it.
    auto fresh = env().browser->new_session();
    REQUIRE(fresh->navigate(page("/blank.html")).ok());
    CHECK(fresh->evaluate("document.cookie").get<std::string>().empty());
    CHECK(fresh->evaluate("localStorage.getItem('token')").is_null());

    SessionOptions bad;
    bad.storage_state = {{"cookies", {{{"name", "x"}}}}};
    CHECK_THROWS_WITH_AS(env().browser->new_session(bad), doctest::Contains("storage_state.cookies[0]"),
                         Error);
}
