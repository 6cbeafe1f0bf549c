// GPU time per named op, for profiling runs (bench_step): CUDA events around the enqueued work of each
// op, summed per name. Disabled (the default) it records nothing; it must stay disabled while a CUDA
// graph is captured.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

namespace surf::model::cuda {

class OpTimer {
public:
    OpTimer() = default;
    ~OpTimer();
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

    void enable(bool on) { on_ = on; }
    bool enabled() const { return on_; }

    // Times the work enqueued on `stream` between construction and destruction.
    class Scope {
    public:
        Scope(OpTimer* timer, const char* name, cudaStream_t stream);
        ~Scope();
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        OpTimer* timer_;
        size_t index_ = 0;
        cudaStream_t stream_;
    };
    Scope scope(const char* name, cudaStream_t stream) { return Scope(if_enabled(), name, stream); }
    OpTimer* if_enabled() { return on_ ? this : nullptr; }

    // Waits for every recorded op; returns milliseconds per name in first-seen order and starts afresh.
    std::vector<std::pair<std::string, double>> collect();

private:
    struct Record {
        std::string name;
        cudaEvent_t start, end;
    };
    cudaEvent_t take_event();

    bool on_ = false;
    std::vector<Record> records_;
    std::vector<cudaEvent_t> free_;
};

}  // namespace surf::model::cuda
