// BrowserSession's page actions: navigation with load/settle waiting, screenshots, mouse, keyboard and
// JavaScript. Every action runs with the session's action mutex held and every CDP call has a deadline.
#include <cmath>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

namespace surf::tools {
namespace {

using Clock = std::chrono::steady_clock;

const char* outcome_name(NavigationOutcome outcome) {
    switch (outcome) {
        case NavigationOutcome::kOk: return "ok";
        case NavigationOutcome::kHttpError: return "http error";
        case NavigationOutcome::kNetworkError: return "network error";
        case NavigationOutcome::kTimeout: return "timeout";
        case NavigationOutcome::kNoHistory: return "no history entry";
    }
    return "?";
}

}  // namespace

std::string NavigationResult::describe() const {
    std::ostringstream out;
    out << (requested_url.empty() ? url : requested_url) << ": " << outcome_name(outcome);
    if (http_status) out << " (HTTP " << http_status << ")";
    if (!error_text.empty()) out << " (" << error_text << ")";
    if (!url.empty() && url != requested_url) out << ", now at " << url;
    // No load time: the text reaches the model's prompt, which must not change from run to run.
    return out.str();
}

// --- navigation ---

NavigationResult BrowserSession::navigate(const std::string& url) {
    std::lock_guard<std::mutex> action(action_mutex_);
    const auto started = Clock::now();
    GuardDecision decision = options_.guard.check(url);  // a URL without a scheme is kInvalidArgument
    if (!decision.allowed) {
        std::lock_guard<std::mutex> lock(state_mutex_);
        record(SessionEventKind::kNavigationDenied, decision.reason, url, decision.rule);
        throw Error(ErrorKind::kNavigationDenied, decision.reason);
    }
    ensure_ready();
    Tab tab = active_tab_copy();
    NavigationResult result;
    result.requested_url = url;
    size_t events_before;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        events_before = events_.size();
    }
    const auto deadline = started + options_.navigation_timeout;
    nlohmann::json answer;
    try {
        answer =
            browser_->call("Page.navigate", {{"url", url}}, tab.cdp_session, options_.navigation_timeout);
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTimeout) throw;
        // No response headers in time: stop the load so the tab is usable again, report the timeout.
        browser_->post("Page.stopLoading", {}, tab.cdp_session);
        result.outcome = NavigationOutcome::kTimeout;
        result.error_text = e.what();
        finish_navigation(result, started);
        return result;
    }
    const std::string error_text = answer.value("errorText", std::string());
    if (!error_text.empty()) {
        {
            // Refused by our request interception (e.g. a redirect to a refused host): a denial.
            std::lock_guard<std::mutex> lock(state_mutex_);
            for (size_t i = std::min(events_before, events_.size()); i < events_.size(); ++i) {
                if (events_[i].kind == SessionEventKind::kNavigationDenied) {
                    throw Error(ErrorKind::kNavigationDenied, events_[i].message);
                }
            }
        }
        result.outcome = error_text == "net::ERR_HTTP_RESPONSE_CODE_FAILURE"
                             ? NavigationOutcome::kHttpError
                             : NavigationOutcome::kNetworkError;
        result.error_text = error_text;
        finish_navigation(result, started);
        return result;
    }
    const std::string loader = answer.value("loaderId", std::string());
    if (!loader.empty()) {  // no loader: a same-document navigation (fragment), nothing to wait for
        std::unique_lock<std::mutex> lock(state_mutex_);
        auto seen = [&](const char* name) {
            Tab* t = find_tab_locked(tab.target_id);
            if (!t) return true;  // the tab closed itself: nothing left to wait for
            auto it = t->lifecycle.find(loader);
            return it != t->lifecycle.end() && it->second.count(name) > 0;
        };
        if (!wait_state(lock, deadline, [&] { return seen("load"); })) {
            lock.unlock();
            browser_->post("Page.stopLoading", {}, tab.cdp_session);
            result.outcome = NavigationOutcome::kTimeout;
            result.error_text = "the page did not finish loading within " +
                                std::to_string(options_.navigation_timeout.count()) + " ms";
        } else {
            // Bounded settle: network quiet (no more than 2 requests for 500 ms) or the cap, whichever first.
            wait_state(lock, std::min(deadline, Clock::now() + options_.settle_cap),
                       [&] { return seen("networkAlmostIdle"); });
        }
    }
    finish_navigation(result, started);
    return result;
}

