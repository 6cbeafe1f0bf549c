// Token sampling on the GPU, one block per row, reproducing model/sampler.h's sample_token draw for draw.
// The CPU sorts candidates (logit desc, id asc); here every "position in sorted order" question is
// answered without sorting, by radix selection on an order-preserving 32-bit key of the logit:
//   select(weight, target): the first candidate in sorted order whose cumulative weight reaches target,
// weight = 1 gives the top_k cut; weight = the softmax mass exp(l/T − top) gives the top_p cut and the
// inverse-CDF draw at u·total. Masses are fp64 like the CPU. Two ways to answer it:
//   binned (the default): one pass puts every candidate's weight into 2,048 bins by a monotone map of its
//     logit onto [min, max] (so the bins are in sorted order), the bins are scanned from the top for the
//     crossing, one more pass gathers that bin's candidates (≤ 1,024) and they are ranked exactly (logit
//     desc, id asc) and scanned in shared memory: two passes over the row, the masses computed once;
//   radix (where a bin holds more candidates, or the logits' range is not finite): four 8-bit digit passes
//     over an order-preserving key (weight histograms per digit) plus one pass that orders the exactly-equal
//     logits by id.
#include <cfloat>

#include "kernels/counter_random.h"
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

struct Row {
    const float* logits;
    const uint32_t* allowed;
    int64_t vocab;
    float inv_t, top;
    float bin_min, bin_scale;  // the binned map: bin = (logit − bin_min) · bin_scale, clamped to the last bin
};

// First candidate of the sorted order that is *not* kept: elements (key, id) with key > b.key, or equal
// key and id ≤ b.id, are inside the boundary.
struct Bound {
    uint32_t key;
    int32_t id;
};

struct Shared {
    double hist[256];
    double dred[kWarps];
    int ired[kWarps];
    float fred[kWarps];
    float fmin[kWarps];
    int32_t idred[kWarps];
    // select() results, written by thread 0
    uint32_t prefix, mask;
    double before, target;
    bool strict;
    int32_t m;  // 1-based rank among the ties of the selected key
    int32_t sel_id;
    double sel_cum;  // cumulative weight up to and including the selected element
    // select_binned() state, written by one warp / thread
    int bin;         // the bin holding the crossing
    bool take_last;  // no crossing (rounding): the kept set's last element
    int n_gathered;  // candidates of `bin` gathered so far
    int first;       // the first crossing among them, in sorted order
};

__device__ __forceinline__ bool is_allowed(const Row& r, int64_t i) {
    return r.allowed == nullptr || ((r.allowed[i >> 5] >> (i & 31)) & 1u);
}
// A sampling candidate: allowed, not NaN, not −inf (as sample_token).
__device__ __forceinline__ bool candidate(const Row& r, int64_t i, float& v) {
    v = r.logits[i];
    return is_allowed(r, i) && !isnan(v) && v > -INFINITY;
}
__device__ __forceinline__ bool candidate_value(float v, bool allowed) {
    return allowed && !isnan(v) && v > -INFINITY;
}

// Calls f(i, logit, allowed) for every element of the row in the block's strided order (element i on thread
// i mod kThreads), each thread's next kLoads logits and mask words loaded before any is used: one block walks
// a row, and with one load in flight a thread the passes would be latency-bound (≈ 4 KB in flight an SM).
template <class F>
__device__ __forceinline__ void for_each_logit(const Row& r, F&& f) {
    constexpr int kLoads = 6;
    for (int64_t base = threadIdx.x; base < r.vocab; base += int64_t{kThreads} * kLoads) {
        float v[kLoads];
        uint32_t word[kLoads];
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
            const int64_t i = base + int64_t{u} * kThreads;
            v[u] = i < r.vocab ? __ldg(r.logits + i) : 0.0f;
            word[u] = r.allowed != nullptr && i < r.vocab ? __ldg(r.allowed + (i >> 5)) : ~0u;
        }
#pragma unroll
        for (int u = 0; u < kLoads; ++u) {
            const int64_t i = base + int64_t{u} * kThreads;
            if (i < r.vocab) f(i, v[u], ((word[u] >> (i & 31)) & 1u) != 0);
        }
    }
}
__device__ __forceinline__ uint32_t order_key(float v) {
    if (v == 0.0f) v = 0.0f;  // −0 == +0 for the CPU comparison
    const uint32_t u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ bool inside(uint32_t key, int32_t id, const Bound& b) {
    return key > b.key || (key == b.key && id <= b.id);
}
__device__ __forceinline__ double mass(const Row& r, float v) {
    // Same float rounding as the CPU's `logit * inv_t - top` (no contraction into an fma).
    return exp(static_cast<double>(__fsub_rn(__fmul_rn(v, r.inv_t), r.top)));
}
__device__ __forceinline__ bool crosses(double cum, double target, bool strict) {
    return strict ? cum > target : cum >= target;
}

__device__ double block_sum_d(double v, Shared& sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh.dred[threadIdx.x >> 5] = v;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < kWarps; ++w) total += sh.dred[w];
    return total;
}

