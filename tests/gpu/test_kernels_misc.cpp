// Vision/embedding glue and the GPU sampler against their CPU definitions: CPE bilinear resize,
// im2patch, ViT token assembly, pixel shuffle v2, embedding gather with image merge, and sample_tokens
// vs model/sampler.h's sample_token draw for draw.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "apps/bench/sm_occupier.h"
#include "kernels/cpu/cpu_ops.h"
#include "model/sampler.h"
#include "tests/gpu/gpu_test_util.h"

namespace cpu = surf::kernels::cpu;
namespace cu = surf::kernels::cuda;
using namespace surf::gpu_test;

TEST_CASE("bilinear_resize (CPE 128→32 and odd sizes), channel-last") {
    std::mt19937 rng(10);
    struct S {
        int64_t C, ih, iw, oh, ow;
    };
    for (S s : {S{1280, 128, 128, 32, 32}, S{32, 10, 10, 4, 4}, S{8, 7, 5, 12, 9}}) {
        auto in = random_vec(s.ih * s.iw * s.C, rng);
        std::vector<float> chw(in.size()), ref_chw(s.C * s.oh * s.ow), ref(ref_chw.size());
        for (int64_t p = 0; p < s.ih * s.iw; ++p)
            for (int64_t c = 0; c < s.C; ++c) chw[c * s.ih * s.iw + p] = in[p * s.C + c];
        cpu::bilinear_resize({chw.data(), ref_chw.data(), s.C, s.ih, s.iw, s.oh, s.ow});
        for (int64_t p = 0; p < s.oh * s.ow; ++p)
            for (int64_t c = 0; c < s.C; ++c) ref[p * s.C + c] = ref_chw[c * s.oh * s.ow + p];
        DeviceBuffer<bf16> din(to_bf16(in)), dout(ref.size());
        dout.poison();
        cu::bilinear_resize({din.get(), dout.get(), s.C, s.ih, s.iw, s.oh, s.ow}, nullptr);
        compare("bilinear_resize " + std::to_string(s.ih) + "x" + std::to_string(s.iw) + "→" +
                    std::to_string(s.oh) + "x" + std::to_string(s.ow),
                to_float(dout.download()), ref, 1e-6f, 8e-3f);
    }
}

