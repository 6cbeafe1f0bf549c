// InternVL static tiling (model/vision/image_tiling.h) against Pillow + torchvision, from fixtures written
// by tests/reference/make_image_fixtures.py: candidate-grid order, chosen grids, Pillow BICUBIC
// resizes (bit-exact, checked by CRC-32 of the whole output), uint8 tiles and normalised floats.
#include <doctest/doctest.h>

#include "tests/test_util.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/checkpoint/config.h"
#include "model/vision/image.h"
#include "model/vision/image_tiling.h"

using namespace surf::model;
using surf::ErrorKind;

namespace {

using surf::test::error_kind_of;
using surf::test::hex32;

const std::string kDir = std::string(SURF_FIXTURES_DIR) + "/image/";

nlohmann::json read_json(const std::string& name) {
    std::ifstream in(kDir + name);
    REQUIRE_MESSAGE(in.good(), "missing fixture ", kDir + name);
    return nlohmann::json::parse(in);
}

uint32_t image_crc(const Image& image) {
    return crc32(image.pixels.data(), image.pixels.size());
}

const Image& source(const std::string& name) {
    static std::map<std::string, Image> cache;
    auto it = cache.find(name);
    if (it == cache.end()) it = cache.emplace(name, load_image(kDir + "sources/" + name)).first;
    return it->second;
}

bool is_jpeg(const std::string& name) {
    return name.size() > 4 && name.substr(name.size() - 4) == ".jpg";
}

TilingConfig config_of(const nlohmann::json& c) {
    TilingConfig config;
    config.tile_size = c["tile_size"].get<int>();
    config.max_tiles = c["max_tiles"].get<int>();
    config.use_thumbnail = c["use_thumbnail"].get<bool>();
    for (int ch = 0; ch < 3; ++ch) {
        config.norm_mean[ch] = c["norm_mean"][ch].get<float>();
        config.norm_std[ch] = c["norm_std"][ch].get<float>();
    }
    return config;
}

}  // namespace

TEST_CASE("candidate grids follow CPython's sorted(set) order") {
    // spec/holotron.md §5, the 35 grids for max_num_tiles = 12.
    const std::vector<GridShape> spec = {
        {1, 1}, {1, 2},  {2, 1},  {3, 1},  {1, 3},  {2, 2},  {4, 1}, {1, 4}, {5, 1},  {1, 5}, {1, 6}, {6, 1},
        {3, 2}, {2, 3},  {7, 1},  {1, 7},  {4, 2},  {2, 4},  {1, 8}, {8, 1}, {1, 9},  {3, 3}, {9, 1}, {2, 5},
        {5, 2}, {10, 1}, {1, 10}, {11, 1}, {1, 11}, {12, 1}, {3, 4}, {4, 3}, {1, 12}, {6, 2}, {2, 6}};
    CHECK(candidate_grids(1, 12) == spec);

    const nlohmann::json fixture = read_json("grids.json");
    int checked = 0;
    for (const auto& [key, order] : fixture["orders"].items()) {
        CAPTURE(key);
        const int lo = std::stoi(key.substr(0, key.find(',')));
        const int hi = std::stoi(key.substr(key.find(',') + 1));
        std::vector<GridShape> expected;
        for (const auto& g : order) expected.push_back({g[0].get<int>(), g[1].get<int>()});
        CHECK(candidate_grids(lo, hi) == expected);
        ++checked;
    }
    CHECK(checked >= 45);
}

TEST_CASE("chosen grid matches the reference for random, spec and tie sizes") {
    const nlohmann::json fixture = read_json("grids.json");
    std::map<std::string, int> counts;
    for (const auto& c : fixture["cases"]) {
        TilingConfig config;
        config.tile_size = c["tile_size"].get<int>();
        config.max_tiles = c["max_tiles"].get<int>();
        config.use_thumbnail = c["use_thumbnail"].get<bool>();
        const int w = c["width"].get<int>(), h = c["height"].get<int>();
        CAPTURE(w);
        CAPTURE(h);
        CAPTURE(c["kind"].get<std::string>());
        const TilingPlan plan = plan_tiles(w, h, config);
        CHECK(plan.grid.cols == c["cols"].get<int>());
        CHECK(plan.grid.rows == c["rows"].get<int>());
        CHECK(plan.n_tiles == c["n_tiles"].get<int>());
        CHECK(plan.resized_width == config.tile_size * plan.grid.cols);
        CHECK(plan.resized_height == config.tile_size * plan.grid.rows);
        ++counts[c["kind"].get<std::string>()];
    }
    CHECK(counts["random"] == 200);
    CHECK(counts["spec"] >= 11);
    CHECK(counts["tie"] >= 20);
    CHECK(counts["config"] == 20);
}

