// The ceilings the GPU benchmarks report against, measured on this card in the same run: device-to-device
// copy bandwidth (bytes read + written per second over a 1 GiB copy) and an 8192³ bf16 GEMM through the
// kernel library, on random operands (constant ones draw less power and let the clocks boost past what
// real GEMMs get). Each is the median of 10 timed repetitions after 3 warm-ups. And the bytes a decode step
// must move (spec/serving.md §4), which the decode timings are put against.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/random_fill.h"
#include "model/checkpoint/config.h"

namespace surf::bench {

// Median milliseconds of `fn` (work enqueued on the default stream).
inline double median_ms(const std::function<void()>& fn, int reps = 10, int warmup = 3) {
    for (int i = 0; i < warmup; ++i) fn();
    SURF_CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    SURF_CUDA_CHECK(cudaEventCreate(&a));
    SURF_CUDA_CHECK(cudaEventCreate(&b));
    std::vector<float> ms(static_cast<size_t>(reps));
    for (float& m : ms) {
        SURF_CUDA_CHECK(cudaEventRecord(a));
        fn();
        SURF_CUDA_CHECK(cudaEventRecord(b));
        SURF_CUDA_CHECK(cudaEventSynchronize(b));
        SURF_CUDA_CHECK(cudaEventElapsedTime(&m, a, b));
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Bytes read + written per second by a 1 GiB device-to-device copy.
inline double copy_bandwidth() {
    namespace kc = surf::kernels::cuda;
    const size_t bytes = size_t{1} << 30;
    void *a = nullptr, *b = nullptr;
    SURF_CUDA_CHECK(cudaMalloc(&a, bytes));
    SURF_CUDA_CHECK(cudaMalloc(&b, bytes));
    kc::uniform_fill({a, false, static_cast<int64_t>(bytes / 4), -1.0f, 1.0f, 1}, nullptr);
    const double ms =
        median_ms([&] { SURF_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
    SURF_CUDA_CHECK(cudaFree(a));
    SURF_CUDA_CHECK(cudaFree(b));
    return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
}

// FLOP/s of an 8192³ bf16 GEMM (fp32 accumulation, bf16 output) on random operands.
inline double gemm_ceiling() {
    namespace kc = surf::kernels::cuda;
    const int64_t n = 8192;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    for (void** p : {&a, &b, &c}) SURF_CUDA_CHECK(cudaMalloc(p, static_cast<size_t>(n * n) * 2));
    kc::uniform_fill({a, true, n * n, -1.0f, 1.0f, 2}, nullptr);
    kc::uniform_fill({b, true, n * n, -1.0f, 1.0f, 3}, nullptr);
    kc::GemmContext ctx;
    const kc::GemmParams p{
        static_cast<kc::bf16*>(a), static_cast<kc::bf16*>(b), nullptr, c, kc::DType::kBF16, n, n, n};
    const double ms = median_ms([&] { kc::gemm(ctx, p, nullptr); });
    for (void* q : {a, b, c}) SURF_CUDA_CHECK(cudaFree(q));
    return 2.0 * static_cast<double>(n) * n * n / (ms * 1e-3);
}

// Bytes a decode step must move (spec/serving.md §4): the non-embedding weights once, plus per
// sequence its SSM + conv state read and written and its KV read. With a replay window K (GpuLimits::
// ssm_replay_window) a row reads its SSM state every step but writes it every K-th, and reads its ≤ K − 1
// pending tokens' inputs ((K − 1) / 2 on average) and writes its own: §4's stock formula is the K = 0 case.
// `split_state` (GpuLimits::ssm_state_split, fp32 with replay): a row that does not fold reads only the bf16
// plane of its state (2 bytes a value); the folding row reads and writes both planes (4).
struct Roofline {
    double weight_bytes = 0, state_rw_bytes = 0, kv_bytes_per_token = 0;
    // A step of `rows` sequences reading `context_tokens` KV tokens in all.
    double step_bytes(double rows, double context_tokens) const {
        return weight_bytes + rows * state_rw_bytes + context_tokens * kv_bytes_per_token;
    }
};

// `fp8`: the language model's linear layers in E4M3 (one byte a weight; the lm_head stays bf16).
inline Roofline roofline(const model::ModelConfig& cfg, bool bf16_state, int64_t replay_window = 0,
                         bool split_state = false, bool fp8 = false) {
    using model::LayerKind;
    const model::LlmConfig& c = cfg.llm;
    const double head = static_cast<double>(c.vocab_size) *
                        c.hidden_size;  // lm_head (the embedding row gather is negligible)
    double params = 0;
    for (LayerKind k : c.layers) {
        params += c.hidden_size;
        if (k == LayerKind::kMamba2)
            params += static_cast<double>(c.in_proj_dim()) * c.hidden_size +
                      static_cast<double>(c.d_inner()) * c.hidden_size;
        if (k == LayerKind::kMlp) params += 2.0 * c.intermediate_size * c.hidden_size;
        if (k == LayerKind::kAttention)
            params += static_cast<double>((c.n_heads * 2 + c.n_kv_heads * 2) * c.head_dim) * c.hidden_size;
    }
    Roofline r;
    r.weight_bytes = 2.0 * head + (fp8 ? 1.0 : 2.0) * params;
    const double ssm =
        static_cast<double>(c.mamba_n_heads * c.mamba_head_dim * c.d_state) * (bf16_state ? 2 : 4);
    const double conv = static_cast<double>(c.conv_dim() * (c.conv_kernel - 1)) * 2;
    const double layers = static_cast<double>(c.count(LayerKind::kMamba2));
    if (replay_window > 0) {
        const double K = static_cast<double>(replay_window);
        const double entry = 2.0 * static_cast<double>(c.mamba_n_heads * c.mamba_head_dim +
                                                       c.n_groups * c.d_state + c.mamba_n_heads);
        const double ssm_step =
            split_state && !bf16_state ? ssm * ((K - 1.0) / K * 0.5 + 2.0 / K) : ssm * (1.0 + 1.0 / K);
        r.state_rw_bytes = layers * (ssm_step + 2.0 * conv + entry * ((K - 1.0) / 2.0 + (K - 1.0) / K));
    } else {
        r.state_rw_bytes = 2.0 * layers * (ssm + conv);
    }
    r.kv_bytes_per_token =
        static_cast<double>(c.count(LayerKind::kAttention)) * 2 * c.n_kv_heads * c.head_dim * 2;
    return r;
}

// Device bytes one resident session holds: its state slot (conv + SSM state and, with a replay window, its
// replay entries) and the KV pages of `tokens` tokens (pages of 16).
inline double session_bytes(const model::ModelConfig& cfg, bool bf16_state, int64_t replay_window,
                            int64_t tokens) {
    using model::LayerKind;
    const model::LlmConfig& c = cfg.llm;
    const double layers = static_cast<double>(c.count(LayerKind::kMamba2));
    const double ssm =
        static_cast<double>(c.mamba_n_heads * c.mamba_head_dim * c.d_state) * (bf16_state ? 2 : 4);
    const double conv = static_cast<double>(c.conv_dim() * (c.conv_kernel - 1)) * 2;
    const double replay = static_cast<double>(replay_window) * 2.0 *
                          static_cast<double>(kernels::cuda::ssm_replay_entry_elems(
                              c.mamba_n_heads, c.mamba_head_dim, c.n_groups, c.d_state));
    const double kv = static_cast<double>(c.count(LayerKind::kAttention)) * 2 * c.n_kv_heads * c.head_dim * 2;
    return layers * (ssm + conv + replay) + kv * static_cast<double>((tokens + 15) / 16 * 16);
}

}  // namespace surf::bench
