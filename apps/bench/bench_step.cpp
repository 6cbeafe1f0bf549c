// bench_step: where the GPU time of one engine step goes, op by op, at the Holotron-12B shapes (random
// weights drawn on the GPU from the config; KV contents are whatever the pool holds: timings do not
// depend on values). Cases, each timed over warm-up + reps:
//   vision  : one vision-tower batch of T tiles (the engine's per-step batch)
//   prefill : P prompt tokens in S sequences at a context of K tokens
//   decode  : B decode rows at a context of K tokens (also as a whole step from its CUDA graph)
//   mixed   : the decode rows and the prefill chunk in one step (what the engine runs while prefilling)
// Per op: milliseconds per step (CUDA events around each op, so small ops carry a few µs of event cost),
// share of the step, and TFLOP/s where the op's FLOPs are known; next to an 8192³ bf16 GEMM ceiling and the
// device-to-device copy bandwidth measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#ifdef SURF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "apps/bench/bench_ceilings.h"
#include "apps/bench/bench_flags.h"
#include "base/error.h"
#include "model/checkpoint/config.h"
#include "model/cuda/gpu_model.h"

using namespace surf::model;
using namespace surf::model::cuda;

namespace {

struct Options {
    std::string config_dir = std::string(SURF_SOURCE_DIR_FOR_BENCH) + "/tests/fixtures/holotron_12b";
    int64_t tiles = 24, prefill_tokens = 4096, prefill_seqs = 4, decode_rows = 100, context = 5000;
    int reps = 5;
    bool bf16_state = false;
    bool autotune = true;
    int vision_sms = 0;
    bool vision_priority = false;  // the vision stream at the device's highest priority
    bool attention_splits = true;  // split-KV prefill attention when the blocks leave SMs idle
    int attention_wgmma = -1, vit_attention_wgmma = -1;  // GpuLimits::*attention_wgmma_keys; -1 = the default
    int ssm_replay = -1;                                 // GpuLimits::ssm_replay_window; -1 = the default
    int state_split = -1;                                // GpuLimits::ssm_state_split; -1 = the default
    bool nano = false;  // decode rows and the prefill chunk as two steps of two models on two streams
    int nano_prefill_sms = 0;
    bool nano_decode_priority = false;
    bool gemm_wgmma = false;  // GpuLimits::gemm_wgmma: our Hopper GEMM timed beside cuBLASLt's candidates
    bool gemm_wgmma_relu2 = false;  // GpuLimits::gemm_wgmma_relu2: the large ReLU² GEMMs on it, fused
    int gemv_k_split = 0;           // GpuLimits::small_m_k_split
    std::string quantize = "none";  // GpuLimits::quantize: none | fp8 (language-model linear layers in E4M3)
    int vit_fp8 = -1;               // GpuLimits::vit_fp8; -1 = the default
    int pdl = -1;  // GpuLimits::programmatic_launch (also what the decode graphs are captured with); -1 = the
                   // default
};

constexpr const char* kUsage =
    "usage: bench_step [--config DIR] [--tiles 24] [--prefill 4096] [--prefill-seqs 4] "
    "[--decode 100] [--context 5000]\n"
    "                  [--reps 5] [--bf16-state] [--no-autotune] [--vision-sms N] "
    "[--vision-priority] [--no-attention-splits]\n"
    "                  [--attention-wgmma 0|64|128] [--vit-attention-wgmma "
    "0|64|128|208] [--ssm-replay 0|2..32] [--state-split 0|1]\n"
    "                  [--nano [--nano-prefill-sms N] [--nano-decode-priority]] "
    "[--gemm-wgmma] [--gemm-wgmma-relu2] [--pdl 0|1]\n"
    "                  [--gemv-k-split 0|1|2|4|8] [--quantize none|fp8] [--vit-fp8 0|1]\n";

std::vector<surf::bench::Flag> flag_table(Options& o) {
    using namespace surf::bench;
    return {text_flag("--config", o.config_dir),
            int64_flag("--tiles", o.tiles),
            int64_flag("--prefill", o.prefill_tokens),
            int64_flag("--prefill-seqs", o.prefill_seqs),
            int64_flag("--decode", o.decode_rows),
            int64_flag("--context", o.context),
            int_flag("--reps", o.reps),
            switch_flag("--bf16-state", o.bf16_state, true),
            switch_flag("--no-autotune", o.autotune, false),
            int_flag("--vision-sms", o.vision_sms),
            switch_flag("--vision-priority", o.vision_priority, true),
            switch_flag("--no-attention-splits", o.attention_splits, false),
            int_flag("--attention-wgmma", o.attention_wgmma),
            int_flag("--vit-attention-wgmma", o.vit_attention_wgmma),
            int_flag("--ssm-replay", o.ssm_replay),
            int_flag("--state-split", o.state_split),
            switch_flag("--nano", o.nano, true),
            int_flag("--nano-prefill-sms", o.nano_prefill_sms),
            switch_flag("--nano-decode-priority", o.nano_decode_priority, true),
            switch_flag("--gemm-wgmma", o.gemm_wgmma, true),
            switch_flag("--gemm-wgmma-relu2", o.gemm_wgmma_relu2, true),
            int_flag("--pdl", o.pdl),
            int_flag("--gemv-k-split", o.gemv_k_split),
            text_flag("--quantize", o.quantize),
            int_flag("--vit-fp8", o.vit_fp8)};
}

// Refuses values outside what the knobs take (a message on stderr, exit status 2).
void check_options(const Options& o) {
    for (const auto& [flag, keys] : {std::pair<const char*, int>{"--attention-wgmma", o.attention_wgmma},
                                     {"--vit-attention-wgmma", o.vit_attention_wgmma}}) {
        if (keys != -1 && !surf::kernels::cuda::valid_wgmma_key_tile(keys)) {
            std::fprintf(stderr, "bench_step: %s takes 0, 64, 128 or 208, got %d\n", flag, keys);
            std::exit(2);
        }
    }
    if (o.gemv_k_split != 0 && o.gemv_k_split != 1 && o.gemv_k_split != 2 && o.gemv_k_split != 4 &&
        o.gemv_k_split != 8) {
        std::fprintf(stderr, "bench_step: --gemv-k-split takes 0 (automatic), 1, 2, 4 or 8, got %d\n",
                     o.gemv_k_split);
        std::exit(2);
    }
    if (o.quantize != "none" && o.quantize != "fp8") {
        std::fprintf(stderr, "bench_step: --quantize takes none or fp8, got %s\n", o.quantize.c_str());
        std::exit(2);
    }
    if (o.vit_fp8 < -1 || o.vit_fp8 > 1) {
        std::fprintf(stderr, "bench_step: --vit-fp8 takes 0 or 1, got %d\n", o.vit_fp8);
        std::exit(2);
    }
    if (o.pdl != -1 && o.pdl != 0 && o.pdl != 1) {
        std::fprintf(stderr, "bench_step: --pdl takes 0 or 1, got %d\n", o.pdl);
        std::exit(2);
    }
    if (o.state_split < -1 || o.state_split > 1) {
        std::fprintf(stderr, "bench_step: --state-split takes 0 or 1, got %d\n", o.state_split);
        std::exit(2);
    }
    if (o.ssm_replay != -1 && o.ssm_replay != 0 && (o.ssm_replay < 2 || o.ssm_replay > 32)) {
        std::fprintf(stderr, "bench_step: --ssm-replay takes 0 (off) or 2..32, got %d\n", o.ssm_replay);
        std::exit(2);
    }
    if (o.vision_sms < 0 || o.nano_prefill_sms < 0) {
        std::fprintf(stderr, "bench_step: --%s %d is out of range\n",
                     o.vision_sms < 0 ? "vision-sms" : "nano-prefill-sms",
                     o.vision_sms < 0 ? o.vision_sms : o.nano_prefill_sms);
        std::exit(2);
    }
}

Options parse(int argc, char** argv) {
    Options o;
    surf::bench::parse_flags(argc, argv, flag_table(o), "bench_step", kUsage);
    check_options(o);
    return o;
}

double elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

// FLOPs per op label for one step (GEMMs and attention), from the shapes.
std::map<std::string, double> op_flops(const ModelConfig& cfg, int64_t tokens, int64_t logit_rows,
                                       double attn_prefill_pairs, int64_t tiles) {
    const LlmConfig& c = cfg.llm;
    const double n = static_cast<double>(tokens), d = static_cast<double>(c.hidden_size);
    const double nm = static_cast<double>(c.count(LayerKind::kMamba2)),
                 na = static_cast<double>(c.count(LayerKind::kAttention));
    const double nl = static_cast<double>(c.count(LayerKind::kMlp));
    std::map<std::string, double> f;
    f["mamba.in_proj"] = 2 * n * d * c.in_proj_dim() * nm;
    f["mamba.out_proj"] = 2 * n * c.d_inner() * d * nm;
    f["attn.qkv"] = 2 * n * d * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim * na;
    f["attn.o_proj"] = 2 * n * c.n_heads * c.head_dim * d * na;
    f["attn.prefill"] = 4 * attn_prefill_pairs * c.n_heads * c.head_dim * na;
    f["mlp.up_relu2"] = f["mlp.down"] = 2 * n * d * c.intermediate_size * nl;
    f["logits"] = 2.0 * logit_rows * d * c.vocab_size;
    if (tiles > 0 && cfg.has_vision) {
        const double side = static_cast<double>(cfg.image.patches_per_side());
        const double w = static_cast<double>(cfg.vision.hidden_size),
                     L = static_cast<double>(cfg.vision.n_layers);
        const double tok = side * side + std::max<int64_t>(cfg.vision.n_prefix, 0), rows = tok * tiles;
        f["vit.qkv"] = 2 * rows * w * 3 * w * L;
        f["vit.proj"] = 2 * rows * w * w * L;
        f["vit.fc1"] = f["vit.fc2"] = 2 * rows * w * cfg.vision.intermediate_size * L;
        f["vit.attention"] = 4.0 * tiles * tok * tok * w * L;
    }
    return f;
}

void print_profile(const char* title, const std::vector<std::pair<std::string, double>>& ops, int reps,
                   const std::map<std::string, double>& flops, double whole_ms) {
    double total = 0;
    for (const auto& [name, ms] : ops) total += ms / reps;
    std::printf(
        "\n### %s: %.2f ms per step with per-op events, %.2f ms without\n\n| op | ms | share | TFLOP/s "
        "|\n|---|---|---|---|\n",
        title, total, whole_ms);
    for (const auto& [name, ms] : ops) {
        const double per = ms / reps;
        auto f = flops.find(name);
        if (f != flops.end() && f->second > 0) {
            std::printf("| %s | %.3f | %.1f%% | %.0f |\n", name.c_str(), per, 100 * per / total,
                        f->second / (per * 1e-3) / 1e12);
        } else {
            std::printf("| %s | %.3f | %.1f%% | |\n", name.c_str(), per, 100 * per / total);
        }
    }
    std::fflush(stdout);
}

// Warm-up runs: graph capture happens on a shape's second run, GEMM tuning of shapes over 128 rows on
// their third (kernels/cuda/ops.h), so neither lands in a timed run.
constexpr int kWarmups = 3;

// GpuLimits sized for the cases of `o` (pages_per_seq pages per sequence), with the knobs `o` sets.
GpuLimits limits_for(const Options& o, const ModelConfig& cfg, int64_t pages_per_seq) {
    const int64_t n_seqs = o.decode_rows + o.prefill_seqs;
    GpuLimits L;
    L.max_tokens = o.prefill_tokens + o.decode_rows + 8;
    L.max_seqs = n_seqs + 4, L.max_slots = n_seqs + 4, L.max_logit_rows = n_seqs + 4;
    L.page_size = 16, L.kv_pages = n_seqs * pages_per_seq, L.max_context = pages_per_seq * 16;
    L.max_tiles = std::max<int64_t>(o.tiles, 1),
    L.max_image_rows = std::max<int64_t>(o.tiles, 1) * cfg.image.tokens_per_tile();
    L.ssm_state = o.bf16_state ? surf::kernels::cuda::DType::kBF16 : surf::kernels::cuda::DType::kF32;
    L.autotune_gemms = o.autotune;
    L.gemm_wgmma = o.gemm_wgmma;
    L.gemm_wgmma_relu2 = o.gemm_wgmma_relu2;
    if (o.pdl >= 0) L.programmatic_launch = o.pdl == 1;
    L.small_m_k_split = o.gemv_k_split;
    L.vision_gemm_sms = o.vision_sms;
    L.lm_stream_priority = o.nano && o.nano_decode_priority;
    L.vision_stream_priority = o.vision_priority;
    L.attention_splits = o.attention_splits;
    if (o.attention_wgmma >= 0) L.attention_wgmma_keys = o.attention_wgmma;
    if (o.vit_attention_wgmma >= 0) L.vit_attention_wgmma_keys = o.vit_attention_wgmma;
    if (o.ssm_replay >= 0) L.ssm_replay_window = o.ssm_replay;
    if (o.state_split >= 0) L.ssm_state_split = o.state_split == 1;
    if (o.quantize == "fp8") L.quantize = Quantize::kFp8;
    if (o.vit_fp8 >= 0) L.vit_fp8 = o.vit_fp8 == 1;
    return L;
}

// One run of the benchmark: the model, the steps of each case, and the timing helpers the cases share.
// The cases run in main's order; later ones read the times earlier ones measured.
struct StepBench {
    const Options& o;
    const ModelConfig& cfg;
    GpuLimits L;
    std::unique_ptr<GpuModel> model;
    int64_t pages_per_seq = 0, n_seqs = 0;
    bool split = false;
    double copy_bw = 0;
    std::mt19937_64 rng{11};
    std::vector<SeqStep> decode, prefill, mixed;
    double pairs = 0;  // the prefill's (query, key) pairs of attention
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    std::vector<float> pixels;
    std::vector<ImageJob> jobs;
    double vision_ms = 0, decode_ms = 0, mixed_ms = 0;

