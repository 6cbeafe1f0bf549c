#include "agent/thought_target.h"

#include <limits>

#include "agent/modules.h"

namespace surf::agent {

namespace {

// The listed control naming `text` nearest to (x, y); null when none names it.
const ListedElement* control_naming(const std::vector<ListedElement>& listed, const std::string& text, int x,
                                    int y) {
    const ListedElement* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const ListedElement& e : listed) {
        if (!e.control || e.description.find(text) == std::string::npos) continue;
        const double dx = e.x - x, dy = e.y - y, d = dx * dx + dy * dy;
        if (d < best_d) best = &e, best_d = d;
    }
    return best;
}

template <typename A>
std::string retarget(A& a, const std::vector<std::string>& quotes, const std::vector<ListedElement>& listed) {
    for (const std::string& q : quotes) {
        if (a.element.find(q) != std::string::npos) return "";
    }
    for (auto q = quotes.rbegin(); q != quotes.rend(); ++q) {
        const ListedElement* e = control_naming(listed, *q, a.x, a.y);
        if (!e) continue;
        std::string was = a.element;
        a.element = e->description, a.x = e->x, a.y = e->y;
        return was;
    }
    return "";
}

}  // namespace

std::string follow_thought(Action& action, const std::string& thought,
                           const std::vector<ListedElement>& listed) {
    const std::vector<std::string> quotes = quoted_strings(thought);
    if (quotes.empty()) return "";
    if (auto* a = std::get_if<ClickAction>(&action)) return retarget(*a, quotes, listed);
    if (auto* a = std::get_if<WriteAction>(&action)) return retarget(*a, quotes, listed);
    if (auto* a = std::get_if<SelectAction>(&action)) return retarget(*a, quotes, listed);
    return "";
}

}  // namespace surf::agent
