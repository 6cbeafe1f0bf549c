// GEMM benchmark at the engine's shapes: cuBLASLt as the engine runs it (autotuned: the heuristic's
// candidates timed, the fastest kept; ReLU² as its own pass after it) against our Hopper kernel gemm_wgmma at
// both tile widths (ReLU² in its epilogue). Shapes: a mixed step's language-model projections (1,024 rows), a
// 3-tile screenshot's ViT projections (3,096 rows) and the projector (768 rows), each with the epilogue the
// engine uses (bias, GELU, fp32 residual accumulate). Weights rotate over copies together larger than the L2,
// as 32 or 62 layers' weights do. Median of --reps launches each. A second table runs the language model's
// and vision tower's shapes in FP8 E4M3 (per-row activation and per-channel weight scales, as `--quantize
// fp8`), fast accumulation: the activation quantization pass and cuBLASLt with its scratch and epilogue pass,
// and CUTLASS with the scales, bias and GELU in its epilogue (each config), against the bf16 GEMM. A third
// table runs the language model's four Mamba / MLP shapes at decode rows (8 to 64) in bf16 and FP8, in GB/s
// of weights streamed. Usage: bench_gemm [--reps 20] [--decode]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#ifdef SURF_HAVE_CUDA
#include "apps/bench/bench_ceilings.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8_cutlass.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/random_fill.h"

namespace cu = surf::kernels::cuda;

