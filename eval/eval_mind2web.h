// An evaluation's trajectories in Online-Mind2Web's WebJudge layout (OSU-NLP-Group/Online-Mind2Web,
// src/run.py, result.json "v1"), so its judges (WebJudge, WebVoyager_eval, Autonomous_eval) can score a surf
// run unchanged:
//   OUT/<task_id>/result.json   {"task_id", "task", "final_result_response", "action_history", "thoughts"}
//   OUT/<task_id>/trajectory/   the task's screenshots in step order: 0.png, 1.png, ... (run.py orders them
//                               by the first number in the name)
// action_history holds only the actions the agent performed in the browser ("click \"Search\"", "write
// \"Lyon\" into \"City\"", ...): its answers are left out, as Online-Mind2Web asks, because they are the
// agent's output rather than actions. thoughts holds the policy's thought of every step. Every recorded task
// gets a folder, errors included (an empty trajectory), because WebJudge's success rate divides by the number
// of folders.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_results.h"

namespace surf::eval {

// result.json for one record, from the step lines of its trace.jsonl (torn or unparsable lines are skipped).
nlohmann::ordered_json mind2web_result(const TaskRecord& record,
                                       const std::vector<nlohmann::json>& trace_steps);

struct Mind2WebExport {
    size_t tasks = 0;        // folders written
    size_t screenshots = 0;  // screenshots copied into trajectory/ folders
};

// Writes (rewrites) out_dir/<task folder>/ for every record; traces are read relative to results_dir. A task
// folder is named by task_dir_name(id), which is the id itself for Online-Mind2Web's hex ids. Throws
// Error(kIo) naming a path that cannot be written.
Mind2WebExport write_mind2web(const std::string& results_dir, const std::vector<TaskRecord>& records,
                              const std::string& out_dir);

}  // namespace surf::eval
