// What a run's page actions go through: the action registry (agent/action_registry.h: the built-ins the
// profile offers, custom actions, replaced built-ins, removed ones), the approval hook before each action,
// and ask_human; with the scripted engine and page of agent_loop_fixture.h.
#include "agent/action_registry.h"
#include "agent_loop_fixture.h"

using namespace surf_test;

TEST_CASE("the registry holds every built-in action, performed by the environment") {
    const ActionRegistry r = ActionRegistry::builtins();
    CHECK(r.names() == action_names());
    for (const std::string& name : action_names()) CHECK(r.find(name)->builtin);
    FakePage page;
    const std::string url = "http://127.0.0.1/start";
    const ActionPoints at(tools::CssPoint{12, 34});
    const ActionOutcome out = r.perform({ClickAction{"the OK button", 1, 2}, at, url, page});
    CHECK(out.ok);
    CHECK(page.actions == std::vector<std::string>{"click"});
    REQUIRE(page.points.size() == 1);
    CHECK(page.points[0].x == 12);
}

TEST_CASE(
    "a run's registry: offered built-ins, custom actions, replaced built-ins; nothing else is performed") {
    std::vector<std::string> seen;
    const auto handler = [&](const CustomActionCall& call) {
        seen.push_back(call.arguments.dump() + (call.points && call.points->at
                                                    ? " at " + std::to_string(int(call.points->at->x))
                                                    : std::string()));
        return std::string("handled");
    };
    const std::vector<std::string> offered = {"click", "scroll", "answer", "write"};
    const ActionRegistry r = run_registry(offered, {{"add_to_cart", "x", "{}", handler}},
                                          {{"click", "", "", handler}, {"scroll", "", "", handler}});
    CHECK(r.names() ==
          std::vector<std::string>{"click", "write", "scroll", "answer", "add_to_cart"});  // built-ins first
    CHECK(!r.find("click")->builtin);
    CHECK(r.find("write")->builtin);
    FakePage page;
    const std::string url = "u";
    const ActionPoints at(tools::CssPoint{77, 5});
    CHECK(r.perform({ClickAction{"OK", 1, 2}, at, url, page}).message == "handled");
    CHECK(r.perform({ScrollAction{ScrollDirection::kUp}, {}, url, page}).ok);
    CustomAction cart{"add_to_cart", {{"sku", "A"}}};
    CHECK(r.perform({cart, {}, url, page}).ok);
    CHECK(seen == std::vector<std::string>{R"({"element":"OK","x":1,"y":2} at 77)", R"({"direction":"up"})",
                                           R"({"sku":"A"})"});
    CHECK(page.actions.empty());  // the replaced built-ins did not reach the page
    CHECK(r.perform({WriteAction{"hi", "box", 1, 2}, at, url, page}).ok);
    CHECK(page.actions == std::vector<std::string>{"write"});
    // An action the run does not have is refused, naming the ones it has; nothing is done.
    const ActionOutcome no = r.perform({GotoAction{"http://elsewhere/"}, {}, url, page});
    CHECK(!no.ok);
    CHECK(no.error_kind == "refused");
    CHECK(no.message ==
          "goto is not an action of this run (its actions: click, write, scroll, answer, add_to_cart)");
    CHECK(page.actions.size() == 1);

    const auto refused = [&](const std::vector<CustomActionSpec>& added,
                             const std::vector<CustomActionSpec>& replaced, const std::string& expected) {
        try {
            run_registry(offered, added, replaced);
            FAIL("accepted: " << expected);
        } catch (const Error& e) {
            CHECK(e.kind() == ErrorKind::kInvalidArgument);
            CHECK_MESSAGE(std::string(e.what()).find(expected) != std::string::npos, e.what());
        }
    };
    refused({}, {{"goto", "", "", handler}}, "replaced_actions (goto): not a built-in action of this run");
    refused({}, {{"answer", "", "", handler}}, "the answer action is the loop's");
    refused({}, {{"click", "", "", nullptr}}, "replaced_actions (click): no handler");
    refused({{"write", "x", "{}", handler}}, {}, "custom action write: the name is taken");
}

TEST_CASE("a removed built-in is not performed, not even as an approval hook's replacement") {
    Fixture f;
    f.engine.scripts["policy"] = {step_json(kScroll), step_json(kAnswer)};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    RunOptions o = options(4);
    o.removed_actions = {"goto"};
    o.before_action = [](const ProposedAction&) {
        return ApprovalDecision::replace(GotoAction{"http://127.0.0.1/elsewhere"});
    };
    const RunResult r = f.run(o);
    CHECK(r.status == RunStatus::kAnswered);
    CHECK(f.page.actions.empty());
    CHECK(f.page.url == "http://127.0.0.1/start");
    const auto policy = f.engine.of("policy");
    REQUIRE(policy.size() >= 2);
    CHECK(policy[1].text.find("goto is not an action of this run") != std::string::npos);
}

