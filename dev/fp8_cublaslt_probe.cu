// Which FP8 E4M3 scale modes cuBLASLt offers algorithms for on this GPU: for each scale mode of A and B
// (scalar, outer vector, 128-element vectors / 128x128 blocks), D type (bf16, fp32) and beta (0, 1), the
// heuristic's status and candidate count at one serving shape. Used to explain which FP8 path
// kernels/cuda/fp8.cu gets (docs/KERNELS.md); not part of the library.
//   nvcc -std=c++17 -O2 -arch=sm_90a dev/fp8_cublaslt_probe.cu -lcublasLt -o /tmp/fp8_probe && /tmp/fp8_probe
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
    cublasLtHandle_t h;
    cublasLtCreate(&h);
    std::printf("cuBLASLt version %zu, cudart %d\n", cublasLtGetVersion(), CUDART_VERSION);
    const int64_t m = 256, n = 5120, k = 5120;
    struct Mode {
        const char* name;
        cublasLtMatmulMatrixScale_t a, b;
    };
    const Mode modes[] = {
        {"scalar/scalar", CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F},
        {"outer/outer", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
         CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F},
        {"outer/scalar", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F},
        {"blk128x128/vec128", CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
         CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F},
        {"vec128/vec128", CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F},
    };
    for (const Mode& md : modes) {
        for (cudaDataType_t d : {CUDA_R_16BF, CUDA_R_32F}) {
            for (int fast : {0, 1}) {
                cublasLtMatmulDesc_t op;
                cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
                const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
                cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
                cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt));
                const int8_t f = static_cast<int8_t>(fast);
                cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof(f));
                const cublasStatus_t sa = cublasLtMatmulDescSetAttribute(
                    op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &md.a, sizeof(md.a));
                const cublasStatus_t sb = cublasLtMatmulDescSetAttribute(
                    op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &md.b, sizeof(md.b));
                cublasLtMatrixLayout_t a, b, dl;
                cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, k, n, k);
                cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, k, m, k);
                cublasLtMatrixLayoutCreate(&dl, d, n, m, n);
                cublasLtMatmulPreference_t pref;
                cublasLtMatmulPreferenceCreate(&pref);
                const uint64_t ws = 32ull << 20;
                cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                     sizeof(ws));
                cublasLtMatmulHeuristicResult_t r[8];
                int found = 0;
                const cublasStatus_t s =
                    cublasLtMatmulAlgoGetHeuristic(h, op, a, b, dl, dl, pref, 8, r, &found);
                std::printf("%-18s D %-4s fast_accum %d: set A %d B %d, heuristic status %d, %d algorithms\n",
                            md.name, d == CUDA_R_16BF ? "bf16" : "fp32", fast, sa, sb, s, found);
                cublasLtMatmulPreferenceDestroy(pref);
                cublasLtMatrixLayoutDestroy(a), cublasLtMatrixLayoutDestroy(b),
                    cublasLtMatrixLayoutDestroy(dl);
                cublasLtMatmulDescDestroy(op);
            }
        }
    }
    cublasLtDestroy(h);
    return 0;
}
