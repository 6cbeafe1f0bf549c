#include "tools/browser/browser.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "tools/browser/browser_session.h"
#include "tools/browser/navigation_guard.h"

namespace surf::tools {
namespace {

std::string find_executable(const std::string& configured) {
    if (!configured.empty()) {
        if (::access(configured.c_str(), X_OK) != 0) {
            throw Error(ErrorKind::kBrowser,
                        "browser executable '" + configured + "' is missing or not executable");
        }
        return configured;
    }
    // The real binary first: Debian's /usr/bin/chromium is a shell wrapper that adds flags of its own.
    for (const char* path : {"/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser",
                             "/usr/bin/google-chrome"}) {
        if (::access(path, X_OK) == 0) return path;
    }
    throw Error(ErrorKind::kBrowser,
                "no Chromium found (looked for /usr/lib/chromium/chromium, /usr/bin/chromium, "
                "/usr/bin/chromium-browser, /usr/bin/google-chrome); install the 'chromium' package");
}

std::string log_tail(const std::filesystem::path& path, size_t max_bytes = 1500) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
    return text;
}

}  // namespace

// Puts `rules` first in the --host-resolver-rules flag of `args`: Chromium reads the last copy of the flag,
// so its rules follow ours in the one flag left.
void merge_resolver_rules(std::vector<std::string>& args, const std::string& rules) {
    if (rules.empty()) return;
    static const std::string kFlag = "--host-resolver-rules=";
    std::string theirs;
    for (const std::string& a : args)
        if (a.rfind(kFlag, 0) == 0) theirs = a.substr(kFlag.size());
    args.erase(
        std::remove_if(args.begin(), args.end(), [](const std::string& a) { return a.rfind(kFlag, 0) == 0; }),
        args.end());
    args.push_back(kFlag + rules + (theirs.empty() ? "" : ", " + theirs));
}

std::vector<std::string> default_chromium_flags(bool no_sandbox) {
    std::vector<std::string> flags = {
        // No display on a server; "new" is the full browser without a window (same engine as headed).
        "--headless=new",
        // CDP on fds 3/4 instead of a TCP port: only our process can drive the browser.
        "--remote-debugging-pipe",
        // No startup tab in the default context: every tab belongs to a session's own context.
        "--no-startup-window",
        // No GPU on the server; rendering goes through the software compositor.
        "--disable-gpu",
        // First-run dialogs, default-browser prompts and sign-in promos would wait for a user.
        "--no-first-run",
        "--no-default-browser-check",
        // Closed network: no calls home (component updates, sync, safe-browsing lists, variations,
        // crash and metrics uploads). They would only fail slowly or add noise.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--disable-breakpad",
        "--metrics-recording-only",
        "--disable-default-apps",
        "--disable-extensions",
        // Containers often have a tiny /dev/shm; use /tmp for shared memory so renderers do not crash.
        "--disable-dev-shm-usage",
        // Screenshots show page content only, with no scrollbars taking viewport pixels.
        "--hide-scrollbars",
        "--mute-audio",
        // Several sessions' tabs render at once and none is "in front": keep timers, rendering and
        // input of background tabs at full speed, and do not kill renderers that look hung for a while.
        "--disable-background-timer-throttling",
        "--disable-backgrounding-occluded-windows",
        "--disable-renderer-backgrounding",
        "--disable-hang-monitor",
        "--disable-ipc-flooding-protection",
        // Popups opened by the page are tabs the agent must see, not something to block silently.
        "--disable-popup-blocking",
        // Deterministic actions: wheel scrolls land at once (no animation); back/forward really reload
        // (the back-forward cache would skip the load events we wait for); sRGB colours in screenshots.
        "--disable-smooth-scrolling",
        "--disable-features=BackForwardCache,Translate,MediaRouter,OptimizationHints,AcceptCHFrame,"
        "DialMediaRouteProvider,CalculateNativeWinOcclusion,InterestFeedContentSuggestions",
        "--force-color-profile=srgb",
        // No keyring daemon on a server: store passwords in the (temporary) profile, never prompt.
        "--password-store=basic",
        // Permission prompts (notifications, geolocation, ...) are refused instead of hanging the page.
        "--deny-permission-prompts",
    };
    // Chromium's sandbox needs user namespaces and refuses to run as root without this flag.
    if (no_sandbox) flags.push_back("--no-sandbox");
    return flags;
}

Browser::Browser(BrowserOptions options) : options_(std::move(options)) {}

