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
// --gpus 0,1: the same workload on one engine per GPU behind a ReplicaEngine (model/replicas.h), with a
// line per GPU under each run (sessions placed there, steps/s, tokens/s, memory).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef SURF_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "apps/bench/bench_ceilings.h"
#include "apps/bench/bench_serve_options.h"
#include "base/error.h"
#include "model/checkpoint/config.h"
#include "model/cuda/cuda_engine.h"
#include "model/cuda/device_buffer.h"
#include "model/replicas.h"

using namespace surf::model;
using namespace surf::bench::serve;
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
           (L.small_m_k_split ? std::to_string(L.small_m_k_split) : std::string("automatic")) +
           "; FP8 inputs " +
           (L.fp8_fused_quantize ? "quantized by their producers where they can"
                                 : "quantized in a pass of their own") +
           "; FP8 GEMM products " + (L.fp8_bf16_products ? "bf16" : "fp32") + " before the scales" +
           (L.fp8_fast_accum ? ", fast accumulation" : ", accumulation promoted to fp32") +
           "; CUTLASS FP8 GEMM " +
           (!surf::kernels::cuda::Fp8GemmContext::cutlass_available() ? "not built"
            : L.fp8_cutlass                                           ? "tuned beside cuBLASLt"
                                                                      : "off") +
           "; vision tower " + (L.vit_fp8 ? "FP8" : "bf16");
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
}

