// `surf eval TASKS --out DIR`: an evaluation on a WebVoyager, Online-Mind2Web or surf task file, C agents at
// once on one engine and one browser, resumable (re-run the same command to continue), with results.jsonl,
// summary.json and report.html in DIR (and Online-Mind2Web's WebJudge layout with --mind2web-out). `surf eval
// merge DIR... --out DIR` combines result folders (shards). Exit codes: 0 every task ran (whatever the agents
// scored), 1 stopped with Ctrl-C (resumable), 2 bad usage or input, 3 error (browser could not start, engine
// failure).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "agent/conversation.h"
#include "agent/profile.h"
#include "apps/cli.h"
#include "apps/config_file.h"
#include "apps/load_report.h"
#include "apps/remote_model.h"
#include "base/error.h"
#include "eval/eval_config.h"
#include "eval/eval_judge.h"
#include "eval/eval_mind2web.h"
#include "eval/eval_report.h"
#include "eval/eval_runner.h"
#include "eval/eval_tasks.h"
#include "model/engine.h"
#include "model/text/chat_template.h"

namespace {

using surf::Error;
using surf::ErrorKind;

const std::vector<surf::cli::FlagSpec> kEvalFlags = {
    {"out", "DIR", "results folder (results.jsonl, summary.json, report.html, traces/); re-run to resume"},
    {"model", "DIR|URL",
     "model folder (default $SURF_MODEL, else the shipped surf-tiny), or an OpenAI-compatible server "
     "http://HOST:PORT/v1, or several comma-separated (replicas: each chat stays on one; one that is "
     "down passes its chats to another)"},
    {"backend", "NAME", "cpu (default) or cuda"},
    {"model-name", "NAME", "with --model http://HOST:PORT/v1: the served model's name"},
    {"api-key", "KEY", "with a remote --model: Bearer key (default $SURF_API_KEY)"},
    {"tokenizer", "DIR",
     "with a remote --model: a local checkpoint folder whose special tokens to neutralise"},
    {"concurrency", "C", "agents running at once on the one engine and browser (default 1)"},
    {"ids", "ID,...", "run only these tasks (comma-separated or repeated)", true},
    {"sites", "SITE,...", "run only tasks on these sites (web_name, case-insensitive)", true},
    {"limit", "N", "run only the first N tasks (after --ids and --sites)"},
    {"dry-run", "", "check the task file, print the selected tasks and the plan, run nothing"},
    {"shard", "i/n", "run only the i-th of n shards (task k goes to shard k mod n), after the selection"},
    {"max-steps", "N", "policy steps per task unless the task sets max_steps (default 15)"},
    {"attempts", "K", "answers the validator may reject (default 3)"},
    {"judge", "NAME", "local (our engine, WebVoyager auto-evaluator protocol; default), remote or none"},
    {"judge-model", "URL",
     "with --judge remote: an OpenAI-compatible server http://HOST:PORT/v1 (key: $SURF_JUDGE_API_KEY)"},
    {"judge-model-name", "NAME", "with --judge remote: the served model's name"},
    {"judge-screenshots", "K", "last screenshots the judge sees (default 3)"},
    {"judge-schema", "FILE", "verdict schema (default prompts/schemas/judge_verdict.schema.json)"},
    {"references", "FILE", "WebVoyager reference_answer.json to match answers against"},
    {"mind2web-out", "DIR",
     "also write every recorded task in Online-Mind2Web's WebJudge layout (DIR/<task_id>/result.json, "
     "trajectory/); an Online-Mind2Web task file writes it to OUT/mind2web unless this names another folder"},
    {"allow-domain", "D", "hosts tasks may open, unless a task lists its own allowed_domains", true},
    {"deny-domain", "D", "hosts that may never be opened", true},
    {"timeout", "S", "wall-time budget per task in seconds (default 600)"},
    {"page-timeout", "S", "a start page slower than this makes the task an error (default 30)"},
    {"retry-errors", "", "run tasks recorded as errors again"},
    {"no-validator", "", "accept the first answer without validation"},
    {"trust-policy-coordinates", "", "click where the policy points instead of asking the localizer"},
    {"profile", "FILE",
     "prompt profile, JSON or YAML (default: the model folder's surf_profile.json, else "
     "prompts/profile_holotron.json)"},
    {"template", "FILE", "a Jinja chat template instead of the checkpoint's"},
    {"viewport", "WxH", "browser viewport in CSS pixels (default 1024x768, WebVoyager's)"},
    {"seed", "S", "sampling seed (default 0)"},
    {"chromium", "PATH", "Chromium binary"},
    {"config", "FILE",
     "a run configuration (YAML or JSON) whose keys are these flags' names; flags given here win"},
    {"force", "", "resume into a folder whose recorded configuration (config.json) differs"}};

volatile std::sig_atomic_t g_interrupted = 0;
void on_sigint(int) {
    g_interrupted = 1;
}

std::string duration_text(double s) {
    char buf[32];
    if (!(s >= 0) || s > 1e7) return "?";
    const long t = static_cast<long>(s + 0.5);
    if (t >= 3600) {
        std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    } else {
        std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    }
    return buf;
}

// One status line: [#####.....] 12/50 done  7 ok  5 failed (1 errors)  4 running  ETA 3m10s  850 tok/s
std::string progress_line(const surf::eval::EvalProgress& p) {
    const size_t todo = p.total - p.skipped;
    const size_t width = 24;
    const size_t filled = todo == 0 ? width : width * p.done / todo;
    std::string bar(filled, '#');
    bar.resize(width, '.');
    double eta = -1;
    if (p.done > 0) eta = p.elapsed / static_cast<double>(p.done) * static_cast<double>(todo - p.done);
    char buf[256];
    // "failed" = done but not succeeded (agent failures and errors); errors are also counted apart.
    std::snprintf(buf, sizeof buf,
                  "[%s] %zu/%zu done  %zu ok  %zu failed (%zu errors)  %zu running  ETA %s  %.0f tok/s%s",
                  bar.c_str(), p.done, todo, p.succeeded, p.done - p.succeeded, p.errors, p.running,
                  p.done > 0 ? duration_text(eta).c_str() : "?",
                  p.elapsed > 0 ? static_cast<double>(p.tokens) / p.elapsed : 0.0,
                  p.stopping ? "  stopping..." : "");
    return buf;
}

// Online-Mind2Web's WebJudge layout of every recorded task (eval/eval_mind2web.h).
void export_mind2web(const std::string& results_dir, const std::vector<surf::eval::TaskRecord>& records,
                     const std::string& dir) {
    const auto done = surf::eval::write_mind2web(results_dir, records, dir);
    std::printf("Online-Mind2Web trajectories: %s (%zu tasks, %zu screenshots)\n", dir.c_str(), done.tasks,
                done.screenshots);
}

int merge(const surf::cli::Args& args) {
    std::vector<std::string> dirs(args.positional().begin() + 1, args.positional().end());
    if (dirs.empty())
        throw Error(ErrorKind::kInvalidArgument, "merge: expected result folders: merge DIR... --out DIR");
    for (const char* flag : {"model", "model-name", "api-key", "tokenizer", "backend", "concurrency", "shard",
                             "max-steps", "attempts", "judge", "config", "force"}) {
        if (args.has(flag))
            throw Error(ErrorKind::kInvalidArgument, std::string("merge takes only --out, not --") + flag);
    }
    const std::string out = args.require("out");
    const auto records = surf::eval::merge_results(dirs, out);
    if (args.has("mind2web-out")) export_mind2web(out, records, args.get("mind2web-out"));
    const auto s = surf::eval::summarize(records);
    std::printf("merged %zu tasks from %zu folders: %zu succeeded (%.1f%%), %zu errors\n", records.size(),
                dirs.size(), s["succeeded"].get<size_t>(), 100 * s["success_rate"].get<double>(),
                s["errors"].get<size_t>());
    std::printf("results: %s/results.jsonl, report: %s/report.html\n", out.c_str(), out.c_str());
    return 0;
}

// A flag given as a comma-separated list, or several times: every non-empty item.
std::vector<std::string> comma_list(const surf::cli::Args& args, const std::string& name) {
    std::vector<std::string> items;
    for (const std::string& value : args.all(name)) {
        const std::vector<std::string> more = surf::cli::comma_items(value);
        items.insert(items.end(), more.begin(), more.end());
    }
    return items;
}

// `--dry-run`: what a run would do, task by task, without a model or a browser.
void print_plan(const std::string& file, surf::eval::TaskFormat format, size_t in_file,
                const std::vector<surf::eval::EvalTask>& tasks, const surf::eval::EvalOptions& options,
                const std::string& judge) {
    std::map<std::string, int> per_site;
    for (const auto& t : tasks) ++per_site[t.site];
    std::printf(
        "%s (%s format): %zu tasks, %zu selected; %d at once, %d steps unless a task sets its own, "
        "judge %s, validator %s\n",
        file.c_str(), surf::eval::task_format_name(format), in_file, tasks.size(), options.concurrency,
        options.max_steps, judge.c_str(), options.use_validator ? "on" : "off");
    for (const auto& [site, n] : per_site) std::printf("  %-24s %d\n", site.c_str(), n);
    for (const auto& t : tasks) {
        const std::string q = t.question.size() > 70 ? t.question.substr(0, 67) + "..." : t.question;
        std::printf("%s\t%s\t%s\t%s\n", t.id.c_str(), t.site.c_str(), t.start_url.c_str(), q.c_str());
    }
}

// The run options the flags set (defaults where a flag is not given).
surf::eval::EvalOptions read_options(const surf::cli::Args& args) {
    surf::eval::EvalOptions options;
    options.concurrency = static_cast<int>(args.get_int("concurrency", 1, 1, 256));
    options.max_steps = static_cast<int>(args.get_int("max-steps", 15, 1, 1000));
    options.attempts = static_cast<int>(args.get_int("attempts", 3, 1, 100));
    options.task_timeout_seconds = args.get_double("timeout", 600, 0.001, 86400);
    options.page_timeout_seconds = args.get_double("page-timeout", 30, 0.1, 3600);
    options.use_validator = !args.has("no-validator");
    options.trust_policy_coordinates = args.has("trust-policy-coordinates");
    options.allow_domains = args.all("allow-domain");
    options.deny_domains = args.all("deny-domain");
    args.get_size("viewport", &options.viewport_width, &options.viewport_height);
    options.judge_screenshots = static_cast<int>(args.get_int("judge-screenshots", 3, 1, 64));
    options.retry_errors = args.has("retry-errors");
    options.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0, 9223372036854775807LL));
    options.shard = args.get("shard");
    return options;
}

