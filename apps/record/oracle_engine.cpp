#include "apps/record/oracle_engine.h"

#include <algorithm>

#include "base/error.h"

namespace surf::record {

const char* role_name(Role role) {
    switch (role) {
        case Role::kPolicy: return "policy";
        case Role::kLocalizer: return "localizer";
        case Role::kValidator: return "validator";
        case Role::kOther: return "other";
    }
    return "?";
}

OracleEngine::OracleEngine(const std::string& model_dir, const agent::PromptProfile& profile)
    : config_(model::load_model_config(model_dir)),
      tokenizer_(model::load_model_tokenizer(model_dir)),
      profile_(profile) {}

Role OracleEngine::role_of(const model::GenerateOptions& options) const {
    // The modules pass their profile's compiled schemas, so the schema tells the roles apart.
    const model::CompiledSchema* s = options.schema.get();
    if (s && (s == profile_.policy_schema.get() || s == profile_.answer_schema.get())) return Role::kPolicy;
    if (s && s == profile_.localizer_schema.get()) return Role::kLocalizer;
    if (s && s == profile_.validator_schema.get()) return Role::kValidator;
    return Role::kOther;
}

model::SessionId OracleEngine::open_session() {
    std::lock_guard<std::mutex> lock(mutex_);
    const model::SessionId id = next_id_++;
    open_[id] = RecordedSession{};
    return id;
}

model::SessionId OracleEngine::fork_session(model::SessionId from) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find(from);
    if (it == open_.end()) throw Error(ErrorKind::kInvalidArgument, "oracle engine: unknown session");
    const model::SessionId id = next_id_++;
    open_[id] = it->second;
    return id;
}

void OracleEngine::close_session(model::SessionId id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find(id);
    if (it == open_.end()) return;
    closed_.emplace_back(id, std::move(it->second));
    open_.erase(it);
}

std::vector<RecordedSession> OracleEngine::take_sessions() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, s] : open_) closed_.emplace_back(id, std::move(s));
    open_.clear();
    std::sort(closed_.begin(), closed_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<RecordedSession> out;
    for (auto& [id, s] : closed_) out.push_back(std::move(s));
    closed_.clear();
    return out;
}

model::GenerateResult OracleEngine::generate(model::SessionId id, const std::vector<model::InputPart>& input,
                                             const model::GenerateOptions& options) {
    const Role role = role_of(options);
    const bool forced = options.schema && options.schema.get() == profile_.answer_schema.get();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!open_.count(id)) throw Error(ErrorKind::kInvalidArgument, "oracle engine: unknown session");
    }
    if (!reply_) throw Error(ErrorKind::kInvalidArgument, "oracle engine: no reply function set");
    // The reply runs without the lock: it may itself call the engine (extra localizer examples).
    model::GenerateResult result;
    result.text = reply_(role, input, forced);
    result.finish = model::FinishReason::kStop;
    std::lock_guard<std::mutex> lock(mutex_);
    RecordedSession& s = open_.at(id);
    if (s.role == Role::kOther) s.role = role;
    s.turns.push_back(RecordedTurn{input, result.text});
    return result;
}

}  // namespace surf::record
