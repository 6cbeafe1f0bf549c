// Attention kernels against the CPU reference: KV append into a paged cache, varlen causal prefill over
// cached prefixes (paged), bidirectional ViT attention (contiguous), and split-KV paged decode.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "kernels/cpu/cpu_ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace cpu = surf::kernels::cpu;
namespace cu = surf::kernels::cuda;
using namespace surf::gpu_test;

namespace {

// A paged cache holding sequences' full K/V (past + new), pages assigned by a random permutation.
struct PagedCache {
    int64_t page_size, n_kv, D, max_pages;
    std::vector<int32_t> block_table;  // [n_seq, max_pages]
    std::vector<float> k, v;           // [n_pages, page_size, n_kv, D]
    PagedCache(const std::vector<int64_t>& lens, int64_t page_size_, int64_t n_kv_, int64_t D_,
               std::mt19937& rng)
        : page_size(page_size_), n_kv(n_kv_), D(D_) {
        max_pages = 1;
        int64_t total = 0;
        for (int64_t l : lens) {
            max_pages = std::max(max_pages, (l + page_size - 1) / page_size);
            total += (l + page_size - 1) / page_size;
        }
        const int64_t n_pages = total + 3;
        std::vector<int32_t> perm(n_pages);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        block_table.assign(lens.size() * max_pages, -1);
        int64_t next = 0;
        for (size_t s = 0; s < lens.size(); ++s)
            for (int64_t p = 0; p < (lens[s] + page_size - 1) / page_size; ++p)
                block_table[s * max_pages + p] = perm[next++];
        k = random_vec(n_pages * page_size * n_kv * D, rng);  // unused rows hold random data too
        v = random_vec(n_pages * page_size * n_kv * D, rng);
    }
    int64_t row(size_t s, int64_t j) const {
        return static_cast<int64_t>(block_table[s * max_pages + j / page_size]) * page_size + j % page_size;
    }
    // Sequence s's contiguous [len, n_kv, D] copy.
    std::vector<float> gather(const std::vector<float>& src, size_t s, int64_t len) const {
        std::vector<float> out(len * n_kv * D);
        for (int64_t j = 0; j < len; ++j)
            std::copy_n(src.data() + row(s, j) * n_kv * D, n_kv * D, out.data() + j * n_kv * D);
        return out;
    }
};

struct Heads {
    const char* name;
    int64_t n_heads, n_kv, D;
};

// Runs prefill attention p on each kernel — mma.sync at 16 query rows per warp (the default) and at 32 (two
// m-tiles sharing fragments), and the Hopper wgmma kernel at key tiles of 64 and 128, plain and
// warp-specialized, and warp-specialized at 208 (run as 128 except with TMA copies at head dim 80) (on a
// compute capability 9.0 device; elsewhere it falls back to the default) — and each split count (0 =
// automatic, given the workspace), each against `ref`. bf16 P and bf16 output: ~2^-8 relative on O, plus P
// rounding inside the sum; split-KV (partial results merged in fp32) has the same bound.
void check_prefill_variants(cu::AttentionPrefillParams p, DeviceBuffer<uint8_t>& ws, DeviceBuffer<bf16>& dout,
                            std::initializer_list<int64_t> split_counts, const std::string& what,
                            const std::vector<float>& ref) {
    struct Kernel {
        int64_t rows_per_warp, wgmma_key_tile;
        bool warp_specialized;
        const char* name;
    };
    for (const Kernel& k : {Kernel{0, 0, false, "rows/warp 16"}, Kernel{32, 0, false, "rows/warp 32"},
                            Kernel{0, 64, false, "wgmma keys 64"}, Kernel{0, 128, false, "wgmma keys 128"},
                            Kernel{0, 64, true, "wgmma keys 64 warp-specialized"},
                            Kernel{0, 128, true, "wgmma keys 128 warp-specialized"},
                            Kernel{0, 208, true, "wgmma keys 208 warp-specialized"}}) {
        p.rows_per_warp = k.rows_per_warp, p.wgmma_key_tile = k.wgmma_key_tile,
        p.wgmma_warp_specialized = k.warp_specialized;
        for (int64_t splits : split_counts) {
            p.n_splits = splits;
            p.workspace = splits == 1 ? nullptr : ws.get(), p.workspace_bytes = splits == 1 ? 0 : ws.size();
            if (splits == 0)
                MESSAGE("automatic split count" << what << " " << k.name << ": "
                                                << cu::attention_prefill_splits(p));
            dout.poison();
            cu::attention_prefill(p, nullptr);
            compare("attention_prefill" + what + " splits " + std::to_string(splits) + " " + k.name,
                    to_float(dout.download()), ref, 3e-3f, 2e-2f, 1e-2);
        }
    }
}

}  // namespace

