#include "eval/eval_runner.h"

#include <chrono>
#include <deque>
#include <filesystem>
#include <thread>

#include "agent/environment.h"
#include "agent/loop.h"
#include "agent/trace.h"
#include "base/error.h"
#include "eval/eval_config.h"
#include "eval/eval_report.h"
#include "tools/browser/browser_session.h"

namespace surf::eval {

using agent::Action;
using agent::ActionOutcome;
using agent::ActionPoints;
using agent::BrowserEnvironment;
using agent::BrowserEnvironmentOptions;
using agent::Environment;
using agent::image_to_send;
using agent::LoopContext;
using agent::Observation;
using agent::run_guard;
using agent::run_loop;
using agent::run_status_name;
using agent::RunOptions;
using agent::RunResult;
using agent::RunStatus;
using agent::Trace;
using agent::validate_run_options;

namespace {

// Runs a task's page check (EvalTask::check) in its page: the function gets the final answer and returns
// {success, reason} or a boolean. A check that throws or returns anything else leaves no verdict and says
// why.
void run_page_check(tools::BrowserSession& session, const std::string& check, const std::string& answer,
                    TaskRecord* rec) {
    const std::string expr =
        "(async () => { const v = await (" + check + ")(" + nlohmann::json(answer).dump() +
        "); return JSON.stringify(typeof v === 'boolean' ? {success: v, reason: ''} : v); })()";
    try {
        const nlohmann::json raw = session.evaluate(expr);
        const nlohmann::json v =
            raw.is_string() ? nlohmann::json::parse(raw.get<std::string>()) : nlohmann::json();
        if (!v.is_object() || !v.contains("success") || !v["success"].is_boolean()) {
            rec->check_reason = "the page check returned no {success, reason}: " + raw.dump().substr(0, 200);
            return;
        }
        rec->check_success = v["success"].get<bool>();
        rec->check_reason = v.value("reason", "");
    } catch (const std::exception& e) {
        rec->check_reason = std::string("the page check failed: ") + e.what();
    }
}

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double now_seconds() {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// The shared chat model as one task sees it: every turn is forwarded unchanged and its token counts and
// model seconds are added to the task's totals (and to the run's live token counter).
class CountingChatModel : public agent::ChatModel {
public:
    CountingChatModel(agent::ChatModel& inner, std::atomic<int64_t>* run_tokens)
        : inner_(inner), run_tokens_(run_tokens) {}

    std::unique_ptr<agent::Chat> open_chat(const agent::ChatOptions& options) override {
        return std::make_unique<Counted>(inner_.open_chat(options), *this);
    }
    std::string name() const override { return inner_.name(); }

    std::atomic<int64_t> prompt_tokens{0}, image_tokens{0}, output_tokens{0};
    double seconds = 0;  // only the task's own thread asks

private:
    class Counted final : public agent::Chat {
    public:
        Counted(std::unique_ptr<agent::Chat> inner, CountingChatModel& counts)
            : inner_(std::move(inner)), counts_(counts) {}
        void reset(std::vector<agent::Message> messages) override { inner_->reset(std::move(messages)); }
        agent::TurnReport ask(agent::Message user, model::GenerateOptions options) override {
            agent::TurnReport t = inner_->ask(std::move(user), std::move(options));
            counts_.add(t.result);
            return t;
        }
        const std::vector<agent::Message>& messages() const override { return inner_->messages(); }
        int64_t session_tokens() const override { return inner_->session_tokens(); }
        int fresh_starts() const override { return inner_->fresh_starts(); }

    private:
        std::unique_ptr<agent::Chat> inner_;
        CountingChatModel& counts_;
    };

    void add(const model::GenerateResult& r) {
        prompt_tokens += r.prefill_tokens;
        image_tokens += r.image_tokens;
        output_tokens += r.output_tokens();
        seconds += r.prefill_seconds + r.decode_seconds;
        if (run_tokens_) *run_tokens_ += r.prefill_tokens + r.output_tokens();
    }

    agent::ChatModel& inner_;
    std::atomic<int64_t>* run_tokens_;
};

// The browser as one task sees it: BrowserEnvironment plus what the evaluation needs around it — the
// start page's load checked (a site that is down or hangs makes the task an error, not an agent
// failure), faults that end the task (a crashed context, a renderer that no longer gives screenshots),
// the last k screenshots for the judge, and the time spent in the browser.
class EvalEnvironment : public Environment {
public:
    EvalEnvironment(tools::Browser& browser, tools::BrowserSession& session, const EvalTask& task,
                    const agent::PromptProfile& profile, const EvalOptions& options,
                    std::atomic<bool>& cancel,
                    const std::function<void(const EvalTask&, tools::Browser&, tools::BrowserSession&)>& hook)
        : browser_(browser),
          session_(session),
          inner_(session, env_options(options, cancel)),
          task_(task),
          profile_(profile),
          options_(options),
          cancel_(cancel),
          hook_(hook) {}

    ActionOutcome open(const std::string& url) override {
        const Clock::time_point t0 = Clock::now();
        if (opened_) {
            ActionOutcome o = inner_.open(url);
            add_time(t0);
            return o;
        }
        opened_ = true;
        ActionOutcome out;
        try {
            const tools::NavigationResult r = session_.navigate(url);
            out.message = r.describe();
            if (!r.ok()) {
                out.ok = false;
                fail("the start page did not load: " + r.describe());
            }
        } catch (const Error& e) {
            out.ok = false;
            out.error_kind = error_kind_name(e.kind());
            out.message = std::string("goto ") + url + " failed (" + out.error_kind + "): " + e.what();
            fail("the start page did not load: " + out.message);
        }
        if (out.ok && hook_) hook_(task_, browser_, session_);
        add_time(t0);
        return out;
    }

    Observation observe() override {
        const Clock::time_point t0 = Clock::now();
        Observation obs = inner_.observe();
        add_time(t0);
        for (const std::string& e : obs.events) {
            if (e.rfind(tools::session_event_kind_name(tools::SessionEventKind::kTabCrashed), 0) == 0)
                fail("the browser context crashed: " + e);
        }
        if (obs.image) {
            blind_ = 0;
            shots_.push_back(image_to_send(obs.image, profile_));
            while (static_cast<int>(shots_.size()) > std::max(1, options_.judge_screenshots))
                shots_.pop_front();
        } else if (++blind_ >= options_.max_blind_steps) {
            fail("no screenshot " + std::to_string(blind_) + " times in a row: " + obs.error);
        }
        return obs;
    }

    ActionOutcome execute(const Action& action, const ActionPoints& points) override {
        const Clock::time_point t0 = Clock::now();
        ActionOutcome o = inner_.execute(action, points);
        add_time(t0);
        return o;
    }

    tools::BrowserSession* page() override { return inner_.page(); }
    std::vector<tools::PageElement> elements() override {
        const Clock::time_point t0 = Clock::now();
        std::vector<tools::PageElement> listed = inner_.elements();
        add_time(t0);
        return listed;
    }

    const std::string& fault() const { return fault_; }
    double seconds() const { return seconds_; }
    std::vector<std::shared_ptr<const model::Image>> screenshots() const {
        return {shots_.begin(), shots_.end()};
    }

private:
    static BrowserEnvironmentOptions env_options(const EvalOptions& o, const std::atomic<bool>& cancel) {
        BrowserEnvironmentOptions eo;
        eo.max_wait = std::chrono::milliseconds(static_cast<int64_t>(o.max_wait_seconds * 1000));
        eo.cancel = &cancel;
        return eo;
    }
    void fail(const std::string& why) {
        if (fault_.empty()) fault_ = why;
        cancel_.store(true);  // the loop stops at the next token or step
    }
    void add_time(Clock::time_point t0) {
        seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    }

    tools::Browser& browser_;
    tools::BrowserSession& session_;
    BrowserEnvironment inner_;
    const EvalTask& task_;
    const agent::PromptProfile& profile_;
    const EvalOptions& options_;
    std::atomic<bool>& cancel_;
    const std::function<void(const EvalTask&, tools::Browser&, tools::BrowserSession&)>& hook_;
    bool opened_ = false;
    std::string fault_;
    int blind_ = 0;
    double seconds_ = 0;
    std::deque<std::shared_ptr<const model::Image>> shots_;
};

// A task's run: the task's own budget, start page, domains and viewport where it has them, else the eval's.
RunOptions task_run_options(const EvalTask& task, const EvalOptions& options, const std::string& trace_dir) {
    RunOptions run;
    run.task = task.question;
    run.start_url = task.start_url;
    run.max_steps = task.max_steps > 0 ? task.max_steps : options.max_steps;
    run.max_answer_attempts = options.attempts;
    run.timeout_seconds = options.task_timeout_seconds;
    run.use_validator = options.use_validator;
    run.trust_policy_coordinates = options.trust_policy_coordinates;
    run.allow_domains = task.allowed_domains.empty() ? options.allow_domains : task.allowed_domains;
    run.deny_domains = options.deny_domains;
    run.viewport_width = task.viewport_width > 0 ? task.viewport_width : options.viewport_width;
    run.viewport_height = task.viewport_height > 0 ? task.viewport_height : options.viewport_height;
    run.device_scale_factor = options.device_scale_factor;
    run.max_wait_seconds = options.max_wait_seconds;
    run.trace_dir = trace_dir;
    run.seed = options.seed;
    return run;
}

// The run's outcome and counts in the record: its status ("error" for a fault of the environment, an engine
// error or a cancelled run), answer, steps and tokens.
void record_run(const RunResult& result, const std::string& fault, const CountingChatModel& model,
                TaskRecord* rec) {
    rec->answer = result.answer;
    rec->validated = result.validated;
    rec->forced = result.forced;
    rec->attempts = result.answer_attempts;
    rec->steps = result.steps;
    rec->model_calls = result.model_calls;
    rec->step_errors = result.errors;
    rec->prompt_tokens = model.prompt_tokens.load();
    rec->image_tokens = model.image_tokens.load();
    rec->output_tokens = model.output_tokens.load();
    rec->model_seconds = model.seconds;
    if (!fault.empty()) {
        rec->status = "error";
        rec->error = fault;
    } else if (result.status == RunStatus::kError || result.status == RunStatus::kCancelled) {
        rec->status = "error";
        rec->error = result.error.empty() ? run_status_name(result.status) : result.error;
    } else {
        rec->status = run_status_name(result.status);
        rec->error = result.error;
    }
}

}  // namespace

std::string config_conflict(const std::string& dir, const std::vector<std::string>& differences) {
    std::string list;
    for (const std::string& d : differences) list += (list.empty() ? "" : ", ") + d;
    return dir + " holds results of a run with another configuration (" + dir + "/config.json): " + list +
           "; resume with the same configuration, use another --out, or pass --force to continue anyway";
}

EvalRunner::EvalRunner(std::shared_ptr<agent::ChatModel> model, agent::PromptProfile profile,
                       std::shared_ptr<Judge> judge, EvalOptions options,
                       tools::BrowserOptions browser_options)
    : model_(std::move(model)),
      profile_(std::move(profile)),
      judge_(std::move(judge)),
      options_(std::move(options)),
      browser_options_(std::move(browser_options)) {
    if (!model_) throw Error(ErrorKind::kInvalidArgument, "EvalRunner: no model");
    if (options_.concurrency < 1 || options_.concurrency > 1024)
        throw Error(ErrorKind::kInvalidArgument,
                    "concurrency: " + std::to_string(options_.concurrency) + " is outside 1..1024");
    if (options_.judge_screenshots < 1 || options_.judge_screenshots > 64)
        throw Error(ErrorKind::kInvalidArgument, "judge screenshots: must be in 1..64");
    if (!(options_.page_timeout_seconds > 0))
        throw Error(ErrorKind::kInvalidArgument, "page timeout: must be > 0");
}

EvalRunner::~EvalRunner() = default;

void EvalRunner::stop() {
    stopping_.store(true);
    std::lock_guard<std::mutex> lock(mutex_);
    progress_.stopping = true;
    for (auto& [task, cancel] : cancels_) cancel->store(true);
}

EvalProgress EvalRunner::progress() const {
    std::lock_guard<std::mutex> lock(mutex_);
    EvalProgress p = progress_;
    p.tokens = tokens_.load();
    p.elapsed = t0_ > 0 ? now_seconds() - t0_ : 0;
    return p;
}

EvalOutcome EvalRunner::run(const std::vector<EvalTask>& tasks, const std::string& out_dir) {
    // Checked before the results file is opened (retry_errors rewrites it): a refused run changes nothing.
    if (!options_.run_record.is_null() && !options_.force) {
        if (const auto before = read_run_record(out_dir)) {
            const auto diffs = run_differences(*before, options_.run_record, options_.resume_free_keys);
            if (!diffs.empty()) throw Error(ErrorKind::kConfig, config_conflict(out_dir, diffs));
        }
    }
    ResultsFile results(out_dir, options_.retry_errors);
    if (!options_.run_record.is_null()) write_run_record(out_dir, options_.run_record);
    const std::set<std::string> finished = results.finished_ids();
    std::vector<const EvalTask*> queue;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        progress_ = {};
        progress_.total = tasks.size();
        for (const EvalTask& t : tasks) {
            if (finished.count(t.id)) {
                ++progress_.skipped;
            } else {
                queue.push_back(&t);
            }
        }
        t0_ = now_seconds();
    }
    if (!queue.empty() && !browser_) {
        // The run's denied host names are unresolvable in its browser (connections Fetch never sees).
        tools::BrowserOptions bo = browser_options_;
        bo.deny_hosts.insert(bo.deny_hosts.end(), options_.deny_domains.begin(), options_.deny_domains.end());
        browser_ = tools::Browser::launch(bo);
    }
    std::atomic<size_t> next{0};
    const int n_workers = std::min<int>(options_.concurrency, static_cast<int>(queue.size()));
    std::vector<std::thread> workers;
    for (int i = 0; i < n_workers; ++i) workers.emplace_back([&] { worker(queue, next, results, out_dir); });
    for (std::thread& t : workers) t.join();