// A flag's value, or null when it is not given.
nlohmann::ordered_json optional_flag(const surf::cli::Args& args, const std::string& name) {
    return args.has(name) ? nlohmann::ordered_json(args.get(name)) : nlohmann::ordered_json(nullptr);
}

// A path as an absolute, normalised path (a URL or "" unchanged), so that a recorded configuration names the
// same files from any working directory.
std::string absolute_path(const std::string& path) {
    if (path.empty() || path.find("://") != std::string::npos) return path;
    return std::filesystem::absolute(path).lexically_normal().string();
}

// A path flag's absolute path, or null when it is not given.
nlohmann::ordered_json optional_path(const surf::cli::Args& args, const std::string& name) {
    return args.has(name) ? nlohmann::ordered_json(absolute_path(args.get(name)))
                          : nlohmann::ordered_json(nullptr);
}

// The run's full resolved configuration, keyed like the flags: the value each flag has in this run, given or
// default, with absolute paths, so that it is itself a --config for the same run. --api-key (a secret),
// --dry-run, --config and --force (how to run, not what) are left out.
nlohmann::ordered_json resolved_config(const surf::cli::Args& args, const std::string& model_dir,
                                       const surf::eval::EvalOptions& o,
                                       const surf::eval::TaskSelection& selection,
                                       const std::string& judge_kind, const std::string& mind2web_out) {
    const bool remote = surf::cli::is_remote_model(model_dir);
    nlohmann::ordered_json c;
    c["tasks"] = absolute_path(args.positional()[0]);
    c["out"] = optional_path(args, "out");
    c["model"] = model_dir.empty() ? nlohmann::ordered_json(nullptr)
                                   : nlohmann::ordered_json(absolute_path(model_dir));
    c["backend"] =
        remote ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(args.get("backend", "cpu"));
    c["model-name"] = optional_flag(args, "model-name");
    c["tokenizer"] = optional_path(args, "tokenizer");
    c["concurrency"] = o.concurrency;
    c["ids"] = selection.ids;
    c["sites"] = selection.sites;
    c["limit"] = selection.limit;
    c["shard"] = optional_flag(args, "shard");
    c["max-steps"] = o.max_steps;
    c["attempts"] = o.attempts;
    c["judge"] = judge_kind;
    c["judge-model"] = optional_flag(args, "judge-model");
    c["judge-model-name"] = optional_flag(args, "judge-model-name");
    c["judge-screenshots"] = o.judge_screenshots;
    c["judge-schema"] = optional_path(args, "judge-schema");
    c["references"] = optional_path(args, "references");
    c["mind2web-out"] = mind2web_out.empty() ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(absolute_path(mind2web_out));
    c["allow-domain"] = o.allow_domains;
    c["deny-domain"] = o.deny_domains;
    c["timeout"] = o.task_timeout_seconds;
    c["page-timeout"] = o.page_timeout_seconds;
    c["retry-errors"] = o.retry_errors;
    c["no-validator"] = !o.use_validator;
    c["trust-policy-coordinates"] = o.trust_policy_coordinates;
    const std::string profile = args.get("profile");
    c["profile"] = absolute_path(profile.empty() ? surf::agent::profile_for_model(model_dir) : profile);
    c["template"] = optional_path(args, "template");
    c["viewport"] = std::to_string(o.viewport_width) + "x" + std::to_string(o.viewport_height);
    c["seed"] = o.seed;
    c["chromium"] = optional_flag(args, "chromium");
    return c;
}