    StepBench(const Options& options, const ModelConfig& config) : o(options), cfg(config) {}

    // The model with random weights, the header line, the decode and prefill steps, the events.
    void prepare() {
        cudaDeviceProp prop{};
        SURF_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        const double ceiling = surf::bench::gemm_ceiling() / 1e12;
        copy_bw = surf::bench::copy_bandwidth();
        pages_per_seq = (o.context + o.prefill_tokens + 64 + 15) / 16;
        n_seqs = o.decode_rows + o.prefill_seqs;
        L = limits_for(o, cfg, pages_per_seq);
        split = L.state_split_applies();
        model = GpuModel::random(cfg, L, 7);
        // The attention pair's split as serving measures it in its warm-up
        // (GpuLimits::attention_green_decode_sms).
        model->calibrate_attention_split(o.prefill_tokens + o.decode_rows);
        std::printf(
            "# bench_step on %s (%d SMs): bf16 GEMM ceiling %.0f TFLOP/s (8192^3), copy bandwidth %.0f GB/s "
            "(read+write); SSM state "
            "%s, replay window %d; weights %s; %d reps per case\n",
            prop.name, prop.multiProcessorCount, ceiling, copy_bw / 1e9,
            o.bf16_state ? "bf16"
            : split      ? "fp32 (two 16-bit planes)"
                         : "fp32",
            L.ssm_replay_window,
            L.quantize == Quantize::kFp8 ? (L.vit_fp8 ? "FP8 (language model and vision tower)"
                                                      : "FP8 (language model; vision tower bf16)")
                                         : "bf16",
            o.reps);
        if (const std::string split_report = model->attention_split_report(); !split_report.empty())
            std::printf("# %s\n", split_report.c_str());
        build_steps();
        SURF_CUDA_CHECK(cudaEventCreate(&e0));
        SURF_CUDA_CHECK(cudaEventCreate(&e1));
    }

