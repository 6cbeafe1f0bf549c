// The page's element list as prompt text (the {elements} placeholder of a profile with `page_elements`):
// one line per element, its description, its centre in the module's point convention on the image as sent,
// and its state ("the \"Email\" field (412, 88), value \"ada\""). A small model copies a point from this
// list where reading it off the screenshot alone is beyond it; the screenshot is sent either way.
#pragma once

#include <string>
#include <vector>

#include "agent/coordinates.h"
#include "tools/browser/page_elements.h"

namespace surf::agent {

// The entries elements_text() shows: at most `max_count`, in document order. When the page has more, the
// elements whose description contains one of `named` (the task's quoted strings) are kept first, then
// controls (buttons, links, fields, boxes), then headings and texts: on a crowded page the one the task names
// stays listed.
std::vector<tools::PageElement> listed_elements(const std::vector<tools::PageElement>& elements,
                                                int max_count, const std::vector<std::string>& named = {});

// One entry of the list as a module reads it: its description and state, and its centre in the module's
// point convention on the image as sent.
struct ListedElement {
    std::string description;
    std::string state;
    int x = 0, y = 0;
    bool control = false;  // something to act on (tools::PageElement::control), not a heading or a text
};

std::vector<ListedElement> listed_points(const std::vector<tools::PageElement>& elements, int max_count,
                                         PointConvention convention, ImageSize sent, const ScreenFrame& frame,
                                         const std::vector<std::string>& named = {});

// The listed entry named `description` nearest to (x, y), or null when none has that description.
const ListedElement* find_listed(const std::vector<ListedElement>& listed, const std::string& description,
                                 double x, double y);

// listed_points() as text, one line each; "(none)" for an empty list.
std::string elements_text(const std::vector<ListedElement>& listed);
std::string elements_text(const std::vector<tools::PageElement>& elements, int max_count,
                          PointConvention convention, ImageSize sent, const ScreenFrame& frame);

}  // namespace surf::agent
