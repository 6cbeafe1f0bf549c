// bench_cpu: the CPU backend's speed on this machine (all worker threads of kernels/cpu/parallel.cpp).
//
// Ops part (default, or with --ops): GFLOP/s of kernels::cpu::linear at LM- and ViT-like shapes
// (m = 1, 64, 512, 2048 rows; n, k between 192 and 1536), and the time of attention, the SSD scan, the
// causal conv, the norms and GELU at the shapes one agent step of a small model gives them.
//
// Engine part (--model DIR): one agent step on the CPU backend — an image (a PNG, or a synthetic 896×448
// screenshot: 8 tiles + thumbnail at 256-px tiles) plus N prompt tokens prefilled, then D tokens decoded
// greedily. Reported, median and best of --repeat runs: the vision tower (ViT + projector) alone, the
// language model's prefill (tok/s), its decode (tok/s), and the engine's generate() end to end (tiling,
// vision, prefill, sampling, decode).
//
// --make-model DIR writes a model with random weights into DIR, so the engine part has something
// realistic to run: with --config-from CKPT the config and tokenizer of CKPT (a checkpoint folder, weights
// not needed), else a surf-tiny-sized config on the tiny_fp32 fixture's tokenizer (make_model below).
//
//   bench_cpu [--ops] [--quick] [--make-model DIR [--config-from CKPT]] [--model DIR [--image PNG]
//             [--prompt-tokens 300] [--decode 60] [--repeat 3]]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "kernels/cpu/cpu_ops.h"
#include "model/checkpoint/config.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/weights.h"
#include "model/cpu/cpu_model.h"
#include "model/engine.h"
#include "model/vision/image.h"
#include "model/vision/image_tiling.h"

#ifndef SURF_SOURCE_DIR_FOR_BENCH
#define SURF_SOURCE_DIR_FOR_BENCH "."
#endif

namespace k = surf::kernels::cpu;
namespace fs = std::filesystem;
using namespace surf::model;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// Best time of fn over runs that together last at least `min_seconds` (at least 2 runs, the first a warm-up).
double best_seconds(const std::function<void()>& fn, double min_seconds) {
    fn();
    double best = 1e30, total = 0.0;
    int runs = 0;
    while (runs < 1 || total < min_seconds) {
        const auto t0 = Clock::now();
        fn();
        const double s = seconds_since(t0);
        best = std::min(best, s);
        total += s;
        ++runs;
    }
    return best;
}

