#include "model/vision/image.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "base/error.h"
#include "model/vision/image_gif.h"
#include "model/vision/image_opencv.h"

// stb is compiled here only, with static linkage, so no other translation unit (or Debian's
// libstb.so) can clash with these symbols. Only PNG, JPEG and BMP are compiled in: formats without a
// magic number (TGA) would "recognise" garbage, and stb 2.27's GIF, PNM, PSD and HDR readers have
// published memory-safety bugs (CVE-2023-45661..45667, CVE-2021-42715/42716).
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#endif
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#include <stb/stb_image.h>
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace surf::model {
namespace {

enum class Format { kPng, kJpeg, kBmp, kWebp, kGif, kUnknown };

Format sniff_format(const uint8_t* d, size_t n) {
    static const uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && std::memcmp(d, kPngMagic, 8) == 0) return Format::kPng;
    if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) return Format::kJpeg;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M') return Format::kBmp;
    if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) return Format::kWebp;
    if (is_gif(d, n)) return Format::kGif;
    return Format::kUnknown;
}

[[noreturn]] void fail(ErrorKind kind, const std::string& name, const std::string& reason) {
    throw Error(kind, "image " + name + ": " + reason);
}

// A 16-bit greyscale PNG opens in PIL as mode "I;16", and convert("RGB") clips each sample to 255
// instead of keeping its high byte (which stb and PIL do for every other 16-bit PNG type).
bool png_is_grey16(const uint8_t* d, size_t n) {
    // IHDR is the first chunk: signature (8) + length (4) + "IHDR" (4) + w (4) + h (4) + depth + type.
    if (n < 26 || std::memcmp(d + 12, "IHDR", 4) != 0) return false;
    return d[24] == 16 && d[25] == 0;
}

// PNG colour type 6 (RGBA), the files PIL opens in mode "RGBA".
bool png_is_rgba(const uint8_t* d, size_t n) {
    if (n < 26 || std::memcmp(d + 12, "IHDR", 4) != 0) return false;
    return d[25] == 6;
}

uint32_t be32(const uint8_t* p) {
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
uint32_t le32(const uint8_t* p) {
    return uint32_t{p[3]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[1]} << 8 | p[0];
}

// The canvas a WebP file declares: its first chunk is VP8 (lossy: 14-bit sizes after the start code),
// VP8L (lossless: 14-bit sizes − 1 after the signature) or VP8X (extended: 24-bit sizes − 1).
bool webp_size(const uint8_t* d, size_t n, int64_t* w, int64_t* h) {
    if (n < 30) return false;
    const uint8_t* c = d + 20;  // the first chunk's payload
    if (std::memcmp(d + 12, "VP8 ", 4) == 0) {
        if (c[3] != 0x9d || c[4] != 0x01 || c[5] != 0x2a) return false;
        *w = (c[6] | c[7] << 8) & 0x3fff;
        *h = (c[8] | c[9] << 8) & 0x3fff;
        return true;
    }
    if (std::memcmp(d + 12, "VP8L", 4) == 0) {
        if (c[0] != 0x2f) return false;
        const uint32_t bits = le32(c + 1);
        *w = (bits & 0x3fff) + 1;
        *h = (bits >> 14 & 0x3fff) + 1;
        return true;
    }
    if (std::memcmp(d + 12, "VP8X", 4) == 0) {
        *w = (c[4] | c[5] << 8 | c[6] << 16) + 1;
        *h = (c[7] | c[8] << 8 | c[9] << 16) + 1;
        return true;
    }
    return false;
}

// The width and height a PNG, BMP or WebP header declares (fixed offsets). False when not found.
bool declared_size(Format format, const uint8_t* d, size_t n, int64_t* w, int64_t* h) {
    switch (format) {
        case Format::kPng:
            if (n < 24 || std::memcmp(d + 12, "IHDR", 4) != 0) return false;
            *w = be32(d + 16);
            *h = be32(d + 20);
            return true;
        case Format::kBmp:
            if (n < 26) return false;
            *w = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(d + 18))));
            *h = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(d + 22))));
            return true;
        case Format::kWebp: return webp_size(d, n, w, h);
        default: return false;
    }
}

bool is_sof_marker(uint8_t m) {
    return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
}
bool is_rst_marker(uint8_t m) {
    return m >= 0xd0 && m <= 0xd7;
}

