// The smallest product built on surf's agent library: it includes only agent/agent.h.
//   example_agent MODEL_DIR "TASK" URL [ALLOWED_DOMAIN]
#include <cstdio>
#include <exception>

#include "agent/agent.h"

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s MODEL_DIR \"TASK\" URL [ALLOWED_DOMAIN]\n", argv[0]);
        return 2;
    }
    try {
        surf::agent::AgentConfig config;
        config.model_dir = argv[1];
        auto agent = surf::agent::Agent::create(config);

        surf::agent::RunOptions run;
        run.task = argv[2];
        run.start_url = argv[3];
        if (argc > 4) run.allow_domains = {argv[4]};
        run.max_steps = 10;
        run.trace_dir = "example_agent_trace";

        const surf::agent::RunResult result = agent->run(run, [](const surf::agent::StepEvent& e) {
            if (e.kind == surf::agent::StepEventKind::kStep) {
                std::printf("step %d: %s -> %s\n", e.step, e.description.c_str(), e.outcome.c_str());
            }
        });
        std::printf("%s: %s\n", surf::agent::run_status_name(result.status), result.answer.c_str());
        return result.status == surf::agent::RunStatus::kAnswered ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 3;
    }
}
