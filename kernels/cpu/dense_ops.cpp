// Linear layers (the reference; the fast form is gemm.cpp), norms, activations, resizes: the row-wise ops.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vec_math.h"

namespace surf::kernels::cpu {

void linear_reference(const LinearParams& p) {
    SURF_CHECK(p.x && p.w && p.y, "linear: null pointer");
    // Parallel over output features; each dot product accumulates in fp32 with 8 partial sums.
    parallel_for(
        p.n,
        [&](int64_t n0, int64_t n1) {
            for (int64_t row = 0; row < p.m; ++row) {
                const float* x = p.x + row * p.k;
                for (int64_t o = n0; o < n1; ++o) {
                    const float* w = p.w + o * p.k;
                    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    int64_t i = 0;
                    for (; i + 8 <= p.k; i += 8) {
                        for (int u = 0; u < 8; ++u) acc[u] += x[i + u] * w[i + u];
                    }
                    float sum =
                        ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                    for (; i < p.k; ++i) sum += x[i] * w[i];
                    p.y[row * p.n + o] = sum + (p.bias ? p.bias[o] : 0.0f);
                }
            }
        },
        16);
}

void rmsnorm_reference(const RmsNormParams& p) {
    parallel_for(p.rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* x = p.x + r * p.dim;
            float* src = nullptr;
            if (p.residual) {
                src = p.residual + r * p.dim;
                for (int64_t i = 0; i < p.dim; ++i) src[i] += x[i];
            }
            const float* in = src ? src : x;
            double sum = 0.0;
            for (int64_t i = 0; i < p.dim; ++i) sum += static_cast<double>(in[i]) * in[i];
            const float inv = 1.0f / std::sqrt(static_cast<float>(sum / p.dim) + p.eps);
            float* y = p.y + r * p.dim;
            for (int64_t i = 0; i < p.dim; ++i) y[i] = p.weight[i] * (in[i] * inv);
        }
    });
}

void gated_rmsnorm_reference(const GatedRmsNormParams& p) {
    SURF_CHECK(p.group_size > 0 && p.dim % p.group_size == 0, "gated_rmsnorm: group ", p.group_size, " dim ",
               p.dim);
    const int64_t z_stride = p.z_stride ? p.z_stride : p.dim;
    parallel_for(p.rows, [&](int64_t r0, int64_t r1) {
        std::vector<float> v(p.dim);
        for (int64_t r = r0; r < r1; ++r) {
            const float* y = p.y + r * p.dim;
            const float* z = p.z + r * z_stride;
            for (int64_t i = 0; i < p.dim; ++i) v[i] = y[i] * (z[i] / (1.0f + std::exp(-z[i])));
            float* out = p.out + r * p.dim;
            for (int64_t g0 = 0; g0 < p.dim; g0 += p.group_size) {
                double sum = 0.0;
                for (int64_t i = g0; i < g0 + p.group_size; ++i) sum += static_cast<double>(v[i]) * v[i];
                const float inv = 1.0f / std::sqrt(static_cast<float>(sum / p.group_size) + p.eps);
                for (int64_t i = g0; i < g0 + p.group_size; ++i) out[i] = p.weight[i] * (v[i] * inv);
            }
        }
    });
}

void layernorm_reference(const LayerNormParams& p) {
    parallel_for(p.rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* x = p.x + r * p.dim;
            double mean = 0.0;
            for (int64_t i = 0; i < p.dim; ++i) mean += x[i];
            mean /= p.dim;
            double var = 0.0;
            for (int64_t i = 0; i < p.dim; ++i) var += (x[i] - mean) * (x[i] - mean);
            var /= p.dim;
            const float inv = 1.0f / std::sqrt(static_cast<float>(var) + p.eps);
            float* y = p.y + r * p.dim;
            for (int64_t i = 0; i < p.dim; ++i) {
                y[i] = (x[i] - static_cast<float>(mean)) * inv * p.weight[i] + (p.bias ? p.bias[i] : 0.0f);
            }
        }
    });
}