TEST_CASE("patchify, vit_tokens and pixel_shuffle") {
    std::mt19937 rng(11);
    // im2patch: 3 tiles of 512² (RADIO-H) and 2 of 64² (tiny fixture).
    for (int64_t side : {512, 64}) {
        const int64_t n_img = side == 512 ? 3 : 2, ps = 16, g = side / ps, feat = 3 * ps * ps;
        auto img = random_vec(n_img * 3 * side * side, rng, -2.0f, 2.0f, false);
        std::vector<float> ref(n_img * g * g * feat);
        for (int64_t i = 0; i < n_img; ++i)
            for (int64_t py = 0; py < g; ++py)
                for (int64_t px = 0; px < g; ++px)
                    for (int64_t c = 0; c < 3; ++c)
                        for (int64_t yy = 0; yy < ps; ++yy)
                            for (int64_t xx = 0; xx < ps; ++xx)
                                ref[((i * g * g) + py * g + px) * feat + c * ps * ps + yy * ps + xx] =
                                    img[((i * 3 + c) * side + py * ps + yy) * side + px * ps + xx];
        DeviceBuffer<float> dimg(img);
        DeviceBuffer<bf16> dp(ref.size());
        dp.poison();
        cu::patchify({dimg.get(), dp.get(), n_img, side, side, ps}, nullptr);
        compare("patchify " + std::to_string(side), to_float(dp.download()), ref, 1e-6f, 4e-3f);
    }
    // ViT token assembly: 2 tiles × (8 prefix + 1024 patches) × 1280.
    {
        const int64_t tiles = 2, np = 1024, npre = 8, w = 1280;
        auto emb = random_vec(tiles * np * w, rng), pos = random_vec(np * w, rng),
             pre = random_vec(npre * w, rng);
        std::vector<float> ref(tiles * (npre + np) * w);
        for (int64_t t = 0; t < tiles; ++t)
            for (int64_t r = 0; r < npre + np; ++r)
                for (int64_t c = 0; c < w; ++c)
                    ref[(t * (npre + np) + r) * w + c] =
                        r < npre ? pre[r * w + c]
                                 : emb[(t * np + r - npre) * w + c] + pos[(r - npre) * w + c];
        DeviceBuffer<bf16> demb(to_bf16(emb)), dpos(to_bf16(pos)), dpre(to_bf16(pre));
        DeviceBuffer<float> dout(ref.size());
        dout.poison();
        cu::vit_tokens({demb.get(), dpos.get(), dpre.get(), dout.get(), tiles, np, npre, w}, nullptr);
        compare("vit_tokens", dout.download(), ref, 1e-6f, 1e-6f);
    }
    // Pixel shuffle: ViT output rows (fp32) with 8 prefix rows per tile skipped.
    for (int64_t C : {1280, 32}) {
        const int64_t tiles = 3, side = C == 1280 ? 32 : 4, npre = 8, stride = npre + side * side;
        auto in = random_vec(tiles * stride * C, rng);
        std::vector<float> ref(tiles * side * side * C);
        for (int64_t t = 0; t < tiles; ++t)
            cpu::pixel_shuffle(
                {in.data() + (t * stride + npre) * C, ref.data() + t * side * side * C, side, C, 2});
        DeviceBuffer<float> din(in);
        DeviceBuffer<bf16> dout(ref.size());
        dout.poison();
        cu::PixelShuffleParams p;
        p.in = din.get() + npre * C;
        p.in_dtype = cu::DType::kF32;
        p.out = dout.get();
        p.n_tiles = tiles;
        p.side = side;
        p.channels = C;
        p.factor = 2;
        p.in_tile_stride = stride;
        cu::pixel_shuffle(p, nullptr);
        compare("pixel_shuffle C=" + std::to_string(C), to_float(dout.download()), ref, 1e-6f, 4e-3f);
    }
}

TEST_CASE("embed_tokens: gather with image rows merged in order per sequence") {
    std::mt19937 rng(12);
    const int64_t vocab = 1000, dim = 5120, image_id = 999;
    // Three sequences: text only, two images' tokens in one (1300 image tokens, > one block pass), a few.
    const std::vector<int32_t> lens{40, 1500, 9};
    std::vector<int32_t> cu_h{0};
    for (int32_t l : lens) cu_h.push_back(cu_h.back() + l);
    const int64_t n_tok = cu_h.back();
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 2));
    std::vector<int32_t> ids(n_tok);
    for (auto& id : ids) id = tok(rng);
    for (int64_t i = 50; i < 50 + 1300; ++i) ids[i] = static_cast<int32_t>(image_id);
    ids[n_tok - 3] = ids[n_tok - 1] = static_cast<int32_t>(image_id);
    const std::vector<int32_t> offsets{0, 5, 1305};  // seq 1 starts at image row 5, seq 2 after it
    const int64_t n_img_rows = 1307;
    auto table = random_vec(vocab * dim, rng), img = random_vec(n_img_rows * dim, rng);
    std::vector<float> ref(n_tok * dim);
    for (size_t s = 0; s < lens.size(); ++s) {
        int32_t k = 0;
        for (int32_t t = cu_h[s]; t < cu_h[s + 1]; ++t) {
            const float* src =
                ids[t] == image_id ? img.data() + (offsets[s] + k++) * dim : table.data() + ids[t] * dim;
            std::copy_n(src, dim, ref.data() + t * dim);
        }
    }
    DeviceBuffer<int32_t> dids(ids), dcu(cu_h), doff(offsets), ws(n_tok);
    DeviceBuffer<bf16> dtable(to_bf16(table)), dimg(to_bf16(img));
    DeviceBuffer<float> dout(n_tok * dim);
    cu::EmbedParams p;
    p.ids = dids.get();
    p.table = dtable.get();
    p.image_rows = dimg.get();
    p.cu_seqlens = dcu.get();
    p.image_row_offset = doff.get();
    p.out = dout.get();
    p.out_dtype = cu::DType::kF32;
    p.n_tok = n_tok;
    p.n_seq = static_cast<int64_t>(lens.size());
    p.dim = dim;
    p.vocab = vocab;
    p.n_image_rows = n_img_rows;
    p.image_token_id = static_cast<int32_t>(image_id);
    REQUIRE(cu::embed_workspace_bytes(p) <= ws.size() * 4);
    dout.poison();
    cu::embed_tokens(p, ws.get(), nullptr);
    compare("embed_tokens with image merge", dout.download(), ref, 0.0f, 0.0f);
}

