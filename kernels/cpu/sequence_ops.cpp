// The sequence-mixing ops as references: causal conv1d, the Mamba-2 SSD scan, attention, each the scalar
// loops of its definition. The fast forms are in sequence_ops_fast.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/cpu_ops.h"

namespace surf::kernels::cpu {

void causal_conv1d_reference(const CausalConv1dParams& p) {
    const int64_t K = p.K, C = p.channels, T = p.T;
    const int64_t x_stride = p.x_stride ? p.x_stride : C;
    SURF_CHECK(K >= 2, "causal_conv1d: K ", K);
    parallel_for(
        C,
        [&](int64_t c0, int64_t c1) {
            std::vector<float> window(K + T);  // [K-1 state inputs | T new inputs] for one channel
            for (int64_t c = c0; c < c1; ++c) {
                float* state = p.state + c * (K - 1);
                for (int64_t k = 0; k < K - 1; ++k) window[k] = state[k];
                for (int64_t t = 0; t < T; ++t) window[K - 1 + t] = p.x[t * x_stride + c];
                const float* w = p.weight + c * K;
                const float b = p.bias ? p.bias[c] : 0.0f;
                for (int64_t t = 0; t < T; ++t) {
                    float acc = b;
                    for (int64_t k = 0; k < K; ++k) acc += w[k] * window[t + k];
                    p.out[t * C + c] = acc / (1.0f + std::exp(-acc));
                }
                for (int64_t k = 0; k < K - 1; ++k) state[k] = window[T + k];
            }
        },
        64);
}

namespace {

// Token recurrence for one head: the exact definition (spec §2.1).
void ssd_recurrent_head(const SsdParams& p, int64_t h) {
    const int64_t P = p.P, N = p.N, g = h / (p.H / p.G);
    float* S = p.state + h * P * N;
    for (int64_t t = 0; t < p.T; ++t) {
        const float dt = p.dt[t * p.dt_stride + h];
        const float dA = std::exp(dt * p.A[h]);
        const float* x = p.x + t * p.x_stride + h * P;
        const float* B = p.B + t * p.bc_stride + g * N;
        const float* C = p.C + t * p.bc_stride + g * N;
        float* y = p.y + (t * p.H + h) * P;
        for (int64_t i = 0; i < P; ++i) {
            float* s = S + i * N;
            const float dtx = dt * x[i];
            float acc = 0.0f;
            for (int64_t n = 0; n < N; ++n) {
                s[n] = dA * s[n] + dtx * B[n];
                acc += s[n] * C[n];
            }
            y[i] = acc + p.D[h] * x[i];
        }
    }
}

// Chunked SSD for one head (spec §2.2): intra-chunk quadratic part + inter-chunk state passing.
void ssd_chunked_head(const SsdParams& p, int64_t h) {
    const int64_t P = p.P, N = p.N, Q = p.chunk, g = h / (p.H / p.G);
    float* S = p.state + h * P * N;
    std::vector<float> a(Q), cum(Q), next(P * N);
    for (int64_t c0 = 0; c0 < p.T; c0 += Q) {
        const int64_t len = std::min(Q, p.T - c0);
        float run = 0.0f;
        for (int64_t i = 0; i < len; ++i) {
            a[i] = p.dt[(c0 + i) * p.dt_stride + h] * p.A[h];
            run += a[i];
            cum[i] = run;  // Λ_i
        }
        for (int64_t i = 0; i < len; ++i) {
            const int64_t ti = c0 + i;
            const float* Ci = p.C + ti * p.bc_stride + g * N;
            const float* xi = p.x + ti * p.x_stride + h * P;
            float* y = p.y + (ti * p.H + h) * P;
            // Y_off = exp(Λ_i) · (S_prev · C_i)
            const float decay_in = std::exp(cum[i]);
            for (int64_t pi = 0; pi < P; ++pi) {
                float acc = 0.0f;
                for (int64_t n = 0; n < N; ++n) acc += S[pi * N + n] * Ci[n];
                y[pi] = decay_in * acc + p.D[h] * xi[pi];
            }
            // Y_diag = Σ_{j≤i} (C_i·B_j) · exp(Λ_i − Λ_j) · dt_j · x_j, with Λ_i − Λ_j as a segment sum.
            float seg = 0.0f;  // Σ_{s=j+1..i} a_s
            for (int64_t j = i; j >= 0; --j) {
                if (j < i) seg += a[j + 1];
                const int64_t tj = c0 + j;
                const float* Bj = p.B + tj * p.bc_stride + g * N;
                float cb = 0.0f;
                for (int64_t n = 0; n < N; ++n) cb += Ci[n] * Bj[n];
                const float coef = cb * std::exp(seg) * p.dt[tj * p.dt_stride + h];
                const float* xj = p.x + tj * p.x_stride + h * P;
                for (int64_t pi = 0; pi < P; ++pi) y[pi] += coef * xj[pi];
            }
        }
        // S_next = exp(Λ_Q)·S_prev + Σ_j exp(Λ_Q − Λ_j)·dt_j·x_j⊗B_j
        const float decay_all = std::exp(cum[len - 1]);
        for (int64_t k = 0; k < P * N; ++k) next[k] = decay_all * S[k];
        float seg = 0.0f;  // Σ_{s=j+1..len-1} a_s
        for (int64_t j = len - 1; j >= 0; --j) {
            if (j < len - 1) seg += a[j + 1];
            const int64_t tj = c0 + j;
            const float w = std::exp(seg) * p.dt[tj * p.dt_stride + h];
            const float* xj = p.x + tj * p.x_stride + h * P;
            const float* Bj = p.B + tj * p.bc_stride + g * N;
            for (int64_t pi = 0; pi < P; ++pi) {
                const float wx = w * xj[pi];
                for (int64_t n = 0; n < N; ++n) next[pi * N + n] += wx * Bj[n];
            }
        }
        std::copy(next.begin(), next.end(), S);
    }
}

}  // namespace

void ssd_reference(const SsdParams& p) {
    SURF_CHECK(p.H % p.G == 0, "ssd: H ", p.H, " G ", p.G);
    SURF_CHECK(p.x_stride >= p.H * p.P && p.dt_stride >= p.H && p.bc_stride >= p.G * p.N, "ssd: strides");
    if (p.T == 0) return;
    parallel_for(p.H, [&](int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
            if (p.chunk > 0)
                ssd_chunked_head(p, h);
            else
                ssd_recurrent_head(p, h);
        }
    });
}

