// The image formats surf reads through OpenCV's imgcodecs (WebP), in builds that found OpenCV
// (SURF_HAVE_OPENCV). decode_image (image.h) checks the header's size against the limits first and
// calls this for the pixels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/vision/image.h"

namespace surf::model {

// Whether this build decodes through OpenCV.
bool opencv_decoding_available();

// Decodes `data` into 8-bit RGB as PIL's convert("RGB") does (alpha dropped), or with
// composite_on_white an image with alpha pasted onto white as vLLM's loader does. Throws
// Error(kFormat) naming `name` when OpenCV cannot read it, Error(kUnsupported) without OpenCV.
Image opencv_decode(const uint8_t* data, size_t size, const std::string& name, bool composite_on_white);

// PIL's paste-with-mask blend onto white, per channel: DIV255(255 (255 − a) + v a), rounded.
inline uint8_t on_white(int v, int a) {
    const int t = 255 * (255 - a) + v * a + 128;
    return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

}  // namespace surf::model
