// `surf record TASKS.jsonl --model DIR --profile P --out DIR`: demonstrations for training. Runs the real
// agent loop on each generated task page with the OracleEngine: the page's own oracle
// (window.__surfTask.oracle(), train/tasks/README.md) chooses each policy step from the live DOM, the
// localizer is answered with the box of the element the policy named, the validator with the page's checker
// (window.__surfTask.check(answer)). Every model call is recorded exactly as the agent fed it, and episodes
// whose final state passes the checker are written out:
//   OUT/episodes.jsonl  one line per task: id, family, viewport, success, and the sessions with their turns
//                       ({"parts": [{"text": ...} | {"image": "shots/<hash>.png"}], "output": ...,
//                       "loss": false on a deliberately wrong policy reply})
//   OUT/shots/          the images as sent to the model, PNG, one file per distinct image
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "agent/conversation.h"
#include "agent/loop.h"
#include "agent/modules.h"
#include "agent/page_text.h"
#include "agent/profile.h"
#include "apps/cli.h"
#include "apps/record/oracle_engine.h"

using surf::record::role_name;
#include "base/error.h"
#include "model/engine_input.h"
#include "model/text/chat_template.h"
#include "model/vision/image.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"
#include "tools/browser/page_elements.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using surf::Error;
using surf::ErrorKind;
using surf::record::Role;

struct RecordTask {
    std::string id, family, question, url;
    int width = 1280, height = 720, max_steps = 12;
};

std::vector<RecordTask> load_record_tasks(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorKind::kIo, path + ": cannot open");
    std::vector<RecordTask> tasks;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(n);
        json j;
        try {
            j = json::parse(line);
        } catch (const json::exception& e) {
            throw Error(ErrorKind::kFormat, where + ": " + e.what());
        }
        RecordTask t;
        try {
            t.id = j.at("id").get<std::string>();
            t.question = j.at("ques").get<std::string>();
            t.url = j.at("web").get<std::string>();
            t.family = j.value("family", "");
            t.max_steps = j.value("max_steps", 12);
            if (j.contains("viewport")) {
                t.width = j["viewport"].at(0).get<int>();
                t.height = j["viewport"].at(1).get<int>();
            }
        } catch (const json::exception& e) {
            throw Error(ErrorKind::kFormat, where + ": " + e.what());
        }
        tasks.push_back(std::move(t));
    }
    return tasks;
}

int to_1000(double v, double extent) {
    return static_cast<int>(std::clamp(std::lround(1000.0 * v / extent), 0L, 1000L));
}

// The state of one task's recording: the page, what the policy last pointed at, the localizer's answers.
struct Episode {
    surf::tools::BrowserSession* page = nullptr;
    int width = 0, height = 0;
    bool mistake_pending = false;
    std::set<std::string> mistakes;  // policy replies that were wrong on purpose: context, never a target
    std::string last_answer;
    std::map<std::string, std::pair<int, int>> points;  // element description -> point (0-1000)
    std::mt19937_64 rng;
    int extra_per_step = 3;
    surf::agent::ModuleContext modules;
    int step = 0;
    std::vector<surf::tools::PageElement> elements;  // the page's elements, read once per policy call
};

// The centre of a CSS box on the page's 0-1000 grid.
std::pair<int, int> centre_1000(const Episode& ep, double x, double y, double w, double h) {
    return {to_1000(x + w / 2, ep.width), to_1000(y + h / 2, ep.height)};
}

json page_json(surf::tools::BrowserSession& page, const std::string& expression) {
    const json v = page.evaluate(expression);
    if (!v.is_string())
        throw Error(ErrorKind::kBrowser, "page returned no JSON for " + expression.substr(0, 60));
    return json::parse(v.get<std::string>());
}