    int32_t token() { return static_cast<int32_t>(rng() % static_cast<uint64_t>(cfg.llm.vocab_size)); }

    std::vector<int32_t> pages_of(int64_t seq) const {
        std::vector<int32_t> p(static_cast<size_t>(pages_per_seq));
        for (int64_t i = 0; i < pages_per_seq; ++i) p[i] = static_cast<int32_t>(seq * pages_per_seq + i);
        return p;
    }

    void build_steps() {
        for (int64_t i = 0; i < o.decode_rows; ++i) {
            SeqStep s;
            s.slot = static_cast<int32_t>(i), s.past = o.context, s.tokens = {token()}, s.pages = pages_of(i);
            decode.push_back(s);
        }
        for (int64_t i = 0; i < (o.prefill_tokens > 0 ? o.prefill_seqs : 0);
             ++i) {  // --prefill 0: no prefill or mixed case
            SeqStep s;
            s.slot = static_cast<int32_t>(o.decode_rows + i), s.past = o.context,
            s.pages = pages_of(o.decode_rows + i);
            const int64_t n = o.prefill_tokens / o.prefill_seqs;
            for (int64_t t = 0; t < n; ++t) s.tokens.push_back(token());
            pairs += static_cast<double>(n) * (o.context + (n + 1) / 2.0);
            prefill.push_back(s);
        }
        // With a replay window K the decode rows are staggered as in serving: row i starts with i % K pending
        // tokens (K − 1 steps of the rows that still need one), so that every timed step folds about 1 / K of
        // its rows. Lockstep rows would fold all together every K-th step.
        for (int64_t r = 0; r + 1 < L.ssm_replay_window; ++r) {
            std::vector<SeqStep> some;
            for (int64_t i = 0; i < o.decode_rows; ++i) {
                if (i % L.ssm_replay_window > r) some.push_back(decode[i]);
            }
            if (!some.empty()) model->forward(some, 0);
        }
        mixed = decode;
        mixed.insert(mixed.end(), prefill.begin(), prefill.end());
    }

