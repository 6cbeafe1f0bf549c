// A tiny HTTP/1.0 server for the browser tests: binds 127.0.0.1 (or another loopback address) on a free
// port, serves files from tests/browser/pages/ and a few dynamic routes, one thread per connection,
// "Connection: close".
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace surf::test {

struct HttpRequest {
    std::string method;
    std::string path;                            // without the query
    std::string query;                           // after '?', "" if none
    std::map<std::string, std::string> headers;  // lower-case names
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/html; charset=utf-8";
    std::string body;
    std::vector<std::string> headers;  // extra "Name: value" lines
    bool never_finish = false;         // send headers and part of the body, then stall until stop()
};

class TestHttpServer {
public:
    using Handler = std::function<bool(const HttpRequest&, HttpResponse&)>;  // false: not handled

    explicit TestHttpServer(std::string pages_dir, Handler extra = nullptr, std::string address = "127.0.0.1")
        : pages_dir_(std::move(pages_dir)), extra_(std::move(extra)), address_(std::move(address)) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = 0;
        if (::inet_pton(AF_INET, address_.c_str(), &addr.sin_addr) != 1 ||
            ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(listen_fd_, 64) != 0) {
            throw std::runtime_error("test server: cannot listen on " + address_);
        }
        socklen_t len = sizeof addr;
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
        port_ = ntohs(addr.sin_port);
        accept_thread_ = std::thread([this] { accept_loop(); });
    }
    ~TestHttpServer() { stop(); }

    int port() const { return port_; }
    std::string url(const std::string& path, const std::string& host = "") const {
        return "http://" + (host.empty() ? address_ : host) + ":" + std::to_string(port_) + path;
    }
    int connections() const { return connections_; }  // accepted so far, whether a request came or not
    int requests(const std::string& path) {
        std::lock_guard<std::mutex> lock(mutex_);
        return hits_[path];
    }

    void stop() {
        if (stopping_.exchange(true)) return;
        ::shutdown(listen_fd_, SHUT_RDWR);
        if (accept_thread_.joinable()) accept_thread_.join();
        ::close(listen_fd_);
        std::vector<std::thread> workers;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            workers.swap(workers_);
        }
        for (auto& t : workers) t.join();
    }

private:
    void accept_loop() {
        while (!stopping_) {
            pollfd p{listen_fd_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            ++connections_;
            std::lock_guard<std::mutex> lock(mutex_);
            workers_.emplace_back([this, fd] { serve(fd); });
        }
    }

    static std::string status_text(int status) {
        switch (status) {
            case 200: return "OK";
            case 302: return "Found";
            case 404: return "Not Found";
            case 500: return "Internal Server Error";
            default: return "Status";
        }
    }

    void serve(int fd) {
        std::string raw;
        char buf[4096];
        while (raw.find("\r\n\r\n") == std::string::npos && raw.size() < 65536) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 5000) <= 0) break;
            ssize_t n = ::read(fd, buf, sizeof buf);
            if (n <= 0) break;
            raw.append(buf, static_cast<size_t>(n));
        }
        HttpRequest req;
        std::istringstream in(raw);
        std::string target, line;
        in >> req.method >> target;
        std::getline(in, line);
        while (std::getline(in, line) && line != "\r" && !line.empty()) {
            size_t colon = line.find(':');
            if (colon == std::string::npos) continue;
            std::string name = line.substr(0, colon);
            for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            std::string value = line.substr(colon + 1);
            value.erase(0, value.find_first_not_of(' '));
            if (!value.empty() && value.back() == '\r') value.pop_back();
            req.headers[name] = value;
        }
        size_t q = target.find('?');
        req.path = target.substr(0, q);
        if (q != std::string::npos) req.query = target.substr(q + 1);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ++hits_[req.path];
        }
        HttpResponse res;
        if (!(extra_ && extra_(req, res))) {
            std::ifstream file(pages_dir_ + req.path, std::ios::binary);
            if (req.path.find("..") == std::string::npos && file) {
                std::stringstream ss;
                ss << file.rdbuf();
                res.body = ss.str();
            } else {
                res.status = 404;
                res.body = "<html><body><h1>not found</h1></body></html>";
            }
        }
        std::string head = "HTTP/1.0 " + std::to_string(res.status) + " " + status_text(res.status) +
                           "\r\nContent-Type: " + res.content_type +
                           "\r\nConnection: close\r\nCache-Control: no-store\r\n";
        for (const auto& h : res.headers) head += h + "\r\n";
        if (res.never_finish) {
            head += "Content-Length: " + std::to_string(res.body.size() + 100000) + "\r\n\r\n" + res.body;
            write_all(fd, head);
            while (!stopping_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        } else {
            head += "Content-Length: " + std::to_string(res.body.size()) + "\r\n\r\n" + res.body;
            write_all(fd, head);
        }
        ::close(fd);
    }

    static void write_all(int fd, const std::string& data) {
        size_t done = 0;
        while (done < data.size()) {
            ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
            if (n <= 0) return;
            done += static_cast<size_t>(n);
        }
    }

    std::string pages_dir_;
    Handler extra_;
    std::string address_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<int> connections_{0};
    std::thread accept_thread_;
    std::mutex mutex_;
    std::vector<std::thread> workers_;
    std::map<std::string, int> hits_;
};

}  // namespace surf::test
