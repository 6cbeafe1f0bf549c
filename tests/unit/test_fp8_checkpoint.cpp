// FP8 checkpoints through the one weight table: the quantization config (config.json top level, nested under
// llm_config, hf_quant_config.json; ModelOpt and compressed-tensors), what loads (E4M3 values, scales, the
// activation scheme, ignored layers), quantize-on-load, and the errors for inconsistent checkpoints, each
// naming the file, the tensor and the field. The checkpoints are the committed FP8 fixtures, copied and
// altered one tensor at a time.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/fp8.h"
#include "model/checkpoint/config.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/weights.h"
#include "model/engine.h"
#include "tests/test_util.h"

using namespace surf;
using namespace surf::model;
using nlohmann::json;
using surf::test::error_kind_of;
namespace fs = std::filesystem;

namespace {

const std::string kFp8 = std::string(SURF_FIXTURES_DIR) + "/fp8/";

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

json modelopt_config() {
    return {{"quant_method", "modelopt"},
            {"quant_algo", "FP8"},
            {"ignore", {"lm_head", "*layers.0.mixer.out_proj"}}};
}

json ct_config() {
    const json args = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"group_size", nullptr}};
    json weights = args, inputs = args;
    weights["strategy"] = "channel", weights["dynamic"] = false;
    inputs["strategy"] = "token", inputs["dynamic"] = true;
    return {{"quant_method", "compressed-tensors"},
            {"format", "float-quantized"},
            {"config_groups",
             {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", inputs}}}}},
            {"ignore", {"lm_head", "re:.*layers\\.4\\.mixer\\.down_proj$"}}};
}

// read_quant_config on a config.json holding `config` (and hf_quant_config.json when given).
QuantConfig read(const json& config, const std::string& llm_key = "", const json* hf_quant = nullptr) {
    const std::string dir = surf::test::temp_dir("quant_config");
    if (hf_quant) std::ofstream(dir + "/hf_quant_config.json") << hf_quant->dump();
    return read_quant_config(dir, config, llm_key);
}

std::string read_error(const json& config, ErrorKind kind) {
    std::string message;
    CHECK(error_kind_of([&] { read(config); }, &message) == kind);
    return message;
}

// A copy of an FP8 fixture whose model.safetensors went through `edit` (the list of tensors to write,
// pointing into the original file) and whose config.json went through `edit_config`.
std::string altered(const std::string& fixture, const std::function<void(std::vector<TensorToWrite>&)>& edit,
                    const std::function<void(json&)>& edit_config = nullptr) {
    const std::string dir = surf::test::temp_dir("fp8_" + fixture);
    for (const auto& entry : fs::directory_iterator(kFp8 + fixture))
        fs::copy(entry.path(), dir + "/" + entry.path().filename().string());
    const Checkpoint source = Checkpoint::open(kFp8 + fixture);
    std::vector<TensorToWrite> tensors;
    for (const std::string& name : source.names()) {
        const TensorInfo& info = source.get(name);
        tensors.push_back({name, info.dtype, info.shape, info.data});
    }
    edit(tensors);
    write_safetensors(dir + "/model.safetensors", tensors);
    if (edit_config) {
        json config = json::parse(std::ifstream(dir + "/config.json"));
        edit_config(config);
        std::ofstream(dir + "/config.json") << config.dump(2);
    }
    return dir;
}

TensorToWrite& find(std::vector<TensorToWrite>& tensors, const std::string& name) {
    for (TensorToWrite& t : tensors)
        if (t.name == name) return t;
    FAIL("no tensor " << name);
    return tensors.front();
}

// The kind and message of loading `dir`.
std::string load_error(const std::string& dir, ErrorKind kind, Quantize quantize = Quantize::kNone) {
    std::string message;
    CHECK(error_kind_of(
              [&] {
                  ModelConfig cfg = load_model_config(dir);
                  load_weights(cfg, Checkpoint::open(dir), quantize);
              },
              &message) == kind);
    return message;
}

}  // namespace