// For a profile that lists the page's elements: the listed element the oracle's target is (the smallest
// listed box holding the target's centre, its description listed once), so that the policy names the element
// and its point exactly as its prompt lists them. Null when the target is not listed.
std::optional<surf::tools::PageElement> listed_target(Episode& ep, const json& target) {
    const int limit = ep.modules.profile->page_elements;
    if (limit <= 0) return std::nullopt;
    const double cx = target.at("x").get<double>() + target.at("w").get<double>() / 2;
    const double cy = target.at("y").get<double>() + target.at("h").get<double>() / 2;
    const std::vector<surf::tools::PageElement> list = surf::agent::listed_elements(ep.elements, limit);
    std::optional<surf::tools::PageElement> best;
    for (const auto& e : list) {
        const bool holds = cx >= e.x && cx <= e.x + e.width && cy >= e.y && cy <= e.y + e.height;
        if (holds && (!best || e.width * e.height < best->width * best->height)) best = e;
    }
    if (best && std::count_if(list.begin(), list.end(),
                              [&](const auto& e) { return e.description == best->description; }) != 1)
        return std::nullopt;
    return best;
}

// The policy's reply in the schema's property order (thought, note, action; the action's own fields in the
// order prompts' schemas list them), since constrained decoding follows that order.
std::string policy_reply(Episode& ep, bool forced) {
    json o;
    bool mistake = false;
    if (ep.mistake_pending) {
        // A wrong answer (question tasks) or an early claim of success (action tasks) when the page offers
        // one.
        o = page_json(*ep.page, "JSON.stringify(window.__surfTask.oracle({mistake: true}))");
        if (o.at("action").value("type", "") == "answer") {
            ep.mistake_pending = false;
            mistake = true;
        }
    } else {
        o = page_json(*ep.page, "JSON.stringify(window.__surfTask.oracle({}))");
    }
    json action = o.at("action");
    const std::string type = action.value("type", "");
    if (type == "scroll" && !action.contains("direction"))
        throw Error(ErrorKind::kFormat, "oracle: a scroll without a direction: " + o.dump().substr(0, 300));
    if (forced && type != "answer")
        action = {{"type", "answer"}, {"content", "I could not finish the task."}};
    ordered_json out_action;
    out_action["type"] = action["type"];
    if (type == "click" || type == "write") {
        const json& t = o.at("target");
        const std::optional<surf::tools::PageElement> listed = listed_target(ep, t);
        const auto [x, y] = listed ? centre_1000(ep, listed->x, listed->y, listed->width, listed->height)
                                   : centre_1000(ep, t.at("x").get<double>(), t.at("y").get<double>(),
                                                 t.at("w").get<double>(), t.at("h").get<double>());
        const std::string element = listed ? listed->description : action.at("element").get<std::string>();
        if (type == "write") out_action["content"] = action.at("content");
        out_action["element"] = element;
        out_action["x"] = x;
        out_action["y"] = y;
        ep.points[element] = {x, y};
    } else if (type == "scroll") {
        out_action["direction"] = action.at("direction");
    } else if (type == "answer") {
        out_action["content"] = action.at("content");
        ep.last_answer = action.at("content").get<std::string>();
    } else {
        throw Error(ErrorKind::kFormat, "oracle: unknown action type '" + type + "'");
    }
    ordered_json reply;
    reply["thought"] = o.value("thought", "");
    reply["note"] = o.value("note", "");
    reply["action"] = out_action;
    if (mistake) ep.mistakes.insert(reply.dump());
    return reply.dump();
}

