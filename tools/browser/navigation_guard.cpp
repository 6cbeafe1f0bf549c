#include "tools/browser/navigation_guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "base/utf8.h"

namespace surf::tools {
namespace {

bool looks_like_ipv4(const std::string& host) {
    int dots = 0;
    for (char c : host) {
        if (c == '.')
            ++dots;
        else if (!std::isdigit(static_cast<unsigned char>(c)))
            return false;
    }
    return dots == 3 && !host.empty();
}

bool looks_like_ip(const std::string& host) {
    return host.find(':') != std::string::npos || looks_like_ipv4(host);
}

// A normalised rule taken apart: "*.x" is x's subdomains only, "x" is x and its subdomains.
struct RuleParts {
    std::string base;
    bool subdomains_only = false;
    bool ip = false;  // an address: no subdomains, no name for the resolver
};
RuleParts rule_parts(const std::string& rule) {
    RuleParts r;
    r.subdomains_only = rule.rfind("*.", 0) == 0;
    r.base = r.subdomains_only ? rule.substr(2) : rule;
    r.ip = looks_like_ip(r.base);
    return r;
}

std::string normalise_host(std::string host) {
    host = surf::ascii_lower(std::move(host));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    while (!host.empty() && host.back() == '.') host.pop_back();
    return host;
}

std::string normalise_rule(const std::string& raw) {
    std::string rule = surf::ascii_lower(raw);
    if (rule.empty()) throw Error(ErrorKind::kInvalidArgument, "navigation guard: empty domain rule");
    if (rule.find("://") != std::string::npos || rule.find('/') != std::string::npos ||
        rule.find(' ') != std::string::npos ||
        (rule.find(':') != std::string::npos && rule.front() != '[' &&
         std::count(rule.begin(), rule.end(), ':') < 2)) {
        throw Error(ErrorKind::kInvalidArgument, "navigation guard: rule '" + raw +
                                                     "' must be a bare host name (no scheme, port or path)");
    }
    bool wildcard = rule.rfind("*.", 0) == 0;
    if (wildcard)
        rule = rule.substr(2);
    else if (rule.front() == '.')
        rule = rule.substr(1);
    rule = normalise_host(rule);
    if (rule.empty() || rule.find('*') != std::string::npos) {
        throw Error(ErrorKind::kInvalidArgument, "navigation guard: rule '" + raw + "' is not a host name");
    }
    return wildcard ? "*." + rule : rule;
}

}  // namespace

ParsedUrl parse_url_host(const std::string& url) {
    ParsedUrl parsed;
    size_t colon = url.find(':');
    if (colon == std::string::npos || colon == 0) {
        throw Error(ErrorKind::kInvalidArgument,
                    "URL '" + url + "' has no scheme (expected e.g. https://...)");
    }
    parsed.scheme = surf::ascii_lower(url.substr(0, colon));
    for (char c : parsed.scheme) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
            throw Error(ErrorKind::kInvalidArgument, "URL '" + url + "' has a malformed scheme");
        }
    }
    if (url.compare(colon, 3, "://") != 0) return parsed;  // about:blank, data:..., javascript:...
    size_t start = colon + 3;
    size_t end = url.find_first_of("/?#", start);
    std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t at = authority.rfind('@');
    if (at != std::string::npos) authority = authority.substr(at + 1);
    std::string host;
    if (!authority.empty() && authority.front() == '[') {
        size_t close = authority.find(']');
        host = authority.substr(0, close == std::string::npos ? std::string::npos : close + 1);
    } else {
        host = authority.substr(0, authority.find(':'));
    }
    parsed.host = normalise_host(host);
    parsed.host_is_ip = looks_like_ip(parsed.host);
    return parsed;
}

