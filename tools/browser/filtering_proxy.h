// A filtering forward proxy for one browser session (docs/SECURITY.md §1). DevTools Fetch never sees
// WebSocket handshakes or some requests of workers, and a deny rule for an IP address has no host name for
// Chromium's resolver rules to unmap; so a session whose guard has such rules sends all its connections here
// (Target.createBrowserContext proxyServer, bypass list "<-loopback>" so that loopback and link-local
// addresses come too). The proxy resolves each target itself and refuses it (403, then close) when the guard
// refuses its host or any address it resolves to matches an IP deny rule; it connects only to the addresses
// it checked, and tunnels bytes both ways.
//
// It listens on 127.0.0.1 on an ephemeral port and serves `CONNECT host:port` (https, wss and ws:// alike:
// Chromium tunnels every WebSocket through CONNECT) and absolute-form requests (`GET http://host/...`,
// forwarded in origin form with "Connection: close"). One thread accepts; each open connection has one
// thread that blocks in poll() on its two sockets, bounded by ProxyLimits::max_connections.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "tools/browser/navigation_guard.h"

namespace surf::tools {

// One request head as a browser sends it to a forward proxy.
struct ProxyRequest {
    bool connect = false;  // CONNECT host:port: a tunnel from the start
    std::string method;
    std::string host;  // lower case, no brackets, no trailing dot
    int port = 0;
    bool upgrade = false;  // not CONNECT: an Upgrade request (a WebSocket handshake), tunnelled once sent
    // Not CONNECT: the head to send upstream, in origin form ("GET /path HTTP/1.1"), without the Proxy-*
    // headers and, unless an upgrade, with "Connection: close" instead of the client's Connection headers.
    std::string forward_head;
};

// Parses a request head (request line and headers through the blank line). Throws Error(kInvalidArgument)
// naming what is wrong: a malformed request line or header, a version other than HTTP/1.x, a CONNECT target
// that is not host:port, another method's target that is not an absolute http:// or ws:// URL.
ProxyRequest parse_proxy_request(std::string_view head);

// The head of an upstream response with its connection headers (Connection, Keep-Alive, Proxy-Connection)
// replaced by "Connection: close" and "Proxy-Connection: close": the browser never reuses a forwarded
// request's connection for a request to another host.
std::string close_response_head(std::string_view head);

// The proxy's decisions, without sockets: the guard's host rules on the target's name, then its IP deny
// rules on every address the name resolves to.
class ProxyPolicy {
public:
    explicit ProxyPolicy(NavigationGuard guard);
    GuardDecision check_host(const std::string& host) const;
    GuardDecision check_addresses(const std::string& host, const std::vector<IpBytes>& addresses) const;

private:
    NavigationGuard guard_;
    std::vector<std::pair<IpBytes, std::string>> denied_;  // address, the deny rule naming it
};

struct ProxyLimits {
    size_t max_head_bytes = 32 * 1024;                 // request line + headers (431 beyond)
    std::chrono::milliseconds head_timeout{10000};     // to send the whole head (408 after)
    std::chrono::milliseconds connect_timeout{10000};  // to connect upstream, all addresses together (504)
    // A connection with no byte either way for this long is closed (an idle WebSocket too).
    std::chrono::milliseconds idle_timeout{600000};
    int max_connections = 128;  // open client connections (503 beyond)
    size_t max_log_entries = 256;
};

class FilteringProxy {
public:
    // Listens on 127.0.0.1 at an ephemeral port and starts accepting. Throws Error(kIo) if it cannot listen.
    explicit FilteringProxy(NavigationGuard guard, ProxyLimits limits = {});
    ~FilteringProxy();
    FilteringProxy(const FilteringProxy&) = delete;
    FilteringProxy& operator=(const FilteringProxy&) = delete;

    int port() const { return port_; }
    std::string server() const;  // "http://127.0.0.1:PORT", for Target.createBrowserContext's proxyServer
    // The latest refusals and errors, oldest first, each one line naming the target and the reason.
    std::vector<std::string> log() const;
    int open_connections() const;
    // Stops accepting and ends every open connection; waits (at most a second) for their threads, which
    // hold their own reference to the shared state, so a thread still inside getaddrinfo ends on its own.
    // Idempotent.
    void stop();

    struct Shared;  // defined in filtering_proxy.cpp, for the threads there

private:
    std::shared_ptr<Shared> shared_;
    int port_ = 0;
    std::thread accept_thread_;
};

}  // namespace surf::tools