// Asks the localizer for a few other elements of the screenshot the policy is looking at: elements whose
// description is unique on the page (and, for a profile with {elements}, that its list shows), each answered
// with its box's centre.
void extra_localizer_calls(Episode& ep, const std::vector<surf::model::InputPart>& parts) {
    std::shared_ptr<const surf::model::Image> shot;
    for (const auto& p : parts)
        if (p.image) shot = p.image;
    if (!shot || ep.extra_per_step <= 0) return;
    const surf::agent::PromptProfile& profile = *ep.modules.profile;
    const std::vector<surf::tools::PageElement>& elements = ep.elements;
    std::map<std::string, int> count;
    for (const auto& e : elements) ++count[e.description];
    std::vector<surf::tools::PageElement> list;
    for (const auto& e :
         profile.page_elements > 0 ? surf::agent::listed_elements(elements, profile.page_elements) : elements)
        if (count[e.description] == 1) list.push_back(e);
    std::shuffle(list.begin(), list.end(), ep.rng);
    surf::agent::Localizer localizer(ep.modules);
    surf::agent::ScreenFrame frame;
    frame.width = shot->width;
    frame.height = shot->height;
    frame.css_region = {0, 0, static_cast<double>(ep.width), static_cast<double>(ep.height)};
    frame.pixels_per_css = shot->width / static_cast<double>(ep.width);
    const std::string listed =
        profile.page_elements > 0
            ? surf::agent::elements_text(elements, profile.page_elements, profile.localizer_convention,
                                         {shot->width, shot->height}, frame)
            : "";
    int done = 0;
    for (const surf::tools::PageElement& e : list) {
        if (done >= ep.extra_per_step) break;
        ep.points[e.description] = centre_1000(ep, e.x, e.y, e.width, e.height);
        localizer.locate(e.description, shot, frame, ep.step, listed);
        ++done;
    }
}

std::string localizer_reply(Episode& ep, const std::vector<surf::model::InputPart>& parts) {
    // The element is the prompt's last line (prompts: "Your target is:\n{element}").
    std::string text;
    for (const auto& p : parts) text += p.text;
    for (const auto& [element, point] : ep.points) {
        if (text.find("\n" + element + "\n") != std::string::npos)
            return ordered_json{{"x", point.first}, {"y", point.second}}.dump();
    }
    throw Error(ErrorKind::kModelOutput,
                "oracle: the localizer was asked for an element the policy never named");
}

// The page checker's verdict on an answer: {success, reason}.
json page_check(surf::tools::BrowserSession& page, const std::string& answer) {
    return page_json(page, "JSON.stringify(window.__surfTask.check(" + json(answer).dump() + "))");
}

std::string validator_reply(Episode& ep) {
    const json c = page_check(*ep.page, ep.last_answer);
    ordered_json reply;
    reply["reason"] = c.value("reason", "");
    reply["success"] = c.value("success", false);
    return reply.dump();
}

json parts_json(const std::vector<surf::model::InputPart>& parts, const fs::path& out,
                std::set<std::string>& saved) {
    json list = json::array();
    for (const auto& p : parts) {
        if (p.image) {
            char name[40];
            std::snprintf(name, sizeof name, "shots/%016llx.png",
                          static_cast<unsigned long long>(surf::model::content_hash(
                              p.image->pixels.data(), p.image->pixels.size(), 0x5eed)));
            if (saved.insert(name).second) {
                const std::vector<uint8_t> png = surf::model::encode_png(*p.image);
                std::ofstream(out / name, std::ios::binary)
                    .write(reinterpret_cast<const char*>(png.data()),
                           static_cast<std::streamsize>(png.size()));
            }
            list.push_back({{"image", name}});
        } else {
            list.push_back({{"text", p.text}});
        }
    }
    return list;
}

// What run_record reads from its flags besides the tasks.
struct RecordSettings {
    std::string model_dir;
    fs::path out;
    surf::agent::PromptProfile profile;
    double mistakes = 0;
    int extra = 0, settle_ms = 0;
};

