#include "model/vision/image_opencv.h"

#include "base/error.h"

#if SURF_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace surf::model {

#if SURF_HAVE_OPENCV

bool opencv_decoding_available() {
    return true;
}

Image opencv_decode(const uint8_t* data, size_t size, const std::string& name, bool composite_on_white) {
    cv::Mat decoded;
    try {
        const cv::Mat bytes(1, static_cast<int>(size), CV_8UC1, const_cast<uint8_t*>(data));
        decoded = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception& e) {
        throw Error(ErrorKind::kFormat, "image " + name + ": corrupt or unsupported (" + e.msg + ")");
    }
    if (decoded.empty() || decoded.depth() != CV_8U || decoded.rows <= 0 || decoded.cols <= 0)
        throw Error(ErrorKind::kFormat,
                    "image " + name + ": corrupt, truncated or unsupported (OpenCV read nothing)");
    const int channels = decoded.channels();
    if (channels != 1 && channels != 3 && channels != 4)
        throw Error(ErrorKind::kFormat, "image " + name + ": " + std::to_string(channels) + " channels");
    Image image(decoded.cols, decoded.rows, 3);
    for (int y = 0; y < decoded.rows; ++y) {
        const uint8_t* src = decoded.ptr<uint8_t>(y);
        uint8_t* dst = image.row(y);
        for (int x = 0; x < decoded.cols; ++x, src += channels, dst += 3) {
            if (channels == 1) {
                dst[0] = dst[1] = dst[2] = src[0];
                continue;
            }
            const int a = channels == 4 && composite_on_white ? src[3] : 255;
            for (int c = 0; c < 3; ++c) dst[c] = a == 255 ? src[2 - c] : on_white(src[2 - c], a);  // BGR(A)
        }
    }
    return image;
}

#else

bool opencv_decoding_available() {
    return false;
}

Image opencv_decode(const uint8_t*, size_t, const std::string& name, bool) {
    throw Error(ErrorKind::kUnsupported,
                "image " + name + ": WebP needs surf built with OpenCV (Debian: libopencv-imgcodecs-dev)");
}

#endif

}  // namespace surf::model
