// Several servers of one model (replicas of `surf serve`, vLLM or SGLang, with no load balancer in front):
// each chat is placed on the server holding the fewest chats and stays there, so its turns reuse that
// server's prefix cache. A server that cannot be reached (connection refused, 5xx after the client's
// retries) is marked down for a while: the chat that met it moves to another server (re-sending its
// whole conversation, as every turn does), new chats avoid it, and once the while is over it takes
// chats again. When every server fails, the error names each with its reason.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/remote/remote_client.h"

namespace surf::agent {

struct EndpointLoad {
    std::string url;     // the base URL
    int64_t chats = 0;   // chats placed on it now
    int64_t calls = 0;   // chat completions it answered
    int64_t failed = 0;  // calls it failed (unreachable or failing), each one marking it down
    bool down = false;   // marked down now
};

class RemoteEndpoints {
public:
    // One client per base URL, each with `options` (its base_url replaced). Throws kInvalidArgument for an
    // empty list, a repeated URL or a URL RemoteClient refuses.
    RemoteEndpoints(const RemoteClientOptions& options, const std::vector<std::string>& base_urls,
                    double down_seconds);

    size_t size() const { return clients_.size(); }
    RemoteClient& client(size_t i) { return *clients_.at(i); }

    // The endpoint for a new chat: fewest chats among those not down (all of them when every one is
    // down), then the lowest index.
    size_t place();
    // A chat on `endpoint` ends.
    void leave(size_t endpoint);

    // One chat completion on `endpoint`, moving it (and the caller's chat) to another when it is down or
    // fails with kUnavailable before any text reached call.on_text. Other errors pass through. Throws
    // kUnavailable naming every server when none answers (a single server's own error when there is one).
    ChatReply chat(size_t& endpoint, ChatCall call);

    std::vector<EndpointLoad> loads() const;

private:
    using Clock = std::chrono::steady_clock;
    struct State {
        int64_t chats = 0, calls = 0, failed = 0;
        Clock::time_point down_until{};
        std::string last_error;
    };
    bool down(const State& s, Clock::time_point now) const { return now < s.down_until; }
    // The endpoint a chat goes to among those not in `skip`: up before down, then fewest chats, then the
    // lowest index; size() when every one is skipped. Caller holds mutex_.
    size_t best(const std::vector<bool>& skip) const;
    // Moves a chat from `endpoint` to best(tried); false (nothing moved) when every one was tried.
    bool move(size_t& endpoint, const std::vector<bool>& tried);

    std::vector<std::unique_ptr<RemoteClient>> clients_;
    double down_seconds_;
    mutable std::mutex mutex_;
    std::vector<State> state_;
};

}  // namespace surf::agent
