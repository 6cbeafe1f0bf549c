#include "agent/loop.h"
#include "agent/action_registry.h"
#include "agent/secrets.h"
#include "base/utf8.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "agent/memory.h"
#include "agent/modules.h"
#include "agent/page_text.h"
#include "agent/thought_target.h"
#include "base/error.h"
#include "model/vision/image_tiling.h"

namespace surf::agent {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string shorten(const std::string& s, size_t n) {
    return surf::shorten_utf8(s, n);
}

// What one step saw: the observation (redacted where the model reads it), the page's real URL (where a secret
// would be typed), the screenshot as sent to the model, the observation text for the policy and the page's
// element list as each module's {elements} shows it ("" when the profile lists none).
struct StepView {
    Observation obs;
    std::string page_url;
    std::shared_ptr<const model::Image> sent;
    std::string text;
    std::string policy_elements, localizer_elements;  // the validator reads the policy's
    std::vector<ListedElement> policy_listed;         // the policy's list, with points in its convention
};

// The CSS points of a pointed action, one per action_points() target: a listed element's listed point when
// the profile acts on listed elements only, else the policy's own estimates when they are trusted, else the
// localizer's. Returns "" or why a point is missing; *stopped is set when the localizer's generation was
// stopped (cancel or the hard deadline).
std::string locate_points(const Action& action, const RunOptions& options, const PromptProfile& profile,
                          Localizer& localizer, const StepView& view, int step, ActionPoints* points,
                          bool* stopped) {
    const std::shared_ptr<const model::Image>& sent = view.sent;
    const ScreenFrame& frame = view.obs.frame;
    const std::vector<PointTarget> targets = action_points(action);
    for (size_t i = 0; i < targets.size(); ++i) {
        if (!sent) return "no screenshot to locate the element on";
        std::optional<tools::CssPoint>& slot = i == 0 ? points->at : points->to;
        const ImageSize size{sent->width, sent->height};
        const ListedElement* listed =
            profile.listed_elements_only
                ? find_listed(view.policy_listed, targets[i].element, targets[i].x, targets[i].y)
                : nullptr;
        try {
            if (listed)
                slot = to_css(profile.policy_convention, listed->x, listed->y, size, frame);
            else
                slot = options.trust_policy_coordinates
                           ? to_css(profile.policy_convention, targets[i].x, targets[i].y, size, frame)
                           : localizer.locate(targets[i].element, sent, frame, step, view.localizer_elements)
                                 .css;
        } catch (const Error& e) {
            *stopped = e.kind() == ErrorKind::kCancelled;
            return options.trust_policy_coordinates ? std::string(e.what())
                                                    : std::string("localizer: ") + e.what();
        }
    }
    return "";
}

}  // namespace

const char* run_status_name(RunStatus s) {
    switch (s) {
        case RunStatus::kAnswered: return "answered";
        case RunStatus::kRejected: return "rejected";
        case RunStatus::kNoAnswer: return "no_answer";
        case RunStatus::kCancelled: return "cancelled";
        case RunStatus::kError: return "error";
    }
    return "?";
}

std::string start_url_problem(const std::string& url) {
    std::string scheme;
    try {
        scheme = tools::parse_url_host(url).scheme;
    } catch (const Error&) {
        return "\"" + url + "\" is not an absolute URL (e.g. https://" + url + ")";
    }
    if (scheme != "http" && scheme != "https" && scheme != "file" && scheme != "data" && scheme != "about")
        return "\"" + url + "\": a " + scheme +
               ": URL is not a page to start on (http, https, file, data or about expected)";
    return "";
}