    // Milliseconds per run of `run` on `stream` over the reps, after the warm-ups.
    double whole(const std::function<void()>& run, cudaStream_t stream) {
        for (int w = 0; w < kWarmups; ++w) run();
        SURF_CUDA_CHECK(cudaStreamSynchronize(stream));
        SURF_CUDA_CHECK(cudaEventRecord(e0, stream));
        for (int r = 0; r < o.reps; ++r) run();
        SURF_CUDA_CHECK(cudaEventRecord(e1, stream));
        SURF_CUDA_CHECK(cudaEventSynchronize(e1));
        return elapsed_ms(e0, e1) / o.reps;
    }

    // whole() with the step knobs of `knobs` (an A/B of one GpuLimits switch), the defaults L restored after.
    double whole_with(const GpuLimits& knobs, const std::function<void()>& run, cudaStream_t stream) {
        model->set_step_options(knobs);
        const double ms = whole(run, stream);
        model->set_step_options(L);
        return ms;
    }

    // Per-op milliseconds summed over the reps, after the warm-ups.
    std::vector<std::pair<std::string, double>> profile(const std::function<void()>& run) {
        model->op_timer().enable(true);
        for (int w = 0; w < kWarmups; ++w) run();
        model->op_timer().collect();
        for (int r = 0; r < o.reps; ++r) run();
        auto ops = model->op_timer().collect();
        model->op_timer().enable(false);
        return ops;
    }

    // Wall milliseconds per run of work issued on several streams, device synchronised around the reps.
    double wall_ms(const std::function<void()>& run, int warmups) {
        for (int w = 0; w < warmups; ++w) run();
        SURF_CUDA_CHECK(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < o.reps; ++r) run();
        SURF_CUDA_CHECK(cudaDeviceSynchronize());
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
               o.reps;
    }

