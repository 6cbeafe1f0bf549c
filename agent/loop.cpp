#include "agent/loop.h"
#include "agent/secrets.h"
#include "base/utf8.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "agent/memory.h"
#include "agent/modules.h"
#include "base/error.h"
#include "model/vision/image_tiling.h"

namespace surf::agent {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string shorten(const std::string& s, size_t n) { return surf::shorten_utf8(s, n); }

// The CSS points of a pointed action, one per action_points() target: the policy's own estimates when
// they are trusted, else the localizer's. Returns "" or why a point is missing; *stopped is set when the
// localizer's generation was stopped (cancel or the hard deadline).
std::string locate_points(const Action& action, const RunOptions& options, const PromptProfile& profile,
                          Localizer& localizer, const std::shared_ptr<const model::Image>& sent,
                          const ScreenFrame& frame, int step, ActionPoints* points, bool* stopped) {
    const std::vector<PointTarget> targets = action_points(action);
    for (size_t i = 0; i < targets.size(); ++i) {
        if (!sent) return "no screenshot to locate the element on";
        std::optional<tools::CssPoint>& slot = i == 0 ? points->at : points->to;
        try {
            slot = options.trust_policy_coordinates
                       ? to_css(profile.policy_convention, targets[i].x, targets[i].y,
                                {sent->width, sent->height}, frame)
                       : localizer.locate(targets[i].element, sent, frame, step).css;
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
        return "\"" + url + "\": a " + scheme + ": URL is not a page to start on (http, https, file, data or about expected)";
    return "";
}

void validate_run_options(const RunOptions& o) {
    const auto bad = [](const std::string& m) { throw Error(ErrorKind::kInvalidArgument, m); };
    if (o.task.find_first_not_of(" \t\r\n") == std::string::npos) bad("task: empty");
    if (o.start_url.empty()) bad("start_url: empty");
    if (const std::string problem = start_url_problem(o.start_url); !problem.empty()) bad("start_url: " + problem);
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

// Asks the run's before-action hook about `action` (replaced in place when the hook says so). Returns "" to go
// ahead, else why not (the policy reads it as the step's outcome).
std::string ask_approval(const RunOptions& options, int step, const Observation& obs, Action* action) {
    if (!options.before_action) return "";
    ApprovalDecision d;
    try {
        d = options.before_action(ProposedAction{step, *action, describe_action(*action), obs.url, obs.image, obs.png});
    } catch (const std::exception& e) {
        d = ApprovalDecision::reject(std::string("the approval hook failed: ") + e.what());
    }
    switch (d.kind) {
        case ApprovalDecision::Kind::kApprove: return "";
        case ApprovalDecision::Kind::kReject:
            return "refused by the operator: " + (d.reason.empty() ? std::string("no reason given") : d.reason);
        case ApprovalDecision::Kind::kReplace:
            if (is_answer(d.replacement)) return "refused by the operator (an answer cannot replace a page action)";
            *action = d.replacement;
            return "";
    }
    return "";
}

}  // namespace

RunResult run_loop(const LoopContext& ctx, const RunOptions& options) {
    validate_run_options(options);
    const Secrets secrets(options.secrets);
    // A structured answer constrains the answer action's content in the policy's schemas for this run.
    const PromptProfile run_profile =
        options.answer_schema.empty() ? *ctx.profile : with_answer_content(*ctx.profile, options.answer_schema);
    const PromptProfile& profile = run_profile;
    const Clock::time_point t0 = Clock::now();
    // Past the budget the next step is the forced answer; past the hard deadline generation is stopped.
    const double hard_deadline = options.timeout_seconds + std::max(30.0, 0.25 * options.timeout_seconds);
    RunResult result;
    result.trace_dir = ctx.trace ? ctx.trace->dir() : "";
    Trace* trace = ctx.trace;
    struct SecretsOnTrace {  // the trace outlives this call: it must not keep a pointer to `secrets`
        Trace* trace;
        SecretsOnTrace(Trace* t, const Secrets* s) : trace(t) {
            if (trace) trace->set_secrets(s);
        }
        ~SecretsOnTrace() {
            if (trace) trace->set_secrets(nullptr);
        }
    } secrets_on_trace(trace, &secrets);
    const auto cancelled = [&] { return ctx.cancel && ctx.cancel->load(); };

    ModuleContext mc;
    mc.engine = ctx.engine;
    mc.chat_template = ctx.chat_template;
    mc.profile = &profile;
    mc.seed = options.seed;
    mc.sink = [&](const ModelCall& call) {
        ++result.model_calls;
        if (trace) trace->model_call(call);
    };
    mc.should_stop = [&] { return cancelled() || since(t0) > hard_deadline; };
    Policy policy(mc);
    Localizer localizer(mc);
    Validator validator(mc);
    const std::string note = secrets.prompt_note();
    Memory memory(note.empty() ? options.task : options.task + " (" + note + ")",
                  std::max(profile.screenshots_on_restart, profile.validator_screenshots));

    if (trace) {
        trace->write(
            {{"type", "run_start"},
             {"task", options.task},
             {"start_url", options.start_url},
             {"max_steps", options.max_steps},
             {"max_answer_attempts", options.max_answer_attempts},
             {"timeout_s", options.timeout_seconds},
             {"use_validator", options.use_validator},
             {"trust_policy_coordinates", options.trust_policy_coordinates},
             {"allow_domains", options.allow_domains},
             {"profile", profile.name},
             {"backend", ctx.engine->backend_name()},
             {"viewport", {options.viewport_width, options.viewport_height, options.device_scale_factor}}});
    }
    const ActionOutcome opened = ctx.environment->open(options.start_url);
    std::string last_outcome = "opened " + options.start_url + ": " + opened.message;
    if (trace)
        trace->write(
            {{"type", "open"}, {"url", options.start_url}, {"ok", opened.ok}, {"message", opened.message}});

    const auto emit = [&](StepEvent e) {
        e.elapsed = since(t0);
        for (std::string* f : {&e.action, &e.target, &e.description, &e.thought, &e.note, &e.outcome})
            *f = secrets.redact(*f);
        if (ctx.on_step) {
            try {
                ctx.on_step(e);
            } catch (...) {
                // A product's callback must not break the run.
            }
        }
    };
    if (!opened.ok) {
        // Acting on the browser's error page would only produce an answer about nothing.
        result.status = RunStatus::kError;
        result.error = secrets.redact("the start page did not load: " + opened.message);
        result.seconds = since(t0);
        if (trace) {
            trace->write({{"type", "run_end"}, {"status", run_status_name(result.status)}, {"error", result.error}});
            trace->finish(options, result);
        }
        StepEvent fin;
        fin.kind = StepEventKind::kFinished;
        fin.outcome = run_status_name(result.status);
        fin.ok = false;
        fin.description = result.error;
        emit(fin);
        return result;
    }

    bool done = false;
    for (int step = 1; step <= options.max_steps && !done; ++step) {
        if (cancelled()) {
            result.status = RunStatus::kCancelled;
            break;
        }
        const Clock::time_point step_t0 = Clock::now();
        const bool forced = step == options.max_steps || since(t0) > options.timeout_seconds;
        result.steps = step;

        Observation obs = ctx.environment->observe();
        const std::string page_url = obs.url;  // where a secret would be typed; what the model reads is redacted
        obs.url = secrets.redact(obs.url);
        obs.title = secrets.redact(obs.title);
        obs.error = secrets.redact(obs.error);
        for (std::string& e : obs.events) e = secrets.redact(e);
        const std::shared_ptr<const model::Image> sent = image_to_send(obs.image, profile);
        memory.add_screenshot(sent);
        TraceStep ts;
        ts.step = step;
        ts.url = obs.url;
        ts.events = obs.events;
        if (!obs.error.empty()) ts.events.push_back(obs.error);
        if (trace && !obs.png.empty()) {
            try {
                ts.screenshot = trace->screenshot(step, obs.png);
                ts.shot_width = obs.frame.width;
                ts.shot_height = obs.frame.height;
            } catch (const Error& e) {
                ts.error = e.what();
            }
        }
        std::string observation = "URL " + (obs.url.empty() ? "(unknown)" : obs.url) + ", title \"" +
                                  shorten(obs.title, 120) + "\". Last action: " + last_outcome + ".";
        for (const std::string& ev : obs.events) observation += " Browser event: " + ev + ".";
        if (!obs.error.empty()) observation += " " + obs.error + ".";

        StepEvent ev;
        ev.step = step;
        PolicyOutput decision;
        try {
            decision =
                policy.decide(memory, PolicyStepInput{step, options.max_steps, forced, observation, sent});
        } catch (const Error& e) {
            if (e.kind() == ErrorKind::kCancelled) {
                result.status = cancelled() ? RunStatus::kCancelled : RunStatus::kNoAnswer;
                result.error = cancelled() ? "cancelled" : "the hard time limit stopped generation";
                break;
            }
            ++result.errors;
            const std::string what = e.what();
            ts.error = what.rfind("policy:", 0) == 0 ? what : "policy: " + what;  // the model call names its role already
            ts.seconds = since(step_t0);
            if (trace) trace->step(ts);
            ev.ok = false;
            ev.outcome = ts.error;
            ev.seconds = since(step_t0);
            emit(ev);
            if (e.kind() != ErrorKind::kModelOutput) {
                // The engine itself failed (out of memory, bad input): nothing more can be done.
                result.status = RunStatus::kError;
                result.error = ts.error;
                break;
            }
            memory.add_history({step, "(no action)", "the output was unusable: " + shorten(e.what(), 200)});
            last_outcome = "none (the previous output was unusable)";
            if (forced) {
                result.status = RunStatus::kNoAnswer;
                result.error = "the forced answer step produced no usable answer";
                done = true;
            }
            continue;
        }
        memory.add_note(decision.note);
        ts.thought = decision.thought;
        ts.note = decision.note;
        ts.action = action_to_json(decision.action).dump();
        ev.action = action_name(decision.action);
        ev.target = action_target(decision.action);
        ev.description = describe_action(decision.action);
        ev.thought = decision.thought;
        ev.note = decision.note;

        if (auto* answer = std::get_if<AnswerAction>(&decision.action)) {
            ++result.answer_attempts;
            result.answer = answer->content;
            if (forced || !options.use_validator) {
                result.status = RunStatus::kAnswered;
                result.forced = forced;
                ts.outcome = forced ? "forced answer (not validated)" : "answer (validator off)";
                done = true;
            } else {
                Verdict verdict;
                bool verdict_ok = true;
                try {
                    verdict = validator.judge(memory, answer->content,
                                              memory.recent_screenshots(profile.validator_screenshots), step);
                } catch (const Error& e) {
                    if (e.kind() == ErrorKind::kCancelled) {
                        result.status = RunStatus::kCancelled;
                        done = true;
                    }
                    // An unusable verdict must not cost the run its answer: keep it, unvalidated.
                    verdict_ok = false;
                    verdict.success = true;
                    verdict.reason = std::string("validator failed: ") + e.what();
                    ++result.errors;
                }
                ts.verdicts.push_back(std::string(verdict.success ? "accepted" : "rejected") + ": " +
                                      verdict.reason);
                if (trace) {
                    trace->write({{"type", "verdict"},
                                  {"step", step},
                                  {"attempt", result.answer_attempts},
                                  {"answer", answer->content},
                                  {"success", verdict.success},
                                  {"usable", verdict_ok},
                                  {"reason", verdict.reason}});
                }
                if (done) {
                } else if (verdict.success) {
                    result.status = RunStatus::kAnswered;
                    result.validated = verdict_ok;
                    ts.outcome =
                        verdict_ok ? "answer accepted by the validator" : "answer kept (validator unusable)";
                    done = true;
                } else {
                    memory.add_note("Answer attempt " + std::to_string(result.answer_attempts) + " (\"" +
                                    shorten(answer->content, 200) +
                                    "\") was rejected by the validator: " + verdict.reason);
                    memory.add_history({step, describe_action(decision.action), "rejected by the validator"});
                    last_outcome = "your answer was rejected (see notes)";
                    ts.outcome = "answer rejected: " + verdict.reason;
                    StepEvent rej = ev;
                    rej.kind = StepEventKind::kAnswerRejected;
                    rej.outcome = verdict.reason;
                    emit(rej);
                    if (result.answer_attempts >= options.max_answer_attempts) {
                        result.status = RunStatus::kRejected;
                        result.error = "all " + std::to_string(result.answer_attempts) +
                                       " answer attempts were rejected";
                        done = true;
                    }
                }
            }
            ev.outcome = ts.outcome;
        } else {
            const std::string refusal = ask_approval(options, step, obs, &decision.action);
            if (refusal.empty() && options.before_action) {  // the hook may have replaced the action
                ts.action = action_to_json(decision.action).dump();
                ev.action = action_name(decision.action);
                ev.target = action_target(decision.action);
                ev.description = describe_action(decision.action);
            }
            ActionPoints points;
            bool stopped = false;
            const std::string point_error =
                refusal.empty() ? locate_points(decision.action, options, profile, localizer, sent, obs.frame, step,
                                                &points, &stopped)
                                : "";
            if (stopped) {
                result.status = cancelled() ? RunStatus::kCancelled : RunStatus::kNoAnswer;
                done = true;
            }
            ActionOutcome outcome;
            if (done) {
                outcome = {false, "cancelled", "cancelled"};
            } else if (!refusal.empty()) {
                outcome = {false, refusal, "refused"};
            } else if (!point_error.empty()) {
                outcome = {false, point_error, "model_output"};
            } else {
                std::optional<Action> typed;
                try {
                    typed = secrets.reveal(decision.action, page_url);
                } catch (const Error& e) {
                    outcome = {false, e.what(), "secret"};  // an unknown placeholder, or a host it may not reach
                }
                if (typed) outcome = ctx.environment->execute(*typed, points);
                outcome.message = secrets.redact(outcome.message);
            }
            if (!outcome.ok) {
                ++result.errors;
                ts.error = outcome.message;
            }
            const auto to_px = [&](const tools::CssPoint& p) {
                return std::pair<double, double>{(p.x - obs.frame.css_region.x) * obs.frame.pixels_per_css,
                                                 (p.y - obs.frame.css_region.y) * obs.frame.pixels_per_css};
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
            const std::vector<PointTarget> targets = action_points(decision.action);
            if (!targets.empty() && sent && !options.trust_policy_coordinates) {
                try {  // the policy's own guess, drawn beside the localizer's point in the report
                    std::tie(ts.policy_px, ts.policy_py) = to_px(to_css(profile.policy_convention, targets[0].x,
                                                                        targets[0].y, {sent->width, sent->height},
                                                                        obs.frame));
                    ts.has_policy_point = true;
                } catch (const Error&) {
                    // a guess outside the screenshot: nothing to draw
                }
            }
            ts.outcome = outcome.message;
            ev.outcome = outcome.message;
            ev.ok = outcome.ok;
            memory.add_history({step, describe_action(decision.action), shorten(outcome.message, 200)});
            last_outcome = describe_action(decision.action) + " -> " + shorten(outcome.message, 300);
        }
        ts.seconds = since(step_t0);
        if (trace) trace->step(ts);
        ev.seconds = ts.seconds;
        emit(ev);
    }
    if (!done && result.status == RunStatus::kNoAnswer && result.error.empty())
        result.error = "the step budget ran out";
    result.answer = secrets.redact(result.answer);
    result.error = secrets.redact(result.error);
    if (!options.answer_schema.empty() && !result.answer.empty()) {
        result.structured = nlohmann::json::parse(result.answer, nullptr, false);
        if (result.structured.is_discarded()) result.structured = nullptr;  // a remote model that ignored the schema
    }
    result.seconds = since(t0);
    if (trace) {
        trace->write({{"type", "run_end"},
                      {"status", run_status_name(result.status)},
                      {"answer", result.answer},
                      {"validated", result.validated},
                      {"forced", result.forced},
                      {"steps", result.steps},
                      {"answer_attempts", result.answer_attempts},
                      {"model_calls", result.model_calls},
                      {"errors", result.errors},
                      {"policy_fresh_starts", policy.fresh_starts()},
                      {"error", result.error},
                      {"seconds", result.seconds}});
        trace->finish(options, result);
    }
    StepEvent fin;
    fin.kind = StepEventKind::kFinished;
    fin.step = result.steps;
    fin.outcome = run_status_name(result.status);
    fin.ok = result.status == RunStatus::kAnswered;
    fin.description = result.answer;
    emit(fin);
    return result;
}

}  // namespace surf::agent