// Inclusive prefix sum of one value a thread across the block (thread order); `warp_sums` [kWarps] holds
// each warp's total afterwards.
template <class T>
__device__ T block_inclusive_scan(T x, T* warp_sums) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    T before = 0;
    for (int w = 0; w < warp; ++w) before += warp_sums[w];
    return before + x;
}

// Exclusive prefix of per-thread counts across the block; returns the block total via `total`.
__device__ int block_exclusive_scan(int c, Shared& sh, int& total) {
    const int incl = block_inclusive_scan(c, sh.ired);
    total = 0;
    for (int w = 0; w < kWarps; ++w) total += sh.ired[w];
    return incl - c;
}

// The first element of the kept set (candidates inside `bound`) in sorted order whose cumulative weight
// crosses `target`; falls back to the last kept element when rounding leaves the target unreached.
// Returns its id; sh.sel_cum holds the cumulative weight through it.
// warp_hist: kWarps private 256-bin histograms (dynamic shared memory). One shared histogram is slow at the
// 131k vocabulary: the first digit pass puts nearly every candidate into a dozen bins, and 1,024 threads'
// fp64 atomics on those few addresses serialise. Per-warp copies leave 32 lanes to a copy; the copies are
// then summed per bin in warp order.
__device__ int32_t select(const Row& r, const Bound& bound, bool use_mass, double target, bool strict,
                          Shared& sh, double* warp_hist) {
    if (threadIdx.x == 0) {
        sh.prefix = 0;
        sh.mask = 0;
        sh.before = 0.0;
        sh.target = target;
        sh.strict = strict;
    }
    double* my_hist = warp_hist + (threadIdx.x >> 5) * 256;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < kWarps * 256; i += kThreads) warp_hist[i] = 0.0;
        __syncthreads();
        const uint32_t prefix = sh.prefix, mask = sh.mask;
        for_each_logit(r, [&](int64_t i, float v, bool allowed) {
            if (!candidate_value(v, allowed)) return;
            const uint32_t key = order_key(v);
            if ((key & mask) != prefix || !inside(key, static_cast<int32_t>(i), bound)) return;
            atomicAdd(&my_hist[(key >> shift) & 255u], use_mass ? mass(r, v) : 1.0);
        });
        __syncthreads();
        for (int d = threadIdx.x; d < 256; d += kThreads) {
            double sum = 0.0;
            for (int w = 0; w < kWarps; ++w) sum += warp_hist[w * 256 + d];
            sh.hist[d] = sum;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double acc = sh.before;
            int chosen = -1, last_nonempty = -1;
            for (int d = 255; d >= 0; --d) {
                if (sh.hist[d] == 0.0) continue;
                last_nonempty = d;
                if (crosses(acc + sh.hist[d], sh.target, sh.strict)) {
                    chosen = d;
                    break;
                }
                acc += sh.hist[d];
            }
            if (chosen < 0) {  // target beyond the total (rounding): take the very last element
                chosen = last_nonempty;
                acc -= sh.hist[chosen];
                sh.target = acc + sh.hist[chosen];
                sh.strict = false;
            }
            sh.before = acc;
            sh.prefix |= static_cast<uint32_t>(chosen) << shift;
            sh.mask |= 255u << shift;
        }
        __syncthreads();
    }
    // Ties: every element with the selected key has the same weight; the crossing is at rank m by id.
    const uint32_t key_sel = sh.prefix;
    const int64_t per = (r.vocab + kThreads - 1) / kThreads;
    const int64_t lo = threadIdx.x * per, hi = min(r.vocab, lo + per);
    int count = 0;
    double w = 0.0;
    for (int64_t i = lo; i < hi; ++i) {
        float v;
        if (candidate(r, i, v) && order_key(v) == key_sel &&
            inside(key_sel, static_cast<int32_t>(i), bound)) {
            if (count == 0) w = use_mass ? mass(r, v) : 1.0;
            ++count;
        }
    }
    int n_ties = 0;
    const int before_me = block_exclusive_scan(count, sh, n_ties);
    if (count > 0 && before_me == 0) {
        // The first tie-holding thread decides the rank (all ties share w).
        int m = 1;
        while (m < n_ties && !crosses(sh.before + m * w, sh.target, sh.strict)) ++m;
        sh.m = m;
        sh.sel_cum = sh.before + m * w;
    }
    __syncthreads();
    const int m = sh.m;
    if (count > 0 && before_me < m && m <= before_me + count) {
        int k = before_me;
        for (int64_t i = lo; i < hi; ++i) {
            float v;
            if (candidate(r, i, v) && order_key(v) == key_sel &&
                inside(key_sel, static_cast<int32_t>(i), bound)) {
                if (++k == m) {
                    sh.sel_id = static_cast<int32_t>(i);
                    break;
                }
            }
        }
    }
    __syncthreads();
    return sh.sel_id;
}

