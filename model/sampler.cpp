#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "base/error.h"
#include "kernels/counter_random.h"

namespace surf::model {

void validate(const SamplingParams& p) {
    if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
        throw Error(ErrorKind::kInvalidArgument,
                    "temperature must be a finite number ≥ 0, got " + std::to_string(p.temperature));
    }
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
        throw Error(ErrorKind::kInvalidArgument, "top_p must be in (0, 1], got " + std::to_string(p.top_p));
    if (p.top_k < 0)
        throw Error(ErrorKind::kInvalidArgument, "top_k must be ≥ 0, got " + std::to_string(p.top_k));
}

namespace {

bool is_allowed(const uint32_t* allowed, int64_t i) {
    return !allowed || ((allowed[i >> 5] >> (i & 31)) & 1u);
}

}  // namespace

int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t step,
                     const uint32_t* allowed) {
    if (p.temperature == 0.0f || p.top_k == 1) {
        int32_t best = -1;
        float best_logit = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < vocab; ++i) {
            if (!is_allowed(allowed, i) || std::isnan(logits[i])) continue;
            if (best < 0 || logits[i] > best_logit) {
                best = static_cast<int32_t>(i);
                best_logit = logits[i];
            }
        }
        return best;
    }
    // Candidates sorted by logit (desc, ties by id), cut to top_k, then softmax, then top_p.
    std::vector<int32_t> ids;
    ids.reserve(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) {
        if (is_allowed(allowed, i) && !std::isnan(logits[i]) &&
            logits[i] > -std::numeric_limits<float>::infinity()) {
            ids.push_back(static_cast<int32_t>(i));
        }
    }
    if (ids.empty()) return -1;
    auto by_logit = [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
    size_t keep = ids.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
        keep = static_cast<size_t>(p.top_k);
        std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(keep), ids.end(), by_logit);
        ids.resize(keep);
    } else {
        std::sort(ids.begin(), ids.end(), by_logit);
    }
    const float inv_t = 1.0f / p.temperature, top = logits[ids[0]] * inv_t;
    std::vector<double> probs(ids.size());
    double total = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
        probs[i] = std::exp(static_cast<double>(logits[ids[i]] * inv_t - top));
        total += probs[i];
    }
    if (p.top_p < 1.0f) {
        double cum = 0.0;
        size_t cut = ids.size();
        for (size_t i = 0; i < ids.size(); ++i) {
            cum += probs[i] / total;
            if (cum >= p.top_p) {
                cut = i + 1;
                break;
            }
        }
        probs.resize(cut);
        ids.resize(cut);
        total = std::accumulate(probs.begin(), probs.end(), 0.0);
    }
    const double u = static_cast<double>(kernels::counter_uniform(p.seed, step)) * total;
    double cum = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
        cum += probs[i];
        if (u < cum) return ids[i];
    }
    return ids.back();
}

}  // namespace surf::model
