#include "model/checkpoint/quant_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "base/error.h"

namespace surf::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A JSON object and the "file: path" prefix of every message about it.
struct Where {
    const json& j;
    std::string at;

    Error error(ErrorKind kind, const std::string& field, const std::string& what) const {
        return Error(kind, at + "." + field + ": " + what);
    }
    bool has(const char* field) const { return j.contains(field) && !j[field].is_null(); }
    std::string str(const char* field) const {
        if (!has(field)) throw error(ErrorKind::kConfig, field, "missing");
        if (!j[field].is_string())
            throw error(ErrorKind::kConfig, field, "expected a string, got " + j[field].dump());
        return j[field].get<std::string>();
    }
    std::vector<std::string> strings(const char* field) const {
        std::vector<std::string> out;
        if (!has(field)) return out;
        if (!j[field].is_array()) throw error(ErrorKind::kConfig, field, "expected a list of strings");
        for (const json& item : j[field]) {
            if (!item.is_string())
                throw error(ErrorKind::kConfig, field, "expected a list of strings, got " + item.dump());
            out.push_back(item.get<std::string>());
        }
        return out;
    }
    Where object(const char* field) const {
        if (!has(field) || !j[field].is_object())
            throw error(ErrorKind::kConfig, field, "expected an object");
        return {j[field], at + "." + field};
    }
};

// fnmatch with * (any run) and ? (one character).
bool glob_match(const char* pattern, const char* text) {
    if (*pattern == '\0') return *text == '\0';
    if (*pattern == '*') return glob_match(pattern + 1, text) || (*text && glob_match(pattern, text + 1));
    if (*text == '\0') return false;
    return (*pattern == '?' || *pattern == *text) && glob_match(pattern + 1, text + 1);
}

bool entry_matches(const std::string& entry, const std::string& name) {
    if (entry.starts_with("re:")) {
        const std::regex re(entry.substr(3));
        return std::regex_search(name, re, std::regex_constants::match_continuous);
    }
    if (entry.find_first_of("*?") != std::string::npos) return glob_match(entry.c_str(), name.c_str());
    return name == entry || name.starts_with(entry + ".") || name.ends_with("." + entry);
}

// A module name matches an entry as it is, and without the "language_model." of the VL layout (lists written
// for the language model alone).
bool matches_any(const std::vector<std::string>& entries, const std::string& module) {
    const std::string inner =
        module.starts_with("language_model.") ? module.substr(std::string("language_model.").size()) : module;
    for (const std::string& entry : entries) {
        if (entry_matches(entry, module) || entry_matches(entry, inner)) return true;
    }
    return false;
}

// Throws for a regex the standard library does not accept, at load time rather than at the first lookup.
void check_regexes(const Where& w, const char* field, const std::vector<std::string>& entries) {
    for (const std::string& entry : entries) {
        if (!entry.starts_with("re:")) continue;
        try {
            std::regex(entry.substr(3));
        } catch (const std::regex_error& e) {
            throw w.error(ErrorKind::kConfig, field, "bad regex '" + entry + "': " + e.what());
        }
    }
}

// ModelOpt: {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": [...]} in config.json, or
// hf_quant_config.json's {"quantization": {"quant_algo": "FP8", "exclude_modules": [...]}}. A KV-cache scheme
// is accepted: the CPU engine keeps the KV cache in fp32 and does not read k_scale / v_scale.
QuantConfig parse_modelopt(const Where& w) {
    const Where q = w.has("quant_algo") || !w.has("quantization") ? w : w.object("quantization");
    const std::string algo = q.str("quant_algo");
    if (algo != "FP8") {
        throw q.error(ErrorKind::kUnsupported, "quant_algo",
                      "'" + algo +
                          "' is not supported (surf loads ModelOpt FP8: per-tensor weight and input "
                          "scales)");
    }
    QuantConfig out;
    out.method = QuantMethod::kModelOptFp8;
    out.ignore = q.strings("ignore");
    for (std::string& name : q.strings("exclude_modules")) out.ignore.push_back(std::move(name));
    check_regexes(q, "ignore", out.ignore);
    return out;
}

// One quantization args object of a compressed-tensors group: 8-bit float, symmetric, the given strategy
// and dynamic flag.
void check_ct_args(const Where& group, const char* field, const std::string& strategy, bool dynamic) {
    if (!group.has(field)) {
        throw group.error(ErrorKind::kUnsupported, field,
                          "missing: surf runs FP8 weights with FP8 activations (W8A8) only");
    }
    const Where a = group.object(field);
    if (!a.has("num_bits") || a.j["num_bits"] != 8)
        throw a.error(ErrorKind::kUnsupported, "num_bits",
                      (a.has("num_bits") ? a.j["num_bits"].dump() : "missing") + ", expected 8");
    if (a.str("type") != "float")
        throw a.error(ErrorKind::kUnsupported, "type",
                      "'" + a.str("type") + "', expected 'float' (FP8 E4M3)");
    if (a.str("strategy") != strategy)
        throw a.error(ErrorKind::kUnsupported, "strategy",
                      "'" + a.str("strategy") + "' is not supported here, expected '" + strategy + "'");
    if (a.has("symmetric") && a.j["symmetric"] != true)
        throw a.error(ErrorKind::kUnsupported, "symmetric", "asymmetric FP8 is not supported");
    const bool is_dynamic = a.has("dynamic") && a.j["dynamic"] == true;
    if (is_dynamic != dynamic)
        throw a.error(ErrorKind::kUnsupported, "dynamic",
                      std::string("expected ") + (dynamic ? "true" : "false") + " for strategy " + strategy);
    if (a.has("group_size") || a.has("block_structure"))
        throw a.error(ErrorKind::kUnsupported, a.has("group_size") ? "group_size" : "block_structure",
                      "group and block scales are not supported");
}

