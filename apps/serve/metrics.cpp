#include "apps/serve/metrics.h"

#include <algorithm>

namespace surf::serve {

void LatencyHistogram::observe(double seconds) {
    seconds = std::max(0.0, seconds);
    const auto it = std::lower_bound(kBounds.begin(), kBounds.end(), seconds);
    std::lock_guard<std::mutex> lock(mutex_);
    if (it != kBounds.end()) ++counts_[static_cast<size_t>(it - kBounds.begin())];
    ++count_;
    sum_ += seconds;
}

void LatencyHistogram::write(std::ostream& os, const std::string& name, const std::string& help) const {
    std::lock_guard<std::mutex> lock(mutex_);
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    int64_t cumulative = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
        cumulative += counts_[i];
        os << name << "_bucket{le=\"" << kBounds[i] << "\"} " << cumulative << "\n";
    }
    os << name << "_bucket{le=\"+Inf\"} " << count_ << "\n"
       << name << "_sum " << sum_ << "\n"
       << name << "_count " << count_ << "\n";
}

}  // namespace surf::serve