std::vector<float> random_vector(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// ------------------------------------------------------------------------------------------------ ops

void bench_linear(bool quick) {
    struct Shape {
        int64_t n, k;
        const char* what;
    };
    const std::vector<Shape> shapes = {
        {256, 256, "LM o_proj / ViT-ish square"},
        {1168, 256, "LM Mamba in_proj"},
        {1024, 256, "LM MLP up"},
        {256, 1024, "LM MLP down"},
        {576, 192, "ViT qkv"},
        {768, 192, "ViT fc1"},
        {192, 768, "ViT fc2"},
        {1536, 384, "wide up"},
        {384, 1536, "wide down"},
        {1536, 1536, "large square"},
    };
    const std::vector<int64_t> rows = {1, 64, 512, 2048};
    std::mt19937 rng(1);
    std::printf("linear y[m,n] = x[m,k]·w[n,k]ᵀ + b, fp32, %d threads (GFLOP/s, best of runs)\n",
                k::worker_count());
    std::printf("| %-28s | %5s | %5s |", "shape", "n", "k");
    for (int64_t m : rows) std::printf(" m=%-6lld |", static_cast<long long>(m));
    std::printf("\n|------------------------------|-------|-------|");
    for (size_t i = 0; i < rows.size(); ++i) std::printf("----------|");
    std::printf("\n");
    for (const Shape& s : shapes) {
        const auto w = random_vector(static_cast<size_t>(s.n * s.k), rng);
        const auto b = random_vector(static_cast<size_t>(s.n), rng);
        std::printf("| %-28s | %5lld | %5lld |", s.what, static_cast<long long>(s.n),
                    static_cast<long long>(s.k));
        for (int64_t m : rows) {
            const auto x = random_vector(static_cast<size_t>(m * s.k), rng);
            std::vector<float> y(static_cast<size_t>(m * s.n));
            const double sec = best_seconds(
                [&] {
                    k::linear({x.data(), w.data(), b.data(), y.data(), m, s.n, s.k});
                },
                quick ? 0.02 : 0.2);
            std::printf(" %8.1f |", 2.0 * static_cast<double>(m * s.n * s.k) / sec / 1e9);
            std::fflush(stdout);
        }
        std::printf("\n");
    }
}

void op_row(const std::string& name, double sec) {
    std::printf("| %-62s | %9.3f |\n", name.c_str(), sec * 1e3);
}

void bench_attention_ops(std::mt19937& rng, double min_s) {
    {  // ViT self-attention of one 256-px tile: 256 patches + 4 prefix rows, width 192 = 3 heads × 64.
        const int64_t T = 260, H = 3, D = 64;
        const auto qkv = random_vector(static_cast<size_t>(T * 3 * H * D), rng);
        std::vector<float> out(static_cast<size_t>(T * H * D));
        k::AttentionParams p;
        p.q = qkv.data(), p.k = qkv.data() + H * D, p.v = qkv.data() + 2 * H * D, p.out = out.data();
        p.T = T, p.L = T, p.n_heads = H, p.n_kv_heads = H, p.head_dim = D;
        p.q_stride = 3 * H * D, p.kv_stride = 3 * H * D, p.causal = false;
        op_row("attention ViT tile: T=L=260, 3 heads × 64, bidirectional",
               best_seconds([&] { k::attention(p); }, min_s));
    }
    {  // LM prefill attention and one decode query against 900 cached tokens: 4 heads, 2 KV heads, 64.
        const int64_t T = 900, H = 4, KV = 2, D = 64;
        const auto q = random_vector(static_cast<size_t>(T * H * D), rng);
        const auto kk = random_vector(static_cast<size_t>(T * KV * D), rng),
                   v = random_vector(kk.size(), rng);
        std::vector<float> out(q.size());
        k::AttentionParams p;
        p.q = q.data(), p.k = kk.data(), p.v = v.data(), p.out = out.data();
        p.T = T, p.L = T, p.n_heads = H, p.n_kv_heads = KV, p.head_dim = D, p.causal = true;
        op_row("attention LM prefill: T=L=900, 4/2 heads × 64, causal",
               best_seconds([&] { k::attention(p); }, min_s));
        p.T = 1, p.q = q.data() + (T - 1) * H * D;
        op_row("attention LM decode: T=1, L=900", best_seconds([&] { k::attention(p); }, min_s));
    }
}

// Mamba-2 SSD and conv over a 900-token prefill: H=16, P=32, N=32, G=2, chunk 64.
void bench_mamba_ops(std::mt19937& rng, double min_s) {
    const int64_t T = 900, H = 16, P = 32, N = 32, G = 2, conv_dim = H * P + 2 * G * N;
    const auto xbc = random_vector(static_cast<size_t>(T * conv_dim), rng);
    const auto dt = random_vector(static_cast<size_t>(T * H), rng, 0.001f, 0.1f);
    const auto A = random_vector(H, rng, -8.0f, -1.0f), D = random_vector(H, rng);
    std::vector<float> state(static_cast<size_t>(H * P * N)), y(static_cast<size_t>(T * H * P));
    k::SsdParams s;
    s.x = xbc.data(), s.B = xbc.data() + H * P, s.C = xbc.data() + H * P + G * N, s.dt = dt.data();
    s.A = A.data(), s.D = D.data(), s.state = state.data(), s.y = y.data();
    s.T = T, s.H = H, s.P = P, s.G = G, s.N = N, s.x_stride = conv_dim, s.dt_stride = H,
    s.bc_stride = conv_dim;
    s.chunk = 64;
    op_row("ssd chunked: T=900, H=16, P=32, N=32, G=2, chunk 64", best_seconds([&] { k::ssd(s); }, min_s));
    s.T = 1, s.chunk = 0;
    op_row("ssd decode: T=1 (token recurrence)", best_seconds([&] { k::ssd(s); }, min_s));
    const auto w = random_vector(static_cast<size_t>(conv_dim * 4), rng), b = random_vector(conv_dim, rng);
    std::vector<float> cstate(static_cast<size_t>(conv_dim * 3)), out(static_cast<size_t>(T * conv_dim));
    k::CausalConv1dParams c{xbc.data(), w.data(), b.data(), cstate.data(), out.data(),
                            T,          conv_dim, 4,        conv_dim};
    op_row("causal conv1d + SiLU: T=900, 640 channels, K=4",
           best_seconds([&] { k::causal_conv1d(c); }, min_s));
    const auto z = random_vector(static_cast<size_t>(T * H * P), rng);
    k::GatedRmsNormParams g{y.data(), z.data(), w.data(), out.data(), T, H * P, H * P / G, H * P, 1e-5f};
    op_row("gated rmsnorm: 900 × 512, 2 groups", best_seconds([&] { k::gated_rmsnorm(g); }, min_s));
}

// Norms and GELU over the ViT's 9 tiles (2,340 rows × 192; fc1 output × 768) and the LM's 900 × 256.
void bench_norm_ops(std::mt19937& rng, double min_s) {
    const auto x = random_vector(2340 * 768, rng), w = random_vector(768, rng), b = random_vector(768, rng);
    std::vector<float> y(x.size()), res(x.begin(), x.begin() + 900 * 256);
    op_row("layernorm: 2340 × 192",
           best_seconds(
               [&] {
                   k::layernorm({x.data(), w.data(), b.data(), y.data(), 2340, 192, 1e-6f});
               },
               min_s));
    op_row("rmsnorm with residual add: 900 × 256",
           best_seconds(
               [&] {
                   k::rmsnorm({x.data(), res.data(), w.data(), y.data(), 900, 256, 1e-5f});
               },
               min_s));
    op_row("gelu (erf): 2340 × 768", best_seconds(
                                         [&] {
                                             std::copy(x.begin(), x.end(), y.begin());
                                             k::gelu_erf(y.data(), static_cast<int64_t>(y.size()));
                                         },
                                         min_s));
}

void bench_other_ops(bool quick) {
    std::mt19937 rng(2);
    const double min_s = quick ? 0.02 : 0.2;
    std::printf("\nother ops at one agent step's shapes (ms, best of runs)\n");
    std::printf("| %-62s | %9s |\n|%s|-----------|\n", "op", "ms", std::string(64, '-').c_str());
    bench_attention_ops(rng, min_s);
    bench_mamba_ops(rng, min_s);
    bench_norm_ops(rng, min_s);
}

// -------------------------------------------------------------------------------------- random model

// A surf-tiny-sized config.json and preprocessor_config.json in dir, derived from the tiny_fp32 fixture's
// (same schema and special-token ids): LM hidden 256 × 14 layers (6 Mamba-2 16 × 32 with d_state 32,
// 2 attention, 6 MLP), ViT 192 × 6 on 256-px tiles, up to 8 tiles + thumbnail.
void write_tiny_config(const fs::path& dir, const fs::path& fixture) {
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(fixture / "config.json"));
    const int tile = 256, vit = 192;
    auto& l = cfg["llm_config"];
    l["hidden_size"] = 256;
    l["hybrid_override_pattern"] = "M-M*-M-M-M*-M-";
    l["num_hidden_layers"] = 14;
    l["intermediate_size"] = 1024;
    l["num_attention_heads"] = 4;
    l["num_key_value_heads"] = 2;
    l["head_dim"] = 64;
    l["mamba_num_heads"] = 16;
    l["mamba_head_dim"] = 32;
    l["ssm_state_size"] = 32;
    l["n_groups"] = 2;
    l["chunk_size"] = 64;
    auto& v = cfg["vision_config"];
    v["hidden_size"] = vit;
    v["num_hidden_layers"] = 6;
    v["num_attention_heads"] = 3;
    v["intermediate_size"] = 4 * vit;
    v["max_img_size"] = tile;
    v["max_resolution"] = tile;
    v["preferred_resolution"] = {tile, tile};
    v["args"]["cpe_max_size"] = tile;
    v["args"]["input_size"] = tile;
    cfg["force_image_size"] = tile;
    cfg["vit_hidden_size"] = vit;
    cfg["projector_hidden_size"] = 1024;
    cfg["max_num_tiles"] = 8;
    std::ofstream(dir / "config.json") << cfg.dump(2) << "\n";
    nlohmann::json pre = nlohmann::json::parse(std::ifstream(fixture / "preprocessor_config.json"));
    pre["image_size"] = tile;
    pre["max_num_tiles"] = 8;
    std::ofstream(dir / "preprocessor_config.json") << pre.dump(2) << "\n";
}

