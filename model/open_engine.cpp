#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/error.h"
#include "model/engine.h"

namespace surf::model {
namespace {

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}

struct Backend {
    EngineFactory factory;
    bool runs_fp8 = false;
};

std::map<std::string, Backend>& registry() {
    static std::map<std::string, Backend> r;
    return r;
}

}  // namespace

void register_engine_backend(const std::string& name, EngineFactory factory, bool runs_fp8) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[name] = Backend{std::move(factory), runs_fp8};
}

std::unique_ptr<Engine> open_engine(const std::string& model_dir, const std::string& backend,
                                    const std::string& field, int device, WarmUp warm_up,
                                    const EngineOptions& options) {
    if (backend == "cpu") return open_cpu_engine(model_dir, options);
    Backend found;
    {
        std::lock_guard<std::mutex> lock(registry_mutex());
        auto it = registry().find(backend);
        if (it != registry().end()) found = it->second;
    }
    const EngineFactory& factory = found.factory;
    if (factory && options.quantize != Quantize::kNone && !found.runs_fp8) {
        throw Error(ErrorKind::kUnsupported, std::string("quantize ") + quantize_name(options.quantize) +
                                                 ": the " + backend + " backend (" + field +
                                                 ") does not run FP8; the cpu and cuda backends do");
    }
    if (factory) return factory(model_dir, device, warm_up, options);
    if (backend == "cuda")
        throw Error(ErrorKind::kUnsupported, field +
                                                 " \"cuda\": this program has no CUDA backend (a build with "
                                                 "CUDA links surf::cuda and calls "
                                                 "surf::model::cuda::register_backend())");
    throw Error(ErrorKind::kInvalidArgument, field + " \"" + backend + "\": expected cpu or cuda");
}

}  // namespace surf::model
