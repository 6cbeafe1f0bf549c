#include "agent/agent.h"

#include <filesystem>
#include <mutex>
#include <set>

#include "agent/conversation.h"
#include "agent/environment.h"
#include "agent/loop.h"
#include "agent/profile.h"
#include "agent/trace.h"
#include "base/error.h"
#include "model/engine.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

namespace surf::agent {

namespace {

// The regular files of `dir` (paths; in-progress downloads, *.crdownload, excluded).
std::set<std::string> folder_files(const std::string& dir) {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.is_regular_file(ec) && e.path().extension() != ".crdownload") out.insert(e.path().string());
    return out;
}

}  // namespace

struct Agent::Impl {
    AgentConfig config;
    std::shared_ptr<model::Engine> engine;  // null when the agent runs on another chat model
    PromptProfile profile;
    std::shared_ptr<ChatModel> model;
    std::shared_ptr<ChatModel> localizer, validator;  // null: the policy's
    std::shared_ptr<tools::Browser> browser;
    std::vector<std::string> launched_deny;  // the deny-list the agent's own browser was launched with
    std::mutex run_mutex;
    std::atomic<bool> cancel{false};
    mutable std::mutex browser_mutex;

    // Refuses a run whose denied host names the shared browser's resolver leaves resolvable.
    void check_shared_browser_denies(const RunOptions& options) const;
    // Launches the agent's own browser, or relaunches it for a run with another deny-list.
    void ensure_browser(const RunOptions& options);
    // One run in a new browser session: the loop, then the storage state and the new downloads.
    RunResult run_in_session(const RunOptions& options, const StepCallback& on_step, Trace* trace);
};

void Agent::Impl::check_shared_browser_denies(const RunOptions& options) const {
    // A shared browser keeps the resolver rules it was launched with: a denied host name they leave
    // resolvable would let the run's WebSocket and workers' connections reach it.
    const std::vector<std::string> missing =
        tools::NavigationGuard({}, options.deny_domains).resolver_rules_missing(config.browser->deny_hosts());
    if (!missing.empty()) {
        throw Error(ErrorKind::kInvalidArgument,
                    "deny_domains: " + comma_joined(missing) +
                        " not denied by the shared browser's resolver (AgentConfig.browser was launched "
                        "without it in tools::BrowserOptions::deny_hosts): launch it with them, or let the "
                        "agent launch its own browser");
    }
}

void Agent::Impl::ensure_browser(const RunOptions& options) {
    std::lock_guard<std::mutex> lock(browser_mutex);
    // The browser the agent launches makes the run's denied host names unresolvable (connections
    // Fetch never sees); a run with another deny-list gets a browser of its own rules.
    const bool own = !config.browser;
    if (browser && own && launched_deny != options.deny_domains) {
        browser->shutdown();
        browser.reset();
    }
    if (!browser) {
        tools::BrowserOptions bo;
        bo.executable = config.chromium;
        bo.deny_hosts = options.deny_domains;
        browser = tools::Browser::launch(bo);
        launched_deny = options.deny_domains;
    }
}

RunResult Agent::Impl::run_in_session(const RunOptions& options, const StepCallback& on_step, Trace* trace) {
    tools::SessionOptions so;
    so.viewport.css_width = options.viewport_width;
    so.viewport.css_height = options.viewport_height;
    so.viewport.device_scale_factor = options.device_scale_factor;
    so.guard = run_guard(options);
    so.storage_state = options.storage_state;
    std::set<std::string> before;  // what the download folder held before the run
    if (!options.download_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(options.download_dir, ec);
        if (ec) throw Error(ErrorKind::kIo, "download_dir " + options.download_dir + ": " + ec.message());
        so.allow_downloads = true;
        so.download_dir = options.download_dir;
        before = folder_files(options.download_dir);
    }
    std::unique_ptr<tools::BrowserSession> session = browser->new_session(so);
    BrowserEnvironmentOptions eo;
    eo.max_wait = std::chrono::milliseconds(static_cast<int64_t>(options.max_wait_seconds * 1000));
    eo.cancel = &cancel;
    BrowserEnvironment environment(*session, eo);
    LoopContext ctx;
    ctx.model = model.get();
    ctx.localizer_model = localizer.get();
    ctx.validator_model = validator.get();
    ctx.profile = &profile;
    ctx.environment = &environment;
    ctx.trace = trace;
    ctx.on_step = on_step;
    ctx.cancel = &cancel;
    RunResult result = run_loop(ctx, options);
    if (options.save_storage_state) {
        try {
            result.storage_state = session->storage_state();
        } catch (const Error& e) {
            result.error +=
                (result.error.empty() ? "" : "; ") + std::string("storage state not saved: ") + e.what();
        }
    }
    if (!options.download_dir.empty()) {
        for (const std::string& f : folder_files(options.download_dir))
            if (!before.count(f)) result.downloads.push_back(f);
    }
    return result;
}