TEST_CASE(
    "kv_cache_append + paged varlen causal prefill over cached prefixes (mma.sync at 16 and 32 rows per "
    "warp, wgmma)") {
    std::mt19937 rng(7);
    for (Heads hd :
         {Heads{"holotron", 40, 8, 128}, Heads{"tiny_fp32", 4, 2, 16}, Heads{"small_bf16", 8, 2, 40}}) {
        // (past, new) per sequence: fresh prompts, continuations, single tokens, non-multiples of 64. The
        // second layout is small enough (≤ 100 new tokens, 3 sequences) that the kernel picks its 64-row
        // variant even at the Holotron shape (the first takes 128-row blocks there).
        const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> layouts{
            {{0, 0, 200, 1000, 5, 63}, {1, 130, 77, 64, 1, 65}}, {{0, 300, 17}, {9, 40, 100}}};
        for (const auto& [layout, page_size] :
             std::vector<std::pair<size_t, int64_t>>{{0, 16}, {0, 64}, {1, 16}, {1, 64}}) {
            const std::vector<int64_t>& past = layouts[layout].first;
            const std::vector<int64_t>& fresh = layouts[layout].second;
            const size_t n_seq = past.size();
            std::vector<int64_t> lens(n_seq);
            for (size_t s = 0; s < n_seq; ++s) lens[s] = past[s] + fresh[s];
            PagedCache cache(lens, page_size, hd.n_kv, hd.D, rng);
            std::vector<int32_t> cu_q{0}, seq_lens;
            for (size_t s = 0; s < n_seq; ++s) {
                cu_q.push_back(cu_q.back() + static_cast<int32_t>(fresh[s]));
                seq_lens.push_back(static_cast<int32_t>(lens[s]));
            }
            const int64_t n_tok = cu_q.back(), qw = hd.n_heads * hd.D, kvw = hd.n_kv * hd.D;
            // New tokens' q/k/v as one fused row [q | k | v] (the qkv projection output).
            const int64_t row_w = qw + 2 * kvw;
            auto qkv = random_vec(n_tok * row_w, rng);
            std::vector<int32_t> slot_mapping(n_tok);
            std::vector<float> k_full(cache.k), v_full(cache.v);  // expected cache after the append
            for (size_t s = 0; s < n_seq; ++s) {
                for (int64_t i = 0; i < fresh[s]; ++i) {
                    const int64_t t = cu_q[s] + i, r = cache.row(s, past[s] + i);
                    slot_mapping[t] = static_cast<int32_t>(r);
                    std::copy_n(qkv.data() + t * row_w + qw, kvw, k_full.data() + r * kvw);
                    std::copy_n(qkv.data() + t * row_w + qw + kvw, kvw, v_full.data() + r * kvw);
                }
            }
            DeviceBuffer<bf16> dqkv(to_bf16(qkv)), dk(to_bf16(cache.k)), dv(to_bf16(cache.v)),
                dout(n_tok * qw);
            DeviceBuffer<int32_t> dslot(slot_mapping), dbt(cache.block_table), dcu(cu_q), dlens(seq_lens);
            cu::KvAppendParams ap;
            ap.k = dqkv.get() + qw;
            ap.v = dqkv.get() + qw + kvw;
            ap.k_cache = dk.get();
            ap.v_cache = dv.get();
            ap.slot_mapping = dslot.get();
            ap.n_tok = n_tok;
            ap.n_kv_heads = hd.n_kv;
            ap.head_dim = hd.D;
            ap.k_stride = row_w;
            ap.v_stride = row_w;
            cu::kv_cache_append(ap, nullptr);
            const std::string tag =
                std::string(" ") + hd.name + " page " + std::to_string(page_size) + (layout ? " short" : "");
            compare("kv_cache_append K" + tag, to_float(dk.download()), k_full, 0.0f, 0.0f);
            compare("kv_cache_append V" + tag, to_float(dv.download()), v_full, 0.0f, 0.0f);

            cu::AttentionPrefillParams p;
            p.q = dqkv.get();
            p.q_stride = row_w;
            p.out = dout.get();
            p.cu_seqlens_q = dcu.get();
            p.k_cache = dk.get();
            p.v_cache = dv.get();
            p.block_table = dbt.get();
            p.seq_lens_k = dlens.get();
            p.page_size = page_size;
            p.max_pages_per_seq = cache.max_pages;
            p.n_seq = static_cast<int64_t>(n_seq);
            p.n_heads = hd.n_heads;
            p.n_kv_heads = hd.n_kv;
            p.head_dim = hd.D;
            p.max_seqlen_q = *std::max_element(fresh.begin(), fresh.end());
            p.causal = true;
            std::vector<float> ref(n_tok * qw);
            for (size_t s = 0; s < n_seq; ++s) {
                auto ks = cache.gather(k_full, s, lens[s]), vs = cache.gather(v_full, s, lens[s]);
                cpu::AttentionParams c;
                c.q = qkv.data() + cu_q[s] * row_w;
                c.k = ks.data();
                c.v = vs.data();
                c.out = ref.data() + cu_q[s] * qw;
                c.T = fresh[s];
                c.L = lens[s];
                c.n_heads = hd.n_heads;
                c.n_kv_heads = hd.n_kv;
                c.head_dim = hd.D;
                c.q_stride = row_w;
                c.kv_stride = kvw;
                c.causal = true;
                cpu::attention(c);
            }
            // Runs: one pass, 3 forced splits (some empty for the short sequences), the automatic choice.
            p.n_tok_q = n_tok, p.max_seqlen_k = *std::max_element(lens.begin(), lens.end());
            DeviceBuffer<uint8_t> ws(cu::attention_prefill_workspace_bytes(n_tok, hd.n_heads, hd.D, 4));
            check_prefill_variants(p, ws, dout, {1, 3, 0}, " paged causal" + tag, ref);
        }
    }
}

