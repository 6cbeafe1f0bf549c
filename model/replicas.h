// One engine per GPU behind ONE Engine: new sessions go to the least loaded replica and stay
// there (a session's recurrent state and KV live on its GPU), forks go where their source lives, and
// stats() sums the replicas. Works for any number of engines of the same checkpoint; CPU tests use two
// CPU engines.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "model/engine.h"

namespace surf::model {

struct ReplicaLoad {
    int64_t sessions = 0;    // open sessions placed on this replica
    int64_t placed = 0;      // sessions placed on it so far (opened or forked there)
    int64_t generating = 0;  // generate() calls running on it now
    int64_t generated = 0;   // generate() calls it has run
};

class ReplicaEngine final : public Engine {
public:
    // Throws kInvalidArgument for an empty list or a null engine. Replica 0 answers config(), tokenizer()
    // and token_index(); the others must serve the same model (same vocabulary size, checked).
    explicit ReplicaEngine(std::vector<std::shared_ptr<Engine>> replicas);

    const ModelConfig& config() const override { return replicas_[0]->config(); }
    const Tokenizer& tokenizer() const override { return replicas_[0]->tokenizer(); }
    std::shared_ptr<const TokenIndex> token_index() const override { return replicas_[0]->token_index(); }
    std::string backend_name() const override;
    EngineStats stats() const override;

    SessionId open_session() override;
    SessionId fork_session(SessionId from) override;
    void close_session(SessionId id) override;
    GenerateResult generate(SessionId id, const std::vector<InputPart>& input,
                            const GenerateOptions& options) override;

    size_t size() const { return replicas_.size(); }
    Engine& replica(size_t i) { return *replicas_.at(i); }
    std::vector<ReplicaLoad> loads() const;
    // The replica a session lives on; throws kInvalidArgument for an unknown id.
    size_t replica_of(SessionId id) const;

private:
    struct Placement {
        size_t replica;
        SessionId local;
    };
    Placement find(SessionId id) const;  // caller holds mutex_

    std::vector<std::shared_ptr<Engine>> replicas_;
    mutable std::mutex mutex_;
    std::map<SessionId, Placement> sessions_;
    std::vector<ReplicaLoad> load_;
    SessionId next_id_ = 1;
};

}  // namespace surf::model
