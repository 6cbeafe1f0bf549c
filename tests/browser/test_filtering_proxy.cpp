// The filtering proxy without a browser: request parsing, the deny decisions on names and resolved
// addresses, and the proxy itself on loopback sockets against the tests' HTTP server.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/error.h"
#include "tests/browser/test_http_server.h"
#include "tools/browser/filtering_proxy.h"

using namespace surf;
using namespace surf::tools;
using namespace std::chrono_literals;

namespace {

IpBytes ip(const std::string& text) {
    const std::optional<IpBytes> address = parse_ip_address(text);
    REQUIRE(address.has_value());
    return *address;
}

// A client socket to 127.0.0.1:port.
class Client {
public:
    explicit Client(int port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(static_cast<uint16_t>(port));
        REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    }
    ~Client() { ::close(fd_); }
    void send(const std::string& data) {
        REQUIRE(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size()));
    }
    // Reads until `until` has arrived (or, when empty, the end of the stream), at most `timeout` in all.
    std::string read(const std::string& until = "", std::chrono::milliseconds timeout = 5s) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        char chunk[4096];
        while (until.empty() || received_.find(until) == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            pollfd p{fd_, POLLIN, 0};
            if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
            const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
            if (n <= 0) {
                closed_ = true;
                break;
            }
            received_.append(chunk, static_cast<size_t>(n));
        }
        return received_;
    }
    bool closed() const { return closed_; }

private:
    int fd_ = -1;
    std::string received_;
    bool closed_ = false;
};

test::TestHttpServer& server() {
    static test::TestHttpServer s(std::string(SURF_SOURCE_DIR) + "/tests/browser/pages",
                                  [](const test::HttpRequest& req, test::HttpResponse& res) {
                                      if (req.path != "/echo") return false;
                                      const auto it = req.headers.find("connection");
                                      res.content_type = "text/plain";
                                      res.body = "echo connection " +
                                                 (it == req.headers.end() ? std::string("none") : it->second);
                                      return true;
                                  });
    return s;
}

}  // namespace

