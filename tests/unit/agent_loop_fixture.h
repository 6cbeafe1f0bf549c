// The agent loop's test fixture: a scripted engine (a mock at the engine seam: the real engine has its own
// tests) that answers each role from its own script, and a scripted page that records what it was asked to
// do.
#pragma once

#include <doctest/doctest.h>

#include <deque>
#include <map>

#include "agent/agent.h"
#include "agent/conversation.h"
#include "agent/loop.h"
#include "base/error.h"
#include "model/engine.h"
#include "model/text/chat_template.h"

namespace surf_test {

using namespace surf;
using namespace surf::agent;

inline const std::string kTinyModel = SURF_FIXTURES_DIR "/golden/tiny_fp32";

struct Call {
    model::SessionId session;
    std::string role;
    std::string text;  // text parts joined, images as [IMG wxh]
    int images = 0;
    const model::CompiledSchema* schema = nullptr;
    std::string schema_text;  // kept: a run's own schemas go with the run
};

// Answers each role from its own script; a role's script running dry repeats its last entry.
class ScriptedEngine : public model::Engine {
public:
    ScriptedEngine() : tokenizer_(model::load_model_tokenizer(kTinyModel)) {}
    std::map<std::string, std::deque<std::string>> scripts;
    std::vector<Call> calls;
    std::map<model::SessionId, int64_t> tokens;
    std::map<model::SessionId, std::string> roles;
    int open_sessions = 0;
    bool cut_next = false;  // the next reply ends by max_tokens (no stop token)

