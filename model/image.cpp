#include "model/image.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "kernels/base/error.h"

// stb is compiled here only, with static linkage, so no other translation unit (or Debian's
// libstb.so) can clash with these symbols. Formats without a magic number (TGA) are left out
// because stb would "recognise" arbitrary garbage as one.
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
#define STBI_ONLY_GIF
#define STBI_ONLY_BMP
#define STBI_ONLY_PNM
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

enum class Format { kPng, kJpeg, kGif, kBmp, kPnm, kUnknown };

Format sniff_format(const uint8_t* d, size_t n) {
    static const uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && std::memcmp(d, kPngMagic, 8) == 0) return Format::kPng;
    if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) return Format::kJpeg;
    if (n >= 6 && (std::memcmp(d, "GIF87a", 6) == 0 || std::memcmp(d, "GIF89a", 6) == 0)) return Format::kGif;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M') return Format::kBmp;
    if (n >= 2 && d[0] == 'P' && (d[1] == '5' || d[1] == '6')) return Format::kPnm;
    return Format::kUnknown;
}

[[noreturn]] void fail(ErrorKind kind, const std::string& name, const std::string& reason) {
    throw Error(kind, "image " + name + ": " + reason);
}

// stb's JPEG decoder pads a truncated entropy-coded segment with zeros and reports success, whereas
// PIL refuses such files. The end-of-image marker FF D9 cannot occur inside entropy-coded data (FF is
// byte-stuffed there), so a complete file has one after its last start-of-scan marker FF DA.
bool jpeg_has_end_marker(const uint8_t* d, size_t n) {
    size_t last_sos = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
        if (d[i] == 0xff && d[i + 1] == 0xda) last_sos = i;
    }
    if (last_sos == 0) return false;
    for (size_t i = last_sos + 2; i + 1 < n; ++i) {
        if (d[i] == 0xff && d[i + 1] == 0xd9) return true;
    }
    return false;
}

// A 16-bit greyscale PNG opens in PIL as mode "I;16", and convert("RGB") clips each sample to 255
// instead of keeping its high byte (which stb and PIL do for every other 16-bit PNG type).
bool png_is_grey16(const uint8_t* d, size_t n) {
    // IHDR is the first chunk: signature (8) + length (4) + "IHDR" (4) + w (4) + h (4) + depth + type.
    if (n < 26 || std::memcmp(d + 12, "IHDR", 4) != 0) return false;
    return d[24] == 16 && d[25] == 0;
}

uint32_t be32(const uint8_t* p) {
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
uint32_t le32(const uint8_t* p) {
    return uint32_t{p[3]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[1]} << 8 | p[0];
}

// The width and height a header declares, for the formats where that is a fixed-offset read (or,
// for JPEG, a walk over marker segments to the first start-of-frame). False when not found.
bool declared_size(Format format, const uint8_t* d, size_t n, int64_t* w, int64_t* h) {
    switch (format) {
        case Format::kPng:
            if (n < 24 || std::memcmp(d + 12, "IHDR", 4) != 0) return false;
            *w = be32(d + 16);
            *h = be32(d + 20);
            return true;
        case Format::kGif:
            if (n < 10) return false;
            *w = d[6] | d[7] << 8;
            *h = d[8] | d[9] << 8;
            return true;
        case Format::kBmp:
            if (n < 26) return false;
            *w = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(d + 18))));
            *h = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(d + 22))));
            return true;
        case Format::kJpeg:
            for (size_t i = 2; i + 9 < n;) {
                if (d[i] != 0xff) return false;
                const uint8_t marker = d[i + 1];
                if (marker == 0xff) {  // fill byte
                    ++i;
                    continue;
                }
                const bool sof =
                    marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc;
                if (sof) {
                    *h = d[i + 5] << 8 | d[i + 6];
                    *w = d[i + 7] << 8 | d[i + 8];
                    return true;
                }
                i += 2 + (size_t{d[i + 2]} << 8 | d[i + 3]);
            }
            return false;
        default: return false;
    }
}

struct StbFree {
    void operator()(void* p) const { stbi_image_free(p); }
};

std::string stb_reason() {
    const char* reason = stbi_failure_reason();
    return reason ? reason : "unknown decoder error";
}

}  // namespace

Image decode_image(const uint8_t* data, size_t size, const std::string& name) {
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
                 "; expected PNG, JPEG, GIF, BMP or PNM)");
    }

    // Header first: reject zero-size and decompression bombs before allocating any pixels.
    int w = 0, h = 0, file_channels = 0;
    auto check_limits = [&](int64_t width, int64_t height) {
        if (width > kMaxImageSide || height > kMaxImageSide || width * height > kMaxImagePixels) {
            fail(ErrorKind::kResourceExhausted, name,
                 "image of " + std::to_string(width) + "x" + std::to_string(height) +
                     " exceeds the limit of " + std::to_string(kMaxImageSide) + " pixels per side");
        }
    };
    // stb rejects some huge headers itself but then reports only "unknown image type"; read the
    // declared size first so that a bomb is named as one.
    int64_t declared_w = 0, declared_h = 0;
    if (declared_size(format, data, size, &declared_w, &declared_h)) check_limits(declared_w, declared_h);
    if (!stbi_info_from_memory(data, len, &w, &h, &file_channels)) {
        fail(ErrorKind::kFormat, name, "unreadable header (" + stb_reason() + ")");
    }
    if (w <= 0 || h <= 0) fail(ErrorKind::kFormat, name, "zero-size image");
    check_limits(w, h);
    if (format == Format::kJpeg && !jpeg_has_end_marker(data, size)) {
        fail(ErrorKind::kFormat, name, "truncated JPEG (no end-of-image marker after the last scan)");
    }

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
    // req_comp = 3: stb replicates grey and drops alpha without compositing, as convert("RGB").
    std::unique_ptr<stbi_uc, StbFree> rgb(stbi_load_from_memory(data, len, &dw, &dh, &dc, 3));
    if (!rgb) fail(ErrorKind::kFormat, name, "corrupt or truncated (" + stb_reason() + ")");
    if (dw != w || dh != h) fail(ErrorKind::kFormat, name, "header and pixel data disagree on size");
    std::memcpy(image.pixels.data(), rgb.get(), image.pixels.size());
    return image;
}

Image load_image(const std::string& path) {
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
    return decode_image(bytes, path);
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