TEST_CASE("spec worked examples: grids and image-token counts") {
    const TilingConfig config;
    CHECK(image_tokens_per_tile(config) == 256);
    struct Example {
        int w, h, cols, rows, tiles, tokens;
    };
    for (const Example& e : {Example{1920, 1080, 4, 2, 9, 2304},
                             {1280, 720, 2, 1, 3, 768},
                             {1440, 900, 3, 2, 7, 1792},
                             {1024, 768, 4, 3, 13, 3328},
                             {800, 600, 4, 3, 13, 3328},
                             {390, 844, 1, 2, 3, 768},
                             {1080, 1920, 2, 4, 9, 2304},
                             {512, 512, 1, 1, 1, 256}}) {
        CAPTURE(e.w);
        CAPTURE(e.h);
        const TilingPlan plan = plan_tiles(e.w, e.h, config);
        CHECK(plan.grid == GridShape{e.cols, e.rows});
        CHECK(plan.n_tiles == e.tiles);
        CHECK(plan.n_image_tokens == e.tokens);
        CHECK(plan.thumbnail == (e.tiles > 1));
    }
}

TEST_CASE("tokens per tile come from the config") {
    TilingConfig config;
    config.tile_size = 448;
    config.patch_size = 14;
    CHECK(image_tokens_per_tile(config) == 256);
    config.patch_size = 16;
    CHECK(image_tokens_per_tile(config) == 196);
    config.downsample_ratio = 1.0;
    CHECK(image_tokens_per_tile(config) == 784);

    ImageConfig image;
    image.tile_size = 512;
    image.max_tiles = 6;
    image.use_thumbnail = false;
    const TilingConfig from = tiling_config_from(image);
    CHECK(from.tile_size == 512);
    CHECK(from.max_tiles == 6);
    CHECK(!from.use_thumbnail);
    CHECK(image_tokens_per_tile(from) == 256);
}

TEST_CASE("bad tiling configs name the field") {
    std::string message;
    TilingConfig config;
    config.patch_size = 15;
    CHECK(error_kind_of([&] { plan_tiles(100, 100, config); }, &message) == ErrorKind::kConfig);
    CHECK(message.find("patch_size") != std::string::npos);
    config = TilingConfig();
    config.max_tiles = 0;
    CHECK(error_kind_of([&] { plan_tiles(100, 100, config); }, &message) == ErrorKind::kConfig);
    CHECK(message.find("max_num_tiles") != std::string::npos);
    config = TilingConfig();
    config.norm_std[1] = 0.0f;
    CHECK(error_kind_of([&] { image_tokens_per_tile(config); }, &message) == ErrorKind::kConfig);
    CHECK(message.find("norm_std[1]") != std::string::npos);
    config = TilingConfig();
    config.downsample_ratio = 0.3;
    CHECK(error_kind_of([&] { image_tokens_per_tile(config); }, &message) == ErrorKind::kConfig);
    CHECK(message.find("downsample_ratio") != std::string::npos);
    CHECK(error_kind_of([] { plan_tiles(0, 10, TilingConfig()); }) == ErrorKind::kInvalidArgument);
    CHECK(error_kind_of([] { plan_tiles(10, -1, TilingConfig()); }) == ErrorKind::kInvalidArgument);
}

