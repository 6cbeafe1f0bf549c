// BrowserSession: its browser context, its tabs and the events the browser reports about them.
// The page actions themselves are in page_actions.cpp.
#include "tools/browser/browser_session.h"

#include <algorithm>

#include "base/error.h"
#include "tools/browser/browser.h"
#include "tools/browser/filtering_proxy.h"

namespace surf::tools {

const char* session_event_kind_name(SessionEventKind kind) {
    switch (kind) {
        case SessionEventKind::kDialog: return "dialog";
        case SessionEventKind::kPopupOpened: return "popup_opened";
        case SessionEventKind::kTabClosed: return "tab_closed";
        case SessionEventKind::kNavigationDenied: return "navigation_denied";
        case SessionEventKind::kDownload: return "download";
        case SessionEventKind::kFileChooser: return "file_chooser";
        case SessionEventKind::kTabCrashed: return "tab_crashed";
        case SessionEventKind::kBrowserRestarted: return "browser_restarted";
    }
    return "unknown";
}

BrowserSession::BrowserSession(std::shared_ptr<Browser> browser, SessionOptions options, int index)
    : browser_(std::move(browser)), options_(std::move(options)), index_(index) {
    const ViewportGeometry& v = options_.viewport;
    if (v.css_width < 16 || v.css_height < 16 || v.css_width > 8192 || v.css_height > 8192 ||
        !(v.device_scale_factor > 0.25 && v.device_scale_factor <= 4)) {
        throw Error(ErrorKind::kInvalidArgument, "session viewport " + std::to_string(v.css_width) + "x" +
                                                     std::to_string(v.css_height) + " @" +
                                                     std::to_string(v.device_scale_factor) +
                                                     " is out of range (16..8192 CSS px, scale 0.25..4)");
    }
    // A malformed state is refused before anything starts.
    restore_cookies_ = storage_cookie_params(options_.storage_state);
    restore_script_ = storage_restore_script(options_.storage_state);
    download_dir_ = options_.download_dir.empty()
                        ? browser_->work_dir() / ("downloads-" + std::to_string(index_))
                        : options_.download_dir;
    if (options_.allow_downloads) std::filesystem::create_directories(download_dir_);
    if (!options_.guard.address_deny_rules().empty())
        proxy_ = std::make_unique<FilteringProxy>(options_.guard);
    std::lock_guard<std::mutex> lock(action_mutex_);
    try {
        ensure_ready();
    } catch (...) {
        browser_->unroute_session(this);
        throw;
    }
}

BrowserSession::~BrowserSession() {
    browser_->unroute_session(this);
    std::string context;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        if (!lost_ && generation_ == browser_->generation()) context = context_id_;
    }
    if (!context.empty() && browser_->running()) {
        try {
            browser_->call("Target.disposeBrowserContext", {{"browserContextId", context}}, "",
                           std::chrono::seconds(5));
        } catch (const Error&) {
            // The browser is going away anyway; its contexts die with it.
        }
    }
    if (proxy_) proxy_->stop();
}

std::vector<std::string> BrowserSession::proxy_log() const {
    return proxy_ ? proxy_->log() : std::vector<std::string>{};
}

void BrowserSession::ensure_ready() {
    uint64_t generation = browser_->ensure_running();
    bool rebuild_needed, need_tab;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        rebuild_needed = generation != generation_ || lost_;
        need_tab = tabs_.empty();
    }
    if (rebuild_needed) {
        rebuild(generation);
    } else if (need_tab) {
        open_tab();
    }
}

