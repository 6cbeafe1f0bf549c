// Which top-level URLs a session may open. Pure logic (no browser): the session asks it before
// Page.navigate and for every main-frame Document request it intercepts (Fetch.requestPaused), which
// covers links, redirects, form posts and popups alike.
//
// Rules are host names. "example.com" matches example.com and any subdomain (www.example.com) but not
// badexample.com; "*.example.com" matches subdomains only; an IP literal ("127.0.0.1", "[::1]") matches
// that address exactly, in any spelling of it ("[::ffff:7f00:1]" is 127.0.0.1; no suffix matching on
// numbers); "localhost" matches localhost and *.localhost.
// The deny-list wins over the allow-list; with a non-empty allow-list every other host is refused.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace surf::tools {

struct GuardDecision {
    bool allowed = true;
    std::string rule;  // the rule that decided ("deny:example.com", "allow-list", "scheme:file"), "" if none
    std::string reason;  // one sentence naming the URL and the rule, for error messages and observations
};

struct ParsedUrl {
    std::string scheme;  // lower case, without ':'
    std::string host;    // lower case, no brackets, no trailing dot; "" for about:/data:/file:
    bool host_is_ip = false;
};

// Splits scheme and host out of an absolute URL. Throws Error(kInvalidArgument) naming the URL if it
// has no scheme.
ParsedUrl parse_url_host(const std::string& url);

// What the guard does with file: URLs and with schemes other than http(s), ws(s), about, data and blob
// (chrome:, view-source:, …).
enum class LocalSchemes {
    kWithoutRules,  // allowed only while there are no host rules (the default)
    kFileAlways,    // file: allowed whatever the rules (a local start page); the others only without rules
    kNever,         // both refused, rules or not: an agent that starts on the web never opens local files
};

class NavigationGuard {
public:
    NavigationGuard() = default;
    // Throws Error(kInvalidArgument) naming a malformed rule (empty, has a scheme, path, port or space).
    NavigationGuard(std::vector<std::string> allow, std::vector<std::string> deny,
                    LocalSchemes local = LocalSchemes::kWithoutRules);

    bool has_rules() const { return !allow_.empty() || !deny_.empty(); }
    // With a file root, file: URLs are allowed only at or under that folder (the start page's folder of a
    // run that starts on a file: page), whatever LocalSchemes says. The check is on the decoded, lexically
    // normalised path (".." and "%2e%2e" cannot climb out); a symbolic link inside the folder is followed.
    void set_file_root(const std::string& folder);
    const std::string& file_root() const { return file_root_; }
    // Whether a session must intercept requests to enforce this guard: host rules or a file root.
    bool intercepts() const { return has_rules() || !file_root_.empty(); }
    // about:, data: and blob: are always allowed (they reach no server); file: and other schemes as
    // LocalSchemes says; http(s)/ws(s) by host.
    GuardDecision check(const std::string& url) const;

    // Chromium proxy bypass rules for the allow-list ("" without one): the hosts that connect directly while
    // every other connection of the session's browser context goes to a proxy that is not there
    // (kUnreachableProxy). That fails the connections the Fetch interception never sees: WebSocket
    // handshakes, and requests of workers. Chromium's rules have no exceptions, so a denied host under an
    // allowed one still connects this way.
    std::string proxy_bypass_list() const;

    // Chromium host-resolver rules ("MAP host ~NOTFOUND, ...") that make the deny-list's host names
    // unresolvable ("" without host-name deny rules): a browser launched with them fails every connection to
    // a denied host, the WebSocket handshakes and workers' requests Fetch never sees included, under a
    // deny-list alone or under an allowed parent domain. IP-address rules have no name to unmap and are left
    // to Fetch.
    std::string resolver_deny_rules() const;
    // This guard's host-name deny rules that a browser launched with `launched` as its deny hosts does not
    // make unresolvable (normalised rules; IP-address rules are never resolver rules). A run on a shared
    // browser needs none missing, or its WebSocket and workers' connections to those hosts would go out.
    std::vector<std::string> resolver_rules_missing(const std::vector<std::string>& launched) const;
    // The deny rules that name an IP address ("10.0.0.1", "::1"), normalised. A session whose guard has any
    // sends its connections through a FilteringProxy (filtering_proxy.h), which refuses those addresses for
    // the WebSocket handshakes and workers' requests Fetch never sees, and for host names resolving to them.
    std::vector<std::string> address_deny_rules() const;

    const std::vector<std::string>& allow_rules() const { return allow_; }
    const std::vector<std::string>& deny_rules() const { return deny_; }

private:
    std::vector<std::string> allow_;
    std::vector<std::string> deny_;
    LocalSchemes local_ = LocalSchemes::kWithoutRules;
    std::string file_root_;
};

// The proxy that proxy_bypass_list() sends refused connections to: the discard port on loopback, where no
// proxy answers (and where, if anything listens, nothing is forwarded).
inline constexpr const char* kUnreachableProxy = "http://127.0.0.1:9";

// The local path of a file: URL ("file:///tmp/a%20b.html?x" → "/tmp/a b.html"), percent-decoded, without
// query or fragment. Throws Error(kInvalidArgument) for another scheme or a host other than localhost.
std::string file_url_path(const std::string& url);

// An IP address as 16 bytes: IPv6, with an IPv4 address in its IPv4-mapped form (::ffff:a.b.c.d), so that
// both spellings of one address compare equal.
using IpBytes = std::array<uint8_t, 16>;
// The address `text` spells (dotted-quad IPv4, or IPv6 with or without brackets); nullopt for anything else.
std::optional<IpBytes> parse_ip_address(const std::string& text);
// The usual text of an address: dotted quad for IPv4 (mapped or not), RFC 5952 IPv6 otherwise.
std::string ip_address_text(const IpBytes& address);

// True if `host` is matched by `rule` under the rules above (both already normalised).
bool host_matches_rule(const std::string& host, bool host_is_ip, const std::string& rule);

}  // namespace surf::tools
