// Structured outputs through the real pieces: the fixture's byte-level BPE tokenizer, the CPU engine's
// sampler and the schema masks. Sampled (temperature 1, so the random model wanders) output must parse,
// satisfy the schema, and decode to the same text through the tokenizer as the engine streamed.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "model/checkpoint/safetensors.h"
#include "model/dump.h"
#include "model/engine.h"
#include "model/structured/json_schema.h"
#include "tests/test_util.h"

using namespace surf::model;

namespace {

std::string fixture(const std::string& name) {
    return std::string(SURF_FIXTURES_DIR) + "/golden/" + name;
}

}  // namespace

TEST_CASE("constrained generation on the fixture tokenizer: valid JSON, same text through decode") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));
    const char* schemas[] = {
        R"({"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":1000},"y":{"type":"integer","minimum":0,"maximum":1000}},"required":["x","y"]})",
        R"({"type":"object","properties":{"thought":{"type":"string","maxLength":40},"done":{"type":"boolean"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},"required":["thought","done"]})",
        R"({"anyOf":[{"type":"object","properties":{"type":{"const":"click"},"element":{"type":"string","minLength":1,"maxLength":30}},"required":["type","element"]},{"type":"object","properties":{"type":{"const":"answer"},"content":{"type":"string","maxLength":30}},"required":["type","content"]}]})",
    };
    int checked = 0;
    for (const char* text : schemas) {
        const auto schema = compile_json_schema_text(text);
        const auto parsed_schema = nlohmann::json::parse(text);
        for (uint64_t seed = 0; seed < 6; ++seed) {
            const SessionId s = engine->open_session();
            GenerateOptions g;
            g.max_tokens = 200;
            g.schema = schema;
            g.sampling.temperature = 1.0f;
            g.sampling.seed = seed;
            std::string streamed;
            g.on_text = [&](std::string_view piece) {
                streamed += piece;
                return true;
            };
            const GenerateResult r = engine->generate(
                s, {InputPart::of_text("<SPECIAL_11>User\nreply in JSON\n<SPECIAL_11>Assistant\n")}, g);
            INFO("schema " << text << " seed " << seed << " output " << r.text);
            REQUIRE(r.finish == FinishReason::kStop);
            const auto value = nlohmann::json::parse(r.text);  // throws (fails the test) when malformed
            CHECK(streamed == r.text);
            std::vector<int32_t> body(r.tokens.begin(), r.tokens.end() - 1);  // drop the stop token
            CHECK(engine->tokenizer().decode(body) == r.text);
            if (parsed_schema.contains("required")) {
                for (const auto& key : parsed_schema["required"])
                    CHECK(value.contains(key.get<std::string>()));
            }
            ++checked;
            engine->close_session(s);
        }
    }
    CHECK(checked == 18);
}

TEST_CASE("SURF_DUMP: the engine writes named intermediates matching the reference's names") {
    const std::string dir = surf::test::temp_dir("dump");
    EngineOptions options;
    options.dump_pattern = "^(layers\\.[0-9]+|embeds|logits)$";
    options.dump_path = dir + "/dump.safetensors";
    {
        auto engine = open_cpu_engine(fixture("tiny_fp32"), options);
        GenerateOptions g;
        g.max_tokens = 1;
        engine->generate(engine->open_session(), {InputPart::of_text("<SPECIAL_11>User\nhi\n")}, g);
    }
    const Checkpoint dump = Checkpoint::open(dir + "/dump.safetensors");
    const Checkpoint expected = Checkpoint::open(fixture("tiny_fp32") + "/expected.safetensors");
    CHECK(dump.has("embeds"));
    CHECK(dump.has("logits"));
    for (int i = 0; i < 9; ++i) {
        const std::string name = "layers." + std::to_string(i);
        CHECK(dump.has(name));
        CHECK(expected.has(name));  // the same name the golden file uses
    }
    CHECK(surf::test::error_of([] { Dumper bad("(unclosed", "/tmp/x"); }).find("SURF_DUMP") !=
          std::string::npos);
}