constexpr int kBins = 2048;
constexpr int kBinCap = kThreads;  // candidates one bin may hold for the exact pass (one a thread)

// The binned pass's shared memory, carved from the same dynamic buffer as the radix path's histograms
// (never both at once).
struct BinnedSmem {
    double hist[kBins];  // weight a bin
    int count[kBins];    // candidates a bin
    uint32_t key[kBinCap];
    int32_t id[kBinCap];
    uint32_t sorted_key[kBinCap];
    int32_t sorted_id[kBinCap];
};

// Monotone in v (every step rounds monotonically), so bins ascend with the logit and ties share a bin.
__device__ __forceinline__ int bin_of(const Row& r, float v) {
    const float t = __fmul_rn(__fsub_rn(v, r.bin_min), r.bin_scale);
    return min(kBins - 1, static_cast<int>(t));
}

// select() by bins (see the header). Returns false when the crossing's bin holds more than kBinCap
// candidates, with sh.target set (the caller then runs the radix select on it) and sh.sel_id / sel_cum
// untouched. target = total_factor · (the kept set's total weight) when total_factor > 0, else `target`.
__device__ bool select_binned(const Row& r, const Bound& bound, bool use_mass, double target,
                              double total_factor, bool strict, Shared& sh, BinnedSmem& bs, int32_t& sel_id) {
    for (int i = threadIdx.x; i < kBins; i += kThreads) {
        bs.hist[i] = 0.0;
        bs.count[i] = 0;
    }
    if (threadIdx.x == 0) sh.n_gathered = 0;
    __syncthreads();
    for_each_logit(r, [&](int64_t i, float v, bool allowed) {
        if (!candidate_value(v, allowed) || !inside(order_key(v), static_cast<int32_t>(i), bound)) return;
        const int b = bin_of(r, v);
        atomicAdd(&bs.hist[b], use_mass ? mass(r, v) : 1.0);
        atomicAdd(&bs.count[b], 1);
    });
    __syncthreads();
    if (threadIdx.x < 32) {
        // Lane l sums bins (top − 64(l+1), top − 64l]: lanes run from the highest logits down.
        constexpr int kPerLane = kBins / 32;
        const int lane = threadIdx.x, hi = kBins - 1 - lane * kPerLane;
        double part = 0.0;
        bool any = false;
        for (int d = hi; d > hi - kPerLane; --d) {
            part += bs.hist[d];
            any |= bs.count[d] > 0;
        }
        double incl = part;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const double y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        const double tgt = total_factor > 0.0 ? total_factor * __shfl_sync(0xffffffffu, incl, 31) : target;
        const unsigned crossing = __ballot_sync(0xffffffffu, any && crosses(incl, tgt, strict));
        const int start = crossing ? __ffs(crossing) - 1 : 0;  // no crossing lane: walk everything
        const double before_start = __shfl_sync(0xffffffffu, incl - part, start);
        if (lane == 0) {
            // Bin by bin from the start lane's top, with the serial sums the crossing is decided on (they
            // may round differently from the lane sums: then the walk goes on past the lane).
            int chosen = -1, last_nonempty = -1;
            double acc = before_start;
            for (int d = kBins - 1 - start * kPerLane; d >= 0; --d) {
                if (bs.count[d] == 0) continue;
                last_nonempty = d;
                if (crossing && crosses(acc + bs.hist[d], tgt, strict)) {
                    chosen = d;
                    break;
                }
                acc += bs.hist[d];
            }
            sh.take_last = chosen < 0;
            if (chosen < 0 &&
                last_nonempty >= 0) {  // target beyond the total (rounding): the kept set's last element
                chosen = last_nonempty;
                acc -= bs.hist[chosen];
            }
            sh.bin = chosen;
            sh.before = acc;
            sh.target = tgt;
            sh.strict = strict;
            sh.first = kBinCap;
        }
    }
    __syncthreads();
    const int bin = sh.bin;
    if (bin < 0 || bs.count[bin] > kBinCap) return false;
    for_each_logit(r, [&](int64_t i, float v, bool allowed) {
        if (!candidate_value(v, allowed) || bin_of(r, v) != bin) return;
        const uint32_t key = order_key(v);
        if (!inside(key, static_cast<int32_t>(i), bound)) return;
        const int slot = atomicAdd(&sh.n_gathered, 1);
        bs.key[slot] = key;
        bs.id[slot] = static_cast<int32_t>(i);
    });
    __syncthreads();
    const int n = sh.n_gathered, t = threadIdx.x;
    if (t < n) {  // rank in sorted order: logit desc, then id asc
        const uint32_t k = bs.key[t];
        const int32_t id = bs.id[t];
        int rank = 0;
        for (int j = 0; j < n; ++j) rank += bs.key[j] > k || (bs.key[j] == k && bs.id[j] < id);
        bs.sorted_key[rank] = k;
        bs.sorted_id[rank] = id;
    }
    __syncthreads();
    double w = 0.0;
    if (t < n) w = use_mass ? mass(r, r.logits[bs.sorted_id[t]]) : 1.0;
    const double cum = sh.before + block_inclusive_scan(w, sh.dred);
    if (t < n && !sh.take_last && crosses(cum, sh.target, sh.strict)) atomicMin(&sh.first, t);
    __syncthreads();
    const int pick = sh.take_last || sh.first >= n ? n - 1 : sh.first;
    if (t == pick) {
        sh.sel_id = bs.sorted_id[t];
        sh.sel_cum = cum;
    }
    __syncthreads();
    sel_id = sh.sel_id;
    return true;
}