// model.safetensors for dir's config: N(0, 0.02) matrices, unit norm weights, zero biases, A_log and
// dt_bias in Mamba's init ranges.
void write_random_weights(const fs::path& dir) {
    ModelConfig mc = load_model_config(dir.string());
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    std::vector<std::vector<float>> storage;
    std::vector<TensorToWrite> tensors;
    int64_t n_params = 0;
    for_each_weight(mc, [&](const WeightSpec& spec) {
        if (!spec.required) return;
        const std::vector<int64_t> shape = resolved_from_config(mc, spec, 4).shape;
        const std::string& name = spec.name;
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        std::vector<float> data(static_cast<size_t>(numel));
        using R = WeightRole;
        if (spec.role == R::kMambaALog) {
            for (float& x : data) x = std::log(1.0f + 15.0f * uniform(rng));
        } else if (spec.role == R::kMambaDtBias) {
            for (float& x : data) {
                const float dt =
                    std::exp(std::log(0.001f) + uniform(rng) * (std::log(0.1f) - std::log(0.001f)));
                x = dt + std::log(-std::expm1(-dt));  // inverse softplus
            }
        } else if (spec.role == R::kMambaD || spec.role == R::kProjNorm ||
                   (shape.size() == 1 && name.ends_with("weight"))) {
            std::fill(data.begin(), data.end(), 1.0f);
        } else if (name.ends_with("bias")) {
            std::fill(data.begin(), data.end(), 0.0f);
        } else {
            for (float& x : data) x = normal(rng);
        }
        n_params += numel;
        storage.push_back(std::move(data));
        tensors.push_back({name, surf::model::DType::kF32, shape, storage.back().data()});
    });
    write_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}});
    std::printf(
        "wrote %s: %lld parameters (random), LM %lld × %lld layers, ViT %lld × %lld on %lld-px tiles\n",
        dir.c_str(), static_cast<long long>(n_params), static_cast<long long>(mc.llm.hidden_size),
        static_cast<long long>(mc.llm.n_layers()), static_cast<long long>(mc.vision.hidden_size),
        static_cast<long long>(mc.vision.n_layers), static_cast<long long>(mc.image.tile_size));
}