TEST_CASE("a replaced built-in keeps its schema and runs the product's handler with the located point") {
    Fixture f;
    f.engine.scripts["policy"] = {step_json(kClick), step_json(kAnswer)};
    f.engine.scripts["localizer"] = {R"({"x":250,"y":500})"};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    RunOptions o = options(4);
    std::vector<std::string> calls;
    o.replaced_actions.push_back({"click", "", "", [&](const CustomActionCall& call) {
                                      REQUIRE(call.points);
                                      REQUIRE(call.points->at);
                                      calls.push_back(call.arguments.at("element").get<std::string>() +
                                                      " at " + std::to_string(int(call.points->at->x)) + "," +
                                                      std::to_string(int(call.points->at->y)));
                                      return std::string("clicked by the product");
                                  }});
    CHECK(f.run(o).status == RunStatus::kAnswered);
    CHECK(calls == std::vector<std::string>{"the OK button at 80,120"});  // 250, 500 of 320x240
    CHECK(f.page.actions.empty());
    const auto policy = f.engine.of("policy");
    CHECK(policy[0].schema_text.find(R"("const":"click")") != std::string::npos);
    CHECK(policy[1].text.find("clicked by the product") != std::string::npos);
}

TEST_CASE("a before-action hook approves, refuses with a reason the policy reads, or replaces an action") {
    Fixture f;
    f.engine.scripts["policy"] = {step_json(kClick), step_json(kScroll), step_json(kClick), step_json(kClick),
                                  step_json(kAnswer)};
    f.engine.scripts["localizer"] = {R"({"x":250,"y":500})"};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    std::vector<ProposedAction> seen;
    RunOptions o = options(6);
    o.before_action = [&](const ProposedAction& p) {
        seen.push_back(p);
        switch (seen.size()) {
            case 1: return ApprovalDecision::approve();
            case 2: return ApprovalDecision::reject("do not scroll on this site");
            case 3: return ApprovalDecision::replace(KeyAction{"Escape"});
            default: throw std::runtime_error("the approver crashed");
        }
    };
    const RunResult r = f.run(o);
    CHECK(r.status == RunStatus::kAnswered);
    REQUIRE(seen.size() == 4);  // the answer is not asked about
    CHECK(seen[0].step == 1);
    CHECK(std::holds_alternative<ClickAction>(seen[0].action));
    CHECK(seen[0].url == "http://127.0.0.1/start");
    CHECK(seen[0].screenshot != nullptr);
    CHECK(!seen[0].png.empty());
    CHECK(seen[1].description.find("scroll") != std::string::npos);
    // Approved click, refused scroll, the click replaced by a key press, the last click refused by the
    // exception.
    CHECK(f.page.actions == std::vector<std::string>{"click", "key"});
    CHECK(f.engine.of("localizer").size() == 1);  // a refused or replaced click is not located
    const auto policy = f.engine.of("policy");
    CHECK(policy[2].text.find("refused by the operator: do not scroll on this site") != std::string::npos);
    CHECK(policy[4].text.find("the approval hook failed: the approver crashed") != std::string::npos);
    bool key_event = false;
    for (const StepEvent& e : f.events) key_event |= e.action == "key";
    CHECK(key_event);
}

