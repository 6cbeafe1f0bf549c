// Evaluation tasks and the task-file formats `surf eval` reads (docs/EVAL.md, "Input"). The format is
// detected from the content, never from the file name:
//   container: the first non-blank character: '[' = one JSON array of task objects (Online-Mind2Web's
//              Online_Mind2Web.json), '{' = JSON Lines, one task object per line (blank lines skipped, the
//              last line may lack its newline, as WebVoyager_data.jsonl does);
//   object:    the first task object's keys: "confirmed_task" = Online-Mind2Web (task_id, confirmed_task,
//              website); "ques" / "web" / "web_name" = WebVoyager (id, ques, web; web_name optional, so
//              WebVoyager's GAIA_web.jsonl loads, its "Final answer" being the reference answer); "task" /
//              "url" = surf's own format (id, task, url; unknown keys are errors).
// Every later object is read in the first one's format. Errors name the file, the line, the field and the
// format. Optional fields every format accepts:
//   "reference_answer": "..." or ["...", ...]   answers to match (exact / normalised)
//   "reference_type":   "golden" | "possible"   WebVoyager's kinds (possible = an example answer)
//   "allowed_domains":  ["example.com", ...]     this task's allow-list (replaces --allow-domain)
//   "max_steps":        N                        this task's step budget (replaces --max-steps)
//   "viewport":         [W, H]                   this task's viewport in CSS pixels (replaces --viewport)
//   "check":            "(answer) => ..."        a JavaScript function run in the task's page after the run
//                                                with the final answer; it returns {success, reason} (or a
//                                                boolean) from the page's state, and its verdict decides the
//                                                task (generated tasks: train/tasks/README.md)
// Published formats' other fields (Online-Mind2Web's level and reference_length, GAIA's Level and task_id)
// are kept in EvalTask::fields and carried into results.jsonl. WebVoyager's separate reference_answer.json
// ({site: {answers: [{id, type, ans}]}}) can be attached with attach_references().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surf::eval {

enum class TaskFormat { kWebVoyager, kMind2Web, kSurf };
// "WebVoyager", "Online-Mind2Web", "surf": the names errors and the plan use.
const char* task_format_name(TaskFormat format);

struct EvalTask {
    std::string id;                               // unique within a task file
    std::string site;                             // web_name / site, else the start URL's host
    std::string question;                         // ques / confirmed_task / task
    std::string start_url;                        // web / website / url
    std::vector<std::string> references;          // empty: no reference answer
    std::string reference_type;                   // "golden", "possible" or ""
    std::vector<std::string> allowed_domains;     // empty: the run's default
    int max_steps = 0;                            // 0: the run's default
    int viewport_width = 0, viewport_height = 0;  // 0: the run's default
    std::string check;                            // JavaScript function of the answer; "" = none
    nlohmann::ordered_json fields = nlohmann::ordered_json::object();  // carried along unread
    int line = 0;                                                      // 1-based line in the task file
};

struct TaskFile {
    TaskFormat format = TaskFormat::kWebVoyager;
    std::vector<EvalTask> tasks;
};

// Parses one task object (a JSONL line) in the format its own keys name; `where` ("tasks.jsonl:12")
// prefixes every error (Error kFormat).
EvalTask parse_task_line(const std::string& line, const std::string& where);
// Parses a whole task file in the detected format; duplicate ids are an error naming both lines. Throws
// kIo / kFormat.
TaskFile parse_task_file(const std::string& text, const std::string& name);
std::vector<EvalTask> parse_tasks(const std::string& text, const std::string& name);
TaskFile load_task_file(const std::string& path);
std::vector<EvalTask> load_tasks(const std::string& path);

// A short site name for a URL: its host without a leading "www." ("https://www.kbb.com/x" → "kbb.com"), or
// the scheme for URLs without a host ("file", "data", "about").
std::string site_of_url(const std::string& url);

// Adds WebVoyager's reference answers (data/reference_answer.json) to tasks whose id is "<Site>--<n>":
// the answer with id n under the site whose name matches the task's site. Returns how many were attached.
int attach_references(std::vector<EvalTask>& tasks, const std::string& reference_json,
                      const std::string& name);

// `--shard i/n`: the i-th of n shards (0-based), task k goes to shard k mod n, so every shard gets a
// mix of sites and the union of all shards is the whole file.
struct Shard {
    int index = 0;
    int count = 1;
};
Shard parse_shard(const std::string& text);  // "2/8"; throws kInvalidArgument naming the text
std::vector<EvalTask> select_shard(const std::vector<EvalTask>& tasks, const Shard& shard);

// `--ids`, `--sites`, `--limit`: the tasks whose id is listed (every listed id must exist), whose site is
// listed (case-insensitive; every listed site must exist), then the first `limit` of them (0 = all), in
// file order. An unknown id or site is an error (kInvalidArgument) naming it and, for sites, the file's.
struct TaskSelection {
    std::vector<std::string> ids;
    std::vector<std::string> sites;
    int64_t limit = 0;
};
std::vector<EvalTask> select_tasks(const std::vector<EvalTask>& tasks, const TaskSelection& selection);

// A folder name for a task id: [A-Za-z0-9._-] kept, other bytes replaced by '_', plus a short hash of
// the id when anything was replaced (so distinct ids never share a folder).
std::string task_dir_name(const std::string& id);

}  // namespace surf::eval
