// Image decoding (model/vision/image.h) against PIL: every source in tests/fixtures/image/sources decodes to
// the bytes of PIL's `Image.open(path).convert("RGB")` (checksums and sampled pixels written by
// tests/reference/make_image_fixtures.py); bad input gives surf::Error, never a crash.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/vision/image.h"
#include "tests/test_util.h"
#include "tests/unit/image_checks.h"

using namespace surf::model;
using surf::ErrorKind;

namespace {

using surf::test::error_kind_of;
using surf::test::hex32;
using surf::test::read_bytes;

const std::string kDir = std::string(SURF_FIXTURES_DIR) + "/image/";

nlohmann::json read_json(const std::string& name) {
    const std::vector<uint8_t> bytes = read_bytes(kDir + name);
    return nlohmann::json::parse(bytes.begin(), bytes.end());
}

std::vector<uint8_t> png_header_only(uint32_t width, uint32_t height, uint8_t depth = 8, uint8_t color = 2) {
    std::vector<uint8_t> b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    for (uint32_t v : {width, height}) {
        for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
    }
    b.insert(b.end(), {depth, color, 0, 0, 0});
    const uint32_t crc = crc32(b.data() + 12, 17);
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(crc >> s));
    return b;
}

}  // namespace

TEST_CASE("crc32 is zlib's CRC-32") {
    const std::string check = "123456789";
    CHECK(crc32(reinterpret_cast<const uint8_t*>(check.data()), check.size()) == 0xcbf43926u);
    // Incremental use continues the running value.
    const uint32_t a = crc32(reinterpret_cast<const uint8_t*>(check.data()), 4);
    CHECK(crc32(reinterpret_cast<const uint8_t*>(check.data()) + 4, 5, a) == 0xcbf43926u);
}

TEST_CASE("lossless sources decode exactly like PIL convert(\"RGB\")") {
    const nlohmann::json fixture = read_json("decode.json");
    int checked = 0;
    for (const auto& [name, entry] : fixture.items()) {
        if (entry.contains("raw_rgb")) continue;  // JPEG: see the next test
        CAPTURE(name);
        CAPTURE(entry["mode"].get<std::string>());
        const Image image = load_image(kDir + "sources/" + name);
        REQUIRE(image.width == entry["width"].get<int>());
        REQUIRE(image.height == entry["height"].get<int>());
        REQUIRE(image.channels == 3);
        surf::test::check_like_pil(image, entry);
        ++checked;
    }
    // RGB, RGBA, L, LA, P (with tRNS), 1-bit, 16-bit grey and the three Chromium screenshots.
    CHECK(checked == 11);
}

TEST_CASE("AlphaMode::kCompositeOnWhite reproduces vLLM's RGBA loading") {
    const nlohmann::json fixture = read_json("decode.json");
    int composited = 0;
    for (const auto& [name, entry] : fixture.items()) {
        if (entry.contains("raw_rgb")) continue;
        CAPTURE(name);
        const Image image = load_image(kDir + "sources/" + name, AlphaMode::kCompositeOnWhite);
        const std::string crc = hex32(crc32(image.pixels.data(), image.pixels.size()));
        if (!entry.contains("crc32_on_white")) {
            CHECK(crc == entry["crc32"].get<std::string>());  // only RGBA images are composited
            continue;
        }
        for (const auto& s : entry["samples_on_white"]) {
            const uint8_t* p = image.at(s[0].get<int>(), s[1].get<int>());
            CHECK(int(p[0]) == s[2].get<int>());
            CHECK(int(p[1]) == s[3].get<int>());
            CHECK(int(p[2]) == s[4].get<int>());
        }
        CHECK(crc == entry["crc32_on_white"].get<std::string>());
        ++composited;
    }
    CHECK(composited == 2);  // rgba.png and the transparent-background screenshot
}

