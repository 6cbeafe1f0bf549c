#include "agent/coordinates.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/check.h"
#include "base/error.h"

namespace surf::agent {

const char* point_convention_name(PointConvention c) {
    return c == PointConvention::kNormalized1000 ? "normalized_1000" : "image_pixels";
}

PointConvention parse_point_convention(const std::string& name) {
    if (name == "normalized_1000") return PointConvention::kNormalized1000;
    if (name == "image_pixels") return PointConvention::kImagePixels;
    throw Error(ErrorKind::kConfig,
                "point convention \"" + name + "\": expected normalized_1000 or image_pixels");
}

ScreenFrame ScreenFrame::of(const tools::Screenshot& shot) {
    return ScreenFrame{shot.width, shot.height, shot.css_region, shot.pixels_per_css};
}

ImageSize fit_size(ImageSize image, int max_width, int max_height) {
    double scale = 1.0;
    if (max_width > 0 && image.width > max_width)
        scale = std::min(scale, static_cast<double>(max_width) / image.width);
    if (max_height > 0 && image.height > max_height)
        scale = std::min(scale, static_cast<double>(max_height) / image.height);
    if (scale >= 1.0) return image;
    return ImageSize{std::max(1, static_cast<int>(std::lround(image.width * scale))),
                     std::max(1, static_cast<int>(std::lround(image.height * scale)))};
}

double max_coordinate_x(PointConvention c, ImageSize sent) {
    return c == PointConvention::kNormalized1000 ? 1000.0 : static_cast<double>(sent.width - 1);
}
double max_coordinate_y(PointConvention c, ImageSize sent) {
    return c == PointConvention::kNormalized1000 ? 1000.0 : static_cast<double>(sent.height - 1);
}

tools::CssPoint to_css(PointConvention c, double x, double y, ImageSize sent, const ScreenFrame& frame) {
    SURF_CHECK(
        sent.width > 0 && sent.height > 0 && frame.width > 0 && frame.height > 0 && frame.pixels_per_css > 0,
        "to_css needs positive sizes");
    const double mx = max_coordinate_x(c, sent), my = max_coordinate_y(c, sent);
    if (!std::isfinite(x) || !std::isfinite(y) || x < 0 || y < 0 || x > mx || y > my) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "point (%g, %g) is outside [0, %g] × [0, %g] (%s)", x, y, mx, my,
                      point_convention_name(c));
        throw Error(ErrorKind::kModelOutput, buf);
    }
    // Fractions of the sent image; the sent image is the whole screenshot resized, so the same
    // fractions hold for the screenshot.
    const double fx = c == PointConvention::kNormalized1000 ? x / 1000.0 : x / sent.width;
    const double fy = c == PointConvention::kNormalized1000 ? y / 1000.0 : y / sent.height;
    const double px = fx * frame.width, py = fy * frame.height;
    tools::CssPoint css{frame.css_region.x + px / frame.pixels_per_css,
                        frame.css_region.y + py / frame.pixels_per_css};
    // Keep the point on a clickable pixel: the far edge (fraction 1) belongs to no pixel.
    const double last_x = frame.css_region.x + std::max(0.0, frame.css_region.width - 1.0);
    const double last_y = frame.css_region.y + std::max(0.0, frame.css_region.height - 1.0);
    css.x = std::clamp(css.x, frame.css_region.x, last_x);
    css.y = std::clamp(css.y, frame.css_region.y, last_y);
    return css;
}

void from_css(PointConvention c, const tools::CssPoint& css, ImageSize sent, const ScreenFrame& frame,
              double* x, double* y) {
    const double fx = (css.x - frame.css_region.x) * frame.pixels_per_css / frame.width;
    const double fy = (css.y - frame.css_region.y) * frame.pixels_per_css / frame.height;
    *x = c == PointConvention::kNormalized1000 ? fx * 1000.0 : fx * sent.width;
    *y = c == PointConvention::kNormalized1000 ? fy * 1000.0 : fy * sent.height;
}

}  // namespace surf::agent
