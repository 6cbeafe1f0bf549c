// Branch-free float math for the fast CPU kernels: exp and erf as polynomials that the compiler
// vectorises (no calls, no branches), and SURF_CPU_CLONES, which compiles a loop once per instruction set
// (AVX-512, AVX2+FMA, baseline) and picks the version at load time (GCC/Clang target_clones), so the
// default build stays portable (no -march flags).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && __GNUC__ >= 11
#define SURF_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define SURF_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#elif defined(__x86_64__) && defined(__clang__) && defined(__ELF__) && __clang_major__ >= 14
#define SURF_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SURF_CPU_CLONES
#endif

namespace surf::kernels::cpu::vec {

inline float bits_to_float(int32_t i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}

// e^x with a relative error of about 2 ulp (Cephes expf: x = n·ln2 + r, |r| ≤ ln2/2, a degree-6
// polynomial for e^r, 2^n put into the exponent bits). Below −87.3 (where e^x would be subnormal) it
// returns 0, −inf included; above 88.3 it returns e^88.3 (2^n must stay a normal float).
inline float exp_approx(float x) {
    const float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
    const float kRound = 12582912.0f;  // 1.5·2²³: adding and subtracting it rounds to the nearest integer
    const float xc = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
    const float n = (xc * kLog2e + kRound) - kRound;
    const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float er = p * (r * r) + r + 1.0f;
    const float scale = bits_to_float((static_cast<int32_t>(n) + 127) << 23);
    return x < -87.3f ? 0.0f : er * scale;
}

// erf(x) as the odd rational minimax approximation of Eigen/XLA on [−4, 4] (±1 beyond, exactly as
// float erf is there); absolute error below 1e-6.
inline float erf_approx(float x) {
    const float xc = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
    const float x2 = xc * xc;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    p = p * xc;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return p / q;
}

inline float silu_approx(float x) {
    return x / (1.0f + exp_approx(-x));
}

// Σ of 16 partial sums (the lanes of a vectorised reduction), added pairwise.
inline float sum16(const float* acc) {
    float t[8];
    for (int u = 0; u < 8; ++u) t[u] = acc[u] + acc[u + 8];
    return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

// max(x[0..n)) for n ≥ 1. Written with an 8-float vector type because GCC does not vectorise a float max
// reduction (nor 16 scalar lanes of it) without -ffast-math; in a SURF_CPU_CLONES caller it compiles to
// vmaxps on AVX2/AVX-512 and to plain max on the baseline.
inline float max_of(const float* x, int64_t n) {
    typedef float Float8 __attribute__((vector_size(32)));
    float best = x[0];
    int64_t i = 0;
    if (n >= 8) {
        Float8 m;
        std::memcpy(&m, x, sizeof m);
        for (i = 8; i + 8 <= n; i += 8) {
            Float8 v;
            std::memcpy(&v, x + i, sizeof v);
            m = v > m ? v : m;
        }
        for (int u = 0; u < 8; ++u) best = m[u] > best ? m[u] : best;
    }
    for (; i < n; ++i) best = x[i] > best ? x[i] : best;
    return best;
}

}  // namespace surf::kernels::cpu::vec
