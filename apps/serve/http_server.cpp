#include "apps/serve/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/error.h"
#include "base/utf8.h"

namespace surf::serve {

namespace {

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

void plain_error(HttpResponseWriter& w, int status, const std::string& message,
                 const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    // The same OpenAI-style shape the API layer uses, so clients parse one format.
    std::string escaped;
    for (char c : message) {
        if (c == '"' || c == '\\') escaped += '\\';
        escaped += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
    w.send(status, "application/json",
           "{\"error\":{\"message\":\"" + escaped +
               "\",\"type\":\"invalid_request_error\",\"param\":null,"
               "\"code\":null}}",
           headers);
}

// The answer to a client the server cannot take now: 503 and when to come back.
void overloaded(int fd, const std::string& why) {
    HttpResponseWriter w(fd);
    plain_error(w, 503, why + "; retry later", {{"Retry-After", "1"}});
}

void set_blocking(int fd, bool blocking) {
    const int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK));
}

std::string peer_name(const sockaddr_storage& addr) {
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (addr.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
    }
    return std::string(host) + ":" + std::to_string(port);
}

// Where the bytes read so far stand: more are needed, a whole request (or its head) is there, or it is
// refused.
struct Parsed {
    enum Kind { kIncomplete, kComplete, kError } kind = kIncomplete;
    int status = 0;
    std::string message;
};

Parsed refuse(int status, std::string message) {
    return {Parsed::kError, status, std::move(message)};
}

// A connection whose request is still being read. The head (request line and headers) is parsed once,
// when it is all there; after that only the body's length is watched.
struct Reading {
    int fd = -1;
    std::string peer;
    std::string buf;
    std::chrono::steady_clock::time_point deadline;
    bool head_done = false;
    size_t body_start = 0, body_length = 0;
    HttpRequest req;
};

// Parses the request line and headers of `buf` into `r.req` once they are all there, and notes where the
// body starts and how long it is (Content-Length).
Parsed parse_head(const std::string& buf, const HttpServerOptions& options, Reading& r) {
    HttpRequest& req = r.req;
    const size_t header_end = buf.find("\r\n\r\n");
    if (header_end == std::string::npos) {
        if (buf.size() > options.max_header_bytes)
            return refuse(431,
                          "request headers exceed " + std::to_string(options.max_header_bytes) + " bytes");
        return {};
    }
    if (header_end > options.max_header_bytes)
        return refuse(431, "request headers exceed " + std::to_string(options.max_header_bytes) + " bytes");
    const std::string head = buf.substr(0, header_end);
    size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    const size_t s1 = request_line.find(' ');
    const size_t s2 = s1 == std::string::npos ? std::string::npos : request_line.find(' ', s1 + 1);
    if (s2 == std::string::npos || request_line.compare(s2 + 1, 5, "HTTP/") != 0)
        return refuse(400, "malformed request line");
    req.method = request_line.substr(0, s1);
    const std::string target = request_line.substr(s1 + 1, s2 - s1 - 1);
    const size_t q = target.find('?');
    req.path = target.substr(0, q);
    req.query = q == std::string::npos ? "" : target.substr(q + 1);
    req.headers.clear();
    while (line_end != std::string::npos && line_end < head.size()) {
        const size_t next = head.find("\r\n", line_end + 2);
        const std::string line =
            head.substr(line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
        line_end = next;
        const size_t colon = line.find(':');
        if (colon == std::string::npos) return refuse(400, "malformed header line");
        req.headers[surf::ascii_lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    }
    if (!req.header("transfer-encoding").empty())
        return refuse(411, "chunked request bodies are not supported; send Content-Length");
    size_t length = 0;
    const std::string cl = req.header("content-length");
    if (!cl.empty()) {
        try {
            size_t used = 0;
            const unsigned long long v = std::stoull(cl, &used);
            if (used != cl.size()) throw std::invalid_argument(cl);
            if (v > options.max_body_bytes) {
                return refuse(413, "request body of " + cl + " bytes exceeds the limit of " +
                                       std::to_string(options.max_body_bytes) + " bytes");
            }
            length = static_cast<size_t>(v);
        } catch (const std::exception&) {
            return refuse(400, "malformed Content-Length \"" + cl + "\"");
        }
    } else if (req.method == "POST" || req.method == "PUT") {
        return refuse(411, "Content-Length is required");
    }
    r.body_start = header_end + 4;
    r.body_length = length;
    return {Parsed::kComplete, 0, ""};
}

// Reads what the client sent since the last poll: kComplete once the whole request is in `r.req`,
// kError with the answer to send, kIncomplete to wait for more; a client that closed or reset before a
// whole request gives kError with status 0 (nothing to answer).
Parsed read_more(Reading& r, const HttpServerOptions& options) {
    char chunk[65536];
    const ssize_t n = ::recv(r.fd, chunk, sizeof chunk, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return {Parsed::kError, 0, ""};
    if (n < 0) return {};
    r.buf.append(chunk, static_cast<size_t>(n));
    if (!r.head_done) {
        const Parsed head = parse_head(r.buf, options, r);
        if (head.kind != Parsed::kComplete) return head;
        r.head_done = true;
    }
    if (r.buf.size() - r.body_start < r.body_length) return {};
    r.req.body = r.buf.substr(r.body_start, r.body_length);
    return {Parsed::kComplete, 0, ""};
}

}  // namespace

const char* http_reason(int status) {
    switch (status) {
        case 200: return "OK";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 411: return "Length Required";
        case 413: return "Payload Too Large";
        case 415: return "Unsupported Media Type";
        case 422: return "Unprocessable Entity";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        default: return "Unknown";
    }
}

bool HttpResponseWriter::write_all(const char* data, size_t size) {
    if (broken_) return false;
    while (size > 0) {
        const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            broken_ = true;
            return false;
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

void HttpResponseWriter::send(int status, const std::string& content_type, const std::string& body,
                              const std::vector<std::pair<std::string, std::string>>& extra_headers) {
    if (started_) return;
    started_ = true;
    status_ = status;
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) + "\r\n";
    head += "Content-Type: " + content_type + "\r\n";
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [k, v] : extra_headers) head += k + ": " + v + "\r\n";
    head += "Connection: close\r\n\r\n";
    if (write_all(head.data(), head.size())) write_all(body.data(), body.size());
}

bool HttpResponseWriter::begin_stream(int status, const std::string& content_type) {
    if (started_) return !broken_;
    started_ = true;
    status_ = status;
    const std::string head = "HTTP/1.1 " + std::to_string(status) + " " + http_reason(status) +
                             "\r\nContent-Type: " + content_type +
                             "\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    return write_all(head.data(), head.size());
}

bool HttpResponseWriter::write(const std::string& data) {
    return write_all(data.data(), data.size());
}

bool HttpResponseWriter::client_gone() {
    if (broken_) return true;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        broken_ = true;
        return true;
    }
    if (p.revents & POLLIN) {
        // Readable after the whole request was read: either EOF (the client closed) or pipelined bytes,
        // which this one-request-per-connection server ignores.
        char c;
        const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) {
            broken_ = true;
            return true;
        }
    }
    return false;
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() {
    stop();
}

void HttpServer::start() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string where = options_.host + ":" + std::to_string(options_.port);
    const int rc =
        ::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &found);
    if (rc != 0) throw Error(ErrorKind::kInvalidArgument, "--host " + where + ": " + ::gai_strerror(rc));
    std::string last_error = "no address";
    for (addrinfo* a = found; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 512) == 0) {
            listen_fd_ = fd;
            break;
        }
        last_error = std::strerror(errno);
        ::close(fd);
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0) throw Error(ErrorKind::kIo, "cannot listen on " + where + ": " + last_error);
    set_blocking(listen_fd_, false);  // the reading thread accepts until the backlog is empty
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    for (int i = 0; i < std::max(1, options_.threads); ++i) workers_.emplace_back([this] { worker_loop(); });
    acceptor_ = std::thread([this] { accept_loop(); });
}