TEST_CASE("quantization configs: ModelOpt in config.json, nested under llm_config, or hf_quant_config.json") {
    const QuantConfig flat = read({{"quantization_config", modelopt_config()}});
    CHECK(flat.method == QuantMethod::kModelOptFp8);
    CHECK(contains(flat.source, "config.json: quantization_config"));
    CHECK(flat.quantizes("backbone.layers.3.mixer.in_proj"));
    CHECK_FALSE(flat.quantizes("backbone.layers.0.mixer.out_proj"));  // glob
    CHECK_FALSE(flat.quantizes("language_model.lm_head"));            // a name matches under language_model.

    const QuantConfig nested =
        read({{"llm_config", {{"quantization_config", modelopt_config()}}}}, "llm_config");
    CHECK(nested.method == QuantMethod::kModelOptFp8);
    CHECK(contains(nested.source, "llm_config.quantization_config"));

    const json hf = {
        {"producer", {{"name", "modelopt"}}},
        {"quantization", {{"quant_algo", "FP8"}, {"exclude_modules", {"vision_model", "mlp1*"}}}}};
    const QuantConfig legacy = read(json::object(), "", &hf);
    CHECK(legacy.method == QuantMethod::kModelOptFp8);
    CHECK(contains(legacy.source, "hf_quant_config.json"));
    CHECK_FALSE(legacy.quantizes("vision_model.radio_model.model.blocks.0.attn.qkv"));  // a parent module
    CHECK(legacy.quantizes("language_model.backbone.layers.0.mixer.in_proj"));

    CHECK(read(json::object()).method == QuantMethod::kNone);
    std::string message;
    CHECK(error_kind_of(
              [&] {
                  read({{"quantization_config", ct_config()}}, "", &hf);
              },
              &message) == ErrorKind::kConfig);
    CHECK(contains(message, "disagree"));
}

TEST_CASE("quantization configs: compressed-tensors FP8 targets and ignore lists") {
    const QuantConfig ct = read({{"quantization_config", ct_config()}});
    CHECK(ct.method == QuantMethod::kCompressedTensorsFp8);
    CHECK(ct.quantizes("backbone.layers.3.mixer.in_proj"));
    CHECK_FALSE(ct.quantizes("backbone.layers.4.mixer.down_proj"));  // re: regex
    CHECK_FALSE(ct.quantizes("lm_head"));
    json only_in_proj = ct_config();
    only_in_proj["config_groups"]["group_0"]["targets"] = {"re:.*mixer\\.in_proj$"};
    const QuantConfig targeted = read({{"quantization_config", only_in_proj}});
    CHECK(targeted.quantizes("backbone.layers.0.mixer.in_proj"));
    CHECK_FALSE(targeted.quantizes("backbone.layers.0.mixer.out_proj"));
}

TEST_CASE("unsupported or malformed quantization configs are errors naming the file and field") {
    json nvfp4 = modelopt_config();
    nvfp4["quant_algo"] = "NVFP4";
    std::string m = read_error({{"quantization_config", nvfp4}}, ErrorKind::kUnsupported);
    CHECK(contains(m, "config.json: quantization_config.quant_algo"));
    CHECK(contains(m, "NVFP4"));

    CHECK(contains(read_error({{"quantization_config", {{"quant_method", "gptq"}}}}, ErrorKind::kUnsupported),
                   "quantization_config.quant_method: 'gptq'"));

    json per_tensor = ct_config();
    per_tensor["config_groups"]["group_0"]["weights"]["strategy"] = "tensor";
    CHECK(contains(read_error({{"quantization_config", per_tensor}}, ErrorKind::kUnsupported),
                   "config_groups.group_0.weights.strategy: 'tensor'"));
    json int4 = ct_config();
    int4["config_groups"]["group_0"]["weights"]["num_bits"] = 4;
    CHECK(contains(read_error({{"quantization_config", int4}}, ErrorKind::kUnsupported),
                   "weights.num_bits: 4"));
    json static_tokens = ct_config();
    static_tokens["config_groups"]["group_0"]["input_activations"]["dynamic"] = false;
    CHECK(contains(read_error({{"quantization_config", static_tokens}}, ErrorKind::kUnsupported),
                   "input_activations.dynamic"));
    json weight_only = ct_config();
    weight_only["config_groups"]["group_0"].erase("input_activations");
    CHECK(contains(read_error({{"quantization_config", weight_only}}, ErrorKind::kUnsupported),
                   "input_activations: missing"));
    json bad_regex = ct_config();
    bad_regex["ignore"] = {"re:(unclosed"};
    CHECK(
        contains(read_error({{"quantization_config", bad_regex}}, ErrorKind::kConfig), "ignore: bad regex"));

    std::string message;
    CHECK(error_kind_of([] { parse_quantize("int4", "--quantize"); }, &message) ==
          ErrorKind::kInvalidArgument);
    CHECK(contains(message, "--quantize \"int4\": expected none or fp8"));
}