void validate_run_options(const RunOptions& o) {
    const auto bad = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
    if (o.task.find_first_not_of(" \t\r\n") == std::string::npos) bad("task: empty");
    if (o.start_url.empty()) bad("start_url: empty");
    if (const std::string problem = start_url_problem(o.start_url); !problem.empty())
        bad("start_url: " + problem);
    if (o.max_steps < 1 || o.max_steps > 1000)
        bad("max_steps: " + std::to_string(o.max_steps) + " is outside [1, 1000]");
    if (o.max_answer_attempts < 1 || o.max_answer_attempts > 100) {
        bad("max_answer_attempts: " + std::to_string(o.max_answer_attempts) + " is outside [1, 100]");
    }
    if (!(o.timeout_seconds > 0) || o.timeout_seconds > 86400) bad("timeout_seconds: must be in (0, 86400]");
    if (o.viewport_width < 16 || o.viewport_height < 16 || o.viewport_width > 8192 ||
        o.viewport_height > 8192) {
        bad("viewport: " + std::to_string(o.viewport_width) + "x" + std::to_string(o.viewport_height) +
            " is outside 16..8192");
    }
    if (!(o.max_wait_seconds >= 0 && o.max_wait_seconds <= 600)) bad("max_wait_seconds: must be in [0, 600]");
    if (!(o.device_scale_factor >= 0.25 && o.device_scale_factor <= 4))
        bad("device_scale_factor: must be in [0.25, 4]");
    Secrets(o.secrets).check_task(o.task);  // names, values, domains; no value in the task
    if (!o.answer_schema.empty()) {
        const nlohmann::json schema = nlohmann::json::parse(o.answer_schema, nullptr, false);
        if (schema.is_discarded() || !schema.is_object()) bad("answer_schema: not a JSON schema object");
    }
}

tools::LocalSchemes local_schemes(const RunOptions& o) {
    bool file_start = false;
    try {
        file_start = tools::parse_url_host(o.start_url).scheme == "file";
    } catch (const Error&) {
        // no scheme: not a file: page (validate_run_options refuses such a start URL anyway)
    }
    return o.allow_file_urls || file_start ? tools::LocalSchemes::kFileAlways : tools::LocalSchemes::kNever;
}

tools::NavigationGuard run_guard(const RunOptions& o) {
    const tools::LocalSchemes local = local_schemes(o);
    tools::NavigationGuard guard(o.allow_domains, o.deny_domains, local);
    if (!o.allow_file_urls && local == tools::LocalSchemes::kFileAlways) {  // started on a file: page
        guard.set_file_root(std::filesystem::path(tools::file_url_path(o.start_url)).parent_path().string());
    }
    return guard;
}

std::shared_ptr<const model::Image> image_to_send(const std::shared_ptr<const model::Image>& shot,
                                                  const PromptProfile& p) {
    if (!shot) return shot;
    const ImageSize fit = fit_size({shot->width, shot->height}, p.image_max_width, p.image_max_height);
    if (fit.width == shot->width && fit.height == shot->height) return shot;
    return std::make_shared<model::Image>(model::resize_bicubic(*shot, fit.width, fit.height));
}

namespace {

// Asks the run's before-action hook about `action` (replaced in place when the hook says so). Returns "" to
// go ahead, else why not (the policy reads it as the step's outcome).
std::string ask_approval(const RunOptions& options, int step, const Observation& obs, Action* action) {
    if (!options.before_action) return "";
    ApprovalDecision d;
    try {
        d = options.before_action(
            ProposedAction{step, *action, describe_action(*action), obs.url, obs.image, obs.png});
    } catch (const std::exception& e) {
        d = ApprovalDecision::reject(std::string("the approval hook failed: ") + e.what());
    }
    switch (d.kind) {
        case ApprovalDecision::Kind::kApprove: return "";
        case ApprovalDecision::Kind::kReject:
            return "refused by the operator: " +
                   (d.reason.empty() ? std::string("no reason given") : d.reason);
        case ApprovalDecision::Kind::kReplace:
            if (is_answer(d.replacement))
                return "refused by the operator (an answer cannot replace a page action)";
            *action = d.replacement;
            return "";
    }
    return "";
}

}  // namespace

