#include "agent/memory.h"

#include <algorithm>

namespace surf::agent {

Memory::Memory(std::string task, int keep_screenshots)
    : task_(std::move(task)), keep_(std::max(1, keep_screenshots)) {}

void Memory::add_note(const std::string& note) {
    if (note.find_first_not_of(" \t\r\n") == std::string::npos) return;
    notes_.push_back(note);
}

void Memory::add_screenshot(std::shared_ptr<const model::Image> image) {
    if (!image) return;
    screenshots_.push_back(std::move(image));
    while (static_cast<int>(screenshots_.size()) > keep_) screenshots_.pop_front();
}

std::string Memory::notes_text() const {
    if (notes_.empty()) return "(none)";
    std::string out;
    for (const std::string& n : notes_) out += "- " + n + "\n";
    out.pop_back();
    return out;
}

std::string Memory::history_text(int last_n) const {
    if (history_.empty() || last_n <= 0) return "(none)";
    std::string out;
    const size_t from = history_.size() > static_cast<size_t>(last_n) ? history_.size() - last_n : 0;
    for (size_t i = from; i < history_.size(); ++i) {
        out += "step " + std::to_string(history_[i].step) + ": " + history_[i].action + " -> " +
               history_[i].outcome + "\n";
    }
    out.pop_back();
    return out;
}

std::vector<std::shared_ptr<const model::Image>> Memory::recent_screenshots(int n) const {
    const size_t k = std::min(screenshots_.size(), static_cast<size_t>(std::max(0, n)));
    return {screenshots_.end() - static_cast<long>(k), screenshots_.end()};
}

}  // namespace surf::agent
