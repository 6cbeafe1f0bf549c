#include "agent/remote/remote_endpoints.h"

#include <algorithm>

#include "base/error.h"

namespace surf::agent {

RemoteEndpoints::RemoteEndpoints(const RemoteClientOptions& options,
                                 const std::vector<std::string>& base_urls, double down_seconds)
    : down_seconds_(down_seconds) {
    if (base_urls.empty()) throw Error(ErrorKind::kInvalidArgument, "remote model: no server URL given");
    if (!(down_seconds >= 0))
        throw Error(ErrorKind::kInvalidArgument, "remote model: down_seconds must be ≥ 0");
    for (const std::string& url : base_urls) {
        RemoteClientOptions o = options;
        o.base_url = url;
        auto client = std::make_unique<RemoteClient>(o);
        for (const auto& c : clients_) {
            if (c->url("") == client->url(""))
                throw Error(ErrorKind::kInvalidArgument,
                            "remote model URL \"" + url + "\" is listed twice (each server once)");
        }
        clients_.push_back(std::move(client));
    }
    state_.resize(clients_.size());
}

size_t RemoteEndpoints::best(const std::vector<bool>& skip) const {
    const auto now = Clock::now();
    size_t pick = state_.size();
    for (size_t i = 0; i < state_.size(); ++i) {
        if (skip[i]) continue;
        if (pick == state_.size() || (down(state_[pick], now) && !down(state_[i], now)) ||
            (down(state_[pick], now) == down(state_[i], now) && state_[i].chats < state_[pick].chats))
            pick = i;
    }
    return pick;
}

size_t RemoteEndpoints::place() {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t i = best(std::vector<bool>(state_.size(), false));
    ++state_[i].chats;
    return i;
}

void RemoteEndpoints::leave(size_t endpoint) {
    std::lock_guard<std::mutex> lock(mutex_);
    --state_.at(endpoint).chats;
}

bool RemoteEndpoints::move(size_t& endpoint, const std::vector<bool>& tried) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t to = best(tried);
    if (to == state_.size()) return false;
    --state_[endpoint].chats;
    ++state_[to].chats;
    endpoint = to;
    return true;
}

ChatReply RemoteEndpoints::chat(size_t& endpoint, ChatCall call) {
    // A streamed reply that has begun cannot move: the caller would see its first pieces twice.
    bool delivered = false;
    if (call.on_text) {
        call.on_text = [inner = std::move(call.on_text), &delivered](std::string_view piece) {
            delivered = true;
            return inner(piece);
        };
    }
    std::vector<bool> tried(clients_.size(), false);
    bool elsewhere = false;  // the chat's endpoint is down and another is not: start there
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto now = Clock::now();
        if (down(state_.at(endpoint), now))
            for (const State& s : state_) elsewhere |= !down(s, now);
    }
    if (elsewhere) {
        const size_t from = endpoint;
        tried[from] = true;
        move(endpoint, tried);
        tried[from] = false;  // the endpoint it left stays a last resort
    }
    for (;;) {
        tried[endpoint] = true;
        try {
            ChatReply reply = clients_[endpoint]->chat(call);
            std::lock_guard<std::mutex> lock(mutex_);
            ++state_[endpoint].calls;
            return reply;
        } catch (const Error& e) {
            if (e.kind() != ErrorKind::kUnavailable) throw;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                State& s = state_[endpoint];
                ++s.failed;
                s.down_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(down_seconds_));
                s.last_error = e.what();
            }
            if (delivered || clients_.size() == 1) throw;  // one server: its own error, as without a list
            if (!move(endpoint, tried)) break;
        }
    }
    std::string reasons;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t i = 0; i < clients_.size(); ++i)
            reasons += (i ? "; " : "") + clients_[i]->url("") + ": " + state_[i].last_error;
    }
    throw Error(ErrorKind::kUnavailable, "remote model: none of the " + std::to_string(clients_.size()) +
                                             " servers answered (" + reasons + ")");
}

std::vector<EndpointLoad> RemoteEndpoints::loads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = Clock::now();
    std::vector<EndpointLoad> out;
    for (size_t i = 0; i < clients_.size(); ++i) {
        const State& s = state_[i];
        out.push_back({clients_[i]->url(""), s.chats, s.calls, s.failed, down(s, now)});
    }
    return out;
}

}  // namespace surf::agent