void BrowserSession::rebuild(uint64_t generation) {
    browser_->unroute_session(this);
    bool restarted;
    std::string reason, last_url;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        restarted = generation_ != 0;
        reason = lost_reason_;
        last_url = last_url_;
        tabs_.clear();
        activation_.clear();
        popups_announced_.clear();
        context_id_.clear();
        lost_ = false;
    }
    const auto timeout = options_.command_timeout;
    nlohmann::json context_params = {{"disposeOnDetach", true}};
    const std::string bypass = options_.guard.proxy_bypass_list();
    if (proxy_) {
        // Every connection, loopback and link-local ones included ("<-loopback>" drops Chromium's implicit
        // bypass of them), meets the filtering proxy, which refuses denied hosts and addresses.
        context_params["proxyServer"] = proxy_->server();
        context_params["proxyBypassList"] = "<-loopback>";
    } else if (!bypass.empty()) {
        // Connections outside the allow-list that Fetch never sees (WebSocket handshakes, workers) meet a
        // proxy that is not there.
        context_params["proxyServer"] = kUnreachableProxy;
        context_params["proxyBypassList"] = bypass;
    }
    nlohmann::json created = browser_->call("Target.createBrowserContext", context_params, "", timeout);
    std::string context = created.value("browserContextId", std::string());
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        context_id_ = context;
        generation_ = generation;
    }
    browser_->route_context(context, this);
    if (!restore_cookies_.empty())
        browser_->call("Storage.setCookies", {{"cookies", restore_cookies_}, {"browserContextId", context}},
                       "", timeout);
    nlohmann::json downloads = {{"behavior", options_.allow_downloads ? "allow" : "deny"},
                                {"browserContextId", context},
                                {"eventsEnabled", true}};
    if (options_.allow_downloads)
        downloads["downloadPath"] = std::filesystem::absolute(download_dir_).string();
    browser_->call("Browser.setDownloadBehavior", downloads, "", timeout);
    if (restarted) {
        std::lock_guard<std::mutex> lock(state_mutex_);
        ++restarts_;
        record(SessionEventKind::kBrowserRestarted,
               "the browser stopped (" + (reason.empty() ? std::string("unknown reason") : reason) +
                   ") and was restarted: this session's tabs, cookies and page state were lost" +
                   (last_url.empty() ? std::string() : " (it was at " + last_url + ")"),
               last_url);
    }
    open_tab();
}

std::string BrowserSession::open_tab() {
    std::string context;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        context = context_id_;
    }
    nlohmann::json created =
        browser_->call("Target.createTarget", {{"url", "about:blank"}, {"browserContextId", context}}, "",
                       options_.command_timeout);
    std::string target = created.value("targetId", std::string());
    std::unique_lock<std::mutex> lock(state_mutex_);
    bool attached = wait_state(lock, std::chrono::steady_clock::now() + options_.command_timeout,
                               [&] { return find_tab_locked(target) != nullptr; });
    if (!attached)
        throw Error(ErrorKind::kBrowser,
                    "new tab " + target + " was not attached within the command timeout");
    activate_locked(target);
    if (!restore_script_.empty()) {
        // Registered once more now that the tab runs: the copy posted while it was paused at attach does not
        // reach its first navigation (the restore marks itself done, so the second copy changes nothing).
        const std::string sid = find_tab_locked(target)->cdp_session;
        lock.unlock();
        browser_->call("Page.addScriptToEvaluateOnNewDocument", {{"source", restore_script_}}, sid,
                       options_.command_timeout);
    }
    return target;
}

bool BrowserSession::wait_state(std::unique_lock<std::mutex>& lock,
                                std::chrono::steady_clock::time_point deadline,
                                const std::function<bool()>& done) {
    for (;;) {
        if (lost_)
            throw Error(ErrorKind::kBrowser,
                        "the browser stopped (" + lost_reason_ + "); it restarts on the next command");
        if (done()) return true;
        if (state_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
            if (lost_) continue;
            return done();
        }
    }
}

void BrowserSession::record(SessionEventKind kind, std::string message, std::string url, std::string detail) {
    events_.push_back({kind, std::move(message), std::move(url), std::move(detail)});
    // A runaway page (an alert loop) must not grow the log without bound.
    constexpr size_t kMaxEvents = 4096;
    if (events_.size() > kMaxEvents) {
        size_t drop = events_.size() - kMaxEvents;
        events_.erase(events_.begin(), events_.begin() + static_cast<long>(drop));
        events_taken_ = events_taken_ > drop ? events_taken_ - drop : 0;
    }
}

