// kernel_trace: a CUPTI injection library that records every kernel, copy and memset a CUDA program runs and, at
// exit, reports how busy the GPU was between them: the union of the busy intervals over all streams, the idle gaps
// between them by size (with the kernels on either side of the mid-sized ones), how much of the busy time ran two or
// more kernels at once, and the kernels by total time. The question it answers: how much of a step is launch gaps
// and waits rather than kernels (this workplace's device machines have no Nsight Systems).
//
//   CUDA_INJECTION64_PATH=build-gpu/apps/libkernel_trace.so build-gpu/surf bench serve --concurrency 100
//
// Environment: SURF_KTRACE_SKIP_S (seconds after the first record to leave out: warm-up, weights; default 0),
// SURF_KTRACE_OUT (report file; default stderr), SURF_KTRACE_TOP (kernels listed; default 30).
#include <cupti.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Interval {
    uint64_t start = 0, end = 0;  // ns, CUPTI's clock
    int32_t name = 0;             // index into Trace::names (copies and memsets have their own)
    uint32_t stream = 0;
};

struct Trace {
    std::mutex mu;
    std::vector<Interval> items;
    std::vector<std::string> names;
    std::unordered_map<std::string, int32_t> ids;
    size_t dropped = 0;

    int32_t id(const char* raw) {
        std::string key = raw ? raw : "?";
        auto found = ids.find(key);
        if (found != ids.end()) return found->second;
        const int32_t n = static_cast<int32_t>(names.size());
        names.push_back(key);
        ids.emplace(std::move(key), n);
        return n;
    }
};

Trace& trace() {
    static Trace* t = new Trace;  // never destroyed: CUPTI may deliver buffers while statics are torn down
    return *t;
}

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    Trace& t = trace();
    {
        std::lock_guard<std::mutex> lock(t.mu);
        CUpti_Activity* rec = nullptr;
        while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
            Interval iv;
            if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
                const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
                iv = {k->start, k->end, t.id(k->name), k->streamId};
            } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
                iv = {m->start, m->end, t.id("[memcpy]"), m->streamId};
            } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
                iv = {m->start, m->end, t.id("[memset]"), m->streamId};
            } else {
                continue;
            }
            if (iv.end > iv.start) t.items.push_back(iv);
        }
        size_t dropped = 0;
        if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) t.dropped += dropped;
    }
    std::free(buffer);
}

std::string short_name(const std::string& mangled) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    std::string s = status == 0 && d ? d : mangled;
    std::free(d);
    for (size_t at; (at = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(at, 23);
    if (s.compare(0, 5, "void ") == 0) s.erase(0, 5);
    // Drop the parameter list: the template arguments name the variant.
    int depth = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '<') ++depth;
        if (s[i] == '>') --depth;
        if (s[i] == '(' && depth == 0 && i > 0) {
            s.resize(i);
            break;
        }
    }
    if (s.size() > 110) s = s.substr(0, 107) + "...";
    return s;
}

double ms(uint64_t ns) { return static_cast<double>(ns) * 1e-6; }