// Flags that may change between runs into one results folder: where the results go, how fast, which of the
// tasks and which browser binary; not what is measured.
const std::vector<std::string> kResumeFreeKeys = {"out",   "concurrency",  "ids",          "sites",   "limit",
                                                  "shard", "retry-errors", "mind2web-out", "chromium"};

// The agents' model: an OpenAI-compatible server (every running task has one call out at a time) or a folder
// loaded in process.
std::shared_ptr<surf::agent::ChatModel> open_model(const surf::cli::Args& args, const std::string& model_dir,
                                                   int concurrency) {
    if (surf::cli::is_remote_model(model_dir))
        return surf::cli::open_remote_model(args, model_dir, concurrency);
    const std::string backend = args.get("backend", "cpu");
    std::fprintf(stderr, "loading %s (%s) ...\n", model_dir.c_str(), backend.c_str());
    const auto load_start = std::chrono::steady_clock::now();
    std::shared_ptr<surf::model::Engine> engine = surf::model::open_engine(
        model_dir, backend, "--backend", 0,
        concurrency > 1 ? surf::model::WarmUp::kServing : surf::model::WarmUp::kSingle);
    surf::cli::print_loaded(model_dir, *engine, load_start);
    return surf::agent::EngineChatModel::open(engine, args.get("template"));
}

