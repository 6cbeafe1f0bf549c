// GIF decoding (model/vision/image_gif.cpp, through model::decode_image) against Pillow: the files of
// tests/fixtures/image/gif are Pillow's encodes and GIFs written byte by byte, and gif.json holds Pillow's
// `convert("RGB")` of each (tests/reference/make_gif_fixtures.py). Every cut of a file is refused, random
// corruptions never crash, and a canvas over the limits is refused before any pixel is allocated.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/vision/image.h"
#include "tests/test_util.h"
#include "tests/unit/image_checks.h"

using namespace surf::model;
using surf::ErrorKind;
using surf::test::error_kind_of;
using surf::test::read_bytes;

namespace {

const std::string kDir = std::string(SURF_FIXTURES_DIR) + "/image/gif/";

nlohmann::json fixture() {
    return nlohmann::json::parse(surf::test::read_file(kDir + "gif.json"));
}

// A GIF whose logical screen is width × height, with one 1×1 frame.
std::vector<uint8_t> screen_of(uint16_t width, uint16_t height) {
    std::vector<uint8_t> b = {
        'G',  'I', 'F',  '8',  '9', 'a', 0,   0,   0,   0,  // signature, screen size (below)
        0x80, 0,   0,    0,    0,   0,   255, 255, 255,     // a two-colour global palette
        0x2C, 0,   0,    0,    0,   1,   0,   1,   0,   0,  // a 1×1 frame at (0, 0)
        2,    2,   0x4C, 0x01, 0,                           // LZW: clear, index 1, end
        0x3B};
    b[6] = static_cast<uint8_t>(width), b[7] = static_cast<uint8_t>(width >> 8);
    b[8] = static_cast<uint8_t>(height), b[9] = static_cast<uint8_t>(height >> 8);
    return b;
}

}  // namespace

TEST_CASE("GIF's first frame decodes like Pillow's convert(\"RGB\")") {
    const nlohmann::json f = fixture();
    REQUIRE(f.size() >= 10);
    for (const auto& [name, entry] : f.items()) {
        INFO(name);
        const Image image = load_image(kDir + name);
        REQUIRE(image.width == entry["width"].get<int>());
        REQUIRE(image.height == entry["height"].get<int>());
        surf::test::check_like_pil(image, entry);
        // vLLM's loader composites only RGBA images onto white; a GIF's first frame is a palette image.
        CHECK(load_image(kDir + name, AlphaMode::kCompositeOnWhite).pixels == image.pixels);
    }
}

TEST_CASE("GIF: the screen size is checked against the limits before any pixel is allocated") {
    CHECK(decode_image(screen_of(3, 2)).width == 3);
    CHECK(error_kind_of([] { decode_image(screen_of(65535, 65535)); }) == ErrorKind::kResourceExhausted);
    const std::vector<uint8_t> big = screen_of(4000, 4000);
    CHECK(error_kind_of([&] {
              decode_image(big.data(), big.size(), "big.gif", AlphaMode::kDrop, 1000 * 1000);
          }) == ErrorKind::kResourceExhausted);
    std::vector<uint8_t> no_frame = screen_of(3, 2);
    no_frame.resize(19);  // the header and the palette
    no_frame.push_back(0x3B);
    std::string message;
    CHECK(error_kind_of([&] { decode_image(no_frame); }, &message) == ErrorKind::kFormat);
    CHECK(message.find("has no image") != std::string::npos);
}

TEST_CASE("GIF: every cut of a file is refused as a format error, naming the file") {
    for (const char* name : {"noise_interlaced.gif", "offset_transparent.gif", "no_palette.gif"}) {
        const std::vector<uint8_t> bytes = read_bytes(kDir + name);
        // From the full signature (a shorter cut is no GIF at all) to before the frame's closing block and
        // the trailer, which the first frame does not need.
        for (size_t cut = 6; cut + 2 < bytes.size(); cut += (cut < 64 ? 1 : 97)) {
            INFO(std::string(name) << " cut at " << cut);
            std::string message;
            CHECK(error_kind_of([&] { decode_image(bytes.data(), cut, name); }, &message) ==
                  ErrorKind::kFormat);
            CHECK(message.find(name) != std::string::npos);
        }
    }
}

TEST_CASE("GIF: random corruptions decode or are refused, never crash") {
    std::mt19937 rng(5);
    for (const char* name : {"noise.gif", "offset_frame.gif", "past_palette.gif", "local_palette.gif"}) {
        INFO(std::string(name));
        surf::test::decode_corrupted(read_bytes(kDir + name), name, 400, rng);
    }
    // Codes before they are defined, and code sizes out of range.
    std::vector<uint8_t> bad = screen_of(1, 1);
    bad[bad.size() - 4] = 0x3C;  // the first code after the clear is 7: not yet in the table
    CHECK(error_kind_of([&] { decode_image(bad); }) == ErrorKind::kFormat);
    bad = screen_of(1, 1);
    bad[bad.size() - 6] = 12;  // LZW code size 12
    std::string message;
    CHECK(error_kind_of([&] { decode_image(bad); }, &message) == ErrorKind::kFormat);
    CHECK(message.find("code size 12") != std::string::npos);
}
