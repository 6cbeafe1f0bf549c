// YAML files read as JSON values (agent/yaml_json.h): the YAML 1.2 core schema's typing of plain scalars,
// quoted scalars as text, errors with file, line and column, repeated keys refused; and a prompt profile
// written in YAML loads to the same profile as its JSON form.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "agent/profile.h"
#include "agent/yaml_json.h"
#include "base/error.h"
#include "tests/test_util.h"

using namespace surf;
using namespace surf::agent;
using surf::test::error_of;
namespace fs = std::filesystem;

TEST_CASE("plain scalars are typed by the YAML 1.2 core schema; quoted ones stay text") {
    REQUIRE(yaml_supported());
    const auto j = parse_yaml(R"(
int: 15
neg: -3
hex: 0x1F
float: 0.5
exp: 1e3
yes_bool: true
no_bool: False
nothing: ~
empty:
text: local
quoted_int: "15"
quoted_bool: 'true'
tagged: !!str 42
word_yes: yes
list: [a, 2, "3"]
nested:
  max_tokens: 400
  names:
    - one
    - two
)",
                              "t.yaml");
    CHECK(j["int"] == 15);
    CHECK(j["int"].is_number_integer());
    CHECK(j["neg"] == -3);
    CHECK(j["hex"] == 31);
    CHECK(j["float"] == 0.5);
    CHECK(j["exp"] == 1000.0);
    CHECK(j["yes_bool"] == true);
    CHECK(j["no_bool"] == false);
    CHECK(j["nothing"].is_null());
    CHECK(j["empty"].is_null());
    CHECK(j["text"] == "local");
    CHECK(j["quoted_int"] == "15");
    CHECK(j["quoted_bool"] == "true");
    CHECK(j["tagged"] == "42");
    CHECK(j["word_yes"] == "yes");  // YAML 1.1's yes/no are text in 1.2
    CHECK(j["list"] == nlohmann::ordered_json{"a", 2, "3"});
    CHECK(j["nested"]["max_tokens"] == 400);
    CHECK(j["nested"]["names"][1] == "two");
    CHECK(j.begin().key() == "int");  // file order kept
}

TEST_CASE("YAML errors name the file, line and column; a repeated key is an error; top-level key lines") {
    CHECK(error_of([] { parse_yaml("a: 1\nb: [1, 2\n", "bad.yaml"); }).find("bad.yaml:") == 0);
    CHECK(error_of([] { parse_yaml("a: 1\nb: [1, 2\n", "bad.yaml"); }).find("not valid YAML") !=
          std::string::npos);
    CHECK(error_of([] { parse_yaml("a: 1\nb: 2\na: 3\n", "dup.yaml"); }) ==
          "dup.yaml:3:1: key \"a\" appears twice");
    std::map<std::string, int> lines;
    parse_yaml("# comment\nfirst: 1\n\nsecond:\n  inner: 2\n", "k.yaml", &lines);
    CHECK(lines == std::map<std::string, int>{{"first", 2}, {"second", 4}});
}

TEST_CASE("read_json_or_yaml picks the parser by extension") {
    const fs::path dir = fs::temp_directory_path() / "surf_test_yaml";
    fs::create_directories(dir);
    std::ofstream(dir / "a.yml") << "k: [1, 2]\n";
    std::ofstream(dir / "a.json") << "{\"k\": [1, 2]}";
    std::ofstream(dir / "b.json") << "k: 1\n";
    CHECK(read_json_or_yaml((dir / "a.yml").string()) == read_json_or_yaml((dir / "a.json").string()));
    CHECK(error_of([&] {
              read_json_or_yaml((dir / "b.json").string());
          }).find((dir / "b.json").string() + ": not valid JSON") == 0);
    CHECK(is_yaml_path("run.YAML"));
    CHECK(!is_yaml_path("run.json"));
    fs::remove_all(dir);
}

TEST_CASE("a prompt profile in YAML loads like its JSON form; unknown keys are still refused") {
    const std::string prompts = SURF_SOURCE_DIR "/prompts/";
    const std::string tiny = SURF_SOURCE_DIR "/tests/browser/agent_pages/";
    const std::string yaml =
        "# the tiny e2e profile (tests/browser/agent_pages/profile_tiny.json) in YAML\n"
        "name: tiny-e2e\n"
        "policy_system: " +
        prompts +
        "policy_system.md\n"
        "policy_turn: " +
        prompts +
        "policy_turn.md\n"
        "retry_feedback: " +
        prompts +
        "retry_feedback.md\n"
        "policy_schema: " +
        tiny +
        "schemas/policy_tiny.schema.json\n"
        "answer_schema: " +
        tiny +
        "schemas/answer_tiny.schema.json\n"
        "policy: {max_tokens: 200, temperature: 1.0, retries: 2}\n"
        "localizer_prompt: " +
        prompts +
        "localizer.md\n"
        "localizer_schema: " +
        prompts +
        "schemas/localizer_point.schema.json\n"
        "localizer:\n  max_tokens: 24\n  temperature: 1.0\n  retries: 1\n"
        "validator_system: " +
        prompts +
        "validator_system.md\n"
        "validator_turn: " +
        prompts +
        "validator_turn.md\n"
        "validator_schema: " +
        tiny +
        "schemas/validator_tiny.schema.json\n"
        "validator:\n  max_tokens: 120\n  temperature: 1.0\n  retries: 1\n"
        "enable_thinking: false\n"
        "stop_token: \"<SPECIAL_12>\"\n"
        "max_session_tokens: 60000\n";
    const fs::path dir = fs::temp_directory_path() / "surf_test_yaml_profile";
    fs::create_directories(dir);
    std::ofstream(dir / "profile.yaml") << yaml;
    const PromptProfile y = load_profile((dir / "profile.yaml").string());
    const PromptProfile j = load_profile(tiny + "profile_tiny.json");
    CHECK(y.name == j.name);
    CHECK(y.policy.max_tokens == j.policy.max_tokens);
    CHECK(y.policy.sampling.temperature == j.policy.sampling.temperature);
    CHECK(y.localizer.retries == j.localizer.retries);
    CHECK(y.validator.max_tokens == j.validator.max_tokens);
    CHECK(y.policy_schema_text == j.policy_schema_text);
    CHECK(y.validator_schema_text == j.validator_schema_text);
    CHECK(y.stop_token == j.stop_token);
    CHECK(y.max_session_tokens == j.max_session_tokens);
    std::ofstream(dir / "typo.yaml") << yaml << "histroy_steps: 2\n";
    CHECK(error_of([&] {
              load_profile((dir / "typo.yaml").string());
          }).find("unknown field \"histroy_steps\" (did you mean \"history_steps\"?)") != std::string::npos);
    std::ofstream(dir / "list.yml") << "- a\n- b\n";
    CHECK(error_of([&] { load_profile((dir / "list.yml").string()); }).find("expected a YAML mapping") !=
          std::string::npos);
    fs::remove_all(dir);
}
