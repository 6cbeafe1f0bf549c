// A run's recording: one folder with trace.jsonl (one JSON object per line: run start, every model call
// with its token counts, output and latency, every step with its action, point, result and error, answer
// verdicts, the end), screenshots/step_NNN.png, and report.html, a self-contained page (screenshots
// embedded as data URIs) showing each step's screenshot with the click point drawn on it, the thought,
// notes and action. Lines are flushed as they are written, so a crashed run still leaves its trace.
#pragma once

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/model_call.h"

namespace surf::agent {

struct TraceStep {
    int step = 0;
    std::string screenshot;  // relative path, "" if none
    int shot_width = 0, shot_height = 0;
    bool has_point = false;
    double point_px = 0, point_py = 0;  // screenshot pixels
    bool has_to_point = false;          // a second point (where a drag ends)
    double to_px = 0, to_py = 0;        // screenshot pixels
    bool has_policy_point = false;      // where the policy itself pointed, when the localizer chose the click
    double policy_px = 0, policy_py = 0;  // screenshot pixels
    double seconds = 0;                   // the step's wall time
    std::string url, thought, note, action, outcome, error;
    std::string policy_element;  // the element the policy named, where the run turned the action to another
    std::vector<std::string> verdicts;
    std::vector<std::string> events;  // browser events seen before this step
    std::string elements;            // the page's element list as the policy read it ("" when none is listed)
    std::vector<std::string> calls;  // the step's model calls, one line each (filled by Trace)
};

class Trace {
public:
    // Creates the folder (and screenshots/); throws Error(kIo) naming it.
    explicit Trace(const std::string& dir);
    ~Trace();

    void write(nlohmann::ordered_json line);  // adds "t" (seconds since start)
    void model_call(const ModelCall& call);
    // Saves a screenshot; returns its path relative to the folder.
    std::string screenshot(int step, const std::vector<uint8_t>& png);
    void step(const TraceStep& step);
    // Writes report.html (and a final line). Never throws; a failure is written to the trace.
    void finish(const RunOptions& options, const RunResult& result);

    const std::string& dir() const { return dir_; }
    // Every later line and step is written with these secrets' values replaced by their placeholders.
    void set_secrets(const Secrets* secrets) { secrets_ = secrets; }

private:
    const Secrets* secrets_ = nullptr;
    std::string dir_;
    std::FILE* file_ = nullptr;
    std::mutex mutex_;
    double t0_ = 0;
    std::vector<TraceStep> steps_;
    std::map<int, std::vector<std::string>> calls_;  // model calls by step, until the step is written
};

// The report page for a finished run (exposed for tests).
std::string render_report_html(const std::string& dir, const RunOptions& options, const RunResult& result,
                               const std::vector<TraceStep>& steps);
std::string html_escape(const std::string& text);

}  // namespace surf::agent