// The judge (null for --judge none): the WebVoyager protocol on the agents' model, or on a remote server's
// (e.g. a stronger model served by vLLM or another surf serve).
std::shared_ptr<surf::eval::Judge> make_judge(const surf::cli::Args& args, const std::string& kind,
                                              const std::shared_ptr<surf::agent::ChatModel>& model,
                                              const surf::agent::PromptProfile& profile) {
    if (kind != "local" && kind != "remote") return nullptr;
    std::shared_ptr<surf::agent::ChatModel> judge_model = model;
    if (kind == "remote") {
        surf::agent::RemoteChatOptions remote;
        remote.client.base_url = args.require("judge-model");
        remote.client.model_name = args.require("judge-model-name");
        if (const char* key = std::getenv("SURF_JUDGE_API_KEY")) remote.client.api_key = key;
        judge_model = surf::agent::open_remote_chat_model(remote);
    }
    surf::eval::LocalJudgeOptions jo;
    jo.name = kind;
    jo.schema = args.get("judge-schema");
    jo.enable_thinking = profile.enable_thinking;
    jo.stop_token = profile.stop_token;
    jo.image_max_width = profile.image_max_width;
    jo.image_max_height = profile.image_max_height;
    return std::make_shared<surf::eval::LocalJudge>(judge_model, jo);
}

