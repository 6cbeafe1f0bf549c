// The profile's element_follows_thought: a pointed action's element made to agree with the policy's own
// thought. A small model often states its target right in the thought ("I need \"SMS alerts\" on") and then
// names another listed element in the action; the thought, written first and usually quoting the task, is
// the more reliable of the two.
#pragma once

#include <string>
#include <vector>

#include "agent/actions.h"
#include "agent/page_text.h"

namespace surf::agent {

// When the thought quotes strings (quoted_strings' rules), the action is a click, write or select, and its
// element contains none of them: the element becomes the listed element whose description contains the
// thought's last quoted string that any suitable element contains (nearest to the action's point where
// several do), with that entry's point. Suitable: any control for a click, a field or dropdown for a write, a
// dropdown for a select; headings and text never. Returns the element it replaced ("" when the action stays
// as it was).
std::string follow_thought(Action& action, const std::string& thought,
                           const std::vector<ListedElement>& listed);

}  // namespace surf::agent
