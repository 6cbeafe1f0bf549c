// Checks of decoded images against Pillow's fixtures, shared by the image decoding tests (test_image,
// test_image_webp).
#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/vision/image.h"
#include "tests/test_util.h"

namespace surf::test {

inline std::vector<uint8_t> read_bytes(const std::string& path) {
    const std::string bytes = read_file(path);
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

// `image` equals Pillow's convert("RGB") as a fixture entry records it: the sampled pixels ("samples":
// [x, y, r, g, b]) and the CRC-32 of all its bytes ("crc32").
inline void check_like_pil(const model::Image& image, const nlohmann::json& entry) {
    for (const auto& s : entry["samples"]) {
        const uint8_t* p = image.at(s[0].get<int>(), s[1].get<int>());
        CHECK(int(p[0]) == s[2].get<int>());
        CHECK(int(p[1]) == s[3].get<int>());
        CHECK(int(p[2]) == s[4].get<int>());
    }
    CHECK(hex32(model::crc32(image.pixels.data(), image.pixels.size())) == entry["crc32"].get<std::string>());
}

// The largest and the mean absolute difference of `image`'s bytes from `expected` (same size).
struct PixelError {
    int max = 0;
    double mean = 0;
};
inline PixelError pixel_error(const model::Image& image, const std::vector<uint8_t>& expected) {
    PixelError e;
    double sum = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
        const int d = std::abs(int(image.pixels[i]) - int(expected[i]));
        e.max = std::max(e.max, d);
        sum += d;
    }
    e.mean = expected.empty() ? 0 : sum / static_cast<double>(expected.size());
    return e;
}

// Decodes `trials` copies of `original`, each with 1 to 8 random bytes changed: every copy decodes to an
// image whose pixels fill its size, or is refused with surf::Error (anything else fails the test). Returns
// how many decoded.
inline int decode_corrupted(const std::vector<uint8_t>& original, const std::string& name, int trials,
                            std::mt19937& rng) {
    int decoded = 0, rejected = 0;
    for (int trial = 0; trial < trials; ++trial) {
        std::vector<uint8_t> bytes = original;
        const int flips = 1 + static_cast<int>(rng() % 8);
        for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
        try {
            const model::Image image = model::decode_image(bytes, name);
            CHECK(image.pixels.size() == size_t(image.width) * image.height * 3);
            ++decoded;
        } catch (const surf::Error&) {
            ++rejected;
        }
    }
    CHECK(decoded + rejected == trials);
    return decoded;
}

}  // namespace surf::test
