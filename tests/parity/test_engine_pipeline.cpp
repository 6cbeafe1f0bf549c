// The whole input pipeline against the golden fixtures: chat template → tokenizer → image tiling →
// vision tower → projector → language model → greedy decoding, through the Engine API. The token ids and
// greedy continuations must equal what the HF reference produced from the same messages and image.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "model/checkpoint/safetensors.h"
#include "model/engine.h"
#include "model/text/chat_template.h"
#include "tests/engine_contract.h"

using namespace surf::model;

namespace {

std::string fixture(const std::string& name) {
    return std::string(SURF_FIXTURES_DIR) + "/golden/" + name;
}

void check_pipeline(const std::string& name) {
    const std::string dir = fixture(name);
    std::ifstream manifest_file(dir + "/manifest.json");
    const auto manifest = nlohmann::ordered_json::parse(manifest_file);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    auto engine = open_cpu_engine(dir);
    const ChatTemplate tmpl = ChatTemplate::from_model_dir(dir);

    struct Case {
        const char* key;
        const char* prefix;
        bool with_image;
    };
    for (const Case& c : {Case{"prompt", "", true}, Case{"text_prompt", "text.", false}}) {
        INFO(name << " " << c.key);
        const std::string rendered = tmpl.render(manifest[c.key]["messages"]);
        CHECK(rendered == manifest[c.key]["rendered"].get<std::string>());

        std::vector<std::shared_ptr<const Image>> images;
        if (c.with_image) images.push_back(std::make_shared<Image>(load_image(dir + "/image.png")));
        GenerateOptions options;
        options.max_tokens = 32;
        options.ignore_eos = true;
        const SessionId session = engine->open_session();
        const GenerateResult result = engine->generate(session, interleave_images(rendered, images), options);
        CHECK(result.prefill_tokens ==
              static_cast<int64_t>(expected.get(std::string(c.prefix) + "input_ids").numel()));
        const auto want = expected.to_i64(std::string(c.prefix) + "greedy_tokens");
        CHECK(std::vector<int64_t>(result.tokens.begin(), result.tokens.end()) == want);
        engine->close_session(session);
    }
}

}  // namespace

TEST_CASE("tiny fp32: template + tokenizer + tiling + model give the reference's greedy tokens") {
    check_pipeline("tiny_fp32");
}
TEST_CASE("small bf16: template + tokenizer + tiling + model give the reference's greedy tokens") {
    check_pipeline("small_bf16");
}
TEST_CASE("greedy bf16: template + tokenizer + tiling + model give the reference's greedy tokens") {
    check_pipeline("greedy_bf16");
}

TEST_CASE("forked sessions continue independently of their parent") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));
    GenerateOptions options;
    options.max_tokens = 8;
    options.ignore_eos = true;
    const SessionId parent = engine->open_session();
    engine->generate(parent, {InputPart::of_text("<SPECIAL_11>User\nhello there\n<SPECIAL_11>Assistant\n")},
                     options);
    const SessionId child = engine->fork_session(parent);
    const GenerateResult a = engine->generate(child, {InputPart::of_text(" more")}, options);
    const GenerateResult b = engine->generate(parent, {InputPart::of_text(" more")}, options);
    CHECK(a.tokens == b.tokens);  // same state, same input: same greedy output
    CHECK(a.session_tokens == b.session_tokens);
    CHECK_THROWS_AS(engine->generate(12345, {InputPart::of_text("x")}, options), surf::Error);
}

TEST_CASE(
    "max_tokens 0 prefills only: nothing sampled, nothing pending, the next call continues from the input") {
    auto engine = open_cpu_engine(fixture("tiny_fp32"));
    surf::test::check_max_tokens_zero_prefills_only(*engine);
}