// Writes a model with random weights into dir. With `config_from` it takes that folder's config.json,
// preprocessor config and tokenizer as they are (e.g. a checkpoint's config before its weights exist);
// without, a surf-tiny-sized config derived from the tiny_fp32 fixture (write_tiny_config).
void make_model(const fs::path& dir, const fs::path& config_from) {
    const fs::path fixture = fs::path(SURF_SOURCE_DIR_FOR_BENCH) / "tests/fixtures/golden/tiny_fp32";
    const fs::path source = config_from.empty() ? fixture : config_from;
    fs::create_directories(dir);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "config.json",
                          "preprocessor_config.json"}) {
        if (fs::exists(source / f)) fs::copy_file(source / f, dir / f, fs::copy_options::overwrite_existing);
    }
    if (config_from.empty()) write_tiny_config(dir, fixture);
    write_random_weights(dir);
}

// ------------------------------------------------------------------------------------------- engine

Image synthetic_screenshot(int width, int height) {
    Image img(width, height);
    std::mt19937 rng(3);
    for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) {
            uint8_t* p = img.at(x, y);
            const bool text = (y / 12) % 3 == 0 && (x / 7) % 5 != 0;
            p[0] = text ? static_cast<uint8_t>(rng() % 64) : static_cast<uint8_t>(200 + (x * 40) / width);
            p[1] = text ? static_cast<uint8_t>(rng() % 64) : static_cast<uint8_t>(210 + (y * 30) / height);
            p[2] = text ? static_cast<uint8_t>(rng() % 64) : 230;
        }
    }
    return img;
}

int argmax(const float* v, int64_t n) {
    return static_cast<int>(std::max_element(v, v + n) - v);
}

