// GIF decoding (the first frame, as PIL's `Image.open(f).convert("RGB")` gives it), written here rather than
// taken from stb, whose GIF reader has published memory-safety bugs. Every read is bounds-checked; the
// canvas size is handed to `check_size` before any pixel is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "model/vision/image.h"

namespace surf::model {

// "GIF87a" or "GIF89a".
bool is_gif(const uint8_t* data, size_t size);

// The first frame on its canvas: the logical screen, grown to hold the frame where it reaches past it (as
// PIL does). Pixels outside the frame take palette index 0, or the frame's transparent index when it has one;
// indices past the palette are black; without any palette an index is a grey level. Transparency is dropped
// (PIL's palette conversion keeps each index's colour). Throws surf::Error(kFormat) naming `name` on a
// truncated or corrupt file; `check_size(width, height)` throws for a canvas over the limits.
Image decode_gif(const uint8_t* data, size_t size, const std::string& name,
                 const std::function<void(int64_t, int64_t)>& check_size);

}  // namespace surf::model