// Walks a JPEG's marker segments (skipping the entropy-coded data after each start-of-scan) and
// returns "" when the structure is sound, else the reason. It does three things stb_image 2.27 does not:
//  - truncation: stb pads missing entropy-coded data with zeros and reports success, whereas PIL
//    refuses the file; a complete file has an end-of-image marker after its last scan;
//  - Huffman tables declaring more than 256 codes: stb 2.27 writes past its tables (fixed upstream
//    in 2.28), so they must never reach it;
//  - the frame size, read before stb allocates anything (decompression bombs).
std::string check_jpeg_structure(const uint8_t* d, size_t n, int64_t* w, int64_t* h) {
    bool seen_frame = false, seen_scan = false;
    size_t i = 2;  // after SOI
    while (true) {
        if (i + 1 >= n)
            return seen_scan ? "truncated JPEG (no end-of-image marker)" : "truncated JPEG header";
        if (d[i] != 0xff) return "corrupt JPEG (no marker at byte " + std::to_string(i) + ")";
        const uint8_t marker = d[i + 1];
        if (marker == 0xff) {  // fill byte before a marker
            ++i;
            continue;
        }
        if (marker == 0xd9) break;                                        // EOI
        if (marker == 0x01 || is_rst_marker(marker) || marker == 0xd8) {  // no length field
            i += 2;
            continue;
        }
        if (i + 3 >= n) return "truncated JPEG segment";
        const size_t length = size_t{d[i + 2]} << 8 | d[i + 3];
        if (length < 2 || i + 2 + length > n) return "truncated or corrupt JPEG segment";
        const uint8_t* seg = d + i + 4;
        const size_t seg_len = length - 2;
        if (is_sof_marker(marker) && !seen_frame) {
            if (seg_len < 5) return "corrupt JPEG frame header";
            *h = seg[1] << 8 | seg[2];
            *w = seg[3] << 8 | seg[4];
            seen_frame = true;
        }
        if (marker == 0xc4) {  // DHT: tables of (class/id byte, 16 code counts, symbols)
            size_t p = 0;
            while (p < seg_len) {
                if (p + 17 > seg_len) return "corrupt JPEG Huffman table";
                size_t codes = 0;
                for (int k = 1; k <= 16; ++k) codes += seg[p + k];
                if (codes > 256) return "corrupt JPEG Huffman table (" + std::to_string(codes) + " codes)";
                p += 17 + codes;
            }
            if (p != seg_len) return "corrupt JPEG Huffman table (length mismatch)";
        }
        i += 2 + length;
        if (marker == 0xda) {  // entropy-coded data runs to the next marker other than a stuffed 00 or RSTn
            seen_scan = true;
            while (i + 1 < n && !(d[i] == 0xff && d[i + 1] != 0x00 && !is_rst_marker(d[i + 1]))) ++i;
        }
    }
    if (!seen_frame || !seen_scan) return "corrupt JPEG (no frame or no scan)";
    return "";
}

struct StbFree {
    void operator()(void* p) const { stbi_image_free(p); }
};

std::string stb_reason() {
    const char* reason = stbi_failure_reason();
    return reason ? reason : "unknown decoder error";
}

}  // namespace

