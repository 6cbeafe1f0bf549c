// The vision tower over a batch of images from different requests (one pass, rows scattered to each
// image's place in the image-row buffer) against the HF reference's projected rows (vision.projected of
// the golden fixture), and against the same images encoded one call each.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "model/checkpoint/dtype.h"
#include "model/checkpoint/safetensors.h"
#include "model/cuda/gpu_model.h"
#include "tests/gpu/gpu_model_test_util.h"

using namespace surf::model;
using namespace surf::model::cuda;
using surf::gpu_test::golden_fixture;
using surf::gpu_test::max_rel_err;

namespace {

std::vector<float> image_rows(const GpuModel& m, int64_t first, int64_t n) {
    const int64_t d = m.config().llm.hidden_size;
    std::vector<uint16_t> raw(static_cast<size_t>(n * d));
    SURF_CUDA_CHECK(cudaDeviceSynchronize());
    SURF_CUDA_CHECK(
        cudaMemcpy(raw.data(), m.image_rows() + first * d, raw.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> out(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) out[i] = bf16_to_f32(raw[i]);
    return out;
}

}  // namespace

TEST_CASE(
    "vision batch: three images of different requests in one pass match the reference and single calls") {
    const std::string dir = golden_fixture("small_bf16");
    GpuLimits L;
    L.max_tokens = 256, L.max_seqs = 4, L.max_slots = 4, L.kv_pages = 64, L.max_context = 1024;
    L.max_image_rows = 4096, L.max_tiles = 12;
    auto model = GpuModel::load(dir, L);
    const Checkpoint expected = Checkpoint::open(dir + "/expected.safetensors");
    const std::vector<float> pixels = expected.to_f32("pixel_values");         // [3 tiles, 3, S, S]
    const std::vector<float> projected = expected.to_f32("vision.projected");  // [3 · tpt, hidden]
    const int64_t n_tiles = expected.get("pixel_values").shape[0];
    const int64_t tile_floats = static_cast<int64_t>(pixels.size()) / n_tiles;
    const int64_t tpt = model->config().image.tokens_per_tile(), d = model->config().llm.hidden_size;
    REQUIRE(n_tiles == 3);

    // Image B: the fixture's tiles in the order 2, 0, 1; image C: tile 1 alone.
    std::vector<float> b(pixels.size()), c(pixels.begin() + tile_floats, pixels.begin() + 2 * tile_floats);
    const int order[3] = {2, 0, 1};
    for (int t = 0; t < 3; ++t)
        std::copy_n(pixels.begin() + order[t] * tile_floats, tile_floats, b.begin() + t * tile_floats);
    auto expected_rows = [&](const std::vector<int>& tiles) {
        std::vector<float> rows;
        for (int t : tiles)
            rows.insert(rows.end(), projected.begin() + t * tpt * d, projected.begin() + (t + 1) * tpt * d);
        return rows;
    };
    // One pass over 7 tiles; the images land at scattered rows (C before A, a gap after B).
    const int64_t row_a = 1000, row_b = 2000, row_c = 10;
    const uint64_t ticket =
        model->encode_images({{pixels.data(), 3, row_a}, {b.data(), 3, row_b}, {c.data(), 1, row_c}});
    CHECK(ticket > 0);
    const double err_a = max_rel_err(image_rows(*model, row_a, 3 * tpt).data(), expected_rows({0, 1, 2}));
    const double err_b = max_rel_err(image_rows(*model, row_b, 3 * tpt).data(), expected_rows({2, 0, 1}));
    const double err_c = max_rel_err(image_rows(*model, row_c, tpt).data(), expected_rows({1}));
    MESSAGE("batched pass vs HF vision.projected: A " << err_a << ", B " << err_b << ", C " << err_c);
    CHECK(err_a <= 2e-2);
    CHECK(err_b <= 2e-2);
    CHECK(err_c <= 2e-2);

    // The same images one call each, elsewhere in the buffer: the batch changes nothing beyond GEMM rounding.
    model->encode_images(pixels.data(), 3, 3000);
    model->encode_images(c.data(), 1, 3500);
    const double same_a =
        max_rel_err(image_rows(*model, row_a, 3 * tpt).data(), image_rows(*model, 3000, 3 * tpt));
    const double same_c = max_rel_err(image_rows(*model, row_c, tpt).data(), image_rows(*model, 3500, tpt));
    MESSAGE("batched vs single calls: A " << same_a << ", C " << same_c);
    CHECK(same_a <= 1e-2);
    CHECK(same_c <= 1e-2);
}
