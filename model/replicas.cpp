#include "model/replicas.h"

#include "base/error.h"

namespace surf::model {

ReplicaEngine::ReplicaEngine(std::vector<std::shared_ptr<Engine>> replicas) : replicas_(std::move(replicas)) {
    if (replicas_.empty()) throw Error(ErrorKind::kInvalidArgument, "ReplicaEngine: no engines");
    for (size_t i = 0; i < replicas_.size(); ++i) {
        if (!replicas_[i])
            throw Error(ErrorKind::kInvalidArgument,
                        "ReplicaEngine: engine " + std::to_string(i) + " is null");
        if (replicas_[i]->config().llm.vocab_size != replicas_[0]->config().llm.vocab_size) {
            throw Error(ErrorKind::kInvalidArgument, "ReplicaEngine: engine " + std::to_string(i) + " (" +
                                                         replicas_[i]->config().dir +
                                                         ") does not serve the same model as engine 0 (" +
                                                         replicas_[0]->config().dir + ")");
        }
    }
    load_.resize(replicas_.size());
}

std::string ReplicaEngine::backend_name() const {
    std::string out = std::to_string(replicas_.size()) + " replicas [";
    for (size_t i = 0; i < replicas_.size(); ++i) out += (i ? ", " : "") + replicas_[i]->backend_name();
    return out + "]";
}

EngineStats ReplicaEngine::stats() const {
    EngineStats t;
    for (const auto& r : replicas_) t += r->stats();
    return t;
}

std::vector<ReplicaLoad> ReplicaEngine::loads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return load_;
}

ReplicaEngine::Placement ReplicaEngine::find(SessionId id) const {
    auto it = sessions_.find(id);
    if (it == sessions_.end())
        throw Error(ErrorKind::kInvalidArgument, "unknown session " + std::to_string(id));
    return it->second;
}

size_t ReplicaEngine::replica_of(SessionId id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return find(id).replica;
}

SessionId ReplicaEngine::open_session() {
    // Least loaded: fewest open sessions (each holds a state slot and KV), then fewest running calls,
    // then the lowest index, so ties spread round the replicas in order.
    size_t best = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t i = 1; i < load_.size(); ++i) {
            const ReplicaLoad& a = load_[i];
            const ReplicaLoad& b = load_[best];
            if (a.sessions < b.sessions || (a.sessions == b.sessions && a.generating < b.generating))
                best = i;
        }
        ++load_[best].sessions;  // reserve before the (possibly slow) open, so racing opens spread out
        ++load_[best].placed;
    }
    SessionId local;
    try {
        local = replicas_[best]->open_session();
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        --load_[best].sessions;
        --load_[best].placed;
        throw;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const SessionId id = next_id_++;
    sessions_.emplace(id, Placement{best, local});
    return id;
}

SessionId ReplicaEngine::fork_session(SessionId from) {
    Placement src;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        src = find(from);
        ++load_[src.replica].sessions;
        ++load_[src.replica].placed;
    }
    SessionId local;
    try {
        local = replicas_[src.replica]->fork_session(src.local);
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        --load_[src.replica].sessions;
        --load_[src.replica].placed;
        throw;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const SessionId id = next_id_++;
    sessions_.emplace(id, Placement{src.replica, local});
    return id;
}

void ReplicaEngine::close_session(SessionId id) {
    Placement p;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        p = find(id);
        sessions_.erase(id);
        --load_[p.replica].sessions;
    }
    replicas_[p.replica]->close_session(p.local);
}

GenerateResult ReplicaEngine::generate(SessionId id, const std::vector<InputPart>& input,
                                       const GenerateOptions& options) {
    Placement p;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        p = find(id);
        ++load_[p.replica].generating;
        ++load_[p.replica].generated;
    }
    struct Done {
        ReplicaEngine* self;
        size_t replica;
        ~Done() {
            std::lock_guard<std::mutex> lock(self->mutex_);
            --self->load_[replica].generating;
        }
    } done{this, p.replica};
    return replicas_[p.replica]->generate(p.local, input, options);
}

}  // namespace surf::model
