// surf's agent library: the ONE header a product includes to run a web agent on a task.
//
//   surf::agent::AgentConfig config;
//   config.model_dir = "/models/holotron-12b";
//   auto agent = surf::agent::Agent::create(config);           // loads the model once, launches Chromium
//   lazily surf::agent::RunOptions run; run.task = "Find the price of ..."; run.start_url =
//   "https://example.com"; run.allow_domains = {"example.com"}; surf::agent::RunResult r = agent->run(run,
//   [](const surf::agent::StepEvent& e) { ... });
//   // agent->cancel() from another thread ends a run early (status kCancelled).
//
// Every run: a fresh isolated browser context; policy → localizer → act → observe, with a validator on
// answers (a rejection goes into the notes and the run continues, up to max_answer_attempts), a step
// and wall-time budget and a forced answer at the end. With trace_dir set, the run writes trace.jsonl,
// the screenshots and report.html there. Errors in the model's output or the browser are recorded and
// the run goes on; only bad configuration throws (surf::Error, see base/error.h).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/actions.h"
#include "agent/chat.h"
#include "agent/custom_actions.h"
#include "agent/secrets.h"
#include "model/vision/image.h"

namespace surf::model {
class Engine;
struct Image;
}  // namespace surf::model
namespace surf::tools {
class Browser;
}