BrowserSession::Tab* BrowserSession::find_tab_locked(const std::string& id) {
    for (auto& t : tabs_) {
        if (t.target_id == id || t.cdp_session == id) return &t;
    }
    return nullptr;
}

BrowserSession::Tab* BrowserSession::active_tab_locked() {
    return activation_.empty() ? nullptr : find_tab_locked(activation_.back());
}

void BrowserSession::activate_locked(const std::string& target_id) {
    std::erase(activation_, target_id);
    activation_.push_back(target_id);
}

BrowserSession::Tab BrowserSession::active_tab_copy() {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (lost_)
        throw Error(ErrorKind::kBrowser,
                    "the browser stopped (" + lost_reason_ + "); it restarts on the next command");
    Tab* tab = active_tab_locked();
    if (!tab) throw Error(ErrorKind::kBrowser, "session has no open tab");
    return *tab;
}

nlohmann::json BrowserSession::call_tab(const std::string& method, const nlohmann::json& params,
                                        std::optional<std::chrono::milliseconds> timeout) {
    Tab tab = active_tab_copy();
    return browser_->call(method, params, tab.cdp_session, timeout.value_or(options_.command_timeout));
}

bool BrowserSession::input_to_tab(const Tab& tab, const std::string& method, const nlohmann::json& params) {
    try {
        browser_->call(method, params, tab.cdp_session, options_.command_timeout);
        return true;
    } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(state_mutex_);
        if (e.kind() != ErrorKind::kBrowser || lost_ || find_tab_locked(tab.target_id) != nullptr) throw;
        return false;
    }
}

// --- events (I/O thread; Browser holds its routing lock) ---

void BrowserSession::on_target_attached(const nlohmann::json& params) {
    const nlohmann::json& info = params["targetInfo"];
    const std::string sid = params.value("sessionId", std::string());
    const std::string target = info.value("targetId", std::string());
    const std::string opener = info.value("openerId", std::string());
    const ViewportGeometry& v = options_.viewport;
    // Commands on one CDP session run in order, so the tab is fully set up before it is released.
    browser_->post("Page.enable", {}, sid);
    browser_->post("Page.setLifecycleEventsEnabled", {{"enabled", true}}, sid);
    browser_->post("Emulation.setDeviceMetricsOverride",
                   {{"width", v.css_width},
                    {"height", v.css_height},
                    {"deviceScaleFactor", v.device_scale_factor},
                    {"mobile", false},
                    {"screenWidth", v.css_width},
                    {"screenHeight", v.css_height}},
                   sid);
    // No Emulation.setFocusEmulationEnabled: on Chromium 156 it made the initial about:blank renderer
    // crash on the first cross-site navigation (3 runs in 4). Each context has its own window, and
    // focus inside it works without it (the parallel-session test types into 8 tabs at once).
    browser_->post("Page.setInterceptFileChooserDialog", {{"enabled", true}}, sid);
    if (options_.guard.intercepts()) {
        browser_->post(
            "Fetch.enable",
            // Every request, not only navigations: an allowed page's iframes, images, scripts, fetch/XHR and
            // beacons meet the same rules (WebSocket handshakes are not Fetch requests; docs/SECURITY.md).
            {{"patterns", nlohmann::json::array({{{"urlPattern", "*"}, {"requestStage", "Request"}}})}}, sid);
    }
    if (!restore_script_.empty())
        browser_->post("Page.addScriptToEvaluateOnNewDocument", {{"source", restore_script_}}, sid);
    browser_->post("Runtime.runIfWaitingForDebugger", {}, sid);

    std::lock_guard<std::mutex> lock(state_mutex_);
    Tab tab;
    tab.target_id = target;
    tab.cdp_session = sid;
    tab.opener_id = opener;
    tab.url = info.value("url", std::string());
    if (!opener.empty()) {
        // Its first navigation (if any) shows only after runIfWaitingForDebugger above: until a sign of
        // it, settling would take the popup for a finished blank page.
        tab.first_navigation_deadline = std::chrono::steady_clock::now() + options_.action_grace;
        if (!popups_announced_.empty()) popups_announced_.pop_front();  // the window the page opened
    }
    tabs_.push_back(tab);
    if (!opener.empty()) {
        if (options_.follow_popups)
            activate_locked(target);
        else
            activation_.insert(activation_.begin(), target);
        record(SessionEventKind::kPopupOpened,
               std::string("the page opened a new tab") +
                   (options_.follow_popups ? " (now the active tab)" : "") +
                   (tab.url.empty() || tab.url == "about:blank" ? std::string() : ": " + tab.url),
               tab.url);
    }
    state_cv_.notify_all();
}

