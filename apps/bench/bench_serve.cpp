// bench_serve: a synthetic agent workload on the CUDA engine with random weights drawn on
// the GPU from a config (no checkpoint to move; no EOS; fixed output lengths).
//   C concurrent sessions, each doing S steps; a step appends one W×H screenshot (random pixels, so no
//   two are alike) and T text tokens, then generates O tokens.
//   stateful : the session keeps its state; each step prefills only what it appends.
//   stateless: each step opens a fresh session and re-sends the last 3 screenshots and the whole text
//              history (prompt + outputs of earlier steps), as engines without prefix reuse must.
// Reports output tok/s, total tok/s (every token the model processed), agent steps/s, step latency
// p50/p95, time to first token, step S vs step 1 latency, device memory, and the decode phase against
// the bandwidth roofline of spec/serving.md §4 with the copy bandwidth measured in the same run.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef SURF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "apps/bench/bench_ceilings.h"
#include "apps/bench/bench_flags.h"
#include "base/error.h"
#include "model/checkpoint/config.h"
#include "model/cuda/cuda_engine.h"
#include "model/vision/image_tiling.h"

using namespace surf::model;
using Clock = std::chrono::steady_clock;

namespace {

// "; prefill attention: language model <kernel>, vision tower <kernel>" for the header line.
std::string attention_kernels(const surf::model::cuda::GpuLimits& L) {
    auto kernel = [&](int wgmma_keys, bool warp_specialized) {
        return wgmma_keys ? std::string(warp_specialized ? "warp-specialized " : "") + "wgmma, key tile " +
                                std::to_string(wgmma_keys)
                          : "mma.sync at " + std::to_string(L.attention_rows_per_warp == 32 ? 32 : 16) +
                                " rows per warp";
    };
    return "; prefill attention: language model " +
           kernel(L.attention_wgmma_keys, L.attention_wgmma_warp_specialized) +
           (L.attention_wgmma_warp_specialized && L.attention_wgmma_keys && !L.attention_ws_beside_decode
                ? " (plain wgmma beside decode rows)"
                : "") +
           ", vision tower " + kernel(L.vit_attention_wgmma_keys, L.vit_attention_wgmma_warp_specialized) +
           "; decode attention " +
           (L.attention_green_decode_sms > 0 ? "on " + std::to_string(L.attention_green_decode_sms) +
                                                   " SMs of its own in mixed steps where that pays (TMA, 2 "
                                                   "blocks an SM; the prefill on the rest), else "
            : L.attention_green_decode_sms < 0
                ? "on SMs of its own in mixed steps where the warm-up's measurement says that pays (TMA, 2 "
                  "blocks an SM; the prefill on the rest), else "
                : "") +
           (L.decode_attention_tma ? "on TMA rings (" + std::to_string(L.decode_tma_blocks_per_sm) +
                                         " blocks an SM alone, 1 beside a prefill)"
            : L.decode_attention_pipelined ? "pipelined"
                                           : "not pipelined") +
           "; decode rows' state and KV " + (L.l2_evict_first ? "evict-first in L2" : "without an L2 hint") +
           "; sampler " + (L.sampler_binned ? "binned" : "radix digits only") + "; GEMMs " +
           (L.gemm_wgmma         ? "cuBLASLt or gemm_wgmma, whichever tunes faster"
            : L.gemm_wgmma_relu2 ? "cuBLASLt, ReLU² ones of >= 512 rows on gemm_wgmma (fused)"
                                 : "cuBLASLt") +
           "; " + (L.programmatic_launch ? "programmatic dependent launch" : "plain launches") + "; " +
           (L.trailing_layers_on_logit_rows
                ? std::string("last mixer's output") + (L.last_mamba_gate_on_logit_rows ? " and gate" : "") +
                      " and trailing MLPs on logits rows only"
                : std::string("every layer on every row")) +
           "; small-m kernel k split " +
           (L.small_m_k_split ? std::to_string(L.small_m_k_split) : std::string("automatic"));
}

struct Options {
    std::string config_dir = std::string(SURF_SOURCE_DIR_FOR_BENCH) + "/tests/fixtures/holotron_12b";
    std::vector<int> concurrency = {1, 16, 64, 100};
    int steps = 10, text_tokens = 200, output_tokens = 100, width = 1280, height = 720;
    std::string mode = "both";
    std::string quantize = "none";  // GpuLimits::quantize: none | fp8
    bool bf16_state = false;
    int state_split = -1;          // -1: the engine's default (GpuLimits::ssm_state_split)
    int64_t prefill_chunk = 1024;  // the engine's default
    int64_t max_context = 16384;
    int64_t vision_batch_tiles = 24;  // tiles per vision-tower pass (8 screenshots of 3 tiles)
    bool graphs = true;
    bool lm_priority = false;
    int vision_sms = 0;
    // GpuLimits::overlap_*_branches and ssd_split (-1: the engine's defaults).
    int overlap_mamba = -1, overlap_attention = -1, ssd_split = -1, ssu_split = -1;
    int ssd_wgmma = -1;            // GpuLimits::ssd_wgmma: -1 the default, 0 off, 1 on
    bool attention_splits = true;  // split-KV prefill attention (GpuLimits::attention_splits)
    int gemm_reuse = -1;         // GpuLimits::gemm_reuse_tuned_in_bucket; -1 = not given (the engine default)
    bool small_m_kernel = true;  // GpuLimits::small_m_kernel
    int attention_rows_per_warp =
        0;  // GpuLimits::attention_rows_per_warp; 0 = not given (the engine default)
    int attention_wgmma = -1, vit_attention_wgmma = -1;  // GpuLimits::*attention_wgmma_keys; -1 = not given
    int ssm_replay = -1;                                 // GpuLimits::ssm_replay_window; -1 = not given
    bool ssu_early = false;                              // GpuLimits::ssu_after_prefill_conv off
    int ssu_bulk = -1;      // GpuLimits::ssu_bulk_stage: -1 the default, 0 off, 1 on
    int mamba_y_bf16 = -1;  // GpuLimits::mamba_y_bf16: -1 the default, 0 off, 1 on
    int attention_ws = -1,
        vit_attention_ws = -1;  // GpuLimits::*attention_wgmma_warp_specialized: -1 the default, 0 off, 1 on
    // GpuLimits::attention_ws_beside_decode, decode_attention_pipelined, decode_attention_tma,
    // decode_tma_blocks_per_sm
    int attention_ws_beside_decode = -1, decode_pipelined = -1, decode_tma = -1, decode_tma_blocks = -1;
    int attention_green = -1;                           // GpuLimits::attention_green_decode_sms
    int l2_evict_first = -1;                            // GpuLimits::l2_evict_first
    int sampler_binned = -1;                            // GpuLimits::sampler_binned
    int gemm_wgmma = -1;                                // GpuLimits::gemm_wgmma
    int gemm_wgmma_relu2 = -1;                          // GpuLimits::gemm_wgmma_relu2
    int tail_rows = -1;                                 // GpuLimits::trailing_layers_on_logit_rows
    int tail_gate = -1;                                 // GpuLimits::last_mamba_gate_on_logit_rows
    int pdl = -1;                                       // GpuLimits::programmatic_launch
    int issue_ahead = -1;                               // CudaEngineOptions::issue_ahead
    int gemv_k_split = -1;                              // GpuLimits::small_m_k_split
    int64_t vision_min_tiles = 0, vision_max_wait = 2;  // CudaEngineOptions: vision batches across steps
    bool warm_vision = false;  // warm-up tunes the vision passes of 1 .. vision-batch tiles of screenshots
                               // (instead of every tile count)
    int warm_vision_tile_counts = -1;  // CudaEngineOptions::warm_up_vision_tile_counts
    bool warm_row_buckets = true;      // CudaEngineOptions::warm_up_row_buckets
    int hf_baseline_batch = 0;  // > 0: also run the HF transformers baseline at this batch, in this run
    int hf_baseline_steps = 2;
};

std::vector<int> parse_list(const char* text) {
    std::vector<int> out;
    for (const char* p = text; *p;) {
        out.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
    }
    return out;
}

constexpr const char* kUsage =
    "usage: bench_serve [--config DIR] [--concurrency 1,16,64,100] [--steps 10] [--mode "
    "stateful|stateless|both] [--quantize none|fp8]\n"
    "                   [--text-tokens 200] [--output-tokens 100] [--image 1280x720] "
    "[--bf16-state] [--prefill-chunk 1024]\n"
    "                   [--vision-batch TILES] [--no-graphs] [--lm-priority] [--vision-sms N]\n"
    "                   [--overlap-mamba 0|1] [--overlap-attention 0|1] [--ssd-split N] "
    "[--ssd-wgmma 0|1] [--ssu-split N]\n"
    "                   [--no-attention-splits] [--[no-]gemm-reuse-in-bucket] "
    "[--attention-rows-per-warp 16|32]\n"
    "                   [--no-small-m-kernel] [--attention-wgmma 0|64|128] "
    "[--vit-attention-wgmma 0|64|128|208]\n"
    "                   [--ssm-replay 0|2..32] [--state-split 0|1] [--ssu-early] [--ssu-bulk "
    "0|1] [--mamba-y-bf16 0|1]\n"
    "                   [--attention-ws 0|1] [--vit-attention-ws 0|1]\n"
    "                   [--attention-ws-beside-decode 0|1] [--decode-pipelined 0|1] "
    "[--decode-tma 0|1] [--decode-tma-blocks 1|2] [--attention-green "
    "0|SMS (default: counts measured in the warm-up)] [--l2-evict-first 0|1] [--sampler-binned "
    "0|1]\n"
    "                   [--gemm-wgmma 0|1] [--gemm-wgmma-relu2 0|1] [--tail-logit-rows 0|1] "
    "[--tail-gate 0|1] [--pdl 0|1] [--gemv-k-split 0|1|2|4|8] [--issue-ahead 0|1]\n"
    "                   [--vision-min-tiles N [--vision-max-wait STEPS]] [--warm-vision] "
    "[--warm-vision-tile-counts 0|1] [--no-warm-row-buckets]\n"
    "                   [--hf-baseline BATCH [--hf-baseline-steps 2]]\n";

std::vector<surf::bench::Flag> flag_table(Options& o) {
    using namespace surf::bench;
    return {text_flag("--config", o.config_dir),
            {"--concurrency", true, [&o](const char* v) { o.concurrency = parse_list(v); }},
            int_flag("--steps", o.steps),
            int_flag("--text-tokens", o.text_tokens),
            int_flag("--output-tokens", o.output_tokens),
            text_flag("--mode", o.mode),
            text_flag("--quantize", o.quantize),
            switch_flag("--bf16-state", o.bf16_state, true),
            int_flag("--state-split", o.state_split),
            int64_flag("--prefill-chunk", o.prefill_chunk),
            int64_flag("--vision-batch", o.vision_batch_tiles),
            switch_flag("--no-graphs", o.graphs, false),
            switch_flag("--lm-priority", o.lm_priority, true),
            int_flag("--vision-sms", o.vision_sms),
            int_flag("--overlap-mamba", o.overlap_mamba),
            int_flag("--overlap-attention", o.overlap_attention),
            int_flag("--ssd-split", o.ssd_split),
            int_flag("--ssd-wgmma", o.ssd_wgmma),
            int_flag("--ssu-split", o.ssu_split),
            switch_flag("--no-attention-splits", o.attention_splits, false),
            switch_flag("--gemm-reuse-in-bucket", o.gemm_reuse, 1),
            switch_flag("--no-gemm-reuse-in-bucket", o.gemm_reuse, 0),
            switch_flag("--no-small-m-kernel", o.small_m_kernel, false),
            int_flag("--attention-rows-per-warp", o.attention_rows_per_warp),
            int_flag("--attention-wgmma", o.attention_wgmma),
            int_flag("--vit-attention-wgmma", o.vit_attention_wgmma),
            int_flag("--ssm-replay", o.ssm_replay),
            switch_flag("--ssu-early", o.ssu_early, true),
            int_flag("--ssu-bulk", o.ssu_bulk),
            int_flag("--mamba-y-bf16", o.mamba_y_bf16),
            int_flag("--attention-ws", o.attention_ws),
            int_flag("--vit-attention-ws", o.vit_attention_ws),
            int_flag("--attention-ws-beside-decode", o.attention_ws_beside_decode),
            int_flag("--decode-pipelined", o.decode_pipelined),
            int_flag("--decode-tma", o.decode_tma),
            int_flag("--decode-tma-blocks", o.decode_tma_blocks),
            int_flag("--attention-green", o.attention_green),
            int_flag("--l2-evict-first", o.l2_evict_first),
            int_flag("--sampler-binned", o.sampler_binned),
            int_flag("--gemm-wgmma", o.gemm_wgmma),
            int_flag("--gemm-wgmma-relu2", o.gemm_wgmma_relu2),
            int_flag("--tail-logit-rows", o.tail_rows),
            int_flag("--tail-gate", o.tail_gate),
            int_flag("--pdl", o.pdl),
            int_flag("--issue-ahead", o.issue_ahead),
            int_flag("--gemv-k-split", o.gemv_k_split),
            int64_flag("--vision-min-tiles", o.vision_min_tiles),
            int64_flag("--vision-max-wait", o.vision_max_wait),
            switch_flag("--warm-vision", o.warm_vision, true),
            int_flag("--warm-vision-tile-counts", o.warm_vision_tile_counts),
            switch_flag("--no-warm-row-buckets", o.warm_row_buckets, false),
            int_flag("--hf-baseline", o.hf_baseline_batch),
            int_flag("--hf-baseline-steps", o.hf_baseline_steps),
            {"--image", true, [&o](const char* v) {
                 const std::string s = v;
                 o.width = std::atoi(s.c_str());
                 o.height = std::atoi(s.c_str() + s.find('x') + 1);
             }}};
}

// The 0/1 (and small-range) knobs: -1 is "not given" (the engine's default); anything else outside the
// range is a usage error.
void check_ranges(const Options& o) {
    auto check_range = [](const char* flag, int64_t v, int64_t lo, int64_t hi) {
        if (v != -1 && (v < lo || v > hi)) {
            std::fprintf(stderr, "bench_serve: %s %lld is out of range (%lld to %lld)\n", flag,
                         static_cast<long long>(v), static_cast<long long>(lo), static_cast<long long>(hi));
            std::exit(2);
        }
    };
    check_range("--overlap-mamba", o.overlap_mamba, 0, 1);
    check_range("--overlap-attention", o.overlap_attention, 0, 1);
    check_range("--ssd-split", o.ssd_split, 0, 4);
    check_range("--ssd-wgmma", o.ssd_wgmma, 0, 1);
    check_range("--ssu-split", o.ssu_split, 0,
                80);  // must divide the head dim (80 at 12B): the kernel says so
    check_range("--ssm-replay", o.ssm_replay, 0, 32);
    check_range("--state-split", o.state_split, 0, 1);
    check_range("--warm-vision-tile-counts", o.warm_vision_tile_counts, 0, 1);
    check_range("--ssu-bulk", o.ssu_bulk, 0, 1);
    check_range("--mamba-y-bf16", o.mamba_y_bf16, 0, 1);
    check_range("--attention-ws", o.attention_ws, 0, 1);
    check_range("--vit-attention-ws", o.vit_attention_ws, 0, 1);
    check_range("--attention-ws-beside-decode", o.attention_ws_beside_decode, 0, 1);
    check_range("--decode-pipelined", o.decode_pipelined, 0, 1);
    check_range("--decode-tma", o.decode_tma, 0, 1);
    check_range("--decode-tma-blocks", o.decode_tma_blocks, 1, 2);
    check_range("--attention-green", o.attention_green, 0, 1024);
    check_range("--l2-evict-first", o.l2_evict_first, 0, 1);
    check_range("--sampler-binned", o.sampler_binned, 0, 1);
    check_range("--gemm-wgmma", o.gemm_wgmma, 0, 1);
    check_range("--gemm-wgmma-relu2", o.gemm_wgmma_relu2, 0, 1);
    check_range("--tail-logit-rows", o.tail_rows, 0, 1);
    check_range("--tail-gate", o.tail_gate, 0, 1);
    check_range("--issue-ahead", o.issue_ahead, 0, 1);
    check_range("--pdl", o.pdl, 0, 1);
    check_range("--gemv-k-split", o.gemv_k_split, 0, 8);
}

// Refuses values outside what the knobs take (a message on stderr, exit status 2).
void check_options(const Options& o) {
    if (o.quantize != "none" && o.quantize != "fp8") {
        std::fprintf(stderr, "bench_serve: --quantize takes none or fp8, got %s\n", o.quantize.c_str());
        std::exit(2);
    }
    if (o.vision_sms < 0) {
        std::fprintf(stderr, "bench_serve: --vision-sms %d is out of range\n", o.vision_sms);
        std::exit(2);
    }
    if (o.attention_rows_per_warp != 0 && o.attention_rows_per_warp != 16 &&
        o.attention_rows_per_warp != 32) {
        std::fprintf(stderr, "bench_serve: --attention-rows-per-warp takes 16 or 32, got %d\n",
                     o.attention_rows_per_warp);
        std::exit(2);
    }
    for (const auto& [flag, keys] : {std::pair<const char*, int>{"--attention-wgmma", o.attention_wgmma},
                                     {"--vit-attention-wgmma", o.vit_attention_wgmma}}) {
        if (keys != -1 && !surf::kernels::cuda::valid_wgmma_key_tile(keys)) {
            std::fprintf(stderr, "bench_serve: %s takes 0, 64, 128 or 208, got %d\n", flag, keys);
            std::exit(2);
        }
    }
    check_ranges(o);
    if (o.gemv_k_split > 0 && (o.gemv_k_split & (o.gemv_k_split - 1)) != 0) {
        std::fprintf(stderr, "bench_serve: --gemv-k-split takes 0 (automatic), 1, 2, 4 or 8, got %d\n",
                     o.gemv_k_split);
        std::exit(2);
    }
    if (o.ssm_replay == 1) {
        std::fprintf(stderr, "bench_serve: --ssm-replay takes 0 (off) or 2..32, got 1\n");
        std::exit(2);
    }
    if (o.vision_min_tiles < 0 || o.vision_max_wait < 0) {
        std::fprintf(stderr, "bench_serve: --%s %lld is out of range\n",
                     o.vision_min_tiles < 0 ? "vision-min-tiles" : "vision-max-wait",
                     static_cast<long long>(o.vision_min_tiles < 0 ? o.vision_min_tiles : o.vision_max_wait));
        std::exit(2);
    }
    if (o.hf_baseline_batch < 0) {
        std::fprintf(stderr, "bench_serve: --hf-baseline %d is out of range\n", o.hf_baseline_batch);
        std::exit(2);
    }
    if (o.hf_baseline_steps < 1) {
        std::fprintf(stderr, "bench_serve: --hf-baseline-steps %d is out of range\n", o.hf_baseline_steps);
        std::exit(2);
    }
}

Options parse(int argc, char** argv) {
    Options o;
    surf::bench::parse_flags(argc, argv, flag_table(o), "bench_serve", kUsage);
    check_options(o);
    return o;
}

std::shared_ptr<const Image> random_screenshot(int w, int h, uint64_t seed) {
    auto img = std::make_shared<Image>(w, h, 3);
    std::mt19937_64 rng(seed);
    // Blocks of colour with noise: cheap to draw, never equal between steps.
    for (size_t i = 0; i < img->pixels.size(); i += 8) {
        const uint64_t r = rng();
        for (size_t k = 0; k < 8 && i + k < img->pixels.size(); ++k)
            img->pixels[i + k] = static_cast<uint8_t>(r >> (8 * k));
    }
    return img;
}

std::vector<int32_t> random_tokens(int n, std::mt19937_64& rng) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(1000 + rng() % 130000);
    return t;
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(std::min<double>(v.size() - 1, std::floor(q * (v.size() - 1) + 0.5)))];
}

