#include "kernels/cuda/green_context.h"

#include <cuda.h>

#include <string>

#include "base/error.h"
#include "kernels/cuda/cuda_check.h"

namespace surf::kernels::cuda {

namespace {

// Each function is asked for at the version of the headers that declare it (CUDA_VERSION), so the resolved
// function has the declared signature; the runtime needs a driver at least that new anyway.
struct GreenDriver {
    decltype(&cuGetErrorName) get_error_name = nullptr;
    decltype(&cuDeviceGet) device_get = nullptr;
    decltype(&cuDeviceGetDevResource) get_dev_resource = nullptr;
    decltype(&cuDevSmResourceSplitByCount) sm_split_by_count = nullptr;
    decltype(&cuDevResourceGenerateDesc) generate_desc = nullptr;
    decltype(&cuGreenCtxCreate) green_ctx_create = nullptr;
    decltype(&cuGreenCtxStreamCreate) green_stream_create = nullptr;
    decltype(&cuGreenCtxDestroy) green_ctx_destroy = nullptr;

    static const GreenDriver& get() {
        static const GreenDriver d = [] {
            GreenDriver g;
            resolve(g.get_error_name, "cuGetErrorName");
            resolve(g.device_get, "cuDeviceGet");
            resolve(g.get_dev_resource, "cuDeviceGetDevResource");
            resolve(g.sm_split_by_count, "cuDevSmResourceSplitByCount");
            resolve(g.generate_desc, "cuDevResourceGenerateDesc");
            resolve(g.green_ctx_create, "cuGreenCtxCreate");
            resolve(g.green_stream_create, "cuGreenCtxStreamCreate");
            resolve(g.green_ctx_destroy, "cuGreenCtxDestroy");
            return g;
        }();
        return d;
    }
    template <typename Fn>
    static void resolve(Fn& fn, const char* name) {
        constexpr int version = CUDA_VERSION;
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found{};
        SURF_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, static_cast<unsigned>(version),
                                                         cudaEnableDefault, &found));
        if (found != cudaDriverEntryPointSuccess || !p) {
            throw Error(ErrorKind::kUnsupported, std::string("the driver has no ") + name +
                                                     " (asked at version " + std::to_string(version) + ")");
        }
        fn = reinterpret_cast<Fn>(p);
    }
};

void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    GreenDriver::get().get_error_name(r, &name);
    throw Error(ErrorKind::kUnsupported, std::string("green contexts: ") + what + ": " + (name ? name : "?"));
}

}  // namespace

GreenPair::GreenPair(unsigned want_a, int priority_a, int priority_b) {
    try {
        create(want_a, priority_a, priority_b);
    } catch (...) {
        release();  // what was created before the failure
        throw;
    }
}

void GreenPair::create(unsigned want_a, int priority_a, int priority_b) {
    const GreenDriver& d = GreenDriver::get();
    SURF_CUDA_CHECK(cudaFree(nullptr));  // the runtime's context first: it initialises the driver
    int ordinal = 0;
    SURF_CUDA_CHECK(cudaGetDevice(&ordinal));
    CUdevice dev = 0;
    check(d.device_get(&dev, ordinal), "cuDeviceGet");
    CUdevResource all{}, group{}, rest{};
    check(d.get_dev_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
    unsigned n_groups = 1;
    check(d.sm_split_by_count(&group, &n_groups, &all, &rest, 0, want_a),
          ("cuDevSmResourceSplitByCount(" + std::to_string(want_a) + " SMs)").c_str());
    CUdevResourceDesc desc_a = nullptr, desc_b = nullptr;
    check(d.generate_desc(&desc_a, &group, 1), "cuDevResourceGenerateDesc");
    check(d.generate_desc(&desc_b, &rest, 1), "cuDevResourceGenerateDesc");
    CUgreenCtx ca = nullptr, cb = nullptr;
    check(d.green_ctx_create(&ca, desc_a, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
    ctx_a_ = ca;
    check(d.green_ctx_create(&cb, desc_b, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
    ctx_b_ = cb;
    CUstream sa = nullptr, sb = nullptr;
    check(d.green_stream_create(&sa, ca, CU_STREAM_NON_BLOCKING, priority_a), "cuGreenCtxStreamCreate");
    a = sa;
    check(d.green_stream_create(&sb, cb, CU_STREAM_NON_BLOCKING, priority_b), "cuGreenCtxStreamCreate");
    b = sb;
    sms_a = group.sm.smCount, sms_b = rest.sm.smCount;
}

GreenPair::~GreenPair() {
    release();
}

void GreenPair::release() {
    for (cudaStream_t s : {a, b}) {
        if (s) {
            cudaStreamSynchronize(s);  // no work left on a context about to go
            cudaStreamDestroy(s);
        }
    }
    if (ctx_a_) GreenDriver::get().green_ctx_destroy(static_cast<CUgreenCtx>(ctx_a_));
    if (ctx_b_) GreenDriver::get().green_ctx_destroy(static_cast<CUgreenCtx>(ctx_b_));
    a = b = nullptr;
    ctx_a_ = ctx_b_ = nullptr;
}

}  // namespace surf::kernels::cuda
