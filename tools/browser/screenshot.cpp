#include "tools/browser/screenshot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>

#include "base/error.h"

namespace surf::tools {

int ViewportGeometry::pixel_width() const {
    return static_cast<int>(std::lround(css_width * device_scale_factor));
}
int ViewportGeometry::pixel_height() const {
    return static_cast<int>(std::lround(css_height * device_scale_factor));
}

CssPoint ViewportGeometry::css_from_pixel(double px, double py) const {
    return {px / device_scale_factor, py / device_scale_factor};
}

CssPoint ViewportGeometry::pixel_from_css(double cx, double cy) const {
    return {cx * device_scale_factor, cy * device_scale_factor};
}

CssPoint Screenshot::css_from_pixel(double px, double py) const {
    return {css_region.x + px / pixels_per_css, css_region.y + py / pixels_per_css};
}

CssPoint Screenshot::pixel_from_css(double cx, double cy) const {
    return {(cx - css_region.x) * pixels_per_css, (cy - css_region.y) * pixels_per_css};
}

void Screenshot::save(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    if (!out) throw Error(ErrorKind::kIo, "cannot open '" + path + "' for writing the screenshot");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error(ErrorKind::kIo, "cannot write the screenshot to '" + path + "'");
}

std::vector<uint8_t> base64_decode(const std::string& text) {
    static const auto table = [] {
        std::array<int, 256> t{};
        t.fill(-1);
        const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = i;
        return t;
    }();
    std::vector<uint8_t> out;
    out.reserve(text.size() / 4 * 3);
    uint32_t acc = 0;
    int bits = 0;
    for (char c : text) {
        if (c == '=') break;
        if (c == '\n' || c == '\r') continue;
        int v = table[static_cast<unsigned char>(c)];
        if (v < 0) throw Error(ErrorKind::kFormat, std::string("base64: unexpected character '") + c + "'");
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<uint8_t>((acc >> bits) & 0xFF));
        }
    }
    return out;
}

std::string base64_encode(const std::vector<uint8_t>& bytes) {
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        uint32_t n = static_cast<uint32_t>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) n |= static_cast<uint32_t>(bytes[i + 1]) << 8;
        if (i + 2 < bytes.size()) n |= bytes[i + 2];
        out += alphabet[(n >> 18) & 63];
        out += alphabet[(n >> 12) & 63];
        out += i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? alphabet[n & 63] : '=';
    }
    return out;
}

void image_dimensions(const std::vector<uint8_t>& b, ImageFormat format, int& width, int& height) {
    auto be16 = [&](size_t i) { return (b[i] << 8) | b[i + 1]; };
    auto be32 = [&](size_t i) {
        return static_cast<int>((uint32_t(b[i]) << 24) | (uint32_t(b[i + 1]) << 16) |
                                (uint32_t(b[i + 2]) << 8) | b[i + 3]);
    };
    if (format == ImageFormat::kPng) {
        static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
        if (b.size() < 24 || !std::equal(sig, sig + 8, b.begin()) ||
            std::string(b.begin() + 12, b.begin() + 16) != "IHDR") {
            throw Error(ErrorKind::kFormat, "screenshot is not a PNG file");
        }
        width = be32(16);
        height = be32(20);
        return;
    }
    if (b.size() < 4 || b[0] != 0xFF || b[1] != 0xD8)
        throw Error(ErrorKind::kFormat, "screenshot is not a JPEG file");
    size_t i = 2;
    while (i + 9 < b.size()) {
        if (b[i] != 0xFF)
            throw Error(ErrorKind::kFormat, "JPEG screenshot: bad marker at byte " + std::to_string(i));
        uint8_t marker = b[i + 1];
        if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01) {
            i += 2;
            continue;
        }
        // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size.
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
            height = be16(i + 5);
            width = be16(i + 7);
            return;
        }
        i += 2 + static_cast<size_t>(be16(i + 2));
    }
    throw Error(ErrorKind::kFormat, "JPEG screenshot has no frame header");
}

}  // namespace surf::tools