std::shared_ptr<Browser> Browser::launch(BrowserOptions options) {
    std::shared_ptr<Browser> browser(new Browser(std::move(options)));
    Browser& b = *browser;
    b.executable_ = find_executable(b.options_.executable);
    b.args_ = default_chromium_flags(::geteuid() == 0 || !b.options_.sandbox);
    b.args_.insert(b.args_.end(), b.options_.extra_args.begin(), b.options_.extra_args.end());
    merge_resolver_rules(b.args_, NavigationGuard({}, b.options_.deny_hosts).resolver_deny_rules());
    std::filesystem::path root =
        b.options_.temp_root.empty() ? std::filesystem::temp_directory_path() : b.options_.temp_root;
    std::string pattern = (root / "surf-browser-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
        throw Error(ErrorKind::kIo,
                    "cannot create a temporary browser directory under '" + root.string() + "'");
    }
    b.work_dir_ = pattern;
    std::lock_guard<std::mutex> lock(b.launch_mutex_);
    try {
        b.start_process();
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove_all(b.work_dir_, ignored);
        b.shut_down_ = true;
        throw;
    }
    return browser;
}

Browser::~Browser() {
    shutdown();
}

void Browser::start_process() {
    ++launches_;
    profile_dir_ = work_dir_ / ("profile-" + std::to_string(launches_));
    std::filesystem::create_directories(profile_dir_);
    LaunchSpec spec;
    spec.executable = executable_;
    spec.args = args_;
    spec.args.push_back("--user-data-dir=" + profile_dir_.string());
    spec.log_path = (work_dir_ / ("chromium-" + std::to_string(launches_) + ".log")).string();
    const uint64_t generation = generation_ + 1;
    auto pipe = std::make_shared<CdpPipe>(
        spec, [this](const nlohmann::json& message) { on_event(message); },
        [this, generation](const std::string& reason) {
            if (generation == this->generation()) on_exit(reason);
        });
    try {
        nlohmann::json version = pipe->call("Browser.getVersion", {}, "", options_.launch_timeout);
        if (version_.empty()) version_ = version.value("product", std::string());
        {
            std::lock_guard<std::mutex> lock(pipe_mutex_);
            pipe_ = pipe;
            generation_ = generation;
        }
        // Attach to every new tab of every context, paused until its session has set it up (viewport,
        // dialogs, request interception) so even a popup's first request passes the guard.
        pipe->call("Target.setAutoAttach",
                   {{"autoAttach", true}, {"waitForDebuggerOnStart", true}, {"flatten", true}}, "",
                   options_.command_timeout);
    } catch (const Error& e) {
        pipe->terminate(std::chrono::milliseconds(1000));
        throw Error(ErrorKind::kBrowser, "browser '" + executable_ + "' did not start: " + e.what() +
                                             "; its log (" + spec.log_path +
                                             ") ends with: " + log_tail(spec.log_path));
    }
}

std::unique_ptr<BrowserSession> Browser::new_session(const SessionOptions& options) {
    int index;
    {
        std::lock_guard<std::mutex> lock(routes_mutex_);
        index = ++next_session_index_;
    }
    return std::make_unique<BrowserSession>(shared_from_this(), options, index);
}

std::unique_ptr<BrowserSession> Browser::new_session() {
    return new_session(SessionOptions{});
}

void Browser::shutdown() {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    std::shared_ptr<CdpPipe> pipe;
    {
        std::lock_guard<std::mutex> pipe_lock(pipe_mutex_);
        pipe = pipe_;
    }
    if (pipe) pipe->terminate(std::chrono::milliseconds(3000));
    std::error_code ignored;
    std::filesystem::remove_all(work_dir_, ignored);
}

pid_t Browser::pid() const {
    auto pipe = current_pipe();
    return pipe && pipe->alive() ? pipe->pid() : 0;
}

bool Browser::running() const {
    auto pipe = current_pipe();
    return pipe && pipe->alive();
}

int Browser::launches() const {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    return launches_;
}

std::string Browser::version() const {
    return version_;
}

uint64_t Browser::generation() const {
    std::lock_guard<std::mutex> lock(pipe_mutex_);
    return generation_;
}

std::shared_ptr<CdpPipe> Browser::current_pipe() const {
    std::lock_guard<std::mutex> lock(pipe_mutex_);
    return pipe_;
}

uint64_t Browser::ensure_running() {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    if (shut_down_) throw Error(ErrorKind::kBrowser, "the browser has been shut down");
    std::shared_ptr<CdpPipe> old = current_pipe();
    if (old && old->alive()) return generation();
    if (old) {
        old->terminate(std::chrono::milliseconds(500));
        std::error_code ignored;
        std::filesystem::remove_all(profile_dir_, ignored);
    }
    start_process();
    return generation();
}

