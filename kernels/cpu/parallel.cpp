#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace surf::kernels::cpu {

namespace {

// A fixed pool of worker threads; parallel_for hands each a contiguous slice and waits for all.
class Pool {
public:
    Pool() {
        const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
        n_workers_ = static_cast<int>(std::min(hw, 64u));
        for (int i = 1; i < n_workers_; ++i) threads_.emplace_back([this, i] { loop(i); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
            ++generation_;
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }

    int size() const { return n_workers_; }

    void run(int64_t n, int parts, const std::function<void(int64_t, int64_t)>& fn) {
        std::unique_lock<std::mutex> serial(run_mu_);  // one parallel region at a time
        {
            std::lock_guard<std::mutex> lock(mu_);
            fn_ = &fn;
            n_ = n;
            parts_ = parts;
            pending_ = parts - 1;
            ++generation_;
        }
        cv_.notify_all();
        slice(0);
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return pending_ == 0; });
        fn_ = nullptr;
    }

private:
    void slice(int index) {
        const int64_t begin = n_ * index / parts_;
        const int64_t end = n_ * (index + 1) / parts_;
        if (begin < end) (*fn_)(begin, end);
    }

    void loop(int index) {
        uint64_t seen = 0;
        for (;;) {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return generation_ != seen; });
            seen = generation_;
            if (stop_) return;
            if (index >= parts_) continue;
            lock.unlock();
            slice(index);
            lock.lock();
            if (--pending_ == 0) done_cv_.notify_one();
        }
    }

    int n_workers_ = 1;
    std::vector<std::thread> threads_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0;
    int parts_ = 1;
    int pending_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
};

Pool& pool() {
    static Pool instance;
    return instance;
}

thread_local bool in_parallel_region = false;

}  // namespace

int worker_count() { return pool().size(); }

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_per_thread) {
    if (n <= 0) return;
    const int64_t by_size = n / std::max<int64_t>(1, min_per_thread);
    const int parts = static_cast<int>(std::min<int64_t>(pool().size(), std::max<int64_t>(1, by_size)));
    if (parts <= 1 || in_parallel_region) {  // nested regions run inline
        fn(0, n);
        return;
    }
    in_parallel_region = true;
    pool().run(n, parts, [&](int64_t b, int64_t e) {
        const bool was = in_parallel_region;
        in_parallel_region = true;
        fn(b, e);
        in_parallel_region = was;
    });
    in_parallel_region = false;
}

}  // namespace surf::kernels::cpu
