// The shapes the CUDA backend runs (model/cuda/supported_shapes.h), checked on the CPU: the shipped model and
// every fixture config the GPU tests and benchmarks load pass; a config with one unsupported field, or two,
// is refused naming exactly those config.json fields and values, with --backend cpu as the way out.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/checkpoint/config.h"
#include "model/cuda/supported_shapes.h"
#include "tests/test_util.h"

using namespace surf::model;
using nlohmann::json;
using surf::model::cuda::check_cuda_shapes;
using surf::model::cuda::unsupported_cuda_shapes;

namespace {

const std::string kSurfTiny = SURF_SOURCE_DIR "/models/surf-tiny";

json read_config(const std::string& dir) {
    std::ifstream in(dir + "/config.json");
    REQUIRE(in);
    return json::parse(in);
}

// A model folder holding `config` as its config.json (the shape check reads nothing else).
std::string write_config(const json& config, const std::string& name) {
    const std::string dir = surf::test::temp_dir("shapes_" + name);
    surf::test::write_file(dir + "/config.json", config.dump());
    return dir;
}

// The (field, value) pairs unsupported_cuda_shapes names for `config`, loaded as a model folder.
std::vector<std::pair<std::string, int64_t>> problems_of(const json& config, const std::string& name) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& p : unsupported_cuda_shapes(load_model_config(write_config(config, name))))
        out.emplace_back(p.field, p.value);
    return out;
}

using Named = std::vector<std::pair<std::string, int64_t>>;

}  // namespace

TEST_CASE("the shipped model and the fixture configs the GPU tests load have supported shapes") {
    for (const std::string& dir : {kSurfTiny, std::string(SURF_FIXTURES_DIR "/holotron_12b"),
                                   std::string(SURF_FIXTURES_DIR "/golden/tiny_fp32"),
                                   std::string(SURF_FIXTURES_DIR "/golden/small_bf16"),
                                   std::string(SURF_FIXTURES_DIR "/golden/greedy_bf16")}) {
        INFO(dir);
        const ModelConfig cfg = load_model_config(dir);
        CHECK(unsupported_cuda_shapes(cfg).empty());
        CHECK_NOTHROW(check_cuda_shapes(cfg));
    }
}

TEST_CASE("each unsupported language-model or vision shape is named by its config.json field") {
    struct Case {
        const char* name;
        std::vector<std::pair<const char*, int64_t>> llm;  // llm_config fields set
        std::vector<std::pair<const char*, int64_t>> vision;
        Named expected;
    };
    const std::vector<Case> cases = {
        {"state", {{"ssm_state_size", 12}}, {}, {{"llm_config.ssm_state_size", 12}}},
        {"state256", {{"ssm_state_size", 256}}, {}, {{"llm_config.ssm_state_size", 256}}},
        {"conv", {{"conv_kernel", 3}}, {}, {{"llm_config.conv_kernel", 3}}},
        {"mamba_hd", {{"mamba_head_dim", 160}}, {}, {{"llm_config.mamba_head_dim", 160}}},
        {"chunk", {{"chunk_size", 100}}, {}, {{"llm_config.chunk_size", 100}}},
        {"chunk256", {{"chunk_size", 256}}, {}, {{"llm_config.chunk_size", 256}}},
        {"odd_inner",
         {{"mamba_num_heads", 5}, {"mamba_head_dim", 7}, {"n_groups", 1}},
         {},
         {{"llm_config.mamba_num_heads * llm_config.mamba_head_dim", 35}}},
        {"groups",
         {{"mamba_num_heads", 70000}, {"n_groups", 70000}, {"mamba_head_dim", 2}},
         {},
         {{"llm_config.n_groups", 70000}}},
        {"head_dim", {{"head_dim", 20}}, {}, {{"llm_config.head_dim", 20}}},
        {"head_dim256", {{"head_dim", 256}}, {}, {{"llm_config.head_dim", 256}}},
        {"gqa",
         {{"num_attention_heads", 32}, {"num_key_value_heads", 1}},
         {},
         {{"llm_config.num_attention_heads / llm_config.num_key_value_heads", 32}}},
        {"vit_head",
         {},
         {{"num_attention_heads", 1}},
         {{"vision_config.hidden_size / vision_config.num_attention_heads", 192}}},
        {"vit_head_odd",
         {},
         {{"hidden_size", 200}, {"num_attention_heads", 4}},
         {{"vision_config.hidden_size / vision_config.num_attention_heads", 50}}},
    };
    for (const Case& c : cases) {
        INFO(c.name);
        json config = read_config(kSurfTiny);
        for (const auto& [field, value] : c.llm) config["llm_config"][field] = value;
        for (const auto& [field, value] : c.vision) config["vision_config"][field] = value;
        config["vit_hidden_size"] = config["vision_config"]["hidden_size"];  // the config checks they agree
        CHECK(problems_of(config, c.name) == c.expected);
    }
}