void HttpServer::stop() {
    if (stopping_.exchange(true)) return;
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [fd, req] : queue_) ::close(fd);
    queue_.clear();
}

int64_t HttpServer::queue_depth() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(queue_.size());
}

// One thread reads every request: it accepts connections, polls all those still sending, answers
// refusals and timeouts itself and hands whole requests to the workers. A slow or silent client holds
// a slot in this poll set, never a worker, and /health-like paths are answered here at once.
void HttpServer::accept_loop() {
    std::vector<Reading> reading;
    std::vector<pollfd> fds;
    while (!stopping_.load()) {
        fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
        for (const Reading& r : reading) fds.push_back(pollfd{r.fd, POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) continue;
        const auto now = std::chrono::steady_clock::now();
        std::vector<Reading> still;
        for (size_t i = 0; i < reading.size(); ++i) {
            Reading& r = reading[i];
            const Parsed p = fds[i + 1].revents ? read_more(r, options_) : Parsed{};
            if (p.kind == Parsed::kComplete) {
                r.req.peer = r.peer;
                dispatch(r.fd, std::move(r.req));
                continue;
            }
            if (p.kind == Parsed::kIncomplete && now < r.deadline) {
                still.push_back(std::move(r));
                continue;
            }
            HttpResponseWriter w(r.fd);
            if (p.kind == Parsed::kError && p.status) plain_error(w, p.status, p.message);
            if (p.kind == Parsed::kIncomplete && !r.buf.empty())
                plain_error(w, 408, "timed out reading the request");
            ::close(r.fd);
        }
        reading = std::move(still);
        if (!(fds[0].revents & POLLIN)) continue;
        for (;;) {  // every connection waiting in the backlog
            sockaddr_storage addr{};
            socklen_t len = sizeof addr;
            const int fd =
                ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0) break;
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // SSE chunks go out at once
            if (static_cast<int>(reading.size()) >= options_.max_reading) {
                overloaded(fd, "the server is reading too many requests at once");
                ::close(fd);
                continue;
            }
            Reading r;
            r.fd = fd;
            r.peer = peer_name(addr);
            r.deadline = now + std::chrono::milliseconds(options_.read_timeout_ms);
            reading.push_back(std::move(r));
        }
    }
    for (const Reading& r : reading) ::close(r.fd);
}

