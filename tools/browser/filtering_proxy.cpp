#include "tools/browser/filtering_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <system_error>
#include <tuple>

#include "base/error.h"
#include "base/utf8.h"

namespace surf::tools {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void bad_request(const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument, "proxy request: " + what);
}

bool is_token(std::string_view s) {
    if (s.empty()) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
    });
}

// "host:port" or "[v6]:port" (port required unless default_port > 0), as a CONNECT target or the authority
// of an absolute URL. No user info: a browser never sends one to its proxy.
std::pair<std::string, int> parse_authority(std::string_view authority, int default_port) {
    std::string host;
    std::string_view port_text;
    if (!authority.empty() && authority.front() == '[') {
        const size_t close = authority.find(']');
        if (close == std::string_view::npos) bad_request("unclosed '[' in '" + std::string(authority) + "'");
        host = std::string(authority.substr(1, close - 1));
        if (!parse_ip_address(host)) bad_request("'" + host + "' in brackets is not an IPv6 address");
        std::string_view after = authority.substr(close + 1);
        if (!after.empty() && after.front() != ':')
            bad_request("junk after ']' in '" + std::string(authority) + "'");
        if (!after.empty()) port_text = after.substr(1);
    } else {
        const size_t colon = authority.rfind(':');
        host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
        const bool name_chars = std::all_of(host.begin(), host.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
        });
        if (!name_chars) bad_request("host '" + host + "' has characters a host name cannot have");
    }
    host = surf::ascii_lower(std::move(host));
    while (!host.empty() && host.back() == '.') host.pop_back();
    if (host.empty()) bad_request("no host in '" + std::string(authority) + "'");
    if (port_text.empty()) {
        if (default_port > 0) return {host, default_port};
        bad_request("target '" + std::string(authority) + "' has no port");
    }
    int port = 0;
    for (char c : port_text) {
        if (!std::isdigit(static_cast<unsigned char>(c)) || port > 65535)
            bad_request("bad port in '" + std::string(authority) + "'");
        port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535) bad_request("port out of range in '" + std::string(authority) + "'");
    return {host, port};
}

struct Header {
    std::string name;  // lower case
    std::string line;  // as received, without CRLF
};

// The header lines of a head after its first line, up to the blank line.
std::vector<Header> parse_headers(std::string_view head, size_t start) {
    std::vector<Header> headers;
    while (start < head.size()) {
        const size_t eol = head.find("\r\n", start);
        if (eol == std::string_view::npos) bad_request("a header line does not end with CRLF");
        std::string_view line = head.substr(start, eol - start);
        start = eol + 2;
        if (line.empty()) break;
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
            bad_request("malformed header line '" + std::string(line.substr(0, 80)) + "'");
        if (line.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
            bad_request("a header line holds a control character");
        headers.push_back({surf::ascii_lower(std::string(line.substr(0, colon))), std::string(line)});
    }
    return headers;
}

std::string header_value(const Header& h) {
    std::string value = h.line.substr(h.name.size() + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
    return value;
}

// Builds the origin-form head of an absolute-form request.
void make_forward_head(ProxyRequest& req, std::string_view path, std::string_view version,
                       const std::vector<Header>& headers) {
    bool connection_upgrade = false, has_upgrade = false, has_host = false;
    for (const Header& h : headers) {
        if (h.name == "connection")
            connection_upgrade |= surf::ascii_lower(header_value(h)).find("upgrade") != std::string::npos;
        has_upgrade |= h.name == "upgrade";
        has_host |= h.name == "host";
    }
    req.upgrade = connection_upgrade && has_upgrade;
    std::string out = req.method + " " + std::string(path) + " " + std::string(version) + "\r\n";
    if (!has_host) {
        const bool v6 = req.host.find(':') != std::string::npos;
        out += "Host: " + (v6 ? "[" + req.host + "]" : req.host) + ":" + std::to_string(req.port) + "\r\n";
    }
    for (const Header& h : headers) {
        if (h.name.rfind("proxy-", 0) == 0 || h.name == "keep-alive") continue;
        if (h.name == "connection" && !req.upgrade) continue;
        out += h.line + "\r\n";
    }
    if (!req.upgrade) out += "Connection: close\r\n";
    req.forward_head = out + "\r\n";
}

}  // namespace

ProxyRequest parse_proxy_request(std::string_view head) {
    const size_t eol = head.find("\r\n");
    if (eol == std::string_view::npos) bad_request("no CRLF after the request line");
    const std::string_view line = head.substr(0, eol);
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp1 == sp2)
        bad_request("request line '" + std::string(line.substr(0, 80)) + "' is not METHOD TARGET VERSION");
    ProxyRequest req;
    req.method = std::string(line.substr(0, sp1));
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (!is_token(req.method)) bad_request("method '" + req.method + "' is not a token");
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        bad_request("version '" + std::string(version) + "' is not HTTP/1.x");
    const bool control = std::any_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) == 0x7f;
    });
    if (target.empty() || control)
        bad_request("malformed target in '" + std::string(line.substr(0, 80)) + "'");
    const std::vector<Header> headers = parse_headers(head, eol + 2);
    if (req.method == "CONNECT") {
        req.connect = true;
        std::tie(req.host, req.port) = parse_authority(target, 0);
        return req;
    }
    const size_t scheme_end = target.find("://");
    const std::string scheme = surf::ascii_lower(std::string(target.substr(0, scheme_end)));
    if (scheme_end == std::string_view::npos || (scheme != "http" && scheme != "ws"))
        bad_request("target '" + std::string(target.substr(0, 80)) +
                    "' is not an absolute http:// or ws:// URL");
    const std::string_view rest = target.substr(scheme_end + 3);
    const size_t path_start = rest.find_first_of("/?");
    std::tie(req.host, req.port) = parse_authority(rest.substr(0, path_start), 80);
    std::string path = path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
    if (path.front() == '?') path = "/" + path;
    make_forward_head(req, path, version, headers);
    return req;
}

