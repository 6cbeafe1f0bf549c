// The three roles of Surfer-H (spec/agent.md §1): policy, localizer, validator. Each talks to its chat model
// (by default one for all three: one copy of the weights) in chats of its own, so the localizer and
// validator never touch the policy's state. The policy's session persists across steps and each step feeds
// only the new turn (text + the new screenshot); the localizer and validator start a fresh session per call.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/actions.h"
#include "agent/chat.h"
#include "agent/coordinates.h"
#include "agent/memory.h"
#include "agent/model_call.h"
#include "agent/profile.h"

namespace surf::agent {

struct ModuleContext {
    ChatModel* model = nullptr;
    const PromptProfile* profile = nullptr;
    ModelCallSink sink;
    std::function<bool()> should_stop;  // true: cancel the current generation
    uint64_t seed = 0;                  // mixed into each module's sampling seed
};

struct PolicyStepInput {
    int step = 1;
    int max_steps = 1;
    bool forced = false;                             // the budget is spent: the action must be an answer
    std::string observation;                         // URL, title, the last action's outcome, browser events
    std::shared_ptr<const model::Image> screenshot;  // as sent (may be null when none could be taken)
    std::string elements;                            // the {elements} text (agent/page_text.h), or ""
    // With the profile's listed_elements_only: the listed descriptions, the only values the action's element
    // fields may take (empty: no restriction, as on a page that lists nothing).
    std::vector<std::string> element_choices;
    // With the profile's typed_text_from_task_quotes: the task's quoted strings, the only values a write
    // action's text may take (empty: no restriction, as for a task that quotes nothing).
    std::vector<std::string> text_choices;
};

// The strings a task quotes, in order: between ASCII double quotes, between “ and ”, and between « and »
// (spaces inside the guillemets trimmed); empty or over 200-byte ones are left out.
std::vector<std::string> quoted_strings(const std::string& task);

class Policy {
public:
    explicit Policy(const ModuleContext& context);
    // One step: renders the turn, feeds it, parses {thought, note, action}; retries malformed output with
    // feedback. Throws Error(kModelOutput) when every retry fails, kCancelled when stopped.
    PolicyOutput decide(const Memory& memory, const PolicyStepInput& input);
    int fresh_starts() const { return chat_->fresh_starts(); }
    int64_t session_tokens() const { return chat_->session_tokens(); }

private:
    model::GenerateOptions options(const PolicyStepInput& in) const;

    ModuleContext ctx_;
    std::unique_ptr<Chat> chat_;
    bool started_ = false;
};

struct LocalizerResult {
    double x = 0, y = 0;  // as the model gave it, in the profile's convention
    tools::CssPoint css;  // where the browser clicks
};

class Localizer {
public:
    explicit Localizer(const ModuleContext& context);
    // Finds `element` on `sent` (the image as sent, a resize of the screenshot described by `frame`);
    // `elements` is the page's element list for a prompt with {elements}.
    LocalizerResult locate(const std::string& element, const std::shared_ptr<const model::Image>& sent,
                           const ScreenFrame& frame, int step, const std::string& elements = "");

private:
    ModuleContext ctx_;
};

class Validator {
public:
    explicit Validator(const ModuleContext& context);
    Verdict judge(const Memory& memory, const std::string& answer,
                  const std::vector<std::shared_ptr<const model::Image>>& screenshots, int step,
                  const std::string& elements = "");

private:
    ModuleContext ctx_;
};

// Today's date as YYYY-MM-DD (UTC), for the policy's system prompt.
std::string today_utc();

}  // namespace surf::agent