void BrowserSession::finish_navigation(NavigationResult& result, Clock::time_point started) {
    try {
        result.url = target_info_locked().value("url", std::string());
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::kBrowser && !browser_->running()) throw;
    }
    if (result.outcome == NavigationOutcome::kOk || result.outcome == NavigationOutcome::kHttpError) {
        // The main document's HTTP status, as the page itself saw it (0 for file:, data:, about:).
        try {
            nlohmann::json status = evaluate_locked(
                "(() => { const e = performance.getEntriesByType('navigation')[0];"
                " return e && e.responseStatus ? e.responseStatus : 0; })()",
                std::chrono::milliseconds(3000));
            if (status.is_number_integer()) result.http_status = status.get<int>();
        } catch (const Error& e) {
            if (e.kind() == ErrorKind::kBrowser && !browser_->running()) throw;
        }
        if (result.http_status >= 400) result.outcome = NavigationOutcome::kHttpError;
    }
    result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
}

NavigationResult BrowserSession::history_step(int delta) {
    const auto started = Clock::now();
    ensure_ready();
    NavigationResult result;
    nlohmann::json history = call_tab("Page.getNavigationHistory", {});
    const int index = history.value("currentIndex", 0) + delta;
    const nlohmann::json& entries = history["entries"];
    if (index < 0 || index >= static_cast<int>(entries.size())) {
        result.outcome = NavigationOutcome::kNoHistory;
        result.error_text =
            delta < 0 ? "there is no previous page in this tab" : "there is no next page in this tab";
        finish_navigation(result, started);
        return result;
    }
    result.requested_url = entries[index].value("url", std::string());
    call_tab("Page.navigateToHistoryEntry", {{"entryId", entries[index]["id"]}});
    settle_locked(started, &result);
    finish_navigation(result, started);
    return result;
}

NavigationResult BrowserSession::back() {
    std::lock_guard<std::mutex> action(action_mutex_);
    return history_step(-1);
}

NavigationResult BrowserSession::forward() {
    std::lock_guard<std::mutex> action(action_mutex_);
    return history_step(+1);
}

NavigationResult BrowserSession::reload() {
    std::lock_guard<std::mutex> action(action_mutex_);
    const auto started = Clock::now();
    ensure_ready();
    NavigationResult result;
    call_tab("Page.reload", {});
    settle_locked(started, &result);
    finish_navigation(result, started);
    result.requested_url = result.url;
    return result;
}

void BrowserSession::settle_locked(Clock::time_point started, NavigationResult* result) {
    const auto deadline = started + options_.navigation_timeout;
    std::unique_lock<std::mutex> lock(state_mutex_);
    // 1. Give the action time to start a navigation or open a popup (both arrive as events).
    wait_state(lock, started + options_.action_grace, [] { return false; });
    // 2. Wait for the active tab (maybe a new popup) to finish loading, and for a popup the page
    //    announced or that has just attached to begin its navigation (each for a bounded time).
    for (auto until = unsettled_until_locked(); until && Clock::now() < deadline;
         until = unsettled_until_locked()) {
        wait_state(lock, std::min(deadline, *until), [&] { return unsettled_until_locked() != until; });
    }
    Tab* tab = active_tab_locked();
    const bool loaded = !tab || !tab->loading;
    if (!loaded) {
        browser_->post("Page.stopLoading", {}, tab->cdp_session);
        // Stopped now: a frameStoppedLoading that never comes must not stall every later action.
        tab->loading = false;
        if (result) {
            result->outcome = NavigationOutcome::kTimeout;
            result->error_text = "the page did not finish loading within " +
                                 std::to_string(options_.navigation_timeout.count()) + " ms";
        }
        return;
    }
    // 3. Bounded network quiet for the latest document.
    if (tab && !tab->loader_order.empty()) {
        const std::string target = tab->target_id, loader = tab->loader_order.back();
        wait_state(lock, std::min(deadline, Clock::now() + options_.settle_cap), [&] {
            Tab* t = find_tab_locked(target);
            if (!t) return true;
            auto it = t->lifecycle.find(loader);
            return it == t->lifecycle.end() || it->second.count("networkAlmostIdle") > 0 ||
                   it->second.count("load") == 0;
        });
    }
}

