// `surf serve` as a child process on 127.0.0.1 for tests of the server and the remote backend: started with
// `--port 0`, its port read from the "listening on" line it prints; killed (SIGKILL) when it goes out of
// scope unless terminate() or kill_now() ended it first.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace surf::test {

class ServeProcess {
public:
    // Runs `surf serve --port 0 ARGS...`, its stderr to /dev/null; fails the test when it prints no
    // address within 30 s.
    explicit ServeProcess(const std::vector<std::string>& args) {
        const std::string exe = SURF_BINARY_DIR "/surf";
        REQUIRE_MESSAGE(std::filesystem::exists(exe), "build the surf executable first: " << exe);
        std::vector<std::string> storage = {exe, "serve", "--port", "0"};
        storage.insert(storage.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : storage) argv.push_back(a.data());
        argv.push_back(nullptr);
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            ::dup2(fds[1], 1);
            ::close(fds[0]);
            ::close(fds[1]);
            const int devnull = ::open("/dev/null", O_WRONLY);
            ::dup2(devnull, 2);
            ::execv(exe.c_str(), argv.data());
            ::_exit(127);
        }
        ::close(fds[1]);
        out_fd_ = fds[0];
        const std::string line = first_line();
        const size_t at = line.find("127.0.0.1:");
        REQUIRE_MESSAGE(at != std::string::npos, "surf serve did not start: " << line);
        port_ = std::stoi(line.substr(at + 10));
    }
    ~ServeProcess() {
        kill_now();
        if (out_fd_ >= 0) ::close(out_fd_);
    }
    ServeProcess(const ServeProcess&) = delete;
    ServeProcess& operator=(const ServeProcess&) = delete;

    int port() const { return port_; }
    std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
    std::string url() const { return origin() + "/v1"; }
    bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }

    // SIGTERM and wait: the exit code (-1 when it did not exit normally).
    int terminate() {
        ::kill(pid_, SIGTERM);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    // SIGKILL and wait: the server vanishes mid-whatever, as a crashed machine's would.
    void kill_now() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

private:
    std::string first_line() {
        std::string line;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
            pollfd p{out_fd_, POLLIN, 0};
            if (::poll(&p, 1, 200) <= 0) continue;
            char buf[256];
            const ssize_t n = ::read(out_fd_, buf, sizeof buf);
            if (n <= 0) break;
            line.append(buf, static_cast<size_t>(n));
        }
        return line;
    }

    pid_t pid_ = -1;
    int port_ = 0;
    int out_fd_ = -1;
};

}  // namespace surf::test