void gelu_erf_reference(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

void silu_reference(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void bilinear_resize(const BilinearParams& p) {
    // PyTorch align_corners=False: src = (dst + 0.5) · in/out − 0.5, clamped at 0; the upper
    // neighbour index is clamped to in−1.
    auto coords = [](int64_t dst, int64_t in, int64_t out, int64_t* i0, int64_t* i1, float* w1) {
        const float scale = static_cast<float>(in) / static_cast<float>(out);
        float src = (static_cast<float>(dst) + 0.5f) * scale - 0.5f;
        if (src < 0.0f) src = 0.0f;
        *i0 = static_cast<int64_t>(src);
        if (*i0 > in - 1) *i0 = in - 1;
        *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
        *w1 = src - static_cast<float>(*i0);
    };
    for (int64_t c = 0; c < p.channels; ++c) {
        const float* in = p.in + c * p.in_h * p.in_w;
        float* out = p.out + c * p.out_h * p.out_w;
        for (int64_t oy = 0; oy < p.out_h; ++oy) {
            int64_t y0, y1;
            float wy;
            coords(oy, p.in_h, p.out_h, &y0, &y1, &wy);
            for (int64_t ox = 0; ox < p.out_w; ++ox) {
                int64_t x0, x1;
                float wx;
                coords(ox, p.in_w, p.out_w, &x0, &x1, &wx);
                const float top = (1.0f - wx) * in[y0 * p.in_w + x0] + wx * in[y0 * p.in_w + x1];
                const float bottom = (1.0f - wx) * in[y1 * p.in_w + x0] + wx * in[y1 * p.in_w + x1];
                out[oy * p.out_w + ox] = (1.0f - wy) * top + wy * bottom;
            }
        }
    }
}

void pixel_shuffle(const PixelShuffleParams& p) {
    const int64_t s = p.factor, side = p.side, C = p.channels, out_side = side / s;
    SURF_CHECK(side % s == 0, "pixel_shuffle: side ", side, " not divisible by ", s);
    for (int64_t i = 0; i < side; ++i) {
        for (int64_t j = 0; j < side; ++j) {
            const float* src = p.in + (i * side + j) * C;
            float* dst = p.out + ((i / s) * out_side + j / s) * (s * s * C) + (i % s) * s * C + (j % s) * C;
            for (int64_t c = 0; c < C; ++c) dst[c] = src[c];
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Fast forms: the same formulas with 16 float partial sums instead of one double, erf and exp from
// vec_math.h, compiled per instruction set; the tests hold them to the references above.

namespace {

constexpr int kLanes = 16;

// Rows per thread so that a worker gets at least ~16K elements (fewer run on the calling thread).
int64_t rows_per_task(int64_t dim) {
    return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, dim));
}

SURF_CPU_CLONES float sum_of_squares(const float* x, int64_t n) {
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int u = 0; u < kLanes; ++u) acc[u] += x[i + u] * x[i + u];
    float sum = vec::sum16(acc);
    for (; i < n; ++i) sum += x[i] * x[i];
    return sum;
}

SURF_CPU_CLONES float sum_of(const float* x, int64_t n) {
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int u = 0; u < kLanes; ++u) acc[u] += x[i + u];
    float sum = vec::sum16(acc);
    for (; i < n; ++i) sum += x[i];
    return sum;
}

SURF_CPU_CLONES void add_into(float* dst, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] += x[i];
}

// y = w ⊙ x · inv
SURF_CPU_CLONES void scale_by_weight(float* y, const float* x, const float* w, float inv, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

// v = y ⊙ SiLU(z)
SURF_CPU_CLONES void silu_gate(float* v, const float* y, const float* z, int64_t n) {
    for (int64_t i = 0; i < n; ++i) v[i] = y[i] * vec::silu_approx(z[i]);
}

// y = (x − mean)·inv·w + b
SURF_CPU_CLONES void affine_normalise(float* y, const float* x, float mean, float inv, const float* w,
                                      const float* b, int64_t n) {
    if (b) {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * w[i] + b[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * w[i];
    }
}

SURF_CPU_CLONES float sum_of_squared_deviations(const float* x, float mean, int64_t n) {
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int u = 0; u < kLanes; ++u) acc[u] += (x[i + u] - mean) * (x[i + u] - mean);
    float sum = vec::sum16(acc);
    for (; i < n; ++i) sum += (x[i] - mean) * (x[i] - mean);
    return sum;
}

SURF_CPU_CLONES void gelu_erf_block(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        x[i] = 0.5f * x[i] * (1.0f + vec::erf_approx(x[i] * 0.70710678118654752f));
}

SURF_CPU_CLONES void relu_squared_block(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        x[i] = r * r;
    }
}

SURF_CPU_CLONES void silu_block(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = vec::silu_approx(x[i]);
}

}  // namespace

