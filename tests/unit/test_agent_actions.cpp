// Unit tests of the actions beyond click and write (key presses, option choice, pointer gestures): their
// parsing, JSON round trip and descriptions, and which actions a profile offers the policy (the types its
// policy schema lists: what constrained decoding can produce and the parser accepts, and what its prompt
// describes), so that a profile without the new actions neither offers nor accepts them.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "agent/actions.h"
#include "agent/profile.h"
#include "base/error.h"
#include "model/structured/grammar.h"
#include "model/structured/json_schema.h"
#include "tests/test_util.h"

using namespace surf;
using namespace surf::agent;

using surf::test::error_kind_of;
using surf::test::error_of;

namespace {

Action parse(const std::string& text) {
    return parse_action(nlohmann::json::parse(text));
}

// The action parsed back from its own JSON, for round-trip checks.
Action round_trip(const Action& a) {
    return parse_action(nlohmann::json::parse(action_to_json(a).dump()));
}

// Whether constrained decoding under `schema` can produce a policy step carrying `action` as action_to_json
// writes it (compact JSON, keys in schema order, as the decoder emits them).
bool decodable(const model::CompiledSchema& schema, const Action& action) {
    model::ByteMatcher matcher(schema.grammar);
    const std::string step = R"({"thought":"t","note":"","action":)" + action_to_json(action).dump() + "}";
    return matcher.accept_bytes(step) && matcher.can_end();
}

const std::vector<std::string> kOriginalActions = {"click", "write",   "scroll", "goto",
                                                   "back",  "refresh", "wait",   "answer"};

}  // namespace

TEST_CASE("key actions parse named keys and chords and reject what no keyboard has") {
    CHECK(std::get<KeyAction>(parse(R"({"type":"key","keys":"Enter"})")).keys == "Enter");
    CHECK(std::get<KeyAction>(parse(R"({"type":"key","keys":"ctrl+a"})")).keys == "ctrl+a");
    CHECK(std::get<KeyAction>(parse(R"({"type":"key","keys":"Shift+Tab"})")).keys == "Shift+Tab");
    CHECK(std::get<KeyAction>(parse(R"({"type":"key","keys":"PageDown"})")).keys == "PageDown");
    const Action k = KeyAction{"ctrl+Enter"};
    CHECK(std::get<KeyAction>(round_trip(k)).keys == "ctrl+Enter");
    CHECK(describe_action(k) == "key ctrl+Enter");
    CHECK(std::string(action_name(k)) == "key");
    CHECK_FALSE(needs_point(k));
    CHECK(action_points(k).empty());

    CHECK(error_kind_of([] { parse(R"({"type":"key","keys":"Hyper"})"); }) == ErrorKind::kModelOutput);
    CHECK(error_of([] { parse(R"({"type":"key","keys":"ctrl+Hyper"})"); }).find("action.keys") !=
          std::string::npos);
    CHECK(error_of([] { parse(R"({"type":"key","keys":"a+b"})"); }).find("more than one") !=
          std::string::npos);
    CHECK(error_kind_of([] { parse(R"({"type":"key","keys":""})"); }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse(R"({"type":"key"})"); }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse(R"({"type":"key","keys":"Enter","x":3})"); }) == ErrorKind::kModelOutput);
}

TEST_CASE("select names a list by its point and an option by its text") {
    const Action a = parse(R"({"type":"select","element":"Size dropdown","x":300,"y":420,"option":"Large"})");
    REQUIRE(std::holds_alternative<SelectAction>(a));
    const SelectAction& s = std::get<SelectAction>(a);
    CHECK(s.option == "Large");
    CHECK(s.x == 300);
    CHECK(describe_action(a) == "select \"Large\" in \"Size dropdown\"");
    CHECK(std::get<SelectAction>(round_trip(a)).option == "Large");
    REQUIRE(action_points(a).size() == 1);
    CHECK(action_points(a)[0].element == "Size dropdown");
    CHECK(error_of([] {
              parse(R"({"type":"select","element":"list","x":1,"y":2})");
          }).find("action.option: missing") != std::string::npos);
    CHECK(error_of([] {
              parse(R"({"type":"select","element":"list","x":1,"y":2,"option":" "})");
          }).find("action.option: empty") != std::string::npos);
    CHECK(error_kind_of([] { parse(R"({"type":"select","element":"list","x":1,"y":2,"option":3})"); }) ==
          ErrorKind::kModelOutput);
}

