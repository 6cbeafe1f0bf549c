#include "model/vision/image_gif.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "base/error.h"

namespace surf::model {
namespace {

constexpr int kMaxCodes = 4096;  // LZW codes are at most 12 bits wide

[[noreturn]] void corrupt(const std::string& name, const std::string& reason) {
    throw Error(ErrorKind::kFormat, "image " + name + ": GIF " + reason);
}

// A bounds-checked cursor over the file.
class Reader {
public:
    Reader(const uint8_t* d, size_t n, const std::string& name) : d_(d), n_(n), name_(name) {}
    uint8_t byte() {
        need(1);
        return d_[at_++];
    }
    int u16() {
        need(2);
        const int v = d_[at_] | (d_[at_ + 1] << 8);
        at_ += 2;
        return v;
    }
    const uint8_t* bytes(size_t k) {
        need(k);
        const uint8_t* p = d_ + at_;
        at_ += k;
        return p;
    }
    // Skips a chain of data sub-blocks (length byte, then that many bytes; a zero length ends it).
    void skip_blocks() {
        for (uint8_t len = byte(); len != 0; len = byte()) bytes(len);
    }
    // The concatenated data of a chain of sub-blocks.
    std::vector<uint8_t> blocks() {
        std::vector<uint8_t> out;
        for (uint8_t len = byte(); len != 0; len = byte()) {
            const uint8_t* p = bytes(len);
            out.insert(out.end(), p, p + len);
        }
        return out;
    }

private:
    void need(size_t k) const {
        if (k > n_ - at_) corrupt(name_, "truncated at byte " + std::to_string(at_));
    }
    const uint8_t* d_;
    size_t n_;
    size_t at_ = 0;
    const std::string& name_;
};

struct Frame {
    int x = 0, y = 0, width = 0, height = 0;
    bool interlaced = false;
    int transparent = -1;          // palette index, -1 none
    std::vector<uint8_t> palette;  // RGB triples; empty: none (indices are grey levels)
    int min_code_size = 0;
    std::vector<uint8_t> data;  // the LZW stream
};

std::vector<uint8_t> read_palette(Reader& r, uint8_t flags) {
    const size_t entries = size_t{1} << ((flags & 7) + 1);
    const uint8_t* p = r.bytes(3 * entries);
    return {p, p + 3 * entries};
}

// Reads the extensions and the image descriptor of the first frame.
Frame first_frame(Reader& r, const std::vector<uint8_t>& global_palette, const std::string& name) {
    Frame f;
    for (;;) {
        const uint8_t tag = r.byte();
        if (tag == 0x3B) corrupt(name, "has no image");
        if (tag == 0x21) {
            const uint8_t label = r.byte();
            if (label == 0xF9) {  // graphic control: the transparent index
                const std::vector<uint8_t> b = r.blocks();
                if (b.size() >= 4 && (b[0] & 1)) f.transparent = b[3];
            } else {
                r.skip_blocks();
            }
            continue;
        }
        if (tag != 0x2C) {
            static const char* kHex = "0123456789abcdef";
            corrupt(name, std::string("has an unknown block 0x") + kHex[tag >> 4] + kHex[tag & 15]);
        }
        f.x = r.u16();
        f.y = r.u16();
        f.width = r.u16();
        f.height = r.u16();
        const uint8_t flags = r.byte();
        f.interlaced = flags & 0x40;
        f.palette = (flags & 0x80) ? read_palette(r, flags) : global_palette;
        f.min_code_size = r.byte();
        if (f.min_code_size < 1 || f.min_code_size > 11)
            corrupt(name, "LZW code size " + std::to_string(f.min_code_size) + " is outside 1..11");
        f.data = r.blocks();
        return f;
    }
}

// Decodes the LZW stream into `out` (width × height indices, in stream order). Stops at the end code or when
// `out` is full; a stream that ends before filling it is corrupt.
void lzw_decode(const Frame& f, std::vector<uint8_t>& out, const std::string& name) {
    const int clear = 1 << f.min_code_size, end = clear + 1;
    std::array<uint16_t, kMaxCodes> prefix{};
    std::array<uint8_t, kMaxCodes> suffix{}, first{};
    std::array<uint8_t, kMaxCodes + 1> stack{};
    for (int c = 0; c < clear; ++c) suffix[c] = first[c] = static_cast<uint8_t>(c);
    int width = f.min_code_size + 1, next = end + 1, previous = -1;
    size_t written = 0, bit = 0;
    const size_t total_bits = f.data.size() * 8;
    while (written < out.size()) {
        if (bit + width > total_bits)
            corrupt(name, "image data ends after " + std::to_string(written) + " pixels");
        int code = 0;
        for (int i = 0; i < width; ++i, ++bit) code |= ((f.data[bit >> 3] >> (bit & 7)) & 1) << i;
        if (code == clear) {
            width = f.min_code_size + 1;
            next = end + 1;
            previous = -1;
            continue;
        }
        if (code == end) break;
        if (code > next || (code == next && previous < 0))
            corrupt(name, "LZW code " + std::to_string(code) + " before it is defined");
        int depth = 0, c = code;
        if (code == next) {  // the KwKwK case: the previous string plus its own first byte
            stack[depth++] = first[previous];
            c = previous;
        }
        while (c >= clear) {
            stack[depth++] = suffix[c];
            c = prefix[c];
        }
        stack[depth++] = static_cast<uint8_t>(c);
        while (depth > 0 && written < out.size()) out[written++] = stack[--depth];
        if (previous >= 0 && next < kMaxCodes) {
            prefix[next] = static_cast<uint16_t>(previous);
            suffix[next] = static_cast<uint8_t>(c);
            first[next] = first[previous];
            ++next;
        }
        // The code width grows once the next free code needs another bit, up to 12 bits.
        if (next == (1 << width) && width < 12) ++width;
        previous = code;
    }
    if (written < out.size()) corrupt(name, "image data ends after " + std::to_string(written) + " pixels");
}

// Stream row k of an interlaced frame → its row on the frame (passes from rows 0, 4, 2, 1 in steps 8, 8, 4,
// 2).
int interlaced_row(int k, int height) {
    static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
    for (int pass = 0; pass < 4; ++pass) {
        const int rows = height > kStart[pass] ? (height - kStart[pass] + kStep[pass] - 1) / kStep[pass] : 0;
        if (k < rows) return kStart[pass] + k * kStep[pass];
        k -= rows;
    }
    return height - 1;
}

}  // namespace

bool is_gif(const uint8_t* d, size_t n) {
    return n >= 6 && (std::memcmp(d, "GIF87a", 6) == 0 || std::memcmp(d, "GIF89a", 6) == 0);
}

Image decode_gif(const uint8_t* data, size_t size, const std::string& name,
                 const std::function<void(int64_t, int64_t)>& check_size) {
    if (!is_gif(data, size)) corrupt(name, "signature missing");
    Reader r(data, size, name);
    r.bytes(6);
    const int screen_w = r.u16(), screen_h = r.u16();
    const uint8_t flags = r.byte();
    r.bytes(2);  // background index, aspect ratio: PIL's first frame uses neither
    const std::vector<uint8_t> global = (flags & 0x80) ? read_palette(r, flags) : std::vector<uint8_t>{};
    Frame f = first_frame(r, global, name);
    const int64_t w = std::max<int64_t>(screen_w, int64_t{f.x} + f.width);
    const int64_t h = std::max<int64_t>(screen_h, int64_t{f.y} + f.height);
    if (w <= 0 || h <= 0) corrupt(name, "has a zero-size canvas");
    check_size(w, h);

    std::vector<uint8_t> indices(static_cast<size_t>(f.width) * f.height);
    lzw_decode(f, indices, name);
    std::vector<uint8_t> canvas(static_cast<size_t>(w) * h, static_cast<uint8_t>(std::max(f.transparent, 0)));
    for (int k = 0; k < f.height; ++k) {
        const int row = f.interlaced ? interlaced_row(k, f.height) : k;
        std::memcpy(&canvas[static_cast<size_t>(f.y + row) * w + f.x],
                    &indices[static_cast<size_t>(k) * f.width], f.width);
    }
    Image image(static_cast<int>(w), static_cast<int>(h), 3);
    const size_t colours = f.palette.size() / 3;
    for (size_t i = 0; i < canvas.size(); ++i) {
        const uint8_t v = canvas[i];
        uint8_t* px = &image.pixels[3 * i];
        if (f.palette.empty()) {
            px[0] = px[1] = px[2] = v;
        } else if (v < colours) {
            std::memcpy(px, &f.palette[3 * size_t{v}], 3);
        }  // past the palette: black, as the Image(...) constructor left it
    }
    return image;
}

}  // namespace surf::model