RecordSettings record_settings(const surf::cli::Args& args) {
    RecordSettings rs;
    rs.model_dir = args.require("model");
    rs.out = args.require("out");
    rs.profile = surf::agent::load_profile(args.require("profile"));
    // Recording keeps the localizer in the loop, since its calls are training data; and the oracle tells the
    // roles apart by the profile's compiled schemas, which a per-step restricted schema is not.
    rs.profile.listed_elements_only = false;
    rs.profile.typed_text_from_task_quotes = false;  // the oracle types the task's exact text anyway
    rs.profile.element_follows_thought = false;      // the oracle's actions are the demonstrations
    rs.mistakes = args.get_double("mistakes", 0.25, 0, 1);
    rs.extra = static_cast<int>(args.get_int("extra-points", 3, 0, 100));
    rs.settle_ms = static_cast<int>(args.get_int("settle-ms", 150, 0, 10000));
    return rs;
}

// The ids of the episodes a folder recorded into before holds: their tasks are skipped.
std::set<std::string> recorded_ids(const fs::path& out) {
    std::set<std::string> done;
    std::ifstream old(out / "episodes.jsonl");
    for (std::string line; std::getline(old, line);) {
        try {
            done.insert(json::parse(line).at("id").get<std::string>());
        } catch (const json::exception&) {
            // a torn last line: that task runs again
        }
    }
    return done;
}

// Runs tasks through the agent loop on the oracle engine and appends the episodes the page's checker passes.
struct Recorder {
    RecordSettings& rs;
    surf::record::OracleEngine& engine;
    surf::agent::EngineChatModel& chat;
    surf::tools::Browser& browser;
    std::ofstream& episodes;
    std::set<std::string> saved;  // images already written to shots/

    // Records one task in a new browser session; false (with the reason on stderr) when it is not recorded.
    bool record(const RecordTask& task) {
        surf::tools::SessionOptions so;
        so.viewport.css_width = task.width;
        so.viewport.css_height = task.height;
        so.guard = surf::tools::NavigationGuard({}, {}, surf::tools::LocalSchemes::kFileAlways);
        std::unique_ptr<surf::tools::BrowserSession> session = browser.new_session(so);
        surf::agent::BrowserEnvironmentOptions eo;
        eo.after_action = std::chrono::milliseconds(rs.settle_ms);
        surf::agent::BrowserEnvironment env(*session, eo);

        Episode ep;
        ep.page = session.get();
        ep.width = task.width;
        ep.height = task.height;
        ep.rng.seed(std::hash<std::string>{}(task.id));
        ep.mistake_pending = std::uniform_real_distribution<double>(0, 1)(ep.rng) < rs.mistakes;
        ep.extra_per_step = rs.extra;
        ep.modules.model = &chat;
        ep.modules.profile = &rs.profile;
        engine.set_reply([&](Role role, const std::vector<surf::model::InputPart>& parts, bool forced) {
            try {
                if (role == Role::kPolicy) {
                    ++ep.step;
                    ep.elements = surf::tools::page_elements(*session);
                    extra_localizer_calls(ep, parts);
                    return policy_reply(ep, forced);
                }
                if (role == Role::kLocalizer) return localizer_reply(ep, parts);
                if (role == Role::kValidator) return validator_reply(ep);
            } catch (const json::exception& e) {
                // A page whose oracle or checker answers out of contract: the task is skipped, with the
                // reason.
                throw Error(ErrorKind::kFormat, std::string("oracle: ") + role_name(role) + ": " + e.what());
            }
            throw Error(ErrorKind::kInvalidArgument, "oracle: a call from no known role");
        });

        surf::agent::RunOptions run;
        run.task = task.question;
        run.start_url = task.url;
        run.max_steps = task.max_steps;
        run.viewport_width = task.width;
        run.viewport_height = task.height;
        surf::agent::LoopContext ctx;
        ctx.model = &chat;
        ctx.profile = &rs.profile;
        ctx.environment = &env;
        const surf::agent::RunResult result = surf::agent::run_loop(ctx, run);
        bool success = false;
        std::string reason = result.error;
        try {
            const json c = page_check(*session, result.answer);
            success = result.status == surf::agent::RunStatus::kAnswered && c.value("success", false);
            if (reason.empty()) reason = c.value("reason", "");
        } catch (const std::exception& e) {
            reason = e.what();
        }
        std::vector<surf::record::RecordedSession> sessions = engine.take_sessions();
        if (!success) {
            std::fprintf(stderr, "%s: not recorded (%s; %s)\n", task.id.c_str(),
                         surf::agent::run_status_name(result.status), reason.c_str());
            return false;
        }
        episodes << episode_line(task, result, sessions, ep).dump() << "\n";
        episodes.flush();
        std::printf("%s: %d steps, %zu sessions\n", task.id.c_str(), result.steps, sessions.size());
        std::fflush(stdout);
        return true;
    }

