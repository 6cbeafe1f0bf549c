// GQA attention mixer (spec §1.4): no bias, no positional encoding, causal, scale head_dim^-0.5.
#include "kernels/cpu/cpu_ops.h"
#include "model/cpu/blocks.h"

namespace surf::model::cpu {

namespace k = surf::kernels::cpu;

void attention_mixer(const LlmConfig& cfg, const AttentionWeights& w, const float* x, int64_t T,
                     KvCache& cache, float* out) {
    const int64_t hd = cfg.head_dim;
    const int64_t q_dim = cfg.n_heads * hd, kv_dim = cfg.n_kv_heads * hd;
    const int64_t past = static_cast<int64_t>(cache.k.size()) / kv_dim;

    std::vector<float> q(static_cast<size_t>(T * q_dim));  // [T, n_heads, hd]
    project(w.q, x, T, q.data());
    cache.k.resize(static_cast<size_t>((past + T) * kv_dim));
    cache.v.resize(static_cast<size_t>((past + T) * kv_dim));
    project(w.k, x, T, cache.k.data() + past * kv_dim);
    project(w.v, x, T, cache.v.data() + past * kv_dim);

    std::vector<float> attn(static_cast<size_t>(T * q_dim));  // [T, n_heads, hd]
    k::AttentionParams p;
    p.q = q.data(), p.k = cache.k.data(), p.v = cache.v.data(), p.out = attn.data();
    p.T = T, p.L = past + T, p.n_heads = cfg.n_heads, p.n_kv_heads = cfg.n_kv_heads, p.head_dim = hd;
    p.causal = true;
    k::attention(p);

    project(w.o, attn.data(), T, out);
}

}  // namespace surf::model::cpu