std::optional<Clock::time_point> BrowserSession::unsettled_until_locked() {
    const auto now = Clock::now();
    // A popup that did not attach in time (blocked, or window.open into an existing named window) is
    // no longer waited for.
    while (!popups_announced_.empty() && popups_announced_.front() <= now) popups_announced_.pop_front();
    if (!popups_announced_.empty()) return popups_announced_.front();
    const Tab* t = active_tab_locked();
    if (!t) return std::nullopt;
    if (t->loading) return Clock::time_point::max();
    if (t->first_navigation_deadline && now < *t->first_navigation_deadline)
        return t->first_navigation_deadline;
    return std::nullopt;
}

void BrowserSession::settle() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    settle_locked(Clock::now(), nullptr);
}

nlohmann::json BrowserSession::target_info_locked() {
    Tab tab = active_tab_copy();
    nlohmann::json r =
        browser_->call("Target.getTargetInfo", {{"targetId", tab.target_id}}, "", options_.command_timeout);
    return r["targetInfo"];
}

std::string BrowserSession::url() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    return target_info_locked().value("url", std::string());
}

std::string BrowserSession::title() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    return target_info_locked().value("title", std::string());
}

// --- observation ---

Screenshot BrowserSession::screenshot(const ScreenshotOptions& options) {
    std::lock_guard<std::mutex> action(action_mutex_);
    const ViewportGeometry& v = options_.viewport;
    Screenshot shot;
    shot.format = options.format;
    shot.css_region = {0, 0, static_cast<double>(v.css_width), static_cast<double>(v.css_height)};
    shot.pixels_per_css = v.device_scale_factor;
    nlohmann::json params = {{"format", options.format == ImageFormat::kPng ? "png" : "jpeg"},
                             {"fromSurface", true},
                             {"captureBeyondViewport", false}};
    if (options.format == ImageFormat::kJpeg) {
        if (options.jpeg_quality < 1 || options.jpeg_quality > 100) {
            throw Error(ErrorKind::kInvalidArgument,
                        "JPEG quality " + std::to_string(options.jpeg_quality) + " not in 1..100");
        }
        params["quality"] = options.jpeg_quality;
    }
    ensure_ready();
    if (options.clip) {
        const CssRect& c = *options.clip;
        if (!(c.width > 0 && c.height > 0) || c.x < 0 || c.y < 0 || c.x + c.width > v.css_width ||
            c.y + c.height > v.css_height) {
            throw Error(ErrorKind::kInvalidArgument, "screenshot clip must lie inside the " +
                                                         std::to_string(v.css_width) + "x" +
                                                         std::to_string(v.css_height) + " viewport");
        }
        // The clip of Page.captureScreenshot is in document coordinates: add the scroll offset so the
        // caller's viewport coordinates mean what they see.
        nlohmann::json metrics = call_tab("Page.getLayoutMetrics", {});
        const nlohmann::json& vv = metrics["cssVisualViewport"];
        params["clip"] = {{"x", c.x + vv.value("pageX", 0.0)},
                          {"y", c.y + vv.value("pageY", 0.0)},
                          {"width", c.width},
                          {"height", c.height},
                          {"scale", 1}};
        shot.css_region = c;
    }
    nlohmann::json r = call_tab("Page.captureScreenshot", params);
    shot.bytes = base64_decode(r.value("data", std::string()));
    image_dimensions(shot.bytes, shot.format, shot.width, shot.height);
    return shot;
}

