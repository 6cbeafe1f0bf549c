// `surf eval`'s engine room: many tasks, C agents at once, ONE model engine (the scheduler batches every
// agent's and the judge's requests) and ONE Chromium with a browser context per running task.
//
// Each task runs the agent loop (agent/loop.h) with its own trace folder (DIR/traces/<id>/), then the
// judge (eval/eval_judge.h) and the reference-answer match, and is appended to DIR/results.jsonl the
// moment it finishes (eval/eval_results.h). A task that cannot be run — its start page does not load in
// time, its browser context crashes, the engine fails — is recorded with status "error" and the others go
// on. stop() (Ctrl-C) cancels the running tasks without recording them, so running again with the same
// folder resumes: recorded tasks are skipped, the rest run.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/chat.h"
#include "agent/profile.h"
#include "eval/eval_judge.h"
#include "eval/eval_results.h"
#include "eval/eval_tasks.h"
#include "model/engine.h"
#include "tools/browser/browser.h"

namespace surf::tools {
class BrowserSession;
}

namespace surf::eval {

struct EvalOptions {
    int concurrency = 1;
    int max_steps = 15;  // WebVoyager's max_iter; a task's own max_steps wins
    int attempts = 3;    // answers the validator may reject
    double task_timeout_seconds = 600;
    double page_timeout_seconds = 30;  // start page load; slower is an error (site down, hung server)
    bool use_validator = true;
    bool trust_policy_coordinates = false;
    std::vector<std::string> allow_domains;  // for tasks without their own allowed_domains
    std::vector<std::string> deny_domains;
    int viewport_width = 1024, viewport_height = 768;  // WebVoyager's window
    double device_scale_factor = 1.0;
    double max_wait_seconds = 10;
    int judge_screenshots = 3;  // the last k screenshots the judge sees
    bool retry_errors = false;  // run tasks recorded as "error" again (their lines are dropped first)
    std::string shard;          // "i/n", recorded in each line
    uint64_t seed = 0;
    // Consecutive observations without a screenshot after which the task is an error (a hung renderer).
    int max_blind_steps = 3;
    // What the run is (eval/eval_config.h): unless null, written to DIR/config.json, summary.json and
    // report.html. A folder whose config.json differs from it, other than in `resume_free_keys`, is refused
    // (Error kConfig naming the keys) unless `force`.
    nlohmann::ordered_json run_record;
    std::vector<std::string> resume_free_keys;
    bool force = false;
};

struct EvalProgress {
    size_t total = 0;      // tasks in this run (after sharding)
    size_t skipped = 0;    // already recorded before this run
    size_t done = 0;       // recorded in this run (errors included)
    size_t errors = 0;     // of which status "error"
    size_t succeeded = 0;  // of which success == true
    size_t running = 0;
    int64_t tokens = 0;  // engine tokens (prefill + output) of this run so far, judge included
    double elapsed = 0;  // seconds since run() began
    bool stopping = false;
};

struct EvalOutcome {
    EvalProgress progress;
    bool stopped = false;             // stop() was called: some tasks did not run
    std::vector<TaskRecord> records;  // everything in results.jsonl now
};

// The error for a folder whose recorded configuration differs from this run's: the folder, its config.json
// and each difference.
std::string config_conflict(const std::string& dir, const std::vector<std::string>& differences);

class EvalRunner {
public:
    // `judge` may be null (no judge). The browser is launched by run() from browser_options unless one
    // is given with set_browser().
    EvalRunner(std::shared_ptr<agent::ChatModel> model, agent::PromptProfile profile,
               std::shared_ptr<Judge> judge, EvalOptions options, tools::BrowserOptions browser_options = {});
    ~EvalRunner();

    void set_browser(std::shared_ptr<tools::Browser> browser) { browser_ = std::move(browser); }
    std::shared_ptr<tools::Browser> browser() const { return browser_; }

    // Runs every task of `tasks` not yet recorded in out_dir, `concurrency` at a time; writes
    // summary.json and report.html at the end (also after stop()). Throws Error for a folder that cannot
    // be used (locked, unreadable results) or a browser that cannot start.
    EvalOutcome run(const std::vector<EvalTask>& tasks, const std::string& out_dir);
    // Thread-safe; returns at once. Running tasks are cancelled and not recorded; no new task starts.
    void stop();
    EvalProgress progress() const;

    // Tests inject faults here: called on the task's thread right after its start page opened.
    std::function<void(const EvalTask&, tools::Browser&, tools::BrowserSession&)> after_open;
    // Called (on a worker thread) whenever a task finishes and is recorded.
    std::function<void(const TaskRecord&)> on_record;

private:
    struct Running;
    void worker(const std::vector<const EvalTask*>& queue, std::atomic<size_t>& next, ResultsFile& results,
                const std::string& out_dir);
    // Runs one task; returns false when it was stopped (nothing to record).
    bool run_task(const EvalTask& task, const std::string& out_dir, TaskRecord* record);
    void score(const EvalTask& task, const std::string& answer,
               const std::vector<std::shared_ptr<const model::Image>>& shots, TaskRecord* record);

    std::shared_ptr<agent::ChatModel> model_;
    agent::PromptProfile profile_;
    std::shared_ptr<Judge> judge_;
    EvalOptions options_;
    tools::BrowserOptions browser_options_;
    std::shared_ptr<tools::Browser> browser_;

    std::atomic<bool> stopping_{false};
    mutable std::mutex mutex_;
    std::map<const EvalTask*, std::shared_ptr<std::atomic<bool>>> cancels_;  // running tasks
    EvalProgress progress_;
    std::atomic<int64_t> tokens_{0};
    double t0_ = 0;
};

}  // namespace surf::eval
