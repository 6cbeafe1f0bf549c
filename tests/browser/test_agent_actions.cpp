// The agent's actions beyond click and write, executed by BrowserEnvironment on real Chromium against local
// pages (tests/browser/pages/) served on 127.0.0.1: each test checks what the page's own handlers and the
// browser's default actions saw, not just that the call returned.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "agent/environment.h"
#include "kernels/base/error.h"
#include "tests/browser/test_http_server.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

using namespace surf;
using namespace surf::agent;
using namespace std::chrono_literals;

namespace {

struct Shared {
    test::TestHttpServer server{std::string(SURF_SOURCE_DIR) + "/tests/browser/pages"};
    std::shared_ptr<tools::Browser> browser = tools::Browser::launch(tools::BrowserOptions{});
};

Shared& shared() {
    static Shared s;
    return s;
}

// A fresh session on `page` with a BrowserEnvironment over it (no settle pause: the tests poll).
struct Page {
    std::unique_ptr<tools::BrowserSession> session;
    std::unique_ptr<BrowserEnvironment> env;
    explicit Page(const std::string& path) {
        session = shared().browser->new_session();
        env = std::make_unique<BrowserEnvironment>(
            *session, BrowserEnvironmentOptions{0.8, 100ms, std::chrono::milliseconds(0)});
        const ActionOutcome opened = env->open(shared().server.url(path));
        REQUIRE_MESSAGE(opened.ok, opened.message);
    }
    ActionOutcome run(const Action& action, ActionPoints points = {}) {
        const ActionOutcome o = env->execute(action, points);
        MESSAGE(describe_action(action) << " -> " << o.message);
        return o;
    }
    nlohmann::json js(const std::string& expression) { return session->evaluate(expression); }
    std::string last_key() { return js("keys[keys.length - 1]").get<std::string>(); }
};

tools::CssPoint at(double x, double y) {
    return {x, y};
}

}  // namespace

TEST_CASE("key: page handlers see real keydown/keyup with key, code, keyCode and modifiers") {
    Page p("/keys.html");
    REQUIRE(p.run(ClickAction{"first field", 0, 0}, at(170, 35)).ok);
    CHECK(p.run(KeyAction{"Escape"}).ok);
    CHECK(p.last_key() == "Escape|Escape|27|");
    CHECK(p.run(KeyAction{"ArrowDown"}).ok);
    CHECK(p.last_key() == "ArrowDown|ArrowDown|40|");
    CHECK(p.run(KeyAction{"ctrl+Enter"}).ok);
    CHECK(p.last_key() == "Enter|Enter|13|C");
    CHECK(p.run(KeyAction{"Shift+Tab"}).ok);
    CHECK(p.last_key() == "Tab|Tab|9|S");
    CHECK(p.js("ups").get<int>() >= 4);  // every press is released too
    const ActionOutcome o = p.run(KeyAction{"F5"});
    CHECK(o.ok);
    CHECK(o.message == "pressed F5");
    CHECK_FALSE(p.run(KeyAction{"ctrl+Hyper"}).ok);  // a chord no keyboard has is an outcome, not a throw
}

TEST_CASE("key: default actions happen: Tab moves focus, Enter submits, ctrl+a selects all, editing keys edit") {
    Page p("/keys.html");
    REQUIRE(p.run(ClickAction{"first field", 0, 0}, at(170, 35)).ok);
    REQUIRE(p.js("document.activeElement.id") == "first");

    CHECK(p.run(KeyAction{"Home"}).ok);
    CHECK(p.js("document.activeElement.selectionStart") == 0);
    CHECK(p.run(KeyAction{"End"}).ok);
    CHECK(p.js("document.activeElement.selectionStart") == 11);
    CHECK(p.run(KeyAction{"Backspace"}).ok);
    CHECK(p.js("first.value") == "hello worl");
    CHECK(p.run(KeyAction{"ArrowLeft"}).ok);
    CHECK(p.run(KeyAction{"ArrowLeft"}).ok);
    CHECK(p.js("document.activeElement.selectionStart") == 8);
    CHECK(p.run(KeyAction{"Delete"}).ok);
    CHECK(p.js("first.value") == "hello wol");
    CHECK(p.run(KeyAction{"shift+a"}).ok);  // a printable key types its character
    CHECK(p.js("first.value") == "hello woAl");

    CHECK(p.run(KeyAction{"ctrl+a"}).ok);
    CHECK(p.js("[first.selectionStart, first.selectionEnd]") == nlohmann::json::array({0, 10}));
    CHECK(p.run(KeyAction{"Backspace"}).ok);
    CHECK(p.js("first.value") == "");

    CHECK(p.run(KeyAction{"Tab"}).ok);
    CHECK(p.js("document.activeElement.id") == "second");
    CHECK(p.run(KeyAction{"shift+Tab"}).ok);
    CHECK(p.js("document.activeElement.id") == "first");
    CHECK(p.run(KeyAction{"x"}).ok);
    CHECK(p.run(KeyAction{"Enter"}).ok);
    CHECK(p.js("window.submitted") == "first=x");
}

TEST_CASE("key: PageDown, End and Home scroll the page when no field has focus") {
    Page p("/keys.html");
    REQUIRE(p.run(ClickAction{"empty background", 0, 0}, at(600, 400)).ok);
    CHECK(p.js("window.scrollY") == 0);
    CHECK(p.run(KeyAction{"PageDown"}).ok);
    CHECK(p.session->wait_for("window.scrollY > 300", 3s));
    CHECK(p.run(KeyAction{"End"}).ok);
    CHECK(p.session->wait_for("window.scrollY + innerHeight >= document.documentElement.scrollHeight - 2", 3s));
    CHECK(p.run(KeyAction{"Home"}).ok);
    CHECK(p.session->wait_for("window.scrollY == 0", 3s));
}