nlohmann::json BrowserSession::evaluate_locked(const std::string& expression,
                                               std::chrono::milliseconds timeout) {
    nlohmann::json r =
        call_tab("Runtime.evaluate",
                 {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, timeout);
    if (r.contains("exceptionDetails")) {
        const nlohmann::json& d = r["exceptionDetails"];
        std::string text = d.contains("exception")
                               ? d["exception"].value("description", d.value("text", std::string()))
                               : d.value("text", std::string());
        throw Error(ErrorKind::kBrowser, "JavaScript exception in evaluate: " + text);
    }
    const nlohmann::json& result = r["result"];
    if (result.contains("value")) return result["value"];
    if (result.contains("unserializableValue")) return result["unserializableValue"];
    return nullptr;
}

nlohmann::json BrowserSession::evaluate(const std::string& expression) {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    return evaluate_locked(expression, options_.command_timeout);
}

bool BrowserSession::wait_for(const std::string& condition, std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        try {
            nlohmann::json v = evaluate_locked("!!(" + condition + ")", options_.command_timeout);
            if (v.is_boolean() && v.get<bool>()) return true;
        } catch (const Error& e) {
            // A navigation can destroy the context mid-evaluation; only a dead browser ends the wait.
            if (!browser_->running() || e.kind() == ErrorKind::kInvalidArgument) throw;
        }
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

// --- input ---

void BrowserSession::check_point(double x, double y, const char* what) const {
    if (!std::isfinite(x) || !std::isfinite(y) || !options_.viewport.contains_css(x, y)) {
        std::ostringstream msg;
        msg << what << " at (" << x << ", " << y << ") is outside the " << options_.viewport.css_width << "x"
            << options_.viewport.css_height << " CSS-pixel viewport";
        throw Error(ErrorKind::kInvalidArgument, msg.str());
    }
}

bool BrowserSession::mouse_event(const Tab& tab, const char* type, double x, double y, MouseButton button,
                                 int buttons, int click_count) {
    nlohmann::json params = {{"type", type}, {"x", x}, {"y", y}, {"modifiers", 0}, {"pointerType", "mouse"}};
    if (std::string(type) == "mouseMoved") {
        // A move with a button held (a drag) names that button, as a real mouse reports it.
        params["button"] = buttons ? mouse_button_name(button) : "none";
        params["buttons"] = buttons;
    } else {
        params["button"] = mouse_button_name(button);
        params["buttons"] = buttons;
        params["clickCount"] = click_count;
    }
    return input_to_tab(tab, "Input.dispatchMouseEvent", params);
}

void BrowserSession::click_locked(double x, double y, MouseButton button, int click_count) {
    const auto started = Clock::now();
    ensure_ready();
    const Tab tab = active_tab_copy();
    bool open = mouse_event(tab, "mouseMoved", x, y, button, 0, 0);
    // A double click is two press/release pairs with clickCount 1 then 2, as a real mouse sends them.
    for (int i = 1; open && i <= click_count; ++i) {
        open = mouse_event(tab, "mousePressed", x, y, button, mouse_button_bit(button), i) &&
               mouse_event(tab, "mouseReleased", x, y, button, 0, i);
    }
    settle_locked(started, nullptr);
}

void BrowserSession::click(double x, double y, MouseButton button, int click_count) {
    check_point(x, y, "click");
    if (click_count < 1 || click_count > 3) {
        throw Error(ErrorKind::kInvalidArgument,
                    "click count " + std::to_string(click_count) + " not in 1..3");
    }
    std::lock_guard<std::mutex> action(action_mutex_);
    click_locked(x, y, button, click_count);
}

void BrowserSession::double_click(double x, double y) {
    click(x, y, MouseButton::kLeft, 2);
}

void BrowserSession::right_click(double x, double y) {
    click(x, y, MouseButton::kRight, 1);
}

void BrowserSession::move_mouse(double x, double y) {
    check_point(x, y, "mouse move");
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    mouse_event(active_tab_copy(), "mouseMoved", x, y, MouseButton::kLeft, 0, 0);
}

void BrowserSession::drag(double x, double y, double to_x, double to_y, int steps) {
    check_point(x, y, "drag start");
    check_point(to_x, to_y, "drag end");
    if (steps < 1 || steps > 100)
        throw Error(ErrorKind::kInvalidArgument, "drag steps " + std::to_string(steps) + " not in 1..100");
    std::lock_guard<std::mutex> action(action_mutex_);
    const auto started = Clock::now();
    ensure_ready();
    const Tab tab = active_tab_copy();
    const MouseButton left = MouseButton::kLeft;
    const int held = mouse_button_bit(left);
    bool open = mouse_event(tab, "mouseMoved", x, y, left, 0, 0) &&
                mouse_event(tab, "mousePressed", x, y, left, held, 1);
    for (int i = 1; open && i <= steps; ++i) {
        const double t = static_cast<double>(i) / steps;
        open = mouse_event(tab, "mouseMoved", x + t * (to_x - x), y + t * (to_y - y), left, held, 0);
    }
    if (open) mouse_event(tab, "mouseReleased", to_x, to_y, left, 0, 1);
    settle_locked(started, nullptr);
}

void BrowserSession::scroll(double x, double y, double delta_x, double delta_y) {
    check_point(x, y, "scroll");
    if (!std::isfinite(delta_x) || !std::isfinite(delta_y)) {
        throw Error(ErrorKind::kInvalidArgument, "scroll deltas must be finite numbers");
    }
    std::lock_guard<std::mutex> action(action_mutex_);
    const auto started = Clock::now();
    ensure_ready();
    const Tab tab = active_tab_copy();
    if (mouse_event(tab, "mouseMoved", x, y, MouseButton::kLeft, 0, 0)) {
        input_to_tab(tab, "Input.dispatchMouseEvent",
                     {{"type", "mouseWheel"},
                      {"x", x},
                      {"y", y},
                      {"deltaX", delta_x},
                      {"deltaY", delta_y},
                      {"modifiers", 0},
                      {"pointerType", "mouse"}});
    }
    settle_locked(started, nullptr);
}

void BrowserSession::press_locked(const KeyChord& chord) {
    const Tab tab = active_tab_copy();
    for (const nlohmann::json& event : chord_events(chord)) {
        if (!input_to_tab(tab, "Input.dispatchKeyEvent", event)) return;  // the key closed the tab
    }
}

void BrowserSession::press(const std::string& chord_text) {
    KeyChord chord = parse_chord(chord_text);
    std::lock_guard<std::mutex> action(action_mutex_);
    const auto started = Clock::now();
    ensure_ready();
    press_locked(chord);
    settle_locked(started, nullptr);
}

void BrowserSession::clear_focused() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    press_locked(parse_chord("ctrl+a"));
    press_locked(parse_chord("Backspace"));
}

void BrowserSession::type_text(const std::string& text, bool clear_first) {
    std::lock_guard<std::mutex> action(action_mutex_);
    const auto started = Clock::now();
    ensure_ready();
    if (clear_first) {
        // Select-all then delete: one edit, unlike Surfer-H's 100 Backspaces.
        press_locked(parse_chord("ctrl+a"));
        press_locked(parse_chord("Backspace"));
    }
    // insertText commits text like an IME (input events, no per-character keys); a newline is a real
    // Enter key so forms submit.
    size_t start = 0;
    for (;;) {
        size_t nl = text.find('\n', start);
        std::string part = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (!part.empty()) call_tab("Input.insertText", {{"text", part}});
        if (nl == std::string::npos) break;
        press_locked(parse_chord("Enter"));
        start = nl + 1;
    }
    settle_locked(started, nullptr);
}

}  // namespace surf::tools
