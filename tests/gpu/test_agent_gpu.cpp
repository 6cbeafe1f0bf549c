// The agent loop on the GPU backend: policy, localizer and validator share one CUDA engine; the page is a
// synthetic environment (the GPU machine has no Chromium; the real-browser runs are the browser-label
// tests on the CPU backend). The same run on the CPU engine and on the CUDA engine must both complete
// within budget with every model output parsed into an action.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "agent/conversation.h"
#include "agent/loop.h"
#include "agent/profile.h"
#include "model/cuda/cuda_engine.h"
#include "model/engine.h"
#include "model/text/chat_template.h"

using namespace surf;
using namespace surf::agent;

namespace {

const std::string kModel = std::string(SURF_FIXTURES_DIR) + "/golden/tiny_fp32";
const std::string kProfile = std::string(SURF_SOURCE_DIR) + "/tests/browser/agent_pages/profile_tiny.json";

// A 320×240 page with a few coloured boxes; records the actions it receives.
class SyntheticPage : public Environment {
public:
    std::vector<std::string> actions;
    ActionOutcome open(const std::string&) override { return {true, "loaded", ""}; }
    Observation observe() override {
        auto img = std::make_shared<model::Image>(320, 240);
        for (int y = 0; y < 240; ++y)
            for (int x = 0; x < 320; ++x) {
                uint8_t* p = &img->pixels[(static_cast<size_t>(y) * 320 + x) * 3];
                const bool box = (x / 80 + y / 60) % 2 == 0;
                p[0] = box ? 200 : 30, p[1] = static_cast<uint8_t>(x * 255 / 320), p[2] = box ? 40 : 220;
            }
        Observation o;
        o.png = model::encode_png(*img);
        o.image = img;
        o.frame = ScreenFrame{320, 240, {0, 0, 320, 240}, 1.0};
        o.url = "http://page.test/";
        o.title = "synthetic";
        return o;
    }
    ActionOutcome execute(const Action& a, const ActionPoints&) override {
        actions.push_back(action_name(a));
        return {true, std::string("did ") + action_name(a), ""};
    }
    tools::BrowserSession* page() override { return nullptr; }
    std::vector<tools::PageElement> elements() override { return {}; }
};

RunResult run_on(model::Engine& engine, SyntheticPage& page, const std::string& trace_dir) {
    const auto tmpl = model::ChatTemplate::from_model_dir(kModel);
    EngineChatModel chat(engine, tmpl);
    const PromptProfile profile = load_profile(kProfile);
    RunOptions o;
    o.task = "Which box is red?";
    o.start_url = "http://page.test/";
    o.max_steps = 4;
    o.viewport_width = 320, o.viewport_height = 240;
    o.trace_dir = trace_dir;
    LoopContext ctx;
    ctx.model = &chat;
    ctx.profile = &profile;
    ctx.environment = &page;
    Trace trace(trace_dir);
    ctx.trace = &trace;
    return run_loop(ctx, o);
}

}  // namespace

TEST_CASE("agent loop on the CUDA engine behaves as on the CPU engine") {
    const std::string root = std::filesystem::temp_directory_path() / "surf_agent_gpu";
    std::filesystem::remove_all(root);
    auto cpu = model::open_cpu_engine(kModel);
    surf::model::cuda::CudaEngineOptions options;
    options.limits.max_tokens = 4096, options.limits.max_seqs = 8, options.limits.max_slots = 8,
    options.limits.kv_pages = 1024;
    options.limits.max_context = 8192, options.limits.max_logit_rows = 16,
    options.limits.max_image_rows = 4096, options.limits.max_tiles = 16;
    auto gpu = surf::model::cuda::open_cuda_engine(kModel, options);
    SyntheticPage cpu_page, gpu_page;
    const RunResult a = run_on(*cpu, cpu_page, root + "/cpu");
    const RunResult b = run_on(*gpu, gpu_page, root + "/gpu");
    MESSAGE("CPU: " << std::string(run_status_name(a.status)) << " in " << a.steps << " steps, "
                    << a.model_calls << " model calls, " << a.errors << " errors");
    MESSAGE("GPU: " << std::string(run_status_name(b.status)) << " in " << b.steps << " steps, "
                    << b.model_calls << " model calls, " << b.errors << " errors");
    for (const RunResult* r : {&a, &b}) {
        CHECK(r->status != RunStatus::kError);
        CHECK(r->steps <= 4);
        CHECK(r->model_calls > 0);
    }
    CHECK(std::filesystem::exists(root + "/gpu/trace.jsonl"));
    CHECK(std::filesystem::exists(root + "/gpu/report.html"));
    size_t same = 0;
    while (same < cpu_page.actions.size() && same < gpu_page.actions.size() &&
           cpu_page.actions[same] == gpu_page.actions[same])
        ++same;
    MESSAGE(same << " leading actions identical between the CPU and CUDA engines (CPU "
                 << cpu_page.actions.size() << ", GPU " << gpu_page.actions.size() << ")");
}