namespace {

struct Case {
    const char* name;
    int64_t m, n, k;
    bool residual;  // fp32 y, beta = 1 (adds into the residual stream)
    bool bias;
    cu::GemmActivation act;
};

void* dalloc(size_t bytes) {
    void* p = nullptr;
    SURF_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
    return p;
}

void fill(cu::bf16* p, int64_t n, float scale, uint64_t seed) {
    cu::UniformFillParams f;
    f.x = p, f.n = n, f.lo = -scale, f.hi = scale, f.seed = seed;
    cu::uniform_fill(f, nullptr);
}

// Median µs of fn(i) over `reps` launches, i counting up so that launches rotate over the weight copies.
double median_us(const std::function<void(int)>& fn, int reps) {
    int i = 0;
    return surf::bench::median_ms([&] { fn(i++); }, reps) * 1e3;
}

// µs and TFLOP/s of a GEMM of `flops` floating-point operations: "12.3 (456)".
std::string time_cell(double us, double flops) {
    char s[64];
    std::snprintf(s, sizeof s, "%.1f (%.0f)", us, flops / (us * 1e-6) / 1e12);
    return std::string(s);
}

// The gemm_wgmma cells (tile 256 pairs, 256 single, 128 pairs, 128 single; "—" where it does not take the
// shape) and, in *ratio, the best of them over cuBLASLt's `blas` µs. params(i) is the GEMM of launch i.
template <typename ParamsOf>
std::string wgmma_cells(const ParamsOf& params, double flops, double blas, int reps, std::string* ratio) {
    std::string ours_cells;
    *ratio = "—";
    if (cu::gemm_wgmma_supported(params(0))) {
        double best = 0;
        for (int v = 0; v < 4; ++v) {
            const int tile_n = v < 2 ? 256 : 128;
            const bool pairs = v % 2 == 0;
            const double us =
                median_us([&](int i) { cu::gemm_wgmma(params(i), tile_n, nullptr, pairs); }, reps);
            best = v == 0 ? us : std::min(best, us);
            ours_cells += " | " + time_cell(us, flops);
        }
        char r[32];
        std::snprintf(r, sizeof r, "%.3f", best / blas);
        *ratio = r;
    } else {
        for (int v = 0; v < 4; ++v) ours_cells += " | —";
    }
    return ours_cells;
}

// One table row: the case's GEMM through cuBLASLt (autotuned) and through gemm_wgmma.
void bench_case(const Case& c, int reps) {
    const int64_t w_elems = c.n * c.k;
    const int n_w = static_cast<int>(std::clamp<int64_t>((int64_t{160} << 20) / (w_elems * 2) + 1, 2, 32));
    std::vector<cu::bf16*> w(n_w);
    for (int i = 0; i < n_w; ++i) {
        w[i] = static_cast<cu::bf16*>(dalloc(w_elems * 2));
        fill(w[i], w_elems, 0.05f, 100 + i);
    }
    auto* x = static_cast<cu::bf16*>(dalloc(c.m * c.k * 2));
    fill(x, c.m * c.k, 1.0f, 7);
    const size_t y_elem = c.residual ? 4 : 2;  // fp32 residual or bf16 (the bias has y's dtype)
    void* y = dalloc(c.m * c.n * y_elem);
    SURF_CUDA_CHECK(cudaMemset(y, 0, c.m * c.n * y_elem));
    void* bias = dalloc(c.n * y_elem);
    SURF_CUDA_CHECK(cudaMemset(bias, 0, c.n * y_elem));
    auto params = [&](int i) {
        cu::GemmParams p{
            x,   w[i % n_w], c.bias ? bias : nullptr, y, c.residual ? cu::DType::kF32 : cu::DType::kBF16, c.m,
            c.n, c.k};
        p.beta = c.residual ? 1.0f : 0.0f;
        p.activation = c.act;
        return p;
    };
    cu::GemmContext ctx;
    ctx.set_autotune(true);
    ctx.set_wgmma_gemm(cu::GemmContext::WgmmaGemm::kNever);
    for (int i = 0; i < 3; ++i) cu::gemm(ctx, params(i), nullptr);  // tuned on the third use
    const double flops = 2.0 * c.m * c.n * c.k;
    const double blas = median_us([&](int i) { cu::gemm(ctx, params(i), nullptr); }, reps);
    std::string ratio;
    const std::string ours_cells = wgmma_cells(params, flops, blas, reps, &ratio);
    std::printf("| %s | %lld × %lld × %lld | %s%s | %s |\n", c.name, static_cast<long long>(c.m),
                static_cast<long long>(c.n), static_cast<long long>(c.k), time_cell(blas, flops).c_str(),
                ours_cells.c_str(), ratio.c_str());
    std::fflush(stdout);
    for (auto* p : w) SURF_CUDA_CHECK(cudaFree(p));
    SURF_CUDA_CHECK(cudaFree(x));
    SURF_CUDA_CHECK(cudaFree(y));
    SURF_CUDA_CHECK(cudaFree(bias));
}

// A case's FP8 operands: E4M3 weights in copies together larger than the L2 (launch i takes copy i mod n),
// the activations quantized per row, y, a zero bias; the bf16 weights they came from stay for the bf16 GEMM.
struct Fp8Operands {
    const Case& c;
    std::vector<uint8_t*> w;
    std::vector<float*> ws;
    cu::bf16 *wb = nullptr, *x = nullptr;
    uint8_t* xq = nullptr;
    float* xs = nullptr;
    void *y = nullptr, *bias = nullptr;
    cu::Fp8QuantParams qx;