void HttpServer::dispatch(int fd, HttpRequest req) {
    set_blocking(fd, true);
    req.received = std::chrono::steady_clock::now();
    if (std::find(options_.inline_paths.begin(), options_.inline_paths.end(), req.path) !=
        options_.inline_paths.end()) {
        serve_request(fd, req);
        ::close(fd);
        return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (static_cast<int>(queue_.size()) >= options_.max_queue) {
        lock.unlock();
        overloaded(fd, "the server is at its request limit");
        ::close(fd);
        return;
    }
    queue_.emplace_back(fd, std::move(req));
    lock.unlock();
    cv_.notify_one();
}

void HttpServer::worker_loop() {
    for (;;) {
        std::pair<int, HttpRequest> job;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [&] { return stopping_.load() || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        ++active_;
        serve_request(job.first, job.second);
        --active_;
        ::close(job.first);
    }
}

void HttpServer::serve_request(int fd, const HttpRequest& req) {
    HttpResponseWriter writer(fd);
    try {
        handler_(req, writer);
    } catch (const std::exception& e) {
        if (!writer.started()) plain_error(writer, 500, std::string("internal error: ") + e.what());
    }
    if (!writer.started()) plain_error(writer, 500, "the handler sent no response");
}

}  // namespace surf::serve