// Text tokens: random ids of the tokenizer's ordinary range (100 up), never an image token.
std::vector<int32_t> random_text_tokens(const std::string& dir, const ModelConfig& cfg, int prompt_tokens) {
    std::mt19937 rng(5);
    const int64_t vocab = std::min<int64_t>(cfg.llm.vocab_size, load_model_tokenizer(dir).vocab_size());
    std::vector<int32_t> text;
    while (static_cast<int>(text.size()) < prompt_tokens) {
        const int64_t id = 100 + static_cast<int64_t>(rng() % static_cast<uint32_t>(vocab - 100));
        if (id != cfg.image_context_token_id && id != cfg.image_start_token_id &&
            id != cfg.image_end_token_id)
            text.push_back(static_cast<int32_t>(id));
    }
    return text;
}

double best_of(const std::vector<double>& v) {
    return *std::min_element(v.begin(), v.end());
}

// The model directly: vision, LM prefill and LM decode, each timed alone, `repeat` times; then the table.
void bench_model_parts(const cpu::CpuModel& model, const Tensor& pixels, const std::vector<int32_t>& text,
                       int decode_tokens, int repeat) {
    const ModelConfig& cfg = model.config();
    std::vector<double> vision_s, prefill_s, decode_s;
    int64_t prefill_len = 0;
    for (int r = 0; r < repeat; ++r) {
        auto t0 = Clock::now();
        const Tensor embeds = model.encode_images(pixels);
        vision_s.push_back(seconds_since(t0));
        std::vector<int32_t> tokens;
        tokens.push_back(static_cast<int32_t>(cfg.image_start_token_id));
        tokens.insert(tokens.end(), static_cast<size_t>(embeds.dim(0)),
                      static_cast<int32_t>(cfg.image_context_token_id));
        tokens.push_back(static_cast<int32_t>(cfg.image_end_token_id));
        tokens.insert(tokens.end(), text.begin(), text.end());
        prefill_len = static_cast<int64_t>(tokens.size());
        cpu::SequenceState state = model.new_state();
        cpu::ForwardInput in;
        in.tokens = &tokens;
        in.image_embeds = &embeds;
        in.image_token_id = cfg.image_context_token_id;
        t0 = Clock::now();
        Tensor logits = model.forward(state, in);
        prefill_s.push_back(seconds_since(t0));
        t0 = Clock::now();
        for (int i = 0; i < decode_tokens; ++i) {
            std::vector<int32_t> one = {argmax(logits.ptr(), logits.dim(1))};
            cpu::ForwardInput d;
            d.tokens = &one;
            logits = model.forward(state, d);
        }
        decode_s.push_back(seconds_since(t0));
    }
    const double vis = median(vision_s), pre = median(prefill_s), dec = median(decode_s);
    std::printf("| %-44s | %9s | %9s | %10s |\n", "part", "median s", "best s", "tok/s");
    std::printf("|----------------------------------------------|-----------|-----------|------------|\n");
    std::printf("| %-44s | %9.3f | %9.3f | %10s |\n", "vision (ViT + projector)", vis, best_of(vision_s), "");
    std::printf("| %-44s | %9.3f | %9.3f | %10.1f |\n",
                ("LM prefill (" + std::to_string(prefill_len) + " tokens)").c_str(), pre, best_of(prefill_s),
                static_cast<double>(prefill_len) / pre);
    std::printf("| %-44s | %9.3f | %9.3f | %10.1f |\n",
                ("LM decode (" + std::to_string(decode_tokens) + " tokens)").c_str(), dec, best_of(decode_s),
                decode_tokens > 0 ? decode_tokens / dec : 0.0);
    std::vector<double> sums;
    for (size_t r = 0; r < vision_s.size(); ++r) sums.push_back(vision_s[r] + prefill_s[r] + decode_s[r]);
    std::printf("| %-44s | %9.3f | %9.3f | %10s |\n", "vision + prefill + decode", median(sums),
                best_of(sums), "");
}