TEST_CASE("the refusal names the file, the field, the value, what is supported and --backend cpu") {
    json config = read_config(kSurfTiny);
    config["llm_config"]["ssm_state_size"] = 12;
    const std::string dir = write_config(config, "message");
    std::string message;
    CHECK(surf::test::error_kind_of([&] { check_cuda_shapes(load_model_config(dir)); }, &message) ==
          surf::ErrorKind::kUnsupported);
    CHECK(message == dir +
                         "/config.json: llm_config.ssm_state_size = 12 is not supported by the CUDA backend "
                         "(supported: 16, 32, 64, 128); run it with --backend cpu");
}

TEST_CASE("two unsupported shapes at once are both named in one error") {
    json config = read_config(kSurfTiny);
    config["llm_config"]["ssm_state_size"] = 12;
    config["llm_config"]["head_dim"] = 20;
    CHECK(problems_of(config, "two") ==
          Named{{"llm_config.ssm_state_size", 12}, {"llm_config.head_dim", 20}});
    const std::string dir = write_config(config, "two_message");
    std::string message;
    CHECK(surf::test::error_kind_of([&] { check_cuda_shapes(load_model_config(dir)); }, &message) ==
          surf::ErrorKind::kUnsupported);
    CHECK(message == dir +
                         "/config.json: the CUDA backend does not support 2 of this model's shapes: "
                         "llm_config.ssm_state_size = 12 (supported: 16, 32, 64, 128); llm_config.head_dim = "
                         "20 (supported: a multiple of 8 from 8 to 128); run it with --backend cpu");
}

TEST_CASE(
    "fields are named where the config keeps them: text_config, or the top level of a text-only model") {
    json vl = read_config(kSurfTiny);
    vl["text_config"] = vl["llm_config"];
    vl.erase("llm_config");
    vl["text_config"]["ssm_state_size"] = 12;
    CHECK(problems_of(vl, "text_config") == Named{{"text_config.ssm_state_size", 12}});

    json text = read_config(kSurfTiny)["llm_config"];
    text["ssm_state_size"] = 12;
    text["head_dim"] = 20;
    CHECK(problems_of(text, "text_only") == Named{{"ssm_state_size", 12}, {"head_dim", 20}});
}

TEST_CASE("only the blocks a model has are checked") {
    // Mamba and MLP blocks only: the attention fields are not read, so an unsupported head_dim is no problem.
    json config = read_config(kSurfTiny);
    config["llm_config"]["hybrid_override_pattern"] = "M-M-";
    config["llm_config"]["num_hidden_layers"] = 4;
    config["llm_config"]["head_dim"] = 20;
    CHECK(problems_of(config, "no_attention").empty());
    // A model of no Mamba blocks: an unsupported state size is no problem either.
    config["llm_config"]["hybrid_override_pattern"] = "*-*-";
    config["llm_config"]["head_dim"] = 64;
    config["llm_config"]["ssm_state_size"] = 12;
    CHECK(problems_of(config, "no_mamba").empty());
}
