// Helpers for the GPU kernel tests: device buffers with NaN poisoning, bf16 rounding on the host,
// random inputs (never zeros) and a comparison that reports max abs/rel error and the first bad index.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace surf::gpu_test {

using kernels::cuda::bf16;

inline float round_bf16(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

// Device buffer of n elements of T; poison() fills every byte with 0xFF (NaN for fp32 and bf16).
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t n) : n_(n) {
        if (n_ > 0) SURF_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), n_ * sizeof(T)));
    }
    explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
    ~DeviceBuffer() {
        if (ptr_) cudaFree(ptr_);
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), n_(o.n_) {
        o.ptr_ = nullptr;
        o.n_ = 0;
    }

    T* get() const { return ptr_; }
    size_t size() const { return n_; }
    void upload(const std::vector<T>& host) {
        REQUIRE(host.size() == n_);
        if (n_) SURF_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        SURF_CUDA_CHECK(cudaDeviceSynchronize());
        if (n_) SURF_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
        return host;
    }
    void poison() {
        if (n_) SURF_CUDA_CHECK(cudaMemset(ptr_, 0xFF, n_ * sizeof(T)));
    }

private:
    T* ptr_ = nullptr;
    size_t n_ = 0;
};

inline std::vector<bf16> to_bf16(const std::vector<float>& v) {
    std::vector<bf16> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = __float2bfloat16_rn(v[i]);
    return out;
}
inline std::vector<float> to_float(const std::vector<bf16>& v) {
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = __bfloat162float(v[i]);
    return out;
}

// Uniform in [lo, hi), resampled away from exact zero; `bf16` rounds every value to bf16 so the CPU
// reference sees exactly what the kernel sees.
inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f,
                                     bool bf16 = true) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) {
        do {
            x = dist(rng);
            if (bf16) x = round_bf16(x);
        } while (x == 0.0f);
    }
    return v;
}

// Checks |got − want| ≤ atol + rtol·|want| for every element; NaN never passes. On failure prints the
// count of bad elements, max abs/rel error, the first bad index and its values.
// max_rel_l2 > 0 also bounds ‖got − want‖ / ‖want‖ (for outputs whose elements are small averages).
inline bool compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                    float atol, float rtol, double max_rel_l2 = -1.0) {
    REQUIRE(got.size() == want.size());
    double max_abs = 0.0, max_rel = 0.0, ref_norm = 0.0, err_norm = 0.0;
    size_t bad = 0, first_bad = SIZE_MAX, nan = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], w = want[i];
        if (std::isnan(g) || std::isnan(w)) {
            ++nan;
            ++bad;
            if (first_bad == SIZE_MAX) first_bad = i;
            continue;
        }
        const double err = std::fabs(g - w);
        max_abs = std::max(max_abs, err);
        max_rel = std::max(max_rel, err / std::max(std::fabs(w), 1e-6));
        ref_norm += w * w;
        err_norm += err * err;
        if (err > atol + rtol * std::fabs(w)) {
            ++bad;
            if (first_bad == SIZE_MAX) first_bad = i;
        }
    }
    const double rel_l2 = ref_norm > 0 ? std::sqrt(err_norm / ref_norm) : std::sqrt(err_norm);
    if (max_rel_l2 > 0 && rel_l2 > max_rel_l2 && bad == 0) {
        bad = 1;
        first_bad = 0;
    }
    char line[512];
    if (bad == 0) {
        std::snprintf(line, sizeof line,
                      "[ok]   %-48s n=%zu max_abs=%.3g max_rel=%.3g rel_l2=%.3g (atol %.1g rtol %.1g)",
                      what.c_str(), got.size(), max_abs, max_rel, rel_l2, atol, rtol);
        MESSAGE(line);
        return true;
    }
    std::snprintf(
        line, sizeof line,
        "[FAIL] %-48s n=%zu bad=%zu nan=%zu max_abs=%.3g max_rel=%.3g rel_l2=%.3g first_bad=%zu got=%.6g "
        "want=%.6g (atol %.1g rtol %.1g)",
        what.c_str(), got.size(), bad, nan, max_abs, max_rel, rel_l2, first_bad,
        static_cast<double>(got[first_bad]), static_cast<double>(want[first_bad]), atol, rtol);
    FAIL_CHECK(line);
    return false;
}

}  // namespace surf::gpu_test
