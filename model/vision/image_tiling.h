// Static InternVL-style tiling of one image into 512x512 tiles for the C-RADIO encoder
// (spec/holotron.md §5; vLLM `dynamic_preprocess` / `image_to_pixel_values`):
//   grid search over (cols, rows) with cols*rows <= max_tiles → resize to (tile*cols, tile*rows) with
//   Pillow's BICUBIC → crop row-major → thumbnail of the original (when more than one tile) →
//   ToTensor ([0,1]) → (x - mean) / std, CHW.
// Every step reproduces the Python reference bit for bit (Pillow's fixed-point resampler, CPython's
// set iteration order for the candidate grids, float32 normalisation as torchvision does it).
#pragma once

#include <array>
#include <vector>

#include "model/checkpoint/config.h"
#include "model/vision/image.h"

namespace surf::model {

// Pillow 13.0 changed the order of the two resampling passes (python-pillow PR #9549): the vertical
// pass runs first when the height shrinks by more than twice as many pixels as the width. Each pass
// rounds to uint8, so the order changes some output pixels by one level. Verified against Pillow
// 13.0.0 and 12.1.0.
enum class ResizePassOrder {
    kPillow13,         // vertical first iff out_h < in_h and in_h - out_h > 2 * (in_w - out_w)
    kHorizontalFirst,  // Pillow <= 12.1: always horizontal then vertical
};

// Plain data, filled from config.json / preprocessor_config.json by the config loader.
struct TilingConfig {
    int tile_size = 512;                                                   // force_image_size
    int min_tiles = 1;                                                     // min_num_tiles (vLLM default 1)
    int max_tiles = 12;                                                    // max_num_tiles
    bool use_thumbnail = true;                                             // use_thumbnail
    std::array<float, 3> norm_mean{0.48145466f, 0.4578275f, 0.40821073f};  // norm_mean (CLIP)
    std::array<float, 3> norm_std{0.26862954f, 0.26130258f, 0.27577711f};  // norm_std (CLIP)
    int patch_size = 16;                                                   // vision patch size
    double downsample_ratio = 0.5;                                         // pixel-shuffle ratio
    ResizePassOrder resize_order = ResizePassOrder::kPillow13;             // which Pillow to reproduce
};

// The tiling parameters of a loaded checkpoint (config.json / preprocessor_config.json).
TilingConfig tiling_config_from(const ImageConfig& image);

// Throws surf::Error(kConfig) naming the offending field when the values cannot work.
void validate_tiling_config(const TilingConfig& config);

// LLM tokens per tile: (tile/patch)^2 * downsample_ratio^2 (256 for 512 / 16 / 0.5), written as vLLM
// computes `num_image_token`.
int image_tokens_per_tile(const TilingConfig& config);

struct GridShape {
    int cols = 1;  // width ratio
    int rows = 1;  // height ratio
    bool operator==(const GridShape&) const = default;
};

// All (cols, rows) with min_tiles <= cols*rows <= max_tiles, in the order Python produces with
// `sorted({(i, j) ...}, key=i*j)`: sorted by area, ties in CPython's set iteration order. The tie order
// decides `find_closest_aspect_ratio` for images whose ratio lies exactly between two grids.
std::vector<GridShape> candidate_grids(int min_tiles, int max_tiles);

// InternVL `find_closest_aspect_ratio`, including its tie rule (a later grid with an equally close
// ratio wins only when the image area exceeds half the grid's pixel area).
GridShape find_closest_grid(int width, int height, const std::vector<GridShape>& candidates, int tile_size);

struct TilingPlan {
    GridShape grid;          // chosen (cols, rows)
    int resized_width = 0;   // tile_size * cols
    int resized_height = 0;  // tile_size * rows
    bool thumbnail = false;  // a thumbnail of the whole image follows the grid tiles
    int n_tiles = 0;         // cols*rows + thumbnail
    int n_image_tokens = 0;  // n_tiles * image_tokens_per_tile
};

// The plan for an image of width x height pixels. Throws kInvalidArgument for a non-positive size.
TilingPlan plan_tiles(int width, int height, const TilingConfig& config);

// Pillow `Image.resize((out_width, out_height), Resampling.BICUBIC)` of an RGB image, bit-exact:
// separable antialiased bicubic (a = -0.5, support scaled by the downscale factor), 22-bit fixed-point
// coefficients, one pass per axis (order as `order` says), each rounded and clipped to uint8.
Image resize_bicubic(const Image& image, int out_width, int out_height,
                     ResizePassOrder order = ResizePassOrder::kPillow13);

// The box [x0, x0 + width) x [y0, y0 + height), which must lie inside the image.
Image crop(const Image& image, int x0, int y0, int width, int height);

// The uint8 RGB tiles in processor order: grid tiles row-major, then the thumbnail.
std::vector<Image> make_tiles(const Image& image, const TilingConfig& config, TilingPlan* plan = nullptr);

// ToTensor + Normalize of one RGB tile into `out` ([3, tile, tile] f32, CHW), in float32 exactly as
// torchvision: (u / 255 - mean_c) / std_c.
void normalize_tile(const Image& tile, const TilingConfig& config, float* out);

struct TiledImage {
    TilingPlan plan;
    int tile_size = 0;
    std::vector<float> pixels;  // [n_tiles, 3, tile_size, tile_size] f32, normalised
};

TiledImage tile_image(const Image& image, const TilingConfig& config);

}  // namespace surf::model
