#include "agent/environment.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include "base/error.h"
#include "base/utf8.h"
#include "tools/browser/browser_session.h"

namespace surf::agent {

namespace {
std::string point_text(const tools::CssPoint& p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "(%.0f, %.0f)", p.x, p.y);
    return buf;
}

std::string quoted_list(const std::vector<std::string>& items, size_t max_items = 40) {
    std::string s;
    for (size_t i = 0; i < items.size() && i < max_items; ++i)
        s += (i ? ", \"" : "\"") + surf::shorten_utf8(items[i], 60) + "\"";
    if (items.size() > max_items) s += " and " + std::to_string(items.size() - max_items) + " more";
    return items.empty() ? "(none)" : s;
}

// What choosing `wanted` in the <select> at `p` did, as the policy reads it; throws Error(kInvalidArgument)
// when nothing was chosen, naming the options so that the next step can pick one of them.
std::string choice_outcome(const tools::SelectResult& r, const std::string& wanted,
                           const tools::CssPoint& p) {
    const std::string where = r.element + " at " + point_text(p);
    if (!r.problem.empty())
        throw Error(ErrorKind::kInvalidArgument,
                    r.problem + " in " + where + "; its options are " + quoted_list(r.options));
    if (r.unchanged) return "\"" + r.chosen + "\" was already chosen in " + where;
    std::string out = "chose \"" + r.chosen + "\" in " + where;
    if (r.match != "exact")
        out += " (the " + r.match + " match of \"" + surf::shorten_utf8(wanted, 60) + "\")";
    out += ", was \"" + r.previous + "\"";
    if (r.now != r.chosen) out += "; the page then showed \"" + r.now + "\" instead";
    return out;
}
}  // namespace

BrowserEnvironment::BrowserEnvironment(tools::BrowserSession& session, BrowserEnvironmentOptions options)
    : session_(session), options_(options) {}

void BrowserEnvironment::drain_events(std::vector<std::string>* out) {
    bool restarted = false;
    try {
        for (const tools::SessionEvent& e : session_.take_events()) {
            pending_events_.push_back(std::string(tools::session_event_kind_name(e.kind)) + ": " + e.message);
            if (e.kind == tools::SessionEventKind::kBrowserRestarted) restarted = true;
        }
    } catch (const Error& e) {
        pending_events_.push_back(std::string("browser: ") + e.what());
    }
    if (restarted && !last_url_.empty()) {
        // The relaunched browser lost the page: reopen where the agent was, so the run can go on.
        try {
            const tools::NavigationResult r = session_.navigate(last_url_);
            pending_events_.push_back("reopened " + last_url_ +
                                      " after the browser restart: " + r.describe());
        } catch (const Error& e) {
            pending_events_.push_back("could not reopen " + last_url_ +
                                      " after the browser restart: " + e.what());
        }
    }
    if (out) {
        out->insert(out->end(), pending_events_.begin(), pending_events_.end());
        pending_events_.clear();
    }
}

ActionOutcome BrowserEnvironment::guarded(const std::string& what, const std::function<std::string()>& body) {
    ActionOutcome out;
    try {
        out.message = body();
    } catch (const Error& e) {
        out.ok = false;
        out.error_kind = error_kind_name(e.kind());
        out.message = what + " failed (" + out.error_kind + "): " + e.what();
    } catch (const std::exception& e) {
        out.ok = false;
        out.error_kind = "internal";
        out.message = what + " failed: " + e.what();
    }
    drain_events(nullptr);
    return out;
}

ActionOutcome BrowserEnvironment::open(const std::string& url) {
    bool unreachable = false;
    ActionOutcome out = guarded("goto " + url, [&] {
        const tools::NavigationResult r = session_.navigate(url);
        if (r.ok() || !r.url.empty()) last_url_ = r.url.empty() ? url : r.url;
        // An HTTP error page is a page the agent can read; no page at all is not.
        unreachable = r.outcome == tools::NavigationOutcome::kNetworkError ||
                      r.outcome == tools::NavigationOutcome::kTimeout;
        return r.describe();
    });
    if (out.ok && unreachable) {
        out.ok = false;
        out.error_kind = "network";
    }
    return out;
}