struct RunResult {
    double wall = 0;
    int64_t generated = 0, processed = 0, appended = 0, steps = 0, errors = 0;
    std::vector<double> step_latency, ttft, first_step, last_step;
};

RunResult run(Engine& engine, const Options& o, int C, bool stateful, uint64_t run_id) {
    RunResult res;
    std::mutex mu;
    const auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < C; ++w) {
        workers.emplace_back([&, w] {
            // Distinct per run and worker: no screenshot repeats across runs (the image cache must not help).
            std::mt19937_64 rng(1000003ull * (w + 1) + 7919ull * run_id);
            SessionId session = stateful ? engine.open_session() : 0;
            std::vector<std::shared_ptr<const Image>> shots;
            std::vector<int32_t> history;  // text tokens of all steps so far (stateless re-sends them)
            GenerateOptions g;
            g.max_tokens = o.output_tokens;
            g.ignore_eos = true;
            g.sampling.temperature = 0.7f;
            g.sampling.seed = static_cast<uint64_t>(w);
            for (int s = 0; s < o.steps; ++s) {
                auto shot = random_screenshot(o.width, o.height, rng());
                const std::vector<int32_t> text = random_tokens(o.text_tokens, rng);
                std::vector<InputPart> input;
                int64_t appended = 0;
                if (stateful) {
                    input.push_back(InputPart::of_image(shot));
                    input.push_back(InputPart::of_tokens(text));
                } else {
                    session = engine.open_session();
                    shots.push_back(shot);
                    if (shots.size() > 3) shots.erase(shots.begin());
                    history.insert(history.end(), text.begin(), text.end());
                    if (!history.empty()) input.push_back(InputPart::of_tokens(history));
                    for (const auto& img : shots) input.push_back(InputPart::of_image(img));
                }
                const auto ts = Clock::now();
                GenerateResult r;
                try {
                    r = engine.generate(session, input, g);
                } catch (const surf::Error& e) {
                    std::lock_guard<std::mutex> lock(mu);
                    std::fprintf(stderr, "bench_serve: worker %d step %d: %s\n", w, s, e.what());
                    ++res.errors;
                    if (!stateful) engine.close_session(session);
                    break;
                }
                const double lat = std::chrono::duration<double>(Clock::now() - ts).count();
                appended = r.prefill_tokens;
                if (!stateful) {
                    // Engines never sample the image placeholders, so the outputs can be re-sent as text.
                    history.insert(history.end(), r.tokens.begin(), r.tokens.end());
                    engine.close_session(session);
                }
                std::lock_guard<std::mutex> lock(mu);
                res.generated += static_cast<int64_t>(r.tokens.size());
                res.processed += r.prefill_tokens + static_cast<int64_t>(r.tokens.size());
                res.appended += appended;
                ++res.steps;
                res.step_latency.push_back(lat);
                res.ttft.push_back(r.prefill_seconds);
                if (s == 0) res.first_step.push_back(lat);
                if (s == o.steps - 1) res.last_step.push_back(lat);
            }
            if (stateful) engine.close_session(session);
        });
    }
    for (auto& t : workers) t.join();
    res.wall = std::chrono::duration<double>(Clock::now() - t0).count();
    return res;
}