// The table's head; with --gpus its last column is the engine buffers of the GPU holding the most.
void print_table_head(const Options& o) {
    std::printf(
        "| mode | C | output tok/s | total tok/s | appended tok/s | steps/s | step p50 s | step p95 s | "
        "TTFT p50 s | step %d / step 1 | "
        "decode rows | decode ms/step | decode %% roofline | %s "
        "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        o.steps, o.gpus.empty() ? "device GiB" : "device GiB (largest GPU)");
}

// The weights' bytes and how many sessions of this workload (at their last step's length) would fit: the
// device memory free now plus what this engine's state slots and KV pages hold, over a session's bytes.
void print_capacity(const Options& o, const ModelConfig& cfg, const cuda::CudaEngineOptions& eo,
                    double weight_bytes) {
    size_t free_bytes = 0, total = 0;
    SURF_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    const int64_t tokens = static_cast<int64_t>(o.steps) * tokens_per_step(o);
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
        (static_cast<double>(free_bytes) + held) / session, static_cast<int>(eo.limits.max_slots));
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

// The engines under test: one on device 0, or (--gpus) one per listed GPU behind a ReplicaEngine.
struct Engines {
    std::shared_ptr<Engine> engine;           // what the sessions call
    std::shared_ptr<ReplicaEngine> replicas;  // the same engine with --gpus, else null
    std::vector<int> gpus;                    // replica i's device
};

// Each replica's counters at one moment, to difference a run's share per GPU.
struct ReplicaSnapshot {
    std::vector<ReplicaLoad> loads;
    std::vector<EngineStats> stats;

    explicit ReplicaSnapshot(ReplicaEngine& r) : loads(r.loads()) {
        for (size_t i = 0; i < r.size(); ++i) stats.push_back(r.replica(i).stats());
    }
};

// One line per GPU under a run (--gpus): the sessions placed on it, its agent steps and engine tokens, its
// engine buffers and the device memory in use.
void print_gpu_lines(const char* mode, int C, const Engines& e, const ReplicaSnapshot& before,
                     const ReplicaSnapshot& after, double wall) {
    for (size_t i = 0; i < e.gpus.size(); ++i) {
        const EngineStats& b = before.stats[i];
        const EngineStats& a = after.stats[i];
        const int64_t tokens = a.prefill_tokens - b.prefill_tokens + a.decode_tokens - b.decode_tokens;
        size_t free_bytes = 0, total_bytes = 0;
        {
            cuda::DeviceGuard on(e.gpus[i]);
            cudaMemGetInfo(&free_bytes, &total_bytes);
        }
        std::printf(
            "#   %s C=%d: GPU %d: %lld sessions, %.2f steps/s, %.0f engine tok/s (prefill + decode), engine "
            "buffers %.1f GiB, GPU memory in use %.1f of %.1f GiB\n",
            mode, C, e.gpus[i], static_cast<long long>(after.loads[i].placed - before.loads[i].placed),
            (after.loads[i].generated - before.loads[i].generated) / wall, tokens / wall,
            a.device_bytes / 1073741824.0, (total_bytes - free_bytes) / 1073741824.0,
            total_bytes / 1073741824.0);
    }
}

// C sessions of `mode` (one run()): its table row and notes. Returns the requests that failed.
int64_t run_case(const Engines& e, const Options& o, const char* mode, int C, uint64_t run_id,
                 const Baselines& base) {
    Engine& engine = *e.engine;
    const EngineStats before = engine.stats();
    const std::optional<ReplicaSnapshot> gpus_before =
        e.replicas ? std::optional<ReplicaSnapshot>(ReplicaSnapshot(*e.replicas)) : std::nullopt;
    const RunResult r = run(engine, o, C, std::string(mode) == "stateful", run_id);
    const EngineStats after = engine.stats();
    const std::optional<ReplicaSnapshot> gpus_after =
        e.replicas ? std::optional<ReplicaSnapshot>(ReplicaSnapshot(*e.replicas)) : std::nullopt;
    int64_t device_bytes = after.device_bytes;
    if (gpus_after) {
        device_bytes = 0;
        for (const EngineStats& s : gpus_after->stats) device_bytes = std::max(device_bytes, s.device_bytes);
    }
    const DecodeOnly d(before, after, base);
    std::printf(
        "| %s | %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f "
        "| %.1f |\n",
        mode, C, r.generated / r.wall, r.processed / r.wall, r.appended / r.wall, r.steps / r.wall,
        percentile(r.step_latency, 0.5), percentile(r.step_latency, 0.95), percentile(r.ttft, 0.5),
        mean(r.last_step) / std::max(1e-9, mean(r.first_step)), d.rows_per, d.step_ms, d.roof_pct,
        device_bytes / 1073741824.0);
    print_run_notes(mode, C, r, before, after, d, base);
    if (gpus_after) print_gpu_lines(mode, C, e, *gpus_before, *gpus_after, r.wall);
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

// The engines: one on device 0, or one per --gpus device drawn and warmed up at once (a thread each; every
// GPU draws its own random weights from the same seed), each sized by `eo`.
Engines open_engines(const Options& o, const ModelConfig& cfg, const cuda::CudaEngineOptions& eo) {
    Engines e;
    if (o.gpus.empty()) {
        e.engine = cuda::open_random_cuda_engine(cfg, eo, 42);
        return e;
    }
    std::vector<std::shared_ptr<Engine>> engines(o.gpus.size());
    std::vector<std::exception_ptr> errors(o.gpus.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < o.gpus.size(); ++i) {
        threads.emplace_back([&, i] {
            try {
                cuda::CudaEngineOptions on_gpu = eo;
                on_gpu.device = o.gpus[i];
                engines[i] = cuda::open_random_cuda_engine(cfg, on_gpu, 42);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    for (const auto& error : errors)
        if (error) std::rethrow_exception(error);
    e.replicas = std::make_shared<ReplicaEngine>(engines);
    e.engine = e.replicas;
    e.gpus = o.gpus;
    return e;
}

// --gpus: every listed device exists; the first becomes this thread's (the copy bandwidth and GEMM ceiling
// are measured on it). Sessions per GPU: the largest C split evenly (least-loaded placement never puts more
// on one GPU).
int select_gpus(const Options& o, int max_c) {
    if (o.gpus.empty()) return max_c;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    for (int d : o.gpus) {
        if (d >= count)
            throw surf::Error(surf::ErrorKind::kInvalidArgument, "--gpus: device " + std::to_string(d) +
                                                                     " does not exist (" +
                                                                     std::to_string(count) + " visible)");
    }
    cudaSetDevice(o.gpus[0]);
    const int n = static_cast<int>(o.gpus.size());
    return (max_c + n - 1) / n;
}

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    try {
        ModelConfig cfg = load_model_config(o.config_dir);
        const int max_c = *std::max_element(o.concurrency.begin(), o.concurrency.end());
        const int per_engine = select_gpus(o, max_c);
        cudaDeviceProp prop{};
        cudaGetDeviceProperties(&prop, o.gpus.empty() ? 0 : o.gpus[0]);
        const double copy_bw = surf::bench::copy_bandwidth();
        // Cards of one model differ measurably in this benchmark (docs/BENCHMARKS.md); the GEMM ceiling
        // beside the copy bandwidth says which kind of machine a run had (both measured before the engine
        // takes the memory).
        const double gemm_tflops = surf::bench::gemm_ceiling() / 1e12;
        const cuda::CudaEngineOptions eo = engine_options(o, cfg, per_engine);
        const bool split = eo.limits.state_split_applies();
        const auto tl = Clock::now();
        Engines engines = open_engines(o, cfg, eo);
        Engine& engine = *engines.engine;
        const double load_s = std::chrono::duration<double>(Clock::now() - tl).count();
        // The decode-only steps against the bytes this engine's decode step must move (replay-aware; §4's
        // stock formula, which writes the state every step, is printed per run too).
        const Baselines base{
            copy_bw,
            surf::bench::roofline(cfg, o.bf16_state, eo.limits.ssm_replay_window, split, o.quantize == "fp8"),
            surf::bench::roofline(cfg, o.bf16_state), eo.limits.ssm_replay_window};
        print_header(o, cfg, eo, prop, copy_bw, gemm_tflops, split, load_s, engine);
        print_capacity(o, cfg, eo, base.roof.weight_bytes);
        if (engines.replicas) {
            std::printf(
                "# replicas: %s, one per GPU, each sized for %d sessions; a session goes to the GPU holding "
                "the fewest and stays there; copy bandwidth and GEMM ceiling measured on GPU %d, the decode "
                "roofline per GPU\n",
                engine.backend_name().c_str(), per_engine, o.gpus[0]);
        }
        print_table_head(o);
        uint64_t run_id = 0;
        int64_t failed = 0;
        {
            // Warm-up, not reported: GEMM tuning, first graph captures, allocator paths.
            Options warm = o;
            warm.steps = 2;
            run(engine, warm, std::min(4 * std::max(1, static_cast<int>(o.gpus.size())), max_c), true,
                ++run_id);
        }
        for (const char* mode : {"stateful", "stateless"}) {
            if (o.mode != "both" && o.mode != mode) continue;
            for (int C : o.concurrency) failed += run_case(engines, o, mode, C, ++run_id, base);
        }
        print_engine_totals(engine.stats());
        if (failed > 0) {
            std::fprintf(stderr, "bench_serve: %lld requests failed\n", static_cast<long long>(failed));
            return 1;
        }
        if (o.hf_baseline_batch > 0) {
            engines = Engines{};  // the baseline needs the GPU memory
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
