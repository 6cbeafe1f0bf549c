#include "eval/eval_judge.h"
#include "base/utf8.h"

#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/coordinates.h"
#include "agent/model_call.h"
#include "agent/profile.h"
#include "base/error.h"
#include "base/file_text.h"
#include "model/vision/image_tiling.h"

namespace surf::eval {

using agent::ask_parsed;
using agent::fit_size;
using agent::ImageSize;
using agent::Message;
using agent::ModelCall;
using agent::ModelCallSink;
using agent::PromptTemplate;

namespace {

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r\n");
    return s.substr(a, b - a + 1);
}

std::string shorten(const std::string& s, size_t n) {
    return surf::shorten_utf8(s, n, "...");
}

// Strips a Markdown code fence (```json ... ```) that chat models like to wrap JSON in.
std::string strip_fence(const std::string& text) {
    std::string t = trim(text);
    if (t.rfind("```", 0) != 0) return t;
    const size_t nl = t.find('\n');
    const size_t end = t.rfind("```");
    if (nl == std::string::npos || end == std::string::npos || end <= nl) return t;
    return trim(t.substr(nl + 1, end - nl - 1));
}

std::shared_ptr<const model::Image> fit(const std::shared_ptr<const model::Image>& img, int max_w,
                                        int max_h) {
    if (!img) return img;
    const ImageSize size = fit_size({img->width, img->height}, max_w, max_h);
    if (size.width == img->width && size.height == img->height) return img;
    return std::make_shared<model::Image>(model::resize_bicubic(*img, size.width, size.height));
}

}  // namespace

ParsedJudgeReply parse_judge_reply(const std::string& text) {
    const std::string body = strip_fence(text);
    nlohmann::json j;
    bool is_json = false;
    try {
        j = nlohmann::json::parse(body);
        is_json = j.is_object();
    } catch (const nlohmann::json::parse_error&) {
    }
    ParsedJudgeReply r;
    if (is_json) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            if (it.key() != "reason" && it.key() != "verdict" && it.key() != "success")
                throw Error(ErrorKind::kModelOutput, "judge output: unknown field \"" + it.key() + "\"");
        }
        if (auto it = j.find("reason"); it != j.end()) {
            if (!it->is_string()) throw Error(ErrorKind::kModelOutput, "judge output.reason: not a string");
            r.reason = it->get<std::string>();
        }
        if (auto it = j.find("verdict"); it != j.end()) {
            const std::string v = it->is_string() ? trim(it->get<std::string>()) : "";
            if (v == "SUCCESS") {
                r.success = true;
            } else if (v == "NOT SUCCESS") {
                r.success = false;
            } else {
                throw Error(ErrorKind::kModelOutput, "judge output.verdict: " + it->dump() +
                                                         " (expected \"SUCCESS\" or \"NOT SUCCESS\")");
            }
            return r;
        }
        if (auto it = j.find("success"); it != j.end() && it->is_boolean()) {
            r.success = it->get<bool>();
            return r;
        }
        throw Error(ErrorKind::kModelOutput, "judge output: no \"verdict\" field");
    }
    // WebVoyager's auto_eval.py: 'NOT SUCCESS' in the reply → 0, elif 'SUCCESS' → 1, else no verdict.
    if (text.find("NOT SUCCESS") != std::string::npos) {
        r.success = false;
    } else if (text.find("SUCCESS") != std::string::npos) {
        r.success = true;
    } else {
        throw Error(ErrorKind::kModelOutput,
                    "judge output: neither JSON nor a SUCCESS / NOT SUCCESS verdict: " + shorten(text, 200));
    }
    r.reason = trim(text);
    return r;
}