void report() {
    cuptiActivityFlushAll(1);
    Trace& t = trace();
    std::lock_guard<std::mutex> lock(t.mu);
    const char* out_path = std::getenv("SURF_KTRACE_OUT");
    FILE* out = out_path ? std::fopen(out_path, "w") : stderr;
    if (!out) out = stderr;
    const double skip_s = std::getenv("SURF_KTRACE_SKIP_S") ? std::atof(std::getenv("SURF_KTRACE_SKIP_S")) : 0.0;
    const int top = std::getenv("SURF_KTRACE_TOP") ? std::atoi(std::getenv("SURF_KTRACE_TOP")) : 30;
    std::vector<Interval>& v = t.items;
    std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    if (v.empty()) {
        std::fprintf(out, "# kernel_trace: no GPU activity recorded\n");
        if (out != stderr) std::fclose(out);
        return;
    }
    const uint64_t from = v.front().start + static_cast<uint64_t>(skip_s * 1e9);
    v.erase(v.begin(), std::lower_bound(v.begin(), v.end(), from, [](const Interval& a, uint64_t f) { return a.start < f; }));
    if (v.empty()) {
        std::fprintf(out, "# kernel_trace: nothing after the first %.1f s\n", skip_s);
        if (out != stderr) std::fclose(out);
        return;
    }

    // Busy union and the gaps between its segments, with the interval that ended last before each gap and the next one.
    struct GapClass {
        const char* label;
        uint64_t below_ns, total_ns = 0, count = 0;
    };
    GapClass classes[] = {{"< 2 us", 2000}, {"2-5 us", 5000}, {"5-20 us", 20000}, {"20-100 us", 100000}, {"0.1-1 ms", 1000000}, {">= 1 ms", UINT64_MAX}};
    std::map<std::pair<int32_t, int32_t>, std::pair<uint64_t, uint64_t>> mid_gaps;  // (before, after) → (ns, count), 5 us – 1 ms
    uint64_t busy = 0, seg_start = v.front().start, seg_end = v.front().end;
    int32_t last_name = v.front().name;
    for (size_t i = 1; i < v.size(); ++i) {
        const Interval& iv = v[i];
        if (iv.start > seg_end) {
            busy += seg_end - seg_start;
            const uint64_t gap = iv.start - seg_end;
            for (GapClass& c : classes) {
                if (gap < c.below_ns) {
                    c.total_ns += gap, ++c.count;
                    break;
                }
            }
            if (gap >= 5000 && gap < 1000000) {
                auto& g = mid_gaps[{last_name, iv.name}];
                g.first += gap, ++g.second;
            }
            seg_start = iv.start, seg_end = iv.end, last_name = iv.name;
        } else if (iv.end > seg_end) {
            seg_end = iv.end, last_name = iv.name;
        }
    }
    busy += seg_end - seg_start;
    const uint64_t span = seg_end - v.front().start;

    // Concurrency: time with exactly 1, 2, 3+ intervals running.
    std::vector<std::pair<uint64_t, int>> edges;
    edges.reserve(2 * v.size());
    for (const Interval& iv : v) edges.emplace_back(iv.start, 1), edges.emplace_back(iv.end, -1);
    std::sort(edges.begin(), edges.end());
    uint64_t at_depth[4] = {0, 0, 0, 0};
    int depth = 0;
    for (size_t i = 0; i + 1 < edges.size(); ++i) {
        depth += edges[i].second;
        at_depth[std::min(std::max(depth, 0), 3)] += edges[i + 1].first - edges[i].first;
    }

    // Per kernel.
    struct PerName {
        uint64_t ns = 0, count = 0;
    };
    std::vector<PerName> per(t.names.size());
    uint64_t sum = 0;
    for (const Interval& iv : v) per[iv.name].ns += iv.end - iv.start, ++per[iv.name].count, sum += iv.end - iv.start;

    std::fprintf(out, "# kernel_trace: %zu kernels, copies and memsets after the first %.1f s (%zu records dropped)\n", v.size(), skip_s, t.dropped);
    std::fprintf(out, "# span %.1f ms; GPU busy (union over streams) %.1f ms = %.2f%%; idle %.1f ms; sum of durations %.1f ms\n", ms(span), ms(busy),
                 100.0 * static_cast<double>(busy) / static_cast<double>(span), ms(span - busy), ms(sum));
    std::fprintf(out, "# of the busy time: one interval running %.1f ms, two %.1f ms, three or more %.1f ms\n", ms(at_depth[1]), ms(at_depth[2]), ms(at_depth[3]));
    std::fprintf(out, "\n| idle gap | count | total ms | %% of span |\n|---|---|---|---|\n");
    for (const GapClass& c : classes) {
        std::fprintf(out, "| %s | %llu | %.2f | %.2f |\n", c.label, static_cast<unsigned long long>(c.count), ms(c.total_ns),
                     100.0 * static_cast<double>(c.total_ns) / static_cast<double>(span));
    }
    std::vector<std::pair<std::pair<int32_t, int32_t>, std::pair<uint64_t, uint64_t>>> gaps(mid_gaps.begin(), mid_gaps.end());
    std::sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::fprintf(out, "\n| gaps of 5 us – 1 ms: after | before | count | total ms |\n|---|---|---|---|\n");
    for (size_t i = 0; i < gaps.size() && i < 15; ++i) {
        std::fprintf(out, "| %s | %s | %llu | %.2f |\n", short_name(t.names[gaps[i].first.first]).c_str(), short_name(t.names[gaps[i].first.second]).c_str(),
                     static_cast<unsigned long long>(gaps[i].second.second), ms(gaps[i].second.first));
    }
    std::vector<int32_t> order(per.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return per[a].ns > per[b].ns; });
    std::fprintf(out, "\n| kernel | count | total ms | %% of busy | mean us |\n|---|---|---|---|---|\n");
    for (int i = 0; i < top && i < static_cast<int>(order.size()); ++i) {
        const PerName& p = per[order[i]];
        if (p.count == 0) break;
        std::fprintf(out, "| %s | %llu | %.1f | %.2f | %.1f |\n", short_name(t.names[order[i]]).c_str(), static_cast<unsigned long long>(p.count), ms(p.ns),
                     100.0 * static_cast<double>(p.ns) / static_cast<double>(busy), 1e-3 * static_cast<double>(p.ns) / static_cast<double>(p.count));
    }
    if (out != stderr) std::fclose(out);
}

}  // namespace

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
        std::fprintf(stderr, "kernel_trace: cuptiActivityRegisterCallbacks failed; no trace\n");
        return 0;
    }
    bool ok = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
    ok = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS && ok;
    ok = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) == CUPTI_SUCCESS && ok;
    if (!ok) std::fprintf(stderr, "kernel_trace: some activity kinds could not be enabled\n");
    std::atexit(report);
    return 1;
}