namespace {

// The secrets' redaction on the trace for the length of one run: the trace outlives the run and must not keep
// a pointer to its secrets.
struct SecretsOnTrace {
    Trace* trace;
    SecretsOnTrace(Trace* t, const Secrets* s) : trace(t) {
        if (trace) trace->set_secrets(s);
    }
    ~SecretsOnTrace() {
        if (trace) trace->set_secrets(nullptr);
    }
};

// One run of the loop: its profile (with the run's answer schema and actions), modules, memory and result.
class Run {
public:
    Run(const LoopContext& ctx, const RunOptions& options);
    RunResult execute();

private:
    bool cancelled() const { return ctx_.cancel && ctx_.cancel->load(); }
    // Runs `f` (a call into the browser) and adds its wall time to RunResult::browser_seconds.
    template <typename F>
    auto in_browser(F&& f) {
        const Clock::time_point t = Clock::now();
        struct Add {
            double& total;
            Clock::time_point t;
            ~Add() { total += since(t); }
        } add{result_.browser_seconds, t};
        return f();
    }
    ModuleContext module_context(ChatModel* role = nullptr);
    void emit(StepEvent e) const;
    void write_start() const;
    RunResult fail_start(const ActionOutcome& opened);
    void step(int step);
    StepView observe(int step, TraceStep& ts);
    void list_elements(StepView& v);
    void policy_failed(const Error& e, int step, bool forced, const Clock::time_point& step_t0, TraceStep& ts,
                       StepEvent& ev);
    void answer(const AnswerAction& answer, const Action& action, const StepView& view, int step, bool forced,
                TraceStep& ts, StepEvent& ev);
    void act(Action action, int step, const StepView& view, TraceStep& ts, StepEvent& ev);
    ActionOutcome perform(const Action& action, const StepView& view, const ActionPoints& points);
    Action with_upload_path(const Action& action) const;
    void record_points(const Action& action, const StepView& view, const ActionPoints& points, TraceStep& ts,
                       StepEvent& ev) const;
    RunResult finish();

