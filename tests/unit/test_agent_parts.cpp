// Unit tests of the agent's pure parts: action / localizer / verdict parsing, strict prompt rendering,
// profile loading, coordinate mapping (normalised and pixel conventions, device scale factors, clips,
// downscaled images) and memory.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "agent/actions.h"
#include "agent/coordinates.h"
#include "agent/memory.h"
#include "agent/modules.h"
#include "agent/page_text.h"
#include "agent/profile.h"
#include "agent/prompt_renderer.h"
#include "agent/thought_target.h"
#include "base/error.h"
#include "tests/test_util.h"

using namespace surf;
using namespace surf::agent;

using surf::test::error_kind_of;
using surf::test::error_of;

TEST_CASE("policy output parses every action type") {
    PolicyOutput o = parse_policy_output(
        R"({"thought":"t","note":"n","action":{"type":"click","element":"OK button","x":500,"y":10}})");
    CHECK(o.thought == "t");
    CHECK(o.note == "n");
    auto* c = std::get_if<ClickAction>(&o.action);
    REQUIRE(c);
    CHECK(c->element == "OK button");
    CHECK(c->x == 500);
    CHECK(c->y == 10);
    o = parse_policy_output(
        R"( {"thought":"","notes":"legacy","action":{"type":"write","content":"hi","element":"box","x":0,"y":1000}} )");
    CHECK(o.note == "legacy");
    auto* w = std::get_if<WriteAction>(&o.action);
    REQUIRE(w);
    CHECK(w->clear);
    CHECK(w->press_enter);
    CHECK(
        std::get<ScrollAction>(parse_action(nlohmann::json::parse(R"({"type":"scroll","direction":"left"})")))
            .direction == ScrollDirection::kLeft);
    CHECK(std::get<GotoAction>(parse_action(nlohmann::json::parse(R"({"type":"goto","url":"http://a.b/"})")))
              .url == "http://a.b/");
    CHECK(std::holds_alternative<BackAction>(parse_action(nlohmann::json::parse(R"({"type":"back"})"))));
    CHECK(
        std::holds_alternative<RefreshAction>(parse_action(nlohmann::json::parse(R"({"type":"refresh"})"))));
    CHECK(
        std::get<WaitAction>(parse_action(nlohmann::json::parse(R"({"type":"wait","seconds":3})"))).seconds ==
        3);
    CHECK(std::get<AnswerAction>(parse_action(nlohmann::json::parse(R"({"type":"answer","content":"42"})")))
              .content == "42");
    // Round trip through the schema's JSON.
    const Action a = WriteAction{"text", "field", 1, 2, false, true};
    const Action b = parse_action(nlohmann::json::parse(action_to_json(a).dump()));
    CHECK(std::get<WriteAction>(b).clear == false);
    CHECK(describe_action(a) == "write \"text\" into \"field\"");
}

TEST_CASE("malformed policy output is a kModelOutput error that names the problem") {
    CHECK(error_kind_of([] { parse_policy_output("not json"); }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse_policy_output(""); }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] {
              parse_policy_output(
                  R"({"thought":"t","note":"","action":{"type":"click","element":"x","x":1200,"y":5}})");
          }) == ErrorKind::kModelOutput);
    CHECK(error_of([] {
              parse_policy_output(
                  R"({"thought":"t","note":"","action":{"type":"click","element":"x","x":1200,"y":5}})");
          }).find("action.x") != std::string::npos);
    CHECK(error_of([] {
              parse_policy_output(R"({"thought":"t","note":"","action":{"type":"fly"}})");
          }).find("unknown action") != std::string::npos);
    CHECK(error_of([] {
              parse_policy_output(R"({"thought":"t","note":"","extra":1,"action":{"type":"back"}})");
          }).find("extra") != std::string::npos);
    CHECK(error_kind_of([] { parse_policy_output(R"({"thought":"t","note":""})"); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([] {
              parse_policy_output(
                  R"({"thought":"t","note":"","action":{"type":"click","element":"  ","x":1,"y":1}})");
          }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] {
              parse_policy_output(
                  R"({"thought":"t","note":"","action":{"type":"click","element":"a","x":1.5,"y":1}})");
          }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] {
              parse_policy_output(
                  R"({"thought":"t","note":"","action":{"type":"scroll","direction":"sideways"}})");
          }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse_policy_output("[1,2]"); }) == ErrorKind::kModelOutput);
}

