#include "model/checkpoint/config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace surf::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Upper bounds of the size fields (Section::positive).
constexpr int64_t kMaxSize = int64_t{1} << 20;  // widths, vocabularies, head counts
constexpr int64_t kMaxLayers = 1024;            // language-model and vision layers
constexpr int64_t kMaxChunk = 8192;             // Mamba-2 chunk_size
constexpr int64_t kMaxConvKernel = 64;
constexpr int64_t kMaxPixels = 16384;  // tile size, patch size, position-embedding grid in pixels
constexpr int64_t kMaxTiles = 1024;

// A JSON object plus the "file:path" prefix used in every message about it.
struct Section {
    const json& j;
    std::string where;  // e.g. "config.json: llm_config"

    Error error(const std::string& field, const std::string& what) const {
        return Error(ErrorKind::kConfig, where + "." + field + ": " + what);
    }
    bool has(const char* field) const { return j.contains(field) && !j[field].is_null(); }

    int64_t int_field(const char* field) const {
        if (!has(field)) throw error(field, "missing required field");
        if (!j[field].is_number_integer()) throw error(field, "expected an integer, got " + j[field].dump());
        return j[field].get<int64_t>();
    }
    int64_t int_or(const char* field, int64_t fallback) const {
        return has(field) ? int_field(field) : fallback;
    }
    // A size field: positive and at most `max`, checked before anything is allocated from it. The default
    // bound is far above every released model and far below what would exhaust memory on its own.
    int64_t positive(const char* field, int64_t max = kMaxSize) const {
        int64_t v = int_field(field);
        if (v <= 0) throw error(field, "must be positive, got " + std::to_string(v));
        if (v > max)
            throw error(field, std::to_string(v) + " is larger than the supported " + std::to_string(max));
        return v;
    }
    int64_t positive_or(const char* field, int64_t fallback, int64_t max = kMaxSize) const {
        return has(field) ? positive(field, max) : fallback;
    }
    int64_t int_in_or(const char* field, int64_t fallback, int64_t lo, int64_t hi) const {
        if (!has(field)) return fallback;
        const int64_t v = int_field(field);
        if (v < lo || v > hi) {
            throw error(field, std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
        }
        return v;
    }
    double num_or(const char* field, double fallback) const {
        if (!has(field)) return fallback;
        if (!j[field].is_number()) throw error(field, "expected a number, got " + j[field].dump());
        return j[field].get<double>();
    }
    bool bool_or(const char* field, bool fallback) const {
        if (!has(field)) return fallback;
        if (!j[field].is_boolean()) throw error(field, "expected true/false, got " + j[field].dump());
        return j[field].get<bool>();
    }
    std::string str_or(const char* field, const std::string& fallback) const {
        if (!has(field)) return fallback;
        if (!j[field].is_string()) throw error(field, "expected a string, got " + j[field].dump());
        return j[field].get<std::string>();
    }
    std::array<float, 3> triple_or(const char* field, std::array<float, 3> fallback) const {
        if (!has(field)) return fallback;
        const json& v = j[field];
        if (!v.is_array() || v.size() != 3) throw error(field, "expected 3 numbers, got " + v.dump());
        std::array<float, 3> out{};
        for (int c = 0; c < 3; ++c) {
            if (!v[c].is_number()) throw error(field, "expected 3 numbers, got " + v.dump());
            out[c] = v[c].get<float>();
        }
        return out;
    }
};

json read_json(const fs::path& path) {
    std::ifstream in(path);
    if (!in) throw Error(ErrorKind::kIo, path.string() + ": cannot open");
    try {
        return json::parse(in);
    } catch (const json::exception& e) {
        throw Error(ErrorKind::kFormat, path.string() + ": not valid JSON: " + e.what());
    }
}

std::vector<int64_t> id_list(const json& v, const std::string& where) {
    std::vector<int64_t> ids;
    if (v.is_number_integer()) {
        ids.push_back(v.get<int64_t>());
    } else if (v.is_array()) {
        for (const json& x : v) {
            if (!x.is_number_integer())
                throw Error(ErrorKind::kConfig, where + ": expected integer token ids, got " + v.dump());
            ids.push_back(x.get<int64_t>());
        }
    } else if (!v.is_null()) {
        throw Error(ErrorKind::kConfig, where + ": expected a token id or a list of ids, got " + v.dump());
    }
    return ids;
}

// The layer kinds: hybrid_override_pattern ("M-*"), or the list field recent transformers releases
// write (layers_block_type: "mamba"/"linear_attention", "attention"/"full_attention", "mlp").
std::vector<LayerKind> read_layers(const Section& s) {
    std::vector<LayerKind> layers;
    if (s.has("hybrid_override_pattern")) {
        layers = parse_layer_pattern(s.str_or("hybrid_override_pattern", ""),
                                     s.where + ".hybrid_override_pattern");
    } else if (s.has("layers_block_type")) {
        const json& list = s.j["layers_block_type"];
        if (!list.is_array()) throw s.error("layers_block_type", "expected a list of strings");
        for (const json& item : list) {
            const std::string t = item.is_string() ? item.get<std::string>() : item.dump();
            if (t == "mamba" || t == "linear_attention" || t == "mamba2")
                layers.push_back(LayerKind::kMamba2);
            else if (t == "attention" || t == "full_attention")
                layers.push_back(LayerKind::kAttention);
            else if (t == "mlp")
                layers.push_back(LayerKind::kMlp);
            else if (t == "moe")
                throw Error(ErrorKind::kUnsupported,
                            s.where + ".layers_block_type: MoE blocks ('moe') are not supported");
            else
                throw s.error("layers_block_type", "unknown block type '" + t + "'");
        }
    } else {
        throw s.error("hybrid_override_pattern", "missing (and no layers_block_type either)");
    }
    if (s.has("num_hidden_layers") &&
        s.int_field("num_hidden_layers") != static_cast<int64_t>(layers.size())) {
        throw s.error("num_hidden_layers", std::to_string(s.int_field("num_hidden_layers")) +
                                               " does not match the " + std::to_string(layers.size()) +
                                               " layers of the hybrid pattern");
    }
    if (layers.empty()) throw s.error("hybrid_override_pattern", "no layers");
    if (static_cast<int64_t>(layers.size()) > kMaxLayers) {
        throw s.error("hybrid_override_pattern", std::to_string(layers.size()) + " layers; at most " +
                                                     std::to_string(kMaxLayers) + " are supported");
    }
    return layers;
}

LlmConfig parse_llm(const Section& s) {
    LlmConfig c;
    c.layers = read_layers(s);
    c.hidden_size = s.positive("hidden_size");
    c.vocab_size = s.positive("vocab_size");
    c.norm_eps = static_cast<float>(s.num_or("layer_norm_epsilon", s.num_or("rms_norm_eps", 1e-5)));
    c.tie_embeddings = s.bool_or("tie_word_embeddings", false);
    c.max_position_embeddings = s.positive_or("max_position_embeddings", 0, int64_t{1} << 24);
    if (c.count(LayerKind::kMlp) > 0) {
        c.intermediate_size = s.positive("intermediate_size");
        const std::string act = s.str_or("mlp_hidden_act", "relu2");
        if (act != "relu2")
            throw Error(ErrorKind::kUnsupported,
                        s.where + ".mlp_hidden_act: only 'relu2' is supported, got '" + act + "'");
    }
    if (c.count(LayerKind::kAttention) > 0) {
        c.n_heads = s.positive("num_attention_heads");
        c.n_kv_heads = s.positive_or("num_key_value_heads", c.n_heads);
        c.head_dim =
            s.positive_or("head_dim", s.positive_or("attention_head_dim", c.hidden_size / c.n_heads));
        if (c.n_heads % c.n_kv_heads != 0) {
            throw s.error("num_key_value_heads", std::to_string(c.n_kv_heads) +
                                                     " does not divide num_attention_heads " +
                                                     std::to_string(c.n_heads));
        }
        if (s.has("sliding_window"))
            throw Error(ErrorKind::kUnsupported,
                        s.where + ".sliding_window: sliding-window attention is not supported");
    }
    if (c.count(LayerKind::kMamba2) > 0) {
        c.mamba_n_heads = s.positive("mamba_num_heads");
        c.mamba_head_dim = s.positive("mamba_head_dim");
        c.d_state = s.positive("ssm_state_size");
        c.n_groups = s.positive("n_groups");
        c.conv_kernel = s.positive_or("conv_kernel", 4, kMaxConvKernel);
        c.chunk_size = s.positive_or("chunk_size", 128, kMaxChunk);
        c.conv_bias = s.bool_or("use_conv_bias", true);
        if (c.mamba_n_heads % c.n_groups != 0) {
            throw s.error("n_groups", std::to_string(c.n_groups) + " does not divide mamba_num_heads " +
                                          std::to_string(c.mamba_n_heads));
        }
        if (c.conv_kernel < 2) throw s.error("conv_kernel", "must be at least 2");
        if (s.bool_or("use_bias", false))
            throw Error(ErrorKind::kUnsupported,
                        s.where + ".use_bias: in_proj/out_proj biases are not supported");
        const std::string act = s.str_or("mamba_hidden_act", "silu");
        if (act != "silu")
            throw Error(ErrorKind::kUnsupported,
                        s.where + ".mamba_hidden_act: only 'silu' is supported, got '" + act + "'");
        // time_step_limit [lo, hi]: the dt clamp the reference applies (absent or [0, inf] = none).
        if (s.has("time_step_limit")) {
            const json& lim = s.j["time_step_limit"];
            if (!lim.is_array() || lim.size() != 2)
                throw s.error("time_step_limit", "expected [min, max], got " + lim.dump());
            auto value = [&](const json& v) -> float {
                if (v.is_number()) return v.get<float>();
                if (v.is_string() && (v == "inf" || v == "Infinity")) return 0.0f;
                if (v.is_null()) return 0.0f;
                throw s.error("time_step_limit", "expected numbers, got " + lim.dump());
            };
            c.dt_min = value(lim[0]);
            c.dt_max = value(lim[1]);
            if (!std::isfinite(c.dt_max)) c.dt_max = 0.0f;
        }
    }
    return c;
}

// Known timm ViT names that RADIO's args.model uses → (width, depth, heads, mlp).
bool timm_vit_dims(const std::string& name, VisionConfig* v) {
    struct Dims {
        const char* name;
        int64_t width, depth, heads, mlp;
    };
    static const Dims kDims[] = {{"vit_huge_patch16_224", 1280, 32, 16, 5120},
                                 {"vit_large_patch16_224", 1024, 24, 16, 4096},
                                 {"vit_base_patch16_224", 768, 12, 12, 3072}};
    for (const auto& d : kDims) {
        if (name == d.name) {
            v->hidden_size = d.width;
            v->n_layers = d.depth;
            v->n_heads = d.heads;
            v->intermediate_size = d.mlp;
            return true;
        }
    }
    return false;
}

VisionConfig parse_vision(const Section& s) {
    VisionConfig v;
    // The original RADIO checkpoints name the tower through args.model; HF's RadioConfig spells the sizes
    // out. Explicit fields win over the name.
    if (s.has("args")) {
        const Section args{s.j["args"], s.where + ".args"};
        const std::string model = args.str_or("model", "");
        if (!model.empty() && !timm_vit_dims(model, &v) && !s.has("hidden_size")) {
            throw Error(ErrorKind::kUnsupported, args.where + ".model: unknown ViT '" + model + "'");
        }
        if (args.has("cpe_max_size")) v.max_img_size = args.positive("cpe_max_size", kMaxPixels);
    }
    v.hidden_size = s.positive_or("hidden_size", v.hidden_size);
    v.n_layers = s.positive_or("num_hidden_layers", v.n_layers, kMaxLayers);
    v.n_heads = s.positive_or("num_attention_heads", v.n_heads);
    v.intermediate_size =
        s.positive_or("intermediate_size", v.intermediate_size ? v.intermediate_size : 4 * v.hidden_size);
    v.patch_size = s.positive_or("patch_size", v.patch_size, kMaxPixels);
    v.max_img_size = s.positive_or("max_img_size",
                                   s.positive_or("max_resolution", v.max_img_size, kMaxPixels), kMaxPixels);
    v.norm_eps = static_cast<float>(s.num_or("layer_norm_eps", v.norm_eps));
    if (s.has("num_cls_tokens") || s.has("num_registers")) {
        v.n_prefix = s.int_in_or("num_cls_tokens", 1, 0, 1024) + s.int_in_or("num_registers", 0, 0, 1024);
    }
    if (v.hidden_size <= 0)
        throw s.error("hidden_size", "missing (neither hidden_size nor a known args.model)");
    if (v.n_layers <= 0) throw s.error("num_hidden_layers", "missing");
    if (v.n_heads <= 0 || v.hidden_size % v.n_heads != 0) {
        throw s.error("num_attention_heads", std::to_string(v.n_heads) + " does not divide the width " +
                                                 std::to_string(v.hidden_size));
    }
    return v;
}

}  // namespace

