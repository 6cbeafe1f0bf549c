// One Chromium process serving many sessions (DESIGN.md §1 tools/). The Browser owns the process (through
// CdpPipe), its temporary profile, and the routing of DevTools events to the BrowserSession that owns
// each browser context and tab. When the process dies or hangs, every session waiting on it gets
// Error(kBrowser); the next command of any session relaunches it (a new generation) and that session
// rebuilds its context on the new process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/browser/cdp_pipe.h"

namespace surf::tools {

class BrowserSession;
struct SessionOptions;

struct BrowserOptions {
    // Chromium binary; "" picks the first of /usr/lib/chromium/chromium, /usr/bin/chromium,
    // /usr/bin/chromium-browser, /usr/bin/google-chrome that exists.
    std::string executable;
    // --no-sandbox is added when running as root (Chromium refuses to start otherwise) or when this is
    // false. Keep it true for non-root deployments.
    bool sandbox = true;
    std::vector<std::string> extra_args;  // appended after surf's own flags (e.g. --host-resolver-rules=...)
    // Deny rules (NavigationGuard's syntax) the browser's resolver enforces for every context:
    // NavigationGuard::resolver_deny_rules, placed before the rules of an --host-resolver-rules in extra_args
    // (the first matching rule wins).
    std::vector<std::string> deny_hosts;
    std::filesystem::path temp_root;  // "" = the system temp directory
    std::chrono::milliseconds launch_timeout{20000};
    std::chrono::milliseconds command_timeout{10000};  // default for browser-level commands
    // A command that times out triggers a liveness probe (Browser.getVersion) with this deadline; a
    // browser that misses it too is declared hung, killed and relaunched on the next command.
    std::chrono::milliseconds hang_probe_timeout{3000};
};

class Browser : public std::enable_shared_from_this<Browser> {
public:
    // Starts Chromium now. Throws Error(kBrowser) naming the binary and its log if it does not answer.
    static std::shared_ptr<Browser> launch(BrowserOptions options = {});
    ~Browser();
    Browser(const Browser&) = delete;
    Browser& operator=(const Browser&) = delete;

    // A new isolated session (own browser context: cookies, storage, cache) with one blank tab.
    std::unique_ptr<BrowserSession> new_session(const SessionOptions& options);
    std::unique_ptr<BrowserSession> new_session();

    // Closes the browser (Browser.close, then SIGTERM/SIGKILL to its process group) and deletes the
    // temporary profile. Sessions still alive get Error(kBrowser) on their next command. Idempotent.
    void shutdown();

    pid_t pid() const;  // the current Chromium process (0 when none runs)
    bool running() const;
    int launches() const;         // how many processes have been started (1 + restarts)
    std::string version() const;  // "Chrome/156.0...", from the first launch
    const std::vector<std::string>& launch_args() const { return args_; }
    // The deny rules its resolver enforces (BrowserOptions::deny_hosts at launch).
    const std::vector<std::string>& deny_hosts() const { return options_.deny_hosts; }
    const std::filesystem::path& work_dir() const { return work_dir_; }

    // --- used by BrowserSession ---
    // Relaunches the process if it is gone; returns the generation now running. Throws Error(kBrowser).
    uint64_t ensure_running();
    uint64_t generation() const;
    // A command for the current process. A timeout is checked against a liveness probe: if the browser
    // itself is hung it is killed and Error(kBrowser) is thrown; otherwise Error(kTimeout) (a busy page).
    nlohmann::json call(const std::string& method, const nlohmann::json& params,
                        const std::string& session_id, std::chrono::milliseconds timeout);
    void post(const std::string& method, const nlohmann::json& params, const std::string& session_id);
    // Event routing: a browser context, and each attached tab's CDP session, belong to one BrowserSession.
    void route_context(const std::string& context_id, BrowserSession* owner);
    void unroute_session(BrowserSession* owner);
    void route_target(const std::string& cdp_session_id, const std::string& target_id, BrowserSession* owner);

private:
    explicit Browser(BrowserOptions options);
    void start_process();  // launch_mutex_ held
    void on_event(const nlohmann::json& message);
    void on_exit(const std::string& reason);
    std::shared_ptr<CdpPipe> current_pipe() const;

    BrowserOptions options_;
    std::string executable_;
    std::vector<std::string> args_;  // without --user-data-dir, which changes per launch
    std::filesystem::path work_dir_;
    std::filesystem::path profile_dir_;
    std::string version_;

    mutable std::mutex launch_mutex_;  // serialises launch / relaunch / shutdown
    mutable std::mutex pipe_mutex_;    // guards pipe_ and generation_
    std::shared_ptr<CdpPipe> pipe_;
    uint64_t generation_ = 0;
    int launches_ = 0;
    bool shut_down_ = false;

    // Routing tables, used on the I/O thread; owners unregister before they die.
    std::mutex routes_mutex_;
    std::map<std::string, BrowserSession*> by_context_;
    std::map<std::string, BrowserSession*> by_cdp_session_;
    std::map<std::string, BrowserSession*> by_target_;
    std::vector<BrowserSession*> sessions_;
    int next_session_index_ = 0;
    friend class BrowserSession;
};

// Chromium's command-line flags for a closed-network headless server (each one explained in browser.cpp).
std::vector<std::string> default_chromium_flags(bool no_sandbox);

}  // namespace surf::tools
