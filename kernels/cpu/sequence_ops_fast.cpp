// The sequence-mixing ops in their fast forms: the same functions as sequence_ops.cpp, with the heavy
// parts as matrix products (gemm) and the loops over channels vectorised. tests/unit/test_cpu_fast_ops.cpp
// holds each to its reference.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace surf::kernels::cpu {

namespace {

// ------------------------------------------------------------------------------------ causal conv1d

// out[c] = SiLU(bias[c] + Σ_k w_t[k, c] · rows[k][c]) for one token; w_t is the weight transposed to [K, C].
SURF_CPU_CLONES void conv_token(float* out, const float* const* rows, const float* w_t, const float* bias,
                                int64_t C, int64_t K) {
    for (int64_t c = 0; c < C; ++c) out[c] = bias ? bias[c] : 0.0f;
    for (int64_t k = 0; k < K; ++k) {
        const float* r = rows[k];
        const float* w = w_t + k * C;
        for (int64_t c = 0; c < C; ++c) out[c] += w[c] * r[c];
    }
    for (int64_t c = 0; c < C; ++c) out[c] = vec::silu_approx(out[c]);
}

// ----------------------------------------------------------------------------------------- softmax

// Row i of the scores: s[j] ← exp(scale·s[j] − scale·max) for j < visible, 0 for visible ≤ j < width.
// Returns 1 / Σ_j s[j], by which the caller scales the row's output.
SURF_CPU_CLONES float softmax_row(float* s, int64_t visible, int64_t width, float scale) {
    constexpr int kLanes = 16;
    const float m = vec::max_of(s, visible);
    const float shift = m * scale;
    float acc[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= visible; j += kLanes)
        for (int u = 0; u < kLanes; ++u) {
            s[j + u] = vec::exp_approx(s[j + u] * scale - shift);
            acc[u] += s[j + u];
        }
    float sum = vec::sum16(acc);
    for (; j < visible; ++j) {
        s[j] = vec::exp_approx(s[j] * scale - shift);
        sum += s[j];
    }
    for (j = visible; j < width; ++j) s[j] = 0.0f;
    return 1.0f / sum;
}

SURF_CPU_CLONES void scale_row(float* x, float factor, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

// --------------------------------------------------------------------------------------------- SSD

// One token of the recurrence for one head: S ← dA·S + dt·x⊗B; y = S·C + D·x (S [P, N]).
SURF_CPU_CLONES void ssd_token_head(float* S, const float* x, const float* B, const float* C, float dt,
                                    float dA, float D, float* y, int64_t P, int64_t N) {
    constexpr int kLanes = 16;
    for (int64_t i = 0; i < P; ++i) {
        float* s = S + i * N;
        const float dtx = dt * x[i];
        float acc[kLanes] = {};
        int64_t n = 0;
        for (; n + kLanes <= N; n += kLanes)
            for (int u = 0; u < kLanes; ++u) {
                s[n + u] = dA * s[n + u] + dtx * B[n + u];
                acc[u] += s[n + u] * C[n + u];
            }
        float sum = vec::sum16(acc);
        for (; n < N; ++n) {
            s[n] = dA * s[n] + dtx * B[n];
            sum += s[n] * C[n];
        }
        y[i] = sum + D * x[i];
    }
}

// out[j] = cb[j] · exp(seg[j]) · dt[j] for j < n
SURF_CPU_CLONES void decay_weights(float* out, const float* cb, const float* seg, const float* dt,
                                   int64_t n) {
    for (int64_t j = 0; j < n; ++j) out[j] = cb[j] * vec::exp_approx(seg[j]) * dt[j];
}

// out[j, :] = scale_j · in[j, :] for the rows of a [rows, N] block (input row stride in_stride).
void scale_rows(float* out, const float* in, int64_t in_stride, const float* scale, int64_t rows, int64_t N) {
    for (int64_t j = 0; j < rows; ++j) {
        const float* src = in + j * in_stride;
        float* dst = out + j * N;
        for (int64_t n = 0; n < N; ++n) dst[n] = scale[j] * src[n];
    }
}

// Chunked SSD for one head as matrix products (spec §2.2), chunk after chunk from the running state:
//   Y      = (exp(Λ_i)·C_i) · Sᵀ + D·x + M·X,   M[i, j] = (C_i·B_j) · exp(Λ_i − Λ_j) · dt_j  (j ≤ i)
//   S_next = exp(Λ_last)·S + Xᵀ · (w ⊙ B),      w_j = exp(Λ_last − Λ_j) · dt_j
// with Λ the running sum of a = dt·A inside the chunk and Λ_i − Λ_j summed as a segment (as the reference).
// cb holds C·Bᵀ of every chunk of this head's group, [n_chunks][Q, Q].
void ssd_chunked_head_fast(const SsdParams& p, int64_t h, const float* cb) {
    const int64_t P = p.P, N = p.N, Q = p.chunk, H = p.H, g = h / (p.H / p.G);
    float* S = p.state + h * P * N;
    std::vector<float> a(Q), cum(Q), dt(Q), seg(Q), M(Q * Q), scaled(Q * N), w(Q);
    for (int64_t c0 = 0, chunk = 0; c0 < p.T; c0 += Q, ++chunk) {
        const int64_t len = std::min(Q, p.T - c0);
        float run = 0.0f;
        for (int64_t i = 0; i < len; ++i) {
            dt[i] = p.dt[(c0 + i) * p.dt_stride + h];
            a[i] = dt[i] * p.A[h];
            run += a[i];
            cum[i] = run;  // Λ_i
        }
        const float* x = p.x + c0 * p.x_stride + h * P;   // X [len, P], row stride x_stride
        const float* B = p.B + c0 * p.bc_stride + g * N;  // [len, N], row stride bc_stride
        const float* C = p.C + c0 * p.bc_stride + g * N;
        float* y = p.y + (c0 * H + h) * P;  // Y [len, P], row stride H·P

        // M, row by row: seg[j] = Σ_{s=j+1..i} a_s.
        for (int64_t i = 0; i < len; ++i) {
            seg[i] = 0.0f;
            for (int64_t j = i - 1; j >= 0; --j) seg[j] = seg[j + 1] + a[j + 1];
            float* row = M.data() + i * Q;
            decay_weights(row, cb + chunk * Q * Q + i * Q, seg.data(), dt.data(), i + 1);
            std::fill(row + i + 1, row + len, 0.0f);
        }

        // Y = (exp(Λ) ⊙ C) · Sᵀ
        for (int64_t i = 0; i < len; ++i) w[i] = std::exp(cum[i]);
        scale_rows(scaled.data(), C, p.bc_stride, w.data(), len, N);
        GemmParams off;
        off.a = scaled.data(), off.a_row = N, off.a_col = 1;
        off.b = S, off.b_row = 1, off.b_col = N;
        off.c = y, off.ldc = H * P;
        off.m = len, off.n = P, off.k = N;
        gemm(off);
        // Y += D·x
        for (int64_t i = 0; i < len; ++i)
            for (int64_t pi = 0; pi < P; ++pi) y[i * H * P + pi] += p.D[h] * x[i * p.x_stride + pi];
        // Y += M · X
        GemmParams diag;
        diag.a = M.data(), diag.a_row = Q, diag.a_col = 1;
        diag.b = x, diag.b_row = p.x_stride, diag.b_col = 1;
        diag.c = y, diag.ldc = H * P;
        diag.m = len, diag.n = P, diag.k = len;
        diag.accumulate = true;
        gemm(diag);

        // S = exp(Λ_last)·S + Xᵀ · (w ⊙ B)
        seg[len - 1] = 0.0f;
        for (int64_t j = len - 2; j >= 0; --j) seg[j] = seg[j + 1] + a[j + 1];
        for (int64_t j = 0; j < len; ++j) w[j] = std::exp(seg[j]) * dt[j];
        scale_rows(scaled.data(), B, p.bc_stride, w.data(), len, N);
        scale_row(S, std::exp(cum[len - 1]), P * N);
        GemmParams upd;
        upd.a = x, upd.a_row = 1, upd.a_col = p.x_stride;
        upd.b = scaled.data(), upd.b_row = N, upd.b_col = 1;
        upd.c = S, upd.ldc = N;
        upd.m = P, upd.n = N, upd.k = len;
        upd.accumulate = true;
        gemm(upd);
    }
}

}  // namespace

void causal_conv1d(const CausalConv1dParams& p) {
    const int64_t K = p.K, C = p.channels, T = p.T;
    const int64_t x_stride = p.x_stride ? p.x_stride : C;
    SURF_CHECK(K >= 2, "causal_conv1d: K ", K);
    if (T == 0) return;
    // The K-1 state inputs as token rows [K-1, C] and the weight as [K, C], so every loop runs over channels.
    std::vector<float> hist((K - 1) * C), w_t(K * C);
    for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < K; ++k) {
            w_t[k * C + c] = p.weight[c * K + k];
            if (k < K - 1) hist[k * C + c] = p.state[c * (K - 1) + k];
        }
    // Input token τ ∈ [−(K−1), T): a state row for τ < 0.
    auto row = [&](int64_t tau) { return tau < 0 ? hist.data() + (K - 1 + tau) * C : p.x + tau * x_stride; };
    parallel_for(
        T,
        [&](int64_t t0, int64_t t1) {
            std::vector<const float*> rows(K);
            for (int64_t t = t0; t < t1; ++t) {
                for (int64_t k = 0; k < K; ++k) rows[k] = row(t - (K - 1) + k);
                conv_token(p.out + t * C, rows.data(), w_t.data(), p.bias, C, K);
            }
        },
        std::max<int64_t>(1, 8192 / C));
    // The new state: the last K-1 inputs of [state | x].
    for (int64_t k = 0; k < K - 1; ++k) {
        const float* src = row(T - (K - 1) + k);
        for (int64_t c = 0; c < C; ++c) p.state[c * (K - 1) + k] = src[c];
    }
}

