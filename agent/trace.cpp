#include "agent/trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/replay.h"
#include "base/error.h"
#include "tools/browser/screenshot.h"

namespace surf::agent {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

std::string html_escape(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

Trace::Trace(const std::string& dir) : dir_(dir), t0_(now_seconds()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(dir) / "screenshots", ec);
    if (ec) throw Error(ErrorKind::kIo, dir + ": cannot create the trace folder: " + ec.message());
    const std::string path = (std::filesystem::path(dir) / "trace.jsonl").string();
    file_ = std::fopen(path.c_str(), "w");
    if (!file_) throw Error(ErrorKind::kIo, path + ": cannot open for writing");
}

Trace::~Trace() {
    if (file_) std::fclose(file_);
}

void Trace::write(nlohmann::ordered_json line) {
    std::lock_guard<std::mutex> lock(mutex_);
    nlohmann::ordered_json out;
    out["t"] = std::round((now_seconds() - t0_) * 1000.0) / 1000.0;
    for (auto it = line.begin(); it != line.end(); ++it) out[it.key()] = it.value();
    if (secrets_) out = secrets_->redact_json(out);
    // Model output may hold invalid UTF-8 (a cut multi-byte character): replace, never throw.
    const std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fputs(text.c_str(), file_);
    std::fputc('\n', file_);
    std::fflush(file_);
}

void Trace::model_call(const ModelCall& c) {
    {
        char line[256];
        std::snprintf(line, sizeof line,
                      "%s%s: %lld prompt tokens (%lld image), %lld out, %.2f s (prefill %.2f, decode %.2f)%s",
                      c.role.c_str(), c.attempt > 0 ? (" retry " + std::to_string(c.attempt)).c_str() : "",
                      static_cast<long long>(c.prefill_tokens), static_cast<long long>(c.image_tokens),
                      static_cast<long long>(c.output_tokens), c.latency_seconds, c.prefill_seconds,
                      c.decode_seconds, c.error.empty() ? "" : ", unusable: ");
        std::string text = line;
        if (!c.error.empty()) text += c.error.substr(0, 160);
        std::lock_guard<std::mutex> lock(mutex_);
        calls_[c.step].push_back(secrets_ ? secrets_->redact(text) : text);
    }
    write({{"type", "model_call"},
           {"role", c.role},
           {"step", c.step},
           {"attempt", c.attempt},
           {"feed_mode", c.feed_mode},
           {"prompt_tokens", c.prefill_tokens},
           {"image_tokens", c.image_tokens},
           {"images", c.images},
           {"output_tokens", c.output_tokens},
           {"session_tokens", c.session_tokens},
           {"finish", c.finish},
           {"output", c.output},
           {"error", c.error},
           {"prefill_s", c.prefill_seconds},
           {"decode_s", c.decode_seconds},
           {"latency_s", c.latency_seconds}});
}

std::string Trace::screenshot(int step, const std::vector<uint8_t>& png) {
    char name[64];
    std::snprintf(name, sizeof name, "screenshots/step_%03d.png", step);
    const std::filesystem::path path = std::filesystem::path(dir_) / name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
    if (!out) throw Error(ErrorKind::kIo, path.string() + ": cannot write the screenshot");
    return name;
}

void Trace::step(const TraceStep& step) {
    TraceStep s = step;
    if (secrets_) {
        for (std::string* f : {&s.url, &s.thought, &s.note, &s.action, &s.outcome, &s.error, &s.elements})
            *f = secrets_->redact(*f);
        for (auto* list : {&s.events, &s.verdicts})
            for (std::string& e : *list) e = secrets_->redact(e);
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = calls_.find(s.step);
        if (it != calls_.end()) {
            s.calls = std::move(it->second);
            calls_.erase(it);
        }
        steps_.push_back(s);
    }
    nlohmann::ordered_json j{
        {"type", "step"},       {"step", s.step},    {"url", s.url},       {"screenshot", s.screenshot},
        {"thought", s.thought}, {"note", s.note},    {"action", s.action}, {"outcome", s.outcome},
        {"error", s.error},     {"events", s.events}};
    if (!s.elements.empty()) j["elements"] = s.elements;
    if (!s.policy_element.empty()) j["policy_element"] = s.policy_element;
    if (s.has_point) j["point_px"] = {s.point_px, s.point_py};
    if (s.has_to_point) j["to_point_px"] = {s.to_px, s.to_py};
    if (s.has_policy_point) j["policy_point_px"] = {s.policy_px, s.policy_py};
    j["seconds"] = std::round(s.seconds * 1000.0) / 1000.0;
    write(std::move(j));
}

void Trace::finish(const RunOptions& options, const RunResult& result) {
    try {
        std::vector<TraceStep> steps;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            steps = steps_;
        }
        // A replay left by an earlier run in this folder goes first; one cut short by an error goes too.
        const std::filesystem::path replay = std::filesystem::path(dir_) / "replay.webm";
        std::error_code ec;
        std::filesystem::remove(replay, ec);
        try {
            write_replay(dir_, steps, result.answer, replay.string());
        } catch (const std::exception& e) {
            std::filesystem::remove(replay, ec);
            write({{"type", "error"}, {"where", "replay"}, {"message", e.what()}});
        }
        const std::string html = render_report_html(dir_, options, result, steps);
        const std::filesystem::path path = std::filesystem::path(dir_) / "report.html";
        std::ofstream out(path, std::ios::binary);
        out << html;
        if (!out) throw Error(ErrorKind::kIo, path.string() + ": cannot write");
    } catch (const std::exception& e) {
        write({{"type", "error"}, {"where", "report"}, {"message", e.what()}});
    }
}