std::optional<IpBytes> parse_ip_address(const std::string& text) {
    std::string bare = text;
    if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
    IpBytes bytes{};
    in_addr v4{};
    if (::inet_pton(AF_INET, bare.c_str(), &v4) == 1) {
        bytes[10] = bytes[11] = 0xff;
        std::memcpy(bytes.data() + 12, &v4, 4);
        return bytes;
    }
    if (::inet_pton(AF_INET6, bare.c_str(), bytes.data()) == 1) return bytes;
    return std::nullopt;
}

std::string ip_address_text(const IpBytes& address) {
    static constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char text[INET6_ADDRSTRLEN] = {};
    if (std::memcmp(address.data(), kMappedPrefix, 12) == 0)
        ::inet_ntop(AF_INET, address.data() + 12, text, sizeof text);
    else
        ::inet_ntop(AF_INET6, address.data(), text, sizeof text);
    return text;
}

bool host_matches_rule(const std::string& host, bool host_is_ip, const std::string& rule) {
    if (host.empty()) return false;
    bool subdomains_only = rule.rfind("*.", 0) == 0;
    std::string base = subdomains_only ? rule.substr(2) : rule;
    if (host_is_ip || looks_like_ip(base)) {
        if (subdomains_only) return false;
        const std::optional<IpBytes> a = parse_ip_address(host), b = parse_ip_address(base);
        return a && b ? *a == *b : host == base;
    }
    if (!subdomains_only && host == base) return true;
    // Label-boundary suffix: "example.com" matches "a.example.com", never "badexample.com".
    return host.size() > base.size() + 1 && host.compare(host.size() - base.size(), base.size(), base) == 0 &&
           host[host.size() - base.size() - 1] == '.';
}

NavigationGuard::NavigationGuard(std::vector<std::string> allow, std::vector<std::string> deny,
                                 LocalSchemes local)
    : local_(local) {
    for (const auto& r : allow) allow_.push_back(normalise_rule(r));
    for (const auto& r : deny) deny_.push_back(normalise_rule(r));
}

std::string NavigationGuard::proxy_bypass_list() const {
    if (allow_.empty()) return "";
    // Chromium lets a later rule override an earlier one: "<-loopback>" (loopback hosts go through the proxy,
    // where Chromium would otherwise send them direct whatever the rules) comes first, so that an allowed
    // loopback host listed after it still connects directly.
    std::string out = "<-loopback>";
    auto add = [&](const std::string& rule) { out += ";" + rule; };
    for (const std::string& rule : allow_) {
        const RuleParts r = rule_parts(rule);
        if (r.ip) {
            add(r.base.find(':') != std::string::npos ? "[" + r.base + "]" : r.base);
            continue;
        }
        if (!r.subdomains_only) add(r.base);
        add("*." + r.base);
    }
    return out;
}

std::string NavigationGuard::resolver_deny_rules() const {
    std::string out;
    auto add = [&](const std::string& pattern) {
        out += (out.empty() ? "" : ", ") + ("MAP " + pattern + " ~NOTFOUND");
    };
    for (const std::string& rule : deny_) {
        const RuleParts r = rule_parts(rule);
        if (r.ip) continue;
        if (!r.subdomains_only) add(r.base);
        add("*." + r.base);
    }
    return out;
}

std::vector<std::string> NavigationGuard::resolver_rules_missing(
    const std::vector<std::string>& launched) const {
    const NavigationGuard have({}, launched);
    std::vector<std::string> missing;
    for (const std::string& rule : deny_) {
        const RuleParts r = rule_parts(rule);
        if (r.ip) continue;
        // A launched rule that matches the host (or, for "*.x", a subdomain of it) also covers every
        // subdomain below it.
        const std::string probe = r.subdomains_only ? "a." + r.base : r.base;
        const bool covered = std::any_of(have.deny_.begin(), have.deny_.end(), [&](const std::string& l) {
            return !rule_parts(l).ip && host_matches_rule(probe, false, l);
        });
        if (!covered) missing.push_back(rule);
    }
    return missing;
}

std::vector<std::string> NavigationGuard::address_deny_rules() const {
    std::vector<std::string> out;
    for (const std::string& rule : deny_)
        if (parse_ip_address(rule)) out.push_back(rule);
    return out;
}

