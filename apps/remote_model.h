// The agent commands' remote model: `--model http://HOST:PORT/v1` (surf serve, vLLM, SGLang, ...) instead of
// a model folder, with --model-name, --api-key (default $SURF_API_KEY) and --tokenizer. A comma-separated
// list of URLs names replicas of one model: each chat stays on one server and moves when it goes down
// (agent/remote/remote_endpoints.h). Shared by `surf run` and `surf eval`; header-only so that the GPU-only
// build, which drops the agent commands, never compiles it.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "agent/remote/remote_chat.h"
#include "apps/cli.h"
#include "base/error.h"

namespace surf::cli {

inline bool is_remote_model(const std::string& model) {
    return model.rfind("http://", 0) == 0 || model.rfind("https://", 0) == 0;
}

// Flags that mean nothing for a remote model; naming one is a usage error rather than silently ignored (the
// server runs the model and renders the checkpoint's own template).
inline void reject_local_model_flags(const Args& args) {
    for (const char* flag : {"backend", "template", "quantize"}) {
        if (args.has(flag))
            throw Error(ErrorKind::kInvalidArgument,
                        std::string("--") + flag +
                            " applies to a local model folder, not to a remote --model "
                            "(the server runs the model and renders its chat template)");
    }
}

// Connects to each server of `urls` (one URL or a comma-separated list; GET /models must list the model's
// name: `model_name`, else --model-name) and prints what it connects to. `requests_in_flight`: how many
// calls may run at once on each server (agents running together each have one call out at a time).
inline std::shared_ptr<agent::RemoteChatModel> open_remote_model(const Args& args, const std::string& urls,
                                                                 int requests_in_flight,
                                                                 const std::string& model_name = "") {
    agent::RemoteChatOptions remote;
    const std::vector<std::string> list = comma_items(urls);
    if (list.empty()) throw Error(ErrorKind::kInvalidArgument, "remote model \"" + urls + "\": no URL");
    remote.client.base_url = list[0];
    remote.more_base_urls.assign(list.begin() + 1, list.end());
    remote.client.model_name = model_name.empty() ? args.require("model-name") : model_name;
    const char* env_key = std::getenv("SURF_API_KEY");
    remote.client.api_key = args.get("api-key", env_key ? env_key : "");
    remote.client.max_concurrency = std::max(remote.client.max_concurrency, requests_in_flight);
    remote.tokenizer_dir = args.get("tokenizer");
    std::fprintf(stderr, "connecting to %s (model %s) ...\n", urls.c_str(), remote.client.model_name.c_str());
    return agent::open_remote_chat_model(remote);
}

}  // namespace surf::cli