TEST_CASE("JPEG sources decode within a small error of PIL (libjpeg)") {
    const nlohmann::json fixture = read_json("decode.json");
    int checked = 0;
    for (const auto& [name, entry] : fixture.items()) {
        if (!entry.contains("raw_rgb")) continue;
        CAPTURE(name);
        const Image image = load_image(kDir + "sources/" + name);
        const std::vector<uint8_t> expected = read_bytes(kDir + entry["raw_rgb"].get<std::string>());
        REQUIRE(image.width == entry["width"].get<int>());
        REQUIRE(image.height == entry["height"].get<int>());
        REQUIRE(image.pixels.size() == expected.size());
        const surf::test::PixelError err = surf::test::pixel_error(image, expected);
        MESSAGE(name, ": stb_image vs PIL max |diff| = ", err.max, ", mean = ", err.mean);
        // stb_image's IDCT and chroma upsampling are close to, but not identical with, libjpeg-turbo's.
        CHECK(err.max <= 6);
        CHECK(err.mean < 1.0);
        ++checked;
    }
    CHECK(checked == 3);  // baseline 4:2:0 colour, greyscale, progressive 4:4:4 with restart markers
}

TEST_CASE("decoding from memory equals decoding the file") {
    const std::string path = kDir + "sources/screen_390x844.png";
    const Image from_file = load_image(path);
    const Image from_memory = decode_image(read_bytes(path));
    CHECK(from_file.width == from_memory.width);
    CHECK(from_file.height == from_memory.height);
    CHECK(from_file.pixels == from_memory.pixels);
}

TEST_CASE("PNG encoding round-trips") {
    std::mt19937 rng(3);
    for (int channels : {1, 3, 4}) {
        CAPTURE(channels);
        Image image(37, 19, channels);
        for (auto& v : image.pixels) v = static_cast<uint8_t>(rng());
        const Image back = decode_image(encode_png(image));
        REQUIRE(back.width == 37);
        REQUIRE(back.height == 19);
        for (int y = 0; y < 19; ++y) {
            for (int x = 0; x < 37; ++x) {
                const uint8_t* src = image.at(x, y);
                const uint8_t* dst = back.at(x, y);
                for (int c = 0; c < 3; ++c) CHECK(dst[c] == src[channels == 1 ? 0 : c]);
            }
        }
    }
    const std::string dir = surf::test::temp_dir("image_png");
    Image image(5, 4);
    image.at(2, 1)[1] = 200;
    save_png(image, dir + "/a.png");
    CHECK(load_image(dir + "/a.png").pixels == image.pixels);
    CHECK(error_kind_of([] { encode_png(Image()); }) == ErrorKind::kInvalidArgument);
    CHECK(error_kind_of([&] { save_png(image, dir + "/no/such/dir/a.png"); }) == ErrorKind::kIo);
}

