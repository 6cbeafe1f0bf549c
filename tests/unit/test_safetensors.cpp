#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/error.h"
#include "model/checkpoint/safetensors.h"
#include "tests/test_util.h"

using namespace surf::model;
namespace fs = std::filesystem;

namespace {

using surf::test::error_of;
using surf::test::temp_dir;
using surf::test::write_file;

std::string header_file(const std::string& header_json, size_t data_bytes) {
    std::string out(8, '\0');
    uint64_t len = header_json.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    return out + header_json + std::string(data_bytes, '\x01');
}

}  // namespace

TEST_CASE("safetensors round trip of every dtype, single file and sharded") {
    const std::string dir = temp_dir("roundtrip");
    std::vector<float> a = {1.5f, -2.25f, 3.0f, 4.0f, 5.0f, 6.0f};
    std::vector<uint16_t> b = {f32_to_bf16(0.5f), f32_to_bf16(-7.0f)};
    std::vector<uint16_t> c = {0x3c00, 0xc000, 0x3800};  // f16: 1, -2, 0.5
    std::vector<uint8_t> d = {0x38, 0xb8};               // f8e4m3: 1, -1
    std::vector<int64_t> e = {42, -1};
    write_safetensors(dir + "/model.safetensors",
                      {{"a", DType::kF32, {2, 3}, a.data()},
                       {"b", DType::kBF16, {2}, b.data()},
                       {"c", DType::kF16, {3}, c.data()},
                       {"d", DType::kF8E4M3, {2}, d.data()},
                       {"e", DType::kI64, {2}, e.data()}},
                      {{"format", "pt"}});
    Checkpoint ckpt = Checkpoint::open(dir);
    CHECK(ckpt.size() == 5);
    CHECK(ckpt.get("a").shape_string() == "[2, 3]");
    CHECK(ckpt.to_f32("a") == a);
    CHECK(ckpt.to_f32("b") == std::vector<float>{0.5f, -7.0f});
    CHECK(ckpt.to_f32("c") == std::vector<float>{1.0f, -2.0f, 0.5f});
    CHECK(ckpt.to_f32("d") == std::vector<float>{1.0f, -1.0f});
    CHECK(ckpt.to_i64("e") == e);
    CHECK(error_of([&] { ckpt.get("missing"); }).find("missing tensor 'missing'") != std::string::npos);
    CHECK(error_of([&] { ckpt.to_f32("e"); }).find("expected a float type") != std::string::npos);

    // Sharded: two files plus an index.
    const std::string sharded = temp_dir("sharded");
    write_safetensors(sharded + "/model-00001-of-00002.safetensors", {{"x", DType::kF32, {6}, a.data()}});
    write_safetensors(sharded + "/model-00002-of-00002.safetensors", {{"y", DType::kBF16, {2}, b.data()}});
    write_file(
        sharded + "/model.safetensors.index.json",
        R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})");
    Checkpoint sh = Checkpoint::open(sharded);
    CHECK(sh.size() == 2);
    CHECK(sh.to_f32("y")[1] == -7.0f);
    // An index that names a tensor the shard lacks is an error naming it.
    write_file(
        sharded + "/model.safetensors.index.json",
        R"({"weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors", "z": "model-00002-of-00002.safetensors"}})");
    CHECK(error_of([&] { Checkpoint::open(sharded); }).find("'z' is listed") != std::string::npos);
    write_file(sharded + "/model.safetensors.index.json", R"({"weight_map": {"x": "../evil.safetensors"}})");
    CHECK(error_of([&] { Checkpoint::open(sharded); }).find("leaves the folder") != std::string::npos);
    fs::remove_all(dir);
    fs::remove_all(sharded);
}

