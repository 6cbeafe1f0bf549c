// An Engine that answers from an oracle instead of a network and records every call: the input parts each
// session was fed (text, images) and the reply it gave. `surf record` runs the real agent loop on it, so
// the recorded sessions are exactly what surf's policy, localizer and validator feed a model, turn by turn;
// train/ turns them into training sequences.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/profile.h"
#include "model/engine.h"

namespace surf::record {

enum class Role { kPolicy, kLocalizer, kValidator, kOther };
const char* role_name(Role role);

struct RecordedTurn {
    std::vector<model::InputPart> parts;  // what the call appended to the session
    std::string output;                   // the reply (its stop token follows it in the session)
};

struct RecordedSession {
    Role role = Role::kOther;
    std::vector<RecordedTurn> turns;
};

class OracleEngine : public model::Engine {
public:
    // The reply for one call; `parts` is what the call appends, `forced` whether the policy must answer.
    using Reply =
        std::function<std::string(Role role, const std::vector<model::InputPart>& parts, bool forced)>;

    // Tokenizer and config come from `model_dir` (the agent's conversation needs the special tokens).
    OracleEngine(const std::string& model_dir, const agent::PromptProfile& profile);

    void set_reply(Reply reply) { reply_ = std::move(reply); }
    // The sessions recorded since the last call, in the order they were opened; clears them.
    std::vector<RecordedSession> take_sessions();

    const model::ModelConfig& config() const override { return config_; }
    const model::Tokenizer& tokenizer() const override { return tokenizer_; }
    std::shared_ptr<const model::TokenIndex> token_index() const override { return nullptr; }
    std::string backend_name() const override { return "oracle"; }
    model::SessionId open_session() override;
    model::SessionId fork_session(model::SessionId from) override;
    void close_session(model::SessionId id) override;
    model::GenerateResult generate(model::SessionId id, const std::vector<model::InputPart>& input,
                                   const model::GenerateOptions& options) override;

private:
    Role role_of(const model::GenerateOptions& options) const;

    model::ModelConfig config_;
    model::Tokenizer tokenizer_;
    const agent::PromptProfile& profile_;
    Reply reply_;
    std::mutex mutex_;
    model::SessionId next_id_ = 1;
    std::map<model::SessionId, RecordedSession> open_;
    std::vector<std::pair<model::SessionId, RecordedSession>> closed_;
};

}  // namespace surf::record