    void run_vision() {
        if (!(o.tiles > 0 && cfg.has_vision)) return;
        const int64_t S = cfg.image.tile_size;
        pixels.resize(static_cast<size_t>(o.tiles * 3 * S * S));
        std::normal_distribution<float> nd;
        for (float& v : pixels) v = nd(rng);
        for (int64_t t = 0; t < o.tiles; t += 3) {
            const int64_t n = std::min<int64_t>(3, o.tiles - t);
            jobs.push_back({pixels.data() + t * 3 * S * S, n, t * cfg.image.tokens_per_tile()});
        }
        auto run = [&] { model->encode_images(jobs); };
        const auto ops = profile(run);
        const double ms = whole(run, model->vision_stream());
        vision_ms = ms;
        char title[128];
        std::snprintf(title, sizeof title, "vision batch: %lld tiles (%lld images)", (long long)o.tiles,
                      (long long)jobs.size());
        print_profile(title, ops, o.reps, op_flops(cfg, 0, 0, 0, o.tiles), ms);
        vision_variants(run, ms);
    }

    // The vision pass with each other ViT attention kernel, warp specialization and GELU placement.
    void vision_variants(const std::function<void()>& run, double ms) {
        // The same pass with the ViT attention on each other kernel: mma.sync at 16 / 32 query rows per
        // warp (GpuLimits::attention_rows_per_warp, wgmma off) and wgmma at key tiles of 64 / 128 / 208
        // (GpuLimits::vit_attention_wgmma_keys).
        std::printf("\n");
        for (const auto& [rows, keys] :
             {std::pair{16, 0}, std::pair{32, 0}, std::pair{0, 64}, std::pair{0, 128}, std::pair{0, 208}}) {
            const bool current =
                keys ? keys == L.vit_attention_wgmma_keys
                     : L.vit_attention_wgmma_keys == 0 && rows == (L.attention_rows_per_warp == 32 ? 32 : 16);
            if (current) continue;
            GpuLimits other = L;
            other.vit_attention_wgmma_keys = keys;
            if (!keys) other.attention_rows_per_warp = rows;
            const double ms_other = whole_with(other, run, model->vision_stream());
            std::printf("vision batch with the attention on %s %d: %.2f ms (%+.1f%% against %.2f)\n",
                        keys ? "wgmma, key tile" : "mma.sync, rows per warp", keys ? keys : rows, ms_other,
                        100.0 * (ms_other - ms) / ms, ms);
        }
        // The same pass with the ViT attention's wgmma blocks warp-specialized the other way round
        // (GpuLimits::vit_attention_wgmma_warp_specialized).
        if (L.vit_attention_wgmma_keys) {
            GpuLimits ws_other = L;
            ws_other.vit_attention_wgmma_warp_specialized = !L.vit_attention_wgmma_warp_specialized;
            const double ms_ws = whole_with(ws_other, run, model->vision_stream());
            std::printf(
                "vision batch with the wgmma attention %s: %.2f ms (%+.1f%% against %.2f)\n",
                ws_other.vit_attention_wgmma_warp_specialized ? "warp-specialized" : "not warp-specialized",
                ms_ws, 100.0 * (ms_ws - ms) / ms, ms);
        }
        // The same pass with the GELU as its own exact-erf pass instead of fc1's epilogue
        // (vit_gelu_in_gemm).
        GpuLimits split_gelu = L;
        split_gelu.vit_gelu_in_gemm = !L.vit_gelu_in_gemm;
        const double ms_gelu = whole_with(split_gelu, run, model->vision_stream());
        std::printf("vision batch with the GELU %s: %.2f ms (%+.1f%% against %.2f with it %s)\n",
                    split_gelu.vit_gelu_in_gemm ? "in fc1's epilogue" : "as its own pass", ms_gelu,
                    100.0 * (ms_gelu - ms) / ms, ms,
                    L.vit_gelu_in_gemm ? "in fc1's epilogue" : "as its own pass");
    }

    void run_prefill() {
        if (prefill.empty()) return;
        const auto ops = profile([&] { model->forward(prefill, 0); });
        const double ms = whole([&] { model->forward(prefill, 0); }, model->stream());
        char title[160];
        std::snprintf(title, sizeof title, "prefill: %lld tokens in %lld sequences at context %lld",
                      (long long)o.prefill_tokens, (long long)o.prefill_seqs, (long long)o.context);
        print_profile(title, ops, o.reps, op_flops(cfg, o.prefill_tokens, o.prefill_seqs, pairs, 0), ms);
        // The SSD scan's wgmma kernel the other way round (GpuLimits::ssd_wgmma; prefill steps run it
        // where it applies).
        GpuLimits scan_other = L;
        scan_other.ssd_wgmma = !L.ssd_wgmma;
        const double scan_ms = whole_with(
            scan_other, [&] { model->forward(prefill, 0); }, model->stream());
        std::printf("\nprefill step with the SSD scan's wgmma kernel %s: %.2f ms (%+.1f%% against %.2f)\n",
                    scan_other.ssd_wgmma ? "on" : "off", scan_ms, 100.0 * (scan_ms - ms) / ms, ms);
    }

