// The browser tool's pure logic (no Chromium): navigation guard rules, the key table and chord parser,
// base64 and image headers, the screenshot pixel <-> CSS mapping.
#include <doctest/doctest.h>

#include "base/error.h"
#include "tools/browser/browser.h"
#include "tools/browser/input.h"
#include "tools/browser/navigation_guard.h"
#include "tools/browser/screenshot.h"

using namespace surf;
using namespace surf::tools;

TEST_CASE("navigation guard: suffix match on label boundaries, IP literals, localhost, deny wins") {
    NavigationGuard guard({"example.com", "127.0.0.1", "localhost", "[::1]"}, {"ads.example.com"});
    CHECK(guard.check("https://example.com/").allowed);
    CHECK(guard.check("https://www.example.com/path?q=1").allowed);
    CHECK(guard.check("https://WWW.Example.COM./").allowed);
    CHECK(guard.check("http://user:pw@shop.example.com:8080/x").allowed);
    CHECK_FALSE(guard.check("https://badexample.com/").allowed);
    CHECK_FALSE(guard.check("https://example.com.evil.net/").allowed);
    GuardDecision ads = guard.check("https://ads.example.com/banner");
    CHECK_FALSE(ads.allowed);
    CHECK(ads.rule == "deny:ads.example.com");
    CHECK(ads.reason.find("https://ads.example.com/banner") != std::string::npos);
    CHECK_FALSE(guard.check("https://x.ads.example.com/").allowed);
    CHECK(guard.check("http://127.0.0.1:8080/").allowed);
    CHECK_FALSE(guard.check("http://127.0.0.2/").allowed);
    CHECK(guard.check("http://localhost:3000/").allowed);
    CHECK(guard.check("http://app.localhost/").allowed);
    CHECK(guard.check("http://[::1]:8080/").allowed);
    GuardDecision other = guard.check("https://other.org/");
    CHECK_FALSE(other.allowed);
    CHECK(other.rule == "allow-list");
    // Non-network schemes.
    CHECK(guard.check("about:blank").allowed);
    CHECK(guard.check("data:text/html,hi").allowed);
    CHECK_FALSE(guard.check("file:///etc/passwd").allowed);
    CHECK_FALSE(guard.check("chrome://settings").allowed);
    CHECK(
        NavigationGuard({"example.com"}, {}, LocalSchemes::kFileAlways).check("file:///tmp/a.html").allowed);
    CHECK_FALSE(
        NavigationGuard({"example.com"}, {}, LocalSchemes::kFileAlways).check("chrome://version").allowed);

    // A file root: file: URLs under that folder only, however the path is spelled.
    NavigationGuard files({}, {}, LocalSchemes::kFileAlways);
    files.set_file_root("/work/tasks/");
    CHECK(files.intercepts());
    CHECK(files.check("file:///work/tasks/a.html").allowed);
    CHECK(files.check("file://localhost/work/tasks/sub/b%20c.html#top").allowed);
    for (const char* url : {"file:///etc/hostname", "file:///work/tasks/../../etc/hostname",
                            "file:///work/tasks/%2e%2e/%2e%2e/etc/hostname", "file:///work/tasksX/a.html",
                            "file://otherhost/work/tasks/a.html", "file:///work/task"}) {
        CAPTURE(url);
        const GuardDecision d = files.check(url);
        CHECK_FALSE(d.allowed);
        CHECK(d.rule == "file-root");
    }
    CHECK(file_url_path("file:///tmp/a%20b.html?q=1#f") == "/tmp/a b.html");
    CHECK_THROWS_AS(file_url_path("https://example.com/"), Error);
    CHECK_THROWS_AS(files.set_file_root("relative/dir"), Error);

    // An IP rule is exact: "0.0.1" must not match 127.0.0.1 by suffix.
    NavigationGuard ip_deny({}, {"0.0.1", "10.0.0.1"});
    CHECK(ip_deny.check("http://127.0.0.1/").allowed);
    CHECK_FALSE(ip_deny.check("http://10.0.0.1/").allowed);
    // Any spelling of a denied address is that address: IPv4-mapped IPv6, uncompressed IPv6.
    CHECK_FALSE(ip_deny.check("http://[::ffff:a00:1]/").allowed);
    CHECK_FALSE(NavigationGuard({}, {"[::1]"}).check("http://[0:0:0:0:0:0:0:1]/").allowed);
    CHECK(ip_deny.address_deny_rules() == std::vector<std::string>{"10.0.0.1"});  // "0.0.1" is a name
    CHECK(NavigationGuard({}, {"[::1]", "example.com"}).address_deny_rules() ==
          std::vector<std::string>{"::1"});
    CHECK(ip_address_text(*parse_ip_address("::ffff:7f00:2")) == "127.0.0.2");
    CHECK(ip_address_text(*parse_ip_address("[FE80::0:1]")) == "fe80::1");
    CHECK_FALSE(parse_ip_address("localhost").has_value());
    CHECK_FALSE(parse_ip_address("10.0.1").has_value());
    // Wildcards mean subdomains only.
    NavigationGuard sub({"*.example.com"}, {});
    CHECK(sub.check("https://a.example.com/").allowed);
    CHECK_FALSE(sub.check("https://example.com/").allowed);
    // No rules: everything goes.
    NavigationGuard open;
    CHECK(open.check("file:///tmp/x").allowed);
    CHECK(open.check("https://anything.net/").allowed);
    // An agent that starts on the web: no host rules, still no local files or browser-internal pages.
    NavigationGuard web({}, {}, LocalSchemes::kNever);
    CHECK(web.check("https://anything.net/").allowed);
    CHECK(web.check("about:blank").allowed);
    CHECK(web.check("data:text/html,hi").allowed);
    GuardDecision local = web.check("file:///etc/passwd");
    CHECK_FALSE(local.allowed);
    CHECK(local.rule == "scheme:file");
    CHECK_FALSE(web.check("chrome://settings").allowed);
    CHECK_FALSE(web.check("view-source:https://anything.net/").allowed);

    CHECK_THROWS_AS(NavigationGuard({"https://example.com"}, {}), Error);
    CHECK_THROWS_AS(NavigationGuard({"example.com/path"}, {}), Error);
    CHECK_THROWS_AS(NavigationGuard({"example.com:443"}, {}), Error);
    CHECK_THROWS_AS(NavigationGuard({""}, {}), Error);
    CHECK_THROWS_AS(guard.check("www.example.com"), Error);  // no scheme
}