const char* layer_kind_name(LayerKind kind) {
    switch (kind) {
        case LayerKind::kMamba2: return "mamba2";
        case LayerKind::kAttention: return "attention";
        case LayerKind::kMlp: return "mlp";
    }
    return "?";
}

char layer_kind_char(LayerKind kind) {
    switch (kind) {
        case LayerKind::kMamba2: return 'M';
        case LayerKind::kAttention: return '*';
        case LayerKind::kMlp: return '-';
    }
    return '?';
}

int64_t LlmConfig::count(LayerKind kind) const {
    int64_t n = 0;
    for (LayerKind k : layers) n += (k == kind);
    return n;
}

std::string LlmConfig::pattern() const {
    std::string out;
    for (LayerKind k : layers) out.push_back(layer_kind_char(k));
    return out;
}

int64_t ImageConfig::shuffle_factor() const {
    return static_cast<int64_t>(std::lround(1.0 / downsample_ratio));
}

int64_t ImageConfig::tokens_per_tile() const {
    const int64_t side = patches_per_side() / shuffle_factor();
    return side * side;
}

std::vector<LayerKind> parse_layer_pattern(const std::string& pattern, const std::string& where) {
    std::vector<LayerKind> layers;
    for (size_t i = 0; i < pattern.size(); ++i) {
        switch (pattern[i]) {
            case 'M': layers.push_back(LayerKind::kMamba2); break;
            case '*': layers.push_back(LayerKind::kAttention); break;
            case '-': layers.push_back(LayerKind::kMlp); break;
            case 'E':
                throw Error(ErrorKind::kUnsupported, where + ": MoE blocks ('E' at position " +
                                                         std::to_string(i) + ") are not supported");
            default:
                throw Error(ErrorKind::kConfig, where + ": unknown layer character '" +
                                                    std::string(1, pattern[i]) + "' at position " +
                                                    std::to_string(i));
        }
    }
    return layers;
}