    void run_decode() {
        if (o.decode_rows <= 0) return;
        const auto ops = profile([&] { model->forward(decode, 0); });
        const double graph_ms = whole([&] { model->forward(decode, 0); }, model->stream());
        decode_ms = graph_ms;
        char title[160];
        std::snprintf(title, sizeof title,
                      "decode: %lld rows at context %lld (whole step from its CUDA graph)",
                      (long long)o.decode_rows, (long long)o.context);
        print_profile(title, ops, o.reps, op_flops(cfg, o.decode_rows, o.decode_rows, 0, 0), graph_ms);
        // The decode step against its bandwidth roofline (spec/serving.md §4): weights once, each row's
        // state read and written (with replay: read, written every K-th step, plus the replay entries),
        // each row's KV (context + the new token) read.
        const double rows = static_cast<double>(o.decode_rows),
                     ctx = rows * static_cast<double>(o.context + 1);
        const double bytes =
            surf::bench::roofline(cfg, o.bf16_state, L.ssm_replay_window, split, o.quantize == "fp8")
                .step_bytes(rows, ctx);
        std::printf(
            "\ndecode step vs roofline: %.1f GB in %.2f ms = %.0f GB/s = %.1f%% of the copy bandwidth",
            bytes / 1e9, graph_ms, bytes / (graph_ms * 1e-3) / 1e9,
            100.0 * bytes / (graph_ms * 1e-3) / copy_bw);
        if (L.ssm_replay_window > 0) {
            const double stock =
                surf::bench::roofline(cfg, o.bf16_state, 0, false, o.quantize == "fp8").step_bytes(rows, ctx);
            std::printf(
                " (replay window %d; §4's stock formula, state read and written every step: %.1f GB = "
                "%.1f%%)",
                L.ssm_replay_window, stock / 1e9, 100.0 * stock / (graph_ms * 1e-3) / copy_bw);
        }
        std::printf("\n");
    }

    void run_mixed() {
        if (!(o.decode_rows > 0 && !prefill.empty())) return;
        char title[160];
        const auto mixed_ops = profile([&] { model->forward(mixed, 0); });
        mixed_ms = whole([&] { model->forward(mixed, 0); }, model->stream());
        std::snprintf(title, sizeof title, "mixed: %lld decode rows + %lld prefill tokens, context %lld",
                      (long long)o.decode_rows, (long long)o.prefill_tokens, (long long)o.context);
        print_profile(title, mixed_ops, o.reps,
                      op_flops(cfg, o.decode_rows + o.prefill_tokens, n_seqs, pairs, 0), mixed_ms);
        mixed_branch_table();
        mixed_flips();
        std::fflush(stdout);
    }

    // The prefill rows' branch of each layer on a second stream beside the decode rows' (GpuLimits::
    // overlap_*_branches), with the SSD scan's head-dim slices and the prefill attention's split-KV as the
    // other knobs that decide how the two branches share SMs. Whole steps, no per-op events.
    void mixed_branch_table() {
        struct Variant {
            bool mamba, attention;
            int ssd_split, ssu_split;
            bool attention_splits;
            int rows_per_warp = 16;  // prefill attention
        };
        std::printf(
            "\n### mixed step, prefill branch on a second stream (whole step, no per-op events; auto = "
            "the engine's rule: one SSD "
            "slice and no split-KV where that branch overlaps)\n\n| Mamba branches | attention "
            "branches | SSD slices | SSU row slices | prefill split-KV | attention rows/warp | ms | vs "
            "serial |\n|---|---|---|---|---|---|---|---|\n");
        double serial_ms = 0;
        auto slices = [](int n) { return n ? std::to_string(n) : std::string("auto"); };
        auto mixed_step = [&] { model->forward(mixed, 0); };
        for (const Variant& v : {Variant{false, false, 0, 1, true}, Variant{false, false, 0, 0, true},
                                 Variant{true, false, 1, 1, true}, Variant{true, false, 1, 0, true},
                                 Variant{true, false, 2, 0, true}, Variant{false, true, 0, 0, false},
                                 Variant{true, true, 1, 1, false}, Variant{true, true, 1, 0, false},
                                 Variant{true, true, 1, 4, false}, Variant{true, true, 0, 0, true, 32},
                                 Variant{false, false, 0, 0, true, 32}}) {
            GpuLimits knobs = L;
            knobs.overlap_mamba_branches = v.mamba, knobs.overlap_attention_branches = v.attention;
            knobs.ssd_split = v.ssd_split, knobs.ssu_split = v.ssu_split,
            knobs.attention_rows_per_warp = v.rows_per_warp;
            knobs.attention_splits = v.attention_splits && o.attention_splits;
            const double ms = whole_with(knobs, mixed_step, model->stream());
            if (serial_ms == 0) serial_ms = ms;
            std::printf("| %s | %s | %s | %s | %s | %d | %.2f | %+.1f%% |\n", v.mamba ? "overlap" : "serial",
                        v.attention ? "overlap" : "serial", slices(v.ssd_split).c_str(),
                        slices(v.ssu_split).c_str(),
                        v.attention_splits && o.attention_splits ? "auto" : "off", v.rows_per_warp, ms,
                        100.0 * (ms - serial_ms) / serial_ms);
        }
    }

    // One GpuLimits switch the other way round: the whole mixed step against mixed_ms.
    void flipped(const std::function<void(GpuLimits&)>& flip, const char* what) {
        GpuLimits other = L;
        flip(other);
        const double ms = whole_with(
            other, [&] { model->forward(mixed, 0); }, model->stream());
        std::printf("\nmixed step with %s: %.2f ms (%+.1f%% against %.2f)\n", what, ms,
                    100.0 * (ms - mixed_ms) / mixed_ms, mixed_ms);
    }

