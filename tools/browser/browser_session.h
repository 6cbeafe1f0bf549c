// One agent's browser: an isolated browser context (own cookies, storage, cache, downloads) and its tabs,
// plus every page action the agent can take, in CSS pixels of a fixed viewport.
//
// Thread safety: a session's actions are serialised by its own mutex; different sessions may be driven
// from different threads at once. Events (dialogs, popups, denied navigations, downloads, restarts) are
// recorded in a log the agent reads with take_events().
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/browser/input.h"
#include "tools/browser/navigation_guard.h"
#include "tools/browser/screenshot.h"

namespace surf::tools {

class Browser;
class FilteringProxy;

enum class DialogPolicy { kAccept, kDismiss };

// SessionOptions::storage_state's cookies as Storage.setCookies takes them, and the script that restores its
// localStorage ("" when it has none). Throw Error(kInvalidArgument) naming the malformed entry.
std::vector<nlohmann::json> storage_cookie_params(const nlohmann::json& state);
std::string storage_restore_script(const nlohmann::json& state);

struct SessionOptions {
    ViewportGeometry viewport;  // 1280×720 CSS px at device scale factor 1 by default
    DialogPolicy dialog_policy = DialogPolicy::kAccept;
    std::string prompt_text;  // answer to window.prompt() when accepting
    bool allow_downloads = false;
    std::filesystem::path download_dir;  // "" = a per-session folder under the browser's work dir
    NavigationGuard guard;
    bool follow_popups = true;  // a tab opened by the page becomes the active tab
    // Cookies and localStorage to start with, as storage_state() returns them (Playwright's storageState
    // layout: {"cookies": [...], "origins": [{"origin", "localStorage": [{"name", "value"}]}]}); null = none.
    nlohmann::json storage_state;
    std::chrono::milliseconds command_timeout{10000};
    std::chrono::milliseconds navigation_timeout{30000};
    // After load: wait for network quiet (networkAlmostIdle) but at most this long.
    std::chrono::milliseconds settle_cap{1000};
    // After an input action: how long to watch for a navigation or a popup the action may have started.
    std::chrono::milliseconds action_grace{250};
};

enum class NavigationOutcome {
    kOk,
    kHttpError,     // the server answered with status >= 400
    kNetworkError,  // net::ERR_* (DNS failure, refused connection, ...)
    kTimeout,       // the load did not finish in time; the page is left as it is (loading stopped)
    kNoHistory,     // back()/forward() with nowhere to go
};

struct NavigationResult {
    NavigationOutcome outcome = NavigationOutcome::kOk;
    std::string requested_url;
    std::string url;         // the tab's URL afterwards
    int http_status = 0;     // 0 when unknown (file:, data:, network error)
    std::string error_text;  // "net::ERR_NAME_NOT_RESOLVED", ...
    std::chrono::milliseconds elapsed{0};
    bool ok() const { return outcome == NavigationOutcome::kOk; }
    std::string describe() const;  // one line for an observation
};

enum class SessionEventKind {
    kDialog,            // a JavaScript dialog was answered
    kPopupOpened,       // the page opened a tab (now active if follow_popups)
    kTabClosed,         // a tab closed (by the page or by us); `detail` says which tab is active now
    kNavigationDenied,  // the guard refused a navigation (url, detail = rule)
    kDownload,          // a download began (denied or saved; detail = state or path)
    kFileChooser,       // a file chooser was intercepted
    kTabCrashed,        // the renderer of a tab crashed
    kBrowserRestarted,  // the browser died and was relaunched: all page state of the session was lost
};

struct SessionEvent {
    SessionEventKind kind;
    std::string message;  // human-readable, names the URL/rule/text
    std::string url;
    std::string detail;
};
const char* session_event_kind_name(SessionEventKind kind);

struct TabInfo {
    std::string target_id;
    std::string url;
    std::string title;
    bool active = false;
};

// What select_option found and did. Texts are the options' visible texts, whitespace collapsed.
struct SelectResult {
    bool found = false;                // a <select> is at the point (or the <label> of one)
    std::string element;               // the <select>, or what is at the point instead: "<div id="menu">"
    std::vector<std::string> options;  // its options' texts, in order
    std::string previous;              // the option shown before
    std::string chosen;                // the option matched and chosen ("" when none was)
    std::string match;                 // how it matched: "exact", "case-insensitive" or "prefix"
    std::string problem;               // why none was chosen: no match, several prefixes, disabled
    bool unchanged = false;            // it was chosen already: no events fired
    std::string now;                   // the option shown after the page's input/change handlers ran
};

struct ScreenshotOptions {
    ImageFormat format = ImageFormat::kPng;
    int jpeg_quality = 90;
    std::optional<CssRect> clip;  // CSS px of the viewport; default the whole viewport
};

class BrowserSession {
public:
    // Use Browser::new_session().
    BrowserSession(std::shared_ptr<Browser> browser, SessionOptions options, int index);
    ~BrowserSession();
    BrowserSession(const BrowserSession&) = delete;
    BrowserSession& operator=(const BrowserSession&) = delete;

