#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "model/checkpoint/config.h"
#include "tests/test_util.h"

using namespace surf::model;
using nlohmann::json;
using surf::test::error_of;

namespace {

// The Nemotron-Nano-12B-v2-VL config as spec/holotron.md §1.1 and §3.1 describe it.
json holotron_config() {
    return json::parse(R"({
      "architectures": ["NemotronH_Nano_VL_V2"], "model_type": "NemotronH_Nano_VL_V2",
      "force_image_size": 512, "patch_size": 16, "downsample_ratio": 0.5, "ps_version": "v2",
      "use_thumbnail": true, "vit_hidden_size": 1280, "projector_hidden_size": 20480,
      "norm_mean": [0.48145466, 0.4578275, 0.40821073], "norm_std": [0.26862954, 0.26130258, 0.27577711],
      "img_context_token": "<image>", "img_start_token": "<img>", "img_end_token": "</img>",
      "llm_config": {
        "architectures": ["NemotronHForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 62,
        "hybrid_override_pattern": "M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-",
        "intermediate_size": 20480, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "mamba_num_heads": 128, "mamba_head_dim": 80, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
        "chunk_size": 128, "use_conv_bias": true, "use_bias": false, "mlp_hidden_act": "relu2",
        "mamba_hidden_act": "silu", "layer_norm_epsilon": 1e-5, "vocab_size": 131072,
        "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 12, "pad_token_id": 0
      },
      "vision_config": {"args": {"model": "vit_huge_patch16_224", "cpe_max_size": 2048, "register_multiple": 8},
                        "patch_size": 16, "max_resolution": 2048}
    })");
}

std::string write_config(const json& config, const std::string& name) {
    const std::string dir = surf::test::temp_dir("config_" + name);
    surf::test::write_file(dir + "/config.json", config.dump());
    return dir;
}

}  // namespace

TEST_CASE("the Holotron-12B config parses to the spec's shapes") {
    const std::string dir = write_config(holotron_config(), "holotron");
    surf::test::write_file(dir + "/generation_config.json", R"({"eos_token_id": [2, 12]})");
    ModelConfig cfg = load_model_config(dir);
    const LlmConfig& llm = cfg.llm;
    CHECK(llm.n_layers() == 62);
    CHECK(llm.count(LayerKind::kMamba2) == 28);
    CHECK(llm.count(LayerKind::kMlp) == 28);
    CHECK(llm.count(LayerKind::kAttention) == 6);
    CHECK(llm.layers[7] == LayerKind::kAttention);
    CHECK(llm.layers[52] == LayerKind::kAttention);
    CHECK(llm.d_inner() == 10240);
    CHECK(llm.conv_dim() == 12288);
    CHECK(llm.in_proj_dim() == 22656);
    CHECK(llm.pattern() == holotron_config()["llm_config"]["hybrid_override_pattern"].get<std::string>());
    CHECK(cfg.vision.hidden_size == 1280);
    CHECK(cfg.vision.n_layers == 32);
    CHECK(cfg.vision.n_heads == 16);
    CHECK(cfg.vision.intermediate_size == 5120);
    CHECK(cfg.vision.max_img_size == 2048);
    CHECK(cfg.image.tokens_per_tile() == 256);
    CHECK(cfg.image.max_tiles == 12);
    CHECK(cfg.projector_hidden == 20480);
    CHECK(cfg.eos_token_ids == std::vector<int64_t>{2, 12});
    CHECK(cfg.bos_token_id == 1);
}

TEST_CASE("recent transformers field names: layers_block_type") {
    json c = holotron_config();
    c["llm_config"].erase("hybrid_override_pattern");
    c["llm_config"]["num_hidden_layers"] = 4;
    c["llm_config"]["layers_block_type"] = {"mamba", "mlp", "attention", "mlp"};
    ModelConfig cfg = load_model_config(write_config(c, "blocktype"));
    CHECK(cfg.llm.pattern() == "M-*-");
}

