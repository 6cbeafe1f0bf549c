// Small helpers shared by the test files.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"

namespace surf::test {

// n values drawn uniformly from [lo, hi).
inline std::vector<float> random_vector(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// max|a − b| over two vectors of one size.
inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    float m = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
}

// max|a − ref| / max|ref| over ref.size() values (max|a − ref| when ref is all zeros).
inline double relative_error(const float* a, const std::vector<float>& ref) {
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - ref[i])));
        max_ref = std::max(max_ref, static_cast<double>(std::fabs(ref[i])));
    }
    return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

// The message of the surf::Error `fn` throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const surf::Error& e) {
        return e.what();
    }
    return "";
}

// A fresh, empty temporary folder unique to this process and name.
inline std::string temp_dir(const std::string& name) {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("surf_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir.string();
}

// Kind of the surf::Error `fn` throws (its message in *message); fails the test when something else, or
// nothing, is thrown.
template <typename Fn>
surf::ErrorKind error_kind_of(Fn&& fn, std::string* message = nullptr) {
    try {
        fn();
    } catch (const surf::Error& e) {
        if (message) *message = e.what();
        return e.kind();
    }
    FAIL("expected a surf::Error");
    return surf::ErrorKind::kCancelled;
}

// An unsigned value as 8 hex digits (checksums in fixture comparisons).
inline std::string hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", v);
    return buf;
}

// A whole file's bytes; fails the test when it cannot be read.
inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read ", path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace surf::test