TEST_CASE("hover, double_click and right_click name one point; drag names two") {
    const Action h = parse(R"({"type":"hover","element":"Products menu","x":120,"y":40})");
    REQUIRE(std::holds_alternative<HoverAction>(h));
    CHECK(describe_action(h) == "hover \"Products menu\"");
    CHECK(std::holds_alternative<DoubleClickAction>(
        parse(R"({"type":"double_click","element":"cell","x":1,"y":2})")));
    const Action r = parse(R"({"type":"right_click","element":"row","x":999,"y":0})");
    REQUIRE(std::holds_alternative<RightClickAction>(r));
    CHECK(std::get<RightClickAction>(round_trip(r)).x == 999);
    for (const Action& a : {h, r, round_trip(DoubleClickAction{"cell", 5, 6})}) {
        const std::vector<PointTarget> points = action_points(a);
        REQUIRE(points.size() == 1);
        CHECK(needs_point(a));
        CHECK(points[0].element == action_target(a));
    }
    CHECK(action_points(DoubleClickAction{"cell", 5, 6})[0].x == 5);
    CHECK(std::string(action_name(RightClickAction{})) == "right_click");

    const Action d = parse(
        R"({"type":"drag","element":"slider knob","x":100,"y":500,"to_element":"track end","to_x":900,"to_y":510})");
    REQUIRE(std::holds_alternative<DragAction>(d));
    const std::vector<PointTarget> points = action_points(d);
    REQUIRE(points.size() == 2);
    CHECK(points[0].element == "slider knob");
    CHECK(points[0].x == 100);
    CHECK(points[1].element == "track end");
    CHECK(points[1].x == 900);
    CHECK(points[1].y == 510);
    CHECK(std::get<DragAction>(round_trip(d)).to_y == 510);
    CHECK(describe_action(d) == "drag \"slider knob\" to \"track end\"");
    CHECK(action_target(d) == "slider knob -> track end");

    CHECK(error_of([] {
              parse(R"({"type":"drag","element":"a","x":1,"y":1,"to_element":"b","to_x":1001,"to_y":1})");
          }).find("action.to_x") != std::string::npos);
    CHECK(error_of([] {
              parse(R"({"type":"drag","element":"a","x":1,"y":1,"to_x":5,"to_y":1})");
          }).find("action.to_element: missing") != std::string::npos);
    CHECK(error_kind_of([] { parse(R"({"type":"hover","element":"a","x":1})"); }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse(R"({"type":"double_click","element":" ","x":1,"y":1})"); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse(R"({"type":"right_click","element":"a","x":1,"y":1,"button":2})"); }) ==
          ErrorKind::kModelOutput);
}

