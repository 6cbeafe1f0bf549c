// bench_serve's flags: the Options they fill, the usage text, the checks that refuse bad values (exit status
// 2 with a message naming the flag), and the CUDA engine's options they imply.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "apps/bench/bench_flags.h"
#include "kernels/cuda/ops.h"
#include "model/checkpoint/config.h"
#include "model/cuda/cuda_engine.h"
#include "model/vision/image_tiling.h"

namespace surf::bench::serve {

using namespace surf::model;

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
    int fp8_fused_quantize = -1;                        // GpuLimits::fp8_fused_quantize
    int fp8_bf16_products = -1;                         // GpuLimits::fp8_bf16_products
    int fp8_fast_accum = -1;                            // GpuLimits::fp8_fast_accum
    int fp8_cutlass = -1;                               // GpuLimits::fp8_cutlass
    int vit_fp8 = -1;                                   // GpuLimits::vit_fp8
    int64_t vision_min_tiles = 0, vision_max_wait = 2;  // CudaEngineOptions: vision batches across steps
    bool warm_vision = false;  // warm-up tunes the vision passes of 1 .. vision-batch tiles of screenshots
                               // (instead of every tile count)
    int warm_vision_tile_counts = -1;  // CudaEngineOptions::warm_up_vision_tile_counts
    bool warm_row_buckets = true;      // CudaEngineOptions::warm_up_row_buckets
    int hf_baseline_batch = 0;  // > 0: also run the HF transformers baseline at this batch, in this run
    int hf_baseline_steps = 2;
    // --gpus: one engine per listed device behind a ReplicaEngine (sessions placed on the least loaded GPU
    // and kept there), each sized for its share of the largest C. Empty: one engine on device 0.
    std::vector<int> gpus;
};

// --gpus "0,1": distinct device numbers; anything else is a usage error naming the item (exit status 2).
inline std::vector<int> parse_gpus(const std::string& text) {
    std::vector<int> out;
    size_t at = 0;
    for (;;) {
        const size_t comma = text.find(',', at);
        const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        const bool repeated = std::find(out.begin(), out.end(), static_cast<int>(v)) != out.end();
        if (item.empty() || *end != '\0' || v < 0 || v > 1023 || repeated) {
            std::fprintf(stderr,
                         "bench_serve: --gpus \"%s\": expected distinct device numbers, e.g. 0,1 (bad item "
                         "\"%s\")\n",
                         text.c_str(), item.c_str());
            std::exit(2);
        }
        out.push_back(static_cast<int>(v));
        if (comma == std::string::npos) return out;
        at = comma + 1;
    }
}

inline std::vector<int> parse_list(const char* text) {
    std::vector<int> out;
    for (const char* p = text; *p;) {
        out.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
    }
    return out;
}

inline constexpr const char* kUsage =
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
    "                   [--fp8-fused-quantize 0|1] [--fp8-bf16-products 0|1] [--fp8-fast-accum 0|1]\n"
    "                   [--fp8-cutlass 0|1] [--vit-fp8 0|1]\n"
    "                   [--vision-min-tiles N [--vision-max-wait STEPS]] [--warm-vision] "
    "[--warm-vision-tile-counts 0|1] [--no-warm-row-buckets]\n"
    "                   [--hf-baseline BATCH [--hf-baseline-steps 2]] [--gpus 0,1]\n";

inline std::vector<surf::bench::Flag> flag_table(Options& o) {
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
            int_flag("--fp8-fused-quantize", o.fp8_fused_quantize),
            int_flag("--fp8-bf16-products", o.fp8_bf16_products),
            int_flag("--fp8-fast-accum", o.fp8_fast_accum),
            int_flag("--fp8-cutlass", o.fp8_cutlass),
            int_flag("--vit-fp8", o.vit_fp8),
            int64_flag("--vision-min-tiles", o.vision_min_tiles),
            int64_flag("--vision-max-wait", o.vision_max_wait),
            switch_flag("--warm-vision", o.warm_vision, true),
            int_flag("--warm-vision-tile-counts", o.warm_vision_tile_counts),
            switch_flag("--no-warm-row-buckets", o.warm_row_buckets, false),
            int_flag("--hf-baseline", o.hf_baseline_batch),
            int_flag("--hf-baseline-steps", o.hf_baseline_steps),
            {"--gpus", true, [&o](const char* v) { o.gpus = parse_gpus(v); }},
            {"--image", true, [&o](const char* v) {
                 const std::string s = v;
                 o.width = std::atoi(s.c_str());
                 o.height = std::atoi(s.c_str() + s.find('x') + 1);
             }}};
}

// The 0/1 (and small-range) knobs: -1 is "not given" (the engine's default); anything else outside the
// range is a usage error.
inline void check_ranges(const Options& o) {
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
    check_range("--fp8-fused-quantize", o.fp8_fused_quantize, 0, 1);
    check_range("--fp8-bf16-products", o.fp8_bf16_products, 0, 1);
    check_range("--fp8-fast-accum", o.fp8_fast_accum, 0, 1);
    check_range("--fp8-cutlass", o.fp8_cutlass, 0, 1);
    check_range("--vit-fp8", o.vit_fp8, 0, 1);
    check_range("--pdl", o.pdl, 0, 1);
    check_range("--gemv-k-split", o.gemv_k_split, 0, 8);
}

// Refuses values outside what the knobs take (a message on stderr, exit status 2).
inline void check_options(const Options& o) {
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

inline Options parse(int argc, char** argv) {
    Options o;
    surf::bench::parse_flags(argc, argv, flag_table(o), "bench_serve", kUsage);
    check_options(o);
    return o;
}

// The GpuLimits knobs the flags set; each only when given (-1, or the switch left off, keeps the engine's
// default).
inline void apply_knobs(const Options& o, cuda::GpuLimits& L) {
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
    if (o.fp8_fused_quantize >= 0) L.fp8_fused_quantize = o.fp8_fused_quantize == 1;
    if (o.fp8_bf16_products >= 0) L.fp8_bf16_products = o.fp8_bf16_products == 1;
    if (o.fp8_fast_accum >= 0) L.fp8_fast_accum = o.fp8_fast_accum == 1;
    if (o.fp8_cutlass >= 0) L.fp8_cutlass = o.fp8_cutlass == 1;
    if (o.vit_fp8 >= 0) L.vit_fp8 = o.vit_fp8 == 1;
    L.ssm_state = o.bf16_state ? surf::kernels::cuda::DType::kBF16 : surf::kernels::cuda::DType::kF32;
    if (o.state_split >= 0) L.ssm_state_split = o.state_split == 1;
}

// The tokens a step appends to a stateful session: the screenshot (768 image tokens and their 2 markers), the
// text, the reply.
inline int64_t tokens_per_step(const Options& o) {
    return 768 + 2 + o.text_tokens + o.output_tokens;
}

// The engine sized for max_c sessions of this workload, with the flags' knobs, vision batching and warm-up.
inline cuda::CudaEngineOptions engine_options(const Options& o, const ModelConfig& cfg, int max_c) {
    cuda::CudaEngineOptions eo;
    eo.limits.max_slots = max_c + 4;
    eo.limits.max_seqs = max_c + 4;
    eo.limits.max_logit_rows = max_c + 4;
    eo.limits.max_tokens = o.prefill_chunk + max_c + 4;
    eo.limits.max_context = o.max_context;
    eo.limits.page_size = 16;
    const int64_t per_step = tokens_per_step(o);
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

}  // namespace surf::bench::serve