TEST_CASE("localizer and verdict parsing") {
    LocalizerOutput p = parse_localizer_output(R"({"x":10,"y":1000})", 1000, 1000);
    CHECK(p.x == 10);
    CHECK(p.y == 1000);
    CHECK(error_kind_of([] { parse_localizer_output(R"({"x":-1,"y":3})", 1000, 1000); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse_localizer_output(R"({"x":320,"y":3})", 319, 239); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse_localizer_output(R"({"x":"3","y":3})", 1000, 1000); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse_localizer_output(R"({"y":3})", 1000, 1000); }) == ErrorKind::kModelOutput);
    Verdict v = parse_verdict(R"({"reason":"price shown","success":true})");
    CHECK(v.success);
    CHECK(v.reason == "price shown");
    CHECK_FALSE(parse_verdict("The page shows nothing. NOT SUCCESS").success);
    CHECK(parse_verdict("All done. SUCCESS").success);
    CHECK(error_kind_of([] { parse_verdict("maybe?"); }) == ErrorKind::kModelOutput);
    CHECK(error_kind_of([] { parse_verdict(R"({"reason":"x","success":"yes"})"); }) ==
          ErrorKind::kModelOutput);
}

TEST_CASE("prompt rendering is strict") {
    PromptTemplate t("Task: {task}; literal {{braces}} and {step}.", "test.md");
    CHECK(t.render({{"task", "find {x}"}, {"step", "3"}}) == "Task: find {x}; literal {braces} and 3.");
    CHECK(error_kind_of([&] { t.render({{"task", "a"}}); }) == ErrorKind::kConfig);  // missing
    CHECK(error_of([&] { t.render({{"task", "a"}}); }).find("{step}") != std::string::npos);
    CHECK(error_kind_of([&] {
              t.render({{"task", "a"}, {"step", "1"}, {"stpe", "1"}});
          }) == ErrorKind::kConfig);  // unknown
    CHECK(error_kind_of([] { PromptTemplate("unclosed {task", "x.md"); }) == ErrorKind::kConfig);
    CHECK(error_kind_of([] { PromptTemplate("bad {Task}", "x.md"); }) == ErrorKind::kConfig);
    CHECK(error_kind_of([] { PromptTemplate("stray } brace", "x.md"); }) == ErrorKind::kConfig);
    CHECK(error_of([] { PromptTemplate("a\nb {bad-name}", "x.md"); }).find("x.md:2") != std::string::npos);
    CHECK(error_kind_of([] { PromptTemplate::load("/nonexistent/prompt.md"); }) == ErrorKind::kIo);
}

TEST_CASE(
    "an optional value fills its placeholder where the prompt has one and is dropped where it has none") {
    const PromptTemplate with("Point at {element}. Schema: {schema}", "with.md");
    const PromptTemplate without("Point at {element}.", "without.md");
    CHECK(with.render({{"element", "the button"}}, {{"schema", "{}"}}) == "Point at the button. Schema: {}");
    CHECK(without.render({{"element", "the button"}}, {{"schema", "{}"}}) == "Point at the button.");
    // The required values stay strict: a missing or unknown one is still an error.
    CHECK(error_kind_of([&] { without.render({}, {{"schema", "{}"}}); }) == ErrorKind::kConfig);
    CHECK(error_kind_of([&] { without.render({{"element", "a"}, {"x", "1"}}, {}); }) == ErrorKind::kConfig);
}