Observation BrowserEnvironment::observe() {
    Observation obs;
    drain_events(nullptr);
    try {
        if (options_.after_action.count() > 0) std::this_thread::sleep_for(options_.after_action);
        const tools::Screenshot shot = session_.screenshot();
        obs.png = shot.bytes;
        obs.frame = ScreenFrame::of(shot);
        obs.image = std::make_shared<model::Image>(model::decode_image(shot.bytes, "screenshot"));
        obs.url = session_.url();
        obs.title = session_.title();
        if (session_.tab_count() > 1) {
            const std::vector<tools::TabInfo> tabs = session_.tabs();
            for (size_t i = 0; i < tabs.size(); ++i)
                obs.tabs.push_back("[" + std::to_string(i) + "] " + tabs[i].title + " (" + tabs[i].url + ")" +
                                   (tabs[i].active ? " (active)" : ""));
        }
        if (!obs.url.empty() && obs.url != "about:blank") last_url_ = obs.url;
    } catch (const Error& e) {
        obs.image.reset();
        obs.error = std::string("no screenshot (") + error_kind_name(e.kind()) + "): " + e.what();
    }
    drain_events(&obs.events);
    return obs;
}

ActionOutcome BrowserEnvironment::execute(const Action& action, const ActionPoints& points) {
    const size_t needed = action_points(action).size();
    if ((needed >= 1 && !points.at) || (needed >= 2 && !points.to))
        return ActionOutcome{false, "no point to act on", "invalid_argument"};
    return guarded(describe_action(action),
                   [&] { return needed ? act_at(action, *points.at, points.to) : act(action); });
}

std::string BrowserEnvironment::act_at(const Action& action, const tools::CssPoint& at,
                                       const std::optional<tools::CssPoint>& to) {
    if (std::holds_alternative<ClickAction>(action)) {
        session_.click(at.x, at.y);
        return "clicked " + point_text(at);
    }
    if (auto* w = std::get_if<WriteAction>(&action)) {
        // Typing into a <select> changes nothing: writing into one chooses the option with that text.
        const tools::SelectResult r = session_.select_option(at.x, at.y, w->content);
        if (r.found) return "writing into a <select> chooses an option: " + choice_outcome(r, w->content, at);
        session_.click(at.x, at.y);
        session_.type_text(w->content, w->clear);
        if (w->press_enter) session_.press("Enter");
        return "typed " + std::to_string(w->content.size()) + " characters at " + point_text(at) +
               (w->press_enter ? " and pressed Enter" : "");
    }
    if (auto* s = std::get_if<SelectAction>(&action)) {
        const tools::SelectResult r = session_.select_option(at.x, at.y, s->option);
        if (!r.found)
            throw Error(ErrorKind::kInvalidArgument,
                        "no <select> at " + point_text(at) + " (the point is on " + r.element +
                            "); a dropdown made of other elements opens with click, then click its option");
        return choice_outcome(r, s->option, at);
    }
    if (auto* u = std::get_if<UploadAction>(&action)) return upload(*u, at);
    if (std::holds_alternative<HoverAction>(action)) {
        session_.move_mouse(at.x, at.y);
        return "moved the mouse to " + point_text(at);
    }
    if (std::holds_alternative<DoubleClickAction>(action)) {
        session_.double_click(at.x, at.y);
        return "double-clicked " + point_text(at);
    }
    if (std::holds_alternative<RightClickAction>(action)) {
        session_.right_click(at.x, at.y);
        return "right-clicked " + point_text(at);
    }
    if (std::holds_alternative<DragAction>(action)) {
        session_.drag(at.x, at.y, to->x, to->y);
        return "dragged from " + point_text(at) + " to " + point_text(*to);
    }
    throw Error(ErrorKind::kInvalidArgument, std::string(action_name(action)) + " acts on no point");
}