std::string close_response_head(std::string_view head) {
    const size_t eol = head.find("\r\n");
    if (eol == std::string_view::npos) return std::string(head);
    std::string out(head.substr(0, eol + 2));
    size_t start = eol + 2;
    while (start < head.size()) {
        const size_t end = head.find("\r\n", start);
        if (end == std::string_view::npos || end == start) break;
        const std::string_view line = head.substr(start, end - start);
        start = end + 2;
        const std::string name = surf::ascii_lower(std::string(line.substr(0, line.find(':'))));
        if (name == "connection" || name == "keep-alive" || name == "proxy-connection") continue;
        out += std::string(line) + "\r\n";
    }
    return out + "Connection: close\r\nProxy-Connection: close\r\n\r\n";
}

ProxyPolicy::ProxyPolicy(NavigationGuard guard) : guard_(std::move(guard)) {
    for (const std::string& rule : guard_.address_deny_rules())
        denied_.emplace_back(*parse_ip_address(rule), rule);
}

GuardDecision ProxyPolicy::check_host(const std::string& host) const {
    const bool v6 = host.find(':') != std::string::npos;
    GuardDecision d = guard_.check("http://" + (v6 ? "[" + host + "]" : host) + "/");
    if (!d.allowed) {
        d.reason = "connection to '" + host + "' refused by " +
                   (d.rule.rfind("deny:", 0) == 0 ? "deny rule '" + d.rule.substr(5) + "'" : d.rule);
    }
    return d;
}

GuardDecision ProxyPolicy::check_addresses(const std::string& host,
                                           const std::vector<IpBytes>& addresses) const {
    for (const IpBytes& address : addresses) {
        for (const auto& [denied, rule] : denied_) {
            if (address != denied) continue;
            const std::string text = ip_address_text(address);
            return {false, "deny:" + rule,
                    "connection to '" + host +
                        "' refused: " + (text == host ? "it" : "it resolves to " + text + ", which") +
                        " matches deny rule '" + rule + "'"};
        }
    }
    return {};
}

// State the accepting thread and every connection's thread share; each holds a reference, so the last one
// to finish frees it.
struct FilteringProxy::Shared {
    Shared(NavigationGuard guard, ProxyLimits l) : policy(std::move(guard)), limits(l) {}
    ~Shared() {
        if (listen_fd >= 0) ::close(listen_fd);
        if (stop_fd >= 0) ::close(stop_fd);
    }
    const ProxyPolicy policy;
    const ProxyLimits limits;
    int listen_fd = -1;
    int stop_fd = -1;  // an eventfd, readable once stop() is called; every poll() watches it
    std::atomic<bool> stopping{false};

    mutable std::mutex mutex;
    std::condition_variable idle_cv;  // notified when a connection's thread ends
    int active = 0;
    std::set<int> open_fds;  // every socket of every connection, so that stop() can shut them down
    std::deque<std::string> log_lines;

    void log(std::string line) {
        std::lock_guard<std::mutex> lock(mutex);
        log_lines.push_back(std::move(line));
        while (log_lines.size() > limits.max_log_entries) log_lines.pop_front();
    }
    void track(int fd) {
        std::lock_guard<std::mutex> lock(mutex);
        open_fds.insert(fd);
    }
    // Under the mutex, so that stop() never shuts down a number the kernel has handed out again.
    void close_fd(int fd) {
        if (fd < 0) return;
        std::lock_guard<std::mutex> lock(mutex);
        open_fds.erase(fd);
        ::close(fd);
    }
};

