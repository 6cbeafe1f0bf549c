#include "agent/thought_target.h"

#include <limits>

#include "agent/modules.h"

namespace surf::agent {

namespace {

// What an action may be turned to: any control for a click; a field or a dropdown for a write (typing into a
// list box chooses from it); a dropdown for a select (tools/browser/page_elements.cpp names them so).
bool takes(const ClickAction&, const ListedElement& e) {
    return e.control;
}
bool takes(const WriteAction&, const ListedElement& e) {
    return e.control && (e.description.find(" field") != std::string::npos ||
                         e.description.find(" dropdown") != std::string::npos);
}
bool takes(const SelectAction&, const ListedElement& e) {
    return e.control && e.description.find(" dropdown") != std::string::npos;
}

// The listed element naming `text` that action `a` may be turned to, nearest to its point; null when none.
template <typename A>
const ListedElement* target_naming(const A& a, const std::vector<ListedElement>& listed,
                                   const std::string& text) {
    const ListedElement* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const ListedElement& e : listed) {
        if (!takes(a, e) || e.description.find(text) == std::string::npos) continue;
        const double dx = e.x - a.x, dy = e.y - a.y, d = dx * dx + dy * dy;
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
        const ListedElement* e = target_naming(a, listed, *q);
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
