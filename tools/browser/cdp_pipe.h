// One Chromium process and its DevTools connection over --remote-debugging-pipe (spec/agent.md §6.1):
// requests go to the child's fd 3, responses and events come back on its fd 4, each message a JSON text
// ended by a NUL byte. No port and no WebSocket, so nothing else on the machine can drive this browser.
//
// The process runs in its own process group with PR_SET_PDEATHSIG, and an I/O thread both forks it and
// reads its pipe (the death signal follows the thread that forked, so that thread lives exactly as long
// as the child). Every call has a deadline; when the process exits or closes its pipe, every pending call
// fails with ErrorKind::kBrowser at once.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace surf::tools {

struct LaunchSpec {
    std::string executable;         // absolute path of the Chromium binary
    std::vector<std::string> args;  // argv[1..]; must include --remote-debugging-pipe
    std::string log_path;           // the child's stdout and stderr go here ("" = /dev/null)
};

class CdpPipe {
public:
    // Called on the I/O thread for every event ({"method", "params", "sessionId"?}). Must not wait for a
    // response (the I/O thread is the one that would read it): use post() for follow-up commands.
    using EventHandler = std::function<void(const nlohmann::json& message)>;
    // Called once on the I/O thread when the connection is lost (process exit or pipe EOF).
    using ExitHandler = std::function<void(const std::string& reason)>;

    // Forks and execs the browser. Throws Error(kBrowser) if it cannot be started.
    CdpPipe(const LaunchSpec& spec, EventHandler on_event, ExitHandler on_exit);
    ~CdpPipe();
    CdpPipe(const CdpPipe&) = delete;
    CdpPipe& operator=(const CdpPipe&) = delete;

    // Sends one command and waits for its result. Throws Error(kBrowser) on a protocol error or a lost
    // connection, Error(kTimeout) when no answer came within `timeout`.
    nlohmann::json call(const std::string& method, const nlohmann::json& params,
                        const std::string& session_id, std::chrono::milliseconds timeout);
    // Sends one command and ignores its answer. Never throws; safe on the I/O thread.
    void post(const std::string& method, const nlohmann::json& params, const std::string& session_id);

    // Fails every call waiting on `session_id` with Error(kBrowser, reason): a closed tab never answers.
    void abandon_session(const std::string& session_id, const std::string& reason);

    bool alive() const { return !lost_.load(); }
    pid_t pid() const { return pid_; }
    std::string lost_reason() const;

    // Browser.close, then SIGTERM and SIGKILL to the whole process group after `grace`; reaps the child
    // and joins the I/O thread. Idempotent.
    void terminate(std::chrono::milliseconds grace);
    // SIGKILL to the process group (used when the browser is hung) and marks the connection lost with
    // `reason`. Does not wait for the process.
    void kill_now(const std::string& reason);

private:
    struct Pending {
        std::promise<nlohmann::json> promise;
        std::string method;
        std::string session_id;
    };

    void io_main(std::promise<pid_t> started);
    void spawn(std::promise<pid_t>& started);
    std::string read_loop();  // returns why it stopped
    void dispatch(const std::string& text);
    void mark_lost(const std::string& reason);
    bool write_message(const std::string& text, std::chrono::steady_clock::time_point deadline);
    long long next_id() { return ++last_id_; }

    LaunchSpec spec_;
    EventHandler on_event_;
    ExitHandler on_exit_;

    pid_t pid_ = -1;
    int to_child_ = -1;                     // our end of the child's fd 3
    int from_child_ = -1;                   // our end of the child's fd 4
    int wake_read_ = -1, wake_write_ = -1;  // wakes the I/O thread for shutdown
    std::thread io_thread_;

    std::atomic<bool> lost_{false};
    std::atomic<bool> reaped_{false};
    std::atomic<long long> last_id_{0};
    mutable std::mutex mutex_;  // guards pending_, lost_reason_, wait_status_
    std::condition_variable reaped_cv_;
    std::map<long long, std::shared_ptr<Pending>> pending_;
    std::string lost_reason_;
    std::mutex write_mutex_;
    std::mutex terminate_mutex_;
    bool terminated_ = false;
};

// "Page.navigate failed: ..." style description of a CDP error object.
std::string describe_cdp_error(const std::string& method, const nlohmann::json& error);

}  // namespace surf::tools
