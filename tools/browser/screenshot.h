// Screenshots and the exact mapping between screenshot pixels and CSS pixels (the space in which every
// mouse action is given). With device scale factor k, a viewport screenshot is (k·W)×(k·H) pixels and
// pixel (u, v) covers CSS point (u / k, v / k); a clip adds its CSS origin and its own scale.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surf::tools {

enum class ImageFormat { kPng, kJpeg };

struct CssPoint {
    double x = 0, y = 0;
};

struct CssRect {
    double x = 0, y = 0, width = 0, height = 0;
};

struct ViewportGeometry {
    int css_width = 1280;
    int css_height = 720;
    double device_scale_factor = 1.0;

    // Size of a full-viewport screenshot in image pixels.
    int pixel_width() const;
    int pixel_height() const;
    // Viewport screenshot pixel → CSS pixel, and back. Exact inverses of each other.
    CssPoint css_from_pixel(double px, double py) const;
    CssPoint pixel_from_css(double cx, double cy) const;
    bool contains_css(double cx, double cy) const {
        return cx >= 0 && cy >= 0 && cx < css_width && cy < css_height;
    }
};

struct Screenshot {
    std::vector<uint8_t> bytes;  // the encoded PNG or JPEG file
    ImageFormat format = ImageFormat::kPng;
    int width = 0, height = 0;  // image pixels, read from the file header
    CssRect css_region;         // the CSS region the image shows (the viewport, or the clip)
    double pixels_per_css = 1;  // device_scale_factor × clip scale

    // Image pixel → CSS pixel of the viewport (what click() takes), and back.
    CssPoint css_from_pixel(double px, double py) const;
    CssPoint pixel_from_css(double cx, double cy) const;
    // Writes the bytes to `path`; throws Error(kIo) naming it.
    void save(const std::string& path) const;
};

// Standard base64 (RFC 4648) with padding, as CDP encodes binary data. Throws Error(kFormat) on bad input.
std::vector<uint8_t> base64_decode(const std::string& text);
std::string base64_encode(const std::vector<uint8_t>& bytes);

// Width and height from a PNG IHDR or a JPEG SOFn header. Throws Error(kFormat) if neither parses.
void image_dimensions(const std::vector<uint8_t>& bytes, ImageFormat format, int& width, int& height);

}  // namespace surf::tools
