#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_ops.h"

namespace surf::kernels::cpu {

namespace {

// The CPUs this process may run on (taskset, cpusets), else the machine's count.
unsigned usable_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return static_cast<unsigned>(CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

void cpu_relax() {
#if defined(__x86_64__)
    _mm_pause();
#endif
}

// Waiting for the next region (a worker) or for the workers to finish one (the caller). A decode step
// runs dozens of small parallel regions back to back: a thread that spins briefly between them starts the
// next one in well under a microsecond, where a sleep/wake through the kernel costs tens. On a machine
// busy with other work, though, spinning keeps a thread runnable while the one it waits for is not
// running, and costs more than it saves; a spin that runs out its budget is taken as that sign, and the
// thread then sleeps at once for its next kBackoff waits.
constexpr std::chrono::microseconds kSpin{100};
constexpr int kBackoff = 64;

class Spinner {
public:
    // Spins until done() or kSpin has passed; returns done(). The caller sleeps when it returns false.
    template <typename Done>
    bool spin(Done done) {
        if (skip_ > 0) {
            --skip_;
            return done();
        }
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0;; ++i) {
            if (done()) return true;
            cpu_relax();
            if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) break;
        }
        skip_ = kBackoff;
        return done();
    }

private:
    int skip_ = 0;
};

// A fixed pool of worker threads, one per usable CPU; parallel_for hands each a contiguous slice and waits
// for all. Workers (and the caller, waiting for them) spin (Spinner) before sleeping on a condition variable.
class Pool {
public:
    Pool() {
        n_workers_ = static_cast<int>(std::min(usable_cpus(), 64u));
        for (int i = 1; i < n_workers_; ++i) threads_.emplace_back([this, i] { loop(i); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_.store(true, std::memory_order_relaxed);
            ticket_.store(ticket_.load(std::memory_order_relaxed) + kGeneration, std::memory_order_release);
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }

    int size() const { return n_workers_; }

    void run(int64_t n, int parts, const std::function<void(int64_t, int64_t)>& fn) {
        std::unique_lock<std::mutex> serial(run_mu_);  // one parallel region at a time
        fn_ = &fn;
        n_ = n;
        parts_ = parts;
        pending_.store(parts - 1, std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lock(mu_);  // a worker about to sleep sees the new ticket
            const uint64_t generation = ticket_.load(std::memory_order_relaxed) / kGeneration + 1;
            ticket_.store(generation * kGeneration + static_cast<uint64_t>(parts), std::memory_order_release);
        }
        cv_.notify_all();
        slice(0);
        thread_local Spinner spinner;  // the calling thread's
        if (!spinner.spin([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
            std::unique_lock<std::mutex> lock(mu_);
            done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
        }
        fn_ = nullptr;
    }

private:
    void slice(int index) {
        const int64_t begin = n_ * index / parts_;
        const int64_t end = n_ * (index + 1) / parts_;
        if (begin < end) (*fn_)(begin, end);
    }

    // A worker takes part in a region when its index is below the region's part count, read from the ticket
    // itself: a worker left out never reads fn_ / n_, which the next region may be rewriting.
    void loop(int index) {
        uint64_t seen = 0;
        Spinner spinner;
        for (;;) {
            auto changed = [&] { return ticket_.load(std::memory_order_acquire) != seen; };
            if (!spinner.spin(changed)) {
                std::unique_lock<std::mutex> lock(mu_);
                cv_.wait(lock, changed);
            }
            seen = ticket_.load(std::memory_order_acquire);
            if (stop_.load(std::memory_order_relaxed)) return;
            if (index >= static_cast<int>(seen % kGeneration)) continue;
            slice(index);
            if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                std::lock_guard<std::mutex> lock(mu_);  // the caller may be between its check and its wait
                done_cv_.notify_one();
            }
        }
    }

    int n_workers_ = 1;
    std::vector<std::thread> threads_;
    std::mutex mu_, run_mu_;
    std::condition_variable cv_, done_cv_;
    // A region: written by run() before it publishes the ticket (release), read by its workers after they
    // acquire it; run() changes them again only once every worker of the region is done.
    const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0;
    int parts_ = 1;
    // ticket = generation · kGeneration + parts: which region is current and how many threads it uses.
    static constexpr uint64_t kGeneration = 256;
    std::atomic<uint64_t> ticket_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
};

Pool& pool() {
    static Pool instance;
    return instance;
}

thread_local bool in_parallel_region = false;

}  // namespace

int worker_count() {
    return pool().size();
}

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
