// A small HTTP/1.1 server on POSIX sockets for `surf serve`: one thread accepts connections and reads
// every request with poll (so slow clients hold no worker; header/body deadlines and size limits are
// enforced there), a fixed pool of worker threads takes whole requests from a bounded queue, one request
// per connection (Connection: close), so a streamed response simply ends when the connection closes. A
// full queue is answered 503 with Retry-After, never a reset. A client that goes away is noticed on the
// next write (or by polling, while the handler computes) so generation can be cancelled.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace surf::serve {

struct HttpRequest {
    std::string method;  // "GET", "POST", ...
    std::string path;    // without the query string
    std::string query;
    std::map<std::string, std::string> headers;  // keys lower-cased
    std::string body;
    std::string peer;  // "127.0.0.1:53422"
    // When the request was read whole and queued for a worker: the start of its latency in /metrics.
    std::chrono::steady_clock::time_point received{};

    std::string header(const std::string& lower_name) const {
        auto it = headers.find(lower_name);
        return it == headers.end() ? "" : it->second;
    }
};

// Writes one response on a connection: either whole (send) or streamed (begin_stream + write).
class HttpResponseWriter {
public:
    explicit HttpResponseWriter(int fd) : fd_(fd) {}

    void send(int status, const std::string& content_type, const std::string& body,
              const std::vector<std::pair<std::string, std::string>>& extra_headers = {});
    // Headers without Content-Length; the body ends when the connection closes.
    bool begin_stream(int status, const std::string& content_type);
    // False once the client is gone (every later write is skipped).
    bool write(const std::string& data);
    // True when the peer has closed or reset the connection (checked without blocking).
    bool client_gone();
    bool started() const { return started_; }
    int status() const { return status_; }

private:
    bool write_all(const char* data, size_t size);

    int fd_;
    bool started_ = false;
    bool broken_ = false;
    int status_ = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponseWriter&)>;

struct HttpServerOptions {
    std::string host = "127.0.0.1";
    int port = 0;            // 0: an ephemeral port (see HttpServer::port())
    int threads = 32;        // concurrent requests (streamed generations hold a thread)
    int max_queue = 256;     // whole requests waiting for a thread; beyond: 503 + Retry-After
    int max_reading = 4096;  // connections still sending their request; beyond: 503 + Retry-After
    // Paths answered by the reading thread itself, never queued behind generations (cheap handlers only).
    std::vector<std::string> inline_paths = {"/health"};
    size_t max_header_bytes = 64 << 10;  // request line + headers; beyond: 431
    size_t max_body_bytes = 32 << 20;    // beyond: 413
    int read_timeout_ms = 30000;         // a client that stalls while sending its request: 408
};

class HttpServer {
public:
    HttpServer(HttpServerOptions options, HttpHandler handler);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and listens (throws surf::Error(kIo) naming host:port), then starts the threads.
    void start();
    // Stops accepting, wakes the workers and joins every thread; in-flight handlers finish first.
    void stop();
    int port() const { return port_; }
    // Connections accepted but not yet picked up by a worker.
    int64_t queue_depth() const;
    // Requests a worker is handling now.
    int64_t active() const { return active_.load(); }

private:
    void accept_loop();
    void dispatch(int fd, HttpRequest req);  // a whole request: inline, queued, or 503
    void worker_loop();
    void serve_request(int fd, const HttpRequest& req);

    HttpServerOptions options_;
    HttpHandler handler_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<int64_t> active_{0};
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::pair<int, HttpRequest>> queue_;
    std::thread acceptor_;
    std::vector<std::thread> workers_;
};

// Reason phrase of a status code ("Not Found").
const char* http_reason(int status);

}  // namespace surf::serve
