// The results of an evaluation: one JSON line per finished task in DIR/results.jsonl. Each line is
// written with a single write() on an O_APPEND descriptor and fsync'ed before the task counts as done,
// so a kill -9 can at worst leave a torn last line; opening the file again drops that line (the task runs
// again) and a task is never recorded twice. A lock file keeps two runners off one folder.
#pragma once

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surf::eval {

// One task's outcome, as a results.jsonl line.
struct TaskRecord {
    std::string id, site, question, start_url;
    // answered / rejected / no_answer (the agent's own ending) or error (the task could not be run:
    // the start page did not load, the browser context crashed, the engine failed).
    std::string status;
    std::string answer;
    bool validated = false, forced = false;
    int attempts = 0;  // answer attempts
    int steps = 0, model_calls = 0, step_errors = 0;
    int64_t prompt_tokens = 0, image_tokens = 0, output_tokens = 0;
    double model_seconds = 0;    // sum of this task's engine calls (prefill + decode), judge excluded
    double browser_seconds = 0;  // time in the browser: open, observe (screenshots), actions
    double wall_seconds = 0;
    std::string error;

    // The judge (WebVoyager auto-evaluator protocol); judge == "" when none ran.
    std::string judge;                  // "local", or the remote judge's name
    std::optional<bool> judge_success;  // nullopt: no usable verdict
    std::string judge_reason;
    int64_t judge_tokens = 0;
    double judge_seconds = 0;

    // Reference answers, when the task has some.
    std::vector<std::string> references;
    std::string reference_type;
    std::optional<bool> exact_match, normalized_match, contains_match;

    // The task's own page check (EvalTask::check), when it has one: its verdict from the page's state.
    std::optional<bool> check_success;
    std::string check_reason;

    // The verdict the summary counts: the page check's when the task has one, else the judge's when it gave
    // one, else the reference match (normalised or contained), else nullopt (unknown).
    std::optional<bool> success;

    std::string trace;                    // trace folder, relative to the results folder
    std::string started_at, finished_at;  // UTC, ISO 8601
    std::string shard;                    // "i/n" or ""
    // The task file's fields the task format carries along unread (Online-Mind2Web's level,
    // reference_length; GAIA's Level): "task_fields" in the line, absent when empty.
    nlohmann::ordered_json task_fields = nlohmann::ordered_json::object();
};

nlohmann::ordered_json record_to_json(const TaskRecord& record);
// Throws Error(kFormat) naming `where` and the field.
TaskRecord record_from_json(const nlohmann::json& j, const std::string& where);

// Reads results.jsonl. A last line without its newline or that does not parse is reported in *torn_bytes
// (its length) and skipped; any other bad line is an error naming the file and line.
std::vector<TaskRecord> read_results(const std::string& path, size_t* torn_bytes = nullptr);

class ResultsFile {
public:
    // Opens (creating) DIR/results.jsonl for a run: takes DIR/.lock (Error kInvalidArgument if another
    // runner holds it), drops a torn last line, and with drop_errors rewrites the file without the
    // error records (atomically: temp file, fsync, rename) so those tasks run again.
    ResultsFile(const std::string& dir, bool drop_errors = false);
    ~ResultsFile();
    ResultsFile(const ResultsFile&) = delete;
    ResultsFile& operator=(const ResultsFile&) = delete;

    const std::vector<TaskRecord>& existing() const { return existing_; }
    std::set<std::string> finished_ids() const;
    size_t torn_bytes_dropped() const { return torn_; }
    size_t errors_dropped() const { return errors_dropped_; }

    // Appends one record (one write + fsync). Thread-safe. Throws Error(kIo) / kInvalidArgument when the id
    // is already in the file.
    void append(const TaskRecord& record);
    std::vector<TaskRecord> all() const;

private:
    std::string dir_, path_;
    int fd_ = -1, lock_fd_ = -1;
    size_t torn_ = 0, errors_dropped_ = 0;
    std::vector<TaskRecord> existing_;
    std::vector<TaskRecord> appended_;
    std::set<std::string> ids_;
    mutable std::mutex mutex_;
};

// Replaces `path` with `text` through a temp file (fsync'ed) and a rename, so readers see the old or the new
// file, never a part. Throws Error(kIo).
void write_file_atomic(const std::string& path, const std::string& text);

// Current UTC time as "2026-11-27T10:15:00Z".
std::string utc_now_iso();

}  // namespace surf::eval