// Runs the tasks with a live progress line on a terminal (a line per task otherwise); Ctrl-C or SIGTERM stops
// the run, which stays resumable.
surf::eval::EvalOutcome run_with_progress(surf::eval::EvalRunner& runner,
                                          const std::vector<surf::eval::EvalTask>& tasks,
                                          const std::string& out) {
    const bool tty = ::isatty(STDERR_FILENO);
    runner.on_record = [&](const surf::eval::TaskRecord& r) {
        if (tty) return;  // the live bar shows it
        const auto p = runner.progress();
        std::fprintf(stderr, "%s  %s %s\n", progress_line(p).c_str(), r.id.c_str(), r.status.c_str());
    };
    std::signal(SIGINT, on_sigint);
    std::signal(SIGTERM, on_sigint);
    bool stopped = false;
    const auto show = [&](int) {
        if (g_interrupted && !stopped) {
            runner.stop();
            stopped = true;
        }
        if (tty) std::fprintf(stderr, "\r%s\033[K", progress_line(runner.progress()).c_str());
        return true;
    };
    surf::eval::EvalOutcome outcome;
    {
        const surf::cli::Ticker ticker(std::chrono::milliseconds(250), show);
        outcome = runner.run(tasks, out);
    }
    if (tty) std::fprintf(stderr, "\r%s\033[K\n", progress_line(outcome.progress).c_str());
    return outcome;
}

// --references FILE: the reference answers attached to the tasks they name.
void attach_reference_file(const surf::cli::Args& args, std::vector<surf::eval::EvalTask>& tasks) {
    const std::string path = args.get("references");
    std::ifstream in(path);
    if (!in) throw Error(ErrorKind::kIo, path + ": cannot open the reference answers");
    std::stringstream ss;
    ss << in.rdbuf();
    const int n = surf::eval::attach_references(tasks, ss.str(), path);
    std::fprintf(stderr, "reference answers: %d of %zu tasks\n", n, tasks.size());
}

// --ids, --sites, --limit, then --shard: the tasks this run takes; returns the selection for the config.
surf::eval::TaskSelection select_run_tasks(const surf::cli::Args& args,
                                           std::vector<surf::eval::EvalTask>& tasks) {
    surf::eval::TaskSelection selection;
    selection.ids = comma_list(args, "ids");
    selection.sites = comma_list(args, "sites");
    selection.limit = args.get_int("limit", 0, 0, int64_t{1} << 40);
    tasks = surf::eval::select_tasks(tasks, selection);
    if (args.has("shard")) {
        const surf::eval::Shard shard = surf::eval::parse_shard(args.get("shard"));
        tasks = surf::eval::select_shard(tasks, shard);
    }
    return selection;
}

// The record of what this run is, checked against the folder's before the model loads: a difference in what
// is measured refuses the run unless --force.
void check_run_record(const surf::cli::Args& args, const std::string& out, const std::string& model_dir,
                      const nlohmann::ordered_json& config, surf::eval::EvalOptions& options) {
    options.run_record = surf::eval::make_run_record(
        config, surf::eval::model_fingerprint(model_dir, args.get("model-name")), surf::cli::version());
    options.resume_free_keys = kResumeFreeKeys;
    options.force = args.has("force");
    if (const auto before = surf::eval::read_run_record(out)) {
        const auto diffs = surf::eval::run_differences(*before, options.run_record, kResumeFreeKeys);
        if (!diffs.empty() && !options.force)
            throw Error(ErrorKind::kConfig, surf::eval::config_conflict(out, diffs));
        for (const std::string& d : diffs)
            std::fprintf(stderr, "--force: %s differs from %s/config.json\n", d.c_str(), out.c_str());
    }
}