void BrowserSession::on_target_detached(const std::string& cdp_session_id) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    Tab* tab = find_tab_locked(cdp_session_id);
    if (!tab) return;
    std::string target = tab->target_id, url = tab->url;
    bool was_active = !activation_.empty() && activation_.back() == target;
    std::erase_if(tabs_, [&](const Tab& t) { return t.target_id == target; });
    std::erase(activation_, target);
    Tab* now = active_tab_locked();
    record(SessionEventKind::kTabClosed,
           std::string("a tab was closed") + (url.empty() ? "" : " (" + url + ")") +
               (was_active ? (now ? "; the previous tab is active again" +
                                        (now->url.empty() ? "" : " (" + now->url + ")")
                                  : std::string("; no tab is left, a blank one opens on the next action"))
                           : std::string()),
           url, now ? now->target_id : "");
    state_cv_.notify_all();
}

void BrowserSession::on_page_event(const std::string& sid, const std::string& method,
                                   const nlohmann::json& params) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    Tab* tab = find_tab_locked(sid);
    if (!tab) return;
    const bool main_frame = params.value("frameId", std::string()) == tab->target_id;
    if (method == "Page.lifecycleEvent") {
        if (!main_frame) return;
        on_lifecycle_locked(*tab, params);
    } else if (method == "Page.frameStartedLoading" || method == "Page.frameStoppedLoading") {
        if (!main_frame) return;
        tab->loading = method == "Page.frameStartedLoading";
        tab->load_start_reported = true;
        tab->first_navigation_deadline.reset();
    } else if (method == "Page.frameStartedNavigating") {
        const std::string type = params.value("navigationType", std::string());
        if (!main_frame || type == "sameDocument" || type == "historySameDocument") return;
        // Stands in for the frameStartedLoading a tab misses when its load began before it attached
        // (see Tab::load_start_reported); the frameStoppedLoading that ends such a load does arrive.
        if (!tab->load_start_reported) tab->loading = true;
        tab->first_navigation_deadline.reset();
    } else if (method == "Page.windowOpen") {
        // The opener reports this before the popup attaches: settling waits (bounded) for the attach.
        if (options_.follow_popups)
            popups_announced_.push_back(std::chrono::steady_clock::now() + options_.action_grace);
    } else if (method == "Page.frameNavigated") {
        const nlohmann::json& frame = params["frame"];
        if (frame.contains("parentId") || frame.value("id", std::string()) != tab->target_id) return;
        tab->url = frame.value("url", std::string());
        if (tab->url != "about:blank") {
            tab->committed = true;
            tab->first_navigation_deadline.reset();
        }
        if (!activation_.empty() && activation_.back() == tab->target_id) last_url_ = tab->url;
    } else if (method == "Page.navigatedWithinDocument") {
        if (main_frame) tab->url = params.value("url", std::string());
    } else if (method == "Page.javascriptDialogOpening") {
        answer_dialog_locked(sid, params);
    } else if (method == "Page.fileChooserOpened") {
        fill_file_chooser_locked(sid, *tab, params);
    } else if (method == "Fetch.requestPaused") {
        if (!check_paused_request_locked(sid, *tab, main_frame, params)) return;
    } else if (method == "Inspector.targetCrashed") {
        // The tab itself survives: the next navigation or reload starts a new renderer.
        record(SessionEventKind::kTabCrashed,
               "the tab's renderer crashed (" + tab->url + "); reload or navigate to continue", tab->url);
    } else {
        return;
    }
    state_cv_.notify_all();
}