void rmsnorm(const RmsNormParams& p) {
    parallel_for(
        p.rows,
        [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                const float* in = p.x + r * p.dim;
                if (p.residual) {
                    float* res = p.residual + r * p.dim;
                    add_into(res, in, p.dim);
                    in = res;
                }
                const float inv =
                    1.0f / std::sqrt(sum_of_squares(in, p.dim) / static_cast<float>(p.dim) + p.eps);
                scale_by_weight(p.y + r * p.dim, in, p.weight, inv, p.dim);
            }
        },
        rows_per_task(p.dim));
}

void gated_rmsnorm(const GatedRmsNormParams& p) {
    SURF_CHECK(p.group_size > 0 && p.dim % p.group_size == 0, "gated_rmsnorm: group ", p.group_size, " dim ",
               p.dim);
    const int64_t z_stride = p.z_stride ? p.z_stride : p.dim;
    parallel_for(
        p.rows,
        [&](int64_t r0, int64_t r1) {
            std::vector<float> v(p.dim);
            for (int64_t r = r0; r < r1; ++r) {
                silu_gate(v.data(), p.y + r * p.dim, p.z + r * z_stride, p.dim);
                float* out = p.out + r * p.dim;
                for (int64_t g0 = 0; g0 < p.dim; g0 += p.group_size) {
                    const float ms =
                        sum_of_squares(v.data() + g0, p.group_size) / static_cast<float>(p.group_size);
                    scale_by_weight(out + g0, v.data() + g0, p.weight + g0, 1.0f / std::sqrt(ms + p.eps),
                                    p.group_size);
                }
            }
        },
        rows_per_task(p.dim));
}

void layernorm(const LayerNormParams& p) {
    parallel_for(
        p.rows,
        [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                const float* x = p.x + r * p.dim;
                const float mean = sum_of(x, p.dim) / static_cast<float>(p.dim);
                const float var = sum_of_squared_deviations(x, mean, p.dim) / static_cast<float>(p.dim);
                affine_normalise(p.y + r * p.dim, x, mean, 1.0f / std::sqrt(var + p.eps), p.weight, p.bias,
                                 p.dim);
            }
        },
        rows_per_task(p.dim));
}

void relu_squared(float* x, int64_t n) {
    parallel_for(
        n, [&](int64_t i0, int64_t i1) { relu_squared_block(x + i0, i1 - i0); }, 1 << 15);
}

void gelu_erf(float* x, int64_t n) {
    parallel_for(
        n, [&](int64_t i0, int64_t i1) { gelu_erf_block(x + i0, i1 - i0); }, 1 << 15);
}

void silu(float* x, int64_t n) {
    parallel_for(
        n, [&](int64_t i0, int64_t i1) { silu_block(x + i0, i1 - i0); }, 1 << 15);
}

}  // namespace surf::kernels::cpu