void attention(const AttentionParams& p) {
    const int64_t D = p.head_dim;
    const int64_t q_stride = p.q_stride ? p.q_stride : p.n_heads * D;
    const int64_t kv_stride = p.kv_stride ? p.kv_stride : p.n_kv_heads * D;
    const int64_t group = p.n_heads / p.n_kv_heads;
    const int64_t past = p.L - p.T;
    const float scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(D));
    SURF_CHECK(p.n_heads % p.n_kv_heads == 0 && past >= 0, "attention: heads ", p.n_heads, "/", p.n_kv_heads,
               " L ", p.L, " T ", p.T);
    if (p.T == 0) return;
    // Work items: (head, block of kQueryBlock queries). Each computes its scores S = Q·Kᵀ against the keys
    // its last query sees, the row softmax (masked past each query's position when causal) and P·V.
    constexpr int64_t kQueryBlock = 256;
    const int64_t n_blocks = (p.T + kQueryBlock - 1) / kQueryBlock;
    const int64_t out_stride = p.n_heads * D;
    parallel_for(p.n_heads * n_blocks, [&](int64_t w0, int64_t w1) {
        std::vector<float> scores, inv_sum(kQueryBlock);
        for (int64_t w = w0; w < w1; ++w) {
            const int64_t h = w / n_blocks, t0 = (w % n_blocks) * kQueryBlock, kvh = h / group;
            const int64_t rows = std::min(kQueryBlock, p.T - t0);
            const int64_t keys = p.causal ? past + t0 + rows : p.L;
            scores.resize(static_cast<size_t>(rows * keys));
            GemmParams s;  // S [rows, keys] = Q [rows, D] · Kᵀ
            s.a = p.q + t0 * q_stride + h * D, s.a_row = q_stride, s.a_col = 1;
            s.b = p.k + kvh * D, s.b_row = 1, s.b_col = kv_stride;
            s.c = scores.data(), s.ldc = keys;
            s.m = rows, s.n = keys, s.k = D;
            gemm(s);
            for (int64_t i = 0; i < rows; ++i) {
                const int64_t visible = p.causal ? past + t0 + i + 1 : p.L;
                inv_sum[i] = softmax_row(scores.data() + i * keys, visible, keys, scale);
            }
            GemmParams o;  // out [rows, D] = P [rows, keys] · V [keys, D], then each row / Σ
            o.a = scores.data(), o.a_row = keys, o.a_col = 1;
            o.b = p.v + kvh * D, o.b_row = kv_stride, o.b_col = 1;
            o.c = p.out + t0 * out_stride + h * D, o.ldc = out_stride;
            o.m = rows, o.n = D, o.k = keys;
            gemm(o);
            for (int64_t i = 0; i < rows; ++i) scale_row(o.c + i * out_stride, inv_sum[i], D);
        }
    });
}