    const LoopContext& ctx_;
    const RunOptions& options_;
    const Secrets secrets_;
    std::vector<CustomActionSpec> actions_;
    const std::vector<std::string> uploads_;  // the upload folder's files, listed once (the schema's names)
    const std::vector<std::string> task_quotes_;  // the task's quoted strings (quoted_strings)
    PromptProfile profile_;
    const ActionRegistry
        registry_;  // what the run can perform: the profile's built-ins and the custom actions
    const Clock::time_point t0_ = Clock::now();
    // Past the budget the next step is the forced answer; past the hard deadline generation is stopped.
    const double hard_deadline_;
    RunResult result_;
    Trace* trace_;
    SecretsOnTrace secrets_on_trace_;
    Policy policy_;
    Localizer localizer_;
    Validator validator_;
    Memory memory_;
    std::string last_outcome_;
    bool done_ = false;
};

// A structured answer constrains the answer action's content in the policy's schemas for this run; the upload
// action (with an upload folder) and custom actions join, removed ones leave, the policy's schema and system
// prompt.
PromptProfile run_profile(const PromptProfile& base, const RunOptions& options,
                          const std::vector<std::string>& uploads,
                          const std::vector<CustomActionSpec>& actions) {
    PromptProfile p = options.answer_schema.empty() ? base : with_answer_content(base, options.answer_schema);
    if (!uploads.empty()) p = with_upload(p, uploads);
    if (!actions.empty() || !options.removed_actions.empty())
        p = with_actions(p, actions, options.removed_actions);
    return p;
}

std::vector<CustomActionSpec> run_actions(const RunOptions& options) {
    std::vector<CustomActionSpec> actions = options.custom_actions;
    if (options.ask_human) actions.push_back(ask_human_action(options.ask_human));
    return actions;
}

const RunOptions& validated(const RunOptions& options) {
    validate_run_options(options);
    return options;
}

std::string memory_task(const RunOptions& options, const Secrets& secrets) {
    const std::string note = secrets.prompt_note();
    return note.empty() ? options.task : options.task + " (" + note + ")";
}

Run::Run(const LoopContext& ctx, const RunOptions& options)
    : ctx_(ctx),
      options_(validated(options)),
      secrets_(options.secrets),
      actions_(run_actions(options)),
      uploads_(options.upload_dir.empty() ? std::vector<std::string>{} : upload_files(options.upload_dir)),
      task_quotes_(quoted_strings(options.task)),
      profile_(run_profile(*ctx.profile, options, uploads_, actions_)),
      registry_(run_registry(profile_.policy_actions, actions_, options.replaced_actions)),
      hard_deadline_(options.timeout_seconds + std::max(30.0, 0.25 * options.timeout_seconds)),
      trace_(ctx.trace),
      secrets_on_trace_(ctx.trace, &secrets_),
      policy_(module_context()),
      localizer_(module_context(ctx.localizer_model)),
      validator_(module_context(ctx.validator_model)),
      memory_(memory_task(options, secrets_),
              std::max(profile_.screenshots_on_restart, profile_.validator_screenshots)) {
    result_.trace_dir = trace_ ? trace_->dir() : "";
}

// The modules' view of the run (each module keeps a copy): every model call counted and traced, generation
// stopped on cancel or past the hard deadline.
ModuleContext Run::module_context(ChatModel* role) {
    ModuleContext mc;
    mc.model = role ? role : ctx_.model;
    if (!mc.model) throw Error(ErrorKind::kInvalidArgument, "LoopContext: no chat model");
    mc.profile = &profile_;
    mc.seed = options_.seed;
    mc.sink = [this](const ModelCall& call) {
        ++result_.model_calls;
        RoleUsage& u = result_.usage[call.role];
        ++u.calls;
        u.input_tokens += call.prefill_tokens;
        u.output_tokens += call.output_tokens;
        u.seconds += call.latency_seconds;
        result_.model_seconds += call.latency_seconds;
        if (trace_) trace_->model_call(call);
    };
    mc.should_stop = [this] { return cancelled() || since(t0_) > hard_deadline_; };
    return mc;
}

void Run::emit(StepEvent e) const {
    e.elapsed = since(t0_);
    for (std::string* f : {&e.action, &e.target, &e.description, &e.thought, &e.note, &e.outcome, &e.url})
        *f = secrets_.redact(*f);
    if (!ctx_.on_step) return;
    try {
        ctx_.on_step(e);
    } catch (...) {
        // A product's callback must not break the run.
    }
}

void Run::write_start() const {
    if (!trace_) return;
    trace_->write(
        {{"type", "run_start"},
         {"task", options_.task},
         {"start_url", options_.start_url},
         {"max_steps", options_.max_steps},
         {"max_answer_attempts", options_.max_answer_attempts},
         {"timeout_s", options_.timeout_seconds},
         {"use_validator", options_.use_validator},
         {"trust_policy_coordinates", options_.trust_policy_coordinates},
         {"allow_domains", options_.allow_domains},
         {"profile", profile_.name},
         {"backend", ctx_.model->name()},
         {"viewport", {options_.viewport_width, options_.viewport_height, options_.device_scale_factor}}});
}

// Acting on the browser's error page would only produce an answer about nothing: the run ends as an error.
RunResult Run::fail_start(const ActionOutcome& opened) {
    result_.status = RunStatus::kError;
    result_.error = secrets_.redact("the start page did not load: " + opened.message);
    result_.seconds = since(t0_);
    if (trace_) {
        trace_->write(
            {{"type", "run_end"}, {"status", run_status_name(result_.status)}, {"error", result_.error}});
        trace_->finish(options_, result_);
    }
    StepEvent fin;
    fin.kind = StepEventKind::kFinished;
    fin.outcome = run_status_name(result_.status);
    fin.ok = false;
    fin.description = result_.error;
    emit(fin);
    return result_;
}

RunResult Run::execute() {
    write_start();
    const ActionOutcome opened = in_browser([&] { return ctx_.environment->open(options_.start_url); });
    last_outcome_ = "opened " + options_.start_url + ": " + opened.message;
    if (trace_)
        trace_->write(
            {{"type", "open"}, {"url", options_.start_url}, {"ok", opened.ok}, {"message", opened.message}});
    if (!opened.ok) return fail_start(opened);
    for (int s = 1; s <= options_.max_steps && !done_; ++s) {
        if (cancelled()) {
            result_.status = RunStatus::kCancelled;
            break;
        }
        step(s);
    }
    return finish();
}

StepView Run::observe(int step, TraceStep& ts) {
    StepView v;
    v.obs = in_browser([&] { return ctx_.environment->observe(); });
    Observation& obs = v.obs;
    v.page_url = obs.url;  // where a secret would be typed; what the model reads is redacted
    obs.url = secrets_.redact(obs.url);
    obs.title = secrets_.redact(obs.title);
    obs.error = secrets_.redact(obs.error);
    for (std::string& e : obs.events) e = secrets_.redact(e);
    for (std::string& t : obs.tabs) t = secrets_.redact(t);
    result_.final_url = obs.url;
    v.sent = image_to_send(obs.image, profile_);
    memory_.add_screenshot(v.sent);
    ts.step = step;
    ts.url = obs.url;
    ts.events = obs.events;
    if (!obs.error.empty()) ts.events.push_back(obs.error);
    if (trace_ && !obs.png.empty()) {
        try {
            ts.screenshot = trace_->screenshot(step, obs.png);
            result_.screenshots.push_back(ts.screenshot);
            ts.shot_width = obs.frame.width;
            ts.shot_height = obs.frame.height;
        } catch (const Error& e) {
            ts.error = e.what();
        }
    }
    v.text = "URL " + (obs.url.empty() ? "(unknown)" : obs.url) + ", title \"" + shorten(obs.title, 120) +
             "\". Last action: " + last_outcome_ + ".";
    for (const std::string& ev : obs.events) v.text += " Browser event: " + ev + ".";
    if (!obs.tabs.empty()) {
        v.text += " Open tabs:";
        for (const std::string& t : obs.tabs) v.text += " " + shorten(t, 200) + ";";
    }
    if (!obs.error.empty()) v.text += " " + obs.error + ".";
    if (profile_.page_elements > 0) {
        list_elements(v);
        ts.elements = v.policy_elements;
    }
    return v;
}

// The page's element list in each module's convention; a page that does not answer lists "(none)" and the
// step goes on with the screenshot.
void Run::list_elements(StepView& v) {
    std::vector<tools::PageElement> elements;
    if (v.sent) {
        try {
            elements = in_browser([&] { return ctx_.environment->elements(); });
        } catch (const Error& e) {
            v.text += " The page's element list could not be read (" + secrets_.redact(e.what()) + ").";
        }
    }
    for (tools::PageElement& e : elements) {
        e.description = secrets_.redact(e.description);
        e.state = secrets_.redact(e.state);
    }
    const ImageSize sent = v.sent ? ImageSize{v.sent->width, v.sent->height} : ImageSize{};
    const auto listed = [&](PointConvention c) {
        return listed_points(elements, profile_.page_elements, c, sent, v.obs.frame, task_quotes_);
    };
    v.policy_listed = listed(profile_.policy_convention);
    v.policy_elements = elements_text(v.policy_listed);
    v.localizer_elements = elements_text(listed(profile_.localizer_convention));
}

void Run::step(int step) {
    const Clock::time_point step_t0 = Clock::now();
    const bool forced = step == options_.max_steps || since(t0_) > options_.timeout_seconds;
    result_.steps = step;
    TraceStep ts;
    const StepView view = observe(step, ts);
    StepEvent ev;
    ev.step = step;
    ev.url = view.obs.url;
    ev.screenshot = view.obs.image;
    StepEvent started = ev;
    started.kind = StepEventKind::kStepStarted;
    emit(started);
    PolicyOutput decision;
    try {
        PolicyStepInput in{step, options_.max_steps, forced, view.text, view.sent, view.policy_elements, {}};
        if (profile_.listed_elements_only)
            for (const ListedElement& e : view.policy_listed) in.element_choices.push_back(e.description);
        if (profile_.typed_text_from_task_quotes) in.text_choices = task_quotes_;
        decision = policy_.decide(memory_, in);
    } catch (const Error& e) {
        policy_failed(e, step, forced, step_t0, ts, ev);
        return;
    }
    if (profile_.element_follows_thought)
        ts.policy_element = follow_thought(decision.action, decision.thought, view.policy_listed);
    memory_.add_note(decision.note);
    ts.thought = decision.thought;
    ts.note = decision.note;
    ts.action = action_to_json(decision.action).dump();
    ev.action = action_name(decision.action);
    ev.target = action_target(decision.action);
    ev.description = describe_action(decision.action);
    ev.thought = decision.thought;
    ev.note = decision.note;
    if (const auto* a = std::get_if<AnswerAction>(&decision.action))
        answer(*a, decision.action, view, step, forced, ts, ev);
    else
        act(decision.action, step, view, ts, ev);
    ts.seconds = since(step_t0);
    if (trace_) trace_->step(ts);
    ev.seconds = ts.seconds;
    emit(ev);
}

// The policy produced nothing usable: a stop ends the run, an engine failure is an error, malformed output is
// recorded and the run goes on (a forced step then ends it without an answer).
void Run::policy_failed(const Error& e, int step, bool forced, const Clock::time_point& step_t0,
                        TraceStep& ts, StepEvent& ev) {
    if (e.kind() == ErrorKind::kCancelled) {
        result_.status = cancelled() ? RunStatus::kCancelled : RunStatus::kNoAnswer;
        result_.error = cancelled() ? "cancelled" : "the hard time limit stopped generation";
        done_ = true;
        return;
    }
    ++result_.errors;
    const std::string what = e.what();
    ts.error =
        what.rfind("policy:", 0) == 0 ? what : "policy: " + what;  // the model call names its role already
    ts.seconds = since(step_t0);
    if (trace_) trace_->step(ts);
    ev.ok = false;
    ev.outcome = ts.error;
    ev.seconds = since(step_t0);
    emit(ev);
    if (e.kind() != ErrorKind::kModelOutput) {
        // The engine itself failed (out of memory, bad input): nothing more can be done.
        result_.status = RunStatus::kError;
        result_.error = ts.error;
        done_ = true;
        return;
    }
    memory_.add_history({step, "(no action)", "the output was unusable: " + shorten(e.what(), 200)});
    last_outcome_ = "none (the previous output was unusable)";
    if (forced) {
        result_.status = RunStatus::kNoAnswer;
        result_.error = "the forced answer step produced no usable answer";
        done_ = true;
    }
}

// An answer: kept when forced or unvalidated, else judged by the validator; a rejection goes into the notes
// and the run goes on until the attempts run out.
void Run::answer(const AnswerAction& answer, const Action& action, const StepView& view, int step,
                 bool forced, TraceStep& ts, StepEvent& ev) {
    ++result_.answer_attempts;
    result_.answer = answer.content;
    if (forced || !options_.use_validator) {
        result_.status = RunStatus::kAnswered;
        result_.forced = forced;
        ts.outcome = forced ? "forced answer (not validated)" : "answer (validator off)";
        ev.outcome = ts.outcome;
        done_ = true;
        return;
    }
    Verdict verdict;
    bool verdict_ok = true;
    try {
        verdict = validator_.judge(memory_, answer.content,
                                   memory_.recent_screenshots(profile_.validator_screenshots), step,
                                   view.policy_elements);
    } catch (const Error& e) {
        if (e.kind() == ErrorKind::kCancelled) {
            result_.status = RunStatus::kCancelled;
            done_ = true;
        }
        // An unusable verdict must not cost the run its answer: keep it, unvalidated.
        verdict_ok = false;
        verdict.success = true;
        verdict.reason = std::string("validator failed: ") + e.what();
        ++result_.errors;
    }
    ts.verdicts.push_back(std::string(verdict.success ? "accepted" : "rejected") + ": " + verdict.reason);
    if (trace_) {
        trace_->write({{"type", "verdict"},
                       {"step", step},
                       {"attempt", result_.answer_attempts},
                       {"answer", answer.content},
                       {"success", verdict.success},
                       {"usable", verdict_ok},
                       {"reason", verdict.reason}});
    }
    if (done_) {
    } else if (verdict.success) {
        result_.status = RunStatus::kAnswered;
        result_.validated = verdict_ok;
        ts.outcome = verdict_ok ? "answer accepted by the validator" : "answer kept (validator unusable)";
        done_ = true;
    } else {
        memory_.add_note("Answer attempt " + std::to_string(result_.answer_attempts) + " (\"" +
                         shorten(answer.content, 200) +
                         "\") was rejected by the validator: " + verdict.reason);
        memory_.add_history({step, describe_action(action), "rejected by the validator"});
        last_outcome_ = "your answer was rejected (see notes)";
        ts.outcome = "answer rejected: " + verdict.reason;
        StepEvent rej = ev;
        rej.kind = StepEventKind::kAnswerRejected;
        rej.outcome = verdict.reason;
        emit(rej);
        if (result_.answer_attempts >= options_.max_answer_attempts) {
            result_.status = RunStatus::kRejected;
            result_.error =
                "all " + std::to_string(result_.answer_attempts) + " answer attempts were rejected";
            done_ = true;
        }
    }
    ev.outcome = ts.outcome;
}

// An action on the page: the approval hook, the points located, then the browser (or a custom action's
// handler).
void Run::act(Action action, int step, const StepView& view, TraceStep& ts, StepEvent& ev) {
    const std::string refusal = ask_approval(options_, step, view.obs, &action);
    if (refusal.empty() && options_.before_action) {  // the hook may have replaced the action
        ts.action = action_to_json(action).dump();
        ev.action = action_name(action);
        ev.target = action_target(action);
        ev.description = describe_action(action);
    }
    ActionPoints points;
    bool stopped = false;
    const std::string point_error =
        refusal.empty() ? locate_points(action, options_, profile_, localizer_, view, step, &points, &stopped)
                        : "";
    if (stopped) {
        result_.status = cancelled() ? RunStatus::kCancelled : RunStatus::kNoAnswer;
        done_ = true;
    }
    ActionOutcome outcome;
    if (done_) {
        outcome = {false, "cancelled", "cancelled"};
    } else if (!refusal.empty()) {
        outcome = {false, refusal, "refused"};
    } else if (!point_error.empty()) {
        outcome = {false, point_error, "model_output"};
    } else {
        outcome = perform(action, view, points);
    }
    if (!outcome.ok) {
        ++result_.errors;
        ts.error = outcome.message;
    }
    record_points(action, view, points, ts, ev);
    ts.outcome = outcome.message;
    ev.outcome = outcome.message;
    ev.ok = outcome.ok;
    memory_.add_history({step, describe_action(action), shorten(outcome.message, 200)});
    last_outcome_ = describe_action(action) + " -> " + shorten(outcome.message, 300);
}

// An upload's file name turned into its path in the run's upload folder (a name the folder does not list is
// refused: nothing outside it is ever uploaded).
Action Run::with_upload_path(const Action& action) const {
    const auto* u = std::get_if<UploadAction>(&action);
    if (!u) return action;
    if (std::find(uploads_.begin(), uploads_.end(), u->file) == uploads_.end())
        throw Error(ErrorKind::kInvalidArgument,
                    "\"" + u->file + "\" is not a file of the run's upload folder");
    UploadAction resolved = *u;
    resolved.file = (std::filesystem::path(options_.upload_dir) / u->file).string();
    return resolved;
}

// The action with its secrets revealed, done by the browser or by its handler; the outcome redacted.
ActionOutcome Run::perform(const Action& action, const StepView& view, const ActionPoints& points) {
    ActionOutcome outcome;
    std::optional<Action> typed;
    try {
        typed = secrets_.reveal(with_upload_path(action), view.page_url);
    } catch (const Error& e) {
        outcome = {false, e.what(), "refused"};  // an unknown placeholder or file, or a host it may not reach
    }
    if (typed)
        outcome = in_browser([&] {
            return registry_.perform(ActionRequest{*typed, points, view.page_url, *ctx_.environment});
        });
    outcome.message = secrets_.redact(outcome.message);
    return outcome;
}

// Where the action acted, in screenshot pixels for the trace (and CSS pixels for the event), and the policy's
// own guess drawn beside the localizer's point in the report.
void Run::record_points(const Action& action, const StepView& view, const ActionPoints& points, TraceStep& ts,
                        StepEvent& ev) const {
    const ScreenFrame& frame = view.obs.frame;
    const auto to_px = [&](const tools::CssPoint& p) {
        return std::pair<double, double>{(p.x - frame.css_region.x) * frame.pixels_per_css,
                                         (p.y - frame.css_region.y) * frame.pixels_per_css};
    };
    if (points.at) {
        ts.has_point = true;
        std::tie(ts.point_px, ts.point_py) = to_px(*points.at);
        ev.has_point = true;
        ev.x = points.at->x;
        ev.y = points.at->y;
    }
    if (points.to) {
        ts.has_to_point = true;
        std::tie(ts.to_px, ts.to_py) = to_px(*points.to);
    }
    const std::vector<PointTarget> targets = action_points(action);
    if (targets.empty() || !view.sent || options_.trust_policy_coordinates) return;
    try {
        std::tie(ts.policy_px, ts.policy_py) =
            to_px(to_css(profile_.policy_convention, targets[0].x, targets[0].y,
                         {view.sent->width, view.sent->height}, frame));
        ts.has_policy_point = true;
    } catch (const Error&) {
        // a guess outside the screenshot: nothing to draw
    }
}

RunResult Run::finish() {
    if (!done_ && result_.status == RunStatus::kNoAnswer && result_.error.empty())
        result_.error = "the step budget ran out";
    result_.answer = secrets_.redact(result_.answer);
    result_.error = secrets_.redact(result_.error);
    if (!options_.answer_schema.empty() && !result_.answer.empty()) {
        result_.structured = nlohmann::json::parse(result_.answer, nullptr, false);
        if (result_.structured.is_discarded())
            result_.structured = nullptr;  // a remote model ignored the schema
    }
    result_.seconds = since(t0_);
    if (trace_) {
        trace_->write({{"type", "run_end"},
                       {"status", run_status_name(result_.status)},
                       {"answer", result_.answer},
                       {"validated", result_.validated},
                       {"forced", result_.forced},
                       {"steps", result_.steps},
                       {"answer_attempts", result_.answer_attempts},
                       {"model_calls", result_.model_calls},
                       {"errors", result_.errors},
                       {"policy_fresh_starts", policy_.fresh_starts()},
                       {"final_url", result_.final_url},
                       {"model_seconds", result_.model_seconds},
                       {"browser_seconds", result_.browser_seconds},
                       {"error", result_.error},
                       {"seconds", result_.seconds}});
        trace_->finish(options_, result_);
    }
    StepEvent fin;
    fin.kind = StepEventKind::kFinished;
    fin.step = result_.steps;
    fin.outcome = run_status_name(result_.status);
    fin.ok = result_.status == RunStatus::kAnswered;
    fin.description = result_.answer;
    emit(fin);
    return result_;
}

}  // namespace

RunResult run_loop(const LoopContext& ctx, const RunOptions& options) {
    Run run(ctx, options);
    return run.execute();
}

}  // namespace surf::agent
