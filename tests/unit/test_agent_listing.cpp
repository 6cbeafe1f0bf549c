// The agent loop with the page's element list (a profile's page_elements): the list in each role's prompt,
// listed_elements_only, typed_text_from_task_quotes and element_follows_thought, against the scripted engine
// and page of agent_loop_fixture.h.
#include <filesystem>
#include <fstream>

#include "agent/trace.h"
#include "agent_loop_fixture.h"

using namespace surf_test;

namespace {

// The repo's Holotron profile in a temporary copy whose policy, localizer and validator prompts open with the
// element list, with `settings` (JSON members) added to the profile.
PromptProfile listing_profile(const std::filesystem::path& dir, const std::string& settings) {
    std::filesystem::remove_all(dir);
    std::filesystem::copy(SURF_SOURCE_DIR "/prompts", dir, std::filesystem::copy_options::recursive);
    for (const char* name : {"policy_turn.md", "localizer.md", "validator_turn.md"}) {
        std::ifstream in(dir / name);
        const std::string text((std::istreambuf_iterator<char>(in)), {});
        std::ofstream(dir / name) << "Elements:\n{elements}\n" << text;
    }
    std::ifstream in(dir / "profile_holotron.json");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    text.insert(text.find('{') + 1, settings + ",");
    std::ofstream(dir / "profile_holotron.json") << text;
    return load_profile((dir / "profile_holotron.json").string());
}

}  // namespace

TEST_CASE(
    "a profile with page_elements shows the page's element list to the policy, localizer and validator") {
    Fixture f;
    const auto dir = std::filesystem::temp_directory_path() / "surf_agent_elements_loop";
    f.profile = listing_profile(dir, "\"page_elements\": 2");
    const std::string value = "s3cr3t-Value-991";
    // 320x240 CSS at device scale factor 1: (80, 60) is (250, 250) in 0-1000.
    f.page.listed = {{"the \"OK\" button", "", true, 60, 50, 40, 20},
                     {"the \"Code\" field", "value \"" + value + "\"", true, 0, 0, 32, 24},
                     {"the text \"Welcome\"", "", false, 0, 200, 10, 10}};  // over the limit of 2
    f.engine.scripts["policy"] = {step_json(kClick), step_json(kAnswer)};
    f.engine.scripts["localizer"] = {R"({"x":250,"y":250})"};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    RunOptions o = options();
    o.secrets = {{"code", {value, {"127.0.0.1"}}}};
    RunResult r;
    {
        Trace trace((dir / "trace").string());
        r = f.run(o, &trace);
    }
    CHECK(r.status == RunStatus::kAnswered);
    const std::string listed =
        "the \"OK\" button (250, 250)\nthe \"Code\" field (50, 50), value \"<secret:code>\"";
    // The trace keeps the list each step's policy read.
    std::ifstream trace_in(dir / "trace" / "trace.jsonl");
    int steps_with_list = 0;
    for (std::string line; std::getline(trace_in, line);) {
        CHECK(line.find(value) == std::string::npos);
        const auto j = nlohmann::json::parse(line);
        if (j.value("type", "") == "step" && j.value("elements", "") == listed) ++steps_with_list;
    }
    CHECK(steps_with_list == 2);
    for (const char* role : {"policy", "localizer", "validator"}) {
        REQUIRE_FALSE(f.engine.of(role).empty());
        const std::string text = f.engine.of(role)[0].text;
        CHECK_MESSAGE(text.find("Elements:\n" + listed + "\n") != std::string::npos, role, text);
        CHECK(text.find("Welcome") == std::string::npos);
        CHECK(text.find(value) == std::string::npos);
    }
    REQUIRE(f.page.points.size() == 1);
    CHECK(f.page.points[0].x == doctest::Approx(80));
    std::filesystem::remove_all(dir);
}

TEST_CASE(
    "listed_elements_only: the policy may name only listed elements, which are acted on at their listed "
    "point without the localizer") {
    Fixture f;
    const auto dir = std::filesystem::temp_directory_path() / "surf_agent_listed_only";
    f.profile = listing_profile(dir, "\"page_elements\": 3, \"listed_elements_only\": true");
    // 320x240 CSS: the two "OK" buttons are at (80, 60) = (250, 250) and (240, 180) = (750, 750) in 0-1000.
    f.page.listed = {{"the \"OK\" button", "", true, 60, 50, 40, 20},
                     {"the \"Code\" field", "", true, 0, 0, 32, 24},
                     {"the \"OK\" button", "", true, 220, 170, 40, 20}};
    f.engine.scripts["policy"] = {
        step_json(R"({"type":"click","element":"the \"OK\" button","x":700,"y":800})"),
        step_json(R"({"type":"click","element":"the \"Cancel\" button","x":100,"y":100})"),
        step_json(kAnswer)};
    f.engine.scripts["localizer"] = {R"({"x":500,"y":500})"};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    CHECK(f.run(options()).status == RunStatus::kAnswered);
    const auto policy = f.engine.of("policy");
    REQUIRE(policy.size() == 3);
    // Every element field of the schema is the list's descriptions, each once; the answer step's is not.
    const std::string choices = R"({"enum":["the \"OK\" button","the \"Code\" field"]})";
    CHECK(policy[0].schema_text.find(R"("element":)" + choices) != std::string::npos);
    CHECK(policy[0].schema_text.find(R"("to_element":)" + choices) != std::string::npos);
    CHECK(policy[0].schema_text.find(R"("element":{"type":"string")") == std::string::npos);
    // The named element nearest the policy's guess is clicked at its listed point; an unlisted name (which
    // a model under the schema cannot write) falls back to the localizer.
    REQUIRE(f.page.points.size() == 2);
    CHECK(f.page.points[0].x == doctest::Approx(240));
    CHECK(f.page.points[0].y == doctest::Approx(180));
    CHECK(f.page.points[1].x == doctest::Approx(160));
    CHECK(f.engine.of("localizer").size() == 1);

    // Without an element list in the policy's turn the setting is refused.
    std::filesystem::remove_all(dir);
    std::filesystem::copy(SURF_SOURCE_DIR "/prompts", dir, std::filesystem::copy_options::recursive);
    {
        std::ifstream in(dir / "profile_holotron.json");
        std::string text((std::istreambuf_iterator<char>(in)), {});
        text.insert(text.find('{') + 1, "\"listed_elements_only\": true,");
        std::ofstream(dir / "profile_holotron.json") << text;
    }
    CHECK_THROWS_WITH_AS(load_profile((dir / "profile_holotron.json").string()),
                         doctest::Contains("listed_elements_only"), Error);
    std::filesystem::remove_all(dir);
}