    // One line of episodes.jsonl; the sessions' images are written to shots/ on first use.
    json episode_line(const RecordTask& task, const surf::agent::RunResult& result,
                      const std::vector<surf::record::RecordedSession>& sessions, const Episode& ep) {
        json line;
        line["id"] = task.id;
        line["family"] = task.family;
        line["viewport"] = {task.width, task.height};
        line["steps"] = result.steps;
        line["answer"] = result.answer;
        json js = json::array();
        for (const auto& s : sessions) {
            json turns = json::array();
            for (const auto& t : s.turns) {
                json turn = {{"parts", parts_json(t.parts, rs.out, saved)}, {"output", t.output}};
                // A deliberate mistake stays in the session (the validator's rejection follows it) but is no
                // target for the policy.
                if (s.role == Role::kPolicy && ep.mistakes.count(t.output)) turn["loss"] = false;
                turns.push_back(std::move(turn));
            }
            js.push_back({{"role", surf::record::role_name(s.role)}, {"turns", turns}});
        }
        line["sessions"] = js;
        return line;
    }
};

int run_record(const surf::cli::Args& args) {
    if (args.positional().size() != 1) throw Error(ErrorKind::kInvalidArgument, "expected one TASKS.jsonl");
    const std::vector<RecordTask> tasks = load_record_tasks(args.positional()[0]);
    RecordSettings rs = record_settings(args);
    fs::create_directories(rs.out / "shots");

    surf::record::OracleEngine engine(rs.model_dir, rs.profile);
    const surf::model::ChatTemplate chat_template = surf::model::ChatTemplate::from_model_dir(rs.model_dir);
    surf::agent::EngineChatModel chat(engine, chat_template);
    surf::tools::BrowserOptions bo;
    bo.executable = args.get("chromium");
    std::shared_ptr<surf::tools::Browser> browser = surf::tools::Browser::launch(bo);
    const std::set<std::string> done = recorded_ids(rs.out);
    std::ofstream episodes(rs.out / "episodes.jsonl", std::ios::app);
    Recorder recorder{rs, engine, chat, *browser, episodes, {}};
    int ok = 0, failed = 0;
    for (const RecordTask& task : tasks) {
        if (done.count(task.id)) continue;
        if (recorder.record(task)) {
            ++ok;
        } else {
            ++failed;
        }
    }
    std::printf("recorded %d of %zu tasks (%d failed) into %s\n", ok, tasks.size(), failed, rs.out.c_str());
    browser->shutdown();
    return failed == 0 ? 0 : 1;
}

}  // namespace

SURF_COMMAND(surf::cli::Command{
    "record",
    "Record oracle demonstrations on generated task pages through the real agent loop (training data).",
    "surf record TASKS.jsonl --model DIR --profile FILE --out DIR",
    {{"model", "DIR", "model folder whose tokenizer and chat template the recording uses"},
     {"profile", "FILE", "prompt profile the agent runs with"},
     {"out", "DIR", "output folder (episodes.jsonl is appended to)"},
     {"mistakes", "P",
      "share of tasks whose first answer is a wrong one the validator rejects (default 0.25)"},
     {"extra-points", "N", "extra localizer examples per screenshot (default 3)"},
     {"settle-ms", "MS", "wait after each action before the screenshot (default 150)"},
     {"chromium", "PATH", "Chromium executable (default: found on PATH)"}},
    run_record});
