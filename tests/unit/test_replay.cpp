// The run's replay video (agent/replay.h): written from the trace's screenshots with the actions drawn, read
// back with OpenCV's own decoder (frames, size, the click's colour), and linked from the run report.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "agent/replay.h"
#include "agent/trace.h"
#include "model/vision/image.h"
#include "tests/test_util.h"

#if SURF_HAVE_OPENCV_VIDEO
#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>
#endif

using namespace surf::agent;

namespace {

// Two 320×200 screenshots (grey, then green) and the steps that click on them.
std::vector<TraceStep> make_steps(const std::string& dir) {
    std::filesystem::create_directories(dir + "/screenshots");
    std::vector<TraceStep> steps;
    const uint8_t colours[2][3] = {{200, 200, 200}, {40, 160, 60}};
    for (int k = 0; k < 2; ++k) {
        surf::model::Image image(320, 200, 3);
        for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = colours[k][i % 3];
        const std::vector<uint8_t> png = surf::model::encode_png(image);
        const std::string name = "screenshots/step_00" + std::to_string(k + 1) + ".png";
        surf::test::write_file(dir + "/" + name, std::string(png.begin(), png.end()));
        TraceStep s;
        s.step = k + 1;
        s.screenshot = name;
        s.shot_width = 320;
        s.shot_height = 200;
        s.has_point = true;
        s.point_px = 100 + 100 * k;
        s.point_py = 60;
        s.action = k == 0 ? R"({"action":"click","element":"the search box"})"
                          : R"({"action":"write","content":"Lyon hotels","element":"the search box"})";
        steps.push_back(s);
    }
    return steps;
}

}  // namespace

TEST_CASE("a replay has a frame a step and two of the answer, with the click drawn in red") {
    const std::string dir = surf::test::temp_dir("replay");
    const std::vector<TraceStep> steps = make_steps(dir);
    const std::string path = dir + "/replay.webm";
    if (!replay_available()) {
        CHECK_FALSE(write_replay(dir, steps, "42", path));
        CHECK_FALSE(std::filesystem::exists(path));
        return;
    }
    REQUIRE(write_replay(dir, steps, "42", path));
    REQUIRE(std::filesystem::file_size(path) > 0);
#if SURF_HAVE_OPENCV_VIDEO
    cv::VideoCapture video(path);
    REQUIRE(video.isOpened());
    std::vector<cv::Mat> frames;
    for (cv::Mat f; video.read(f);) frames.push_back(f.clone());
    CHECK(frames.size() == 2 + 2);
    REQUIRE(!frames.empty());
    CHECK(frames[0].cols == 320);
    CHECK(frames[0].rows == 200);
    const cv::Vec3b click = frames[0].at<cv::Vec3b>(60, 100);  // BGR, the dot at the step's point
    CHECK(int(click[2]) > 150);
    CHECK(int(click[1]) < 110);
    const cv::Vec3b away = frames[0].at<cv::Vec3b>(20, 300);  // the grey screenshot, untouched
    CHECK(std::abs(int(away[1]) - 200) < 20);
    const cv::Vec3b second = frames[1].at<cv::Vec3b>(20, 20);  // the second step's green screenshot
    CHECK(int(second[1]) > int(second[2]) + 60);
    const cv::Vec3b bar = frames[0].at<cv::Vec3b>(199, 5);  // the caption bar
    CHECK(int(bar[0]) < 80);
#endif
    std::filesystem::remove_all(dir);
}

TEST_CASE("a run without screenshots has no replay, and the report links the replay when there is one") {
    const std::string dir = surf::test::temp_dir("replay_none");
    std::filesystem::create_directories(dir);
    TraceStep blind;
    blind.step = 1;
    blind.action = R"({"action":"wait"})";
    CHECK_FALSE(write_replay(dir, {blind}, "", dir + "/replay.webm"));
    CHECK_FALSE(std::filesystem::exists(dir + "/replay.webm"));
    RunOptions options;
    options.task = "t";
    RunResult result;
    CHECK(render_report_html(dir, options, result, {blind}).find("replay.webm") == std::string::npos);
    surf::test::write_file(dir + "/replay.webm", "x");
    CHECK(render_report_html(dir, options, result, {blind})
              .find("<video class=\"replay\" src=\"replay.webm\"") != std::string::npos);
    std::filesystem::remove_all(dir);
}