TEST_CASE("a ModelOpt checkpoint loads E4M3 weights with per-tensor and static input scales") {
    ModelConfig cfg = load_model_config(kFp8 + "modelopt");
    const Checkpoint ckpt = Checkpoint::open(kFp8 + "modelopt");
    const CheckpointReport report = check_checkpoint(cfg, ckpt);
    CHECK(report.ok());
    CHECK(report.unexpected.empty());  // every scale is declared by the table
    const ModelWeights w = load_weights(cfg, ckpt);
    const LinearWeight& in_proj = w.layers[3].mamba.in_proj;
    CHECK(in_proj.act == ActivationQuant::kStaticPerTensor);
    CHECK(in_proj.input_scale > 0.0f);
    REQUIRE(in_proj.w_scale.size() == static_cast<size_t>(in_proj.w.dim(0)));
    CHECK(in_proj.w_scale.front() == in_proj.w_scale.back());
    for (float v : in_proj.w.data) REQUIRE(kernels::cpu::round_to_e4m3(v) == v);
    CHECK_FALSE(w.layers[0].mamba.out_proj.fp8());  // ignored: BF16 in the file
    CHECK(w.layers[2].attn.q.fp8());
}

TEST_CASE("a compressed-tensors checkpoint loads per-channel scales and dynamic per-token inputs") {
    ModelConfig cfg = load_model_config(kFp8 + "compressed_tensors");
    const ModelWeights w = load_weights(cfg, Checkpoint::open(kFp8 + "compressed_tensors"));
    const LinearWeight& up = w.layers[1].mlp.up;
    CHECK(up.act == ActivationQuant::kDynamicPerToken);
    REQUIRE(up.w_scale.size() == static_cast<size_t>(up.w.dim(0)));
    CHECK(*std::min_element(up.w_scale.begin(), up.w_scale.end()) <
          *std::max_element(up.w_scale.begin(), up.w_scale.end()));  // one scale per row
    CHECK_FALSE(w.layers[4].mlp.down.fp8());                         // ignored by a re: entry
    CHECK(w.layers[4].mlp.up.fp8());
}

TEST_CASE("quantize-on-load: every language-model linear layer per output channel, nothing else") {
    const std::string dir = std::string(SURF_FIXTURES_DIR) + "/golden/greedy_bf16";
    ModelConfig cfg = load_model_config(dir);
    const ModelWeights w = load_weights(cfg, Checkpoint::open(dir), Quantize::kFp8);
    int n_linear = 0;
    for (const LayerWeights& L : w.layers) {
        for (const LinearWeight* lin : {&L.mamba.in_proj, &L.mamba.out_proj, &L.attn.q, &L.attn.k, &L.attn.v,
                                        &L.attn.o, &L.mlp.up, &L.mlp.down}) {
            if (lin->w.empty()) continue;
            ++n_linear;
            CHECK(lin->act == ActivationQuant::kDynamicPerToken);
            const int64_t cols = lin->w.dim(1);
            for (int64_t r = 0; r < lin->w.dim(0); ++r) {
                float amax = 0.0f;
                for (int64_t c = 0; c < cols; ++c) {
                    const float v = lin->w.data[static_cast<size_t>(r * cols + c)];
                    REQUIRE(kernels::cpu::round_to_e4m3(v) == v);
                    amax = std::max(amax, std::fabs(v));
                }
                REQUIRE(amax == 448.0f);  // the row's largest weight maps to the largest E4M3 value
            }
        }
    }
    CHECK(n_linear == 4 * 2 + 2 * 4 + 3 * 2);  // pattern M-*M-M*-M
    // lm_head and the vision tower keep their bf16 values.
    const ModelWeights plain = load_weights(cfg, Checkpoint::open(dir));
    CHECK(w.lm_head.data == plain.lm_head.data);
    CHECK(w.vision.proj_fc1.data == plain.vision.proj_fc1.data);
}