TEST_CASE(
    "embed_tokens: fed tokens (ids from the previous step's sampled tokens on the device) beside ids and "
    "image rows") {
    std::mt19937 rng(13);
    const int64_t vocab = 700, dim = 3072, image_id = 699;
    // Five one-token decode rows first (three of them fed, one fed from a repeated index), then a prompt with
    // an image in it: the fed rows must not shift the image rows of the prompt.
    const std::vector<int32_t> lens{1, 1, 1, 1, 1, 30};
    std::vector<int32_t> cu_h{0};
    for (int32_t l : lens) cu_h.push_back(cu_h.back() + l);
    const int64_t n_tok = cu_h.back(), n_fed = 5;
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 2));
    std::vector<int32_t> ids(n_tok), fed_ids(9);
    for (auto& id : ids) id = tok(rng);
    for (auto& id : fed_ids) id = tok(rng);
    for (int64_t i = 10; i < 20; ++i) ids[i] = static_cast<int32_t>(image_id);
    const std::vector<int32_t> fed_from{3, -1, 8, 3, -1};
    const std::vector<int32_t> offsets{0, 0, 0, 0, 0, 4};
    const int64_t n_img_rows = 14;
    auto table = random_vec(vocab * dim, rng), img = random_vec(n_img_rows * dim, rng);
    std::vector<float> ref(n_tok * dim);
    int32_t k = 0;
    for (int64_t t = 0; t < n_tok; ++t) {
        const int32_t id = t < n_fed && fed_from[t] >= 0 ? fed_ids[fed_from[t]] : ids[t];
        const float* src = id == image_id ? img.data() + (offsets[5] + k++) * dim : table.data() + id * dim;
        std::copy_n(src, dim, ref.data() + t * dim);
    }
    REQUIRE(k == 10);
    DeviceBuffer<int32_t> dids(ids), dcu(cu_h), doff(offsets), dfrom(fed_from), dfed(fed_ids), ws(n_tok);
    DeviceBuffer<bf16> dtable(to_bf16(table)), dimg(to_bf16(img));
    DeviceBuffer<bf16> dout(n_tok * dim);
    cu::EmbedParams p;
    p.ids = dids.get();
    p.table = dtable.get();
    p.image_rows = dimg.get();
    p.cu_seqlens = dcu.get();
    p.image_row_offset = doff.get();
    p.out = dout.get();
    p.out_dtype = cu::DType::kBF16;
    p.n_tok = n_tok;
    p.n_seq = static_cast<int64_t>(lens.size());
    p.dim = dim;
    p.vocab = vocab;
    p.n_image_rows = n_img_rows;
    p.image_token_id = static_cast<int32_t>(image_id);
    p.fed_from = dfrom.get();
    p.fed_ids = dfed.get();
    p.n_fed = n_fed;
    dout.poison();
    cu::embed_tokens(p, ws.get(), nullptr);
    // bf16 out of a bf16 table: exact.
    compare("embed_tokens with fed tokens", to_float(dout.download()), ref, 0.0f, 0.0f);
}

