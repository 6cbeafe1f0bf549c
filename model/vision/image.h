// Decoded images: PNG / JPEG / BMP through stb_image, WebP through OpenCV (builds that have it), the first
// frame of a GIF through image_gif.cpp; always converted to 8-bit RGB the way PIL's `Image.convert("RGB")`
// does (grey replicated, alpha dropped without compositing, palette looked up). Also PNG encoding for traces
// and drawing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace surf::model {

// Decompression-bomb guard: images are rejected from their header, before any pixel is decoded.
constexpr int kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = int64_t{kMaxImageSide} * kMaxImageSide;
// Files larger than this are refused before being read into memory.
constexpr size_t kMaxImageFileBytes = size_t{512} << 20;

struct Image {
    int width = 0;
    int height = 0;
    int channels = 3;             // always 3 (RGB) for decoded images
    std::vector<uint8_t> pixels;  // [height, width, channels] uint8, row-major

    Image() = default;
    Image(int w, int h, int c = 3)
        : width(w), height(h), channels(c), pixels(static_cast<size_t>(w) * h * c, 0) {}

    bool empty() const { return width == 0 || height == 0; }
    size_t row_bytes() const { return static_cast<size_t>(width) * channels; }
    uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * row_bytes(); }
    const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * row_bytes(); }
    uint8_t* at(int x, int y) { return row(y) + static_cast<size_t>(x) * channels; }
    const uint8_t* at(int x, int y) const { return row(y) + static_cast<size_t>(x) * channels; }
};

// What happens to an alpha channel on conversion to RGB.
enum class AlphaMode {
    kDrop,              // PIL `convert("RGB")`: colour kept as stored, alpha ignored
    kCompositeOnWhite,  // vLLM's image loader: RGBA images (PNG colour type 6, WebP with alpha) are pasted
                        // onto white (`convert_image_mode` → `rgba_to_rgb`); every other mode as kDrop
};

// Decodes an image held in memory. `name` is used in error messages ("<memory>" by default).
// Throws surf::Error (kFormat / kUnsupported / kResourceExhausted) on empty, unknown, truncated,
// corrupt or oversized input; never crashes.
// `max_pixels` bounds width × height, checked from the header before any pixel is allocated.
Image decode_image(const uint8_t* data, size_t size, const std::string& name = "<memory>",
                   AlphaMode alpha = AlphaMode::kDrop, int64_t max_pixels = kMaxImagePixels);
inline Image decode_image(const std::vector<uint8_t>& bytes, const std::string& name = "<memory>",
                          AlphaMode alpha = AlphaMode::kDrop) {
    return decode_image(bytes.data(), bytes.size(), name, alpha);
}

// Reads and decodes a file; errors name the path (kIo when it cannot be read).
Image load_image(const std::string& path, AlphaMode alpha = AlphaMode::kDrop);

// PNG encoding of an RGB (3) or RGBA (4) or grey (1) image.
std::vector<uint8_t> encode_png(const Image& image);
void save_png(const Image& image, const std::string& path);

// zlib's CRC-32 of a byte range (e.g. of an image's pixels): a cheap fingerprint for traces, for
// spotting an unchanged screenshot, and for comparing against reference checksums.
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

}  // namespace surf::model
