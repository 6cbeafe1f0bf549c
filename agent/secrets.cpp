#include "agent/secrets.h"

#include <algorithm>

#include "base/error.h"
#include "tools/browser/navigation_guard.h"

namespace surf::agent {

namespace {

bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(),
                       [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; });
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
}

}  // namespace

Secrets::Secrets(const std::map<std::string, Secret>& secrets) : secrets_(secrets) {
    for (const auto& [name, secret] : secrets) {
        if (!valid_name(name)) {
            throw Error(ErrorKind::kInvalidArgument,
                        "secrets: the name \"" + name + "\" is not 1-64 letters, digits, '_', '-' or '.'");
        }
        // Every occurrence of a value is redacted: a value of a few characters would blank out ordinary text.
        if (secret.value.size() < 4) {
            throw Error(ErrorKind::kInvalidArgument,
                        "secrets." + name + ": a value of at least 4 characters is needed");
        }
        try {
            tools::NavigationGuard check(secret.domains, {});
        } catch (const Error& e) {
            throw Error(ErrorKind::kInvalidArgument, "secrets." + name + ".domains: " + e.what());
        }
        by_length_.emplace_back(secret.value, placeholder(name));
    }
    std::stable_sort(by_length_.begin(), by_length_.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::string Secrets::redact(std::string text) const {
    for (const auto& [value, ph] : by_length_) replace_all(text, value, ph);
    return text;
}

nlohmann::ordered_json Secrets::redact_json(const nlohmann::ordered_json& value) const {
    if (by_length_.empty()) return value;
    if (value.is_string()) return redact(value.get<std::string>());
    if (value.is_array()) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const auto& v : value) out.push_back(redact_json(v));
        return out;
    }
    if (value.is_object()) {
        nlohmann::ordered_json out = nlohmann::ordered_json::object();
        for (auto it = value.begin(); it != value.end(); ++it)
            out[redact(it.key())] = redact_json(it.value());
        return out;
    }
    return value;
}

Action Secrets::reveal(const Action& action, const std::string& page_url) const {
    const auto* write = std::get_if<WriteAction>(&action);
    if (!write || write->content.find("<secret:") == std::string::npos) return action;
    WriteAction typed = *write;
    std::string out;
    const std::string& in = write->content;
    size_t at = 0;
    for (size_t open = in.find("<secret:"); open != std::string::npos; open = in.find("<secret:", at)) {
        const size_t close = in.find('>', open);
        if (close == std::string::npos) break;
        const std::string name = in.substr(open + 8, close - open - 8);
        auto it = secrets_.find(name);
        if (it == secrets_.end()) {
            throw Error(ErrorKind::kInvalidArgument,
                        placeholder(name) + " is not a secret of this run" +
                            (secrets_.empty() ? std::string() : " (it has " + prompt_note() + ")"));
        }
        const tools::NavigationGuard where(it->second.domains, {});
        const tools::GuardDecision d = where.check(page_url);
        if (!it->second.domains.empty() && !d.allowed) {
            std::string host;
            try {
                host = tools::parse_url_host(page_url).host;
            } catch (const Error&) {
                host = "(no host)";
            }
            throw Error(ErrorKind::kInvalidArgument, placeholder(name) + " may not be typed on " + host +
                                                         ": this secret is for its own sites only");
        }
        out += in.substr(at, open - at) + it->second.value;
        at = close + 1;
    }
    out += in.substr(at);
    typed.content = out;
    return typed;
}

void Secrets::check_task(const std::string& task) const {
    for (const auto& [name, secret] : secrets_) {
        if (task.find(secret.value) != std::string::npos) {
            throw Error(ErrorKind::kInvalidArgument, "task: it holds the value of secret '" + name +
                                                         "'; write " + placeholder(name) + " instead");
        }
    }
}

std::string Secrets::prompt_note() const {
    if (secrets_.empty()) return "";
    std::string list;
    for (const auto& [name, secret] : secrets_) list += (list.empty() ? "" : ", ") + placeholder(name);
    return "secrets to type as written: " + list;
}

}  // namespace surf::agent
