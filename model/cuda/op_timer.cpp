#include "model/cuda/op_timer.h"

#include <map>

#include "kernels/cuda/cuda_check.h"

namespace surf::model::cuda {

OpTimer::~OpTimer() {
    for (const Record& r : records_) {
        cudaEventDestroy(r.start);
        cudaEventDestroy(r.end);
    }
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t OpTimer::take_event() {
    if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
    }
    cudaEvent_t e = nullptr;
    SURF_CUDA_CHECK(cudaEventCreate(&e));
    return e;
}

OpTimer::Scope::Scope(OpTimer* timer, const char* name, cudaStream_t stream)
    : timer_(timer), stream_(stream) {
    if (!timer_) return;
    index_ = timer_->records_.size();
    timer_->records_.push_back({name, timer_->take_event(), timer_->take_event()});
    SURF_CUDA_CHECK(cudaEventRecord(timer_->records_.back().start, stream_));
}

OpTimer::Scope::~Scope() {
    if (timer_) cudaEventRecord(timer_->records_[index_].end, stream_);
}

std::vector<std::pair<std::string, double>> OpTimer::collect() {
    std::vector<std::pair<std::string, double>> out;
    std::map<std::string, size_t> at;
    for (const Record& r : records_) {
        SURF_CUDA_CHECK(cudaEventSynchronize(r.end));
        float ms = 0.0f;
        SURF_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.end));
        auto [it, fresh] = at.emplace(r.name, out.size());
        if (fresh) out.emplace_back(r.name, 0.0);
        out[it->second].second += ms;
        free_.push_back(r.start);
        free_.push_back(r.end);
    }
    records_.clear();
    return out;
}

}  // namespace surf::model::cuda