TEST_CASE("navigation guard: the allow-list as Chromium proxy bypass rules") {
    CHECK(NavigationGuard().proxy_bypass_list().empty());
    CHECK(
        NavigationGuard({}, {"ads.example.com"}).proxy_bypass_list().empty());  // a deny-list alone: no proxy
    CHECK(NavigationGuard({"Example.com", "*.cdn.net", "127.0.0.1", "[::1]", "localhost"}, {})
              .proxy_bypass_list() ==
          "<-loopback>;example.com;*.example.com;*.cdn.net;127.0.0.1;[::1];localhost;*.localhost");
}

TEST_CASE("key table and chords") {
    KeyDef enter = lookup_key("enter");
    CHECK(enter.key == "Enter");
    CHECK(enter.key_code == 13);
    CHECK(enter.text == "\r");
    CHECK(lookup_key("Esc").key_code == 27);
    CHECK(lookup_key("backspace").key_code == 8);
    CHECK(lookup_key("down").code == "ArrowDown");
    CHECK(lookup_key("F5").key_code == 116);
    CHECK(lookup_key("a").code == "KeyA");
    CHECK(lookup_key("a").key_code == 65);
    CHECK(lookup_key("7").code == "Digit7");
    CHECK(lookup_key(";").code == "Semicolon");
    CHECK_THROWS_AS(lookup_key("hyperkey"), Error);

    KeyChord select_all = parse_chord("ctrl+a");
    CHECK(select_all.modifiers == kCtrl);
    CHECK(select_all.key.key == "a");
    CHECK(select_all.commands == std::vector<std::string>{"selectAll"});
    auto events = chord_events(select_all);
    REQUIRE(events.size() == 4);  // Control down, a down, a up, Control up
    CHECK(events[0]["key"] == "Control");
    CHECK(events[1]["type"] == "rawKeyDown");  // no text inserted while Ctrl is held
    CHECK_FALSE(events[1].contains("text"));
    CHECK(events[1]["modifiers"] == kCtrl);
    CHECK(events[3]["type"] == "keyUp");

    KeyChord shift_tab = parse_chord("Shift+Tab");
    CHECK(shift_tab.modifiers == kShift);
    CHECK(shift_tab.key.key == "Tab");
    KeyChord upper = parse_chord("shift+a");
    CHECK(upper.key.key == "A");
    CHECK(chord_events(upper)[1]["text"] == "A");
    KeyChord many = parse_chord("Control + Shift + ArrowLeft");
    CHECK(many.modifiers == (kCtrl | kShift));
    CHECK(parse_chord("ctrl++").key.key == "=");  // the '+' key is Shift+'=' on US layout; key '=' unshifted
    KeyChord plain_enter = parse_chord("Enter");
    auto enter_events = chord_events(plain_enter);
    REQUIRE(enter_events.size() == 2);
    CHECK(enter_events[0]["type"] == "keyDown");
    CHECK(enter_events[0]["text"] == "\r");

    CHECK_THROWS_AS(parse_chord(""), Error);
    CHECK_THROWS_AS(parse_chord("a+b"), Error);
    CHECK_THROWS_AS(parse_chord("ctrl+nosuchkey"), Error);
}

