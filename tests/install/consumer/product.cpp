// A product's program against the installed library: loads the prompt profile and the default model's
// tokenizer from where the environment says the installed data is, and builds an agent configuration.
#include <cstdio>

#include "agent/agent.h"
#include "agent/profile.h"
#include "base/error.h"
#include "model/engine.h"

int main() {
    try {
        const surf::agent::PromptProfile profile =
            surf::agent::load_profile(surf::agent::default_profile_path());
        const surf::model::Tokenizer tokenizer =
            surf::model::load_model_tokenizer(surf::model::default_model_dir());
        const auto ids = tokenizer.encode("Click the blue button");
        std::printf("profile %s, %zu tokens\n", surf::agent::default_profile_path().c_str(), ids.size());
        return ids.empty() ? 1 : 0;
    } catch (const surf::Error& e) {
        std::fprintf(stderr, "product: %s\n", e.what());
        return 1;
    }
}
