#include "model/vision/image_tiling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <future>
#include <limits>
#include <string>

#include "base/check.h"
#include "base/error.h"

namespace surf::model {
namespace {

[[noreturn]] void config_error(const std::string& field, const std::string& value, const std::string& why) {
    throw Error(ErrorKind::kConfig, "image tiling config: " + field + " = " + value + " " + why);
}

// ---- CPython set iteration order -------------------------------------------------------------
// The candidate list is `sorted(set_of_tuples, key=area)`; sorted() is stable, so grids of equal
// area keep the set's iteration order, which is its hash-table slot order. We replay CPython's
// (3.8+) tuple hash and set insertion (Objects/setobject.c: linear probes then perturbation, resize
// to 4*used when 5*fill >= 3*mask) to get that order for any tile limits.

uint64_t python_tuple2_hash(uint64_t a, uint64_t b) {
    // hash(int) == int for small non-negative ints; tuple hash is an xxHash-style mix of the items.
    constexpr uint64_t kPrime1 = 11400714785074694791ull;
    constexpr uint64_t kPrime2 = 14029467366897019727ull;
    constexpr uint64_t kPrime5 = 2870177450012600261ull;
    uint64_t acc = kPrime5;
    for (uint64_t lane : {a, b}) {
        acc += lane * kPrime2;
        acc = (acc << 31) | (acc >> 33);
        acc *= kPrime1;
    }
    acc += 2 ^ (kPrime5 ^ 3527539ull);
    if (acc == ~uint64_t{0}) return 1546275796;
    return acc;
}

struct PySetEmulator {
    static constexpr size_t kLinearProbes = 9;
    static constexpr int kPerturbShift = 5;
    struct Slot {
        bool used = false;
        uint64_t hash = 0;
        GridShape key;
    };
    std::vector<Slot> table = std::vector<Slot>(8);
    size_t fill = 0;

    // Returns the slot index where a key with this hash lands: the first empty slot on its probe
    // path, or the slot already holding `key`.
    size_t probe(const std::vector<Slot>& t, uint64_t hash, const GridShape* key) const {
        const size_t mask = t.size() - 1;
        size_t i = hash & mask;
        uint64_t perturb = hash;
        while (true) {
            const size_t probes = (i + kLinearProbes <= mask) ? kLinearProbes : 0;
            for (size_t j = 0; j <= probes; ++j) {
                const Slot& s = t[i + j];
                if (!s.used) return i + j;
                if (key && s.hash == hash && s.key == *key) return i + j;
            }
            perturb >>= kPerturbShift;
            i = (i * 5 + 1 + perturb) & mask;
        }
    }

