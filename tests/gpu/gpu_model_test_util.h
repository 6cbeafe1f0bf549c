// Helpers shared by the GPU model tests (forward pass, decode graphs): golden fixture paths, KV page lists,
// and the max-relative error the bf16 thresholds are written against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace surf::gpu_test {

inline std::string golden_fixture(const std::string& name) {
    return std::string(SURF_FIXTURES_DIR) + "/golden/" + name;
}

// Consecutive KV pages from `first_page` covering `tokens` tokens.
inline std::vector<int32_t> pages_for(int64_t tokens, int64_t page_size, int32_t first_page) {
    std::vector<int32_t> pages(static_cast<size_t>((tokens + page_size - 1) / page_size));
    std::iota(pages.begin(), pages.end(), first_page);
    return pages;
}

// max|a − ref| / max|ref| (infinite when `a` has a non-finite value).
inline double max_rel_err(const float* a, const std::vector<float>& ref) {
    double diff = 0, mx = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        diff = std::max(diff, static_cast<double>(std::fabs(a[i] - ref[i])));
        mx = std::max(mx, static_cast<double>(std::fabs(ref[i])));
    }
    return mx > 0 ? diff / mx : diff;
}

}  // namespace surf::gpu_test
