// kernel_trace: a CUPTI injection library that records every kernel, copy and memset a CUDA program runs and,
// at exit, reports how busy the GPU was between them: the union of the busy intervals over all streams, the
// idle gaps between them by size (with the kernels on either side of the mid-sized ones), how much of the
// busy time ran two or more kernels at once, and the kernels by total time. The question it answers: how much
// of a step is launch gaps and waits rather than kernels (this workplace's device machines have no Nsight
// Systems).
//
//   CUDA_INJECTION64_PATH=build-gpu/apps/libkernel_trace.so build-gpu/surf bench serve --concurrency 100
//
// Environment: SURF_KTRACE_SKIP_S (seconds after the first record to leave out: warm-up, weights; default 0),
// SURF_KTRACE_OUT (report file; default stderr), SURF_KTRACE_TOP (kernels listed; default 30).
#include <cupti.h>

#include <cxxabi.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "apps/trace_summary.h"

namespace {

struct Trace {
    std::mutex mu;
    std::vector<surf::apps::TraceInterval> items;  // ns on CUPTI's clock; names index Trace::names
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
            surf::apps::TraceInterval iv;
            if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
                rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
                const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
                iv = {k->start, k->end, t.id(k->name)};
            } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
                iv = {m->start, m->end, t.id("[memcpy]")};
            } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
                iv = {m->start, m->end, t.id("[memset]")};
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

double ms(uint64_t ns) {
    return static_cast<double>(ns) * 1e-6;
}

void report() {
    cuptiActivityFlushAll(1);
    Trace& t = trace();
    std::lock_guard<std::mutex> lock(t.mu);
    const char* out_path = std::getenv("SURF_KTRACE_OUT");
    FILE* out = out_path ? std::fopen(out_path, "w") : stderr;
    if (!out) {
        std::fprintf(stderr,
                     "kernel_trace: cannot write SURF_KTRACE_OUT=%s (%s); the report follows on stderr\n",
                     out_path, std::strerror(errno));
        out = stderr;
    }
    const double skip_s =
        std::getenv("SURF_KTRACE_SKIP_S") ? std::atof(std::getenv("SURF_KTRACE_SKIP_S")) : 0.0;
    const int top = std::getenv("SURF_KTRACE_TOP") ? std::atoi(std::getenv("SURF_KTRACE_TOP")) : 30;
    const surf::apps::TraceSummary s =
        surf::apps::summarize_trace(std::move(t.items), static_cast<uint64_t>(skip_s * 1e9), t.names.size());
    if (s.intervals == 0) {
        std::fprintf(out, "# kernel_trace: no GPU activity recorded after the first %.1f s\n", skip_s);
    } else {
        std::fprintf(
            out,
            "# kernel_trace: %zu kernels, copies and memsets after the first %.1f s (%zu records dropped)\n",
            s.intervals, skip_s, t.dropped);
        std::fprintf(out,
                     "# span %.1f ms; GPU busy (union over streams) %.1f ms = %.2f%%; idle %.1f ms; sum of "
                     "durations %.1f ms\n",
                     ms(s.span_ns), ms(s.busy_ns),
                     100.0 * static_cast<double>(s.busy_ns) / static_cast<double>(s.span_ns),
                     ms(s.span_ns - s.busy_ns), ms(s.sum_ns));
        std::fprintf(out,
                     "# of the busy time: one interval running %.1f ms, two %.1f ms, three or more %.1f ms\n",
                     ms(s.running_ns[1]), ms(s.running_ns[2]), ms(s.running_ns[3]));
        std::fprintf(out, "\n| idle gap | count | total ms | %% of span |\n|---|---|---|---|\n");
        for (const surf::apps::TraceGapClass& c : s.gaps) {
            std::fprintf(out, "| %s | %llu | %.2f | %.2f |\n", c.label,
                         static_cast<unsigned long long>(c.count), ms(c.total_ns),
                         100.0 * static_cast<double>(c.total_ns) / static_cast<double>(s.span_ns));
        }
        std::fprintf(out,
                     "\n| gaps of 5 us – 1 ms: after | before | count | total ms |\n|---|---|---|---|\n");
        for (size_t i = 0; i < s.mid_gaps.size() && i < 15; ++i) {
            const auto& g = s.mid_gaps[i];
            std::fprintf(out, "| %s | %s | %llu | %.2f |\n", short_name(t.names[g.before]).c_str(),
                         short_name(t.names[g.after]).c_str(), static_cast<unsigned long long>(g.count),
                         ms(g.ns));
        }
        std::fprintf(out, "\n| kernel | count | total ms | %% of busy | mean us |\n|---|---|---|---|---|\n");
        for (size_t i = 0; i < s.per_name.size() && static_cast<int>(i) < top; ++i) {
            const auto& p = s.per_name[i];
            std::fprintf(out, "| %s | %llu | %.1f | %.2f | %.1f |\n", short_name(t.names[p.name]).c_str(),
                         static_cast<unsigned long long>(p.count), ms(p.ns),
                         100.0 * static_cast<double>(p.ns) / static_cast<double>(s.busy_ns),
                         1e-3 * static_cast<double>(p.ns) / static_cast<double>(p.count));
        }
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