void ssd(const SsdParams& p) {
    SURF_CHECK(p.H % p.G == 0, "ssd: H ", p.H, " G ", p.G);
    SURF_CHECK(p.x_stride >= p.H * p.P && p.dt_stride >= p.H && p.bc_stride >= p.G * p.N, "ssd: strides");
    if (p.T == 0) return;
    if (p.chunk <= 0) {  // the token recurrence
        parallel_for(
            p.H,
            [&](int64_t h0, int64_t h1) {
                for (int64_t h = h0; h < h1; ++h) {
                    const int64_t g = h / (p.H / p.G);
                    for (int64_t t = 0; t < p.T; ++t) {
                        const float dt = p.dt[t * p.dt_stride + h];
                        ssd_token_head(p.state + h * p.P * p.N, p.x + t * p.x_stride + h * p.P,
                                       p.B + t * p.bc_stride + g * p.N, p.C + t * p.bc_stride + g * p.N, dt,
                                       std::exp(dt * p.A[h]), p.D[h], p.y + (t * p.H + h) * p.P, p.P, p.N);
                    }
                }
            },
            std::max<int64_t>(1, 16384 / (p.P * p.N * p.T)));
        return;
    }
    // C·Bᵀ of every chunk, once per group (shared by the group's heads): cb [G][n_chunks][Q, Q].
    const int64_t Q = p.chunk, n_chunks = (p.T + Q - 1) / Q;
    std::vector<float> cb(static_cast<size_t>(p.G * n_chunks * Q * Q));
    parallel_for(p.G * n_chunks, [&](int64_t w0, int64_t w1) {
        for (int64_t w = w0; w < w1; ++w) {
            const int64_t g = w / n_chunks, c0 = (w % n_chunks) * Q, len = std::min(Q, p.T - c0);
            GemmParams m;
            m.a = p.C + c0 * p.bc_stride + g * p.N, m.a_row = p.bc_stride, m.a_col = 1;
            m.b = p.B + c0 * p.bc_stride + g * p.N, m.b_row = 1, m.b_col = p.bc_stride;
            m.c = cb.data() + w * Q * Q, m.ldc = Q;
            m.m = len, m.n = len, m.k = p.N;
            gemm(m);
        }
    });
    parallel_for(p.H, [&](int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
            const int64_t g = h / (p.H / p.G);
            ssd_chunked_head_fast(p, h, cb.data() + g * n_chunks * Q * Q);
        }
    });
}

}  // namespace surf::kernels::cpu