// The same-card baseline in the same run: tests/reference/bench_hf_baseline.py (HF transformers NemotronH,
// pure PyTorch) at `hf_baseline_batch` sessions advancing together, its lines echoed here. False (with the
// reason on stderr) when it could not run.
bool run_hf_baseline(const Options& o) {
    const std::string script =
        std::string(SURF_SOURCE_DIR_FOR_BENCH) + "/tests/reference/bench_hf_baseline.py";
    const std::string command = "python3 '" + script + "' --config '" + o.config_dir +
                                "/config.json' --steps " + std::to_string(o.hf_baseline_steps) +
                                " --concurrency " + std::to_string(o.hf_baseline_batch) + " --batch " +
                                std::to_string(o.hf_baseline_batch) + " 2>&1";
    std::printf("# baseline: %s\n", command.c_str());
    std::fflush(stdout);
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) {
        std::fprintf(stderr, "bench_serve: could not start the HF baseline (%s)\n", std::strerror(errno));
        return false;
    }
    char line[4096];
    bool got_result = false;
    while (std::fgets(line, sizeof line, pipe)) {
        got_result |= std::strncmp(line, "| HF transformers baseline", 26) == 0;
        std::printf("%s%s", line[0] == '|' ? "" : "#   hf: ", line);
        std::fflush(stdout);
    }
    const int status = pclose(pipe);
    if (status != 0 || !got_result) {
        std::fprintf(stderr, "bench_serve: the HF baseline failed (exit status %d%s)\n", status,
                     got_result ? "" : ", no result line");
        return false;
    }
    return true;
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / v.size();
}

