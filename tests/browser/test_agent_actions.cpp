// The agent's actions beyond click and write, executed by BrowserEnvironment on real Chromium against local
// pages (tests/browser/pages/) served on 127.0.0.1: each test checks what the page's own handlers and the
// browser's default actions saw, not just that the call returned.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "agent/environment.h"
#include "base/error.h"
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

TEST_CASE(
    "key: default actions happen: Tab moves focus, Enter submits, ctrl+a selects all, editing keys edit") {
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
    CHECK(
        p.session->wait_for("window.scrollY + innerHeight >= document.documentElement.scrollHeight - 2", 3s));
    CHECK(p.run(KeyAction{"Home"}).ok);
    CHECK(p.session->wait_for("window.scrollY == 0", 3s));
}

TEST_CASE("hover moves the mouse without a click: mouseover fires and :hover styles apply") {
    Page p("/pointer.html");
    CHECK(p.js("getComputedStyle(menu).display") == "none");
    const ActionOutcome o = p.run(HoverAction{"hover me", 0, 0}, at(60, 40));
    CHECK(o.ok);
    CHECK(o.message == "moved the mouse to (60, 40)");
    CHECK(p.js("log") == nlohmann::json::array({"mouseover", "mouseenter"}));
    CHECK(p.js("getComputedStyle(menu).display") == "block");
}

TEST_CASE("double_click and right_click reach the page's dblclick and contextmenu handlers") {
    Page p("/pointer.html");
    CHECK(p.run(DoubleClickAction{"box", 0, 0}, at(260, 50)).ok);
    // Two press/release pairs with clickCount 1 then 2, as a real mouse sends them.
    CHECK(p.js("log") ==
          nlohmann::json::array({"mousedown:0", "click:1", "mousedown:0", "click:2", "dblclick"}));
    CHECK(p.js("log.length = 0") == 0);
    const ActionOutcome o = p.run(RightClickAction{"box", 0, 0}, at(260, 50));
    CHECK(o.ok);
    CHECK(o.message == "right-clicked (260, 50)");
    CHECK(p.js("log") == nlohmann::json::array({"mousedown:2", "contextmenu:2"}));
}

TEST_CASE("drag: pointer and mouse events with the button held move a slider; HTML5 drag and drop drops") {
    Page p("/pointer.html");
    const ActionOutcome o = p.run(DragAction{"knob", 0, 0, "track end", 0, 0}, {at(30, 170), at(320, 170)});
    CHECK(o.ok);
    CHECK(o.message == "dragged from (30, 170) to (320, 170)");
    CHECK(p.js("pad.down") == nlohmann::json::array({30, 170}));
    CHECK(p.js("pad.moves").get<int>() >= 4);  // intermediate moves with the button held
    CHECK(p.js("pad.up") == nlohmann::json::array({320, 170}));
    CHECK(p.js("pad.mouse") == nlohmann::json::array({"mousedown@30,170", "mouseup@320,170"}));
    CHECK(p.js("knob.getBoundingClientRect().left") == 310);  // the knob followed the pointer

    CHECK(p.run(DragAction{"drag me", 0, 0, "drop here", 0, 0}, {at(60, 280), at(360, 280)}).ok);
    CHECK(p.session->wait_for("dnd.includes('dragend')", 3s));
    CHECK(p.js("dnd") ==
          nlohmann::json::array({"dragstart", "dragenter", "dragover", "drop:payload", "dragend"}));
    CHECK(p.js("dst.textContent") == "dropped");

    CHECK_FALSE(p.run(DragAction{"knob", 0, 0, "nowhere", 0, 0}, at(30, 170)).ok);  // no end point
    CHECK_THROWS_AS(p.session->drag(30, 170, 5000, 170), Error);                    // outside the viewport
    CHECK_THROWS_AS(p.session->drag(30, 170, 40, 170, 0), Error);
}

TEST_CASE("select chooses a native <select> option by its text and fires input then change") {
    Page p("/select.html");
    const tools::CssPoint size = at(120, 35);
    ActionOutcome o = p.run(SelectAction{"size list", 0, 0, "Large"}, size);
    CHECK(o.ok);
    CHECK(o.message == "chose \"Large\" in <select id=\"size\"> at (120, 35), was \"Medium\"");
    CHECK(p.js("size.value") == "l");
    CHECK(p.js("events") == nlohmann::json::array({"input:size=l", "change:size=l"}));

    o = p.run(SelectAction{"size list", 0, 0, "extra LARGE"},
              size);  // case-insensitive, whitespace collapsed
    CHECK(o.message.find("chose \"Extra large\"") == 0);
    CHECK(o.message.find("(the case-insensitive match of \"extra LARGE\")") != std::string::npos);
    CHECK(p.js("size.value") == "xl");
    o = p.run(SelectAction{"size list", 0, 0, "med"}, size);  // the only option starting with it
    CHECK(o.message.find("chose \"Medium\"") == 0);
    CHECK(o.message.find("prefix match") != std::string::npos);
    CHECK(p.js("size.value") == "m");

    p.js("events.length = 0");
    o = p.run(SelectAction{"size list", 0, 0, "Medium"}, size);
    CHECK(o.ok);
    CHECK(o.message.find("\"Medium\" was already chosen") == 0);
    CHECK(p.js("events.length") == 0);

    // The label of a list chooses in its list; a list inside a same-origin frame is found through it.
    CHECK(p.run(SelectAction{"Color", 0, 0, "green"}, at(40, 85)).ok);
    CHECK(p.js("color.value") == "Green");
    CHECK(p.run(SelectAction{"Color list", 0, 0, "Deep blue"}, at(200, 85))
              .ok);  // an option's label is its text
    CHECK(p.js("color.value") == "blue");
    CHECK(p.run(SelectAction{"inner list", 0, 0, "Two"}, at(50, 245)).ok);
    CHECK(p.js("events.includes('change:inner=Two')") == true);
}

