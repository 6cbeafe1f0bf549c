#include "agent/replay.h"

#include "base/error.h"

#if SURF_HAVE_OPENCV_VIDEO
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include "model/vision/image.h"
#endif

namespace surf::agent {

#if SURF_HAVE_OPENCV_VIDEO

namespace {

// One frame a step, shown 1.5 s (VP8 encodes every frame it is given, repeated ones too), and the answer
// twice.
constexpr double kFps = 1.0 / 1.5;
constexpr int kAnswerFrames = 2;
const cv::Scalar kRed(40, 40, 230), kBlue(192, 101, 21), kWhite(255, 255, 255), kBar(30, 30, 30);  // BGR

// The screenshot as a BGR frame of `size` (the first screenshot's, made even for VP8); black when missing.
cv::Mat frame_of(const std::string& dir, const TraceStep& s, cv::Size size) {
    cv::Mat frame(size, CV_8UC3, cv::Scalar(0, 0, 0));
    if (s.screenshot.empty()) return frame;
    const model::Image image = model::load_image((std::filesystem::path(dir) / s.screenshot).string());
    cv::Mat rgb(image.height, image.width, CV_8UC3, const_cast<uint8_t*>(image.pixels.data()));
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    if (bgr.size() != size) cv::resize(bgr, bgr, size, 0, 0, cv::INTER_AREA);
    return bgr;
}

// Hershey fonts draw ASCII only: every other character becomes '?', and the text is cut to fit `width`
// pixels.
std::string drawable(const std::string& text, int width, double scale) {
    std::string out;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if ((byte & 0xc0) == 0x80) continue;  // a UTF-8 continuation byte: its character is one '?'
        out += byte >= 32 && byte < 127 ? c : (c == '\n' ? ' ' : '?');
    }
    int baseline = 0;
    while (!out.empty() && cv::getTextSize(out, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &baseline).width > width)
        out.resize(out.size() * 9 / 10);
    return out;
}

void caption(cv::Mat& frame, const std::string& text) {
    const double scale = std::max(0.4, frame.cols / 1600.0);
    const int bar = static_cast<int>(34 * scale / 0.5);
    cv::rectangle(frame, {0, frame.rows - bar}, {frame.cols, frame.rows}, kBar, cv::FILLED);
    cv::putText(frame, drawable(text, frame.cols - 20, scale), {10, frame.rows - bar / 3},
                cv::FONT_HERSHEY_SIMPLEX, scale, kWhite, 1, cv::LINE_AA);
}

// Screenshot pixels of the step → pixels of the frame.
cv::Point at(const TraceStep& s, double x, double y, cv::Size size) {
    const double sx = s.shot_width > 0 ? size.width / static_cast<double>(s.shot_width) : 1.0;
    const double sy = s.shot_height > 0 ? size.height / static_cast<double>(s.shot_height) : 1.0;
    return {static_cast<int>(std::lround(x * sx)), static_cast<int>(std::lround(y * sy))};
}

void draw_action(cv::Mat& frame, const TraceStep& s) {
    const int r = std::max(6, frame.cols / 60);
    if (s.has_policy_point)
        cv::circle(frame, at(s, s.policy_px, s.policy_py, frame.size()), r, kBlue, 2, cv::LINE_AA);
    if (!s.has_point) return;
    const cv::Point p = at(s, s.point_px, s.point_py, frame.size());
    if (s.has_to_point) {
        const cv::Point q = at(s, s.to_px, s.to_py, frame.size());
        cv::line(frame, p, q, kRed, std::max(2, r / 3), cv::LINE_AA);
        cv::circle(frame, q, r, kRed, std::max(2, r / 3), cv::LINE_AA);
    }
    cv::circle(frame, p, r, kRed, std::max(2, r / 3), cv::LINE_AA);
    cv::circle(frame, p, std::max(2, r / 4), kRed, cv::FILLED, cv::LINE_AA);
}

// OpenCV 4.6 prints a line to stderr on every VP8-in-WebM writer it opens (the WebM muxer has no codec tags,
// so it falls back to the codec id, which works). That line would end every `surf run`: the writer is opened
// with stderr pointed at /dev/null, one opener at a time.
cv::VideoWriter open_quietly(const std::string& path, cv::Size size) {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    std::fflush(stderr);
    const int saved = ::dup(2), null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved >= 0 && null >= 0) ::dup2(null, 2);
    cv::VideoWriter writer(path, cv::CAP_FFMPEG, cv::VideoWriter::fourcc('V', 'P', '8', '0'), kFps, size);
    if (saved >= 0) {
        ::dup2(saved, 2);
        ::close(saved);
    }
    if (null >= 0) ::close(null);
    return writer;
}

}  // namespace

bool replay_available() {
    return true;
}

bool write_replay(const std::string& dir, const std::vector<TraceStep>& steps, const std::string& answer,
                  const std::string& path) {
    const auto first = std::find_if(steps.begin(), steps.end(), [](const TraceStep& s) {
        return !s.screenshot.empty() && s.shot_width > 0;
    });
    if (first == steps.end()) return false;
    const cv::Size size(first->shot_width / 2 * 2, first->shot_height / 2 * 2);
    cv::VideoWriter writer = open_quietly(path, size);
    if (!writer.isOpened()) throw Error(ErrorKind::kIo, path + ": cannot open a VP8 video writer");
    cv::Mat last;  // the last screenshot, under the answer
    for (const TraceStep& s : steps) {
        const cv::Mat shot = frame_of(dir, s, size);
        cv::Mat frame = shot.clone();
        draw_action(frame, s);
        caption(frame, "step " + std::to_string(s.step) + ": " + (s.action.empty() ? s.error : s.action));
        writer.write(frame);
        if (!s.screenshot.empty()) last = shot;
    }
    caption(last, "answer: " + (answer.empty() ? std::string("(none)") : answer));
    for (int k = 0; k < kAnswerFrames; ++k) writer.write(last);
    writer.release();
    return true;
}

#else

bool replay_available() {
    return false;
}

bool write_replay(const std::string&, const std::vector<TraceStep>&, const std::string&, const std::string&) {
    return false;
}

#endif

}  // namespace surf::agent