constexpr size_t kWarpHistBytes = static_cast<size_t>(kWarps) * 256 * sizeof(double);  // 64 KB
static_assert(sizeof(BinnedSmem) <= kWarpHistBytes, "the binned pass shares the radix histograms' buffer");

// select() by bins where they can answer, else by radix digits (see the header). target = total_factor ·
// (the kept set's total weight) when total_factor > 0, else `target`.
__device__ int32_t select_any(const Row& r, const Bound& bound, bool use_mass, double target,
                              double total_factor, bool strict, bool binned, Shared& sh, double* buf) {
    int32_t id = -1;
    if (binned) {
        if (select_binned(r, bound, use_mass, target, total_factor, strict, sh,
                          *reinterpret_cast<BinnedSmem*>(buf), id))
            return id;
        target = sh.target;  // the bins' total gave the target; the radix digits find its crossing
    } else if (total_factor > 0.0) {
        double total = 0.0;
        for_each_logit(r, [&](int64_t i, float v, bool allowed) {
            if (candidate_value(v, allowed) && inside(order_key(v), static_cast<int32_t>(i), bound))
                total += use_mass ? mass(r, v) : 1.0;
        });
        target = total_factor * block_sum_d(total, sh);
    }
    return select(r, bound, use_mass, target, strict, sh, buf);
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SamplingParams p, int64_t logits_stride) {
    detail::pdl_prologue();
    __shared__ Shared sh;
    extern __shared__ double warp_hist[];  // [kWarps][256] (radix) or a BinnedSmem
    const int64_t row = blockIdx.x;
    Row r{p.logits + row * logits_stride,
          p.allowed ? p.allowed + row * p.allowed_stride : nullptr,
          p.vocab,
          1.0f,
          0.0f,
          0.0f,
          0.0f};
    const float temperature = p.temperature[row];
    const int32_t top_k = p.top_k ? p.top_k[row] : 0;
    const float top_p = p.top_p ? p.top_p[row] : 1.0f;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    // Best (value, id): larger value, then smaller id. Greedy admits −inf; sampling does not. Also the
    // smallest sampling candidate (the binned map's low end).
    const bool greedy = temperature == 0.0f || top_k == 1;
    float best_v = -INFINITY, min_v = INFINITY;
    int32_t best_id = INT32_MAX;
    int n_valid = 0;
    for_each_logit(r, [&](int64_t i, float v, bool allowed) {
        if (!allowed || isnan(v)) return;
        if (!greedy && v == -INFINITY) return;
        ++n_valid;
        min_v = fminf(min_v, v);
        if (v > best_v || best_id == INT32_MAX) {  // ids rise within a thread: first maximum kept
            best_v = v;
            best_id = static_cast<int32_t>(i);
        }
    });
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best_v, o);
        const int32_t oid = __shfl_xor_sync(0xffffffffu, best_id, o);
        min_v = fminf(min_v, __shfl_xor_sync(0xffffffffu, min_v, o));
        if (oid != INT32_MAX && (best_id == INT32_MAX || ov > best_v || (ov == best_v && oid < best_id))) {
            best_v = ov;
            best_id = oid;
        }
    }
    if (lane == 0) {
        sh.fred[warp] = best_v;
        sh.idred[warp] = best_id;
        sh.fmin[warp] = min_v;
    }
    int total_valid = 0;
    block_exclusive_scan(n_valid, sh, total_valid);  // also orders the fred/fmin/idred writes
    if (threadIdx.x == 0) {
        for (int w = 0; w < kWarps; ++w) {
            const int32_t oid = sh.idred[w];
            const float ov = sh.fred[w];
            min_v = fminf(min_v, sh.fmin[w]);
            if (oid != INT32_MAX &&
                (best_id == INT32_MAX || ov > best_v || (ov == best_v && oid < best_id))) {
                best_v = ov;
                best_id = oid;
            }
        }
        sh.sel_id = best_id;
        sh.fred[0] = best_v;
        sh.fred[1] = min_v;
    }
    __syncthreads();
    best_id = sh.sel_id;
    best_v = sh.fred[0];
    min_v = sh.fred[1];
    if (greedy || best_id == INT32_MAX) {
        if (threadIdx.x == 0) p.tokens[row] = best_id == INT32_MAX ? -1 : best_id;
        return;
    }
    r.inv_t = 1.0f / temperature;
    r.top = __fmul_rn(best_v, r.inv_t);
    // The bins need a finite, non-empty range of logits (+inf, or every candidate equal: radix).
    const float range = __fsub_rn(best_v, min_v);
    r.bin_min = min_v;
    r.bin_scale = __fdiv_rn(static_cast<float>(kBins), range);
    const bool binned =
        !p.radix_only && isfinite(best_v) && isfinite(range) && range > 0.0f && isfinite(r.bin_scale);

    Bound bound{0u, INT32_MAX};  // every candidate (any finite or +inf logit has key > 0)
    if (top_k > 0 && top_k < total_valid) {
        const int32_t id =
            select_any(r, bound, false, static_cast<double>(top_k), 0.0, false, binned, sh, warp_hist);
        bound = {order_key(r.logits[id]), id};
    }
    const double u = static_cast<double>(surf::kernels::counter_uniform(p.seed[row], p.step[row]));
    int32_t id;
    if (top_p < 1.0f) {
        const int32_t cut =
            select_any(r, bound, true, 0.0, static_cast<double>(top_p), false, binned, sh, warp_hist);
        bound = {order_key(r.logits[cut]), cut};
        const double total = sh.sel_cum;
        id = select_any(r, bound, true, u * total, 0.0, true, binned, sh, warp_hist);
    } else {
        id = select_any(r, bound, true, 0.0, u, true, binned, sh, warp_hist);  // u = 0: target 0
    }
    if (threadIdx.x == 0) p.tokens[row] = id;
}

}  // namespace

void sample_tokens(const SamplingParams& p, cudaStream_t stream) {
    SURF_CHECK(p.logits && p.temperature && p.seed && p.step && p.tokens, "sample_tokens: null pointer");
    SURF_CHECK(p.vocab > 0 && p.vocab < INT32_MAX, "sample_tokens: vocab ", p.vocab);
    SURF_CHECK(p.allowed == nullptr || p.allowed_stride == 0 || p.allowed_stride >= (p.vocab + 31) / 32,
               "sample_tokens: allowed_stride ", p.allowed_stride);
    const int64_t stride = p.logits_stride ? p.logits_stride : p.vocab;
    if (p.rows == 0) return;
    SURF_CUDA_CHECK(cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kWarpHistBytes)));
    detail::launch_kernel(sample_kernel, static_cast<unsigned>(p.rows), kThreads, kWarpHistBytes, stream, p,
                          stride);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