    const model::ModelConfig& config() const override { return config_; }
    const model::Tokenizer& tokenizer() const override { return tokenizer_; }
    std::shared_ptr<const model::TokenIndex> token_index() const override { return nullptr; }
    std::string backend_name() const override { return "scripted"; }
    model::SessionId open_session() override {
        ++open_sessions;
        tokens[next_] = 0;
        return next_++;
    }
    model::SessionId fork_session(model::SessionId from) override {
        tokens[next_] = tokens.at(from);
        return next_++;
    }
    void close_session(model::SessionId id) override {
        if (tokens.erase(id)) --open_sessions;
    }
    model::GenerateResult generate(model::SessionId id, const std::vector<model::InputPart>& input,
                                   const model::GenerateOptions& options) override {
        if (!tokens.count(id)) throw Error(ErrorKind::kInvalidArgument, "unknown session");
        Call c;
        c.session = id;
        c.schema = options.schema.get();
        if (options.schema) c.schema_text = options.schema->schema_text;
        for (const auto& p : input) {
            if (p.image) {
                c.text +=
                    "[IMG " + std::to_string(p.image->width) + "x" + std::to_string(p.image->height) + "]";
                ++c.images;
            } else {
                c.text += p.text;
            }
        }
        // A session keeps the role of its first call (retries carry only the feedback text).
        if (!roles.count(id)) {
            roles[id] = c.text.find("Localize an element") != std::string::npos ? "localizer"
                        : c.text.find("As an evaluator") != std::string::npos   ? "validator"
                                                                                : "policy";
        }
        c.role = roles[id];
        std::deque<std::string>& script = scripts[c.role];
        if (script.empty()) throw std::runtime_error("no script for " + c.role);
        model::GenerateResult r;
        r.text = script.front();
        if (script.size() > 1) script.pop_front();
        if (options.on_text && !options.on_text(r.text)) {
            r.finish = model::FinishReason::kCancelled;
        } else if (cut_next) {
            cut_next = false;
            r.finish = model::FinishReason::kLength;
        } else {
            r.finish = model::FinishReason::kStop;
            r.tokens = {12};
        }
        r.prefill_tokens = static_cast<int64_t>(c.text.size());
        tokens[id] += r.prefill_tokens + static_cast<int64_t>(r.text.size());
        r.session_tokens = tokens[id];
        calls.push_back(c);
        return r;
    }
    std::vector<Call> of(const std::string& role) const {
        std::vector<Call> out;
        for (const Call& c : calls)
            if (c.role == role) out.push_back(c);
        return out;
    }

private:
    model::ModelConfig config_;
    model::Tokenizer tokenizer_;
    model::SessionId next_ = 1;
};

class FakePage : public Environment {
public:
    int width = 320, height = 240;
    double dsf = 1.0;
    std::vector<std::string> actions;
    std::vector<tools::CssPoint> points;
    std::string url = "http://127.0.0.1/start";
    bool reachable = true;
    ActionOutcome open(const std::string& u) override {
        url = u;
        if (!reachable)
            return {false, "goto " + u + ": network error (net::ERR_CONNECTION_REFUSED)", "network"};
        return {true, "loaded", ""};
    }
    Observation observe() override {
        Observation o;
        const int pw = static_cast<int>(width * dsf), ph = static_cast<int>(height * dsf);
        auto img = std::make_shared<model::Image>(pw, ph);
        o.png = model::encode_png(*img);
        o.image = img;
        o.frame = ScreenFrame{pw, ph, {0, 0, static_cast<double>(width), static_cast<double>(height)}, dsf};
        o.url = url;
        o.title = "page";
        return o;
    }
    std::vector<tools::PageElement> listed;  // what elements() answers
    std::vector<tools::PageElement> elements() override { return listed; }
    tools::BrowserSession* page() override { return nullptr; }
    std::vector<std::string> typed;     // what write actions typed
    std::vector<std::string> uploaded;  // the files upload actions gave
    ActionOutcome execute(const Action& a, const ActionPoints& p) override {
        actions.push_back(action_name(a));
        if (p.at) points.push_back(*p.at);
        if (p.to) points.push_back(*p.to);
        if (const auto* u = std::get_if<UploadAction>(&a)) uploaded.push_back(u->file);
        if (const auto* w = std::get_if<WriteAction>(&a)) {
            typed.push_back(w->content);
            return {true, "typed '" + w->content + "' and pressed Enter", ""};  // as the browser echoes it
        }
        return {true, std::string("did ") + action_name(a), ""};
    }
};

struct Fixture {
    ScriptedEngine engine;
    model::ChatTemplate chat_template =
        model::ChatTemplate::from_file(SURF_SOURCE_DIR "/prompts/chat_template_nemotron_nano_v2_vl.jinja");
    EngineChatModel chat{engine, chat_template};
    PromptProfile profile = load_profile(default_profile_path());
    FakePage page;
    std::vector<StepEvent> events;
    std::atomic<bool> cancel{false};

    std::vector<StepEvent> step_events() const {  // the finished steps' events
        std::vector<StepEvent> out;
        for (const StepEvent& e : events)
            if (e.kind == StepEventKind::kStep) out.push_back(e);
        return out;
    }

    RunResult run(RunOptions o, Trace* trace = nullptr) {
        LoopContext ctx;
        ctx.model = &chat;
        ctx.profile = &profile;
        ctx.environment = &page;
        ctx.trace = trace;
        ctx.on_step = [this](const StepEvent& e) { events.push_back(e); };
        ctx.cancel = &cancel;
        return run_loop(ctx, o);
    }
};

inline RunOptions options(int max_steps = 5, int attempts = 3) {
    RunOptions o;
    o.task = "Find the answer";
    o.start_url = "http://127.0.0.1/start";
    o.max_steps = max_steps;
    o.max_answer_attempts = attempts;
    return o;
}

inline std::string step_json(const std::string& action, const std::string& note = "") {
    return R"({"thought":"thinking","note":")" + note + R"(","action":)" + action + "}";
}

inline const std::string kClick = R"({"type":"click","element":"the OK button","x":100,"y":100})";
inline const std::string kScroll = R"({"type":"scroll","direction":"down"})";
inline const std::string kAnswer = R"({"type":"answer","content":"42"})";

}  // namespace surf_test