// Clicks the file field at `at` with the file set for its chooser, and waits for the chooser to take it.
std::string BrowserEnvironment::upload(const UploadAction& u, const tools::CssPoint& at) {
    const auto choosers = [&] {
        size_t n = 0;
        for (const tools::SessionEvent& e : session_.event_log())
            n += e.kind == tools::SessionEventKind::kFileChooser;
        return n;
    };
    const size_t before = choosers();
    session_.set_upload_files({u.file});
    session_.click(at.x, at.y);
    bool received = false;
    for (int i = 0; i < 30 && !received; ++i) {
        received = choosers() > before;
        if (!received) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    session_.set_upload_files({});
    const std::string name = std::filesystem::path(u.file).filename().string();
    if (!received)
        throw Error(ErrorKind::kInvalidArgument,
                    "nothing at " + point_text(at) + " opened a file chooser: click the file field itself");
    return "gave " + name + " to the file field at " + point_text(at);
}

std::string BrowserEnvironment::act(const Action& action) {
    if (auto* s = std::get_if<ScrollAction>(&action)) {
        const tools::ViewportGeometry& v = session_.viewport();
        const double dy = options_.scroll_fraction * v.css_height,
                     dx = options_.scroll_fraction * v.css_width;
        double sx = 0, sy = 0;
        switch (s->direction) {
            case ScrollDirection::kUp: sy = -dy; break;
            case ScrollDirection::kDown: sy = dy; break;
            case ScrollDirection::kLeft: sx = -dx; break;
            case ScrollDirection::kRight: sx = dx; break;
        }
        session_.scroll(v.css_width / 2.0, v.css_height / 2.0, sx, sy);
        return std::string("scrolled ") + scroll_direction_name(s->direction);
    }
    if (auto* g = std::get_if<GotoAction>(&action)) {
        const tools::NavigationResult r = session_.navigate(g->url);
        last_url_ = r.url.empty() ? g->url : r.url;
        return r.describe();
    }
    if (auto* k = std::get_if<KeyAction>(&action)) {
        session_.press(k->keys);
        return "pressed " + k->keys;
    }
    if (std::holds_alternative<BackAction>(action)) return session_.back().describe();
    if (std::holds_alternative<RefreshAction>(action)) return session_.reload().describe();
    if (auto* w = std::get_if<WaitAction>(&action)) return wait(w->seconds);
    if (auto* t = std::get_if<SwitchTabAction>(&action)) {
        const size_t n = session_.tab_count();
        if (static_cast<size_t>(t->index) >= n)
            throw Error(ErrorKind::kInvalidArgument, "no tab " + std::to_string(t->index) +
                                                         " (the open tabs are 0 to " + std::to_string(n - 1) +
                                                         ")");
        session_.activate_tab(static_cast<size_t>(t->index));
        return "switched to tab " + std::to_string(t->index) + ": " + session_.url();
    }
    if (std::holds_alternative<CloseTabAction>(action)) {
        session_.close_active_tab();
        return "closed the tab; now on " + session_.url();
    }
    if (auto* c = std::get_if<CustomAction>(&action))
        throw Error(ErrorKind::kInvalidArgument,
                    c->name + " is a custom action: its run's handler performs it");
    return "answer (no browser action)";
}

std::string BrowserEnvironment::wait(int seconds) {
    const auto d = std::min<std::chrono::milliseconds>(std::chrono::seconds(seconds), options_.max_wait);
    // In slices, so that a cancelled run (Ctrl-C, Agent::cancel) does not wait the rest out.
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now(), until = start + d;
    for (Clock::time_point now = start; now < until; now = Clock::now()) {
        if (options_.cancel && options_.cancel->load()) {
            const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
            return "wait cancelled after " + std::to_string(waited.count()) + " ms";
        }
        std::this_thread::sleep_for(std::min<Clock::duration>(until - now, std::chrono::milliseconds(50)));
    }
    return "waited " + std::to_string(d.count()) + " ms";
}

}  // namespace surf::agent