namespace {

const char* status_text(int status) {
    switch (status) {
        case 400: return "Bad Request";
        case 403: return "Forbidden";
        case 408: return "Request Timeout";
        case 431: return "Request Header Fields Too Large";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        default: return "Error";
    }
}

bool send_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

void send_status(int fd, int status, const std::string& reason) {
    const std::string body = "surf filtering proxy: " + reason + "\n";
    send_all(fd, "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) +
                     "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                     std::to_string(body.size()) +
                     "\r\nConnection: close\r\nProxy-Connection: close\r\n\r\n" + body);
}

int ms_left(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// The sockets, decisions and bytes of one client connection, on its own thread.
class Connection {
public:
    Connection(std::shared_ptr<FilteringProxy::Shared> shared, int client)
        : s_(std::move(shared)), client_(client) {}
    ~Connection() {
        s_->close_fd(upstream_);
        s_->close_fd(client_);
    }
    void run();

private:
    // Reads from `fd` until a blank line ends a head: returns the head, leaves what follows in `rest`.
    // 0 = done; else the status to answer (408, 431) or -1 when the peer left or the proxy stops.
    int read_head(int fd, std::string& head, std::string& rest, Clock::time_point deadline);
    void refuse(int status, const std::string& target, const std::string& reason);
    bool resolve(const ProxyRequest& req, std::vector<sockaddr_storage>& out, std::vector<IpBytes>& ips);
    bool connect_upstream(const ProxyRequest& req, const std::vector<sockaddr_storage>& addresses);
    // Wait for `fd` to be ready for `events`: its revents, 0 on timeout, -1 once the proxy stops.
    int wait(int fd, short events, int timeout_ms);
    void relay(std::string to_upstream, bool rewrite_response);
    bool pump(int from, int to, bool rewrite);

    std::shared_ptr<FilteringProxy::Shared> s_;
    int client_;
    int upstream_ = -1;
    bool head_pending_ = false;  // a forwarded request's response head has yet to pass close_response_head
    std::string response_head_;  // that head while it arrives
};

int Connection::wait(int fd, short events, int timeout_ms) {
    pollfd p[2] = {{fd, events, 0}, {s_->stop_fd, POLLIN, 0}};
    for (;;) {
        const int r = ::poll(p, 2, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || p[1].revents) return -1;
        return r == 0 ? 0 : p[0].revents;
    }
}

int Connection::read_head(int fd, std::string& head, std::string& rest, Clock::time_point deadline) {
    std::string buf;
    char chunk[4096];
    const size_t limit = s_->limits.max_head_bytes;
    for (;;) {
        const size_t end = buf.find("\r\n\r\n");
        if (end != std::string::npos && end + 4 <= limit) {
            head = buf.substr(0, end + 4);
            rest = buf.substr(end + 4);
            return 0;
        }
        if (buf.size() >= limit) return 431;
        const int ready = wait(fd, POLLIN, ms_left(deadline));
        if (ready == 0) return 408;
        if (ready < 0) return -1;
        const ssize_t n = ::recv(fd, chunk, std::min(sizeof chunk, limit + 4 - buf.size()), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        buf.append(chunk, static_cast<size_t>(n));
    }
}

void Connection::refuse(int status, const std::string& target, const std::string& reason) {
    s_->log(std::to_string(status) + " " + (target.empty() ? "" : target + ": ") + reason);
    send_status(client_, status, reason);
    // A close with unread input would reset the connection and could destroy the answer before the client
    // reads it: end our side, then discard what the client still sends, briefly.
    ::shutdown(client_, SHUT_WR);
    char sink[4096];
    const auto deadline = Clock::now() + std::chrono::milliseconds(500);
    for (size_t drained = 0; drained < 256 * 1024;) {
        if (wait(client_, POLLIN, ms_left(deadline)) <= 0) return;
        const ssize_t n = ::recv(client_, sink, sizeof sink, 0);
        if (n <= 0) return;
        drained += static_cast<size_t>(n);
    }
}

void Connection::run() {
    std::string head, rest;
    const int got = read_head(client_, head, rest, Clock::now() + s_->limits.head_timeout);
    if (got != 0) {
        if (got == 408) refuse(408, "", "the request head did not arrive in time");
        if (got == 431)
            refuse(431, "",
                   "the request head exceeds " + std::to_string(s_->limits.max_head_bytes) + " bytes");
        return;
    }
    ProxyRequest req;
    try {
        req = parse_proxy_request(head);
    } catch (const Error& e) {
        refuse(400, "", e.what());
        return;
    }
    const std::string target = req.method + " " + req.host + ":" + std::to_string(req.port);
    if (GuardDecision d = s_->policy.check_host(req.host); !d.allowed) return refuse(403, target, d.reason);
    std::vector<sockaddr_storage> addresses;
    std::vector<IpBytes> ips;
    if (!resolve(req, addresses, ips)) return;
    if (GuardDecision d = s_->policy.check_addresses(req.host, ips); !d.allowed)
        return refuse(403, target, d.reason);
    if (!connect_upstream(req, addresses)) return;
    if (req.connect) {
        if (!send_all(client_, "HTTP/1.1 200 Connection Established\r\n\r\n")) return;
        relay(rest, false);
    } else {
        relay(req.forward_head + rest, !req.upgrade);
    }
}

bool Connection::resolve(const ProxyRequest& req, std::vector<sockaddr_storage>& out,
                         std::vector<IpBytes>& ips) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(req.host.c_str(), std::to_string(req.port).c_str(), &hints, &found);
    if (s_->stopping) {
        if (rc == 0) ::freeaddrinfo(found);
        return false;
    }
    if (rc != 0) {
        refuse(502, req.host, std::string("cannot resolve '") + req.host + "': " + ::gai_strerror(rc));
        return false;
    }
    for (addrinfo* a = found; a; a = a->ai_next) {
        if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
        sockaddr_storage address{};
        std::memcpy(&address, a->ai_addr, a->ai_addrlen);
        IpBytes ip{};
        if (a->ai_family == AF_INET) {
            ip[10] = ip[11] = 0xff;
            std::memcpy(ip.data() + 12, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, 4);
        } else {
            std::memcpy(ip.data(), &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, 16);
        }
        out.push_back(address);
        ips.push_back(ip);
    }
    ::freeaddrinfo(found);
    if (out.empty()) refuse(502, req.host, "'" + req.host + "' resolves to no IPv4 or IPv6 address");
    return !out.empty();
}

bool Connection::connect_upstream(const ProxyRequest& req, const std::vector<sockaddr_storage>& addresses) {
    const auto deadline = Clock::now() + s_->limits.connect_timeout;
    std::string error = "no address answered";
    for (const sockaddr_storage& address : addresses) {
        const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            error = std::strerror(errno);
            continue;
        }
        s_->track(fd);
        const socklen_t len = address.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), len);
        if (rc != 0 && errno == EINPROGRESS) {
            const int ready = wait(fd, POLLOUT, ms_left(deadline));
            if (ready < 0) {
                s_->close_fd(fd);
                return false;
            }
            int so_error = ready == 0 ? ETIMEDOUT : 0;
            socklen_t so_len = sizeof so_error;
            if (ready > 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &so_len);
            rc = so_error == 0 ? 0 : -1;
            errno = so_error;
        }
        if (rc == 0) {
            ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            upstream_ = fd;
            return true;
        }
        error = std::strerror(errno);
        s_->close_fd(fd);
        if (Clock::now() >= deadline) break;
    }
    const bool timed_out = Clock::now() >= deadline;
    refuse(timed_out ? 504 : 502, req.host + ":" + std::to_string(req.port),
           "cannot connect to '" + req.host + "' port " + std::to_string(req.port) + ": " + error);
    return false;
}

