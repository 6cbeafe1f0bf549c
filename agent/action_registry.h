// The actions a run can perform, by name: one table for the built-in actions and the product's custom ones.
// A built-in entry hands the action to the environment (the browser); a custom entry, or a built-in the
// product replaced (RunOptions::replaced_actions), calls the product's handler. A run's registry holds
// exactly what its profile offers, so an action the product removed cannot be performed, not even as the
// replacement an approval hook returns.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/actions.h"
#include "agent/custom_actions.h"
#include "agent/environment.h"

namespace surf::agent {

// What performing one action gets: the action (secrets revealed, upload path resolved), where it acts, the
// page's real URL and the environment.
struct ActionRequest {
    const Action& action;
    const ActionPoints& points;
    const std::string& url;
    Environment& environment;
};

struct ActionEntry {
    std::string name;
    bool builtin = false;  // performed by the environment (until replaced)
    std::function<ActionOutcome(const ActionRequest&)> perform;
};

class ActionRegistry {
public:
    // Every built-in action (action_names()), each performed by the environment.
    static ActionRegistry builtins();

    // Adds `spec` as a custom action. Throws Error(kInvalidArgument) naming the action when the name is
    // taken.
    void add_custom(const CustomActionSpec& spec);
    // Has `spec.handler` perform the built-in action `spec.name`: the policy still writes the built-in's
    // fields (its schema is unchanged), and the handler gets them as arguments with the located point. Throws
    // Error(kInvalidArgument) for a name that is no built-in of the registry, the answer action or no
    // handler.
    void replace_builtin(const CustomActionSpec& spec);
    // Keeps only the entries named in `names` (a profile's offered actions).
    void keep_only(const std::vector<std::string>& names);

    bool has(const std::string& name) const;
    const ActionEntry* find(const std::string& name) const;
    std::vector<std::string> names() const;

    // The entry of action_name(request.action) performs it; an action without an entry is a failed outcome
    // naming the actions the run has (nothing is done).
    ActionOutcome perform(const ActionRequest& request) const;

private:
    std::vector<ActionEntry> entries_;
};

// The registry of one run: the built-ins `offered` names (a profile's policy_actions, which already leave out
// the removed ones), `replaced` built-ins performed by their handlers, and the custom actions `added`.
ActionRegistry run_registry(const std::vector<std::string>& offered,
                            const std::vector<CustomActionSpec>& added,
                            const std::vector<CustomActionSpec>& replaced);

}  // namespace surf::agent
