// `surf run "TASK" --url URL`: one web agent run, a live line per step, the final answer.
// Exit codes: 0 answered, 1 failed (rejected / no answer / cancelled), 2 bad usage or input, 3 error.
#include <unistd.h>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

#include "agent/agent.h"
#include "agent/conversation.h"
#include "agent/custom_actions.h"
#include "agent/loop.h"
#include "agent/profile.h"
#include "apps/cli.h"
#include "apps/load_report.h"
#include "apps/remote_model.h"
#include "base/error.h"
#include "base/file_text.h"
#include "base/utf8.h"
#include "model/engine.h"
#include "tools/browser/navigation_guard.h"

namespace {

// --secret NAME[@DOMAIN,...]: the value comes from $SURF_SECRET_NAME (upper case; '-' and '.' as '_'), so
// that it never sits in the command line, the shell history or the process list.
std::map<std::string, surf::agent::Secret> secrets_from_environment(const std::vector<std::string>& flags) {
    std::map<std::string, surf::agent::Secret> out;
    for (const std::string& flag : flags) {
        const size_t at = flag.find('@');
        const std::string name = flag.substr(0, at);
        surf::agent::Secret secret;
        if (at != std::string::npos) secret.domains = surf::cli::comma_items(flag.substr(at + 1));
        std::string var = "SURF_SECRET_";
        for (char c : name)
            var += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
        const char* value = std::getenv(var.c_str());
        if (!value || !*value) {
            throw surf::Error(
                surf::ErrorKind::kInvalidArgument,
                "--secret " + name + ": set " + var + " to its value (values never go on the command line)");
        }
        secret.value = value;
        out[name] = secret;
    }
    return out;
}

volatile std::sig_atomic_t g_interrupted = 0;
void on_sigint(int) {
    g_interrupted = 1;
}

std::string one_line(std::string s, size_t n) {
    for (char& c : s)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    return surf::shorten_utf8(s, n, "...");  // never cuts a multi-byte character
}

// --confirm / --confirm-on D: each action on the page (on hosts D only, when given) waits for the user at the
// terminal: Enter or "y" lets it go ahead, "n" or any other text refuses it and tells the policy why. `out`
// is held meanwhile so that the spinner does not write over the question.
surf::agent::BeforeActionHook confirm_at_terminal(const std::vector<std::string>& hosts, std::mutex& out) {
    const surf::tools::NavigationGuard only(hosts, {});
    return [only, all = hosts.empty(), &out](const surf::agent::ProposedAction& p) {
        using surf::agent::ApprovalDecision;
        if (!all && !only.check(p.url).allowed) return ApprovalDecision::approve();
        std::ifstream tty("/dev/tty");
        if (!tty) return ApprovalDecision::reject("--confirm: no terminal to ask on");
        std::lock_guard<std::mutex> lock(out);
        std::printf("\r\033[K      step %d on %s: %s\n      go ahead? [Y/n, or why not] ", p.step,
                    p.url.c_str(), p.description.c_str());
        std::fflush(stdout);
        std::string line;
        std::getline(tty, line);
        if (line.empty() || line == "y" || line == "Y" || line == "yes") return ApprovalDecision::approve();
        return ApprovalDecision::reject(line == "n" || line == "N" || line == "no" ? "the user said no"
                                                                                   : line);
    };
}

// --ask-human: the policy's questions (the ask_human action) are asked at the terminal; the line typed is the
// reply. `out` is held meanwhile, as for --confirm.
std::function<std::string(const std::string&)> ask_at_terminal(std::mutex& out) {
    return [&out](const std::string& question) -> std::string {
        std::ifstream tty("/dev/tty");
        if (!tty) return "(no terminal to ask on: decide without the user)";
        std::lock_guard<std::mutex> lock(out);
        std::printf("\r\033[K      the agent asks: %s\n      your reply: ", one_line(question, 500).c_str());
        std::fflush(stdout);
        std::string line;
        std::getline(tty, line);
        return line;
    };
}

// A storage state file (--storage-state): JSON in Playwright's storageState layout; errors name the file.
nlohmann::json load_storage_state(const std::string& path) {
    const std::string text = surf::read_text_file(path);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw surf::Error(surf::ErrorKind::kFormat, path + ": not a JSON object (a storage state file)");
    return j;
}

// One finished step (or a rejected answer) as a line, with the policy's thought under it.
void print_step(const surf::agent::StepEvent& e) {
    if (e.kind == surf::agent::StepEventKind::kAnswerRejected) {
        std::printf("      answer rejected: %s\n", one_line(e.outcome, 160).c_str());
    } else {
        std::string target = e.target.empty() ? "" : " \"" + one_line(e.target, 60) + "\"";
        char point[48] = "";
        if (e.has_point) std::snprintf(point, sizeof point, " @(%.0f,%.0f)", e.x, e.y);
        std::printf("step %3d  %-8s%s%s  %.1fs  %s%s\n", e.step, e.action.empty() ? "-" : e.action.c_str(),
                    target.c_str(), point, e.seconds,
                    e.ok ? "" : "ERROR: ", one_line(e.outcome, 120).c_str());
        if (!e.thought.empty()) std::printf("          thought: %s\n", one_line(e.thought, 160).c_str());
    }
    std::fflush(stdout);
}

// The run's options from the command line, checked (before a model load that can take minutes).
surf::agent::RunOptions run_options(const surf::cli::Args& args, const surf::agent::AgentConfig& config) {
    surf::agent::RunOptions run;
    run.task = args.positional()[0];
    run.start_url = args.require("url");
    run.max_steps = static_cast<int>(args.get_int("max-steps", 30, 1, 1000));
    run.max_answer_attempts = static_cast<int>(args.get_int("attempts", 3, 1, 100));
    run.timeout_seconds = args.get_double("timeout", 600, 0.001, 86400);
    run.use_validator = !args.has("no-validator");
    run.trust_policy_coordinates = args.has("trust-policy-coordinates");
    run.allow_domains = args.all("allow-domain");
    run.deny_domains = args.all("deny-domain");
    args.get_size("viewport", &run.viewport_width, &run.viewport_height);
    run.device_scale_factor = args.get_double("dsf", 1.0, 0.25, 4);
    run.trace_dir = args.get("out");
    run.seed = static_cast<uint64_t>(args.get_int("seed", 0, 0, 9223372036854775807LL));
    run.secrets = secrets_from_environment(args.all("secret"));
    if (args.has("answer-schema")) run.answer_schema = surf::read_text_file(args.get("answer-schema"));
    run.upload_dir = args.get("upload-dir");
    if (args.has("storage-state")) run.storage_state = load_storage_state(args.get("storage-state"));
    run.save_storage_state = args.has("save-storage-state");
    run.download_dir = args.get("download-dir");
    run.removed_actions = args.all("without-action");
    surf::agent::validate_run_options(run);
    if (!run.removed_actions.empty()) {  // an action the profile's policy lacks: a usage error, named now
        const std::string profile =
            config.profile.empty() ? surf::agent::profile_for_model(config.model_dir) : config.profile;
        surf::agent::with_actions(surf::agent::load_profile(profile), {}, run.removed_actions);
    }
    return run;
}

// The localizer's and the validator's own models: a folder on the same backend, or a remote endpoint.
void open_role_models(const surf::cli::Args& args, surf::agent::AgentConfig& config) {
    using surf::Error;
    using surf::ErrorKind;
    for (auto [flag, slot] : {std::pair{"localizer-model", &config.localizer_chat_model},
                              std::pair{"validator-model", &config.validator_chat_model}}) {
        if (!args.has(flag) || args.get(flag) == config.model_dir) continue;
        const std::string dir = args.get(flag);
        if (surf::cli::is_remote_model(dir)) {
            const std::string name = args.get(std::string(flag) + "-name", args.get("model-name"));
            if (name.empty())
                throw Error(ErrorKind::kInvalidArgument, std::string("--") + flag + " " + dir + " needs --" +
                                                             flag +
                                                             "-name (or --model-name): the served model");
            *slot = surf::cli::open_remote_model(args, dir, 1, name);
            continue;
        }
        std::fprintf(stderr, "loading %s (--%s) ...\n", dir.c_str(), flag);
        surf::model::EngineOptions options;
        options.quantize = surf::model::parse_quantize(config.quantize, "--quantize");
        *slot = surf::agent::EngineChatModel::open(surf::model::open_engine(
            dir, config.backend, "--backend", 0, surf::model::WarmUp::kSingle, options));
    }
}

// The agent on the policy's model: a remote OpenAI-compatible server (surf serve, vLLM, SGLang) or a folder
// loaded in process.
std::unique_ptr<surf::agent::Agent> open_agent(const surf::cli::Args& args,
                                               const surf::agent::AgentConfig& config) {
    if (surf::cli::is_remote_model(config.model_dir)) {
        surf::cli::reject_local_model_flags(args);
        return std::make_unique<surf::agent::Agent>(surf::cli::open_remote_model(args, config.model_dir, 1),
                                                    config);
    }
    std::fprintf(stderr, "loading %s ...\n", config.model_dir.c_str());
    const auto load_start = std::chrono::steady_clock::now();
    auto agent = surf::agent::Agent::create(config);
    surf::cli::print_loaded(config.model_dir, *agent->engine(), load_start);
    return agent;
}

// Runs the task with a line per step on stdout and, on a terminal, a spinner for the step that runs now;
// Ctrl-C cancels the run.
surf::agent::RunResult run_at_terminal(const surf::cli::Args& args, surf::agent::Agent& agent,
                                       surf::agent::RunOptions run) {
    std::signal(SIGINT, on_sigint);
    const bool tty = ::isatty(STDOUT_FILENO) != 0;
    std::mutex out;
    std::atomic<int> running_step{1};
    using SteadyClock = std::chrono::steady_clock;
    std::atomic<SteadyClock::rep> step_start{SteadyClock::now().time_since_epoch().count()};
    const auto spin = [&](int tick) {
        static const char* frames[] = {"|", "/", "-", "\\"};
        if (g_interrupted) {
            agent.cancel();
            return false;
        }
        if (tty) {
            const double t = std::chrono::duration<double>(SteadyClock::now().time_since_epoch() -
                                                           SteadyClock::duration(step_start.load()))
                                 .count();
            std::lock_guard<std::mutex> lock(out);
            std::printf("\r%s step %d running  %.1fs\033[K", frames[tick % 4], running_step.load(), t);
            std::fflush(stdout);
        }
        return true;
    };
    const auto clear = [&] {
        if (!tty) return;
        std::lock_guard<std::mutex> lock(out);
        std::printf("\r\033[K");
        std::fflush(stdout);
    };
    if (args.has("confirm") || !args.all("confirm-on").empty())
        run.before_action = confirm_at_terminal(args.all("confirm-on"), out);
    if (args.has("ask-human")) run.ask_human = ask_at_terminal(out);
    const auto on_step = [&](const surf::agent::StepEvent& e) {
        using surf::agent::StepEventKind;
        if (e.kind == StepEventKind::kFinished || e.kind == StepEventKind::kStepStarted) return;
        std::lock_guard<std::mutex> lock(out);
        if (tty) std::printf("\r\033[K");
        running_step = e.step + 1;
        step_start = SteadyClock::now().time_since_epoch().count();
        print_step(e);
    };
    const surf::cli::Ticker ticker(std::chrono::milliseconds(100), spin, clear);
    return agent.run(run, on_step);
}

// The summary lines after a run; returns the exit code (0 answered, 1 failed, 3 error).
int print_result(const surf::cli::Args& args, const surf::agent::RunResult& result) {
    std::printf("status: %s (%d steps, %d answer attempts, %d model calls, %d errors, %.1f s)\n",
                surf::agent::run_status_name(result.status), result.steps, result.answer_attempts,
                result.model_calls, result.errors, result.seconds);
    if (!result.error.empty()) std::printf("error: %s\n", result.error.c_str());
    for (const std::string& file : result.downloads) std::printf("downloaded: %s\n", file.c_str());
    if (args.has("save-storage-state") && !result.storage_state.is_null()) {
        const std::string path = args.get("save-storage-state");
        std::ofstream(path) << result.storage_state.dump(2) << "\n";
        std::printf("storage state: %s\n", path.c_str());
    }
    if (!result.answer.empty()) {
        std::printf("answer%s: %s\n",
                    result.validated ? "" : (result.forced ? " (forced)" : " (not validated)"),
                    result.answer.c_str());
    }
    if (!result.trace_dir.empty())
        std::printf("trace: %s/trace.jsonl, report: %s/report.html\n", result.trace_dir.c_str(),
                    result.trace_dir.c_str());
    switch (result.status) {
        case surf::agent::RunStatus::kAnswered: return 0;
        case surf::agent::RunStatus::kError: return 3;
        default: return 1;
    }
}

int run_agent(const surf::cli::Args& args) {
    if (args.positional().size() != 1)
        throw surf::Error(surf::ErrorKind::kInvalidArgument, "expected exactly one TASK argument (quote it)");
    // The flags of the command line first, in the order a user fixes them; the model folder after.
    args.require("url");
    surf::agent::AgentConfig config;
    config.model_dir = surf::cli::model_flag(args);
    config.backend = args.get("backend", "cpu");
    config.quantize = args.get("quantize", "none");
    surf::model::parse_quantize(config.quantize, "--quantize");
    config.profile = args.get("profile");
    config.chat_template = args.get("template");
    config.chromium = args.get("chromium");
    const surf::agent::RunOptions run = run_options(args, config);
    open_role_models(args, config);
    std::unique_ptr<surf::agent::Agent> agent = open_agent(args, config);
    return print_result(args, run_at_terminal(args, *agent, run));
}

SURF_COMMAND(surf::cli::Command{
    "run",
    "Run the web agent on a task: a live line per step, then the answer (exit 0 answered, 1 failed, 2 usage, "
    "3 error).",
    "\"TASK\" --url URL [--model DIR] [--max-steps N] [--attempts K] [--allow-domain D]... [--out DIR] "
    "[flags]",
    {{"url", "URL", "start page"},
     {"model", "DIR|URL",
      "model folder (default $SURF_MODEL, else the shipped surf-tiny), or an OpenAI-compatible server "
      "http://HOST:PORT/v1, or several comma-separated (replicas: each chat stays on one; one that is "
      "down passes its chats to another)"},
     {"backend", "NAME", "cpu (default) or cuda"},
     {"quantize", "none|fp8",
      "fp8: E4M3 weights and activations in the language model's linear layers, quantized on load (cpu "
      "backend; default none)"},
     {"model-name", "NAME", "with --model http://HOST:PORT/v1: the served model's name"},
     {"api-key", "KEY", "with a remote --model: Bearer key (default $SURF_API_KEY)"},
     {"tokenizer", "DIR",
      "with a remote --model: a local checkpoint folder whose special tokens to neutralise"},
     {"max-steps", "N", "policy steps including the forced answer (default 30)"},
     {"attempts", "K", "answers the validator may reject before the run fails (default 3)"},
     {"allow-domain", "D", "only these hosts (and subdomains) may be opened", true},
     {"deny-domain", "D", "hosts that may never be opened", true},
     {"confirm", "",
      "ask at the terminal before each action on the page (Enter: go ahead; anything else: refuse, and the "
      "policy reads why)"},
     {"confirm-on", "D", "ask only on these hosts (and subdomains); implies --confirm", true},
     {"ask-human", "", "let the agent ask you questions at the terminal (the ask_human action)"},
     {"upload-dir", "DIR", "a folder whose files the agent may upload (the upload action)"},
     {"download-dir", "DIR", "save downloads into this folder (default: downloads are refused)"},
     {"storage-state", "FILE",
      "start with these cookies and localStorage (JSON, Playwright's storageState layout)"},
     {"save-storage-state", "FILE", "write the cookies and localStorage at the end of the run to FILE"},
     {"localizer-model", "DIR|URL", "the localizer's own model: a folder, or a server's http://HOST:PORT/v1"},
     {"localizer-model-name", "NAME",
      "with a remote --localizer-model: the served model (default --model-name)"},
     {"validator-model", "DIR|URL", "the validator's own model: a folder, or a server's http://HOST:PORT/v1"},
     {"validator-model-name", "NAME",
      "with a remote --validator-model: the served model (default --model-name)"},
     {"without-action", "NAME", "take this action away from the policy (e.g. goto)", true},
     {"answer-schema", "FILE",
      "a JSON schema the answer must satisfy: the answer is printed as that JSON value"},
     {"secret", "NAME[@D,...]",
      "a value the browser may type for <secret:NAME> (on hosts D only), read from $SURF_SECRET_NAME; the "
      "model, traces and output see only the placeholder",
      true},
     {"out", "DIR", "write trace.jsonl, screenshots and report.html here"},
     {"timeout", "S", "wall-time budget in seconds; then the answer is forced (default 600)"},
     {"trust-policy-coordinates", "", "click where the policy points instead of asking the localizer"},
     {"no-validator", "", "accept the first answer without validation"},
     {"profile", "FILE",
      "prompt profile JSON (default: the model folder's surf_profile.json, else "
      "prompts/profile_holotron.json)"},
     {"template", "FILE", "a Jinja chat template instead of the checkpoint's"},
     {"viewport", "WxH", "browser viewport in CSS pixels (default 1280x720)"},
     {"dsf", "F", "device scale factor (default 1)"},
     {"seed", "S", "sampling seed (default 0)"},
     {"chromium", "PATH", "Chromium binary"}},
    run_agent});

}  // namespace