    void mixed_flips() {
        // The state update waiting for the prefill conv or not (ssu_after_prefill_conv), its staging
        // (ssu_bulk_stage: one bulk copy a block, or cp.async).
        flipped([](GpuLimits& g) { g.ssu_after_prefill_conv = !g.ssu_after_prefill_conv; },
                L.ssu_after_prefill_conv ? "the state update not waiting for the prefill conv"
                                         : "the state update after the prefill conv");
        flipped([](GpuLimits& g) { g.ssu_bulk_stage = !g.ssu_bulk_stage; },
                L.ssu_bulk_stage ? "the state update staged by cp.async (not bulk copies)"
                                 : "the state update staged by bulk copies (not cp.async)");
        // The language model's wgmma prefill attention warp-specialized the other way round
        // (attention_wgmma_warp_specialized), the kernel it runs on beside decode rows
        // (attention_ws_beside_decode), the decode attention's pipelining (decode_attention_pipelined).
        flipped(
            [](GpuLimits& g) { g.attention_wgmma_warp_specialized = !g.attention_wgmma_warp_specialized; },
            L.attention_wgmma_warp_specialized ? "the prefill attention not warp-specialized"
                                               : "the prefill attention warp-specialized");
        flipped([](GpuLimits& g) { g.attention_ws_beside_decode = !g.attention_ws_beside_decode; },
                L.attention_ws_beside_decode
                    ? "the prefill attention beside decode rows on the plain wgmma kernel"
                    : "the prefill attention beside decode rows warp-specialized");
        flipped([](GpuLimits& g) { g.decode_attention_pipelined = !g.decode_attention_pipelined; },
                L.decode_attention_pipelined ? "the decode attention not pipelined"
                                             : "the decode attention pipelined");
        flipped([](GpuLimits& g) { g.decode_attention_tma = !g.decode_attention_tma; },
                L.decode_attention_tma ? "the decode attention on cp.async (not TMA rings)"
                                       : "the decode attention on TMA rings, issued before the prefill's");
        for (int sms :
             {48, 56, 64}) {  // the attention pair on split SMs (GpuLimits::attention_green_decode_sms)
            if (L.attention_green_decode_sms == sms) continue;
            char what[96];
            std::snprintf(what, sizeof what,
                          "the decode rows' attention on %d SMs of its own, the prefill's on the rest", sms);
            flipped([sms](GpuLimits& g) { g.attention_green_decode_sms = sms; }, what);
        }
        if (L.attention_green_decode_sms != 0)
            flipped([](GpuLimits& g) { g.attention_green_decode_sms = 0; },
                    "the attention pair sharing every SM");
        flipped([](GpuLimits& g) { g.l2_evict_first = !g.l2_evict_first; },
                L.l2_evict_first ? "the decode rows' state and KV without an L2 hint"
                                 : "the decode rows' state and KV evict-first in L2");
        // Programmatic dependent launch the other way round (GpuLimits::programmatic_launch).
        flipped([](GpuLimits& g) { g.programmatic_launch = !g.programmatic_launch; },
                L.programmatic_launch ? "plain launches (no programmatic dependent launch)"
                                      : "programmatic dependent launch");
        // The Mamba layers' y the other way round (GpuLimits::mamba_y_bf16).
        flipped([](GpuLimits& g) { g.mamba_y_bf16 = !g.mamba_y_bf16; },
                L.mamba_y_bf16 ? "the Mamba y in fp32 (not bf16)" : "the Mamba y in bf16 (not fp32)");
        // The last mixer's output projection and the MLP layers after it on every row
        // (GpuLimits::trailing_layers_on_logit_rows).
        flipped([](GpuLimits& g) { g.trailing_layers_on_logit_rows = !g.trailing_layers_on_logit_rows; },
                L.trailing_layers_on_logit_rows
                    ? "every layer on every row (not the trailing ones on the logits rows only)"
                    : "the trailing layers on the logits rows only");
        flipped([](GpuLimits& g) { g.last_mamba_gate_on_logit_rows = !g.last_mamba_gate_on_logit_rows; },
                L.last_mamba_gate_on_logit_rows ? "the last Mamba layer's gate on every row"
                                                : "the last Mamba layer's gate on the logits rows only");
    }

    // One vision pass (its stream) issued together with k language-model steps (its stream), k such that
    // the two take about as long: how much of the tower hides under the steps. Wall time over the reps,
    // device synchronised before and after.
    void overlap(const char* what, const std::vector<SeqStep>& step, double step_ms) {
        const int k = std::max(1, static_cast<int>(vision_ms / step_ms + 0.5));
        const double together = wall_ms(
            [&] {
                model->encode_images(jobs);
                for (int i = 0; i < k; ++i) model->forward(step, 0);
            },
            1);
        const double serial = vision_ms + k * step_ms;
        std::printf(
            "\n### vision pass || %d %s steps (vision GEMMs on %s SMs%s): %.2f ms together vs %.2f ms "
            "one after the other "
            "(%.2f + %d x %.2f), %.0f%% of the shorter part hidden\n",
            k, what, o.vision_sms > 0 ? std::to_string(o.vision_sms).c_str() : "all",
            o.vision_priority ? ", high-priority stream" : "", together, serial, vision_ms, k, step_ms,
            100.0 * (serial - together) / std::min(vision_ms, k * step_ms));
    }