    // --- navigation ---
    // Throws Error(kNavigationDenied) naming the URL and rule when the guard refuses it (before or
    // during the load); other failures are outcomes in the result. Waits for load plus a bounded settle.
    NavigationResult navigate(const std::string& url);
    NavigationResult back();
    NavigationResult forward();
    NavigationResult reload();
    std::string url();
    std::string title();

    // --- observation ---
    Screenshot screenshot(const ScreenshotOptions& options = {});
    const ViewportGeometry& viewport() const { return options_.viewport; }
    // Runs JavaScript in the active tab's page and returns its value (promises awaited). Throws
    // Error(kBrowser) with the exception text if the script throws.
    nlohmann::json evaluate(const std::string& expression);
    // Polls a JavaScript condition until it is truthy; false on timeout.
    bool wait_for(const std::string& condition, std::chrono::milliseconds timeout);

    // --- input, in CSS pixels of the viewport; a point outside it is Error(kInvalidArgument) ---
    void click(double x, double y, MouseButton button = MouseButton::kLeft, int click_count = 1);
    void double_click(double x, double y);
    void right_click(double x, double y);
    void move_mouse(double x, double y);
    // Presses the left button at (x, y), moves to (to_x, to_y) in `steps` equal moves with it held and
    // releases it there.
    void drag(double x, double y, double to_x, double to_y, int steps = 8);
    // Chooses an option of the native <select> at (x, y) (or of the <label> there) by its visible text: an
    // exact match, else a case-insensitive one, else the only option that starts with `option`; selects it
    // and fires input and change, as a person's choice does (page_forms.cpp). No <select> at the point is
    // result.found == false, and no usable match is result.problem: neither changes the page.
    SelectResult select_option(double x, double y, const std::string& option);
    // Wheel scroll at (x, y): the element under the point scrolls (inner scrollable divs too).
    void scroll(double x, double y, double delta_x, double delta_y);
    // Types into the focused element ('\n' presses Enter); clear_first selects all and deletes first.
    void type_text(const std::string& text, bool clear_first = false);
    void clear_focused();
    // Presses a key or chord: "Enter", "Tab", "Escape", "Backspace", "ArrowDown", "ctrl+a", "shift+Tab".
    void press(const std::string& chord);
    // Waits for a navigation or popup the last action may have started (used by every input action).
    void settle();

    // --- tabs ---
    std::vector<TabInfo> tabs();
    void activate_tab(size_t index);
    // Closes the active tab; the previously active one becomes active (a blank tab if none is left).
    void close_active_tab();
    size_t tab_count();

    // --- events and files ---
    std::vector<SessionEvent> take_events();      // events since the last call
    std::vector<SessionEvent> event_log() const;  // everything since the session began
    // Files to hand to the next intercepted file chooser (empty: the chooser is dismissed).
    void set_upload_files(std::vector<std::string> paths);
    std::filesystem::path download_dir() const { return download_dir_; }
    // The context's cookies and the localStorage of the open tabs' origins (and of the origins it started
    // with that no tab has open), in SessionOptions::storage_state's layout, so that a later session starts
    // logged in.
    nlohmann::json storage_state();
    int restarts() const;  // how many times this session was rebuilt after a browser crash
    // Whether the session's connections go through a FilteringProxy (its guard has IP-address deny rules),
    // and that proxy's latest refusals and errors (empty without one).
    bool filtering_proxy() const { return proxy_ != nullptr; }
    std::vector<std::string> proxy_log() const;

