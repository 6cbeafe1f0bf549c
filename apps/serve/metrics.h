// Prometheus histograms of request latencies for surf serve's /metrics (cumulative buckets in seconds, a sum
// and a count), safe to observe from every worker thread.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>

namespace surf::serve {

class LatencyHistogram {
public:
    // Upper bounds in seconds: from a cached /health answer to a long generation.
    static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                       1,     2.5,  5,     10,   30,  60,   120};

    void observe(double seconds);
    // Writes the HELP and TYPE lines, one _bucket line per bound plus +Inf, then _sum and _count.
    void write(std::ostream& os, const std::string& name, const std::string& help) const;

private:
    mutable std::mutex mutex_;
    std::array<int64_t, kBounds.size()> counts_{};  // observations at or under each bound (not cumulative)
    int64_t count_ = 0;
    double sum_ = 0;
};

}  // namespace surf::serve