TEST_CASE(
    "attention_prefill: bidirectional ViT attention over independent tiles (contiguous qkv rows; mma.sync "
    "and wgmma)") {
    std::mt19937 rng(8);
    for (Heads hd : {Heads{"radio_h", 16, 16, 80}, Heads{"tiny_vit", 2, 2, 16}}) {
        const std::vector<int32_t> tile_lens =
            hd.D == 80 ? std::vector<int32_t>{1032, 794} : std::vector<int32_t>{18, 18, 18};
        std::vector<int32_t> cu_h{0};
        for (int32_t l : tile_lens) cu_h.push_back(cu_h.back() + l);
        const int64_t n_tok = cu_h.back(), w = hd.n_heads * hd.D, row_w = 3 * w;
        auto qkv = random_vec(n_tok * row_w, rng, -2.0f, 2.0f);
        DeviceBuffer<bf16> dqkv(to_bf16(qkv)), dout(n_tok * w);
        DeviceBuffer<int32_t> dcu(cu_h);
        cu::AttentionPrefillParams p;
        p.q = dqkv.get();
        p.q_stride = row_w;
        p.out = dout.get();
        p.cu_seqlens_q = dcu.get();
        p.k = dqkv.get() + w;
        p.v = dqkv.get() + 2 * w;
        p.kv_stride = row_w;
        p.cu_seqlens_k = dcu.get();
        p.n_seq = static_cast<int64_t>(tile_lens.size());
        p.n_heads = hd.n_heads;
        p.n_kv_heads = hd.n_kv;
        p.head_dim = hd.D;
        p.max_seqlen_q = tile_lens[0];
        p.causal = false;
        std::vector<float> ref(n_tok * w);
        for (size_t s = 0; s < tile_lens.size(); ++s) {
            cpu::AttentionParams c;
            const float* base = qkv.data() + cu_h[s] * row_w;
            c.q = base;
            c.k = base + w;
            c.v = base + 2 * w;
            c.out = ref.data() + cu_h[s] * w;
            c.T = tile_lens[s];
            c.L = tile_lens[s];
            c.n_heads = hd.n_heads;
            c.n_kv_heads = hd.n_kv;
            c.head_dim = hd.D;
            c.q_stride = row_w;
            c.kv_stride = row_w;
            c.causal = false;
            cpu::attention(c);
        }
        p.n_tok_q = n_tok, p.max_seqlen_k = tile_lens[0];
        DeviceBuffer<uint8_t> ws(cu::attention_prefill_workspace_bytes(n_tok, hd.n_heads, hd.D, 4));
        check_prefill_variants(p, ws, dout, {1, 2, 0}, std::string(" bidirectional ") + hd.name, ref);
        // The warp-specialized kernel's K/V tiles by TMA once the buffers' rows are given (kv_rows).
        p.kv_rows = n_tok;
        check_prefill_variants(p, ws, dout, {1, 2, 0},
                               std::string(" bidirectional, kv_rows given ") + hd.name, ref);
    }
}

