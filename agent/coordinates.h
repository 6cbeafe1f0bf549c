// From a point the model gives to the CSS pixel the browser clicks (spec/agent.md §2.1, §6.3). Three
// spaces: the image SENT to the model (possibly downscaled from the screenshot; the engine's tiling
// resizes it again internally, but the model's coordinates refer to the image it was given), the
// SCREENSHOT (device pixels: CSS × device scale factor, plus a clip), and CSS pixels of the viewport.
// Which convention the model speaks (pixels of the sent image, or 0–1000 normalised) is a setting of
// the prompt profile because the H models differ.
#pragma once

#include <string>

#include "tools/browser/screenshot.h"

namespace surf::agent {

enum class PointConvention {
    kNormalized1000,  // x, y in [0, 1000] of the sent image's width/height (Holo2+, Holotron default)
    kImagePixels,     // x, y in pixels of the sent image (Holo1 / Holo1.5)
};
const char* point_convention_name(PointConvention convention);
// "normalized_1000" or "image_pixels"; throws Error(kConfig) naming the value otherwise.
PointConvention parse_point_convention(const std::string& name);

struct ImageSize {
    int width = 0, height = 0;
};

// What a screenshot shows: its pixel size and the CSS region it covers (tools::Screenshot's fields).
struct ScreenFrame {
    int width = 0, height = 0;    // screenshot pixels
    tools::CssRect css_region;    // CSS region of the viewport shown
    double pixels_per_css = 1.0;  // device scale factor × clip scale
    static ScreenFrame of(const tools::Screenshot& shot);
};

// The size to send a screenshot at: the largest size with the same aspect ratio that fits in
// max_width × max_height (0 = no limit on that side); never upscales.
ImageSize fit_size(ImageSize image, int max_width, int max_height);

// The largest valid coordinate in a convention for an image of this size (inclusive).
double max_coordinate_x(PointConvention convention, ImageSize sent);
double max_coordinate_y(PointConvention convention, ImageSize sent);

// Maps a model point to CSS pixels of the viewport. The point must lie in [0, max]; the result is
// clamped inside the CSS region (a normalised 1000 is the far edge, which is not a clickable pixel).
// Throws Error(kModelOutput) naming the value when the point is out of range.
tools::CssPoint to_css(PointConvention convention, double x, double y, ImageSize sent,
                       const ScreenFrame& frame);

// The inverse, for drawing and for tests: the CSS point as a point in the model's convention.
void from_css(PointConvention convention, const tools::CssPoint& css, ImageSize sent,
              const ScreenFrame& frame, double* x, double* y);

}  // namespace surf::agent