TEST_CASE("bad input gives a surf::Error naming the source") {
    std::string message;
    CHECK(error_kind_of([] { load_image("/nonexistent/shot.png"); }, &message) == ErrorKind::kIo);
    CHECK(message.find("/nonexistent/shot.png") != std::string::npos);
    // A folder is named as one, not read as a file of unknown size.
    CHECK(error_kind_of([] { load_image("/tmp"); }, &message) == ErrorKind::kIo);
    CHECK(message == "image /tmp: is a folder, not a file");

    CHECK(error_kind_of([] { decode_image(nullptr, 0); }, &message) == ErrorKind::kFormat);
    CHECK(message.find("<memory>") != std::string::npos);

    const std::string text = "definitely not an image";
    CHECK(error_kind_of([&] { decode_image(reinterpret_cast<const uint8_t*>(text.data()), text.size()); },
                        &message) == ErrorKind::kUnsupported);
    CHECK(message.find("unrecognised format") != std::string::npos);

    const std::string dir = surf::test::temp_dir("image_bad");
    surf::test::write_file(dir + "/empty.png", "");
    CHECK(error_kind_of([&] { load_image(dir + "/empty.png"); }, &message) == ErrorKind::kFormat);
    CHECK(message.find("empty.png") != std::string::npos);

    // Zero-size header.
    CHECK(error_kind_of([] { decode_image(png_header_only(0, 10)); }, &message) == ErrorKind::kFormat);
    // Decompression bombs are refused from the header, before any allocation.
    for (auto [w, h] :
         {std::pair<uint32_t, uint32_t>{20000, 20000}, {16385, 1}, {1, 100000}, {1u << 30, 1u << 30}}) {
        CAPTURE(w);
        CAPTURE(h);
        CHECK(error_kind_of([&] { decode_image(png_header_only(w, h), "bomb.png"); }, &message) ==
              ErrorKind::kResourceExhausted);
        CHECK(message.find("bomb.png") != std::string::npos);
    }
    const std::vector<uint8_t> jpeg_bomb = {0xff, 0xd8, 0xff, 0xc0, 0x00, 0x11, 0x08, 0xff,
                                            0xff, 0xff, 0xff, 0x03, 0x01, 0x22, 0x00, 0x02,
                                            0x11, 0x01, 0x03, 0x11, 0x01, 0xff, 0xd9};
    CHECK(error_kind_of([&] { decode_image(jpeg_bomb); }) == ErrorKind::kResourceExhausted);
    // A GIF without a frame (GIF has its own decoder and tests: test_image_gif).
    const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0, 0x3b};
    CHECK(error_kind_of([&] { decode_image(gif); }) == ErrorKind::kFormat);
    // A header at the limit passes the size check but has no pixel data.
    CHECK(error_kind_of([] { decode_image(png_header_only(16384, 16384)); }) == ErrorKind::kFormat);
}

TEST_CASE("JPEG Huffman tables with more than 256 codes are refused before stb sees them") {
    // stb_image 2.27 writes past its Huffman tables for such a segment (fixed upstream in 2.28).
    std::vector<uint8_t> bytes = read_bytes(kDir + "sources/photo.jpg");
    size_t dht = 0;
    for (size_t i = 2; i + 1 < bytes.size(); ++i) {
        if (bytes[i] == 0xff && bytes[i + 1] == 0xc4) {
            dht = i;
            break;
        }
    }
    REQUIRE(dht > 0);
    for (int k = 0; k < 16; ++k) bytes[dht + 5 + k] = 0xff;  // 16 * 255 codes
    std::string message;
    CHECK(error_kind_of([&] { decode_image(bytes, "dht.jpg"); }, &message) == ErrorKind::kFormat);
    CHECK(message.find("Huffman") != std::string::npos);
}

TEST_CASE("truncated files are errors at every cut point") {
    for (const char* name :
         {"gradient_rgb.png", "palette.png", "photo.jpg", "grey.jpg", "progressive.jpg", "grey16.png"}) {
        CAPTURE(name);
        const std::vector<uint8_t> bytes = read_bytes(kDir + "sources/" + name);
        REQUIRE_NOTHROW(decode_image(bytes, name));
        int errors = 0;
        for (size_t cut = 0; cut < bytes.size(); cut += std::max<size_t>(1, bytes.size() / 200)) {
            try {
                decode_image(bytes.data(), cut, name);
            } catch (const surf::Error& e) {
                ++errors;
                CHECK(std::string(e.what()).find(name) != std::string::npos);
                continue;
            }
            // The only cut that may decode is one that drops nothing but trailing chunks.
            CHECK_MESSAGE(cut >= bytes.size() - 12, "truncated at ", cut, " of ", bytes.size(), " decoded");
        }
        CHECK(errors > 150);
    }
}

TEST_CASE("randomly corrupted files never crash") {
    std::mt19937 rng(11);
    for (const char* name : {"noise_rgb.png", "photo.jpg", "progressive.jpg", "palette.png", "bilevel.png"}) {
        CAPTURE(name);
        surf::test::decode_corrupted(read_bytes(kDir + "sources/" + name), name, 400, rng);
    }
}