// The engine end to end: tiling, vision, prefill, sampling and decode in one generate(), `repeat` times.
void bench_generate(const std::string& dir, const std::shared_ptr<Image>& image,
                    const std::vector<int32_t>& text, int decode_tokens, int repeat) {
    auto engine = open_cpu_engine(dir);
    std::vector<double> total_s;
    GenerateResult last;
    for (int r = 0; r < repeat; ++r) {
        const SessionId id = engine->open_session();
        GenerateOptions options;
        options.max_tokens = decode_tokens;
        options.ignore_eos = true;
        const auto t0 = Clock::now();
        last = engine->generate(id, {InputPart::of_image(image), InputPart::of_tokens(text)}, options);
        total_s.push_back(seconds_since(t0));
        engine->close_session(id);
    }
    std::printf("| %-44s | %9.3f | %9.3f | %10s |\n",
                ("engine generate() (" + std::to_string(last.prefill_tokens) + " in, " +
                 std::to_string(last.tokens.size()) + " out)")
                    .c_str(),
                median(total_s), best_of(total_s), "");
}

void bench_engine(const std::string& dir, const std::string& image_path, int prompt_tokens, int decode_tokens,
                  int repeat) {
    auto image =
        std::make_shared<Image>(image_path.empty() ? synthetic_screenshot(896, 448) : load_image(image_path));
    const auto model = cpu::CpuModel::load(dir);
    const ModelConfig& cfg = model->config();
    if (!cfg.has_vision)
        throw surf::Error(surf::ErrorKind::kUnsupported, dir + ": the model has no vision tower");
    const TiledImage tiles = tile_image(*image, tiling_config_from(cfg.image));
    Tensor pixels;
    pixels.shape = {tiles.plan.n_tiles, 3, tiles.tile_size, tiles.tile_size};
    pixels.data = tiles.pixels;
    const int64_t side = cfg.image.patches_per_side();
    const std::vector<int32_t> text = random_text_tokens(dir, cfg, prompt_tokens);

    std::printf(
        "\nengine step on %s: image %dx%d → %d tiles of %d px (%lld ViT tokens each), %d image tokens + "
        "%d text tokens, %d decode tokens, %d threads, median of %d\n",
        dir.c_str(), image->width, image->height, tiles.plan.n_tiles, tiles.tile_size,
        static_cast<long long>(side * side + cfg.vision.n_prefix), tiles.plan.n_image_tokens, prompt_tokens,
        decode_tokens, k::worker_count(), repeat);
    bench_model_parts(*model, pixels, text, decode_tokens, repeat);
    bench_generate(dir, image, text, decode_tokens, repeat);
}

void usage() {
    std::fprintf(stderr,
                 "usage: bench_cpu [--ops] [--quick] [--make-model DIR [--config-from CKPT]] [--model DIR "
                 "[--image PNG] [--prompt-tokens 300] [--decode 60] [--repeat 3]]\n");
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_dir, image_path, make_dir, config_from;
    int prompt_tokens = 300, decode_tokens = 60, repeat = 3;
    bool ops = false, quick = false;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) {
                usage();
                std::exit(2);
            }
            return argv[++i];
        };
        if (flag == "--help" || flag == "-h") {
            usage();
            return 0;
        }
        if (flag == "--ops")
            ops = true;
        else if (flag == "--quick")
            quick = true;
        else if (flag == "--model")
            model_dir = value();
        else if (flag == "--image")
            image_path = value();
        else if (flag == "--make-model")
            make_dir = value();
        else if (flag == "--config-from")
            config_from = value();
        else if (flag == "--prompt-tokens")
            prompt_tokens = std::atoi(value());
        else if (flag == "--decode")
            decode_tokens = std::atoi(value());
        else if (flag == "--repeat")
            repeat = std::max(1, std::atoi(value()));
        else {
            usage();
            return 2;
        }
    }
    try {
        if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {  // other work on the machine skews the timings
            char line[128] = {};
            if (std::fgets(line, sizeof line, f)) std::printf("bench_cpu: load average %s", line);
            std::fclose(f);
        }
        if (!make_dir.empty()) make_model(make_dir, config_from);
        if (ops || (model_dir.empty() && make_dir.empty())) {
            bench_linear(quick);
            bench_other_ops(quick);
        }
        if (!model_dir.empty()) bench_engine(model_dir, image_path, prompt_tokens, decode_tokens, repeat);
    } catch (const surf::Error& e) {
        std::fprintf(stderr, "bench_cpu: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cpu: %s\n", e.what());
        return 1;
    }
    return 0;
}
