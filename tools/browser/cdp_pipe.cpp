#include "tools/browser/cdp_pipe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/error.h"

namespace surf::tools {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(const char* what) {
    return std::string(what) + ": " + std::strerror(errno);
}

void close_fd(int& fd) {
    if (fd >= 0) {
        ::close(fd);
        fd = -1;
    }
}

std::string describe_wait_status(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status));
    return "stopped";
}

// Writes to a pipe whose reader died raise SIGPIPE, which would kill the whole process. Block it for
// the calling thread during the write and swallow a pending one afterwards, instead of changing the
// process-wide disposition.
class SigpipeGuard {
public:
    SigpipeGuard() {
        sigset_t block;
        sigemptyset(&block);
        sigaddset(&block, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &block, &old_);
    }
    ~SigpipeGuard() {
        if (got_epipe_) {
            sigset_t pipe_only;
            sigemptyset(&pipe_only);
            sigaddset(&pipe_only, SIGPIPE);
            timespec zero{0, 0};
            while (sigtimedwait(&pipe_only, nullptr, &zero) > 0) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    void saw_epipe() { got_epipe_ = true; }

private:
    sigset_t old_;
    bool got_epipe_ = false;
};

// Whether any live (not zombie) process is left in process group `pgid`. Helpers of a killed browser
// (renderers, zygote, GPU process) are reparented and take a moment to die after SIGKILL.
bool group_has_live_process(pid_t pgid) {
    DIR* dir = ::opendir("/proc");
    if (!dir) return false;
    bool found = false;
    while (dirent* e = ::readdir(dir)) {
        const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
        if (pid <= 0 || ::getpgid(pid) != pgid) continue;
        std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
        std::string line;
        std::getline(stat, line);
        const size_t close = line.rfind(')');
        if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') continue;
        found = true;
        break;
    }
    ::closedir(dir);
    return found;
}

}  // namespace

std::string describe_cdp_error(const std::string& method, const nlohmann::json& error) {
    std::string message = error.value("message", std::string("unknown error"));
    std::string text = method + " failed: " + message;
    if (error.contains("code")) text += " (code " + error["code"].dump() + ")";
    if (error.contains("data") && error["data"].is_string()) text += ": " + error["data"].get<std::string>();
    return text;
}

CdpPipe::CdpPipe(const LaunchSpec& spec, EventHandler on_event, ExitHandler on_exit)
    : spec_(spec), on_event_(std::move(on_event)), on_exit_(std::move(on_exit)) {
    std::promise<pid_t> started;
    std::future<pid_t> started_future = started.get_future();
    io_thread_ = std::thread([this, p = std::move(started)]() mutable { io_main(std::move(p)); });
    try {
        pid_ = started_future.get();
    } catch (...) {
        io_thread_.join();
        throw;
    }
}

CdpPipe::~CdpPipe() {
    terminate(std::chrono::milliseconds(2000));
}

std::string CdpPipe::lost_reason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lost_reason_;
}

void CdpPipe::io_main(std::promise<pid_t> started) {
    try {
        spawn(started);
    } catch (...) {
        started.set_exception(std::current_exception());
        return;
    }
    std::string reason = read_loop();
    // The child is gone or has dropped the pipe. Give a dying process a moment so the reason can name
    // its exit status, then kill what is left of its process group (renderers, zygote) so nothing
    // outlives it, and reap it.
    int status = 0;
    bool reaped = reaped_;
    for (int i = 0; i < 25 && !reaped; ++i) {
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            reaped = true;
            reason = "browser process " + describe_wait_status(status);
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ::kill(-pid_, SIGKILL);
    if (!reaped) {
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
    }
    mark_lost(reason);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        reaped_ = true;
    }
    reaped_cv_.notify_all();
}

