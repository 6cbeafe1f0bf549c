// Judging an evaluation task's outcome.
//
// 1. The WebVoyager auto-evaluator protocol (spec/agent.md §3.1, evaluation/auto_eval.py): the judge sees
//    the task, the agent's final answer and the last k screenshots, and answers SUCCESS or NOT SUCCESS
//    with a reason. `Judge` is the seam: LocalJudge runs it on a chat model in a chat of its own with a
//    schema-constrained verdict (prompts/judge_system.md, prompts/judge_turn.md,
//    prompts/schemas/judge_verdict.schema.json); on our engine (EngineChatModel) or on a remote
//    OpenAI-compatible server (agent/remote/remote_chat.h), plugged into EvalRunner unchanged.
// 2. Reference answers, when a task has them: exact and normalised string match.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/chat.h"
#include "agent/profile.h"
#include "agent/prompt_renderer.h"
#include "model/engine.h"
#include "model/vision/image.h"

namespace surf::eval {

struct JudgeInput {
    std::string task;
    std::string answer;
    std::vector<std::shared_ptr<const model::Image>> screenshots;  // oldest first, at most k
};

struct JudgeVerdict {
    std::optional<bool> success;  // nullopt: the judge gave no usable verdict (see error)
    std::string reason;
    std::string raw;     // the judge's last reply
    std::string error;   // why there is no verdict
    int64_t tokens = 0;  // prompt + output tokens the judge used
    double seconds = 0;
};

class Judge {
public:
    virtual ~Judge() = default;
    virtual std::string name() const = 0;  // recorded in results.jsonl ("local", "remote:gpt-4o", ...)
    // Never throws for model or network faults: they come back as a verdict without `success`.
    // Must be safe to call from several threads at once (the runner judges tasks concurrently).
    virtual JudgeVerdict judge(const JudgeInput& input) = 0;
};

// A parsed judge reply. JSON {"reason": "...", "verdict": "SUCCESS" | "NOT SUCCESS"} ({"success": bool}
// is also accepted), optionally in a ```json fence; otherwise WebVoyager's free-text rule: "NOT SUCCESS"
// anywhere → false, else "SUCCESS" anywhere → true. Throws Error(kModelOutput) when there is neither.
struct ParsedJudgeReply {
    bool success = false;
    std::string reason;
};
ParsedJudgeReply parse_judge_reply(const std::string& text);

struct LocalJudgeOptions {
    std::string name = "local";  // recorded with each verdict ("remote" when the engine is a remote server)
    std::string system_prompt;   // "" = prompts/judge_system.md ({schema})
    std::string turn_prompt;     // "" = prompts/judge_turn.md ({task} {answer} {n_screenshots})
    std::string schema;          // "" = prompts/schemas/judge_verdict.schema.json
    agent::ModuleSettings settings{400, {}, 1};  // greedy (WebVoyager's judge runs at temperature 0)
    bool enable_thinking = false;
    std::string stop_token = "<SPECIAL_12>";
    int image_max_width = 0, image_max_height = 0;  // screenshots are downscaled to fit (0 = as is)
};

// The judge on a chat model: a fresh chat per verdict, never touching the agents' chats.
class LocalJudge : public Judge {
public:
    // Shares `model` (the agent's own, or a judge model of its own).
    LocalJudge(std::shared_ptr<agent::ChatModel> model, LocalJudgeOptions options);
    std::string name() const override { return options_.name; }
    JudgeVerdict judge(const JudgeInput& input) override;

private:
    std::shared_ptr<agent::ChatModel> model_;
    LocalJudgeOptions options_;
    agent::PromptTemplate system_, turn_, feedback_;
    std::shared_ptr<const model::CompiledSchema> schema_;
    std::string schema_text_;
};

// --- reference answers ---
// Lower-case (ASCII), punctuation → space, articles (a, an, the) dropped, thousands separators in
// numbers dropped ("1,234" → "1234"), whitespace collapsed.
std::string normalize_answer(const std::string& text);
struct AnswerMatch {
    bool exact = false;       // equal after trimming whitespace
    bool normalized = false;  // equal after normalize_answer
    bool contains = false;    // a normalised reference appears in the normalised answer as whole words
};
// The best match over the references (any reference matching counts).
AnswerMatch match_answer(const std::string& answer, const std::vector<std::string>& references);

}  // namespace surf::eval
