// `surf browse URL`: open a page in headless Chromium, optionally act on it, and save a screenshot.
// A debugging aid for the browser tool (tools/browser); actions run in the order clicks, typing, keys.
#include <cstdio>

#include "apps/cli.h"
#include "base/error.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

namespace {

using namespace surf::tools;

std::pair<double, double> parse_point(const std::string& text) {
    size_t comma = text.find(',');
    try {
        if (comma == std::string::npos) throw std::invalid_argument("no comma");
        return {std::stod(text.substr(0, comma)), std::stod(text.substr(comma + 1))};
    } catch (const std::exception&) {
        throw surf::Error(surf::ErrorKind::kInvalidArgument,
                          "--click expects X,Y in CSS pixels, got '" + text + "'");
    }
}

int run_browse(const surf::cli::Args& args) {
    if (args.positional().size() != 1) {
        throw surf::Error(surf::ErrorKind::kInvalidArgument, "browse expects exactly one URL");
    }
    SessionOptions options;
    options.viewport.css_width = static_cast<int>(args.get_int("width", 1280, 16, 8192));
    options.viewport.css_height = static_cast<int>(args.get_int("height", 720, 16, 8192));
    options.viewport.device_scale_factor = args.get_double("scale", 1.0, 0.25, 4);
    options.navigation_timeout = std::chrono::milliseconds(args.get_int("timeout-ms", 30000, 1, 600000));
    options.guard =
        NavigationGuard(args.all("allow"), args.all("deny"), surf::tools::LocalSchemes::kFileAlways);

    auto browser = Browser::launch();
    auto session = browser->new_session(options);
    NavigationResult nav = session->navigate(args.positional()[0]);
    std::printf("navigate: %s\n", nav.describe().c_str());
    for (const auto& point : args.all("click")) {
        auto [x, y] = parse_point(point);
        session->click(x, y);
        std::printf("click (%g, %g)\n", x, y);
    }
    if (args.has("type")) session->type_text(args.get("type"), args.has("clear"));
    for (const auto& key : args.all("press")) session->press(key);
    std::printf("url: %s\ntitle: %s\n", session->url().c_str(), session->title().c_str());
    for (const auto& tab : session->tabs()) {
        std::printf("tab%s %s  %s\n", tab.active ? "*" : " ", tab.url.c_str(), tab.title.c_str());
    }
    for (const auto& event : session->take_events()) {
        std::printf("event %s: %s\n", session_event_kind_name(event.kind), event.message.c_str());
    }
    if (args.has("screenshot")) {
        std::string path = args.get("screenshot");
        ScreenshotOptions shot_options;
        bool jpeg = path.size() > 4 && (path.ends_with(".jpg") || path.ends_with(".jpeg"));
        shot_options.format = jpeg ? ImageFormat::kJpeg : ImageFormat::kPng;
        Screenshot shot = session->screenshot(shot_options);
        shot.save(path);
        std::printf("screenshot: %s (%dx%d px, %.3g px per CSS px)\n", path.c_str(), shot.width, shot.height,
                    shot.pixels_per_css);
    }
    return nav.ok() ? 0 : 2;
}

SURF_COMMAND(surf::cli::Command{
    "browse",
    "Open a URL in headless Chromium, act on it, save a screenshot (debugging aid).",
    "URL [--screenshot out.png|out.jpg] [--click X,Y]... [--type TEXT [--clear]] [--press "
    "KEY]...",
    {{"screenshot", "PATH", "save a viewport screenshot (.png or .jpg)"},
     {"click", "X,Y", "click at CSS pixel X,Y", true},
     {"type", "TEXT", "type into the focused element"},
     {"clear", "", "clear the focused element before typing"},
     {"press", "KEY", "press a key or chord, e.g. Enter or ctrl+a", true},
     {"width", "N", "viewport width in CSS px (1280)"},
     {"height", "N", "viewport height in CSS px (720)"},
     {"scale", "K", "device scale factor (1)"},
     {"timeout-ms", "MS", "navigation timeout (30000)"},
     {"allow", "DOMAIN", "allow-list entry for the navigation guard", true},
     {"deny", "DOMAIN", "deny-list entry for the navigation guard", true}},
    run_browse});

}  // namespace