void CdpPipe::spawn(std::promise<pid_t>& started) {
    // Build everything the child needs before fork: after fork only async-signal-safe calls are allowed.
    std::vector<std::string> argv_storage;
    argv_storage.push_back(spec_.executable);
    argv_storage.insert(argv_storage.end(), spec_.args.begin(), spec_.args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);

    int to_child[2], from_child[2], exec_status[2], wake[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0 ||
        ::pipe2(exec_status, O_CLOEXEC) != 0 || ::pipe2(wake, O_CLOEXEC) != 0) {
        throw Error(ErrorKind::kBrowser, errno_text("cannot create the DevTools pipes"));
    }
    int log_fd = ::open(spec_.log_path.empty() ? "/dev/null" : spec_.log_path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t parent = ::getpid();

    pid_t pid = ::fork();
    if (pid < 0) throw Error(ErrorKind::kBrowser, errno_text("fork failed while starting the browser"));
    if (pid == 0) {
        // Child. Own process group (so the parent can kill the whole tree), die with the parent thread.
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        // pipe2 may itself have returned fds 3/4, and dup2(fd, fd) would keep FD_CLOEXEC set (spec
        // §6.1b): move every fd out of the way first, then onto its final number.
        int r = ::fcntl(to_child[0], F_DUPFD_CLOEXEC, 10);
        int w = ::fcntl(from_child[1], F_DUPFD_CLOEXEC, 10);
        int s = ::fcntl(exec_status[1], F_DUPFD_CLOEXEC, 10);
        int l = log_fd >= 0 ? ::fcntl(log_fd, F_DUPFD_CLOEXEC, 10) : -1;
        int n = null_fd >= 0 ? ::fcntl(null_fd, F_DUPFD_CLOEXEC, 10) : -1;
        if (r < 0 || w < 0 || s < 0) ::_exit(126);
        if (n >= 0) ::dup2(n, 0);
        if (l >= 0) {
            ::dup2(l, 1);
            ::dup2(l, 2);
        }
        if (::dup2(r, 3) != 3 || ::dup2(w, 4) != 4 || ::dup2(s, 5) != 5) ::_exit(126);
        ::fcntl(5, F_SETFD, FD_CLOEXEC);
        ::close_range(6, ~0U, 0);
        ::execv(argv[0], argv.data());
        int err = errno;
        ssize_t ignored = ::write(5, &err, sizeof err);
        (void)ignored;
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent, so a kill(-pid) right after fork cannot miss
    ::close(to_child[0]);
    ::close(from_child[1]);
    ::close(exec_status[1]);
    if (log_fd >= 0) ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    int err = 0;
    ssize_t got;
    while ((got = ::read(exec_status[0], &err, sizeof err)) < 0 && errno == EINTR) {
    }
    ::close(exec_status[0]);
    if (got > 0) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        ::close(to_child[1]);
        ::close(from_child[0]);
        ::close(wake[0]);
        ::close(wake[1]);
        throw Error(ErrorKind::kBrowser,
                    "cannot execute the browser '" + spec_.executable + "': " + std::strerror(err));
    }
    to_child_ = to_child[1];
    from_child_ = from_child[0];
    wake_read_ = wake[0];
    wake_write_ = wake[1];
    ::fcntl(to_child_, F_SETFL, ::fcntl(to_child_, F_GETFL) | O_NONBLOCK);
    started.set_value(pid);
}

std::string CdpPipe::read_loop() {
    std::string carry;
    std::vector<char> chunk(1 << 20);
    for (;;) {
        pollfd fds[2] = {{from_child_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
        int ready = ::poll(fds, 2, 250);
        if (ready < 0) {
            if (errno == EINTR) continue;
            return errno_text("poll on the DevTools pipe failed");
        }
        if (fds[1].revents) {
            return "browser connection closed by surf";
        }
        if (ready == 0) {
            // A child that exited while some grandchild still holds its fd 4 gives no EOF: check it.
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                reaped_ = true;
                return "browser process " + describe_wait_status(status);
            }
            continue;
        }
        ssize_t n = ::read(from_child_, chunk.data(), chunk.size());
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return errno_text("read from the DevTools pipe failed");
        }
        if (n == 0) {
            return "the browser closed its DevTools pipe";
        }
        // A read may hold several messages or part of one (screenshots are megabytes): split on NUL.
        size_t start = carry.size();
        carry.append(chunk.data(), static_cast<size_t>(n));
        size_t begin = 0;
        for (size_t pos = carry.find('\0', start); pos != std::string::npos; pos = carry.find('\0', begin)) {
            dispatch(carry.substr(begin, pos - begin));
            begin = pos + 1;
        }
        carry.erase(0, begin);
    }
}

void CdpPipe::dispatch(const std::string& text) {
    nlohmann::json message = nlohmann::json::parse(text, nullptr, false);
    if (message.is_discarded() || !message.is_object()) return;  // nothing we could route
    if (message.contains("id") && message["id"].is_number_integer()) {
        std::shared_ptr<Pending> pending;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = pending_.find(message["id"].get<long long>());
            if (it == pending_.end()) return;  // a posted command, or one whose caller gave up
            pending = it->second;
            pending_.erase(it);
        }
        pending->promise.set_value(std::move(message));
        return;
    }
    if (!message.contains("method")) return;
    try {
        on_event_(message);
    } catch (...) {
        // An event handler must never take the reader down; the state it failed to record is lost.
    }
}

void CdpPipe::mark_lost(const std::string& reason) {
    std::map<long long, std::shared_ptr<Pending>> pending;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_) return;
        lost_ = true;
        lost_reason_ = reason;
        pending.swap(pending_);
    }
    for (auto& [id, p] : pending) {
        p->promise.set_exception(std::make_exception_ptr(Error(
            ErrorKind::kBrowser, "browser connection lost (" + reason + ") while waiting for an answer")));
    }
    try {
        on_exit_(reason);
    } catch (...) {
    }
}