TEST_CASE("a missing scale, a wrong dtype or a wrong scale shape is an error naming the file and tensor") {
    const std::string missing = altered("modelopt", [](std::vector<TensorToWrite>& t) {
        std::erase_if(t, [](const TensorToWrite& x) {
            return x.name == "backbone.layers.3.mixer.in_proj.input_scale";
        });
    });
    CHECK(contains(load_error(missing, ErrorKind::kFormat),
                   "missing tensor backbone.layers.3.mixer.in_proj.input_scale"));

    std::vector<uint16_t> bf16;
    const std::string wrong_dtype = altered("modelopt", [&](std::vector<TensorToWrite>& t) {
        TensorToWrite& x = find(t, "backbone.layers.2.mixer.k_proj.weight");
        int64_t n = 1;
        for (int64_t d : x.shape) n *= d;
        bf16.assign(static_cast<size_t>(n), 0x3f80);
        x.dtype = DType::kBF16, x.data = bf16.data();
    });
    std::string m = load_error(wrong_dtype, ErrorKind::kFormat);
    CHECK(contains(m, "backbone.layers.2.mixer.k_proj.weight ("));
    CHECK(contains(m, "model.safetensors): expected F8_E4M3"));
    CHECK(contains(m, "quantization_config: modelopt FP8 quantizes it), got BF16"));

    const std::string flat_scale = altered("compressed_tensors", [](std::vector<TensorToWrite>& t) {
        TensorToWrite& x = find(t, "backbone.layers.1.mixer.up_proj.weight_scale");
        x.shape = {x.shape[0]};
    });
    CHECK(contains(load_error(flat_scale, ErrorKind::kFormat),
                   "backbone.layers.1.mixer.up_proj.weight_scale: expected [128, 1], got [128]"));
}

TEST_CASE(
    "FP8 weights the config does not quantize, bad scales and NaN codes are errors; so is quantizing twice") {
    std::vector<uint8_t> codes(64 * 128, 0x38);
    const std::string fp8_ignored = altered("compressed_tensors", [&](std::vector<TensorToWrite>& t) {
        TensorToWrite& x = find(t, "backbone.layers.4.mixer.down_proj.weight");
        x.dtype = DType::kF8E4M3, x.data = codes.data();
    });
    CHECK(contains(load_error(fp8_ignored, ErrorKind::kFormat),
                   "quantization_config leaves it unquantized), got F8_E4M3"));

    const std::string no_config = altered(
        "compressed_tensors", [](std::vector<TensorToWrite>&) {},
        [](json& c) { c.erase("quantization_config"); });
    CHECK(
        contains(load_error(no_config, ErrorKind::kFormat), "an F8_E4M3 weight needs a quantization_config"));

    const float negative = -1.0f;
    const std::string bad_scale = altered("modelopt", [&](std::vector<TensorToWrite>& t) {
        TensorToWrite& x = find(t, "backbone.layers.1.mixer.down_proj.weight_scale");
        x.dtype = DType::kF32, x.data = &negative;
    });
    CHECK(contains(load_error(bad_scale, ErrorKind::kFormat),
                   "model.safetensors: backbone.layers.1.mixer.down_proj.weight_scale holds -1"));

    std::vector<uint8_t> nan_codes(64 * 128, 0x7f);
    const std::string nan_weight = altered("modelopt", [&](std::vector<TensorToWrite>& t) {
        find(t, "backbone.layers.1.mixer.down_proj.weight").data = nan_codes.data();
    });
    CHECK(contains(load_error(nan_weight, ErrorKind::kFormat), "down_proj.weight holds the E4M3 NaN code"));

    CHECK(contains(load_error(kFp8 + "modelopt", ErrorKind::kInvalidArgument, Quantize::kFp8),
                   "already quantized"));
}

TEST_CASE("a backend without FP8 refuses EngineOptions::quantize instead of ignoring it") {
    register_engine_backend(
        "no-fp8", [](const std::string&, int, WarmUp, const EngineOptions&) -> std::unique_ptr<Engine> {
            FAIL("the backend must not be opened");
            return nullptr;
        });
    EngineOptions options;
    options.quantize = Quantize::kFp8;
    std::string message;
    CHECK(error_kind_of(
              [&] { open_engine(kFp8 + "modelopt", "no-fp8", "--backend", 0, WarmUp::kSingle, options); },
              &message) == ErrorKind::kUnsupported);
    CHECK(contains(message, "quantize fp8: the no-fp8 backend (--backend) does not run FP8"));
}