// Copies what `from` has to `to`; false once `from` is at its end or either side fails. With `rewrite`,
// bytes wait in response_head_ until the response's head is whole, which goes out with close_response_head
// (and clears head_pending_).
bool Connection::pump(int from, int to, bool rewrite) {
    char chunk[64 * 1024];
    const ssize_t n = ::recv(from, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    std::string_view data(chunk, static_cast<size_t>(n));
    if (!rewrite) return send_all(to, data);
    response_head_.append(data);
    const size_t end = response_head_.find("\r\n\r\n");
    if (end == std::string::npos) {
        if (response_head_.size() <= s_->limits.max_head_bytes) return true;
        refuse(502, "",
               "the upstream response head exceeds " + std::to_string(s_->limits.max_head_bytes) + " bytes");
        return false;
    }
    const std::string out = close_response_head(std::string_view(response_head_).substr(0, end + 4)) +
                            response_head_.substr(end + 4);
    response_head_.clear();
    head_pending_ = false;
    return send_all(to, out);
}

// Bytes both ways until both sides have finished, one fails, the connection idles past idle_timeout or the
// proxy stops. An end of input from one side is passed on as a half close of the other.
void Connection::relay(std::string to_upstream, bool rewrite_response) {
    timeval send_timeout{static_cast<time_t>(s_->limits.idle_timeout.count() / 1000),
                         static_cast<suseconds_t>(s_->limits.idle_timeout.count() % 1000 * 1000)};
    for (int fd : {client_, upstream_})
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    if (!to_upstream.empty() && !send_all(upstream_, to_upstream)) return;
    head_pending_ = rewrite_response;
    bool open[2] = {true, true};  // client → upstream, upstream → client
    const int from[2] = {client_, upstream_}, to[2] = {upstream_, client_};
    while (open[0] || open[1]) {
        pollfd p[3] = {{from[0], static_cast<short>(open[0] ? POLLIN : 0), 0},
                       {from[1], static_cast<short>(open[1] ? POLLIN : 0), 0},
                       {s_->stop_fd, POLLIN, 0}};
        const int r = ::poll(p, 3, static_cast<int>(s_->limits.idle_timeout.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || p[2].revents) return;
        for (int i = 0; i < 2; ++i) {
            if (!p[i].revents) continue;
            if (!open[i]) return;  // a hang-up or error on a side whose input has already ended
            if (pump(from[i], to[i], i == 1 && head_pending_)) continue;
            if (i == 1 && head_pending_) return;  // no whole response head: the client sees the close
            open[i] = false;
            ::shutdown(to[i], SHUT_WR);
        }
    }
}

void serve(std::shared_ptr<FilteringProxy::Shared> shared, int client) {
    try {
        Connection(shared, client).run();
    } catch (const std::exception& e) {
        shared->log(std::string("connection failed: ") + e.what());
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    --shared->active;
    shared->idle_cv.notify_all();
}

void accept_loop(const std::shared_ptr<FilteringProxy::Shared>& s) {
    while (!s->stopping) {
        pollfd p[2] = {{s->listen_fd, POLLIN, 0}, {s->stop_fd, POLLIN, 0}};
        if (::poll(p, 2, -1) <= 0 || p[1].revents) continue;
        const int fd = ::accept4(s->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        int open = 0;
        {
            std::lock_guard<std::mutex> lock(s->mutex);
            open = s->active;
            if (open < s->limits.max_connections) {
                ++s->active;
                s->open_fds.insert(fd);
            }
        }
        if (open >= s->limits.max_connections) {
            s->log("503 " + std::to_string(open) + " connections are open (the limit)");
            send_status(fd, 503, "too many open connections");
            ::close(fd);
            continue;
        }
        try {
            std::thread(serve, s, fd).detach();
        } catch (const std::system_error& e) {
            s->log(std::string("cannot start a connection thread: ") + e.what());
            s->close_fd(fd);
            std::lock_guard<std::mutex> lock(s->mutex);
            --s->active;
        }
    }
}

}  // namespace

FilteringProxy::FilteringProxy(NavigationGuard guard, ProxyLimits limits)
    : shared_(std::make_shared<Shared>(std::move(guard), limits)) {
    Shared& s = *shared_;
    s.stop_fd = ::eventfd(0, EFD_CLOEXEC);
    s.listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    if (s.stop_fd < 0 || s.listen_fd < 0 ||
        ::bind(s.listen_fd, reinterpret_cast<sockaddr*>(&address), len) != 0 ||
        ::listen(s.listen_fd, 128) != 0 ||
        ::getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&address), &len) != 0) {
        throw Error(ErrorKind::kIo,
                    std::string("filtering proxy: cannot listen on 127.0.0.1: ") + std::strerror(errno));
    }
    port_ = ntohs(address.sin_port);
    accept_thread_ = std::thread(accept_loop, shared_);
}

FilteringProxy::~FilteringProxy() {
    stop();
}

std::string FilteringProxy::server() const {
    return "http://127.0.0.1:" + std::to_string(port_);
}

std::vector<std::string> FilteringProxy::log() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return {shared_->log_lines.begin(), shared_->log_lines.end()};
}

int FilteringProxy::open_connections() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->active;
}

void FilteringProxy::stop() {
    if (shared_->stopping.exchange(true)) return;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(shared_->stop_fd, &one, sizeof one);
    if (accept_thread_.joinable()) accept_thread_.join();
    std::unique_lock<std::mutex> lock(shared_->mutex);
    for (int fd : shared_->open_fds) ::shutdown(fd, SHUT_RDWR);
    shared_->idle_cv.wait_for(lock, std::chrono::seconds(1), [&] { return shared_->active == 0; });
}

}  // namespace surf::tools