    void add(GridShape key) {
        const uint64_t hash =
            python_tuple2_hash(static_cast<uint64_t>(key.cols), static_cast<uint64_t>(key.rows));
        const size_t at = probe(table, hash, &key);
        if (table[at].used) return;
        table[at] = Slot{true, hash, key};
        ++fill;
        const size_t mask = table.size() - 1;
        if (fill * 5 < mask * 3) return;
        const size_t min_used = fill > 50000 ? fill * 2 : fill * 4;
        size_t new_size = 8;
        while (new_size <= min_used) new_size <<= 1;
        std::vector<Slot> bigger(new_size);
        for (const Slot& s : table) {
            if (s.used) bigger[probe(bigger, s.hash, nullptr)] = s;
        }
        table = std::move(bigger);
    }
};

// ---- Pillow's resampler (libImaging/Resample.c, 8 bits per channel) ---------------------------

constexpr int kPrecisionBits = 32 - 8 - 2;  // two spare bits: coefficients can sum past 1 or below 0
constexpr double kBicubicSupport = 2.0;

double bicubic_weight(double x) {
    constexpr double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// For each output index: the first input index, how many inputs, and ksize fixed-point weights.
struct ResampleTaps {
    int ksize = 0;
    std::vector<int> first;        // [out_size]
    std::vector<int> count;        // [out_size]
    std::vector<int32_t> weights;  // [out_size, ksize]
};

ResampleTaps compute_taps(int in_size, int out_size) {
    ResampleTaps taps;
    // Pillow computes in double from a float box (0, in_size): exact for any int size used here.
    const double scale = static_cast<double>(in_size) / out_size;
    const double filter_scale = std::max(scale, 1.0);  // antialias only when shrinking
    const double support = kBicubicSupport * filter_scale;
    taps.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
    taps.first.resize(out_size);
    taps.count.resize(out_size);
    taps.weights.assign(static_cast<size_t>(out_size) * taps.ksize, 0);
    std::vector<double> w(taps.ksize);
    for (int xx = 0; xx < out_size; ++xx) {
        const double center = (xx + 0.5) * scale;
        const double inv = 1.0 / filter_scale;
        // Truncating casts, as in Pillow ("round" by +0.5 then (int)).
        int xmin = static_cast<int>(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = static_cast<int>(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        SURF_CHECK(xmax >= 0 && xmax <= taps.ksize, "resample taps", xmax, taps.ksize);
        double total = 0.0;
        for (int x = 0; x < xmax; ++x) {
            w[x] = bicubic_weight((x + xmin - center + 0.5) * inv);
            total += w[x];
        }
        int32_t* k = &taps.weights[static_cast<size_t>(xx) * taps.ksize];
        for (int x = 0; x < xmax; ++x) {
            const double normalised = total != 0.0 ? w[x] / total : w[x];
            const double scaled = normalised * (1 << kPrecisionBits);
            k[x] = static_cast<int32_t>(normalised < 0 ? -0.5 + scaled : 0.5 + scaled);
        }
        taps.first[xx] = xmin;
        taps.count[xx] = xmax;
    }
    return taps;
}

inline uint8_t clip8(int32_t acc) {
    const int32_t v = acc >> kPrecisionBits;  // arithmetic shift: floor, as Pillow's table lookup
    return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

// out rows [0, out.height) come from input rows [row_offset, row_offset + out.height).
void resample_horizontal(const Image& in, int row_offset, const ResampleTaps& taps, Image& out) {
    SURF_CHECK(in.channels == 3, "resample_horizontal channels", in.channels);
    for (int y = 0; y < out.height; ++y) {
        const uint8_t* src = in.row(y + row_offset);
        uint8_t* dst = out.row(y);
        for (int xx = 0; xx < out.width; ++xx) {
            const int32_t* k = &taps.weights[static_cast<size_t>(xx) * taps.ksize];
            const uint8_t* s = src + static_cast<size_t>(taps.first[xx]) * 3;
            int32_t r = kHalf, g = kHalf, b = kHalf;
            for (int x = 0; x < taps.count[xx]; ++x) {
                r += s[3 * x + 0] * k[x];
                g += s[3 * x + 1] * k[x];
                b += s[3 * x + 2] * k[x];
            }
            dst[3 * xx + 0] = clip8(r);
            dst[3 * xx + 1] = clip8(g);
            dst[3 * xx + 2] = clip8(b);
        }
    }
}

// taps.first is relative to the first row of `in`.
void resample_vertical(const Image& in, int row_offset, const ResampleTaps& taps, Image& out) {
    const size_t stride = in.row_bytes();
    std::vector<int32_t> acc(stride);
    for (int yy = 0; yy < out.height; ++yy) {
        const int32_t* k = &taps.weights[static_cast<size_t>(yy) * taps.ksize];
        std::fill(acc.begin(), acc.end(), kHalf);
        for (int y = 0; y < taps.count[yy]; ++y) {
            const uint8_t* src = in.row(taps.first[yy] - row_offset + y);
            const int32_t w = k[y];
            for (size_t i = 0; i < stride; ++i) acc[i] += src[i] * w;
        }
        uint8_t* dst = out.row(yy);
        for (size_t i = 0; i < stride; ++i) dst[i] = clip8(acc[i]);
    }
}

}  // namespace

TilingConfig tiling_config_from(const ImageConfig& image) {
    auto to_int = [](int64_t v, const char* field) {
        if (v < 0 || v > kMaxImageSide) config_error(field, std::to_string(v), "is out of range");
        return static_cast<int>(v);
    };
    TilingConfig c;
    c.tile_size = to_int(image.tile_size, "force_image_size");
    c.max_tiles = to_int(image.max_tiles, "max_num_tiles");
    c.use_thumbnail = image.use_thumbnail;
    c.norm_mean = image.norm_mean;
    c.norm_std = image.norm_std;
    c.patch_size = to_int(image.patch_size, "patch_size");
    c.downsample_ratio = image.downsample_ratio;
    validate_tiling_config(c);
    return c;
}

void validate_tiling_config(const TilingConfig& c) {
    if (c.tile_size <= 0 || c.tile_size > kMaxImageSide) {
        config_error("force_image_size", std::to_string(c.tile_size),
                     "must be in 1.." + std::to_string(kMaxImageSide));
    }
    if (c.max_tiles < 1 || c.max_tiles > 256) {
        config_error("max_num_tiles", std::to_string(c.max_tiles), "must be in 1..256");
    }
    if (c.min_tiles < 1 || c.min_tiles > c.max_tiles) {
        config_error("min_num_tiles", std::to_string(c.min_tiles), "must be in 1..max_num_tiles");
    }
    if (int64_t{c.tile_size} * c.tile_size * c.max_tiles > kMaxImagePixels) {
        config_error("max_num_tiles", std::to_string(c.max_tiles),
                     "gives resized images over the pixel limit");
    }
    if (c.patch_size <= 0 || c.tile_size % c.patch_size != 0) {
        config_error("patch_size", std::to_string(c.patch_size), "must divide force_image_size");
    }
    if (!(c.downsample_ratio > 0.0 && c.downsample_ratio <= 1.0)) {
        config_error("downsample_ratio", std::to_string(c.downsample_ratio), "must be in (0, 1]");
    }
    const double side = (c.tile_size / c.patch_size) * c.downsample_ratio;
    if (side != std::floor(side)) {
        config_error("downsample_ratio", std::to_string(c.downsample_ratio),
                     "does not divide the patch grid of " + std::to_string(c.tile_size / c.patch_size));
    }
    for (int ch = 0; ch < 3; ++ch) {
        if (!(c.norm_std[ch] > 0.0f) || !std::isfinite(c.norm_std[ch])) {
            config_error("norm_std[" + std::to_string(ch) + "]", std::to_string(c.norm_std[ch]),
                         "must be > 0");
        }
        if (!std::isfinite(c.norm_mean[ch])) {
            config_error("norm_mean[" + std::to_string(ch) + "]", std::to_string(c.norm_mean[ch]),
                         "must be finite");
        }
    }
}

int image_tokens_per_tile(const TilingConfig& config) {
    validate_tiling_config(config);
    const int patches = config.tile_size / config.patch_size;
    // vLLM: int((image_size // patch_size) ** 2 * (downsample_ratio ** 2)).
    return static_cast<int>(static_cast<double>(patches * patches) *
                            (config.downsample_ratio * config.downsample_ratio));
}

std::vector<GridShape> candidate_grids(int min_tiles, int max_tiles) {
    SURF_CHECK(min_tiles >= 1 && min_tiles <= max_tiles, "candidate_grids", min_tiles, max_tiles);
    // Insertion order of vLLM's comprehension: for n, for i in 1..n, for j in 1..n.
    PySetEmulator set;
    for (int n = min_tiles; n <= max_tiles; ++n) {
        for (int i = 1; i <= n; ++i) {
            for (int j = 1; j <= n; ++j) {
                if (i * j >= min_tiles && i * j <= max_tiles) set.add(GridShape{i, j});
            }
        }
    }
    std::vector<GridShape> grids;
    for (const auto& slot : set.table) {
        if (slot.used) grids.push_back(slot.key);
    }
    std::stable_sort(grids.begin(), grids.end(), [](const GridShape& a, const GridShape& b) {
        return a.cols * a.rows < b.cols * b.rows;
    });
    return grids;
}

GridShape find_closest_grid(int width, int height, const std::vector<GridShape>& candidates, int tile_size) {
    SURF_CHECK(width > 0 && height > 0 && !candidates.empty(), "find_closest_grid", width, height);
    const double aspect = static_cast<double>(width) / height;
    const double area = static_cast<double>(width) * height;
    double best_diff = std::numeric_limits<double>::infinity();
    GridShape best{1, 1};
    for (const GridShape& g : candidates) {
        const double diff = std::fabs(aspect - static_cast<double>(g.cols) / g.rows);
        if (diff < best_diff) {
            best_diff = diff;
            best = g;
        } else if (diff == best_diff) {
            if (area > 0.5 * tile_size * tile_size * g.cols * g.rows) best = g;
        }
    }
    return best;
}

TilingPlan plan_tiles(int width, int height, const TilingConfig& config) {
    validate_tiling_config(config);
    if (width <= 0 || height <= 0) {
        throw Error(ErrorKind::kInvalidArgument, "plan_tiles: image size " + std::to_string(width) + "x" +
                                                     std::to_string(height) + " is empty");
    }
    TilingPlan plan;
    plan.grid = find_closest_grid(width, height, candidate_grids(config.min_tiles, config.max_tiles),
                                  config.tile_size);
    plan.resized_width = config.tile_size * plan.grid.cols;
    plan.resized_height = config.tile_size * plan.grid.rows;
    const int grid_tiles = plan.grid.cols * plan.grid.rows;
    plan.thumbnail = config.use_thumbnail && grid_tiles != 1;
    plan.n_tiles = grid_tiles + (plan.thumbnail ? 1 : 0);
    plan.n_image_tokens = plan.n_tiles * image_tokens_per_tile(config);
    return plan;
}

Image resize_bicubic(const Image& image, int out_width, int out_height, ResizePassOrder order) {
    if (image.empty() || image.channels != 3 || out_width <= 0 || out_height <= 0 ||
        out_width > kMaxImageSide || out_height > kMaxImageSide) {
        throw Error(ErrorKind::kInvalidArgument,
                    "resize_bicubic: cannot resize " + std::to_string(image.width) + "x" +
                        std::to_string(image.height) + "x" + std::to_string(image.channels) + " to " +
                        std::to_string(out_width) + "x" + std::to_string(out_height));
    }
    SURF_CHECK(image.pixels.size() == image.row_bytes() * image.height, "image buffer size",
               image.pixels.size());
    const bool horizontal = out_width != image.width;
    const bool vertical = out_height != image.height;
    if (!horizontal && !vertical) return image;

    const bool vertical_first = order == ResizePassOrder::kPillow13 && out_height < image.height &&
                                image.height - out_height > 2 * (image.width - out_width);
    if (vertical_first && horizontal) {
        Image stage(image.width, out_height, image.channels);
        resample_vertical(image, 0, compute_taps(image.height, out_height), stage);
        Image out(out_width, out_height, image.channels);
        resample_horizontal(stage, 0, compute_taps(image.width, out_width), out);
        return out;
    }

    const ResampleTaps vtaps = compute_taps(image.height, out_height);
    // Horizontal first: only the input rows the vertical pass reads go through the horizontal pass.
    const int row_first = vtaps.first.front();
    const int row_last = vtaps.first.back() + vtaps.count.back();

    Image stage;
    const Image* src = &image;
    int row_offset = 0;
    if (horizontal) {
        const ResampleTaps htaps = compute_taps(image.width, out_width);
        stage = Image(out_width, vertical ? row_last - row_first : image.height, image.channels);
        resample_horizontal(image, vertical ? row_first : 0, htaps, stage);
        if (!vertical) return stage;
        src = &stage;
        row_offset = row_first;
    }
    Image out(out_width, out_height, image.channels);
    resample_vertical(*src, row_offset, vtaps, out);
    return out;
}

Image crop(const Image& image, int x0, int y0, int width, int height) {
    if (x0 < 0 || y0 < 0 || width <= 0 || height <= 0 || x0 + width > image.width ||
        y0 + height > image.height) {
        throw Error(ErrorKind::kInvalidArgument,
                    "crop: box (" + std::to_string(x0) + ", " + std::to_string(y0) + ", " +
                        std::to_string(width) + "x" + std::to_string(height) + ") outside image " +
                        std::to_string(image.width) + "x" + std::to_string(image.height));
    }
    Image out(width, height, image.channels);
    for (int y = 0; y < height; ++y) {
        std::copy_n(image.at(x0, y0 + y), out.row_bytes(), out.row(y));
    }
    return out;
}

std::vector<Image> make_tiles(const Image& image, const TilingConfig& config, TilingPlan* plan_out) {
    if (image.empty() || image.channels != 3) {
        throw Error(ErrorKind::kInvalidArgument,
                    "make_tiles: expected a non-empty RGB image, got " + std::to_string(image.width) + "x" +
                        std::to_string(image.height) + "x" + std::to_string(image.channels));
    }
    const TilingPlan plan = plan_tiles(image.width, image.height, config);
    const int t = config.tile_size;
    std::vector<Image> tiles;
    tiles.reserve(plan.n_tiles);
    // The thumbnail is resized on a second thread while this one resizes the grid (each takes milliseconds of
    // a core for a screenshot), since the caller — an agent step — waits for both.
    std::future<Image> thumbnail;
    if (plan.thumbnail)
        thumbnail =
            std::async(std::launch::async, [&] { return resize_bicubic(image, t, t, config.resize_order); });
    const Image resized = resize_bicubic(image, plan.resized_width, plan.resized_height, config.resize_order);
    for (int k = 0; k < plan.grid.cols * plan.grid.rows; ++k) {
        tiles.push_back(crop(resized, (k % plan.grid.cols) * t, (k / plan.grid.cols) * t, t, t));
    }
    if (plan.thumbnail) tiles.push_back(thumbnail.get());
    if (plan_out) *plan_out = plan;
    return tiles;
}

void normalize_tile(const Image& tile, const TilingConfig& config, float* out) {
    SURF_CHECK(tile.channels == 3 && tile.width == config.tile_size && tile.height == config.tile_size,
               "normalize_tile shape", tile.width, "x", tile.height, "x", tile.channels);
    // The result depends only on (value, channel): tabulate the 3 x 256 outputs. Each entry is two
    // rounded float32 steps, as torchvision: ToTensor divides by 255, Normalize subtracts then divides
    // (not a multiply by the reciprocal, which would round differently).
    float table[3][256];
    for (int ch = 0; ch < 3; ++ch) {
        for (int v = 0; v < 256; ++v) {
            const float unit = static_cast<float>(v) / 255.0f;
            table[ch][v] = (unit - config.norm_mean[ch]) / config.norm_std[ch];
        }
    }
    const size_t plane = static_cast<size_t>(tile.width) * tile.height;
    const uint8_t* src = tile.pixels.data();
    for (size_t i = 0; i < plane; ++i) {
        out[i] = table[0][src[3 * i + 0]];
        out[plane + i] = table[1][src[3 * i + 1]];
        out[2 * plane + i] = table[2][src[3 * i + 2]];
    }
}

TiledImage tile_image(const Image& image, const TilingConfig& config) {
    TiledImage result;
    const std::vector<Image> tiles = make_tiles(image, config, &result.plan);
    result.tile_size = config.tile_size;
    const size_t per_tile = size_t{3} * config.tile_size * config.tile_size;
    result.pixels.resize(per_tile * tiles.size());
    for (size_t k = 0; k < tiles.size(); ++k)
        normalize_tile(tiles[k], config, result.pixels.data() + k * per_tile);
    return result;
}

}  // namespace surf::model