TEST_CASE("base64 round trip and image headers") {
    std::vector<uint8_t> bytes = {0, 1, 2, 250, 251, 252, 253};
    for (size_t n = 0; n <= bytes.size(); ++n) {
        std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<long>(n));
        CHECK(base64_decode(base64_encode(part)) == part);
    }
    CHECK(base64_encode({'M', 'a', 'n'}) == "TWFu");
    CHECK_THROWS_AS(base64_decode("TW!u"), Error);

    // A 1x1 PNG (IHDR says width 3, height 2 here) and a minimal JPEG SOF0 header.
    std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D',
                                'R',  0,   0,   0,   3,    0,    0,    0,    2, 8, 2, 0,  0,   0};
    int w = 0, h = 0;
    image_dimensions(png, ImageFormat::kPng, w, h);
    CHECK(w == 3);
    CHECK(h == 2);
    std::vector<uint8_t> jpeg = {0xFF, 0xD8, 0xFF, 0xE0, 0,    4,    0, 0, 0xFF, 0xC0, 0,
                                 11,   8,    0x02, 0xD0, 0x05, 0x00, 3, 0, 0,    0};
    image_dimensions(jpeg, ImageFormat::kJpeg, w, h);
    CHECK(w == 1280);
    CHECK(h == 720);
    CHECK_THROWS_AS(image_dimensions(jpeg, ImageFormat::kPng, w, h), Error);
}

TEST_CASE("viewport and screenshot mapping are exact inverses") {
    ViewportGeometry v{1280, 720, 1.5};
    CHECK(v.pixel_width() == 1920);
    CHECK(v.pixel_height() == 1080);
    CssPoint c = v.css_from_pixel(300, 150);
    CHECK(c.x == doctest::Approx(200));
    CHECK(c.y == doctest::Approx(100));
    CssPoint p = v.pixel_from_css(c.x, c.y);
    CHECK(p.x == doctest::Approx(300));
    CHECK(v.contains_css(0, 0));
    CHECK_FALSE(v.contains_css(1280, 10));

    Screenshot clip;
    clip.css_region = {100, 50, 200, 100};
    clip.pixels_per_css = 2;
    CssPoint q = clip.css_from_pixel(40, 20);
    CHECK(q.x == doctest::Approx(120));
    CHECK(q.y == doctest::Approx(60));
    CssPoint r = clip.pixel_from_css(q.x, q.y);
    CHECK(r.x == doctest::Approx(40));
    CHECK(r.y == doctest::Approx(20));
}

TEST_CASE("launch flags: closed network, headless, pipe; --no-sandbox only when asked") {
    auto flags = default_chromium_flags(false);
    auto has = [&](const std::string& f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
    for (const char* f :
         {"--headless=new", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
          "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
          "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio"}) {
        CHECK_MESSAGE(has(f), f);
    }
    CHECK_FALSE(has("--no-sandbox"));
    flags = default_chromium_flags(true);
    CHECK(has("--no-sandbox"));
}