nlohmann::json Browser::call(const std::string& method, const nlohmann::json& params,
                             const std::string& session_id, std::chrono::milliseconds timeout) {
    std::shared_ptr<CdpPipe> pipe = current_pipe();
    if (!pipe) throw Error(ErrorKind::kBrowser, method + " not sent: the browser is not running");
    try {
        return pipe->call(method, params, session_id, timeout);
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTimeout || !pipe->alive()) throw;
        try {
            pipe->call("Browser.getVersion", {}, "", options_.hang_probe_timeout);
        } catch (const Error& probe) {
            if (probe.kind() != ErrorKind::kTimeout)
                throw Error(ErrorKind::kBrowser, std::string(e.what()) + "; " + probe.what());
            // The browser process itself no longer answers: kill it so the next command relaunches.
            pipe->kill_now("browser hung: no answer to a liveness probe within " +
                           std::to_string(options_.hang_probe_timeout.count()) + " ms; killed");
            throw Error(ErrorKind::kBrowser,
                        std::string(e.what()) + "; the browser did not answer a liveness probe within " +
                            std::to_string(options_.hang_probe_timeout.count()) +
                            " ms either, so it was killed and restarts on the next command");
        }
        throw Error(ErrorKind::kTimeout,
                    std::string(e.what()) + " (the browser itself is responsive: the page is busy)");
    }
}

void Browser::post(const std::string& method, const nlohmann::json& params, const std::string& session_id) {
    if (auto pipe = current_pipe()) pipe->post(method, params, session_id);
}

void Browser::route_context(const std::string& context_id, BrowserSession* owner) {
    std::lock_guard<std::mutex> lock(routes_mutex_);
    by_context_[context_id] = owner;
    if (std::find(sessions_.begin(), sessions_.end(), owner) == sessions_.end()) sessions_.push_back(owner);
}

void Browser::route_target(const std::string& cdp_session_id, const std::string& target_id,
                           BrowserSession* owner) {
    std::lock_guard<std::mutex> lock(routes_mutex_);
    by_cdp_session_[cdp_session_id] = owner;
    by_target_[target_id] = owner;
}

void Browser::unroute_session(BrowserSession* owner) {
    std::lock_guard<std::mutex> lock(routes_mutex_);
    for (auto* table : {&by_context_, &by_cdp_session_, &by_target_}) {
        std::erase_if(*table, [owner](const auto& kv) { return kv.second == owner; });
    }
    std::erase(sessions_, owner);
}

void Browser::on_event(const nlohmann::json& message) {
    const std::string method = message.value("method", std::string());
    const nlohmann::json& params = message.contains("params") ? message["params"] : nlohmann::json::object();
    const std::string sid = message.value("sessionId", std::string());
    // Held while an owner handles the event, so an owner cannot be destroyed under us (it unroutes first).
    std::lock_guard<std::mutex> lock(routes_mutex_);
    if (!sid.empty()) {
        auto it = by_cdp_session_.find(sid);
        if (it != by_cdp_session_.end()) it->second->on_page_event(sid, method, params);
        return;
    }
    if (method == "Target.attachedToTarget") {
        const nlohmann::json& info = params["targetInfo"];
        const std::string child = params.value("sessionId", std::string());
        auto owner = by_context_.find(info.value("browserContextId", std::string()));
        if (owner != by_context_.end() && info.value("type", std::string()) == "page") {
            by_cdp_session_[child] = owner->second;
            by_target_[info.value("targetId", std::string())] = owner->second;
            owner->second->on_target_attached(params);
        } else if (params.value("waitingForDebugger", false)) {
            // Not ours (or not a page): let it run untouched.
            post("Runtime.runIfWaitingForDebugger", {}, child);
        }
    } else if (method == "Target.detachedFromTarget") {
        const std::string child = params.value("sessionId", std::string());
        auto it = by_cdp_session_.find(child);
        if (it != by_cdp_session_.end()) {
            BrowserSession* owner = it->second;
            by_cdp_session_.erase(it);
            by_target_.erase(params.value("targetId", std::string()));
            owner->on_target_detached(child);
            if (auto pipe = current_pipe()) pipe->abandon_session(child, "the tab closed before answering");
        }
    } else if (method == "Browser.downloadWillBegin" || method == "Browser.downloadProgress") {
        // downloadWillBegin names the frame (a tab's main frame id is its target id); progress only the guid.
        BrowserSession* owner = nullptr;
        auto it = by_target_.find(params.value("frameId", std::string()));
        if (it != by_target_.end()) {
            owner = it->second;
            by_target_["download:" + params.value("guid", std::string())] = owner;
        } else if (auto g = by_target_.find("download:" + params.value("guid", std::string()));
                   g != by_target_.end()) {
            owner = g->second;
        }
        if (owner) owner->on_browser_event(method, params);
    }
}

void Browser::on_exit(const std::string& reason) {
    std::lock_guard<std::mutex> lock(routes_mutex_);
    // Every context and tab id died with the process.
    by_context_.clear();
    by_cdp_session_.clear();
    by_target_.clear();
    for (BrowserSession* s : sessions_) s->on_browser_lost(reason);
}

}  // namespace surf::tools