namespace surf::agent {

struct AgentConfig {
    std::string model_dir;      // checkpoint folder (config.json, safetensors, tokenizer files)
    std::string profile;        // prompt profile JSON; "" = prompts/profile_holotron.json
    std::string chat_template;  // a .jinja file overriding the checkpoint's template; "" = the checkpoint's
    std::string backend =
        "cpu";  // "cpu" or "cuda" (when built with CUDA); or pass any engine or chat model to Agent(...)
    // "none" or "fp8": FP8 E4M3 on load for the language model's linear layers of the folders Agent::create
    // opens (model::EngineOptions::quantize; the cpu backend only).
    std::string quantize = "none";
    std::string chromium;  // Chromium binary; "" = the usual locations
    // A running browser to share between agents (one Chromium, one isolated context per run); null = the
    // agent launches its own at its first run, with the run's deny-list unresolvable in it (relaunched for a
    // run with another), and shuts it down when destroyed. A shared browser enforces the resolver deny rules
    // it was launched with (tools::BrowserOptions::deny_hosts); a run whose deny_domains names a host name
    // they leave resolvable is refused (Error kInvalidArgument naming it).
    std::shared_ptr<tools::Browser> browser;
    // Per-role models. A model folder for the localizer or the validator ("" = the policy's model), opened on
    // `backend` by Agent::create (one engine per distinct folder); or a chat model the product built
    // (EngineChatModel::open over any model::Engine, agent/remote's RemoteChatModel), which wins over the
    // folder. Each in-process role renders with its own model's chat template; the prompt profile is shared.
    std::string localizer_model, validator_model;
    std::shared_ptr<ChatModel> localizer_chat_model, validator_chat_model;
};

// What the policy wants to do next, shown to a before-action hook (RunOptions::before_action).
struct ProposedAction {
    int step = 0;
    Action action;                                   // as the policy wrote it (secrets as placeholders)
    std::string description;                         // one line (describe_action)
    std::string url;                                 // the page it would act on
    std::shared_ptr<const model::Image> screenshot;  // what the policy saw
    std::vector<uint8_t> png;                        // the same screenshot as a PNG file
};

// A hook's answer: go ahead, refuse (the reason is fed back to the policy as the step's outcome), or do
// another action instead.
struct ApprovalDecision {
    enum class Kind { kApprove, kReject, kReplace };
    Kind kind = Kind::kApprove;
    std::string reason;  // kReject: why (the policy reads it)
    Action replacement;  // kReplace: what to do instead
    static ApprovalDecision approve() { return {}; }
    static ApprovalDecision reject(std::string why) { return {Kind::kReject, std::move(why), {}}; }
    static ApprovalDecision replace(Action a) { return {Kind::kReplace, "", std::move(a)}; }
};
using BeforeActionHook = std::function<ApprovalDecision(const ProposedAction&)>;

struct RunOptions {
    std::string task;
    std::string start_url;
    int max_steps = 30;            // policy steps, the forced answer included
    int max_answer_attempts = 3;   // answers the validator may reject before the run fails
    double timeout_seconds = 600;  // wall time; past it the next step is the forced answer
    bool use_validator = true;
    bool trust_policy_coordinates = false;   // skip the localizer and click where the policy pointed
    std::vector<std::string> allow_domains;  // empty = any host
    std::vector<std::string> deny_domains;
    bool allow_file_urls =
        false;  // file: pages allowed (also when start_url is one); else never, rules or not
    int viewport_width = 1280, viewport_height = 720;
    double device_scale_factor = 1.0;
    double max_wait_seconds = 10;  // cap on the policy's wait action
    std::string trace_dir;         // "" = no trace
    uint64_t seed = 0;             // mixed into every module's sampling seed
    // Values the browser may type for placeholders `<secret:NAME>` that the task and the model use; the model
    // never sees a value, and no trace, report, event or result holds one (agent/secrets.h).
    std::map<std::string, Secret> secrets;
    // A JSON schema the final answer must satisfy (JSON text; "" = a free-text answer). Constrained decoding
    // writes the answer as such a value, and RunResult::structured returns it parsed. No "$ref" inside.
    std::string answer_schema;
    // Called before every action on the page (not the final answer), from the run's thread; an exception it
    // throws counts as a refusal. Empty: every action goes ahead.
    BeforeActionHook before_action;
    // Actions the product adds for this run (agent/custom_actions.h): they join the policy's schema and
    // system prompt, and their handler runs when the policy chooses one.
    std::vector<CustomActionSpec> custom_actions;
    // Built-in actions the policy may not use in this run ("goto", "back", ...; never "answer"). They leave
    // its schema and the run's ActionRegistry, so not even an approval hook's replacement performs one.
    std::vector<std::string> removed_actions;
    // Built-in actions the product performs itself (agent/action_registry.h): each spec names a built-in the
    // profile offers; the policy writes it as before, and the spec's handler (its description and schema
    // unused) gets the action's fields as arguments and, for a pointed action, the located point.
    std::vector<CustomActionSpec> replaced_actions;
    // When set, the policy may ask the user a question (the ask_human action, offered only then) and reads
    // the returned text as the answer. Called from the run's thread; it may block until the user replies.
    std::function<std::string(const std::string& question)> ask_human;
    // A folder whose files the policy may give to file fields (the upload action, offered only then, names
    // one of them; nothing outside the folder is ever uploaded). "" = no uploads.
    std::string upload_dir;
    // Downloads are saved into this folder (created when missing); "" = downloads are refused.
    std::string download_dir;
    // Cookies and localStorage the run's browser starts with (tools::SessionOptions::storage_state's layout,
    // Playwright's storageState: a product starts the run logged in); null = a fresh browser context.
    nlohmann::json storage_state;
    bool save_storage_state = false;  // RunResult::storage_state gets the context's storage when the run ends
};

enum class RunStatus {
    kAnswered,   // an answer the validator accepted (or the forced / unvalidated answer)
    kRejected,   // every answer attempt was rejected by the validator
    kNoAnswer,   // the budget ran out without a usable answer
    kCancelled,  // cancel() was called
    kError,      // the run could not start or the engine failed
};
const char* run_status_name(RunStatus status);

// kStepStarted comes when a step has its screenshot, before the model is asked; kStep when the step is done.
enum class StepEventKind { kStepStarted, kStep, kAnswerRejected, kFinished };

struct StepEvent {
    StepEventKind kind = StepEventKind::kStep;
    int step = 0;
    std::string action;       // "click", "write", ... ("" when the policy produced nothing usable)
    std::string target;       // element description or URL
    std::string description;  // one line, describe_action()
    bool has_point = false;
    double x = 0, y = 0;  // CSS pixels clicked, when has_point
    std::string thought;
    std::string note;
    std::string outcome;  // what the browser did, or the error
    bool ok = true;
    double seconds = 0;                              // this step's wall time
    double elapsed = 0;                              // since the run began
    std::string url;                                 // the page the step saw
    std::shared_ptr<const model::Image> screenshot;  // what the step saw (kStepStarted, kStep), as taken
};

// One module's model calls in a run (RunResult::usage): retries included.
struct RoleUsage {
    int calls = 0;
    int64_t input_tokens = 0;   // prefilled tokens (image tokens included)
    int64_t output_tokens = 0;  // generated tokens (a remote backend's count where it gives no ids)
    double seconds = 0;         // wall time of the calls
};

struct RunResult {
    RunStatus status = RunStatus::kNoAnswer;
    std::string answer;
    bool validated = false;  // the validator accepted the answer
    bool forced = false;     // the answer came from the forced last step
    int steps = 0;
    int answer_attempts = 0;
    int model_calls = 0;
    int errors = 0;  // steps that failed (malformed output after retries, browser faults)
    double seconds = 0;
    std::string error;  // for kError / kNoAnswer: why
    std::string trace_dir;
    nlohmann::json structured;  // with RunOptions::answer_schema: the answer parsed (null without an answer)
    std::string final_url;      // the page the last step saw
    std::map<std::string, RoleUsage> usage;  // by role: policy, localizer, validator
    double model_seconds = 0;                // wall time in model calls
    double browser_seconds = 0;  // wall time in the browser: opening, screenshots, actions, custom actions
    // The trace's screenshot files, in step order (empty without a trace).
    std::vector<std::string> screenshots;
    std::vector<std::string> downloads;  // files the run saved into RunOptions::download_dir
    nlohmann::json storage_state;  // with RunOptions::save_storage_state: cookies and localStorage at the end
};

using StepCallback = std::function<void(const StepEvent&)>;

class Agent {
public:
    // Loads the model (on config.backend) and the profile; Chromium starts at the first run.
    static std::unique_ptr<Agent> create(const AgentConfig& config);
    // Shares an engine that already exists (one model for many agents, or the GPU engine); the chats render
    // with config.chat_template or the checkpoint's own template.
    Agent(std::shared_ptr<model::Engine> engine, const AgentConfig& config);
    // Runs on any chat model (e.g. agent/remote's RemoteChatModel); config.chat_template does not apply.
    Agent(std::shared_ptr<ChatModel> model, const AgentConfig& config);
    ~Agent();
    Agent(const Agent&) = delete;
    Agent& operator=(const Agent&) = delete;

    // Runs one task to the end. Thread-safe in the sense that runs on one Agent are serialised.
    RunResult run(const RunOptions& options, const StepCallback& on_step = {});
    // Asks the current run (if any) to stop; returns at once.
    void cancel();
    // The Chromium process pid (0 if none runs): for monitoring, and for tests that kill it.
    int browser_pid() const;
    // The in-process engine the agent's policy runs on (e.g. for its stats); null on another chat model.
    std::shared_ptr<model::Engine> engine() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace surf::agent
