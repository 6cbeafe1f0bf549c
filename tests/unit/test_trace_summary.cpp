#include <doctest/doctest.h>

#include <string>

#include "apps/trace_summary.h"

using surf::apps::summarize_trace;
using surf::apps::TraceInterval;
using surf::apps::TraceSummary;

namespace {

// Four names: 0 and 1 overlap at the start, 2 after a 3 µs gap, 3 and 0 together after a 10 µs gap (ns
// throughout).
std::vector<TraceInterval> sample() {
    return {
        {40000, 50000, 3}, {0, 10000, 0},     {23000, 30000, 2},
        {5000, 20000, 1},  {40000, 45000, 0},  // out of order on purpose
    };
}

uint64_t gap_count(const TraceSummary& s, const char* label) {
    for (const auto& c : s.gaps) {
        if (std::string(c.label) == label) return c.count;
    }
    FAIL("no gap class " << label);
    return 0;
}

}  // namespace

TEST_CASE("trace summary: busy union, idle gaps by size, overlap and per-name totals of GPU intervals") {
    const TraceSummary s = summarize_trace(sample(), 0, 4);
    CHECK(s.intervals == 5);
    CHECK(s.span_ns == 50000);
    CHECK(s.busy_ns == 20000 + 7000 + 10000);  // [0, 20 µs) ∪ [23, 30) ∪ [40, 50)
    CHECK(s.sum_ns == 10000 + 15000 + 7000 + 10000 + 5000);
    CHECK(gap_count(s, "2-5 us") == 1);   // 20 → 23 µs
    CHECK(gap_count(s, "5-20 us") == 1);  // 30 → 40 µs
    CHECK(gap_count(s, "< 2 us") == 0);
    uint64_t gap_total = 0;
    for (const auto& c : s.gaps) gap_total += c.total_ns;
    CHECK(gap_total == s.span_ns - s.busy_ns);
    // Two running at once in [5, 10) and [40, 45) µs; the idle gaps are the time with none.
    CHECK(s.running_ns[2] == 10000);
    CHECK(s.running_ns[1] == s.busy_ns - 10000);
    CHECK(s.running_ns[3] == 0);
    CHECK(s.running_ns[0] == s.span_ns - s.busy_ns);
    // The one mid-sized gap (≥ 5 µs) lies between name 2 (ended last) and the first of the next segment.
    REQUIRE(s.mid_gaps.size() == 1);
    CHECK(s.mid_gaps[0].before == 2);
    CHECK(s.mid_gaps[0].ns == 10000);
    CHECK(s.mid_gaps[0].count == 1);
    // Per name, largest total first: name 0 (10 + 5 µs), 1 (15), 3 (10), 2 (7).
    REQUIRE(s.per_name.size() == 4);
    CHECK(s.per_name[0].ns == 15000);
    CHECK(s.per_name.back().name == 2);
    for (const auto& p : s.per_name) {
        if (p.name == 0) CHECK(p.count == 2);
    }
}

TEST_CASE("trace summary: the skipped start, three at once, and empty input") {
    // Skipping 4 µs after the first start leaves out [0, 10) only: the span starts at 5 µs.
    const TraceSummary skipped = summarize_trace(sample(), 4000, 4);
    CHECK(skipped.intervals == 4);
    CHECK(skipped.span_ns == 45000);
    CHECK(skipped.busy_ns == 15000 + 7000 + 10000);
    CHECK(skipped.running_ns[2] == 5000);

    const TraceSummary three = summarize_trace({{0, 100, 0}, {10, 90, 1}, {20, 80, 1}, {30, 40, 0}}, 0, 2);
    CHECK(three.busy_ns == 100);
    CHECK(three.running_ns[1] == 20);
    CHECK(three.running_ns[2] == 20);
    CHECK(three.running_ns[3] == 60);  // three from 20 to 80, four from 30 to 40: both count as three or more
    CHECK(three.mid_gaps.empty());

    const TraceSummary none = summarize_trace({}, 0, 0);
    CHECK(none.intervals == 0);
    CHECK(none.busy_ns == 0);
    CHECK(summarize_trace(sample(), 1000000, 4).intervals == 0);  // everything skipped
}