TEST_CASE("sample_tokens reproduces model::sample_token (greedy, temperature, top-k, top-p, masks)") {
    std::mt19937 rng(13);
    for (int64_t vocab : {int64_t{131075}, int64_t{1000}}) {
        const int64_t rows = 96, words = (vocab + 31) / 32;
        std::normal_distribution<float> nd(0.0f, 3.0f);
        std::vector<float> logits(rows * vocab);
        for (auto& v : logits) v = nd(rng);
        std::vector<uint32_t> allowed(rows * words, 0xffffffffu);
        std::vector<float> temp(rows), top_p(rows);
        std::vector<int32_t> top_k(rows);
        std::vector<uint64_t> seed(rows), step(rows);
        const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f, 0.3f};
        const int32_t ks[] = {0, 1, 5, 50, 1000, 0, 0};
        const float ps[] = {1.0f, 0.9f, 0.5f, 0.95f, 1.0f};
        for (int64_t r = 0; r < rows; ++r) {
            temp[r] = temps[r % 5];
            top_k[r] = ks[r % 7];
            top_p[r] = ps[(r / 5) % 5];
            seed[r] = rng() * 0x100000001ull + r;
            step[r] = rng() % 1000;
            float* l = logits.data() + r * vocab;
            if (r % 11 == 3) {  // masked: a sparse allowed set
                for (int64_t w = 0; w < words; ++w) allowed[r * words + w] = rng() & rng() & rng();
            }
            if (r % 13 == 4) {  // nothing allowed
                for (int64_t w = 0; w < words; ++w) allowed[r * words + w] = 0;
            }
            if (r % 9 == 5) {  // NaN / −inf / exact ties at the top
                l[3] = NAN;
                l[7] = -INFINITY;
                l[10] = l[20] = l[30] = 30.0f;
            }
            if (r % 17 ==
                6) {  // bf16-rounded logits: many exact ties, bins holding more than the binned pass takes
                for (int64_t i = 0; i < vocab; ++i) l[i] = round_bf16(l[i]);
            }
            if (r % 19 == 7) {  // 1,500 candidates tied at the top: one bin over the binned pass's 1,024
                for (int64_t i = 0; i < std::min<int64_t>(1500, vocab / 2); ++i) l[(i * 37) % vocab] = 12.5f;
            }
            if (r % 23 == 9) {  // every candidate equal (an empty range: the radix path)
                std::fill(l, l + vocab, -1.25f);
            }
        }
        DeviceBuffer<float> dl(logits), dt(temp), dp(top_p);
        DeviceBuffer<int32_t> dk(top_k), dtok(rows);
        DeviceBuffer<uint64_t> ds(seed), dst(step);
        DeviceBuffer<uint32_t> da(allowed);
        // Samples every row on the GPU under the masks at `dev_allowed` (`stride` words apart, 0: one shared
        // mask) and counts the rows that differ from the CPU sampler under the same masks (`host_allowed`).
        auto mismatches_vs_cpu = [&](const uint32_t* dev_allowed, const uint32_t* host_allowed,
                                     int64_t stride, bool radix_only) {
            cu::SamplingParams p;
            p.radix_only = radix_only;
            p.logits = dl.get();
            p.temperature = dt.get();
            p.top_k = dk.get();
            p.top_p = dp.get();
            p.seed = ds.get();
            p.step = dst.get();
            p.allowed = dev_allowed;
            p.allowed_stride = stride;
            p.tokens = dtok.get();
            p.rows = rows;
            p.vocab = vocab;
            dtok.poison();
            cu::sample_tokens(p, nullptr);
            const auto got = dtok.download();
            int mismatches = 0;
            for (int64_t r = 0; r < rows; ++r) {
                surf::model::SamplingParams sp;
                sp.temperature = temp[r];
                sp.top_k = top_k[r];
                sp.top_p = top_p[r];
                sp.seed = seed[r];
                const int32_t want = surf::model::sample_token(logits.data() + r * vocab, vocab, sp, step[r],
                                                               host_allowed + r * stride);
                if (got[r] != want) {
                    ++mismatches;
                    MESSAGE("sample mismatch vocab " << vocab << " row " << r << " T " << temp[r] << " k "
                                                     << top_k[r] << " p " << top_p[r] << " got " << got[r]
                                                     << " want " << want);
                }
            }
            return mismatches;
        };
        // Both ways of selecting (binned with the radix fallback, the default; radix only) on every row.
        for (bool radix_only : {false, true}) {
            const char* how = radix_only ? "radix" : "binned";
            for (int round = 0; round < 3; ++round) {
                for (auto& s : step) s += 1;
                dst.upload(step);
                const int mismatches = mismatches_vs_cpu(da.get(), allowed.data(), words, radix_only);
                MESSAGE("[" << std::string(mismatches ? "FAIL" : "ok") << "]   sample_tokens ("
                            << std::string(how) << ") vocab " << vocab << " round " << round << ": "
                            << rows - mismatches << "/" << rows << " rows equal to the CPU sampler");
                CHECK(mismatches == 0);
            }
            // allowed_stride 0: every row samples under one shared mask (row 3's sparse set).
            const int mismatches =
                mismatches_vs_cpu(da.get() + 3 * words, allowed.data() + 3 * words, 0, radix_only);
            MESSAGE("[" << std::string(mismatches ? "FAIL" : "ok") << "]   sample_tokens ("
                        << std::string(how) << ") vocab " << vocab << " shared mask (stride 0): "
                        << rows - mismatches << "/" << rows << " rows equal to the CPU sampler");
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("occupy_sms holds its SMs: a kernel launched meanwhile runs only on the others") {
    int sms = 0;
    SURF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    REQUIRE(sms > 8);
    const int free_sms = 8, probes = 16 * sms;
    int* started = nullptr;  // host-mapped flags the occupier blocks set
    SURF_CUDA_CHECK(
        cudaHostAlloc(reinterpret_cast<void**>(&started), sms * sizeof(int), cudaHostAllocMapped));
    std::fill(started, started + sms, 0);
    int* started_dev = nullptr;
    SURF_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&started_dev), started, 0));
    cudaStream_t hold, probe;
    SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&hold, cudaStreamNonBlocking));
    SURF_CUDA_CHECK(cudaStreamCreateWithFlags(&probe, cudaStreamNonBlocking));
    DeviceBuffer<int32_t> ids(static_cast<size_t>(probes));
    cu::SmOccupyParams op;
    op.blocks = sms - free_sms, op.nanoseconds = 200'000'000, op.started = started_dev;  // 200 ms
    cu::occupy_sms(op, hold);
    const auto t0 = std::chrono::steady_clock::now();
    while (!cu::all_started(started, op.blocks) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    }
    REQUIRE(cu::all_started(started, op.blocks));  // every holding block is resident
    cu::probe_sm_ids(ids.get(), probes, probe);
    SURF_CUDA_CHECK(cudaStreamSynchronize(probe));
    // The distinct SM ids the probe's blocks reported.
    auto probed_sms = [&] {
        std::vector<int32_t> v = ids.download();
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        return v;
    };
    const std::vector<int32_t> distinct = probed_sms();
    MESSAGE("probe blocks beside " << op.blocks << " held SMs ran on " << distinct.size() << " SMs");
    CHECK(distinct.size() <= static_cast<size_t>(free_sms));
    CHECK(!distinct.empty());
    SURF_CUDA_CHECK(cudaStreamSynchronize(hold));
    // Released: the same probe now spreads over more than the free SMs.
    cu::probe_sm_ids(ids.get(), probes, probe);
    SURF_CUDA_CHECK(cudaStreamSynchronize(probe));
    const std::vector<int32_t> all = probed_sms();
    MESSAGE("after the hold ends: " << all.size() << " SMs");
    CHECK(all.size() > static_cast<size_t>(free_sms));
    SURF_CUDA_CHECK(cudaStreamDestroy(hold));
    SURF_CUDA_CHECK(cudaStreamDestroy(probe));
    SURF_CUDA_CHECK(cudaFreeHost(started));
}