TEST_CASE("a profile offers the actions its policy schema lists, and only those are accepted") {
    const PromptProfile holotron = load_profile(default_profile_path());
    for (const std::string& name : action_names()) {
        CAPTURE(name);
        if (name == "upload") continue;  // offered only to a run with an upload folder
        CHECK(std::find(holotron.policy_actions.begin(), holotron.policy_actions.end(), name) !=
              holotron.policy_actions.end());
    }
    // surf-tiny's prompts and schema belong to its training data: it keeps the original eight actions.
    const PromptProfile tiny = load_profile(SURF_SOURCE_DIR "/models/surf-tiny/surf_profile.json");
    CHECK(tiny.policy_actions == kOriginalActions);
    CHECK(tiny.policy_schema_text.find("\"key\"") == std::string::npos);
    CHECK_NOTHROW(
        check_offered(parse(R"({"type":"click","element":"OK","x":1,"y":2})"), tiny.policy_actions));
    CHECK(error_kind_of([&] { check_offered(KeyAction{"Enter"}, tiny.policy_actions); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_of([&] {
              check_offered(KeyAction{"Enter"}, tiny.policy_actions);
          }).find("expected click, write, scroll, goto, back, refresh, wait or answer") != std::string::npos);
    CHECK_NOTHROW(check_offered(KeyAction{"Enter"}, holotron.policy_actions));
}

TEST_CASE(
    "constrained decoding under the default schema can produce each new action; under surf-tiny's it "
    "cannot") {
    const PromptProfile holotron = load_profile(default_profile_path());
    const PromptProfile tiny = load_profile(SURF_SOURCE_DIR "/models/surf-tiny/surf_profile.json");
    const std::vector<Action> added = {KeyAction{"shift+Tab"},
                                       SelectAction{"Size list", 120, 340, "Large"},
                                       HoverAction{"Products menu", 5, 6},
                                       DoubleClickAction{"cell", 500, 500},
                                       RightClickAction{"row", 0, 1000},
                                       DragAction{"knob", 100, 500, "track end", 900, 500},
                                       SwitchTabAction{1},
                                       CloseTabAction{}};
    for (const Action& a : added) {
        CAPTURE(action_to_json(a).dump());
        CHECK(decodable(*holotron.policy_schema, a));
        CHECK_FALSE(decodable(*tiny.policy_schema, a));
    }
    const Action click = ClickAction{"OK", 1, 2};
    CHECK(decodable(*holotron.policy_schema, click));
    CHECK(decodable(*tiny.policy_schema, click));

    // The prompts agree: the default policy prompt describes every action, surf-tiny's none of the new ones.
    const std::string prompt = test::read_file(SURF_SOURCE_DIR "/prompts/policy_system.md");
    for (const std::string& name : holotron.policy_actions) {
        CAPTURE(name);
        CHECK(
            (prompt.find(name + " {{") != std::string::npos || prompt.find(name + ":") != std::string::npos));
    }
    const std::string tiny_prompt =
        test::read_file(SURF_SOURCE_DIR "/models/surf-tiny/prompts/policy_system.md");
    for (const char* name :
         {"key", "select", "hover", "double_click", "right_click", "drag", "switch_tab", "close_tab"}) {
        CAPTURE(name);
        CHECK(tiny_prompt.find(name) == std::string::npos);
    }
}

TEST_CASE("offered_actions reads inline and $ref branches and refuses schemas it cannot read") {
    const auto schema = [](const std::string& action) {
        return nlohmann::json::parse(
            R"({"$defs":{"back":{"type":"object","properties":{"type":{"const":"back"}}}},
            "type":"object","properties":{"action":)" +
            action + "}}");
    };
    CHECK(offered_actions(schema(R"({"anyOf":[{"$ref":"#/$defs/back"},
        {"type":"object","properties":{"type":{"const":"key"},"keys":{"type":"string"}}}]})"),
                          "s") == std::vector<std::string>{"back", "key"});
    CHECK(offered_actions(schema(R"({"type":"object","properties":{"type":{"const":"answer"}}})"), "s") ==
          std::vector<std::string>{"answer"});
    CHECK(error_kind_of([&] {
              offered_actions(
                  schema(R"({"anyOf":[{"type":"object","properties":{"type":{"const":"fly"}}}]})"), "s.json");
          }) == ErrorKind::kConfig);
    CHECK(error_of([&] {
              offered_actions(
                  schema(R"({"anyOf":[{"type":"object","properties":{"type":{"const":"fly"}}}]})"), "s.json");
          }).find("unknown action \"fly\"") != std::string::npos);
    CHECK(error_kind_of([&] { offered_actions(schema(R"({"type":"object"})"), "s"); }) == ErrorKind::kConfig);
    CHECK(error_kind_of([&] { offered_actions(schema(R"({"anyOf":[{"$ref":"#/$defs/nothing"}]})"), "s"); }) ==
          ErrorKind::kConfig);
    CHECK(error_kind_of([] { offered_actions(nlohmann::json::parse(R"({"type":"object"})"), "s"); }) ==
          ErrorKind::kConfig);
}

TEST_CASE("a profile whose policy schema names an unknown action does not load") {
    const auto dir = std::filesystem::temp_directory_path() / "surf_agent_actions_profile";
    std::filesystem::remove_all(dir);
    std::filesystem::copy(SURF_SOURCE_DIR "/prompts", dir, std::filesystem::copy_options::recursive);
    const auto path = dir / "schemas/policy_action.schema.json";
    std::ifstream in(path);
    nlohmann::json schema = nlohmann::json::parse(in);
    in.close();
    schema["$defs"]["key"]["properties"]["type"]["const"] = "press";
    std::ofstream(path) << schema.dump();
    CHECK(error_of([&] {
              load_profile((dir / "profile_holotron.json").string());
          }).find("unknown action \"press\"") != std::string::npos);
    std::filesystem::remove_all(dir);
}