namespace {

// The image preprocessing of a NemotronH_Nano_VL_V2 config: top-level fields, with vision_config's
// normalisation as the fallback; the tile must split into patches and the patch grid into shuffle blocks.
void parse_image(const Section& s, const Section& vs, ModelConfig& cfg) {
    ImageConfig& im = cfg.image;
    im.tile_size = s.positive_or("force_image_size", im.tile_size, kMaxPixels);
    im.patch_size = s.positive_or("patch_size", cfg.vision.patch_size, kMaxPixels);
    if (im.patch_size != cfg.vision.patch_size) {
        throw s.error("patch_size", std::to_string(im.patch_size) +
                                        " differs from vision_config.patch_size " +
                                        std::to_string(cfg.vision.patch_size));
    }
    im.downsample_ratio = s.num_or("downsample_ratio", im.downsample_ratio);
    im.ps_version = s.str_or("ps_version", "v2");
    if (im.ps_version != "v2")
        throw Error(
            ErrorKind::kUnsupported,
            s.where + ".ps_version: only pixel shuffle 'v2' is supported, got '" + im.ps_version + "'");
    im.use_thumbnail = s.bool_or("use_thumbnail", im.use_thumbnail);
    im.max_tiles = s.positive_or("max_num_tiles", s.positive_or("max_dynamic_patch", im.max_tiles, kMaxTiles),
                                 kMaxTiles);
    im.norm_mean = s.triple_or("norm_mean", vs.triple_or("norm_mean", im.norm_mean));
    im.norm_std = s.triple_or("norm_std", vs.triple_or("norm_std", im.norm_std));
    if (im.tile_size % im.patch_size != 0) throw s.error("force_image_size", "not a multiple of patch_size");
    const int64_t shuffle = im.shuffle_factor();
    if (shuffle < 1 || std::fabs(1.0 / static_cast<double>(shuffle) - im.downsample_ratio) > 1e-9 ||
        im.patches_per_side() % shuffle != 0) {
        throw s.error("downsample_ratio", "must be 1/k with k dividing the patch grid, got " +
                                              std::to_string(im.downsample_ratio));
    }
}

// NemotronH_Nano_VL_V2: the language model nested under llm_config (or text_config), the vision tower, the
// image preprocessing, the projector and the image tokens.
void parse_vl_config(const json& top, const Section& s, ModelConfig& cfg) {
    if (!s.has("llm_config") && !s.has("text_config"))
        throw s.error("llm_config", "missing (a NemotronH_Nano_VL_V2 config nests the language model there)");
    cfg.llm_key = s.has("llm_config") ? "llm_config" : "text_config";
    cfg.llm = parse_llm(Section{top[cfg.llm_key], s.where + ": " + cfg.llm_key});
    if (!s.has("vision_config")) throw s.error("vision_config", "missing");
    const Section vs{top["vision_config"], s.where + ": vision_config"};
    cfg.vision = parse_vision(vs);
    cfg.has_vision = true;
    parse_image(s, vs, cfg);
    if (s.has("vision_config") && vs.has("args")) {
        const Section args{vs.j["args"], vs.where + ".args"};
        if (args.has("min_num_patches")) {
            throw Error(
                ErrorKind::kUnsupported,
                args.where +
                    ".min_num_patches: dynamic-resolution tiling is not supported (static tiling only)");
        }
    }
    const int64_t vit = s.positive_or("vit_hidden_size", cfg.vision.hidden_size);
    if (vit != cfg.vision.hidden_size) {
        throw s.error("vit_hidden_size", std::to_string(vit) + " differs from the vision tower width " +
                                             std::to_string(cfg.vision.hidden_size));
    }
    cfg.projector_hidden = s.positive("projector_hidden_size");
    cfg.image_context_token = s.str_or("img_context_token", cfg.image_context_token);
    cfg.image_start_token = s.str_or("img_start_token", cfg.image_start_token);
    cfg.image_end_token = s.str_or("img_end_token", cfg.image_end_token);
    cfg.image_context_token_id = s.int_or("img_context_token_id", s.int_or("image_token_index", -1));
    cfg.image_start_token_id = s.int_or("img_start_token_id", -1);
    cfg.image_end_token_id = s.int_or("img_end_token_id", -1);
}

// Special ids: the LLM section first, then generation_config.json (which wins for stopping).
void read_special_ids(const json& top, const Section& s, const fs::path& root, ModelConfig& cfg) {
    const json& llm_json = cfg.architecture == "NemotronH_Nano_VL_V2"
                               ? top[s.has("llm_config") ? "llm_config" : "text_config"]
                               : top;
    if (llm_json.contains("bos_token_id")) {
        auto ids = id_list(llm_json["bos_token_id"], s.where + ".bos_token_id");
        if (!ids.empty()) cfg.bos_token_id = ids[0];
    }
    if (llm_json.contains("eos_token_id"))
        cfg.eos_token_ids = id_list(llm_json["eos_token_id"], s.where + ".eos_token_id");
    const fs::path gen_path = root / "generation_config.json";
    if (fs::exists(gen_path)) {
        const json gen = read_json(gen_path);
        if (gen.contains("eos_token_id"))
            cfg.eos_token_ids = id_list(gen["eos_token_id"], gen_path.string() + ".eos_token_id");
        if (gen.contains("bos_token_id")) {
            auto ids = id_list(gen["bos_token_id"], gen_path.string() + ".bos_token_id");
            if (!ids.empty()) cfg.bos_token_id = ids[0];
        }
    }
}

// preprocessor_config.json, when present, overrides the tiling and normalisation of a model with vision.
void read_preprocessor_config(const fs::path& root, ModelConfig& cfg) {
    const fs::path pre_path = root / "preprocessor_config.json";
    if (cfg.has_vision && fs::exists(pre_path)) {
        const json pre = read_json(pre_path);
        const Section ps{pre, pre_path.string()};
        cfg.image.max_tiles = ps.positive_or("max_num_tiles", cfg.image.max_tiles, kMaxTiles);
        cfg.image.use_thumbnail = ps.bool_or("use_thumbnail", cfg.image.use_thumbnail);
        cfg.image.norm_mean = ps.triple_or("image_mean", ps.triple_or("norm_mean", cfg.image.norm_mean));
        cfg.image.norm_std = ps.triple_or("image_std", ps.triple_or("norm_std", cfg.image.norm_std));
    }
}

}  // namespace

