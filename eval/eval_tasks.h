// Evaluation tasks (spec/agent.md §3.1): the WebVoyager JSONL format, one object per line with
// web_name (site), id, ques (task text) and web (start URL), plus optional per-task fields surf adds:
//   "reference_answer": "..." or ["...", ...]   answers to match (exact / normalised)
//   "reference_type":   "golden" | "possible"   WebVoyager's kinds (possible = an example answer)
//   "allowed_domains":  ["example.com", ...]     this task's allow-list (replaces --allow-domain)
//   "max_steps":        N                        this task's step budget (replaces --max-steps)
//   "viewport":         [W, H]                   this task's viewport in CSS pixels (replaces --viewport)
//   "check":            "(answer) => ..."        a JavaScript function run in the task's page after the run
//                                                with the final answer; it returns {success, reason} (or a
//                                                boolean) from the page's state, and its verdict decides the
//                                                task (generated tasks: train/tasks/README.md)
// Unknown fields are ignored (published task files carry extra keys). Blank lines are skipped and the
// last line may lack its newline (WebVoyager_data.jsonl does). WebVoyager's separate
// reference_answer.json ({site: {answers: [{id, type, ans}]}}) can be attached with attach_references().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surf::eval {

struct EvalTask {
    std::string id;                            // unique within a task file
    std::string site;                          // web_name
    std::string question;                      // ques
    std::string start_url;                     // web
    std::vector<std::string> references;       // empty: no reference answer
    std::string reference_type;                // "golden", "possible" or ""
    std::vector<std::string> allowed_domains;  // empty: the run's default
    int max_steps = 0;                         // 0: the run's default
    int viewport_width = 0, viewport_height = 0;  // 0: the run's default
    std::string check;                         // JavaScript function of the answer; "" = none
    int line = 0;                              // 1-based line in the task file
};

// Parses one task line; `where` ("tasks.jsonl:12") prefixes every error (Error kFormat).
EvalTask parse_task_line(const std::string& line, const std::string& where);
// Parses a whole task file; duplicate ids are an error naming both lines. Throws kIo / kFormat.
std::vector<EvalTask> parse_tasks(const std::string& text, const std::string& name);
std::vector<EvalTask> load_tasks(const std::string& path);

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