TEST_CASE(
    "custom actions join the policy's schema and prompt and run their handler; built-ins can be removed") {
    Fixture f;
    f.engine.scripts["policy"] = {
        step_json(R"({"type":"add_to_cart","sku":"A-17","quantity":2})"),
        step_json(R"({"type":"add_to_cart","sku":"A-17","quantity":"two"})"),  // its schema refuses: retried
        step_json(R"({"type":"add_to_cart","sku":"B-2"})"),
        step_json(R"({"type":"goto","url":"http://127.0.0.1/other"})"),  // removed: retried
        step_json(R"({"type":"add_to_cart","sku":"FAIL"})"),
        step_json(kAnswer)};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    std::vector<std::pair<std::string, std::string>> calls;  // sku, url
    RunOptions o = options(8);
    o.custom_actions.push_back(CustomActionSpec{
        "add_to_cart", "put an item in the cart by its SKU",
        R"({"type":"object","properties":{"sku":{"type":"string","minLength":1},"quantity":{"type":"integer",)"
        R"("minimum":1,"maximum":9}},"required":["sku"]})",
        [&](const CustomActionCall& call) -> std::string {
            const std::string sku = call.arguments.at("sku").get<std::string>();
            if (sku == "FAIL") throw std::runtime_error("the shop is closed");
            calls.emplace_back(sku, call.url);
            CHECK(call.page == nullptr);  // the scripted page has no browser tab
            return "added " + sku + " x" + std::to_string(call.arguments.value("quantity", 1));
        }});
    o.removed_actions = {"goto", "back"};
    const RunResult r = f.run(o);
    CHECK(r.status == RunStatus::kAnswered);
    REQUIRE(calls.size() == 2);
    CHECK(calls[0] == std::pair<std::string, std::string>{"A-17", "http://127.0.0.1/start"});
    CHECK(calls[1].first == "B-2");
    CHECK(f.page.actions.empty());  // nothing reached the browser
    const auto policy = f.engine.of("policy");
    REQUIRE(!policy.empty());
    // The schema offers the custom action and no longer the removed ones; the system prompt lists both.
    CHECK(policy[0].schema_text.find("add_to_cart") != std::string::npos);
    CHECK(policy[0].schema_text.find(R"("const":"goto")") == std::string::npos);
    CHECK(policy[0].schema_text.find(R"("const":"back")") == std::string::npos);
    CHECK(policy[0].schema_text.find(R"("const":"click")") != std::string::npos);
    CHECK(policy[0].text.find("- add_to_cart {sku, quantity}: put an item in the cart by its SKU") !=
          std::string::npos);
    CHECK(policy[0].text.find("Not available in this run: back, goto.") != std::string::npos);
    // The handler's text is the step's outcome; a refused reply and a handler's failure are fed back.
    bool saw_added = false, saw_schema = false, saw_removed = false, saw_failed = false;
    for (const Call& c : policy) {
        saw_added |= c.text.find("added A-17 x2") != std::string::npos;
        saw_schema |= c.text.find("do not match its schema") != std::string::npos;
        saw_removed |= c.text.find("\"goto\" is not an action here") != std::string::npos;
        saw_failed |= c.text.find("add_to_cart failed: the shop is closed") != std::string::npos;
    }
    CHECK(saw_added);
    CHECK(saw_schema);
    CHECK(saw_removed);
    CHECK(saw_failed);
    bool event = false;
    for (const StepEvent& e : f.events) event |= e.action == "add_to_cart";
    CHECK(event);
}

TEST_CASE("bad custom actions and removals are refused, naming the action and field") {
    Fixture f;
    f.engine.scripts["policy"] = {step_json(kAnswer)};
    const auto handler = [](const CustomActionCall&) { return std::string("done"); };
    const auto refused = [&](RunOptions o, const std::string& expected) {
        try {
            f.run(o);
            FAIL("accepted: " << expected);
        } catch (const Error& e) {
            CHECK(e.kind() == ErrorKind::kInvalidArgument);
            CHECK_MESSAGE(std::string(e.what()).find(expected) != std::string::npos, e.what());
        }
    };
    RunOptions o = options();
    o.custom_actions = {{"Bad Name", "x", "{}", handler}};
    refused(o, "custom_actions[0] (Bad Name).name");
    o.custom_actions = {{"click", "x", "{}", handler}};
    refused(o, "a built-in action's name");
    o.custom_actions = {{"ok", "x", "{}", handler}, {"ok", "y", "{}", handler}};
    refused(o, "registered twice");
    o.custom_actions = {{"ok", "x", R"({"type":"string"})", handler}};
    refused(o, "custom_actions[0] (ok).arguments_schema");
    o.custom_actions = {{"ok", "x", R"({"properties":{"a":{"$ref":"#/x"}}})", handler}};
    refused(o, "\"$ref\" is not supported");
    o.custom_actions = {{"ok", "x", "{}", nullptr}};
    refused(o, "custom_actions[0] (ok).handler");
    o.custom_actions = {};
    o.removed_actions = {"answer"};
    refused(o, "the answer action cannot be removed");
    o.removed_actions = {"teleport"};
    refused(o, "\"teleport\" is not an action of");
}

TEST_CASE("ask_human is offered only with a handler, and the user's reply is the step's outcome") {
    Fixture f;
    f.engine.scripts["policy"] = {
        step_json(R"({"type":"ask_human","question":"Which colour, blue or red?"})"), step_json(kAnswer)};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    std::vector<std::string> asked;
    RunOptions o = options();
    o.ask_human = [&](const std::string& q) {
        asked.push_back(q);
        return std::string("blue, please");
    };
    CHECK(f.run(o).status == RunStatus::kAnswered);
    CHECK(asked == std::vector<std::string>{"Which colour, blue or red?"});
    const auto policy = f.engine.of("policy");
    REQUIRE(policy.size() >= 2);
    CHECK(policy[0].schema_text.find(R"("const":"ask_human")") != std::string::npos);
    CHECK(policy[0].text.find("- ask_human {question}:") != std::string::npos);
    CHECK(policy[1].text.find("the user replied: blue, please") != std::string::npos);

    // Without a handler the action is not offered: the same reply is refused and retried.
    Fixture g;
    g.engine.scripts["policy"] = {step_json(R"({"type":"ask_human","question":"?"})"), step_json(kAnswer)};
    g.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    CHECK(g.run(options()).status == RunStatus::kAnswered);
    const auto plain = g.engine.of("policy");
    CHECK(plain[0].schema_text.find("ask_human") == std::string::npos);
    REQUIRE(plain.size() >= 2);
    CHECK(plain[1].text.find("unknown action \"ask_human\"") != std::string::npos);
}