LocalJudge::LocalJudge(std::shared_ptr<agent::ChatModel> model, LocalJudgeOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      system_(PromptTemplate::load(options_.system_prompt.empty() ? agent::prompts_dir() + "/judge_system.md"
                                                                  : options_.system_prompt)),
      turn_(PromptTemplate::load(options_.turn_prompt.empty() ? agent::prompts_dir() + "/judge_turn.md"
                                                              : options_.turn_prompt)),
      feedback_(PromptTemplate::load(agent::prompts_dir() + "/retry_feedback.md")) {
    const std::string schema_path = options_.schema.empty()
                                        ? agent::prompts_dir() + "/schemas/judge_verdict.schema.json"
                                        : options_.schema;
    schema_text_ = surf::read_text_file(schema_path);
    schema_ = model::compile_json_schema_text(schema_text_, schema_path);
    // Strict at load time, as the profile's prompts are: each template uses exactly what it is given.
    const auto require = [](const PromptTemplate& t, const std::set<std::string>& names) {
        if (t.placeholders() != names) {
            std::string want;
            for (const std::string& n : names) want += " {" + n + "}";
            throw Error(ErrorKind::kConfig, t.origin() + ": the judge prompt must use exactly" + want);
        }
    };
    require(system_, {"schema"});
    require(turn_, {"task", "answer", "n_screenshots"});
}

JudgeVerdict LocalJudge::judge(const JudgeInput& input) {
    JudgeVerdict v;
    std::vector<std::shared_ptr<const model::Image>> shots;
    for (const auto& s : input.screenshots) {
        if (s) shots.push_back(fit(s, options_.image_max_width, options_.image_max_height));
    }
    try {
        const std::unique_ptr<agent::Chat> chat =
            model_->open_chat({options_.enable_thinking, options_.stop_token});
        chat->reset({Message{"system", system_.render({{"schema", schema_text_}}), {}}});
        Message turn{"user",
                     turn_.render({{"task", input.task},
                                   {"answer", input.answer.empty() ? "(no answer)" : input.answer},
                                   {"n_screenshots", std::to_string(shots.size())}}),
                     shots};
        model::GenerateOptions opts;
        opts.max_tokens = options_.settings.max_tokens;
        opts.sampling = options_.settings.sampling;
        opts.schema = schema_;
        const ModelCallSink sink = [&](const ModelCall& call) {
            v.tokens += call.prefill_tokens + call.output_tokens;
            v.seconds += call.prefill_seconds + call.decode_seconds;
            v.raw = call.output;
        };
        const ParsedJudgeReply reply = ask_parsed<ParsedJudgeReply>(
            *chat, std::move(turn), opts, options_.settings.retries, feedback_, "judge", 0, sink,
            [](const std::string& out) { return parse_judge_reply(out); });
        v.success = reply.success;
        v.reason = reply.reason;
    } catch (const Error& e) {
        v.error = std::string(error_kind_name(e.kind())) + ": " + e.what();
    } catch (const std::exception& e) {
        v.error = std::string("internal: ") + e.what();
    }
    return v;
}

std::string normalize_answer(const std::string& text) {
    // Thousands separators first ("1,234" → "1234"), so the punctuation pass cannot split the number.
    std::string s;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == ',' && i > 0 && i + 3 < text.size() &&
            std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
            std::isdigit(static_cast<unsigned char>(text[i + 1])) &&
            std::isdigit(static_cast<unsigned char>(text[i + 2])) &&
            std::isdigit(static_cast<unsigned char>(text[i + 3])) &&
            (i + 4 >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i + 4])))) {
            continue;
        }
        s += c;
    }
    std::string spaced;
    for (size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        // A decimal point between digits stays ("4.5"); other ASCII punctuation separates words.
        const bool decimal = c == '.' && i > 0 && i + 1 < s.size() &&
                             std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                             std::isdigit(static_cast<unsigned char>(s[i + 1]));
        if (c < 0x80 && std::ispunct(c) && !decimal) {
            spaced += ' ';
        } else {
            spaced += static_cast<char>(c < 0x80 ? std::tolower(c) : c);
        }
    }
    std::istringstream words(spaced);
    std::string w, out;
    while (words >> w) {
        if (w == "a" || w == "an" || w == "the") continue;
        if (!out.empty()) out += ' ';
        out += w;
    }
    return out;
}

AnswerMatch match_answer(const std::string& answer, const std::vector<std::string>& references) {
    AnswerMatch m;
    const std::string a = trim(answer);
    const std::string na = " " + normalize_answer(answer) + " ";
    for (const std::string& ref : references) {
        if (trim(ref).empty()) continue;
        if (a == trim(ref)) m.exact = true;
        const std::string nr = normalize_answer(ref);
        if (nr.empty()) continue;
        if (na == " " + nr + " ") m.normalized = true;
        if (na.find(" " + nr + " ") != std::string::npos) m.contains = true;
    }
    if (m.exact) m.normalized = true;
    if (m.normalized) m.contains = true;
    return m;
}

}  // namespace surf::eval