std::string render_report_html(const std::string& dir, const RunOptions& options, const RunResult& result,
                               const std::vector<TraceStep>& steps) {
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>surf run: " << html_escape(options.task)
      << "</title>\n<style>body{font-family:sans-serif;margin:1em;max-width:1100px}"
         ".step{border-top:1px solid #ccc;padding:.8em 0;display:flex;gap:1em}.shot{flex:0 0 55%}"
         ".shot svg{width:100%;height:auto;border:1px solid #888}.meta{flex:1;font-size:14px}"
         ".k{color:#666}.err{color:#b00}.ok{color:#070}pre{white-space:pre-wrap;margin:.2em "
         "0}code{white-space:pre-wrap;word-break:break-all}.calls{font-size:12px;color:#444}"
         ".legend{font-size:13px;color:#444}</style></head><body>\n";
    h << "<h1>surf run</h1>\n<p><span class=\"k\">Task:</span> " << html_escape(options.task) << "<br>"
      << "<span class=\"k\">Start:</span> " << html_escape(options.start_url) << "<br>"
      << "<span class=\"k\">Status:</span> <b class=\""
      << (result.status == RunStatus::kAnswered ? "ok" : "err") << "\">" << run_status_name(result.status)
      << "</b> after " << result.steps << " steps, " << result.answer_attempts << " answer attempt(s), "
      << result.model_calls << " model calls, " << result.errors << " errors, " << result.seconds
      << " s<br><span class=\"k\">Answer:</span> " << html_escape(result.answer) << "</p>\n";
    if (!result.error.empty()) h << "<p class=\"err\">" << html_escape(result.error) << "</p>\n";
    if (std::filesystem::exists(std::filesystem::path(dir) / "replay.webm"))
        h << "<p><video class=\"replay\" src=\"replay.webm\" controls muted "
             "style=\"max-width:100%\"></video></p>\n";
    h << "<p class=\"legend\">Red: where the action clicked (the localizer's point, or the policy's when "
         "trusted); "
         "blue ring: where the policy itself pointed.</p>\n";
    for (const TraceStep& s : steps) {
        h << "<div class=\"step\"><div class=\"shot\">";
        if (!s.screenshot.empty() && s.shot_width > 0) {
            const std::string png = read_file(std::filesystem::path(dir) / s.screenshot);
            const std::string b64 = tools::base64_encode(std::vector<uint8_t>(png.begin(), png.end()));
            const double r = std::max(6.0, s.shot_width / 60.0);
            h << "<svg viewBox=\"0 0 " << s.shot_width << " " << s.shot_height
              << "\" xmlns=\"http://www.w3.org/2000/svg\">"
              << "<image width=\"" << s.shot_width << "\" height=\"" << s.shot_height
              << "\" href=\"data:image/png;base64," << b64 << "\"/>";
            if (s.has_point) {
                h << "<circle class=\"click\" cx=\"" << s.point_px << "\" cy=\"" << s.point_py << "\" r=\""
                  << r << "\" fill=\"rgba(255,0,0,.35)\" stroke=\"red\" stroke-width=\"" << r / 3 << "\"/>"
                  << "<circle cx=\"" << s.point_px << "\" cy=\"" << s.point_py << "\" r=\"" << r / 4
                  << "\" fill=\"red\"/>";
            }
            if (s.has_policy_point) {
                h << "<circle class=\"policy\" cx=\"" << s.policy_px << "\" cy=\"" << s.policy_py << "\" r=\""
                  << r * 0.8 << "\" fill=\"none\" stroke=\"#1565c0\" stroke-width=\"" << r / 4 << "\"/>";
            }
            if (s.has_point && s.has_to_point) {  // a drag: a line to where it ends, and a ring there
                h << "<line x1=\"" << s.point_px << "\" y1=\"" << s.point_py << "\" x2=\"" << s.to_px
                  << "\" y2=\"" << s.to_py << "\" stroke=\"red\" stroke-width=\"" << r / 3 << "\"/>"
                  << "<circle class=\"drop\" cx=\"" << s.to_px << "\" cy=\"" << s.to_py << "\" r=\"" << r
                  << "\" fill=\"none\" stroke=\"red\" stroke-width=\"" << r / 3 << "\"/>";
            }
            h << "</svg>";
        } else {
            h << "<p class=\"err\">(no screenshot)</p>";
        }
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.2f s", s.seconds);
        h << "</div><div class=\"meta\"><b>Step " << s.step << "</b> <span class=\"k\">" << secs << " · "
          << html_escape(s.url) << "</span>"
          << "<p><span class=\"k\">Thought:</span><pre>" << html_escape(s.thought) << "</pre></p>"
          << "<p><span class=\"k\">Note:</span><pre>" << html_escape(s.note) << "</pre></p>"
          << "<p><span class=\"k\">Action:</span> <code>" << html_escape(s.action) << "</code></p>";
        if (!s.policy_element.empty()) {
            h << "<p><span class=\"k\">The policy named:</span> " << html_escape(s.policy_element)
              << " (turned to the element its thought quotes)</p>";
        }
        h << "<p><span class=\"k\">Result:</span> " << html_escape(s.outcome) << "</p>";
        if (!s.error.empty()) h << "<p class=\"err\">" << html_escape(s.error) << "</p>";
        for (const std::string& e : s.events)
            h << "<p><span class=\"k\">Browser:</span> " << html_escape(e) << "</p>";
        for (const std::string& v : s.verdicts)
            h << "<p><span class=\"k\">Validator:</span> " << html_escape(v) << "</p>";
        if (!s.calls.empty()) {
            h << "<div class=\"calls\"><span class=\"k\">Model calls:</span>";
            for (const std::string& c : s.calls) h << "<br>" << html_escape(c);
            h << "</div>";
        }
        h << "</div></div>\n";
    }
    h << "</body></html>\n";
    return h.str();
}

}  // namespace surf::agent