// The GpuLimits knobs the flags set; each only when given (-1, or the switch left off, keeps the engine's
// default).
void apply_knobs(const Options& o, cuda::GpuLimits& L) {
    if (o.overlap_mamba >= 0) L.overlap_mamba_branches = o.overlap_mamba == 1;
    if (o.overlap_attention >= 0) L.overlap_attention_branches = o.overlap_attention == 1;
    if (o.ssd_split >= 0) L.ssd_split = o.ssd_split;
    if (o.ssd_wgmma >= 0) L.ssd_wgmma = o.ssd_wgmma == 1;
    if (o.ssu_split >= 0) L.ssu_split = o.ssu_split;
    L.attention_splits = o.attention_splits;
    if (o.gemm_reuse >= 0) L.gemm_reuse_tuned_in_bucket = o.gemm_reuse == 1;
    L.small_m_kernel = o.small_m_kernel;
    if (o.attention_rows_per_warp) L.attention_rows_per_warp = o.attention_rows_per_warp;
    if (o.attention_wgmma >= 0) L.attention_wgmma_keys = o.attention_wgmma;
    if (o.vit_attention_wgmma >= 0) L.vit_attention_wgmma_keys = o.vit_attention_wgmma;
    if (o.ssm_replay >= 0) L.ssm_replay_window = o.ssm_replay;
    if (o.ssu_early) L.ssu_after_prefill_conv = false;
    if (o.ssu_bulk >= 0) L.ssu_bulk_stage = o.ssu_bulk == 1;
    if (o.mamba_y_bf16 >= 0) L.mamba_y_bf16 = o.mamba_y_bf16 == 1;
    if (o.attention_ws >= 0) L.attention_wgmma_warp_specialized = o.attention_ws == 1;
    if (o.vit_attention_ws >= 0) L.vit_attention_wgmma_warp_specialized = o.vit_attention_ws == 1;
    if (o.attention_ws_beside_decode >= 0) L.attention_ws_beside_decode = o.attention_ws_beside_decode == 1;
    if (o.decode_pipelined >= 0) L.decode_attention_pipelined = o.decode_pipelined == 1;
    if (o.decode_tma >= 0) L.decode_attention_tma = o.decode_tma == 1;
    if (o.decode_tma_blocks >= 0) L.decode_tma_blocks_per_sm = o.decode_tma_blocks;
    if (o.attention_green >= 0) L.attention_green_decode_sms = o.attention_green;
    if (o.l2_evict_first >= 0) L.l2_evict_first = o.l2_evict_first == 1;
    if (o.sampler_binned >= 0) L.sampler_binned = o.sampler_binned == 1;
    if (o.gemm_wgmma >= 0) L.gemm_wgmma = o.gemm_wgmma == 1;
    if (o.gemm_wgmma_relu2 >= 0) L.gemm_wgmma_relu2 = o.gemm_wgmma_relu2 == 1;
    if (o.tail_rows >= 0) L.trailing_layers_on_logit_rows = o.tail_rows == 1;
    if (o.tail_gate >= 0) L.last_mamba_gate_on_logit_rows = o.tail_gate == 1;
    if (o.pdl >= 0) L.programmatic_launch = o.pdl == 1;
    if (o.gemv_k_split >= 0) L.small_m_k_split = o.gemv_k_split;
    L.ssm_state = o.bf16_state ? surf::kernels::cuda::DType::kBF16 : surf::kernels::cuda::DType::kF32;
    if (o.state_split >= 0) L.ssm_state_split = o.state_split == 1;
}

