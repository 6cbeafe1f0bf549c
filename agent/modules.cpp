#include "agent/modules.h"

#include <algorithm>
#include <ctime>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "agent/custom_actions.h"
#include "base/error.h"
#include "model/structured/json_schema.h"

namespace surf::agent {

namespace {

ChatOptions chat_options(const PromptProfile& p) {
    return {p.enable_thinking, p.stop_token};
}

ChatModel& model_of(const ModuleContext& ctx) {
    if (!ctx.model) throw Error(ErrorKind::kInvalidArgument, "ModuleContext: no chat model");
    return *ctx.model;
}

model::GenerateOptions module_options(const ModuleSettings& m,
                                      const std::shared_ptr<const model::CompiledSchema>& schema,
                                      const ModuleContext& ctx, uint64_t salt) {
    model::GenerateOptions o;
    o.max_tokens = m.max_tokens;
    o.sampling = m.sampling;
    o.sampling.seed = m.sampling.seed ^ (ctx.seed * 0x9E3779B97F4A7C15ull) ^ salt;
    o.schema = schema;
    if (ctx.should_stop) {
        auto stop = ctx.should_stop;
        o.on_text = [stop](std::string_view) { return !stop(); };
        o.is_cancelled = stop;  // also between the prompt's chunks (CPU backend)
    }
    return o;
}

// Calls fn on every object in `schema` (the root and every nested object, through arrays too); returns the
// sum of what the calls return.
int for_each_object(nlohmann::ordered_json& schema, const std::function<int(nlohmann::ordered_json&)>& fn) {
    int n = 0;
    if (schema.is_object()) {
        n += fn(schema);
        for (auto& [key, value] : schema.items()) n += for_each_object(value, fn);
    } else if (schema.is_array()) {
        for (auto& value : schema) n += for_each_object(value, fn);
    }
    return n;
}

// Sets every string field named "element" or "to_element" of an object schema (the pointed actions) to an
// enum of `choices`, wherever it is in `schema`. Returns how many fields it restricted.
int restrict_element_fields(nlohmann::ordered_json& schema, const nlohmann::ordered_json& choices) {
    return for_each_object(schema, [&](nlohmann::ordered_json& object) {
        int n = 0;
        auto props = object.find("properties");
        if (props == object.end() || !props->is_object()) return 0;
        for (const char* key : {"element", "to_element"}) {
            if (props->contains(key) && (*props)[key].is_object() &&
                (*props)[key].value("type", "") == "string") {
                (*props)[key] = {{"enum", choices}};
                ++n;
            }
        }
        return n;
    });
}

// Sets the "content" string field of every variant whose "type" is the constant "write" to an enum of
// `choices`. Returns how many it restricted.
int restrict_write_text(nlohmann::ordered_json& schema, const nlohmann::ordered_json& choices) {
    return for_each_object(schema, [&](nlohmann::ordered_json& object) {
        auto props = object.find("properties");
        if (props == object.end() || !props->is_object() || !props->contains("type") ||
            !props->contains("content") || (*props)["type"].value("const", "") != "write" ||
            (*props)["content"].value("type", "") != "string")
            return 0;
        (*props)["content"] = {{"enum", choices}};
        return 1;
    });
}

nlohmann::ordered_json unique_choices(const std::vector<std::string>& values) {
    nlohmann::ordered_json choices = nlohmann::ordered_json::array();
    std::set<std::string> seen;
    for (const std::string& v : values)
        if (seen.insert(v).second) choices.push_back(v);
    return choices;
}

// The policy's schema with its element fields restricted to the listed descriptions and its write text to
// the task's quoted strings (each list with duplicates once; an empty list restricts nothing).
std::shared_ptr<const model::CompiledSchema> restricted_schema(const PromptProfile& p,
                                                               const PolicyStepInput& in) {
    nlohmann::ordered_json schema = nlohmann::ordered_json::parse(p.policy_schema_text);
    int n = 0;
    if (!in.element_choices.empty()) n += restrict_element_fields(schema, unique_choices(in.element_choices));
    if (!in.text_choices.empty()) n += restrict_write_text(schema, unique_choices(in.text_choices));
    if (n == 0) return p.policy_schema;
    return model::compile_json_schema(schema, p.path +
                                                  " (policy_schema, restricted to the listed elements and "
                                                  "the task's quoted text)");
}

}  // namespace

std::vector<std::string> quoted_strings(const std::string& task) {
    static const std::pair<std::string, std::string> kPairs[] = {{"\"", "\""}, {"“", "”"}, {"«", "»"}};
    std::vector<std::pair<size_t, std::string>> found;  // (position, text), sorted by position at the end
    for (const auto& [open, close] : kPairs) {
        size_t at = 0;
        while ((at = task.find(open, at)) != std::string::npos) {
            const size_t begin = at + open.size(), end = task.find(close, begin);
            if (end == std::string::npos) break;
            std::string text = task.substr(begin, end - begin);
            const size_t first = text.find_first_not_of(' '), last = text.find_last_not_of(' ');
            text = first == std::string::npos ? "" : text.substr(first, last - first + 1);
            if (!text.empty() && text.size() <= 200) found.emplace_back(at, std::move(text));
            at = end + close.size();
        }
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> out;
    for (auto& [pos, text] : found) out.push_back(std::move(text));
    return out;
}

std::string today_utc() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[16];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    return buf;
}

Policy::Policy(const ModuleContext& context)
    : ctx_(context), chat_(model_of(context).open_chat(chat_options(*context.profile))) {}

model::GenerateOptions Policy::options(const PolicyStepInput& in) const {
    const PromptProfile& p = *ctx_.profile;
    std::shared_ptr<const model::CompiledSchema> schema = p.policy_schema;
    if (in.forced)
        schema = p.answer_schema;
    else if (!in.element_choices.empty() || !in.text_choices.empty())
        schema = restricted_schema(p, in);
    return module_options(p.policy, schema, ctx_, 0x1000u + static_cast<uint64_t>(in.step));
}

PolicyOutput Policy::decide(const Memory& memory, const PolicyStepInput& in) {
    const PromptProfile& p = *ctx_.profile;
    std::string text = p.policy_turn->render(
        {
            {"task", memory.task()},
            {"step", std::to_string(in.step)},
            {"max_steps", std::to_string(in.max_steps)},
            {"notes", memory.notes_text()},
            {"history", memory.history_text(p.history_steps)},
            {"observation", in.observation},
            {"forced", in.forced ? " This is the last step: you must answer now with what you know." : ""},
        },
        {{"elements", in.elements}});
    Message turn{"user", text, {}};
    if (in.screenshot) turn.images.push_back(in.screenshot);

    const bool over_budget = chat_->session_tokens() > p.max_session_tokens;
    if (!started_ || over_budget) {
        // (Re)build the session: the system prompt, then one turn carrying the last k screenshots so the
        // policy keeps its visual context; the notes and history text carry the rest.
        const std::string system =
            p.policy_system->render({{"date", today_utc()}}, {{"schema", p.policy_schema_text}}) +
            p.policy_system_extra;
        if (started_) {
            turn.images = memory.recent_screenshots(p.screenshots_on_restart);
            if (in.screenshot && (turn.images.empty() || turn.images.back() != in.screenshot))
                turn.images.push_back(in.screenshot);
        }
        chat_->reset({Message{"system", system, {}}});
        started_ = true;
    }
    const auto parse = [&](const std::string& out) {
        std::vector<std::string> custom;
        for (const auto& c : p.custom_actions) custom.push_back(c->name);
        PolicyOutput o = parse_policy_output(out, custom);
        if (in.forced && !is_answer(o.action))
            throw Error(ErrorKind::kModelOutput, "this is the last step: the action must be answer");
        if (!in.forced) check_offered(o.action, p.policy_actions);
        check_custom_arguments(o.action, p);
        return o;
    };
    return ask_parsed<PolicyOutput>(*chat_, std::move(turn), options(in), p.policy.retries, *p.retry_feedback,
                                    "policy", in.step, ctx_.sink, parse);
}

Localizer::Localizer(const ModuleContext& context) : ctx_(context) {}

LocalizerResult Localizer::locate(const std::string& element, const std::shared_ptr<const model::Image>& sent,
                                  const ScreenFrame& frame, int step, const std::string& elements) {
    if (!sent) throw Error(ErrorKind::kInvalidArgument, "localizer: no screenshot to look at");
    const PromptProfile& p = *ctx_.profile;
    const ImageSize size{sent->width, sent->height};
    const std::unique_ptr<Chat> chat = model_of(ctx_).open_chat(chat_options(p));
    const std::string text =
        p.localizer_prompt->render({{"element", element},
                                    {"width", std::to_string(size.width)},
                                    {"height", std::to_string(size.height)}},
                                   {{"schema", p.localizer_schema_text}, {"elements", elements}});
    Message turn{"user", text, {sent}};
    const auto opts =
        module_options(p.localizer, p.localizer_schema, ctx_, 0x2000u + static_cast<uint64_t>(step));
    return ask_parsed<LocalizerResult>(*chat, std::move(turn), opts, p.localizer.retries, *p.retry_feedback,
                                       "localizer", step, ctx_.sink, [&](const std::string& out) {
                                           const LocalizerOutput o = parse_localizer_output(
                                               out, max_coordinate_x(p.localizer_convention, size),
                                               max_coordinate_y(p.localizer_convention, size));
                                           LocalizerResult r;
                                           r.x = o.x;
                                           r.y = o.y;
                                           r.css = to_css(p.localizer_convention, o.x, o.y, size, frame);
                                           return r;
                                       });
}

Validator::Validator(const ModuleContext& context) : ctx_(context) {}

Verdict Validator::judge(const Memory& memory, const std::string& answer,
                         const std::vector<std::shared_ptr<const model::Image>>& screenshots, int step,
                         const std::string& elements) {
    const PromptProfile& p = *ctx_.profile;
    const std::unique_ptr<Chat> chat = model_of(ctx_).open_chat(chat_options(p));
    chat->reset(
        {Message{"system", p.validator_system->render({}, {{"schema", p.validator_schema_text}}), {}}});
    Message turn{"user",
                 p.validator_turn->render({{"task", memory.task()},
                                           {"answer", answer},
                                           {"notes", memory.notes_text()},
                                           {"n_screenshots", std::to_string(screenshots.size())}},
                                          {{"elements", elements}}),
                 screenshots};
    const auto opts =
        module_options(p.validator, p.validator_schema, ctx_, 0x3000u + static_cast<uint64_t>(step));
    return ask_parsed<Verdict>(*chat, std::move(turn), opts, p.validator.retries, *p.retry_feedback,
                               "validator", step, ctx_.sink,
                               [](const std::string& out) { return parse_verdict(out); });
}

}  // namespace surf::agent
