#include "agent/page_text.h"

#include <algorithm>
#include <cmath>

namespace surf::agent {

std::vector<tools::PageElement> listed_elements(const std::vector<tools::PageElement>& elements,
                                                int max_count, const std::vector<std::string>& named) {
    std::vector<bool> keep(elements.size(), false);
    int left = std::max(0, max_count);
    // Priority 0: named by the task, 1: a control, 2: the rest; each pass keeps the next priority in page
    // order.
    const auto priority = [&](const tools::PageElement& e) {
        for (const std::string& s : named)
            if (e.description.find(s) != std::string::npos) return 0;
        return e.control ? 1 : 2;
    };
    for (int pass = 0; pass < 3; ++pass) {
        for (size_t i = 0; i < elements.size() && left > 0; ++i) {
            if (priority(elements[i]) == pass) {
                keep[i] = true;
                --left;
            }
        }
    }
    std::vector<tools::PageElement> out;
    for (size_t i = 0; i < elements.size(); ++i)
        if (keep[i]) out.push_back(elements[i]);
    return out;
}

std::vector<ListedElement> listed_points(const std::vector<tools::PageElement>& elements, int max_count,
                                         PointConvention convention, ImageSize sent, const ScreenFrame& frame,
                                         const std::vector<std::string>& named) {
    const double max_x = max_coordinate_x(convention, sent), max_y = max_coordinate_y(convention, sent);
    std::vector<ListedElement> out;
    for (const tools::PageElement& e : listed_elements(elements, max_count, named)) {
        double x = 0, y = 0;
        from_css(convention, {e.x + e.width / 2, e.y + e.height / 2}, sent, frame, &x, &y);
        out.push_back({e.description, e.state, static_cast<int>(std::clamp(std::round(x), 0.0, max_x)),
                       static_cast<int>(std::clamp(std::round(y), 0.0, max_y)), e.control});
    }
    return out;
}

const ListedElement* find_listed(const std::vector<ListedElement>& listed, const std::string& description,
                                 double x, double y) {
    const ListedElement* best = nullptr;
    double best_d = 0;
    for (const ListedElement& e : listed) {
        if (e.description != description) continue;
        const double d = (e.x - x) * (e.x - x) + (e.y - y) * (e.y - y);
        if (!best || d < best_d) {
            best = &e;
            best_d = d;
        }
    }
    return best;
}

std::string elements_text(const std::vector<ListedElement>& listed) {
    std::string out;
    for (const ListedElement& e : listed) {
        out += e.description + " (" + std::to_string(e.x) + ", " + std::to_string(e.y) + ")" +
               (e.state.empty() ? "" : ", " + e.state) + "\n";
    }
    if (out.empty()) return "(none)";
    out.pop_back();
    return out;
}

std::string elements_text(const std::vector<tools::PageElement>& elements, int max_count,
                          PointConvention convention, ImageSize sent, const ScreenFrame& frame) {
    return elements_text(listed_points(elements, max_count, convention, sent, frame));
}

}  // namespace surf::agent