TEST_CASE("bad configs give errors naming the file and field") {
    json c = holotron_config();
    c["architectures"] = {"LlamaForCausalLM"};
    CHECK(error_of([&] {
              load_model_config(write_config(c, "arch"));
          }).find("unsupported architecture 'LlamaForCausalLM'") != std::string::npos);

    c = holotron_config();
    c["llm_config"].erase("hidden_size");
    std::string msg = error_of([&] { load_model_config(write_config(c, "missing")); });
    CHECK(msg.find("config.json: llm_config.hidden_size: missing required field") != std::string::npos);

    c = holotron_config();
    c["llm_config"]["num_hidden_layers"] = 61;
    CHECK(error_of([&] {
              load_model_config(write_config(c, "count"));
          }).find("does not match the 62 layers") != std::string::npos);

    c = holotron_config();
    c["llm_config"]["hybrid_override_pattern"] = "M-X";
    c["llm_config"].erase("num_hidden_layers");
    CHECK(error_of([&] {
              load_model_config(write_config(c, "char"));
          }).find("unknown layer character 'X' at position 2") != std::string::npos);

    c = holotron_config();
    c["llm_config"]["n_groups"] = 7;
    CHECK(error_of([&] {
              load_model_config(write_config(c, "groups"));
          }).find("n_groups: 7 does not divide") != std::string::npos);

    c = holotron_config();
    c["llm_config"]["num_key_value_heads"] = "eight";
    CHECK(error_of([&] { load_model_config(write_config(c, "type")); }).find("expected an integer") !=
          std::string::npos);

    c = holotron_config();
    c["ps_version"] = "v1";
    CHECK(error_of([&] { load_model_config(write_config(c, "ps")); }).find("ps_version") !=
          std::string::npos);

    c = holotron_config();
    c["vision_config"]["args"]["min_num_patches"] = 1024;
    CHECK(error_of([&] { load_model_config(write_config(c, "dyn")); }).find("min_num_patches") !=
          std::string::npos);

    // Sizes that would exhaust memory are refused before anything is allocated from them.
    c = holotron_config();
    c["llm_config"]["chunk_size"] = 1000000000;
    CHECK(error_of([&] {
              load_model_config(write_config(c, "chunk"));
          }).find("llm_config.chunk_size: 1000000000 is larger than the supported 8192") !=
          std::string::npos);
    c = holotron_config();
    c["vision_config"]["num_hidden_layers"] = 1000000000;
    CHECK(error_of([&] {
              load_model_config(write_config(c, "vitdepth"));
          }).find("vision_config.num_hidden_layers: 1000000000 is larger") != std::string::npos);
    c = holotron_config();
    c["llm_config"]["vocab_size"] = int64_t{1} << 40;
    CHECK(error_of([&] { load_model_config(write_config(c, "vocab")); }).find("vocab_size") !=
          std::string::npos);
    c = holotron_config();
    c["llm_config"]["hybrid_override_pattern"] = std::string(5000, 'M');
    c["llm_config"].erase("num_hidden_layers");
    CHECK(error_of([&] { load_model_config(write_config(c, "deep")); }).find("5000 layers; at most 1024") !=
          std::string::npos);
    c = holotron_config();
    c["vision_config"]["num_registers"] = -3;
    CHECK(error_of([&] {
              load_model_config(write_config(c, "regs"));
          }).find("num_registers: -3 is outside [0, 1024]") != std::string::npos);
    c = holotron_config();
    c["max_num_tiles"] = 100000;
    CHECK(error_of([&] { load_model_config(write_config(c, "tiles")); }).find("max_num_tiles") !=
          std::string::npos);
    c = holotron_config();
    c["llm_config"]["max_position_embeddings"] = 131072;
    CHECK(load_model_config(write_config(c, "ctx")).llm.max_position_embeddings == 131072);

    const std::string dir = surf::test::temp_dir("config_badjson");
    surf::test::write_file(dir + "/config.json", "{\"architectures\": [");
    CHECK(error_of([&] { load_model_config(dir); }).find("not valid JSON") != std::string::npos);
    CHECK(error_of([&] { load_model_config(dir + "/nope"); }).find("not found") != std::string::npos);
}