TEST_CASE("bicubic resize is bit-exact with Pillow") {
    const nlohmann::json fixture = read_json("resize.json");
    int exact = 0, exact_h_first = 0, cases = 0, max_sample_err = 0, orders_differ = 0;
    for (const auto& r : fixture) {
        const std::string name = r["source"].get<std::string>();
        const int w = r["width"].get<int>(), h = r["height"].get<int>();
        CAPTURE(name);
        CAPTURE(w);
        CAPTURE(h);
        const Image out = resize_bicubic(source(name), w, h);
        REQUIRE(out.width == w);
        REQUIRE(out.height == h);
        for (const auto& s : r["samples"]) {
            const uint8_t* p = out.at(s[0].get<int>(), s[1].get<int>());
            for (int c = 0; c < 3; ++c)
                max_sample_err = std::max(max_sample_err, std::abs(p[c] - s[2 + c].get<int>()));
        }
        const bool same = hex32(image_crc(out)) == r["crc32"].get<std::string>();
        CHECK(same);
        exact += same;
        // Pillow <= 12.1 pass order.
        const Image legacy = resize_bicubic(source(name), w, h, ResizePassOrder::kHorizontalFirst);
        const bool same_legacy = hex32(image_crc(legacy)) == r["crc32_h_first"].get<std::string>();
        CHECK(same_legacy);
        exact_h_first += same_legacy;
        orders_differ += r["crc32"] != r["crc32_h_first"];
        ++cases;
    }
    MESSAGE("Pillow BICUBIC parity: ", exact, "/", cases, " outputs bit-exact (Pillow 13 order), ",
            exact_h_first, "/", cases, " (Pillow <= 12.1 order); max sampled |diff| ", max_sample_err);
    CHECK(cases >= 27);
    CHECK(orders_differ >= 4);  // the fixture really exercises both pass orders
    CHECK(max_sample_err == 0);
}

TEST_CASE("whole tiling pipeline matches Pillow + torchvision") {
    const nlohmann::json fixture = read_json("tiling.json");
    double max_float_err = 0, max_float_err_jpeg = 0;
    int exact_tiles = 0, total_tiles = 0;
    for (const auto& t : fixture) {
        const std::string name = t["source"].get<std::string>();
        const TilingConfig config = config_of(t["config"]);
        CAPTURE(name);
        CAPTURE(config.tile_size);
        const Image& image = source(name);
        TilingPlan plan;
        const std::vector<Image> tiles = make_tiles(image, config, &plan);
        REQUIRE(plan.grid.cols == t["cols"].get<int>());
        REQUIRE(plan.grid.rows == t["rows"].get<int>());
        REQUIRE(int(tiles.size()) == t["n_tiles"].get<int>());
        REQUIRE(plan.n_tiles == t["n_tiles"].get<int>());
        for (size_t k = 0; k < tiles.size(); ++k) {
            CHECK(tiles[k].width == config.tile_size);
            CHECK(tiles[k].height == config.tile_size);
            if (is_jpeg(name)) continue;  // decoders differ slightly; floats are checked below
            const bool same = hex32(image_crc(tiles[k])) == t["tile_crc32"][k].get<std::string>();
            CHECK_MESSAGE(same, "tile ", k);
            exact_tiles += same;
            ++total_tiles;
        }
        if (!is_jpeg(name)) {
            TilingConfig legacy_config = config;
            legacy_config.resize_order = ResizePassOrder::kHorizontalFirst;
            const std::vector<Image> legacy = make_tiles(image, legacy_config);
            REQUIRE(legacy.size() == tiles.size());
            for (size_t k = 0; k < legacy.size(); ++k) {
                CHECK_MESSAGE(hex32(image_crc(legacy[k])) == t["tile_crc32_h_first"][k].get<std::string>(),
                              "Pillow <= 12.1 order, tile ", k);
            }
        }

        const TiledImage tiled = tile_image(image, config);
        const size_t plane = size_t(config.tile_size) * config.tile_size;
        REQUIRE(tiled.pixels.size() == tiles.size() * 3 * plane);
        double sum = 0;
        for (float v : tiled.pixels) sum += v;
        double& max_err = is_jpeg(name) ? max_float_err_jpeg : max_float_err;
        for (const auto& s : t["samples"]) {
            const size_t k = s[0].get<size_t>(), c = s[1].get<size_t>(), y = s[2].get<size_t>(),
                         x = s[3].get<size_t>();
            const double got = tiled.pixels[(k * 3 + c) * plane + y * config.tile_size + x];
            max_err = std::max(max_err, std::fabs(got - s[4].get<double>()));
        }
        if (!is_jpeg(name)) {
            CHECK(std::fabs(sum - t["float_sum"].get<double>()) <= 1e-6 * tiled.pixels.size());
        }
    }
    MESSAGE("tiles bit-exact: ", exact_tiles, "/", total_tiles, "; normalised float max |diff|: lossless ",
            max_float_err, ", JPEG ", max_float_err_jpeg);
    CHECK(exact_tiles == total_tiles);
    CHECK(max_float_err <= 1.0 / 255);
    CHECK(max_float_err == 0.0);  // same uint8 and the same float32 operations as torchvision
    // JPEG: the decoder's few-level differences, scaled by 1/(255·std) ≈ 0.015 per level.
    CHECK(max_float_err_jpeg <= 6 / (255 * 0.26));
}