// compressed-tensors: config groups of FP8 per-channel weights and dynamic per-token FP8 inputs.
QuantConfig parse_compressed_tensors(const Where& w) {
    if (w.has("format")) {
        const std::string format = w.str("format");
        if (format != "float-quantized" && format != "naive-quantized")
            throw w.error(ErrorKind::kUnsupported, "format",
                          "'" + format + "' is not supported (expected float-quantized FP8 weights)");
    }
    const Where groups = w.object("config_groups");
    if (groups.j.empty()) throw w.error(ErrorKind::kConfig, "config_groups", "empty");
    QuantConfig out;
    out.method = QuantMethod::kCompressedTensorsFp8;
    for (auto it = groups.j.begin(); it != groups.j.end(); ++it) {
        const Where g = groups.object(it.key().c_str());
        check_ct_args(g, "weights", "channel", false);
        check_ct_args(g, "input_activations", "token", true);
        if (g.has("output_activations"))
            throw g.error(ErrorKind::kUnsupported, "output_activations",
                          "output quantization is not supported");
        const std::vector<std::string> targets = g.strings("targets");
        if (targets.empty()) throw g.error(ErrorKind::kConfig, "targets", "missing or empty");
        check_regexes(g, "targets", targets);
        out.targets.insert(out.targets.end(), targets.begin(), targets.end());
    }
    out.ignore = w.strings("ignore");
    check_regexes(w, "ignore", out.ignore);
    return out;
}

QuantConfig parse_one(const Where& w) {
    if (!w.j.is_object()) throw Error(ErrorKind::kConfig, w.at + ": expected an object");
    // hf_quant_config.json names no method: its producer and layout are ModelOpt's.
    const std::string method = w.has("quant_method") ? w.str("quant_method") : "modelopt";
    QuantConfig out;
    if (method == "modelopt") {
        out = parse_modelopt(w);
    } else if (method == "compressed-tensors") {
        out = parse_compressed_tensors(w);
    } else {
        throw w.error(
            ErrorKind::kUnsupported, "quant_method",
            "'" + method + "' is not supported (surf loads modelopt FP8 and compressed-tensors FP8)");
    }
    out.source = w.at;
    return out;
}

}  // namespace

const char* quant_method_name(QuantMethod method) {
    switch (method) {
        case QuantMethod::kNone: return "none";
        case QuantMethod::kModelOptFp8: return "modelopt FP8";
        case QuantMethod::kCompressedTensorsFp8: return "compressed-tensors FP8";
    }
    return "?";
}

bool QuantConfig::quantizes(const std::string& module) const {
    if (method == QuantMethod::kNone || matches_any(ignore, module)) return false;
    if (method == QuantMethod::kModelOptFp8) return true;
    for (const std::string& target : targets) {
        if (target == "Linear") return true;  // the caller asks about linear layers only
    }
    return matches_any(targets, module);
}

QuantConfig read_quant_config(const std::string& dir, const json& config, const std::string& llm_key) {
    const std::string config_path = (fs::path(dir) / "config.json").string();
    std::vector<QuantConfig> found;
    if (config.contains("quantization_config") && !config["quantization_config"].is_null())
        found.push_back(parse_one({config["quantization_config"], config_path + ": quantization_config"}));
    if (!llm_key.empty() && config.contains(llm_key) && config[llm_key].is_object() &&
        config[llm_key].contains("quantization_config") &&
        !config[llm_key]["quantization_config"].is_null()) {
        found.push_back(parse_one(
            {config[llm_key]["quantization_config"], config_path + ": " + llm_key + ".quantization_config"}));
    }
    const fs::path hf_path = fs::path(dir) / "hf_quant_config.json";
    if (fs::exists(hf_path)) {
        std::ifstream in(hf_path);
        json hf;
        try {
            hf = json::parse(in);
        } catch (const json::exception& e) {
            throw Error(ErrorKind::kFormat, hf_path.string() + ": not valid JSON: " + e.what());
        }
        found.push_back(parse_one({hf, hf_path.string()}));
    }
    if (found.empty()) return {};
    for (const QuantConfig& other : found) {
        if (other.method != found[0].method) {
            throw Error(ErrorKind::kConfig, found[0].source + " (" + quant_method_name(found[0].method) +
                                                ") and " + other.source + " (" +
                                                quant_method_name(other.method) + ") disagree");
        }
    }
    return found[0];
}

Quantize parse_quantize(const std::string& text, const std::string& field) {
    if (text == "none") return Quantize::kNone;
    if (text == "fp8") return Quantize::kFp8;
    throw Error(ErrorKind::kInvalidArgument, field + " \"" + text + "\": expected none or fp8");
}

const char* quantize_name(Quantize quantize) {
    return quantize == Quantize::kFp8 ? "fp8" : "none";
}

}  // namespace surf::model