// A main-frame lifecycle event: the names seen per loader (the last 8 loaders), and the count of loads.
void BrowserSession::on_lifecycle_locked(Tab& tab, const nlohmann::json& params) {
    const std::string loader = params.value("loaderId", std::string());
    const std::string name = params.value("name", std::string());
    if (name == "init" &&
        std::find(tab.loader_order.begin(), tab.loader_order.end(), loader) == tab.loader_order.end()) {
        tab.loader_order.push_back(loader);
        if (tab.loader_order.size() > 8) {
            tab.lifecycle.erase(tab.loader_order.front());
            tab.loader_order.pop_front();
        }
    }
    tab.lifecycle[loader].insert(name);
    if (name == "load") ++tab.load_events;
}

// A JavaScript dialog, answered by the dialog policy and recorded.
void BrowserSession::answer_dialog_locked(const std::string& sid, const nlohmann::json& params) {
    const bool accept = options_.dialog_policy == DialogPolicy::kAccept;
    const std::string type = params.value("type", std::string("alert"));
    nlohmann::json answer = {{"accept", accept}};
    if (accept && type == "prompt") answer["promptText"] = options_.prompt_text;
    browser_->post("Page.handleJavaScriptDialog", answer, sid);
    record(SessionEventKind::kDialog,
           "a JavaScript " + type + " dialog was " + (accept ? "accepted" : "dismissed") + ": \"" +
               params.value("message", std::string()) + "\"",
           params.value("url", std::string()), type);
}

// A file chooser, given the upload files (or left empty) and recorded.
void BrowserSession::fill_file_chooser_locked(const std::string& sid, Tab& tab,
                                              const nlohmann::json& params) {
    if (!upload_files_.empty() && params.contains("backendNodeId")) {
        browser_->post("DOM.setFileInputFiles",
                       {{"files", upload_files_}, {"backendNodeId", params["backendNodeId"]}}, sid);
    }
    record(SessionEventKind::kFileChooser,
           upload_files_.empty()
               ? std::string("a file chooser was intercepted and left empty (no upload files set)")
               : "a file chooser received " + std::to_string(upload_files_.size()) + " file(s)",
           tab.url, params.value("mode", std::string()));
}

// A request the guard checks (DevTools Fetch): continued, failed quietly (a subresource or a subframe's page)
// or, for the tab's own navigation, aborted and recorded. True when the tab's state changed (a recorded
// refusal).
bool BrowserSession::check_paused_request_locked(const std::string& sid, Tab& tab, bool main_frame,
                                                 const nlohmann::json& params) {
    const std::string request_id = params.value("requestId", std::string());
    const std::string url = params["request"].value("url", std::string());
    GuardDecision decision;
    try {
        decision = options_.guard.check(url);
    } catch (const Error& e) {
        decision = {false, "malformed-url", std::string("request refused: ") + e.what()};
    }
    if (decision.allowed) {
        browser_->post("Fetch.continueRequest", {{"requestId", request_id}}, sid);
        return false;
    }
    if (!main_frame || params.value("resourceType", std::string()) != "Document") {
        // A subresource or a subframe's page: refused without a trace in the agent's observation (a page
        // may embed dozens of refused trackers; the page around them stays usable).
        browser_->post("Fetch.failRequest", {{"requestId", request_id}, {"errorReason", "BlockedByClient"}},
                       sid);
        return false;
    }
    // The navigation is aborted (like pressing Stop), so the tab stays on the page it was on (or blank);
    // BlockedByClient would commit Chrome's error page at the refused URL instead. A popup whose very
    // first page is refused has nothing to show: it is failed and closed.
    const bool fresh_popup = !tab.committed && !tab.opener_id.empty();
    browser_->post("Fetch.failRequest",
                   {{"requestId", request_id}, {"errorReason", fresh_popup ? "BlockedByClient" : "Aborted"}},
                   sid);
    record(SessionEventKind::kNavigationDenied, decision.reason, url, decision.rule);
    if (fresh_popup) browser_->post("Target.closeTarget", {{"targetId", tab.target_id}}, "");
    return true;
}