TEST_CASE("tiles are row-major crops of the resized image, thumbnail last") {
    Image image(700, 300);
    for (int y = 0; y < 300; ++y) {
        for (int x = 0; x < 700; ++x) {
            uint8_t* p = image.at(x, y);
            p[0] = uint8_t(x);
            p[1] = uint8_t(y);
            p[2] = uint8_t(x ^ y);
        }
    }
    TilingConfig config;
    config.tile_size = 64;
    TilingPlan plan;
    const std::vector<Image> tiles = make_tiles(image, config, &plan);
    REQUIRE(plan.grid.cols * plan.grid.rows + 1 == int(tiles.size()));
    const Image resized = resize_bicubic(image, plan.resized_width, plan.resized_height);
    for (int k = 0; k + 1 < int(tiles.size()); ++k) {
        const Image expected = crop(resized, (k % plan.grid.cols) * 64, (k / plan.grid.cols) * 64, 64, 64);
        CHECK(tiles[k].pixels == expected.pixels);
    }
    CHECK(tiles.back().pixels == resize_bicubic(image, 64, 64).pixels);

    // Float layout: [tile, channel, y, x].
    const TiledImage tiled = tile_image(image, config);
    const float expected = (float(tiles[1].at(5, 7)[2]) / 255.0f - config.norm_mean[2]) / config.norm_std[2];
    CHECK(tiled.pixels[(1 * 3 + 2) * 64 * 64 + 7 * 64 + 5] == expected);

    config.use_thumbnail = false;
    CHECK(make_tiles(image, config).size() == size_t(plan.grid.cols * plan.grid.rows));
}

TEST_CASE("resize and crop edge cases") {
    Image one(1, 1);
    one.pixels = {10, 20, 30};
    const Image big = resize_bicubic(one, 512, 512);
    bool constant = true;
    for (size_t i = 0; i < big.pixels.size(); i += 3) {
        constant = constant && big.pixels[i] == 10 && big.pixels[i + 1] == 20 && big.pixels[i + 2] == 30;
    }
    CHECK(constant);
    const Image& screen = source("screen_1280x720.png");
    CHECK(resize_bicubic(screen, 1280, 720).pixels == screen.pixels);
    CHECK(error_kind_of([&] { resize_bicubic(screen, 0, 10); }) == ErrorKind::kInvalidArgument);
    CHECK(error_kind_of([&] { resize_bicubic(Image(), 10, 10); }) == ErrorKind::kInvalidArgument);
    CHECK(error_kind_of([&] { resize_bicubic(Image(4, 4, 4), 10, 10); }) == ErrorKind::kInvalidArgument);
    CHECK(error_kind_of([&] { crop(screen, 1200, 0, 100, 10); }) == ErrorKind::kInvalidArgument);
    CHECK(error_kind_of([&] { crop(screen, -1, 0, 10, 10); }) == ErrorKind::kInvalidArgument);
    CHECK(error_kind_of([&] { make_tiles(Image(4, 4, 4), TilingConfig()); }) == ErrorKind::kInvalidArgument);
    // A 1x1 image tiles to one 512 tile without a thumbnail.
    const TiledImage tiled = tile_image(one, TilingConfig());
    CHECK(tiled.plan.n_tiles == 1);
    CHECK(tiled.pixels.size() == size_t(3) * 512 * 512);
}