// The engine sized for max_c sessions of this workload, with the flags' knobs, vision batching and warm-up.
cuda::CudaEngineOptions engine_options(const Options& o, const ModelConfig& cfg, int max_c) {
    cuda::CudaEngineOptions eo;
    eo.limits.max_slots = max_c + 4;
    eo.limits.max_seqs = max_c + 4;
    eo.limits.max_logit_rows = max_c + 4;
    eo.limits.max_tokens = o.prefill_chunk + max_c + 4;
    eo.limits.max_context = o.max_context;
    eo.limits.page_size = 16;
    const int64_t per_step = 768 + 2 + o.text_tokens + o.output_tokens;
    // Stateful sessions grow by a step each; stateless ones hold 3 screenshots and the text history.
    const int64_t per_session =
        std::max<int64_t>(static_cast<int64_t>(o.steps) * per_step,
                          3 * 770 + static_cast<int64_t>(o.steps) * (o.text_tokens + o.output_tokens)) +
        512;
    eo.limits.kv_pages = (max_c + 4) * ((per_session + 15) / 16);
    eo.limits.max_image_rows = 6 * 768 * (max_c + 4) > 262144 ? 262144 : 6 * 768 * (max_c + 4);
    eo.limits.max_tiles = o.vision_batch_tiles;
    eo.limits.decode_graphs = o.graphs;
    eo.limits.lm_stream_priority = o.lm_priority;
    eo.limits.vision_gemm_sms = o.vision_sms;
    eo.limits.quantize = parse_quantize(o.quantize, "--quantize");
    apply_knobs(o, eo.limits);
    eo.vision_min_tiles = o.vision_min_tiles, eo.vision_max_wait_steps = o.vision_max_wait;
    if (o.issue_ahead >= 0) eo.issue_ahead = o.issue_ahead == 1;
    eo.warm_up_row_buckets = o.warm_row_buckets;
    if (o.warm_vision_tile_counts >= 0) eo.warm_up_vision_tile_counts = o.warm_vision_tile_counts == 1;
    if (o.warm_vision && cfg.has_vision) {
        // Passes of 1, 2, … screenshots of this workload's size, up to the tiles one pass may take.
        const int64_t per_shot = plan_tiles(o.width, o.height, tiling_config_from(cfg.image)).n_tiles;
        for (int64_t k = 1; k * per_shot <= o.vision_batch_tiles; ++k)
            eo.warm_up_vision_batches.push_back(std::vector<int64_t>(k, per_shot));
    }
    eo.prefill_chunk = o.prefill_chunk;
    return eo;
}