TEST_CASE("corrupt safetensors files give errors naming the file and tensor") {
    const std::string dir = temp_dir("corrupt");
    const std::string path = dir + "/bad.safetensors";
    std::vector<float> a(16, 1.0f);
    const std::string good = serialize_safetensors({{"w", DType::kF32, {4, 4}, a.data()}});

    write_file(path, good.substr(0, good.size() - 4));  // truncated data
    std::string msg = error_of([&] { SafetensorsFile f(path); });
    CHECK(msg.find(path) != std::string::npos);
    CHECK(msg.find("tensor 'w'") != std::string::npos);
    CHECK(msg.find("truncated") != std::string::npos);

    write_file(path, good.substr(0, 5));
    CHECK(error_of([&] { SafetensorsFile f(path); }).find("too short") != std::string::npos);

    write_file(path, header_file(R"({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 60]}})", 64));
    CHECK(error_of([&] { SafetensorsFile f(path); }).find("does not match") != std::string::npos);

    write_file(path, header_file(R"({"w": {"dtype": "Q4", "shape": [4], "data_offsets": [0, 4]}})", 64));
    CHECK(error_of([&] { SafetensorsFile f(path); }).find("unsupported dtype 'Q4'") != std::string::npos);

    write_file(path, header_file(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                      "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                                 64));
    CHECK(error_of([&] { SafetensorsFile f(path); }).find("overlap") != std::string::npos);

    write_file(path, header_file("{not json", 8));
    CHECK(error_of([&] { SafetensorsFile f(path); }).find("not valid JSON") != std::string::npos);

    CHECK(error_of([&] { SafetensorsFile f(dir + "/absent.safetensors"); }).find("cannot open") !=
          std::string::npos);
    CHECK(error_of([&] { Checkpoint::open(dir + "/nothing_here"); }).find("no such file") !=
          std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("fuzz: 100,000 mutated headers never crash or read out of bounds") {
    // Valid files of several shapes, then random byte flips, insertions, truncations and
    // length-field edits. parse() must either succeed with every tensor inside the buffer or throw.
    std::mt19937_64 rng(1234);
    std::vector<float> payload(64, 0.5f);
    std::vector<std::string> seeds = {
        serialize_safetensors(
            {{"w", DType::kF32, {4, 4}, payload.data()}, {"b", DType::kBF16, {8}, payload.data()}}),
        serialize_safetensors({{"layers.0.mixer.in_proj.weight", DType::kBF16, {2, 3, 4}, payload.data()}},
                              {{"format", "pt"}}),
        serialize_safetensors(
            {{"e", DType::kF8E4M3, {0}, payload.data()}, {"f", DType::kI64, {2}, payload.data()}}),
    };
    const std::string alphabet = "{}[]\":,0123456789-e.FBI68_ \\ufd";
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 100000; ++iter) {
        std::string buf = seeds[iter % seeds.size()];
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < edits; ++k) {
            const size_t pos = buf.empty() ? 0 : rng() % buf.size();
            switch (rng() % 6) {
                case 0:
                    if (!buf.empty()) buf[pos] = static_cast<char>(rng());
                    break;
                case 1:
                    if (!buf.empty()) buf[pos] = alphabet[rng() % alphabet.size()];
                    break;
                case 2:
                    buf.insert(buf.begin() + static_cast<long>(pos), alphabet[rng() % alphabet.size()]);
                    break;
                case 3: buf.resize(rng() % (buf.size() + 1)); break;
                case 4:
                    if (buf.size() >= 8) buf[rng() % 8] = static_cast<char>(rng());
                    break;
                case 5:
                    if (!buf.empty()) buf.erase(pos, 1);
                    break;
            }
        }
        std::vector<uint8_t> bytes(buf.begin(), buf.end());
        try {
            auto tensors = SafetensorsFile::parse(bytes.data(), bytes.size(), "<fuzz>");
            for (const auto& t : tensors) {
                REQUIRE(t.data >= bytes.data());
                REQUIRE(t.data + t.n_bytes <= bytes.data() + bytes.size());
                REQUIRE(static_cast<size_t>(t.numel()) * dtype_size(t.dtype) == t.n_bytes);
            }
            ++accepted;
        } catch (const surf::Error& e) {
            REQUIRE(e.kind() == surf::ErrorKind::kFormat);
            ++rejected;
        }
    }
    CHECK(accepted > 0);
    CHECK(rejected > 0);
    MESSAGE("fuzz: accepted " << accepted << ", rejected " << rejected);
}
