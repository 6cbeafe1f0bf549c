// Secrets a run may type without the model ever seeing them (RunOptions::secrets). The task and the model
// use placeholders, `<secret:NAME>`; only the browser tool types the value, and only into a page whose host
// the secret allows. Every text a run writes (trace, report, step events, results, prompts) passes through
// redact(), which puts the placeholder back wherever a value shows up (a typed field echoed in an outcome,
// a URL, a page title, a model that read the value off the screen).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/actions.h"

namespace surf::agent {

struct Secret {
    std::string value;
    std::vector<std::string> domains;  // host rules as in allow_domains; empty = any host
};

class Secrets {
public:
    Secrets() = default;
    // Checks names ([A-Za-z0-9_.-], at most 64), values (at least 4 bytes) and domain rules; throws
    // Error(kInvalidArgument) naming the secret, never its value.
    explicit Secrets(const std::map<std::string, Secret>& secrets);

    bool empty() const { return secrets_.empty(); }
    static std::string placeholder(const std::string& name) { return "<secret:" + name + ">"; }

    // `text` with every secret value replaced by its placeholder (longer values first).
    std::string redact(std::string text) const;
    // The same on every string of a JSON value, keys included.
    nlohmann::ordered_json redact_json(const nlohmann::ordered_json& value) const;

    // The action the browser executes: in a write's content every placeholder replaced by its value, when
    // `page_url`'s host may receive it. Throws Error(kInvalidArgument) naming the placeholder (unknown, or
    // not allowed on that host); other actions come back unchanged.
    Action reveal(const Action& action, const std::string& page_url) const;

    // Refuses a task that holds a value itself (it would reach the model); names the secret.
    void check_task(const std::string& task) const;
    // A sentence for the task the model reads, naming the placeholders it may write; "" without secrets.
    std::string prompt_note() const;

private:
    std::map<std::string, Secret> secrets_;
    std::vector<std::pair<std::string, std::string>> by_length_;  // (value, placeholder), longest value first
};

}  // namespace surf::agent