    explicit Fp8Operands(const Case& cs) : c(cs) {
        const int64_t w_elems = c.n * c.k;
        const int n_w = static_cast<int>(std::clamp<int64_t>((int64_t{160} << 20) / w_elems + 1, 2, 32));
        wb = static_cast<cu::bf16*>(dalloc(w_elems * 2));
        for (int i = 0; i < n_w; ++i) {
            fill(wb, w_elems, 0.05f, 100 + i);
            w.push_back(static_cast<uint8_t*>(dalloc(w_elems)));
            ws.push_back(static_cast<float*>(dalloc(c.n * 4)));
            cu::Fp8QuantParams q;
            q.x = wb, q.q = w.back(), q.scale = ws.back(), q.rows = c.n, q.cols = c.k;
            cu::quantize_e4m3(q, nullptr);
        }
        x = static_cast<cu::bf16*>(dalloc(c.m * c.k * 2));
        fill(x, c.m * c.k, 1.0f, 7);
        xq = static_cast<uint8_t*>(dalloc(c.m * c.k));
        xs = static_cast<float*>(dalloc(c.m * 4));
        qx.x = x, qx.q = xq, qx.scale = xs, qx.rows = c.m, qx.cols = c.k;
        cu::quantize_e4m3(qx, nullptr);
        const size_t y_elem = c.residual ? 4 : 2;
        y = dalloc(c.m * c.n * y_elem);
        SURF_CUDA_CHECK(cudaMemset(y, 0, c.m * c.n * y_elem));
        bias = dalloc(c.n * y_elem);
        SURF_CUDA_CHECK(cudaMemset(bias, 0, c.n * y_elem));
    }
    ~Fp8Operands() {
        for (auto* p : w) cudaFree(p);
        for (auto* p : ws) cudaFree(p);
        for (void* p : {static_cast<void*>(wb), static_cast<void*>(x), static_cast<void*>(xq),
                        static_cast<void*>(xs), y, bias})
            cudaFree(p);
    }
    cu::Fp8GemmParams params(int i) const {
        cu::Fp8GemmParams p;
        p.x = xq, p.x_scale = xs, p.w = w[i % w.size()], p.w_scale = ws[i % w.size()], p.y = y;
        p.y_dtype = c.residual ? cu::DType::kF32 : cu::DType::kBF16, p.m = c.m, p.n = c.n, p.k = c.k;
        p.beta = c.residual ? 1.0f : 0.0f;
        p.activation = c.act;
        p.bias = c.bias ? bias : nullptr;
        return p;
    }
    // Median µs of fp8_gemm on a fresh context with autotuning and fast accumulation, as the engine runs it,
    // with CUTLASS as given.
    double fp8_us(cu::Fp8GemmContext::Cutlass cutlass, int config, int reps) const {
        cu::Fp8GemmContext ctx8;
        ctx8.set_autotune(true);
        ctx8.set_fast_accum(true);
        ctx8.set_cutlass(cutlass, config);
        for (int i = 0; i < 3; ++i) cu::fp8_gemm(ctx8, params(i), nullptr);  // tuned on the third use
        return median_us([&](int i) { cu::fp8_gemm(ctx8, params(i), nullptr); }, reps);
    }
};

// The bf16 GEMM of a case (cuBLASLt, tuned) on o's x and y with two bf16 weight copies, median µs.
double bf16_us(const Case& c, const Fp8Operands& o, int reps) {
    const int64_t w_elems = c.n * c.k;
    auto* wbf = static_cast<cu::bf16*>(dalloc(w_elems * 2 * 2));
    fill(wbf, w_elems * 2, 0.05f, 3);
    cu::GemmContext ctx;
    ctx.set_autotune(true);
    auto bf16_params = [&](int i) {
        cu::GemmParams p{o.x,
                         wbf + (i % 2) * w_elems,
                         nullptr,
                         o.y,
                         c.residual ? cu::DType::kF32 : cu::DType::kBF16,
                         c.m,
                         c.n,
                         c.k};
        p.beta = c.residual ? 1.0f : 0.0f;
        p.activation = c.act;
        return p;
    };
    for (int i = 0; i < 3; ++i) cu::gemm(ctx, bf16_params(i), nullptr);
    const double us = median_us([&](int i) { cu::gemm(ctx, bf16_params(i), nullptr); }, reps);
    SURF_CUDA_CHECK(cudaFree(wbf));
    return us;
}

// One FP8 table row: the case's GEMM in bf16 (cuBLASLt, tuned) against its FP8 forms.
void bench_fp8_case(const Case& c, int reps) {
    const Fp8Operands o(c);
    const cu::Fp8QuantParams& qx = o.qx;
    const double quant = median_us([&](int) { cu::quantize_e4m3(qx, nullptr); }, reps);
    const double flops = 2.0 * c.m * c.n * c.k;
    // cuBLASLt (tuned) with its epilogue pass, then each CUTLASS config where it takes the shape (0: not);
    // fast accumulation in both, as the engine runs them.
    using Cut = cu::Fp8GemmContext::Cutlass;
    const double lt_us = o.fp8_us(Cut::kNever, 0, reps);
    const bool cutlass = cu::fp8_cutlass::supports(o.params(0), c.n);
    double best_us = lt_us;
    std::string cutlass_cells;
    for (int config = 0; config < cu::fp8_cutlass::kConfigs; ++config) {
        const double us = cutlass ? o.fp8_us(Cut::kAlways, config, reps) : 0.0;
        cutlass_cells += " " + (cutlass ? time_cell(us, flops) : std::string("—")) + " |";
        if (cutlass) best_us = std::min(best_us, us);
    }
    const double b_us = bf16_us(c, o, reps);
    std::printf("| %s | %lld × %lld × %lld | %s | %.1f | %s |%s %.3f | %.3f |\n", c.name,
                static_cast<long long>(c.m), static_cast<long long>(c.n), static_cast<long long>(c.k),
                time_cell(b_us, flops).c_str(), quant, time_cell(lt_us, flops).c_str(), cutlass_cells.c_str(),
                (lt_us + quant) / b_us, (best_us + quant) / b_us);
    std::fflush(stdout);
}

// One row of the decode table: a language-model GEMM at decode rows, weight bytes streamed per µs (GB/s), in
// bf16, in FP8 on cuBLASLt + epilogue pass alone, on each CUTLASS config that takes it, and as the engine
// runs it (every way timed, the fastest kept).
void bench_fp8_decode_case(const Case& c, int reps) {
    const Fp8Operands o(c);
    const double bytes = static_cast<double>(c.n) * c.k;
    using Cut = cu::Fp8GemmContext::Cutlass;
    auto cell = [&](double us, double b) {
        char s[48];
        std::snprintf(s, sizeof s, "%.1f (%.0f)", us, b / (us * 1e-6) / 1e9);
        return std::string(s);
    };
    const double b_us = bf16_us(c, o, reps), lt = o.fp8_us(Cut::kNever, 0, reps);
    std::string configs;
    const bool cutlass = cu::fp8_cutlass::supports(o.params(0), c.n);
    for (int config = 0; config < cu::fp8_cutlass::kConfigs; ++config)
        configs +=
            " " + (cutlass ? cell(o.fp8_us(Cut::kAlways, config, reps), bytes) : std::string("—")) + " |";
    const double tuned = o.fp8_us(Cut::kTuned, 0, reps);
    std::printf("| %s | %lld × %lld × %lld | %s | %s |%s %s | %.3f |\n", c.name, static_cast<long long>(c.m),
                static_cast<long long>(c.n), static_cast<long long>(c.k), cell(b_us, 2 * bytes).c_str(),
                cell(lt, bytes).c_str(), configs.c_str(), cell(tuned, bytes).c_str(), tuned / b_us);
    std::fflush(stdout);
}

// --reps N (default 20), --decode (the decode table only); false after printing the usage or the range error.
bool parse(int argc, char** argv, int& reps, bool& decode_only) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--decode") == 0) {
            decode_only = true;
        } else {
            std::fprintf(stderr, "usage: bench_gemm [--reps 20] [--decode]\n");
            return false;
        }
    }
    if (reps < 1) {
        std::fprintf(stderr, "bench_gemm: --reps %d is out of range\n", reps);
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 20;
    bool decode_only = false;
    if (!parse(argc, argv, reps, decode_only)) return 2;
    cudaDeviceProp prop{};
    SURF_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const double ceiling = surf::bench::gemm_ceiling() / 1e12;
    std::printf(
        "# bench_gemm on %s (%d SMs): cuBLASLt bf16 GEMM 8192^3 %.0f TFLOP/s; median of %d launches\n\n",
        prop.name, prop.multiProcessorCount, ceiling, reps);
    using A = cu::GemmActivation;
    const Case cases[] = {
        {"mamba.in_proj", 1024, 22656, 5120, false, false, A::kNone},
        {"mamba.out_proj (+residual)", 1024, 5120, 10240, true, false, A::kNone},
        {"mlp.up + ReLU²", 1024, 20480, 5120, false, false, A::kReluSquared},
        {"mlp.down (+residual)", 1024, 5120, 20480, true, false, A::kNone},
        {"attn.qkv", 1024, 7168, 5120, false, false, A::kNone},
        {"attn.o_proj (+residual)", 1024, 5120, 5120, true, false, A::kNone},
        {"vit.qkv (+bias)", 3096, 3840, 1280, false, true, A::kNone},
        {"vit.proj (+bias +residual)", 3096, 1280, 1280, true, true, A::kNone},
        {"vit.fc1 (+bias, GELU)", 3096, 5120, 1280, false, true, A::kGeluTanh},
        {"vit.fc2 (+bias +residual)", 3096, 1280, 5120, true, true, A::kNone},
        {"projector.fc1 + ReLU²", 768, 20480, 5120, false, false, A::kReluSquared},
        {"projector.fc2", 768, 5120, 20480, false, false, A::kNone},
    };
    // The FP8 tables' CUTLASS columns: a header cell and a rule cell per config.
    std::string heads, rule;
    for (int config = 0; config < cu::fp8_cutlass::kConfigs; ++config)
        heads += std::string(" CUTLASS ") + cu::fp8_cutlass::config_name(config) + " |", rule += "---|";
    if (!decode_only) {
        std::printf("gemm_wgmma resident blocks: tile 256 %d (pairs) / %d (single), tile 128 %d / %d\n\n",
                    cu::gemm_wgmma_resident_blocks(256, true), cu::gemm_wgmma_resident_blocks(256, false),
                    cu::gemm_wgmma_resident_blocks(128, true), cu::gemm_wgmma_resident_blocks(128, false));
        std::printf(
            "| GEMM | m × n × k | cuBLASLt µs (TFLOP/s) | gemm_wgmma tile 256, pairs | tile 256, single | "
            "tile "
            "128, pairs | tile 128, single | best "
            "ours / cuBLASLt |\n|---|---|---|---|---|---|---|---|\n");
        for (const Case& c : cases) bench_case(c, reps);
        std::printf(
            "\nFP8 E4M3 (per-row activation, per-channel weight scales): µs (TFLOP/s); CUTLASS configs as "
            "fp8_cutlass.h's (— where it does not take the shape)\n\n| GEMM | m × n × k | bf16 cuBLASLt | "
            "quantize x µs | FP8 cuBLASLt + epilogue pass |%s (cuBLASLt FP8 + quantize) / bf16 | (best FP8 + "
            "quantize) / bf16 |\n|---|---|---|---|---|%s---|---|\n",
            heads.c_str(), rule.c_str());
        for (const Case& c : cases) bench_fp8_case(c, reps);
    }
    std::printf(
        "\nFP8 at decode rows (the language model's shapes, copy bandwidth %.0f GB/s): µs (GB/s of weights); "
        "the engine's FP8 way is the fastest of the others\n\n| GEMM | m × n × k | bf16 cuBLASLt | FP8 "
        "cuBLASLt + pass |%s FP8 as the engine runs it | FP8 / bf16 |\n|---|---|---|---|%s---|---|\n",
        surf::bench::copy_bandwidth() / 1e9, heads.c_str(), rule.c_str());
    for (int64_t m : {8, 16, 32, 50, 64}) {
        for (int i = 0; i < 4; ++i) {
            Case d = cases[i];
            d.m = m;
            bench_fp8_decode_case(d, reps);
        }
    }
    return 0;
}

#else
int main() {
    std::fprintf(stderr, "bench_gemm: built without CUDA\n");
    return 2;
}
#endif