Image decode_image(const uint8_t* data, size_t size, const std::string& name, AlphaMode alpha,
                   int64_t max_pixels) {
    if (data == nullptr || size == 0) fail(ErrorKind::kFormat, name, "empty input");
    if (size > static_cast<size_t>(INT32_MAX)) fail(ErrorKind::kResourceExhausted, name, "input over 2 GiB");
    const int len = static_cast<int>(size);
    const Format format = sniff_format(data, size);
    if (format == Format::kUnknown) {
        char head[64];
        std::snprintf(head, sizeof(head), "%02x %02x %02x %02x", data[0], size > 1 ? data[1] : 0,
                      size > 2 ? data[2] : 0, size > 3 ? data[3] : 0);
        fail(ErrorKind::kUnsupported, name,
             std::string("unrecognised format (first bytes ") + head +
                 "; expected PNG, JPEG, BMP, WebP or GIF)");
    }

    // Header first: reject zero-size and decompression bombs before allocating any pixels.
    int w = 0, h = 0, file_channels = 0;
    auto check_limits = [&](int64_t width, int64_t height) {
        if (width > kMaxImageSide || height > kMaxImageSide) {
            fail(ErrorKind::kResourceExhausted, name,
                 "image of " + std::to_string(width) + "x" + std::to_string(height) +
                     " exceeds the limit of " + std::to_string(kMaxImageSide) + " pixels per side");
        }
        if (width * height > std::min(max_pixels, kMaxImagePixels)) {
            fail(ErrorKind::kResourceExhausted, name,
                 "image of " + std::to_string(width) + "x" + std::to_string(height) + " has " +
                     std::to_string(width * height) + " pixels, over the limit of " +
                     std::to_string(std::min(max_pixels, kMaxImagePixels)));
        }
    };
    // stb rejects some huge headers itself but then reports only "unknown image type"; read the
    // declared size first so that a bomb is named as one.
    int64_t declared_w = 0, declared_h = 0;
    if (format == Format::kJpeg) {
        const std::string problem = check_jpeg_structure(data, size, &declared_w, &declared_h);
        if (declared_w > 0 || declared_h > 0) check_limits(declared_w, declared_h);
        if (!problem.empty()) fail(ErrorKind::kFormat, name, problem);
    } else if (declared_size(format, data, size, &declared_w, &declared_h)) {
        check_limits(declared_w, declared_h);
    }
    if (format == Format::kGif) return decode_gif(data, size, name, check_limits);
    if (format == Format::kWebp) {
        if (declared_w <= 0 || declared_h <= 0) fail(ErrorKind::kFormat, name, "unreadable WebP header");
        Image image = opencv_decode(data, size, name, alpha == AlphaMode::kCompositeOnWhite);
        if (image.width != declared_w || image.height != declared_h)
            fail(ErrorKind::kFormat, name, "header and pixel data disagree on size");
        return image;
    }
    if (!stbi_info_from_memory(data, len, &w, &h, &file_channels)) {
        fail(ErrorKind::kFormat, name, "unreadable header (" + stb_reason() + ")");
    }
    if (w <= 0 || h <= 0) fail(ErrorKind::kFormat, name, "zero-size image");
    check_limits(w, h);

    Image image(w, h, 3);
    int dw = 0, dh = 0, dc = 0;
    if (format == Format::kPng && png_is_grey16(data, size)) {
        std::unique_ptr<stbi_us, StbFree> grey(stbi_load_16_from_memory(data, len, &dw, &dh, &dc, 1));
        if (!grey) fail(ErrorKind::kFormat, name, "corrupt or truncated (" + stb_reason() + ")");
        if (dw != w || dh != h) fail(ErrorKind::kFormat, name, "header and pixel data disagree on size");
        const size_t n = static_cast<size_t>(w) * h;
        for (size_t i = 0; i < n; ++i) {
            const uint8_t v = static_cast<uint8_t>(std::min<int>(grey.get()[i], 255));
            image.pixels[3 * i + 0] = image.pixels[3 * i + 1] = image.pixels[3 * i + 2] = v;
        }
        return image;
    }
    if (alpha == AlphaMode::kCompositeOnWhite && format == Format::kPng && png_is_rgba(data, size)) {
        std::unique_ptr<stbi_uc, StbFree> rgba(stbi_load_from_memory(data, len, &dw, &dh, &dc, 4));
        if (!rgba) fail(ErrorKind::kFormat, name, "corrupt or truncated (" + stb_reason() + ")");
        if (dw != w || dh != h) fail(ErrorKind::kFormat, name, "header and pixel data disagree on size");
        const size_t n = static_cast<size_t>(w) * h;
        const uint8_t* src = rgba.get();
        for (size_t i = 0; i < n; ++i) {
            for (int c = 0; c < 3; ++c) image.pixels[3 * i + c] = on_white(src[4 * i + c], src[4 * i + 3]);
        }
        return image;
    }
    // req_comp = 3: stb replicates grey and drops alpha without compositing, as convert("RGB").
    std::unique_ptr<stbi_uc, StbFree> rgb(stbi_load_from_memory(data, len, &dw, &dh, &dc, 3));
    if (!rgb) fail(ErrorKind::kFormat, name, "corrupt or truncated (" + stb_reason() + ")");
    if (dw != w || dh != h) fail(ErrorKind::kFormat, name, "header and pixel data disagree on size");
    std::memcpy(image.pixels.data(), rgb.get(), image.pixels.size());
    return image;
}

Image load_image(const std::string& path, AlphaMode alpha) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(ErrorKind::kIo, "image " + path + ": is a folder, not a file");
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(ErrorKind::kIo, "image " + path + ": cannot open file");
    const std::streamoff end = in.tellg();
    if (end < 0) throw Error(ErrorKind::kIo, "image " + path + ": cannot determine file size");
    if (static_cast<uint64_t>(end) > kMaxImageFileBytes) {
        throw Error(ErrorKind::kResourceExhausted,
                    "image " + path + ": file of " + std::to_string(end) + " bytes exceeds the limit");
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(end));
    in.seekg(0);
    if (!bytes.empty() && !in.read(reinterpret_cast<char*>(bytes.data()), end)) {
        throw Error(ErrorKind::kIo, "image " + path + ": read failed");
    }
    return decode_image(bytes, path, alpha);
}

std::vector<uint8_t> encode_png(const Image& image) {
    if (image.empty() || (image.channels != 1 && image.channels != 3 && image.channels != 4) ||
        image.pixels.size() != static_cast<size_t>(image.width) * image.height * image.channels) {
        throw Error(ErrorKind::kInvalidArgument, "encode_png: bad image " + std::to_string(image.width) +
                                                     "x" + std::to_string(image.height) + "x" +
                                                     std::to_string(image.channels));
    }
    std::vector<uint8_t> out;
    auto sink = [](void* context, void* data, int size) {
        auto* buffer = static_cast<std::vector<uint8_t>*>(context);
        const auto* bytes = static_cast<const uint8_t*>(data);
        buffer->insert(buffer->end(), bytes, bytes + size);
    };
    const int ok = stbi_write_png_to_func(sink, &out, image.width, image.height, image.channels,
                                          image.pixels.data(), static_cast<int>(image.row_bytes()));
    if (!ok) throw Error(ErrorKind::kResourceExhausted, "encode_png: encoder failed");
    return out;
}

uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc) {
    // Reflected polynomial 0xEDB88320, table built once (thread-safe static init).
    static const auto table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    crc = ~crc;
    for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

void save_png(const Image& image, const std::string& path) {
    const std::vector<uint8_t> bytes = encode_png(image);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::kIo, "image " + path + ": cannot open for writing");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error(ErrorKind::kIo, "image " + path + ": write failed");
}

}  // namespace surf::model
