// The page's element list: the visible, unobstructed elements a person could point at or read, each with a
// description in the words the policy uses ("the \"Sign in\" button", "the \"Email\" field", "the checkbox
// in the \"Gift wrap\" row" for a table's unlabelled or repeated control), its state (a field's value, a
// check box's tick, a dropdown's choice) and its box in CSS pixels of the viewport. A profile with
// `page_elements` shows it to the model beside the screenshot (agent/page_text.h), and `surf record` asks the
// localizer about some of its entries on every screenshot.
#pragma once

#include <string>
#include <vector>

namespace surf::tools {

class BrowserSession;

struct PageElement {
    std::string description;  // "the \"Sign in\" button"
    std::string state;        // "" or "value \"ada\"", "checked", "not checked", "chosen \"Lyon\""
    bool control = false;     // something to act on (not a heading or a text)
    double x = 0, y = 0, width = 0, height = 0;  // box, CSS pixels of the viewport
};

// The elements of the active tab's viewport in document order. A password field's value is never read (its
// state says only whether it holds something). Throws Error(kBrowser) when the page does not answer.
std::vector<PageElement> page_elements(BrowserSession& session);

}  // namespace surf::tools