GuardDecision NavigationGuard::check(const std::string& url) const {
    GuardDecision d;
    ParsedUrl parsed = parse_url_host(url);
    const std::string& s = parsed.scheme;
    if (s == "about" || s == "data" || s == "blob") return d;
    const bool local_without_rules = local_ != LocalSchemes::kNever && !has_rules();
    if (s == "file") {
        if (!file_root_.empty()) {
            std::string path;
            try {
                path = std::filesystem::path(file_url_path(url)).lexically_normal().string();
            } catch (const Error&) {
            }
            const bool under =
                file_root_ == "/" || path == file_root_ || path.rfind(file_root_ + "/", 0) == 0;
            if (!path.empty() && path.front() == '/' && under) return d;
            d.allowed = false;
            d.rule = "file-root";
            d.reason = "navigation to " + url + " refused: file: URLs are allowed only under " + file_root_ +
                       " (the start page's folder)";
            return d;
        }
        if (local_ == LocalSchemes::kFileAlways || local_without_rules) return d;
        d.allowed = false;
        d.rule = "scheme:file";
        d.reason = "navigation to " + url + " refused: file: URLs are not allowed by the navigation guard";
        return d;
    }
    if (s != "http" && s != "https" && s != "ws" && s != "wss") {
        if (local_without_rules) return d;
        d.allowed = false;
        d.rule = "scheme:" + s;
        d.reason =
            "navigation to " + url + " refused: scheme '" + s + "' is not allowed by the navigation guard";
        return d;
    }
    for (const auto& rule : deny_) {
        if (host_matches_rule(parsed.host, parsed.host_is_ip, rule)) {
            d.allowed = false;
            d.rule = "deny:" + rule;
            d.reason = "navigation to " + url + " refused: host '" + parsed.host + "' matches deny rule '" +
                       rule + "'";
            return d;
        }
    }
    if (allow_.empty()) return d;
    for (const auto& rule : allow_) {
        if (host_matches_rule(parsed.host, parsed.host_is_ip, rule)) {
            d.rule = "allow:" + rule;
            return d;
        }
    }
    d.allowed = false;
    d.rule = "allow-list";
    std::string list;
    for (const auto& rule : allow_) list += (list.empty() ? "" : ", ") + rule;
    d.reason = "navigation to " + url + " refused: host '" + parsed.host + "' is not in the allow-list (" +
               list + ")";
    return d;
}

void NavigationGuard::set_file_root(const std::string& folder) {
    std::string root = std::filesystem::path(folder).lexically_normal().string();
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (root.empty() || root.front() != '/') {
        throw Error(ErrorKind::kInvalidArgument, "file root '" + folder + "': not an absolute folder");
    }
    file_root_ = root;
}

std::string file_url_path(const std::string& url) {
    const std::string lower = surf::ascii_lower(url.substr(0, std::min<size_t>(url.size(), 7)));
    if (lower != "file://") throw Error(ErrorKind::kInvalidArgument, url + ": not a file:// URL");
    std::string rest = url.substr(7);
    rest = rest.substr(0, rest.find_first_of("?#"));
    const size_t slash = rest.find('/');
    const std::string host = surf::ascii_lower(rest.substr(0, slash));
    if (slash == std::string::npos || (!host.empty() && host != "localhost")) {
        throw Error(ErrorKind::kInvalidArgument, url + ": a file: URL names a local path (file:///...)");
    }
    std::string path;
    for (size_t i = slash; i < rest.size(); ++i) {
        if (rest[i] == '%' && i + 2 < rest.size() && std::isxdigit(static_cast<unsigned char>(rest[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(rest[i + 2]))) {
            path.push_back(static_cast<char>(std::stoi(rest.substr(i + 1, 2), nullptr, 16)));
            i += 2;
        } else {
            path.push_back(rest[i]);
        }
    }
    return path;
}

}  // namespace surf::tools
