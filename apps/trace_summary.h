// What kernel_trace (apps/bench/kernel_trace.cpp) reports about a run's GPU intervals (kernels, copies,
// memsets on any stream): the busy union, the idle gaps between its segments by size, the time with 1 / 2 /
// 3+ intervals running, the mid-sized gaps by the intervals on either side, and the totals per name.
// Header-only and free of CUDA, so the arithmetic is unit-tested on the CPU
// (tests/unit/test_trace_summary.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace surf::apps {

struct TraceInterval {
    uint64_t start = 0, end = 0;  // ns, one clock for all intervals; end > start
    int32_t name = 0;             // index into the caller's names, < n_names
};

struct TraceGapClass {
    const char* label;
    uint64_t below_ns;  // gaps shorter than this (and not shorter than the previous class's bound)
    uint64_t total_ns = 0, count = 0;
};

struct TraceSummary {
    size_t intervals = 0;               // after the skipped start
    uint64_t span_ns = 0, busy_ns = 0;  // first start → last end; union of the intervals
    uint64_t sum_ns = 0;                // sum of the durations (> busy_ns where intervals overlap)
    std::vector<TraceGapClass> gaps;    // idle gaps inside the span, by size
    uint64_t running_ns[4] = {0, 0, 0,
                              0};  // [k]: time with k intervals running (k = 3: three or more); [0] = idle
    struct PairGap {
        int32_t before = 0,
                after = 0;  // the interval that ended last before the gap, the one that starts after it
        uint64_t ns = 0, count = 0;
    };
    std::vector<PairGap> mid_gaps;  // gaps of 5 µs – 1 ms, grouped by (before, after), largest total first
    struct NameTotal {
        int32_t name = 0;
        uint64_t ns = 0, count = 0;
    };
    std::vector<NameTotal> per_name;  // names with at least one interval, largest total first
};

// Summarises `v` (any order) after leaving out the intervals that start within `skip_ns` of the earliest
// start.
inline TraceSummary summarize_trace(std::vector<TraceInterval> v, uint64_t skip_ns, size_t n_names) {
    TraceSummary s;
    s.gaps = {{"< 2 us", 2000},      {"2-5 us", 5000},      {"5-20 us", 20000},
              {"20-100 us", 100000}, {"0.1-1 ms", 1000000}, {">= 1 ms", UINT64_MAX}};
    std::sort(v.begin(), v.end(),
              [](const TraceInterval& a, const TraceInterval& b) { return a.start < b.start; });
    if (v.empty()) return s;
    const uint64_t from = v.front().start + skip_ns;
    v.erase(v.begin(), std::lower_bound(v.begin(), v.end(), from,
                                        [](const TraceInterval& a, uint64_t f) { return a.start < f; }));
    s.intervals = v.size();
    if (v.empty()) return s;

    std::map<std::pair<int32_t, int32_t>, std::pair<uint64_t, uint64_t>> mid;
    uint64_t seg_start = v.front().start, seg_end = v.front().end;
    int32_t last = v.front().name;
    for (size_t i = 1; i < v.size(); ++i) {
        const TraceInterval& iv = v[i];
        if (iv.start > seg_end) {
            s.busy_ns += seg_end - seg_start;
            const uint64_t gap = iv.start - seg_end;
            for (TraceGapClass& c : s.gaps) {
                if (gap < c.below_ns) {
                    c.total_ns += gap, ++c.count;
                    break;
                }
            }
            if (gap >= 5000 && gap < 1000000) {
                auto& g = mid[{last, iv.name}];
                g.first += gap, ++g.second;
            }
            seg_start = iv.start, seg_end = iv.end, last = iv.name;
        } else if (iv.end >= seg_end) {
            seg_end = iv.end, last = iv.name;
        }
    }
    s.busy_ns += seg_end - seg_start;
    s.span_ns = seg_end - v.front().start;
    for (const auto& [key, g] : mid) s.mid_gaps.push_back({key.first, key.second, g.first, g.second});
    std::sort(s.mid_gaps.begin(), s.mid_gaps.end(), [](const auto& a, const auto& b) { return a.ns > b.ns; });

    // Running count over time: +1 at each start, −1 at each end (an end before a start at the same instant).
    std::vector<std::pair<uint64_t, int>> edges;
    edges.reserve(2 * v.size());
    for (const TraceInterval& iv : v) edges.emplace_back(iv.start, 1), edges.emplace_back(iv.end, -1);
    std::sort(edges.begin(), edges.end());
    int depth = 0;
    for (size_t i = 0; i + 1 < edges.size(); ++i) {
        depth += edges[i].second;
        s.running_ns[std::min(std::max(depth, 0), 3)] += edges[i + 1].first - edges[i].first;
    }

    std::vector<TraceSummary::NameTotal> per(n_names);
    for (size_t i = 0; i < per.size(); ++i) per[i].name = static_cast<int32_t>(i);
    for (const TraceInterval& iv : v) {
        if (iv.name < 0 || static_cast<size_t>(iv.name) >= per.size()) continue;
        per[static_cast<size_t>(iv.name)].ns += iv.end - iv.start, ++per[static_cast<size_t>(iv.name)].count;
        s.sum_ns += iv.end - iv.start;
    }
    for (const auto& p : per) {
        if (p.count > 0) s.per_name.push_back(p);
    }
    std::sort(s.per_name.begin(), s.per_name.end(), [](const auto& a, const auto& b) { return a.ns > b.ns; });
    return s;
}

}  // namespace surf::apps
