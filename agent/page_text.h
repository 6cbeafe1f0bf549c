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

// The entries elements_text() shows: at most `max_count`, in document order; when the page has more, controls
// (buttons, links, fields, boxes) are kept before headings and texts.
std::vector<tools::PageElement> listed_elements(const std::vector<tools::PageElement>& elements,
                                                int max_count);

// listed_elements() as text, one line each; "(none)" for an empty list.
std::string elements_text(const std::vector<tools::PageElement>& elements, int max_count,
                          PointConvention convention, ImageSize sent, const ScreenFrame& frame);

}  // namespace surf::agent