bool CdpPipe::write_message(const std::string& text, Clock::time_point deadline) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (to_child_ < 0) return false;
    SigpipeGuard guard;
    const char* data = text.data();
    size_t left = text.size() + 1;  // std::string keeps a NUL after its end: it is our terminator
    while (left > 0) {
        ssize_t n = ::write(to_child_, data, left);
        if (n > 0) {
            data += n;
            left -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            auto wait =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (wait <= 0) return false;
            pollfd fd{to_child_, POLLOUT, 0};
            ::poll(&fd, 1, static_cast<int>(std::min<long long>(wait, 100)));
            continue;
        }
        if (n < 0 && errno == EPIPE) guard.saw_epipe();
        return false;
    }
    return true;
}

nlohmann::json CdpPipe::call(const std::string& method, const nlohmann::json& params,
                             const std::string& session_id, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    const long long id = next_id();
    auto pending = std::make_shared<Pending>();
    pending->method = method;
    pending->session_id = session_id;
    std::future<nlohmann::json> answer = pending->promise.get_future();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (lost_) {
            throw Error(ErrorKind::kBrowser,
                        method + " not sent: browser connection lost (" + lost_reason_ + ")");
        }
        pending_[id] = pending;
    }
    nlohmann::json message = {
        {"id", id}, {"method", method}, {"params", params.is_null() ? nlohmann::json::object() : params}};
    if (!session_id.empty()) message["sessionId"] = session_id;
    if (!write_message(message.dump(), deadline)) {
        std::lock_guard<std::mutex> lock(mutex_);
        pending_.erase(id);
        if (lost_)
            throw Error(ErrorKind::kBrowser,
                        method + " not sent: browser connection lost (" + lost_reason_ + ")");
        throw Error(ErrorKind::kTimeout, method + " could not be sent within " +
                                             std::to_string(timeout.count()) +
                                             " ms (the browser is not reading its pipe)");
    }
    if (answer.wait_until(deadline) != std::future_status::ready) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (pending_.erase(id) == 1) {
            throw Error(ErrorKind::kTimeout,
                        method + " got no answer within " + std::to_string(timeout.count()) + " ms");
        }
        // The answer (or the loss) arrived while we were giving up: take it.
    }
    nlohmann::json response = answer.get();  // rethrows a lost connection as kBrowser
    if (response.contains("error"))
        throw Error(ErrorKind::kBrowser, describe_cdp_error(method, response["error"]));
    if (!response.contains("result")) return nlohmann::json::object();
    return std::move(response["result"]);
}

void CdpPipe::post(const std::string& method, const nlohmann::json& params, const std::string& session_id) {
    if (lost_) return;
    nlohmann::json message = {{"id", next_id()},
                              {"method", method},
                              {"params", params.is_null() ? nlohmann::json::object() : params}};
    if (!session_id.empty()) message["sessionId"] = session_id;
    write_message(message.dump(), Clock::now() + std::chrono::seconds(2));
}

void CdpPipe::abandon_session(const std::string& session_id, const std::string& reason) {
    std::vector<std::shared_ptr<Pending>> abandoned;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = pending_.begin(); it != pending_.end();) {
            if (it->second->session_id == session_id) {
                abandoned.push_back(it->second);
                it = pending_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& p : abandoned) {
        p->promise.set_exception(
            std::make_exception_ptr(Error(ErrorKind::kBrowser, p->method + ": " + reason)));
    }
}

void CdpPipe::kill_now(const std::string& reason) {
    if (pid_ > 0 && !reaped_) ::kill(-pid_, SIGKILL);
    // Lost from now on, so the next command relaunches instead of racing the reader's EOF.
    mark_lost(reason);
}

void CdpPipe::terminate(std::chrono::milliseconds grace) {
    std::lock_guard<std::mutex> terminate_lock(terminate_mutex_);
    if (terminated_) return;
    terminated_ = true;
    auto wait_reaped = [this](std::chrono::milliseconds how_long) {
        std::unique_lock<std::mutex> lock(mutex_);
        return reaped_cv_.wait_for(lock, how_long, [this] { return reaped_.load(); });
    };
    if (alive()) {
        try {
            call("Browser.close", nlohmann::json::object(), "",
                 std::min(grace, std::chrono::milliseconds(2000)));
        } catch (const Error&) {
            // Already gone, or hung: the signals below deal with it.
        }
    }
    if (!wait_reaped(grace)) {
        ::kill(-pid_, SIGTERM);
        if (!wait_reaped(std::chrono::milliseconds(1000))) ::kill(-pid_, SIGKILL);
    }
    // Wake the I/O thread in case the child is dead but its pipe still open somewhere.
    if (wake_write_ >= 0) {
        char byte = 1;
        ssize_t ignored = ::write(wake_write_, &byte, 1);
        (void)ignored;
    }
    if (io_thread_.joinable()) io_thread_.join();
    // The browser is reaped; make sure its helpers are gone too before returning (bounded: 2 s).
    for (int i = 0; i < 200 && pid_ > 0 && group_has_live_process(pid_); ++i) {
        ::kill(-pid_, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    {
        std::lock_guard<std::mutex> lock(write_mutex_);
        close_fd(to_child_);
    }
    close_fd(from_child_);
    close_fd(wake_read_);
    close_fd(wake_write_);
}

}  // namespace surf::tools