TEST_CASE(
    "attention_decode: paged split-KV decode (forced and automatic split counts; cp.async and TMA kernels)") {
    std::mt19937 rng(9);
    for (Heads hd :
         {Heads{"holotron", 40, 8, 128}, Heads{"tiny_fp32", 4, 2, 16}, Heads{"small_bf16", 8, 2, 40}}) {
        const std::vector<int64_t> lens{1, 37, 4096, 1000, 129, 64, 2500};
        for (int64_t page_size : {16, 64}) {
            PagedCache cache(lens, page_size, hd.n_kv, hd.D, rng);
            const int64_t batch = lens.size(), qw = hd.n_heads * hd.D, kvw = hd.n_kv * hd.D;
            // Rows past each sequence inside its last page are not finite (a reused page may hold anything):
            // no kernel may let them into a result.
            for (size_t s = 0; s < lens.size(); ++s) {
                for (int64_t j = lens[s]; j % page_size != 0; ++j) {
                    std::fill_n(cache.k.begin() + cache.row(s, j) * kvw, kvw, NAN);
                    std::fill_n(cache.v.begin() + cache.row(s, j) * kvw, kvw, NAN);
                }
            }
            const int64_t cache_pages = static_cast<int64_t>(cache.k.size()) / (page_size * kvw);
            auto q = random_vec(batch * qw, rng, -2.0f, 2.0f);
            std::vector<float> ref(batch * qw);
            for (int64_t b = 0; b < batch; ++b) {
                auto ks = cache.gather(cache.k, b, lens[b]), vs = cache.gather(cache.v, b, lens[b]);
                cpu::AttentionParams c;
                c.q = q.data() + b * qw;
                c.k = ks.data();
                c.v = vs.data();
                c.out = ref.data() + b * qw;
                c.T = 1;
                c.L = lens[b];
                c.n_heads = hd.n_heads;
                c.n_kv_heads = hd.n_kv;
                c.head_dim = hd.D;
                c.q_stride = qw;
                c.kv_stride = kvw;
                c.causal = true;
                cpu::attention(c);
            }
            std::vector<int32_t> seq_lens(lens.begin(), lens.end());
            DeviceBuffer<bf16> dq(to_bf16(q)), dk(to_bf16(cache.k)), dv(to_bf16(cache.v)), dout(batch * qw);
            DeviceBuffer<int32_t> dbt(cache.block_table), dlens(seq_lens);
            // The plain kernel (one 32-key tile a warp) and the pipelined one (16-key tiles, two a warp in
            // flight), that one also with its K/V loads marked evict-first in the L2 (the engine's default).
            // The TMA kernel (head dim 128 on compute capability 9.0; elsewhere the request falls back to the
            // pipelined kernel) at one and two persistent blocks an SM.
            struct Variant {
                bool pipelined, evict_first, tma;
                int32_t per_sm;
                const char* name;
            };
            for (const Variant& v :
                 {Variant{false, false, false, 1, " plain"}, Variant{true, false, false, 1, " pipelined"},
                  Variant{true, true, false, 1, " pipelined, L2 evict-first"},
                  Variant{true, true, true, 1, " TMA, 1 block an SM"},
                  Variant{true, false, true, 2, " TMA, 2 blocks an SM"}}) {
                for (int32_t splits : {0, 1, 7}) {
                    cu::AttentionDecodeParams p;
                    p.q = dq.get();
                    p.out = dout.get();
                    p.k_cache = dk.get();
                    p.v_cache = dv.get();
                    p.block_table = dbt.get();
                    p.seq_lens = dlens.get();
                    p.page_size = page_size;
                    p.max_pages_per_seq = cache.max_pages;
                    p.batch = batch;
                    p.n_heads = hd.n_heads;
                    p.n_kv_heads = hd.n_kv;
                    p.head_dim = hd.D;
                    p.max_seq_len = 4096;
                    p.n_splits = splits;
                    p.pipelined = v.pipelined;
                    p.l2_evict_first = v.evict_first;
                    p.tma = v.tma, p.cache_pages = cache_pages, p.persistent_blocks_per_sm = v.per_sm;
                    DeviceBuffer<uint8_t> ws(std::max<size_t>(cu::attention_decode_workspace_bytes(p), 1));
                    ws.poison();
                    dout.poison();
                    cu::attention_decode(p, ws.get(), nullptr);
                    compare(std::string("attention_decode ") + hd.name + " page " +
                                std::to_string(page_size) + " splits " +
                                std::to_string(cu::attention_decode_splits(p)) + v.name,
                            to_float(dout.download()), ref, 3e-3f, 2e-2f, 1e-2);
                }
            }
        }
    }
}