TEST_CASE("the default profile loads and a profile with an unknown placeholder does not") {
    const PromptProfile p = load_profile(default_profile_path());
    CHECK(p.name == "holotron");
    CHECK(p.policy_schema);
    CHECK(p.answer_schema);
    CHECK(p.localizer_convention == PointConvention::kNormalized1000);
    CHECK(p.policy_turn->placeholders().count("task"));

    const auto dir = std::filesystem::temp_directory_path() / "surf_agent_profile_test";
    std::filesystem::create_directories(dir);
    std::filesystem::copy(
        SURF_SOURCE_DIR "/prompts", dir,
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
    std::ofstream(dir / "policy_turn.md") << "Task: {task} {mystery}";
    CHECK(error_of([&] { load_profile((dir / "profile_holotron.json").string()); }).find("{mystery}") !=
          std::string::npos);
    std::ofstream(dir / "policy_turn.md") << "Task: {task}";
    std::ofstream(dir / "bad.json") << R"({"name":"x","typo_field":1})";
    CHECK(error_kind_of([&] { load_profile((dir / "bad.json").string()); }) == ErrorKind::kConfig);
    std::filesystem::remove_all(dir);
}

TEST_CASE("coordinates: normalised 0-1000 to CSS pixels at device scale factor 1 and 2") {
    ScreenFrame f1{320, 240, {0, 0, 320, 240}, 1.0};
    tools::CssPoint p = to_css(PointConvention::kNormalized1000, 500, 500, {320, 240}, f1);
    CHECK(p.x == doctest::Approx(160));
    CHECK(p.y == doctest::Approx(120));
    // The far edge is clamped onto the last pixel.
    p = to_css(PointConvention::kNormalized1000, 1000, 1000, {320, 240}, f1);
    CHECK(p.x == doctest::Approx(319));
    CHECK(p.y == doctest::Approx(239));
    // DSF 2: the screenshot is 640x480 device pixels of a 320x240 CSS viewport; the sent image is the full
    // screenshot or half of it: the CSS point is the same.
    ScreenFrame f2{640, 480, {0, 0, 320, 240}, 2.0};
    p = to_css(PointConvention::kNormalized1000, 250, 750, {640, 480}, f2);
    CHECK(p.x == doctest::Approx(80));
    CHECK(p.y == doctest::Approx(180));
    p = to_css(PointConvention::kNormalized1000, 250, 750, {320, 240}, f2);
    CHECK(p.x == doctest::Approx(80));
    CHECK(p.y == doctest::Approx(180));
}

TEST_CASE("coordinates: pixels of the sent image, downscaled images, clips and out-of-range points") {
    // 1280x720 viewport at DSF 1.5 → 1920x1080 screenshot, sent downscaled to 960x540.
    ScreenFrame f{1920, 1080, {0, 0, 1280, 720}, 1.5};
    const ImageSize sent = fit_size({1920, 1080}, 960, 960);
    CHECK(sent.width == 960);
    CHECK(sent.height == 540);
    tools::CssPoint p = to_css(PointConvention::kImagePixels, 480, 270, sent, f);
    CHECK(p.x == doctest::Approx(640));
    CHECK(p.y == doctest::Approx(360));
    p = to_css(PointConvention::kImagePixels, 96, 54, sent, f);
    CHECK(p.x == doctest::Approx(128));  // 96 * 2 sent→shot / 1.5 shot→css
    CHECK(p.y == doctest::Approx(72));
    // A clip at CSS (100, 50) of size 200x100 at DSF 2 → a 400x200 image.
    ScreenFrame clip{400, 200, {100, 50, 200, 100}, 2.0};
    p = to_css(PointConvention::kImagePixels, 200, 100, {400, 200}, clip);
    CHECK(p.x == doctest::Approx(200));
    CHECK(p.y == doctest::Approx(100));
    // Inverse.
    double x = 0, y = 0;
    from_css(PointConvention::kImagePixels, {200, 100}, {400, 200}, clip, &x, &y);
    CHECK(x == doctest::Approx(200));
    CHECK(y == doctest::Approx(100));
    from_css(PointConvention::kNormalized1000, {640, 360}, sent, f, &x, &y);
    CHECK(x == doctest::Approx(500));
    CHECK(y == doctest::Approx(500));
    // Out of range: pixel beyond the sent image, negative, NaN, normalised > 1000.
    CHECK(error_kind_of([&] { to_css(PointConvention::kImagePixels, 960, 10, sent, f); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([&] { to_css(PointConvention::kImagePixels, -1, 10, sent, f); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([&] { to_css(PointConvention::kNormalized1000, 1001, 10, sent, f); }) ==
          ErrorKind::kModelOutput);
    CHECK(error_kind_of([&] { to_css(PointConvention::kNormalized1000, std::nan(""), 10, sent, f); }) ==
          ErrorKind::kModelOutput);
    // fit_size never upscales and keeps the aspect ratio.
    CHECK(fit_size({320, 240}, 1000, 1000).width == 320);
    CHECK(fit_size({1000, 500}, 0, 100).width == 200);
    CHECK(parse_point_convention("image_pixels") == PointConvention::kImagePixels);
    CHECK(error_kind_of([] { parse_point_convention("pixels"); }) == ErrorKind::kConfig);
}

TEST_CASE("memory keeps notes, history and the last k screenshots") {
    Memory m("task", 2);
    CHECK(m.notes_text() == "(none)");
    m.add_note("");
    m.add_note("price is 3");
    CHECK(m.notes_text() == "- price is 3");
    for (int i = 1; i <= 4; ++i) m.add_history({i, "scroll down", "ok"});
    CHECK(m.history_text(2) == "step 3: scroll down -> ok\nstep 4: scroll down -> ok");
    auto a = std::make_shared<model::Image>(2, 2), b = std::make_shared<model::Image>(3, 3),
         c = std::make_shared<model::Image>(4, 4);
    m.add_screenshot(a);
    m.add_screenshot(b);
    m.add_screenshot(c);
    const auto shots = m.recent_screenshots(3);
    REQUIRE(shots.size() == 2);
    CHECK(shots[0] == b);
    CHECK(shots[1] == c);
}

TEST_CASE("the element list as prompt text: module points, states, task-named elements and controls first") {
    std::vector<tools::PageElement> page = {
        {"the \"Shop\" heading", "", false, 0, 0, 200, 40},
        {"the \"Email\" field", "value \"ada\"", true, 100, 100, 200, 40},
        {"the text \"Price: 4 EUR\"", "", false, 0, 300, 100, 20},
        {"the \"Go\" button", "", true, 600, 400, 40, 80},
    };
    // A 640x480 viewport shown at device scale factor 2, sent downscaled to 640x480.
    const ScreenFrame frame{1280, 960, {0, 0, 640, 480}, 2.0};
    const ImageSize sent{640, 480};
    CHECK(elements_text(page, 10, PointConvention::kNormalized1000, sent, frame) ==
          "the \"Shop\" heading (156, 42)\n"
          "the \"Email\" field (313, 250), value \"ada\"\n"
          "the text \"Price: 4 EUR\" (78, 646)\n"
          "the \"Go\" button (969, 917)");
    CHECK(elements_text(page, 10, PointConvention::kImagePixels, sent, frame)
              .find("the \"Go\" button (620, 440)") != std::string::npos);
    // Over the limit, controls stay and the order stays the page's.
    CHECK(elements_text(page, 3, PointConvention::kNormalized1000, sent, frame) ==
          "the \"Shop\" heading (156, 42)\n"
          "the \"Email\" field (313, 250), value \"ada\"\n"
          "the \"Go\" button (969, 917)");
    CHECK(listed_elements(page, 2).size() == 2);
    CHECK(listed_elements(page, 2)[1].description == "the \"Go\" button");
    // An element naming one of the task's quoted strings is kept before the controls, the order still the
    // page's; a name no element contains changes nothing.
    const auto named = listed_elements(page, 2, {"Price: 4"});
    REQUIRE(named.size() == 2);
    CHECK(named[0].description == "the \"Email\" field");
    CHECK(named[1].description == "the text \"Price: 4 EUR\"");
    CHECK(listed_elements(page, 2, {"Checkout"})[1].description == "the \"Go\" button");
    CHECK(elements_text({}, 10, PointConvention::kNormalized1000, sent, frame) == "(none)");
}

TEST_CASE(
    "a profile lists page elements only when a prompt shows them, and shows them only when it lists them") {
    const auto dir = std::filesystem::temp_directory_path() / "surf_agent_elements_profile_test";
    std::filesystem::remove_all(dir);
    std::filesystem::copy(SURF_SOURCE_DIR "/models/surf-tiny", dir, std::filesystem::copy_options::recursive);
    const std::string profile = (dir / "surf_profile.json").string();
    CHECK(load_profile(profile).page_elements > 0);
    CHECK(load_profile(profile).localizer_prompt->placeholders().count("elements"));

    const auto set_count = [&](int n) {
        std::ifstream in(profile);
        std::string text((std::istreambuf_iterator<char>(in)), {});
        const size_t at = text.find("\"page_elements\"");
        REQUIRE(at != std::string::npos);
        text.replace(at, text.find_first_of(",\n}", at) - at, "\"page_elements\": " + std::to_string(n));
        std::ofstream(profile) << text;
    };
    set_count(0);
    CHECK(error_of([&] { load_profile(profile); }).find("uses {elements} but \"page_elements\" is 0") !=
          std::string::npos);
    set_count(30);
    // Each prompt keeps only placeholders it may use.
    std::ofstream(dir / "prompts" / "policy_turn.md") << "Task: {task}";
    std::ofstream(dir / "prompts" / "localizer.md") << "{element}";
    std::ofstream(dir / "prompts" / "validator_turn.md") << "{task} {answer}";
    CHECK(error_of([&] { load_profile(profile); }).find("no prompt uses {elements}") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("quoted_strings: the task's quoted values in order, for typed_text_from_task_quotes") {
    using agent::quoted_strings;
    CHECK(quoted_strings(R"(Access the account: user "ivan50", pass "Ridge-952".)") ==
          std::vector<std::string>{"ivan50", "Ridge-952"});
    CHECK(quoted_strings("Tapez « Lyon » puis “Rechercher”") ==
          std::vector<std::string>{"Lyon", "Rechercher"});
    CHECK(quoted_strings("Search for wireless mice").empty());
    CHECK(quoted_strings(R"(an empty "" and an unclosed "quote)").empty());
}

TEST_CASE("follow_thought: a pointed action's element turned to the listed control its thought quotes") {
    using agent::ListedElement;
    const std::vector<ListedElement> listed = {
        {"the text \"SMS alerts\"", "", 371, 285, false},
        {"the checkbox next to \"Partner news\"", "not checked", 663, 323, true},
        {"the checkbox next to \"SMS alerts\"", "not checked", 663, 520, true},
        {"the \"Add to cart\" button in the \"Blue kettle\" row", "", 800, 100, true},
        {"the \"Add to cart\" button in the \"Red kettle\" row", "", 800, 400, true},
        {"the \"Save\" button", "", 500, 900, true},
    };
    SUBCASE("the element names another control: it becomes the quoted one, at its listed point") {
        agent::Action a = agent::ClickAction{"the checkbox next to \"Partner news\"", 663, 323};
        CHECK(agent::follow_thought(a, R"(I need "SMS alerts" on; it is off.)", listed) ==
              "the checkbox next to \"Partner news\"");
        const auto& c = std::get<agent::ClickAction>(a);
        CHECK(c.element == "the checkbox next to \"SMS alerts\"");  // the control, not the text
        CHECK(c.x == 663);
        CHECK(c.y == 520);
    }
    SUBCASE("the element already contains a quoted string: unchanged") {
        agent::Action a = agent::ClickAction{"the \"Save\" button", 500, 900};
        CHECK(agent::follow_thought(a, R"(Boxes set; now "Save".)", listed).empty());
        CHECK(std::get<agent::ClickAction>(a).element == "the \"Save\" button");
    }
    SUBCASE("several quotes: the last one a control names wins; several controls: the nearest") {
        agent::Action a = agent::ClickAction{"the \"Save\" button", 790, 380};
        CHECK_FALSE(agent::follow_thought(a, R"(The "Options" list is open; "Add to cart" is next.)", listed)
                        .empty());
        CHECK(std::get<agent::ClickAction>(a).element ==
              "the \"Add to cart\" button in the \"Red kettle\" row");
    }
    SUBCASE("nothing quoted, nothing listed, or an action without an element: unchanged") {
        agent::Action a = agent::ClickAction{"the \"Save\" button", 500, 900};
        CHECK(agent::follow_thought(a, "I click the checkbox.", listed).empty());
        CHECK(agent::follow_thought(a, R"(I want "Wi-Fi".)", listed).empty());  // no listed control names it
        CHECK(agent::follow_thought(a, R"(I want "SMS alerts".)", {}).empty());
        agent::Action scroll = agent::ScrollAction{};
        CHECK(agent::follow_thought(scroll, R"(I look for "SMS alerts".)", listed).empty());
    }
    SUBCASE("a write is turned only to a field or a dropdown, a select only to a dropdown") {
        std::vector<ListedElement> form = listed;
        form.push_back({"the \"SMS alerts\" field", "empty", 300, 600, true});
        form.push_back({"the \"Country\" dropdown", "chosen \"Peru\"", 300, 700, true});
        agent::Action w = agent::WriteAction{"ada", "the \"Save\" button", 500, 900};
        CHECK_FALSE(agent::follow_thought(w, R"(I type into "SMS alerts".)", form).empty());
        CHECK(std::get<agent::WriteAction>(w).element == "the \"SMS alerts\" field");  // not the checkbox
        agent::Action only_box = agent::WriteAction{"ada", "the \"Save\" button", 500, 900};
        CHECK(agent::follow_thought(only_box, R"(I type into "SMS alerts".)", listed).empty());
        agent::Action s = agent::SelectAction{"the \"Save\" button", 500, 900, "Chile"};
        CHECK_FALSE(agent::follow_thought(s, R"(I open "Country".)", form).empty());
        CHECK(std::get<agent::SelectAction>(s).element == "the \"Country\" dropdown");
    }
}
