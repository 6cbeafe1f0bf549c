// The Surfer-H loop (spec/agent.md §1.2) over any Environment: observe → policy → localizer → act, the
// validator on answers with its rejection written into the notes, budgets (steps, answer attempts, wall
// time with a hard deadline) and the forced answer on the last step. Never throws for model or browser
// faults: they are recorded (trace, step events) and the run goes on or ends with a status.
#pragma once

#include <atomic>

#include "agent/agent.h"
#include "agent/chat.h"
#include "agent/environment.h"
#include "agent/profile.h"
#include "agent/trace.h"
#include "tools/browser/navigation_guard.h"

namespace surf::agent {

struct LoopContext {
    ChatModel* model = nullptr;            // the policy's, and the other roles' unless they name their own
    ChatModel* localizer_model = nullptr;  // null: the policy's
    ChatModel* validator_model = nullptr;  // null: the policy's
    const PromptProfile* profile = nullptr;
    Environment* environment = nullptr;
    Trace* trace = nullptr;                     // may be null
    StepCallback on_step;                       // may be empty
    const std::atomic<bool>* cancel = nullptr;  // may be null
};

RunResult run_loop(const LoopContext& context, const RunOptions& options);

// Checks RunOptions; throws Error(kInvalidArgument) naming the field.
void validate_run_options(const RunOptions& options);

// Why `url` cannot start a run, or "" if it can: a page the browser opens is an absolute http(s), file, data
// or about URL (javascript:, mailto: and scheme-less text would leave the agent on a blank page).
std::string start_url_problem(const std::string& url);

// The navigation guard's rule for local pages in a run: file: pages only when the run starts on one (or
// allow_file_urls says so), never otherwise; browser-internal schemes never, host rules or not.
tools::LocalSchemes local_schemes(const RunOptions& options);
// The navigation guard of a run: its allow/deny lists and local_schemes; a run that starts on a file: page
// (without allow_file_urls) may open file: URLs only under the start page's folder.
tools::NavigationGuard run_guard(const RunOptions& options);

// The screenshot as it is sent to the model: downscaled to fit the profile's limits (Pillow-exact bicubic).
std::shared_ptr<const model::Image> image_to_send(const std::shared_ptr<const model::Image>& shot,
                                                  const PromptProfile& profile);

}  // namespace surf::agent