    EvalOutcome outcome;
    outcome.progress = progress();
    outcome.stopped = stopping_.load();
    outcome.records = results.all();
    write_summary_and_report(out_dir, outcome.records, tasks.size(), options_.run_record);
    return outcome;
}

void EvalRunner::worker(const std::vector<const EvalTask*>& queue, std::atomic<size_t>& next,
                        ResultsFile& results, const std::string& out_dir) {
    while (!stopping_.load()) {
        const size_t i = next.fetch_add(1);
        if (i >= queue.size()) return;
        const EvalTask& task = *queue[i];
        TaskRecord record;
        bool finished = false;
        try {
            finished = run_task(task, out_dir, &record);
        } catch (const std::exception& e) {
            // run_task handles its own faults; anything escaping is still this task's error only.
            record.status = "error";
            record.error = std::string("internal: ") + e.what();
            record.id = task.id;
            finished = !stopping_.load();
        }
        if (!finished) continue;
        try {
            results.append(record);
        } catch (const Error& e) {
            std::lock_guard<std::mutex> lock(mutex_);
            std::fprintf(stderr, "surf eval: cannot record task %s: %s\n", task.id.c_str(), e.what());
            continue;
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ++progress_.done;
            if (record.status == "error") ++progress_.errors;
            if (record.success.value_or(false)) ++progress_.succeeded;
        }
        if (on_record) on_record(record);
    }
}

// Scores an answered run: reference matches, the judge's verdict, and success from the page check, else the
// judge, else the references.
void EvalRunner::score(const EvalTask& task, const std::string& answer,
                       const std::vector<std::shared_ptr<const model::Image>>& shots, TaskRecord* rec) {
    if (!task.references.empty()) {
        const AnswerMatch m = match_answer(answer, task.references);
        rec->exact_match = m.exact;
        rec->normalized_match = m.normalized;
        rec->contains_match = m.contains;
    }
    if (judge_) {
        rec->judge = judge_->name();
        if (answer.empty()) {
            // Nothing to judge: the agent never declared the task done.
            rec->judge_success = false;
            rec->judge_reason = "the agent gave no answer";
        } else {
            const JudgeVerdict v = judge_->judge(JudgeInput{task.question, answer, shots});
            rec->judge_success = v.success;
            rec->judge_reason = v.success ? v.reason : "no usable verdict: " + v.error;
            rec->judge_tokens = v.tokens;
            rec->judge_seconds = v.seconds;
            tokens_ += v.tokens;
        }
    }
    if (rec->check_success) {
        rec->success = rec->check_success;
    } else if (rec->judge_success) {
        rec->success = rec->judge_success;
    } else if (rec->normalized_match) {
        rec->success = *rec->normalized_match || *rec->contains_match;
    }
}

bool EvalRunner::run_task(const EvalTask& task, const std::string& out_dir, TaskRecord* rec) {
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_.load()) return false;
        cancels_[&task] = cancel;
        ++progress_.running;
    }
    struct Unregister {
        EvalRunner* self;
        const EvalTask* task;
        ~Unregister() {
            std::lock_guard<std::mutex> lock(self->mutex_);
            self->cancels_.erase(task);
            --self->progress_.running;
        }
    } unregister{this, &task};

    const Clock::time_point t0 = Clock::now();
    rec->id = task.id;
    rec->site = task.site;
    rec->question = task.question;
    rec->start_url = task.start_url;
    rec->references = task.references;
    rec->reference_type = task.reference_type;
    rec->shard = options_.shard;
    rec->task_fields = task.fields;
    rec->started_at = utc_now_iso();
    rec->trace = "traces/" + task_dir_name(task.id);
    const fs::path trace_dir = fs::path(out_dir) / rec->trace;
    std::error_code ec;
    fs::remove_all(trace_dir, ec);  // a partial trace left by a stopped or killed run

    const RunOptions run = task_run_options(task, options_, trace_dir.string());

    CountingChatModel model(*model_, &tokens_);
    RunResult result;
    std::string fault;
    std::vector<std::shared_ptr<const model::Image>> shots;
    try {
        validate_run_options(run);
        tools::SessionOptions so;
        so.viewport.css_width = run.viewport_width;
        so.viewport.css_height = run.viewport_height;
        so.viewport.device_scale_factor = run.device_scale_factor;
        so.guard = run_guard(run);
        so.navigation_timeout =
            std::chrono::milliseconds(static_cast<int64_t>(options_.page_timeout_seconds * 1000));
        std::unique_ptr<tools::BrowserSession> session = browser_->new_session(so);
        EvalEnvironment env(*browser_, *session, task, profile_, options_, *cancel, after_open);
        Trace trace(run.trace_dir);
        LoopContext ctx;
        ctx.model = &model;
        ctx.profile = &profile_;
        ctx.environment = &env;
        ctx.trace = &trace;
        ctx.cancel = cancel.get();
        result = run_loop(ctx, run);
        fault = env.fault();
        if (!task.check.empty() && fault.empty()) run_page_check(*session, task.check, result.answer, rec);
        shots = env.screenshots();
        rec->browser_seconds = env.seconds();
    } catch (const Error& e) {
        fault = std::string(error_kind_name(e.kind())) + ": " + e.what();
        result.status = RunStatus::kError;
    }
    if (fault.empty() && stopping_.load() && result.status == RunStatus::kCancelled) return false;

    record_run(result, fault, model, rec);
    if (rec->status != "error") {
        score(task, result.answer, shots, rec);
    } else {
        rec->success = false;
    }
    if (!fs::exists(trace_dir / "trace.jsonl", ec)) rec->trace.clear();  // the task never got as far
    rec->wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    rec->finished_at = utc_now_iso();
    return true;
}

}  // namespace surf::eval