ModelConfig load_model_config(const std::string& dir) {
    const fs::path root(dir);
    const fs::path config_path = root / "config.json";
    if (!fs::exists(config_path))
        throw Error(ErrorKind::kIo, config_path.string() + ": not found (is '" + dir + "' a model folder?)");
    const json top = read_json(config_path);
    if (!top.is_object()) throw Error(ErrorKind::kFormat, config_path.string() + ": not a JSON object");
    const Section s{top, config_path.string()};

    ModelConfig cfg;
    cfg.dir = dir;
    if (top.contains("architectures") && top["architectures"].is_array() && !top["architectures"].empty()) {
        cfg.architecture =
            top["architectures"][0].is_string() ? top["architectures"][0].get<std::string>() : "";
    }
    if (cfg.architecture.empty()) cfg.architecture = s.str_or("model_type", "");
    if (cfg.architecture == "NemotronH_Nano_VL_V2") {
        parse_vl_config(top, s, cfg);
    } else if (cfg.architecture == "NemotronHForCausalLM" || cfg.architecture == "nemotron_h") {
        cfg.llm = parse_llm(Section{top, s.where});
    } else {
        throw Error(ErrorKind::kUnsupported,
                    config_path.string() + ".architectures: unsupported architecture '" + cfg.architecture +
                        "' (expected NemotronH_Nano_VL_V2 or NemotronHForCausalLM)");
    }
    read_special_ids(top, s, root, cfg);
    cfg.quant = read_quant_config(dir, top, cfg.llm_key);
    read_preprocessor_config(root, cfg);
    for (int64_t id : cfg.eos_token_ids) {
        if (id < 0 || id >= cfg.llm.vocab_size)
            throw Error(ErrorKind::kConfig,
                        dir + ": eos token id " + std::to_string(id) + " is outside the vocabulary");
    }
    return cfg;
}

}  // namespace surf::model
