#include "agent/page_text.h"

#include <algorithm>
#include <cmath>

namespace surf::agent {

std::vector<tools::PageElement> listed_elements(const std::vector<tools::PageElement>& elements,
                                                int max_count) {
    std::vector<bool> keep(elements.size(), false);
    int left = std::max(0, max_count);
    for (bool controls : {true, false}) {
        for (size_t i = 0; i < elements.size() && left > 0; ++i) {
            if (elements[i].control == controls) {
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

std::string elements_text(const std::vector<tools::PageElement>& elements, int max_count,
                          PointConvention convention, ImageSize sent, const ScreenFrame& frame) {
    const double max_x = max_coordinate_x(convention, sent), max_y = max_coordinate_y(convention, sent);
    std::string out;
    for (const tools::PageElement& e : listed_elements(elements, max_count)) {
        double x = 0, y = 0;
        from_css(convention, {e.x + e.width / 2, e.y + e.height / 2}, sent, frame, &x, &y);
        x = std::clamp(std::round(x), 0.0, max_x);
        y = std::clamp(std::round(y), 0.0, max_y);
        out += e.description + " (" + std::to_string(static_cast<int>(x)) + ", " +
               std::to_string(static_cast<int>(y)) + ")" + (e.state.empty() ? "" : ", " + e.state) + "\n";
    }
    if (out.empty()) return "(none)";
    out.pop_back();
    return out;
}

}  // namespace surf::agent