std::unique_ptr<Agent> Agent::create(const AgentConfig& config) {
    if (config.model_dir.empty()) throw Error(ErrorKind::kInvalidArgument, "AgentConfig.model_dir: empty");
    model::EngineOptions options;
    options.quantize = model::parse_quantize(config.quantize, "AgentConfig.quantize");
    // One agent: the engine's warm-up skips the vision passes of every tile count (model::WarmUp).
    std::shared_ptr<model::Engine> engine = model::open_engine(
        config.model_dir, config.backend, "AgentConfig.backend", 0, model::WarmUp::kSingle, options);
    // The other roles' folders, one engine per distinct folder (the policy's own folder: its engine).
    AgentConfig with_roles = config;
    std::map<std::string, std::shared_ptr<model::Engine>> opened{{config.model_dir, engine}};
    for (auto [dir, slot] : {std::pair{&config.localizer_model, &with_roles.localizer_chat_model},
                             std::pair{&config.validator_model, &with_roles.validator_chat_model}}) {
        if (dir->empty() || *slot) continue;
        auto& e = opened[*dir];
        if (!e)
            e = model::open_engine(*dir, config.backend, "AgentConfig.backend", 0, model::WarmUp::kSingle,
                                   options);
        if (e != engine) *slot = EngineChatModel::open(e);
    }
    return std::make_unique<Agent>(std::move(engine), with_roles);
}

Agent::Agent(std::shared_ptr<model::Engine> engine, const AgentConfig& config)
    : Agent(EngineChatModel::open(engine, config.chat_template), config) {
    impl_->engine = std::move(engine);
}

Agent::Agent(std::shared_ptr<ChatModel> model, const AgentConfig& config) : impl_(std::make_unique<Impl>()) {
    if (!model) throw Error(ErrorKind::kInvalidArgument, "Agent: no model");
    impl_->config = config;
    impl_->model = std::move(model);
    impl_->localizer = config.localizer_chat_model;
    impl_->validator = config.validator_chat_model;
    impl_->browser = config.browser;
    impl_->profile =
        load_profile(config.profile.empty() ? profile_for_model(config.model_dir) : config.profile);
}

Agent::~Agent() {
    if (impl_ && impl_->browser && !impl_->config.browser)
        impl_->browser->shutdown();  // only the one it launched
}

void Agent::cancel() {
    impl_->cancel.store(true);
}

int Agent::browser_pid() const {
    std::lock_guard<std::mutex> lock(impl_->browser_mutex);
    return impl_->browser ? static_cast<int>(impl_->browser->pid()) : 0;
}

std::shared_ptr<model::Engine> Agent::engine() const {
    return impl_->engine;
}

RunResult Agent::run(const RunOptions& options, const StepCallback& on_step) {
    std::lock_guard<std::mutex> run_lock(impl_->run_mutex);
    impl_->cancel.store(false);
    validate_run_options(options);
    if (impl_->config.browser) impl_->check_shared_browser_denies(options);
    RunResult failed;
    failed.status = RunStatus::kError;
    std::unique_ptr<Trace> trace;
    if (!options.trace_dir.empty()) trace = std::make_unique<Trace>(options.trace_dir);
    try {
        impl_->ensure_browser(options);
        return impl_->run_in_session(options, on_step, trace.get());
    } catch (const Error& e) {
        // Only failures to start (browser, trace folder, options) get here; the loop handles the rest.
        failed.error = std::string(error_kind_name(e.kind())) + ": " + e.what();
    } catch (const std::exception& e) {
        failed.error = std::string("internal: ") + e.what();
    }
    try {
        failed.error = Secrets(options.secrets).redact(failed.error);
    } catch (const Error&) {
        // invalid secrets: the error says so, and no value was accepted
    }
    if (trace) {
        trace->write({{"type", "run_end"}, {"status", "error"}, {"error", failed.error}});
        trace->finish(options, failed);
        failed.trace_dir = trace->dir();
    }
    return failed;
}

}  // namespace surf::agent
