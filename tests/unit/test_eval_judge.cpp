// The evaluation judge's reply parsing (WebVoyager auto-evaluator protocol, spec/agent.md §3.1) and the
// exact / normalised matching of answers against reference answers.
#include <doctest/doctest.h>

#include "base/error.h"
#include "eval/eval_judge.h"
#include "model/structured/json_schema.h"

using namespace surf;
using namespace surf::eval;

TEST_CASE("schema-shaped verdicts parse; reason is kept") {
    auto r = parse_judge_reply(R"({"reason": "the price is on screen", "verdict": "SUCCESS"})");
    CHECK(r.success);
    CHECK(r.reason == "the price is on screen");
    r = parse_judge_reply(" {\"reason\": \"wrong page\", \"verdict\": \"NOT SUCCESS\"}\n");
    CHECK_FALSE(r.success);
    r = parse_judge_reply("```json\n{\"reason\": \"ok\", \"verdict\": \"SUCCESS\"}\n```");
    CHECK(r.success);
    r = parse_judge_reply(R"({"reason": "x", "success": false})");
    CHECK_FALSE(r.success);
}

TEST_CASE("WebVoyager free-text verdicts: NOT SUCCESS anywhere wins, then SUCCESS") {
    CHECK(parse_judge_reply("The screenshot shows the recipe. SUCCESS").success);
    CHECK_FALSE(parse_judge_reply("The answer is wrong.\nVerdict: NOT SUCCESS").success);
    // auto_eval.py checks 'NOT SUCCESS' in the reply first, wherever it is.
    CHECK_FALSE(parse_judge_reply("NOT SUCCESS at first glance, but on reflection SUCCESS").success);
    CHECK(parse_judge_reply("SUCCESS").reason == "SUCCESS");
}

TEST_CASE("unusable judge replies are model-output errors") {
    const auto kind_of = [](const std::string& text) {
        try {
            parse_judge_reply(text);
        } catch (const Error& e) {
            return e.kind();
        }
        return ErrorKind::kIo;  // no error
    };
    CHECK(kind_of("I cannot tell.") == ErrorKind::kModelOutput);
    CHECK(kind_of(R"({"reason": "x", "verdict": "MAYBE"})") == ErrorKind::kModelOutput);
    CHECK(kind_of(R"({"reason": "x"})") == ErrorKind::kModelOutput);
    CHECK(kind_of(R"({"reason": 3, "verdict": "SUCCESS"})") == ErrorKind::kModelOutput);
    CHECK(kind_of(R"({"reason": "x", "verdict": "SUCCESS", "extra": 1})") == ErrorKind::kModelOutput);
    CHECK(kind_of(R"({"reason": "x", "verd)") == ErrorKind::kModelOutput);  // cut by max_tokens
}

TEST_CASE("the shipped judge prompts and schema load and agree with the parser") {
    const std::string dir = SURF_SOURCE_DIR "/prompts";
    auto schema = model::load_json_schema_file(dir + "/schemas/judge_verdict.schema.json");
    REQUIRE(schema);
    auto system = agent::PromptTemplate::load(dir + "/judge_system.md");
    auto turn = agent::PromptTemplate::load(dir + "/judge_turn.md");
    CHECK(system.placeholders() == std::set<std::string>{"schema"});
    CHECK(turn.placeholders() == std::set<std::string>{"task", "answer", "n_screenshots"});
    const std::string text = turn.render({{"task", "T"}, {"answer", "A"}, {"n_screenshots", "3"}});
    CHECK(text.find("TASK: T") != std::string::npos);
    CHECK(text.find("Result Response: A") != std::string::npos);
}

TEST_CASE("answer normalisation") {
    CHECK(normalize_answer("  The Blue Kettle costs 25 EUR! ") == "blue kettle costs 25 eur");
    CHECK(normalize_answer("1,234 books") == "1234 books");
    CHECK(normalize_answer("a list: 1,2,3") == "list 1 2 3");  // not thousands separators
    CHECK(normalize_answer("4.5 stars.") == "4.5 stars");
    CHECK(normalize_answer("N.Y.C") == "n y c");
    CHECK(normalize_answer("") == "");
    CHECK(normalize_answer("Ünïcode Straße") == "Ünïcode straße");  // non-ASCII bytes kept as they are
}

TEST_CASE("exact, normalised and contained matches against references") {
    auto m = match_answer("Fredville", {"Fredville"});
    CHECK(m.exact);
    CHECK(m.normalized);
    CHECK(m.contains);
    m = match_answer("the  fredville.", {"Fredville"});
    CHECK_FALSE(m.exact);
    CHECK(m.normalized);
    m = match_answer("The capital is Fredville, a small town", {"Fredville"});
    CHECK_FALSE(m.normalized);
    CHECK(m.contains);
    m = match_answer("Fredvilles", {"Fredville"});  // whole words only
    CHECK_FALSE(m.contains);
    m = match_answer("It costs 25 euros", {"25 EUR", "25 euros"});  // any reference counts
    CHECK(m.contains);
    CHECK_FALSE(m.exact);
    m = match_answer("1234 books", {"1,234 books"});
    CHECK(m.normalized);
    m = match_answer("", {"x"});
    CHECK_FALSE(m.contains);
    m = match_answer("anything", {"", "  "});  // empty references never match
    CHECK_FALSE(m.contains);
}
