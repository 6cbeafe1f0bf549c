// An evaluation's summary.json and report.html, from its results.jsonl records; and `surf eval merge`,
// which combines result folders (shards) into one.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_results.h"

namespace surf::eval {

// Success rates (overall, without errors, per site), judge and reference-match counts, tokens and
// model/browser/wall seconds per task, step and latency distributions, the error list. `planned` is the
// number of tasks the run was asked for (0 when unknown, as after a merge).
nlohmann::ordered_json summarize(const std::vector<TaskRecord>& records, size_t planned = 0);

// A page: totals, a per-site table, step and latency histograms as inline SVG, and a task table (sorted by a
// click on a column's header, filtered by a text box) with one row per task linking its trace folder (trace
// paths are relative to the page's folder). With `dir`, the results folder, each row shows a thumbnail of its
// trace's last screenshot (linked, not embedded).
std::string render_eval_report(const std::vector<TaskRecord>& records, const nlohmann::ordered_json& summary,
                               const std::string& dir = "");

// Histogram bins whose edges are round numbers: a step of 1, 2 or 5 × 10^k (whole numbers for integer data,
// one bin per value when the range is small), the first edge a multiple of the step, about `wanted` bins.
struct RoundBins {
    double lo = 0, step = 1;
    int count = 1;
};
RoundBins round_bins(double lo, double hi, int wanted, bool integers);
// An axis label for an edge at `step` spacing: "0.25", "40", "4.5k", "12M" (never exponent notation).
std::string tick_label(double value, double step);

// An inline SVG bar chart of a histogram of `values` over about `bins` round bins (round_bins), at most eight
// labelled edges. Exposed for tests.
std::string svg_histogram(const std::vector<double>& values, int bins, const std::string& x_label,
                          bool integers);

// Writes DIR/summary.json and DIR/report.html (each via a temp file and rename); `run` (eval/eval_config.h),
// unless null, goes into both under "run". Throws Error(kIo).
void write_summary_and_report(const std::string& dir, const std::vector<TaskRecord>& records,
                              size_t planned = 0, const nlohmann::ordered_json& run = nullptr);

// Reads DIR/results.jsonl of each folder (a torn last line is ignored), checks that no task id appears in
// two folders (Error kInvalidArgument naming both), rewrites trace paths relative to out_dir, and writes
// out_dir/results.jsonl, summary.json and report.html. Returns the merged records.
std::vector<TaskRecord> merge_results(const std::vector<std::string>& dirs, const std::string& out_dir);

}  // namespace surf::eval