TEST_CASE("proxy requests: CONNECT targets and absolute-form requests rewritten to origin form") {
    ProxyRequest c =
        parse_proxy_request("CONNECT Example.COM.:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    CHECK(c.connect);
    CHECK(c.host == "example.com");
    CHECK(c.port == 443);
    CHECK(c.forward_head.empty());
    c = parse_proxy_request("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n");
    CHECK(c.host == "::1");
    CHECK(c.port == 8080);

    ProxyRequest g = parse_proxy_request(
        "GET http://127.0.0.2:8000/a/b?x=1 HTTP/1.1\r\nHost: 127.0.0.2:8000\r\nProxy-Connection: "
        "keep-alive\r\n"
        "Connection: keep-alive\r\nKeep-Alive: 300\r\nProxy-Authorization: Basic x\r\nAccept: */*\r\n\r\n");
    CHECK_FALSE(g.connect);
    CHECK(g.host == "127.0.0.2");
    CHECK(g.port == 8000);
    CHECK_FALSE(g.upgrade);
    CHECK(g.forward_head ==
          "GET /a/b?x=1 HTTP/1.1\r\nHost: 127.0.0.2:8000\r\nAccept: */*\r\nConnection: close\r\n\r\n");
    // No path, no port, no Host header: "/" on port 80 with a Host added.
    g = parse_proxy_request("GET http://Site.test HTTP/1.1\r\n\r\n");
    CHECK(g.port == 80);
    CHECK(g.forward_head == "GET / HTTP/1.1\r\nHost: site.test:80\r\nConnection: close\r\n\r\n");
    g = parse_proxy_request("POST http://[::1]:81?q HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    CHECK(g.forward_head ==
          "POST /?q HTTP/1.0\r\nHost: [::1]:81\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");

    // A WebSocket handshake in absolute form keeps its Connection: Upgrade and becomes a tunnel.
    ProxyRequest w = parse_proxy_request(
        "GET ws://h.test:9/chat HTTP/1.1\r\nHost: h.test:9\r\nConnection: Upgrade\r\nUpgrade: "
        "websocket\r\n\r\n");
    CHECK(w.upgrade);
    CHECK(w.forward_head ==
          "GET /chat HTTP/1.1\r\nHost: h.test:9\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
}

TEST_CASE("proxy requests: malformed heads are refused with a reason") {
    const auto reason = [](const std::string& head) {
        try {
            parse_proxy_request(head);
        } catch (const Error& e) {
            CHECK(e.kind() == ErrorKind::kInvalidArgument);
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(reason("CONNECT example.com HTTP/1.1\r\n\r\n").find("has no port") != std::string::npos);
    CHECK(reason("CONNECT example.com:0 HTTP/1.1\r\n\r\n").find("port out of range") != std::string::npos);
    CHECK(reason("CONNECT example.com:99999999 HTTP/1.1\r\n\r\n").find("bad port") != std::string::npos);
    CHECK(reason("CONNECT user@example.com:443 HTTP/1.1\r\n\r\n").find("characters") != std::string::npos);
    CHECK(reason("CONNECT [nope]:443 HTTP/1.1\r\n\r\n").find("not an IPv6 address") != std::string::npos);
    CHECK(reason("GET / HTTP/1.1\r\n\r\n").find("not an absolute http:// or ws:// URL") != std::string::npos);
    CHECK(reason("GET https://example.com/ HTTP/1.1\r\n\r\n").find("absolute http://") != std::string::npos);
    CHECK(reason("GET http://example.com/ HTTP/2.0\r\n\r\n").find("not HTTP/1.x") != std::string::npos);
    CHECK(reason("GET http://example.com/\r\n\r\n").find("METHOD TARGET VERSION") != std::string::npos);
    CHECK(reason("GET http://example.com/ HTTP/1.1\r\nno colon\r\n\r\n").find("malformed header") !=
          std::string::npos);
    CHECK(reason("G(T http://example.com/ HTTP/1.1\r\n\r\n").find("not a token") != std::string::npos);
    CHECK(reason("GET http://:80/ HTTP/1.1\r\n\r\n").find("no host") != std::string::npos);
    CHECK(reason("no line end").find("CRLF") != std::string::npos);
    CHECK(reason("GET http://a.test/\tx HTTP/1.1\r\n\r\n").find("malformed target") != std::string::npos);
}

TEST_CASE("proxy responses: the connection headers become Connection: close") {
    CHECK(close_response_head("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
                              "Content-Length: 2\r\nproxy-connection: keep-alive\r\n\r\n") ==
          "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\nProxy-Connection: close\r\n\r\n");
}

TEST_CASE("proxy policy: the guard's host rules, then IP deny rules on every resolved address") {
    const ProxyPolicy policy(NavigationGuard({}, {"127.0.0.2", "[::1]", "ads.test", "10.1.2.3"}));
    CHECK(policy.check_host("example.com").allowed);
    CHECK_FALSE(policy.check_host("127.0.0.2").allowed);
    CHECK_FALSE(policy.check_host("::1").allowed);
    CHECK_FALSE(policy.check_host("::ffff:7f00:2").allowed);  // 127.0.0.2 spelled as IPv6
    const GuardDecision ads = policy.check_host("x.ads.test");
    CHECK_FALSE(ads.allowed);
    CHECK(ads.rule == "deny:ads.test");
    CHECK(ads.reason == "connection to 'x.ads.test' refused by deny rule 'ads.test'");

    CHECK(policy.check_addresses("example.com", {ip("93.184.216.34"), ip("2606:2800::1")}).allowed);
    // A name that resolves to a denied address is refused, whichever of its addresses it is.
    const GuardDecision named = policy.check_addresses("intranet.example", {ip("10.0.0.1"), ip("10.1.2.3")});
    CHECK_FALSE(named.allowed);
    CHECK(named.rule == "deny:10.1.2.3");
    CHECK(named.reason ==
          "connection to 'intranet.example' refused: it resolves to 10.1.2.3, which matches deny rule "
          "'10.1.2.3'");
    CHECK_FALSE(policy.check_addresses("localhost", {ip("127.0.0.1"), ip("::1")}).allowed);
    CHECK_FALSE(policy.check_addresses("v6.example", {ip("::ffff:10.1.2.3")}).allowed);

    // With an allow-list the host must be in it as well.
    const ProxyPolicy allow(NavigationGuard({"site.test"}, {"127.0.0.2"}));
    CHECK(allow.check_host("www.site.test").allowed);
    CHECK(allow.check_host("other.test").rule == "allow-list");
}

TEST_CASE("filtering proxy: forwards allowed requests and tunnels, refuses denied names and addresses") {
    const std::string port = std::to_string(server().port());
    FilteringProxy proxy(NavigationGuard({}, {"127.0.0.2", "denied.test"}));
    CHECK(proxy.server() == "http://127.0.0.1:" + std::to_string(proxy.port()));

    Client get(proxy.port());
    get.send("GET http://127.0.0.1:" + port + "/echo HTTP/1.1\r\nHost: 127.0.0.1:" + port +
             "\r\nProxy-Connection: keep-alive\r\n\r\n");
    std::string answer = get.read();
    CHECK(answer.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
    CHECK(answer.find("Connection: close\r\nProxy-Connection: close\r\n") != std::string::npos);
    CHECK(answer.find("echo connection close") != std::string::npos);
    CHECK(get.closed());

    Client tunnel(proxy.port());
    tunnel.send("CONNECT localhost:" + port + " HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n");
    CHECK(tunnel.read("\r\n\r\n") == "HTTP/1.1 200 Connection Established\r\n\r\n");
    tunnel.send("GET /blank.html HTTP/1.0\r\n\r\n");
    answer = tunnel.read();
    CHECK(answer.find("HTTP/1.0 200 OK") != std::string::npos);
    CHECK(answer.find("</html>") != std::string::npos);

    const int before = server().connections();
    for (const std::string target :
         {"127.0.0.2:" + port, "[::ffff:127.0.0.2]:" + port, std::string("x.denied.test:80")}) {
        CAPTURE(target);
        Client refused(proxy.port());
        refused.send("CONNECT " + target + " HTTP/1.1\r\n\r\n");
        answer = refused.read();
        CHECK(answer.rfind("HTTP/1.1 403 Forbidden\r\n", 0) == 0);
        CHECK(answer.find("deny rule") != std::string::npos);
        CHECK(refused.closed());
    }
    CHECK(server().connections() == before);
    const std::vector<std::string> log = proxy.log();
    REQUIRE(log.size() == 3);
    CHECK(log[0] ==
          "403 CONNECT 127.0.0.2:" + port + ": connection to '127.0.0.2' refused by deny rule '127.0.0.2'");
    CHECK(log[2] ==
          "403 CONNECT x.denied.test:80: connection to 'x.denied.test' refused by deny rule 'denied.test'");
}

TEST_CASE("filtering proxy: a host name that resolves to a denied address is refused") {
    const std::string port = std::to_string(server().port());
    FilteringProxy proxy(NavigationGuard({}, {"127.0.0.1", "::1"}));
    const int before = server().connections();
    Client client(proxy.port());
    client.send("GET http://localhost:" + port + "/blank.html HTTP/1.1\r\nHost: localhost\r\n\r\n");
    const std::string answer = client.read();
    CHECK(answer.rfind("HTTP/1.1 403 Forbidden\r\n", 0) == 0);
    CHECK(answer.find("connection to 'localhost' refused: it resolves to ") != std::string::npos);
    CHECK(server().connections() == before);
}

TEST_CASE("filtering proxy: bounded heads, bad requests, unreachable targets, the connection cap, stop") {
    ProxyLimits limits;
    limits.max_head_bytes = 1024;
    limits.head_timeout = 300ms;
    limits.max_connections = 2;
    FilteringProxy proxy(NavigationGuard({}, {"10.9.9.9"}), limits);

    // Each answer is read to the proxy's close; the client then closes, which ends the proxy's thread.
    const auto answer = [&](const std::string& head) {
        std::string text;
        {
            Client client(proxy.port());
            client.send(head);
            text = client.read();
            CHECK(client.closed());
        }
        for (int i = 0; i < 100 && proxy.open_connections() > 0; ++i) std::this_thread::sleep_for(10ms);
        return text;
    };
    CHECK(answer("GET http://x.test/ HTTP/1.1\r\nX-Long: " + std::string(2000, 'a') + "\r\n\r\n")
              .rfind("HTTP/1.1 431 ", 0) == 0);
    CHECK(answer("HELLO\r\n\r\n").rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
    CHECK(answer("GET http://x.test/ HTTP/1.1\r\n").rfind("HTTP/1.1 408 ", 0) == 0);
    int closed = ::socket(AF_INET, SOCK_STREAM, 0);  // a port nothing listens on: bound, then released
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    ::bind(closed, reinterpret_cast<sockaddr*>(&address), len);
    ::getsockname(closed, reinterpret_cast<sockaddr*>(&address), &len);
    ::close(closed);
    CHECK(answer("CONNECT 127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + " HTTP/1.1\r\n\r\n")
              .rfind("HTTP/1.1 502 Bad Gateway\r\n", 0) == 0);

    // Two open tunnels fill the cap: a third connection is turned away.
    const std::string port = std::to_string(server().port());
    Client first(proxy.port()), second(proxy.port());
    for (Client* c : {&first, &second}) {
        c->send("CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\n\r\n");
        CHECK(c->read("\r\n\r\n").find(" 200 ") != std::string::npos);
    }
    Client third(proxy.port());
    CHECK(third.read().rfind("HTTP/1.1 503 Service Unavailable\r\n", 0) == 0);
    CHECK(proxy.open_connections() == 2);

    // stop() ends the open tunnels at once.
    const auto started = std::chrono::steady_clock::now();
    proxy.stop();
    CHECK(std::chrono::steady_clock::now() - started < 1s);
    first.read("", 2s);
    CHECK(first.closed());
    CHECK(proxy.open_connections() == 0);
    const std::vector<std::string> log = proxy.log();
    REQUIRE(log.size() == 5);
    CHECK(log[0].rfind("431 ", 0) == 0);
    CHECK(log[1].find("400 proxy request: request line 'HELLO'") == 0);
    CHECK(log[2] == "408 the request head did not arrive in time");
    CHECK(log[3].find("cannot connect to '127.0.0.1' port") != std::string::npos);
    CHECK(log[4] == "503 2 connections are open (the limit)");
}