// What the runs' lines are measured against: the copy bandwidth, and the bytes of a decode step replay-aware
// (roof) and by §4's stock formula, which writes the state every step (stock_roof).
struct Baselines {
    double copy_bw = 0;
    surf::bench::Roofline roof, stock_roof;
    int replay_window = 0;
};

// The header lines: the card, the engine's knobs, the vision batching, the workload, the table's head.
void print_header(const Options& o, const ModelConfig& cfg, const cuda::CudaEngineOptions& eo,
                  const cudaDeviceProp& prop, double copy_bw, double gemm_tflops, bool split, double load_s,
                  Engine& engine) {
    std::printf(
        "# bench_serve on %s (%d SMs), copy bandwidth %.0f GB/s (read+write), bf16 GEMM ceiling %.0f "
        "TFLOP/s (8192^3), SSM state %s, "
        "replay window %d; mixed steps: Mamba branches %s, "
        "attention branches %s, SSD wgmma kernel %s, SSD slices %s, SSU row slices %s (state staged by "
        "%s), Mamba y %s, prefill split-KV %s%s%s%s\n",
        prop.name, prop.multiProcessorCount, copy_bw / 1e9, gemm_tflops,
        o.bf16_state ? "bf16"
        : split      ? "fp32 (two 16-bit planes)"
                     : "fp32",
        eo.limits.ssm_replay_window, eo.limits.overlap_mamba_branches ? "overlapped" : "serial",
        eo.limits.overlap_attention_branches ? "overlapped" : "serial",
        eo.limits.ssd_wgmma ? "where it applies" : "off",
        eo.limits.ssd_split ? std::to_string(eo.limits.ssd_split).c_str() : "auto",
        eo.limits.ssu_split ? std::to_string(eo.limits.ssu_split).c_str() : "auto",
        eo.limits.ssu_bulk_stage ? "bulk copies" : "cp.async", eo.limits.mamba_y_bf16 ? "bf16" : "fp32",
        eo.limits.attention_splits ? "auto" : "off",
        eo.limits.gemm_reuse_tuned_in_bucket ? "; tuned GEMM algorithms reused within 64-row buckets" : "",
        attention_kernels(eo.limits).c_str(), eo.limits.small_m_kernel ? "" : "; small-m GEMM kernel off");
    {
        const bool counts =
            eo.warm_up_vision_batches.empty() && eo.warm_up_vision_tile_counts && cfg.has_vision;
        std::printf("# vision: passes wait for %lld tiles or %lld steps; warm-up tunes %s; scheduler: %s\n",
                    (long long)o.vision_min_tiles, (long long)o.vision_max_wait,
                    counts ? ("one pass of each tile count 1.." + std::to_string(eo.limits.max_tiles)).c_str()
                           : (std::to_string(eo.warm_up_vision_batches.size()) + " vision passes").c_str(),
                    eo.issue_ahead ? "each step issued before the previous step's tokens reach the host"
                                   : "each step waits for the previous step's tokens");
    }
    std::printf(
        "# workload: %d steps/session, each %dx%d screenshot + %d text tokens in, %d tokens out; random "
        "weights drawn and engine "
        "warmed up in %.1f s (warm-up, GEMM tuning: %.1f s); device memory in use %.1f GiB\n",
        o.steps, o.width, o.height, o.text_tokens, o.output_tokens, load_s, engine.stats().warm_up_seconds,
        engine.stats().device_bytes / 1073741824.0);
    if (const std::string notes = engine.stats().warm_up_notes; !notes.empty())
        std::printf("# warm-up: %s\n", notes.c_str());
    std::printf(
        "| mode | C | output tok/s | total tok/s | appended tok/s | steps/s | step p50 s | step p95 s | "
        "TTFT p50 s | step %d / step 1 | "
        "decode rows | decode ms/step | decode %% roofline | device GiB "
        "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        o.steps);
}

// The weights' bytes and how many sessions of this workload (at their last step's length) would fit: the
// device memory free now plus what this engine's state slots and KV pages hold, over a session's bytes.
void print_capacity(const Options& o, const ModelConfig& cfg, const cuda::CudaEngineOptions& eo,
                    double weight_bytes, int max_c) {
    size_t free_bytes = 0, total = 0;
    SURF_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    const int64_t tokens = static_cast<int64_t>(o.steps) * (768 + 2 + o.text_tokens + o.output_tokens);
    const double session = surf::bench::session_bytes(cfg, o.bf16_state, eo.limits.ssm_replay_window, tokens);
    const double slot = surf::bench::session_bytes(cfg, o.bf16_state, eo.limits.ssm_replay_window, 0);
    const double page = surf::bench::session_bytes(cfg, o.bf16_state, eo.limits.ssm_replay_window, 16) - slot;
    const double held =
        static_cast<double>(eo.limits.max_slots) * slot + static_cast<double>(eo.limits.kv_pages) * page;
    std::printf(
        "# capacity: weights %.2f GiB (language-model linear layers %s); a stateful session of %lld tokens "
        "holds %.1f MiB; about %.0f such sessions fit in the free memory plus this engine's %d slots\n",
        weight_bytes / 1073741824.0, o.quantize == "fp8" ? "FP8 E4M3" : "bf16",
        static_cast<long long>(tokens), session / 1048576.0,
        (static_cast<double>(free_bytes) + held) / session, max_c + 4);
}

// The decode-only steps of a run, from the engine's stats before and after it, against the rooflines.
struct DecodeOnly {
    double steps = 0, rows = 0, seconds = 0, context = 0;
    double roof_pct = 0, stock_pct = 0, step_ms = 0, rows_per = 0;

    DecodeOnly(const EngineStats& before, const EngineStats& after, const Baselines& base) {
        steps = static_cast<double>(after.decode_only_steps - before.decode_only_steps);
        rows = static_cast<double>(after.decode_only_rows - before.decode_only_rows);
        seconds = after.decode_only_seconds - before.decode_only_seconds;
        context = static_cast<double>(after.decode_only_context - before.decode_only_context);
        if (steps > 0 && seconds > 0) {
            step_ms = 1e3 * seconds / steps;
            rows_per = rows / steps;
            const double bytes = steps * base.roof.step_bytes(rows / steps, context / steps);
            roof_pct = 100.0 * (bytes / seconds) / base.copy_bw;
            stock_pct = 100.0 *
                        (steps * base.stock_roof.step_bytes(rows / steps, context / steps) / seconds) /
                        base.copy_bw;
        }
    }
};

// The scheduler's share of a run: time with requests in flight, host work a step, GEMM tuning, graphs.
void print_host_notes(const char* mode, int C, const RunResult& r, const EngineStats& before,
                      const EngineStats& after) {
    const double steps_all = static_cast<double>(after.steps - before.steps);
    const double sec_all = after.step_seconds - before.step_seconds;
    std::printf(
        "#   %s C=%d: of the %.2f s wall, the engine had requests in flight %.2f s (steps %.2f "
        "s, scheduler work between steps "
        "%.2f s = %.2f ms a step)\n",
        mode, C, r.wall, after.busy_seconds - before.busy_seconds, sec_all,
        after.busy_seconds - before.busy_seconds - sec_all,
        1e3 * (after.busy_seconds - before.busy_seconds - sec_all) / std::max(1.0, steps_all));
    auto host_ms = [&](double EngineStats::*f) {
        return 1e3 * (after.*f - before.*f) / std::max(1.0, steps_all);
    };
    std::printf(
        "#   %s C=%d: scheduler thread, ms a step: planning %.3f, issuing the forward %.3f, "
        "accounting the tokens %.3f, "
        "admission %.3f, waits for images %.3f\n",
        mode, C, host_ms(&EngineStats::plan_seconds), host_ms(&EngineStats::issue_seconds),
        host_ms(&EngineStats::results_seconds), host_ms(&EngineStats::admission_seconds),
        host_ms(&EngineStats::image_wait_seconds));
    std::printf(
        "#   %s C=%d: %lld GEMM shapes tuned during the run (%.2f s of step time), %lld decode "
        "graphs captured\n",
        mode, C, static_cast<long long>(after.gemm_shapes_tuned - before.gemm_shapes_tuned),
        after.gemm_tune_seconds - before.gemm_tune_seconds,
        static_cast<long long>(after.graphs_captured - before.graphs_captured));
}

// The "#" lines under a run's row: where the steps' time went, memory, sampling, then the host's share.
void print_run_notes(const char* mode, int C, const RunResult& r, const EngineStats& before,
                     const EngineStats& after, const DecodeOnly& d, const Baselines& base) {
    const double steps_all = static_cast<double>(after.steps - before.steps);
    const double sec_all = after.step_seconds - before.step_seconds;
    const double dgpu = after.decode_only_gpu_seconds - before.decode_only_gpu_seconds;
    const double msteps = static_cast<double>(after.mixed_sampled_steps - before.mixed_sampled_steps);
    const double msec = after.mixed_sampled_seconds - before.mixed_sampled_seconds;
    const double mgpu = after.mixed_sampled_gpu_seconds - before.mixed_sampled_gpu_seconds;
    // Everything is allocated up front, so memory in use after the run is its peak (engine + CUDA
    // context + libraries; the table's "device GiB" counts the engine's own buffers).
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    std::printf(
        "#   %s C=%d: %.0f steps (%.0f decode-only at %.1f ms, of which GPU %.1f ms; %.0f "
        "mixed/prefill at %.1f ms), step time %.1f s of "
        "%.1f s wall; GPU memory in use %.1f of %.1f GiB%s\n",
        mode, C, steps_all, d.steps, d.step_ms, d.steps > 0 ? 1e3 * dgpu / d.steps : 0.0, steps_all - d.steps,
        1e3 * (sec_all - d.seconds) / std::max(1.0, steps_all - d.steps), sec_all, r.wall,
        (total_bytes - free_bytes) / 1073741824.0, total_bytes / 1073741824.0,
        r.errors ? " — FAILED REQUESTS, see stderr" : "");
    if (d.steps > 0 && base.replay_window > 0) {
        std::printf(
            "#   %s C=%d: decode-only steps at %.1f%% of the copy bandwidth counting the bytes "
            "moved with replay window %d; "
            "%.1f%% by §4's stock formula (state written every step)\n",
            mode, C, d.roof_pct, base.replay_window, d.stock_pct);
    }
    if (msteps > 0) {
        std::printf(
            "#   %s C=%d: %.0f mixed steps that sampled: %.1f ms wall, of which the language "
            "model's GPU span %.1f ms\n",
            mode, C, msteps, 1e3 * msec / msteps, 1e3 * mgpu / msteps);
    }
    const double ssteps = static_cast<double>(after.sampled_steps - before.sampled_steps);
    if (ssteps > 0) {
        std::printf(
            "#   %s C=%d: sampling (parameters up, sample_tokens, tokens back) %.3f ms of GPU "
            "span a sampled step (%.0f steps)\n",
            mode, C, 1e3 * (after.sampling_gpu_seconds - before.sampling_gpu_seconds) / ssteps, ssteps);
    }
    print_host_notes(mode, C, r, before, after);
}

// C sessions of `mode` (one run()): its table row and notes. Returns the requests that failed.
int64_t run_case(Engine& engine, const Options& o, const char* mode, int C, uint64_t run_id,
                 const Baselines& base) {
    const EngineStats before = engine.stats();
    const RunResult r = run(engine, o, C, std::string(mode) == "stateful", run_id);
    const EngineStats after = engine.stats();
    const DecodeOnly d(before, after, base);
    std::printf(
        "| %s | %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f "
        "| %.1f |\n",
        mode, C, r.generated / r.wall, r.processed / r.wall, r.appended / r.wall, r.steps / r.wall,
        percentile(r.step_latency, 0.5), percentile(r.step_latency, 0.95), percentile(r.ttft, 0.5),
        mean(r.last_step) / std::max(1e-9, mean(r.first_step)), d.rows_per, d.step_ms, d.roof_pct,
        after.device_bytes / 1073741824.0);
    print_run_notes(mode, C, r, before, after, d, base);
    std::fflush(stdout);
    return r.errors;
}

void print_engine_totals(const EngineStats& s) {
    std::printf(
        "# engine: %lld steps (%lld decode-only, %lld from %lld CUDA graphs), prefill %lld tokens, "
        "decode %lld tokens, image cache %lld hits / "
        "%lld misses, vision %lld batches / %lld tiles, offloads %lld, restores %lld\n",
        (long long)s.steps, (long long)s.decode_only_steps, (long long)s.graph_steps,
        (long long)s.graphs_captured, (long long)s.prefill_tokens, (long long)s.decode_tokens,
        (long long)s.image_cache_hits, (long long)s.image_cache_misses, (long long)s.vision_batches,
        (long long)s.vision_tiles, (long long)s.offloads, (long long)s.restores);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    try {
        ModelConfig cfg = load_model_config(o.config_dir);
        cudaDeviceProp prop{};
        cudaGetDeviceProperties(&prop, 0);
        const double copy_bw = surf::bench::copy_bandwidth();
        // Cards of one model differ measurably in this benchmark (docs/BENCHMARKS.md); the GEMM ceiling
        // beside the copy bandwidth says which kind of machine a run had (both measured before the engine
        // takes the memory).
        const double gemm_tflops = surf::bench::gemm_ceiling() / 1e12;
        const int max_c = *std::max_element(o.concurrency.begin(), o.concurrency.end());
        const cuda::CudaEngineOptions eo = engine_options(o, cfg, max_c);
        const bool split = eo.limits.state_split_applies();
        const auto tl = Clock::now();
        auto engine = cuda::open_random_cuda_engine(cfg, eo, 42);
        const double load_s = std::chrono::duration<double>(Clock::now() - tl).count();
        // The decode-only steps against the bytes this engine's decode step must move (replay-aware; §4's
        // stock formula, which writes the state every step, is printed per run too).
        const Baselines base{
            copy_bw,
            surf::bench::roofline(cfg, o.bf16_state, eo.limits.ssm_replay_window, split, o.quantize == "fp8"),
            surf::bench::roofline(cfg, o.bf16_state), eo.limits.ssm_replay_window};
        print_header(o, cfg, eo, prop, copy_bw, gemm_tflops, split, load_s, *engine);
        print_capacity(o, cfg, eo, base.roof.weight_bytes, max_c);
        uint64_t run_id = 0;
        int64_t failed = 0;
        {
            // Warm-up, not reported: GEMM tuning, first graph captures, allocator paths.
            Options warm = o;
            warm.steps = 2;
            run(*engine, warm, std::min(4, max_c), true, ++run_id);
        }
        for (const char* mode : {"stateful", "stateless"}) {
            if (o.mode != "both" && o.mode != mode) continue;
            for (int C : o.concurrency) failed += run_case(*engine, o, mode, C, ++run_id, base);
        }
        print_engine_totals(engine->stats());
        if (failed > 0) {
            std::fprintf(stderr, "bench_serve: %lld requests failed\n", static_cast<long long>(failed));
            return 1;
        }
        if (o.hf_baseline_batch > 0) {
            engine.reset();  // the baseline needs the GPU memory
            if (!run_hf_baseline(o)) return 1;
        }
    } catch (const surf::Error& e) {
        std::fprintf(stderr, "bench_serve: %s\n", e.what());
        return 2;
    }
    return 0;
}

#else
int main() {
    std::fprintf(stderr, "bench_serve: built without CUDA\n");
    return 2;
}
#endif
