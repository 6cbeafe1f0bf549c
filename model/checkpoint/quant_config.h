// FP8 (E4M3) in the language model's GEMMs: the quantization config of a checkpoint and the quantize-on-load
// option. Plain data (DESIGN.md rule 4). The config comes from config.json's quantization_config (at the top
// level, or under llm_config / text_config of a VL config) or from ModelOpt's hf_quant_config.json; which
// tensors it implies (FP8 weights, their scales) is declared in the weight table (weights.cpp), which checks
// them against the checkpoint.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace surf::model {

enum class QuantMethod {
    kNone,
    // NVIDIA ModelOpt, quant_algo FP8: float8_e4m3fn weights with a per-tensor `weight_scale` and a static
    // per-tensor `input_scale` (calibrated).
    kModelOptFp8,
    // compressed-tensors, float 8-bit weights per channel (`weight_scale` [out, 1]) and dynamic per-token
    // 8-bit float input activations.
    kCompressedTensorsFp8,
};
const char* quant_method_name(QuantMethod method);

struct QuantConfig {
    QuantMethod method = QuantMethod::kNone;
    std::string source;  // where it was read ("DIR/config.json: quantization_config"), for messages
    // Modules the checkpoint leaves unquantized: names (a name also matches its children and the same name
    // under "language_model."), globs with * and ?, or "re:" regexes matched at the start of the name.
    std::vector<std::string> ignore;
    // compressed-tensors: the modules the config groups quantize ("Linear": every linear layer; names or
    // "re:" regexes otherwise). Empty for ModelOpt, which quantizes every linear layer it does not ignore.
    std::vector<std::string> targets;

    // Whether the checkpoint stores the linear layer `module` (a weight's name without ".weight") in FP8.
    bool quantizes(const std::string& module) const;
};

// Reads the quantization config of the model folder `dir` whose config.json is `config`. `llm_key` names the
// object holding the language model's config in a VL config ("llm_config", "text_config"), or is empty.
// Throws surf::Error naming the file and field: kConfig for a malformed config or two that disagree,
// kUnsupported for a method, algorithm, bit width, type or strategy surf does not run.
QuantConfig read_quant_config(const std::string& dir, const nlohmann::json& config,
                              const std::string& llm_key);

// What the engine does on load to the language model's linear layers of a bf16/fp32 checkpoint (--quantize):
// nothing, or FP8 E4M3 weights with per-output-channel scales and dynamic per-token activation scales.
enum class Quantize { kNone, kFp8 };
// "none" or "fp8"; throws kInvalidArgument naming `field` otherwise.
Quantize parse_quantize(const std::string& text, const std::string& field);
const char* quantize_name(Quantize quantize);

}  // namespace surf::model