    // --- called by Browser on its I/O thread ---
    void on_target_attached(const nlohmann::json& params);
    void on_target_detached(const std::string& cdp_session_id);
    void on_page_event(const std::string& cdp_session_id, const std::string& method,
                       const nlohmann::json& params);
    void on_browser_event(const std::string& method, const nlohmann::json& params);
    void on_browser_lost(const std::string& reason);

private:
    struct Tab {
        std::string target_id;
        std::string cdp_session;
        std::string opener_id;
        std::string url;
        bool loading = false;
        // A tab attaches paused, before our Page.enable reaches it, so a load it began on creation (the
        // first page of a target=_blank popup) never reports Page.frameStartedLoading; only its
        // Page.frameStartedNavigating and Page.frameStoppedLoading arrive. Until the tab has reported a
        // load start or stop, frameStartedNavigating marks it loading instead.
        bool load_start_reported = false;
        // Set while a popup has shown no sign of its first navigation yet: settling waits for one until
        // this time (action_grace after it attached), no longer, since a popup need not navigate at all.
        std::optional<std::chrono::steady_clock::time_point> first_navigation_deadline;
        bool committed = false;                                  // has left about:blank
        int load_events = 0;                                     // main-frame "load" lifecycle events seen
        std::map<std::string, std::set<std::string>> lifecycle;  // loaderId → lifecycle event names
        std::deque<std::string> loader_order;
    };

    // Everything below runs with action_mutex_ held.
    void ensure_ready();
    void rebuild(uint64_t generation);
    std::string open_tab();  // returns the target id once attached
    Tab active_tab_copy();
    nlohmann::json call_tab(const std::string& method, const nlohmann::json& params,
                            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
    // For input events: a tab the event itself closed (window.close() on click) is a finished action,
    // reported by returning false so the rest of the gesture is not sent to another tab.
    bool input_to_tab(const Tab& tab, const std::string& method, const nlohmann::json& params);
    void check_point(double x, double y, const char* what) const;
    bool mouse_event(const Tab& tab, const char* type, double x, double y, MouseButton button, int buttons,
                     int click_count);
    void settle_locked(std::chrono::steady_clock::time_point started, NavigationResult* result);
    void finish_navigation(NavigationResult& result, std::chrono::steady_clock::time_point started);
    NavigationResult history_step(int delta);
    // Waits on state_cv_ until done() or the deadline (false); throws Error(kBrowser) if the browser dies.
    bool wait_state(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline,
                    const std::function<bool()>& done);
    void click_locked(double x, double y, MouseButton button, int click_count);
    void press_locked(const KeyChord& chord);
    nlohmann::json evaluate_locked(const std::string& expression, std::chrono::milliseconds timeout);
    nlohmann::json target_info_locked();

    // Called with state_mutex_ held.
    void record(SessionEventKind kind, std::string message, std::string url = "", std::string detail = "");
    void activate_locked(const std::string& target_id);
    Tab* find_tab_locked(const std::string& cdp_session_or_target);
    // on_page_event's larger cases, state_mutex_ held.
    void on_lifecycle_locked(Tab& tab, const nlohmann::json& params);
    void answer_dialog_locked(const std::string& sid, const nlohmann::json& params);
    void fill_file_chooser_locked(const std::string& sid, Tab& tab, const nlohmann::json& params);
    bool check_paused_request_locked(const std::string& sid, Tab& tab, bool main_frame,
                                     const nlohmann::json& params);
    Tab* active_tab_locked();
    // Whether the active tab is still busy with what an action started: std::nullopt when settled,
    // time_point::max() while it loads (an event ends that), else the end of a bounded wait for a popup
    // the page announced but that has not attached, or a popup whose first navigation has not begun.
    std::optional<std::chrono::steady_clock::time_point> unsettled_until_locked();

    std::shared_ptr<Browser> browser_;
    SessionOptions options_;
    int index_;
    // Every connection of the context goes through it when the guard has IP-address deny rules; it outlives
    // the context (the destructor disposes the context first) and keeps its port across rebuilds.
    std::unique_ptr<FilteringProxy> proxy_;
    std::filesystem::path download_dir_;
    std::mutex action_mutex_;

    mutable std::mutex state_mutex_;
    std::condition_variable state_cv_;
    uint64_t generation_ = 0;  // the browser generation our context lives in (0 = none yet)
    bool lost_ = false;        // the browser of generation_ died
    std::string lost_reason_;
    std::string context_id_;
    std::vector<Tab> tabs_;                // in opening order
    std::vector<std::string> activation_;  // target ids, most recently active last
    // One entry per Page.windowOpen not yet matched by an attached popup (only with follow_popups): the
    // time until which settling waits for that popup to attach.
    std::deque<std::chrono::steady_clock::time_point> popups_announced_;
    std::vector<SessionEvent> events_;
    size_t events_taken_ = 0;
    std::vector<std::string> upload_files_;
    std::vector<nlohmann::json>
        restore_cookies_;         // SessionOptions::storage_state's cookies, set on each rebuild
    std::string restore_script_;  // restores SessionOptions::storage_state's localStorage in every new tab
    std::string last_url_;
    int restarts_ = 0;
};

}  // namespace surf::tools