void attention_reference(const AttentionParams& p) {
    const int64_t D = p.head_dim;
    const int64_t q_stride = p.q_stride ? p.q_stride : p.n_heads * D;
    const int64_t kv_stride = p.kv_stride ? p.kv_stride : p.n_kv_heads * D;
    const int64_t group = p.n_heads / p.n_kv_heads;
    const int64_t past = p.L - p.T;
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(D));
    SURF_CHECK(p.n_heads % p.n_kv_heads == 0 && past >= 0, "attention: heads ", p.n_heads, "/", p.n_kv_heads,
               " L ", p.L, " T ", p.T);
    parallel_for(p.T * p.n_heads, [&](int64_t w0, int64_t w1) {
        std::vector<float> scores(p.L);
        for (int64_t w = w0; w < w1; ++w) {
            const int64_t t = w / p.n_heads, h = w % p.n_heads, kvh = h / group;
            const float* q = p.q + t * q_stride + h * D;
            const int64_t visible = p.causal ? past + t + 1 : p.L;
            float max_score = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < visible; ++j) {
                const float* k = p.k + j * kv_stride + kvh * D;
                float dot = 0.0f;
                for (int64_t d = 0; d < D; ++d) dot += q[d] * k[d];
                scores[j] = dot * scale;
                max_score = std::max(max_score, scores[j]);
            }
            double denom = 0.0;
            for (int64_t j = 0; j < visible; ++j) {
                scores[j] = std::exp(scores[j] - max_score);
                denom += scores[j];
            }
            float* out = p.out + (t * p.n_heads + h) * D;
            std::fill(out, out + D, 0.0f);
            for (int64_t j = 0; j < visible; ++j) {
                const float wgt = static_cast<float>(scores[j] / denom);
                const float* v = p.v + j * kv_stride + kvh * D;
                for (int64_t d = 0; d < D; ++d) out[d] += wgt * v[d];
            }
        }
    });
}

}  // namespace surf::kernels::cpu
