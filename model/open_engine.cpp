#include <memory>
#include <string>

#include "base/error.h"
#include "model/engine.h"
#ifdef SURF_HAVE_CUDA
#include "model/cuda/cuda_engine.h"
#endif

namespace surf::model {

std::unique_ptr<Engine> open_engine(const std::string& model_dir, const std::string& backend,
                                    const std::string& field, int device, WarmUp warm_up) {
    if (backend == "cpu") return open_cpu_engine(model_dir);
    if (backend == "cuda") {
#ifdef SURF_HAVE_CUDA
        // The scheduler offloads sessions beyond its resident slots, so any concurrency fits the defaults.
        cuda::CudaEngineOptions options;
        options.device = device;
        options.warm_up_vision_tile_counts = warm_up == WarmUp::kServing;
        return cuda::open_cuda_engine(model_dir, options);
#else
        (void)device, (void)warm_up;
        throw Error(ErrorKind::kUnsupported, field + " \"cuda\": this build has no CUDA backend");
#endif
    }
    throw Error(ErrorKind::kInvalidArgument, field + " \"" + backend + "\": expected cpu or cuda");
}

}  // namespace surf::model