TEST_CASE(
    "select never reports a choice it did not make: no match, ambiguity, disabled, no list, a page that "
    "resets") {
    Page p("/select.html");
    const tools::CssPoint size = at(120, 35);
    ActionOutcome o = p.run(SelectAction{"size list", 0, 0, "XXL"}, size);
    CHECK_FALSE(o.ok);
    CHECK(o.error_kind == "invalid_argument");
    CHECK(o.message.find("no option matches \"XXL\" in <select id=\"size\">") != std::string::npos);
    CHECK(
        o.message.find("its options are \"Small\", \"Medium\", \"Large\", \"Extra large\", \"Extra small\", "
                       "\"Sold out\"") != std::string::npos);
    o = p.run(SelectAction{"size list", 0, 0, "Extra"}, size);
    CHECK_FALSE(o.ok);
    CHECK(o.message.find("2 options start with \"Extra\": \"Extra large\", \"Extra small\"") !=
          std::string::npos);
    o = p.run(SelectAction{"size list", 0, 0, "sold out"}, size);
    CHECK_FALSE(o.ok);
    CHECK(o.message.find("the option \"Sold out\" is disabled") != std::string::npos);
    CHECK(p.js("size.value") == "m");
    CHECK(p.js("events.length") == 0);

    o = p.run(SelectAction{"size list", 0, 0, "Large"}, at(350, 35));
    CHECK_FALSE(o.ok);
    CHECK(o.message.find("no <select> at (350, 35) (the point is on <div id=\"plain\">)") !=
          std::string::npos);

    o = p.run(SelectAction{"locked list", 0, 0, "B"}, at(120, 185));
    CHECK(o.ok);
    CHECK(o.message.find("the page then showed \"A\" instead") != std::string::npos);
}

TEST_CASE("write into a <select> chooses the option with that text or fails naming the options") {
    Page p("/select.html");
    ActionOutcome o = p.run(WriteAction{"Small", "size list", 0, 0, true, true}, at(120, 35));
    CHECK(o.ok);
    CHECK(o.message.find("writing into a <select> chooses an option: chose \"Small\"") == 0);
    CHECK(p.js("size.value") == "s");
    o = p.run(WriteAction{"Huge", "size list", 0, 0, true, true}, at(120, 35));
    CHECK_FALSE(o.ok);
    CHECK(o.message.find("no option matches \"Huge\"") != std::string::npos);
    CHECK(o.message.find("\"Extra large\"") != std::string::npos);
    CHECK(p.js("size.value") == "s");
}

TEST_CASE("a choice whose change handler navigates is settled before the action returns") {
    Page p("/select.html");
    CHECK(p.run(SelectAction{"navigation list", 0, 0, "go to the target"}, at(120, 135)).ok);
    CHECK(p.env->observe().title == "target page");
}

TEST_CASE(
    "tabs: a link to a new tab makes it active and listed; switch_tab and close_tab move between them") {
    Page p("/popup.html");
    REQUIRE(p.run(ClickAction{"new tab link", 0, 0}, at(200, 120)).ok);
    for (int i = 0; i < 50 && p.session->tab_count() < 2; ++i) std::this_thread::sleep_for(100ms);
    REQUIRE(p.session->tab_count() == 2);
    Observation o = p.env->observe();
    REQUIRE(o.tabs.size() == 2);
    MESSAGE(o.tabs[0] << " | " << o.tabs[1]);
    CHECK(o.tabs[0].find("[0] opener (") == 0);
    CHECK(o.tabs[0].find("(active)") == std::string::npos);
    CHECK(o.tabs[1].find("/target.html") != std::string::npos);
    CHECK(o.tabs[1].find("(active)") != std::string::npos);

    CHECK(p.run(SwitchTabAction{0}).ok);
    CHECK(p.session->url().find("/popup.html") != std::string::npos);
    const ActionOutcome missing = p.run(SwitchTabAction{5});
    CHECK_FALSE(missing.ok);
    CHECK(missing.message.find("the open tabs are 0 to 1") != std::string::npos);
    REQUIRE(p.run(SwitchTabAction{1}).ok);
    CHECK(p.session->url().find("/target.html") != std::string::npos);
    const ActionOutcome closed = p.run(CloseTabAction{});
    CHECK(closed.ok);
    CHECK(p.session->tab_count() == 1);
    CHECK(p.session->url().find("/popup.html") != std::string::npos);
    CHECK(p.env->observe().tabs.empty());  // one tab: nothing to list
}

TEST_CASE("upload gives a file to the file field at the point; a point on no file field fails and says so") {
    const auto file = std::filesystem::temp_directory_path() / "surf-agent-upload.txt";
    std::ofstream(file) << "hello";
    Page p("/files.html");
    const ActionOutcome o = p.run(UploadAction{"file field", 0, 0, file.string()}, at(200, 220));
    CHECK(o.ok);
    CHECK(o.message.find("gave surf-agent-upload.txt") == 0);
    CHECK(p.js("document.getElementById('file').files.length").get<int>() == 1);
    CHECK(p.js("document.getElementById('file').files[0].name").get<std::string>() ==
          "surf-agent-upload.txt");
    const ActionOutcome missed = p.run(UploadAction{"nothing", 0, 0, file.string()}, at(600, 500));
    CHECK_FALSE(missed.ok);
    CHECK(missed.message.find("opened a file chooser") != std::string::npos);
    std::filesystem::remove(file);
}
