// WebP decoding (model/vision/image.h through OpenCV's imgcodecs) against Pillow: the files of
// tests/fixtures/image/webp are Pillow's encodes, and webp.json holds Pillow's `convert("RGB")` of each
// (tests/reference/make_webp_fixtures.py). Sizes are read from the header before any pixel is decoded.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/vision/image.h"
#include "model/vision/image_opencv.h"
#include "tests/test_util.h"
#include "tests/unit/image_checks.h"

using namespace surf::model;
using surf::ErrorKind;
using surf::test::error_kind_of;
using surf::test::hex32;
using surf::test::read_bytes;

namespace {

const std::string kDir = std::string(SURF_FIXTURES_DIR) + "/image/webp/";

nlohmann::json fixture() {
    return nlohmann::json::parse(surf::test::read_file(kDir + "webp.json"));
}

// A lossless WebP header (VP8L) declaring width × height, without pixel data.
std::vector<uint8_t> vp8l_header(uint32_t width, uint32_t height) {
    std::vector<uint8_t> b = {'R', 'I', 'F', 'F', 26,  0,  0, 0, 'W', 'E', 'B',
                              'P', 'V', 'P', '8', 'L', 13, 0, 0, 0,   0x2f};
    const uint32_t bits = (width - 1) | (height - 1) << 14;
    for (int s = 0; s < 32; s += 8) b.push_back(static_cast<uint8_t>(bits >> s));
    b.resize(34, 0);
    return b;
}

// An extended WebP header (VP8X) declaring a canvas of width × height.
std::vector<uint8_t> vp8x_header(uint32_t width, uint32_t height) {
    std::vector<uint8_t> b = {'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P',
                              'V', 'P', '8', 'X', 10, 0, 0, 0, 0,   0,   0,   0};
    for (uint32_t v : {width - 1, height - 1})
        for (int s = 0; s < 24; s += 8) b.push_back(static_cast<uint8_t>(v >> s));
    return b;
}

}  // namespace

TEST_CASE("WebP decodes like Pillow: lossless exactly, lossy within libwebp's rounding") {
    if (!opencv_decoding_available()) {
        std::string message;
        CHECK(error_kind_of([] { load_image(kDir + "lossless_rgb.webp"); }, &message) ==
              ErrorKind::kUnsupported);
        CHECK(message.find("OpenCV") != std::string::npos);
        return;
    }
    int lossless = 0, lossy = 0;
    const nlohmann::json files = fixture();
    for (const auto& [name, entry] : files.items()) {
        CAPTURE(name);
        const Image image = load_image(kDir + name);
        REQUIRE(image.width == entry["width"].get<int>());
        REQUIRE(image.height == entry["height"].get<int>());
        REQUIRE(image.channels == 3);
        if (entry["lossless"].get<bool>()) {
            surf::test::check_like_pil(image, entry);
            ++lossless;
        } else {
            const std::vector<uint8_t> expected = read_bytes(kDir + entry["raw_rgb"].get<std::string>());
            REQUIRE(image.pixels.size() == expected.size());
            const surf::test::PixelError err = surf::test::pixel_error(image, expected);
            MESSAGE(name, ": OpenCV vs Pillow max |diff| = ", err.max, ", mean = ", err.mean);
            CHECK(err.max <= 3);
            CHECK(err.mean < 0.5);
            ++lossy;
        }
        if (entry.contains("crc32_on_white")) {  // vLLM's loader: alpha pasted onto white
            const Image on_white = load_image(kDir + name, AlphaMode::kCompositeOnWhite);
            CHECK(hex32(crc32(on_white.pixels.data(), on_white.pixels.size())) ==
                  entry["crc32_on_white"].get<std::string>());
        }
    }
    CHECK(lossless == 2);
    CHECK(lossy == 1);
}

TEST_CASE("a WebP bomb is refused from its header, before OpenCV decodes anything") {
    std::string message;
    for (const auto& header : {vp8x_header(20000, 20000), vp8x_header(1, 100000)}) {
        CHECK(error_kind_of([&] { decode_image(header, "bomb.webp"); }, &message) ==
              ErrorKind::kResourceExhausted);
        CHECK(message.find("bomb.webp") != std::string::npos);
    }
    // A lossless header's 14-bit sizes stay within the side limit; a caller's pixel limit (surf serve's)
    // holds.
    const std::vector<uint8_t> big = vp8l_header(16384, 16384);
    CHECK(error_kind_of(
              [&] { decode_image(big.data(), big.size(), "big.webp", AlphaMode::kDrop, 4096 * 4096); },
              &message) == ErrorKind::kResourceExhausted);
    CHECK(message.find("16384x16384") != std::string::npos);
    // Within the limits but without pixel data: a format error (or, without OpenCV, unsupported).
    const ErrorKind kind = error_kind_of([&] { decode_image(vp8l_header(64, 48), "empty.webp"); }, &message);
    CHECK(kind == (opencv_decoding_available() ? ErrorKind::kFormat : ErrorKind::kUnsupported));
    CHECK(message.find("empty.webp") != std::string::npos);
}

TEST_CASE("truncated and corrupted WebP files are errors, never crashes") {
    if (!opencv_decoding_available()) return;
    const std::vector<uint8_t> original = read_bytes(kDir + "lossy_rgb.webp");
    for (size_t cut = 0; cut < original.size(); cut += 97) {
        CAPTURE(cut);
        const std::vector<uint8_t> bytes(original.begin(),
                                         original.begin() + static_cast<std::ptrdiff_t>(cut));
        CHECK(error_kind_of([&] { decode_image(bytes, "cut.webp"); }) == ErrorKind::kFormat);
    }
    std::mt19937 rng(5);
    for (const char* name : {"lossless_rgb.webp", "lossy_rgb.webp"}) {
        CAPTURE(name);
        surf::test::decode_corrupted(read_bytes(kDir + name), name, 200, rng);
    }
}