    // Against decode-only steps (bandwidth-bound) and against mixed steps (what the engine overlaps the
    // tower with while sessions prefill).
    void run_overlaps() {
        if (vision_ms > 0 && decode_ms > 0) overlap("decode", decode, decode_ms);
        if (vision_ms > 0 && mixed_ms > 0) overlap("mixed", mixed, mixed_ms);
    }

    // Experiment (--nano): the decode rows (this model, its CUDA graph) and the prefill chunk (a second model
    // with its own random weights, buffers and stream) as two steps issued together, against the mixed step
    // that carries both. Tells whether splitting a step into a bandwidth-bound and a compute-bound half that
    // overlap beats one step.
    void run_nano() {
        if (!(o.nano && o.decode_rows > 0 && !prefill.empty())) return;
        GpuLimits LB = L;
        LB.max_seqs = LB.max_slots = LB.max_logit_rows = o.prefill_seqs + 4;
        LB.kv_pages = o.prefill_seqs * pages_per_seq;
        LB.max_tiles = 1, LB.max_image_rows = cfg.image.tokens_per_tile();
        LB.decode_graphs = false, LB.lm_stream_priority = false, LB.lm_gemm_sms = o.nano_prefill_sms;
        auto second = GpuModel::random(cfg, LB, 8);
        std::vector<SeqStep> prefill_b = prefill;
        for (size_t i = 0; i < prefill_b.size(); ++i) {
            prefill_b[i].slot = static_cast<int32_t>(i);
            prefill_b[i].pages = pages_of(static_cast<int64_t>(i));
        }
        const double prefill_b_ms = whole([&] { second->forward(prefill_b, 0); }, second->stream());
        const double together = wall_ms(
            [&] {
                model->forward(decode, 0);
                second->forward(prefill_b, 0);
            },
            kWarmups);
        std::printf(
            "\n### nano-batches: decode step (%lld rows, graph%s) || prefill step (%lld tokens, GEMMs on "
            "%s SMs): %.2f ms together vs "
            "%.2f + %.2f one after the other; the mixed step takes %.2f ms\n",
            (long long)o.decode_rows, o.nano_decode_priority ? ", high-priority stream" : "",
            (long long)o.prefill_tokens,
            o.nano_prefill_sms > 0 ? std::to_string(o.nano_prefill_sms).c_str() : "all", together, decode_ms,
            prefill_b_ms, mixed_ms);
    }

    void print_gemm_tunes() const {
        std::printf(
            "\n### GEMM shapes tuned (cuBLASLt candidates timed on first use; small-m kernel and, with "
            "--gemm-wgmma, our Hopper "
            "kernel timed beside them where they apply)\n\n"
            "| m | n | k | candidates | heuristic µs | best µs | chosen | small-m kernel µs | gemm_wgmma µs "
            "(tile) |\n"
            "|---|---|---|---|---|---|---|---|---|\n");
        for (const auto& t : model->gemm_tune_log()) {
            const std::string chosen = t.wgmma_chosen  ? std::string("gemm_wgmma")
                                       : t.gemv_chosen ? std::string("small-m kernel")
                                                       : std::to_string(t.chosen);
            char gemv_us[32] = "—", wgmma_us[48] = "—";
            if (t.gemv_timed) std::snprintf(gemv_us, sizeof gemv_us, "%.1f", t.gemv_us);
            if (t.wgmma_timed)
                std::snprintf(wgmma_us, sizeof wgmma_us, "%.1f (%d)", t.wgmma_us, t.wgmma_tile_n);
            std::printf("| %lld | %lld | %lld | %d | %.1f | %.1f | %s | %s | %s |\n", (long long)t.m,
                        (long long)t.n, (long long)t.k, t.candidates, t.heuristic_us, t.best_us,
                        chosen.c_str(), gemv_us, wgmma_us);
        }
        std::printf(
            "\n# GEMM FLOPs per step are 2·tokens·params of each projection; attention FLOPs 4·(query,key "
            "pairs)·heads·head_dim.\n");
    }
};

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    try {
        const ModelConfig cfg = load_model_config(o.config_dir);
        StepBench bench(o, cfg);
        bench.prepare();
        bench.run_vision();
        bench.run_prefill();
        bench.run_decode();
        bench.run_mixed();
        bench.run_overlaps();
        bench.run_nano();
        bench.print_gemm_tunes();
    } catch (const surf::Error& e) {
        std::fprintf(stderr, "bench_step: %s\n", e.what());
        return 2;
    }
    return 0;
}

#else
int main() {
    std::fprintf(stderr, "bench_step: built without CUDA\n");
    return 2;
}
#endif
