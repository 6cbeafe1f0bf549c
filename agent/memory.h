// The agent's memory (spec/agent.md §1.1–1.2): the task, the notes the policy chose to keep (and the
// validator's rejections), the action history, and the last k screenshots as they were sent.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/vision/image.h"

namespace surf::agent {

struct HistoryEntry {
    int step = 0;
    std::string action;   // describe_action()
    std::string outcome;  // what happened
};

class Memory {
public:
    Memory(std::string task, int keep_screenshots);

    const std::string& task() const { return task_; }
    void add_note(const std::string& note);  // empty notes are skipped
    void add_history(HistoryEntry entry) { history_.push_back(std::move(entry)); }
    void add_screenshot(std::shared_ptr<const model::Image> image);

    // The notes as one block ("(none)" when empty), the last n history entries as lines.
    std::string notes_text() const;
    std::string history_text(int last_n) const;
    const std::vector<std::string>& notes() const { return notes_; }
    const std::vector<HistoryEntry>& history() const { return history_; }
    // Oldest first; at most keep_screenshots.
    std::vector<std::shared_ptr<const model::Image>> recent_screenshots(int n) const;

private:
    std::string task_;
    int keep_;
    std::vector<std::string> notes_;
    std::vector<HistoryEntry> history_;
    std::deque<std::shared_ptr<const model::Image>> screenshots_;
};

}  // namespace surf::agent