// The closing summary, the Mind2Web export; 1 when the run was stopped before the end.
int report_outcome(const surf::eval::EvalOutcome& outcome, size_t n_tasks, const std::string& out,
                   const std::string& mind2web_out) {
    const auto s = surf::eval::summarize(outcome.records, n_tasks);
    std::printf("%zu of %zu tasks recorded (%zu this run, %zu skipped): %zu succeeded (%.1f%%), %zu errors\n",
                outcome.records.size(), n_tasks, outcome.progress.done, outcome.progress.skipped,
                s["succeeded"].get<size_t>(), 100 * s["success_rate"].get<double>(),
                s["errors"].get<size_t>());
    std::printf("results: %s/results.jsonl, report: %s/report.html\n", out.c_str(), out.c_str());
    if (!mind2web_out.empty()) export_mind2web(out, outcome.records, mind2web_out);
    if (outcome.stopped) {
        std::printf("stopped: run the same command again to resume\n");
        return 1;
    }
    return 0;
}

int run_eval(const surf::cli::Args& cli_args) {
    if (!cli_args.positional().empty() && cli_args.positional()[0] == "merge") return merge(cli_args);
    // A run configuration fills in what the command line does not give.
    const surf::cli::Args args =
        cli_args.has("config")
            ? surf::cli::apply_config_file(cli_args, cli_args.get("config"), kEvalFlags, "tasks")
            : cli_args;
    if (args.positional().size() != 1)
        throw Error(ErrorKind::kInvalidArgument,
                    "expected exactly one task file argument (or: merge DIR... --out DIR)");
    const bool dry_run = args.has("dry-run");
    const std::string out = dry_run ? args.get("out") : args.require("out");
    // A dry run needs no model: it reads and checks the task file, prints the plan and runs nothing.
    const std::string model_dir = dry_run ? args.get("model") : surf::cli::model_flag(args);
    const bool remote_model = surf::cli::is_remote_model(model_dir);
    if (remote_model) surf::cli::reject_local_model_flags(args);  // before the task file and the connection

    surf::eval::EvalOptions options = read_options(args);
    const std::string judge_kind = args.get("judge", "local");
    if (judge_kind != "local" && judge_kind != "remote" && judge_kind != "none")
        throw Error(ErrorKind::kInvalidArgument,
                    "--judge \"" + judge_kind + "\": expected local, remote or none");

    // The task file after the flags: a mistyped flag is reported before a long file is read.
    surf::eval::TaskFile file = surf::eval::load_task_file(args.positional()[0]);
    std::vector<surf::eval::EvalTask> tasks = std::move(file.tasks);
    // Online-Mind2Web runs get WebJudge's layout by default; any run can ask for it.
    std::string mind2web_out = args.get("mind2web-out");
    if (mind2web_out.empty() && file.format == surf::eval::TaskFormat::kMind2Web && !out.empty())
        mind2web_out = out + "/mind2web";
    if (args.has("references")) attach_reference_file(args, tasks);
    const size_t in_file = tasks.size();
    const surf::eval::TaskSelection selection = select_run_tasks(args, tasks);
    const nlohmann::ordered_json config =
        resolved_config(args, model_dir, options, selection, judge_kind, mind2web_out);
    if (dry_run) {
        print_plan(args.positional()[0], file.format, in_file, tasks, options, judge_kind);
        std::printf("config: %s\n", config.dump().c_str());
        return 0;
    }
    check_run_record(args, out, model_dir, config, options);

    surf::agent::PromptProfile profile = surf::agent::load_profile(config["profile"].get<std::string>());

    std::shared_ptr<surf::agent::ChatModel> model = open_model(args, model_dir, options.concurrency);
    const std::shared_ptr<surf::eval::Judge> judge = make_judge(args, judge_kind, model, profile);
    surf::tools::BrowserOptions bo;
    bo.executable = args.get("chromium");
    surf::eval::EvalRunner runner(model, profile, judge, options, bo);

    const surf::eval::EvalOutcome outcome = run_with_progress(runner, tasks, out);
    return report_outcome(outcome, tasks.size(), out, mind2web_out);
}

SURF_COMMAND(surf::cli::Command{
    "eval",
    "Evaluate the agent on a task file (WebVoyager, Online-Mind2Web or surf format), many tasks at once, "
    "resumable; or merge result folders.",
    "TASKS --out DIR [--model DIR|URL] [--backend cpu|cuda] [--concurrency C] [--shard i/n] [--max-steps "
    "N] "
    "[--attempts K] [--judge local|remote|none] [--allow-domain D]... [flags]  |  merge DIR... --out DIR",
    kEvalFlags, run_eval});

}  // namespace