TEST_CASE("typed_text_from_task_quotes: a write action types one of the task's quoted strings") {
    Fixture f;
    const auto dir = std::filesystem::temp_directory_path() / "surf_agent_quoted_text";
    f.profile = listing_profile(dir, "\"page_elements\": 3, \"typed_text_from_task_quotes\": true");
    f.page.listed = {{"the \"User\" field", "", true, 0, 0, 32, 24}};
    f.engine.scripts["policy"] = {step_json(kAnswer), step_json(kAnswer)};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})",
                                     R"({"reason":"ok","success":true})"};
    RunOptions o = options();
    o.task = R"(Sign in as "ivan50" with the password “Ridge-952”.)";
    CHECK(f.run(o).status == RunStatus::kAnswered);
    o.task = "Sign in as ivan50.";  // nothing quoted: the text stays free
    CHECK(f.run(o).status == RunStatus::kAnswered);
    const auto policy = f.engine.of("policy");
    REQUIRE(policy.size() == 2);
    CHECK(policy[0].schema_text.find(R"("content":{"enum":["ivan50","Ridge-952"]})") != std::string::npos);
    CHECK(policy[0].schema_text.find(R"("content":{"type":"string")") != std::string::npos);  // the answer's
    CHECK(policy[1].schema_text.find(R"("enum":["ivan50")") == std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a profile without page_elements never asks the page for its elements") {
    Fixture f;
    f.page.listed = {{"the \"OK\" button", "", true, 60, 50, 40, 20}};
    f.engine.scripts["policy"] = {step_json(kAnswer)};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    CHECK(f.run(options()).status == RunStatus::kAnswered);
    CHECK(f.engine.of("policy")[0].text.find("the \"OK\" button") == std::string::npos);
}

TEST_CASE("element_follows_thought: a click turned to the listed control its thought quotes, traced") {
    Fixture f;
    const auto dir = std::filesystem::temp_directory_path() / "surf_agent_follow_thought";
    f.profile = listing_profile(dir,
                                "\"page_elements\": 4, \"listed_elements_only\": true, "
                                "\"element_follows_thought\": true");
    // 320x240 CSS: the "SMS alerts" checkbox's centre (170, 130) is (531, 542) in 0-1000.
    f.page.listed = {{"the checkbox next to \"Partner news\"", "not checked", true, 160, 40, 20, 20},
                     {"the text \"SMS alerts\"", "", false, 20, 120, 80, 20},
                     {"the checkbox next to \"SMS alerts\"", "not checked", true, 160, 120, 20, 20}};
    const std::string click = R"({"thought":"I need \"SMS alerts\" on.","note":"","action":{"type":"click",)"
                              R"("element":"the checkbox next to \"Partner news\"","x":531,"y":208}})";
    f.engine.scripts["policy"] = {click, step_json(kAnswer)};
    f.engine.scripts["validator"] = {R"({"reason":"ok","success":true})"};
    const auto trace_dir = dir / "trace";
    {
        Trace trace(trace_dir.string());
        CHECK(f.run(options(), &trace).status == RunStatus::kAnswered);
    }
    REQUIRE(f.page.points.size() == 1);
    CHECK(f.page.points[0].x == doctest::Approx(170).epsilon(0.005));  // via 0-1000 and back
    CHECK(f.page.points[0].y == doctest::Approx(130).epsilon(0.005));
    std::ifstream in(trace_dir / "trace.jsonl");
    const std::string trace_text((std::istreambuf_iterator<char>(in)), {});
    CHECK(trace_text.find(R"("policy_element":"the checkbox next to \"Partner news\"")") !=
          std::string::npos);
    CHECK(trace_text.find(R"(\"element\":\"the checkbox next to \\\"SMS alerts\\\"\")") != std::string::npos);
    std::ifstream report(trace_dir / "report.html");
    const std::string html((std::istreambuf_iterator<char>(report)), {});
    CHECK(html.find("The policy named:</span> the checkbox next to &quot;Partner news&quot;") !=
          std::string::npos);
    std::filesystem::remove_all(dir);
}
