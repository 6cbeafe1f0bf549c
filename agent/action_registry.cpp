#include "agent/action_registry.h"

#include <algorithm>

#include "base/error.h"

namespace surf::agent {

namespace {
// Calls a product's handler; an exception is a failed step whose message the policy reads.
ActionOutcome call_handler(const CustomActionSpec& spec, const nlohmann::ordered_json& arguments,
                           const ActionRequest& r, const ActionPoints* points) {
    try {
        return {true, spec.handler(CustomActionCall{arguments, r.url, r.environment.page(), points}), ""};
    } catch (const std::exception& e) {
        return {false, spec.name + " failed: " + e.what(), "custom_action"};
    }
}

// The registry's action names for an error ("none" when it has none).
std::string listed(const std::vector<std::string>& names) {
    return names.empty() ? "none" : comma_joined(names);
}
}  // namespace

ActionRegistry ActionRegistry::builtins() {
    ActionRegistry r;
    for (const std::string& name : action_names())
        r.entries_.push_back(
            {name, true, [](const ActionRequest& q) { return q.environment.execute(q.action, q.points); }});
    return r;
}

void ActionRegistry::add_custom(const CustomActionSpec& spec) {
    if (has(spec.name))
        throw Error(ErrorKind::kInvalidArgument, "custom action " + spec.name + ": the name is taken");
    if (!spec.handler)
        throw Error(ErrorKind::kInvalidArgument, "custom action " + spec.name + ": no handler");
    entries_.push_back({spec.name, false, [spec](const ActionRequest& q) {
                            const auto* c = std::get_if<CustomAction>(&q.action);
                            if (!c)
                                return ActionOutcome{false, spec.name + " got another action", "internal"};
                            return call_handler(spec, c->arguments, q, nullptr);
                        }});
}

void ActionRegistry::replace_builtin(const CustomActionSpec& spec) {
    const std::string where = "replaced_actions (" + spec.name + ")";
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const ActionEntry& e) { return e.name == spec.name; });
    if (it == entries_.end() || !it->builtin)
        throw Error(ErrorKind::kInvalidArgument,
                    where + ": not a built-in action of this run (" + listed(names()) + ")");
    if (spec.name == "answer")
        throw Error(ErrorKind::kInvalidArgument,
                    where + ": the answer action is the loop's, not a page action");
    if (!spec.handler) throw Error(ErrorKind::kInvalidArgument, where + ": no handler");
    it->builtin = false;
    it->perform = [spec](const ActionRequest& q) {
        nlohmann::ordered_json arguments = action_to_json(q.action);
        arguments.erase("type");
        return call_handler(spec, arguments, q, &q.points);
    };
}

void ActionRegistry::keep_only(const std::vector<std::string>& names) {
    std::erase_if(entries_, [&](const ActionEntry& e) {
        return std::find(names.begin(), names.end(), e.name) == names.end();
    });
}

bool ActionRegistry::has(const std::string& name) const {
    return find(name) != nullptr;
}

const ActionEntry* ActionRegistry::find(const std::string& name) const {
    for (const ActionEntry& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

std::vector<std::string> ActionRegistry::names() const {
    std::vector<std::string> out;
    for (const ActionEntry& e : entries_) out.push_back(e.name);
    return out;
}

ActionOutcome ActionRegistry::perform(const ActionRequest& request) const {
    const std::string name = action_name(request.action);
    const ActionEntry* e = find(name);
    if (!e)
        return {false, name + " is not an action of this run (its actions: " + listed(names()) + ")",
                "refused"};
    return e->perform(request);
}

ActionRegistry run_registry(const std::vector<std::string>& offered,
                            const std::vector<CustomActionSpec>& added,
                            const std::vector<CustomActionSpec>& replaced) {
    ActionRegistry r = ActionRegistry::builtins();
    r.keep_only(offered);
    for (const CustomActionSpec& spec : replaced) r.replace_builtin(spec);
    for (const CustomActionSpec& spec : added) r.add_custom(spec);
    return r;
}

}  // namespace surf::agent