void BrowserSession::on_browser_event(const std::string& method, const nlohmann::json& params) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (method == "Browser.downloadWillBegin") {
        const std::string url = params.value("url", std::string());
        const std::string name = params.value("suggestedFilename", std::string());
        if (options_.allow_downloads) {
            record(SessionEventKind::kDownload,
                   "download of '" + name + "' started into " + download_dir_.string(), url, "started");
        } else {
            record(SessionEventKind::kDownload,
                   "download of '" + name + "' was refused (downloads are disabled)", url, "denied");
        }
    } else if (method == "Browser.downloadProgress") {
        const std::string state = params.value("state", std::string());
        if (state == "completed" && options_.allow_downloads) {
            std::string path = params.value("filePath", std::string());
            record(SessionEventKind::kDownload,
                   "download finished" + (path.empty() ? std::string() : ": " + path), "", "completed");
        } else if (state == "canceled" && options_.allow_downloads) {
            record(SessionEventKind::kDownload, "download was canceled", "", "canceled");
        }
    }
    state_cv_.notify_all();
}

void BrowserSession::on_browser_lost(const std::string& reason) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    lost_ = true;
    lost_reason_ = reason;
    state_cv_.notify_all();
}

// --- tabs and events (public) ---

std::vector<TabInfo> BrowserSession::tabs() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    std::vector<std::string> ids;
    std::string active;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        for (const auto& t : tabs_) ids.push_back(t.target_id);
        active = activation_.empty() ? "" : activation_.back();
    }
    std::vector<TabInfo> out;
    for (const auto& id : ids) {
        TabInfo info;
        info.target_id = id;
        info.active = id == active;
        try {
            nlohmann::json r =
                browser_->call("Target.getTargetInfo", {{"targetId", id}}, "", options_.command_timeout);
            info.url = r["targetInfo"].value("url", std::string());
            info.title = r["targetInfo"].value("title", std::string());
        } catch (const Error& e) {
            if (e.kind() != ErrorKind::kBrowser || !browser_->running()) throw;
            continue;  // closed while we asked
        }
        out.push_back(info);
    }
    return out;
}

size_t BrowserSession::tab_count() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    std::lock_guard<std::mutex> lock(state_mutex_);
    return tabs_.size();
}

void BrowserSession::activate_tab(size_t index) {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    std::string target;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        if (index >= tabs_.size()) {
            throw Error(ErrorKind::kInvalidArgument, "tab index " + std::to_string(index) +
                                                         " out of range (" + std::to_string(tabs_.size()) +
                                                         " tabs open)");
        }
        target = tabs_[index].target_id;
        activate_locked(target);
    }
    browser_->post("Target.activateTarget", {{"targetId", target}}, "");
}

void BrowserSession::close_active_tab() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    Tab tab = active_tab_copy();
    browser_->call("Target.closeTarget", {{"targetId", tab.target_id}}, "", options_.command_timeout);
    {
        std::unique_lock<std::mutex> lock(state_mutex_);
        bool gone = wait_state(lock, std::chrono::steady_clock::now() + options_.command_timeout,
                               [&] { return find_tab_locked(tab.target_id) == nullptr; });
        if (!gone)
            throw Error(ErrorKind::kBrowser,
                        "tab " + tab.target_id + " did not close within the command timeout");
    }
    ensure_ready();  // opens a blank tab if that was the last one
}

std::vector<SessionEvent> BrowserSession::take_events() {
    std::lock_guard<std::mutex> lock(state_mutex_);
    std::vector<SessionEvent> out(events_.begin() + static_cast<long>(events_taken_), events_.end());
    events_taken_ = events_.size();
    return out;
}

std::vector<SessionEvent> BrowserSession::event_log() const {
    std::lock_guard<std::mutex> lock(state_mutex_);
    return events_;
}

void BrowserSession::set_upload_files(std::vector<std::string> paths) {
    std::lock_guard<std::mutex> lock(state_mutex_);
    upload_files_ = std::move(paths);
}

int BrowserSession::restarts() const {
    std::lock_guard<std::mutex> lock(state_mutex_);
    return restarts_;
}

}  // namespace surf::tools
