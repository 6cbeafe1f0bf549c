// Vision and embedding glue: CPE bilinear resize, im2patch, ViT token assembly, pixel shuffle v2 and the
// token-embedding gather with image-row merge. All memory-bound copies with a little index arithmetic.
#include "kernels/cuda/common.cuh"

namespace surf::kernels::cuda {

namespace {

using detail::to_float;

// PyTorch align_corners=False source coordinate, clamped like kernels/cpu bilinear_resize.
__device__ __forceinline__ void bilinear_coord(int64_t dst, int64_t in, int64_t out, int64_t& i0, int64_t& i1,
                                               float& w1) {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    float src = (static_cast<float>(dst) + 0.5f) * scale - 0.5f;
    if (src < 0.0f) src = 0.0f;
    i0 = static_cast<int64_t>(src);
    if (i0 > in - 1) i0 = in - 1;
    i1 = i0 + (i0 < in - 1 ? 1 : 0);
    w1 = src - static_cast<float>(i0);
}

__global__ void bilinear_kernel(BilinearParams p) {
    detail::pdl_prologue();
    const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (idx >= p.out_h * p.out_w * p.channels) return;
    const int64_t c = idx % p.channels, pix = idx / p.channels, ox = pix % p.out_w, oy = pix / p.out_w;
    int64_t y0, y1, x0, x1;
    float wy, wx;
    bilinear_coord(oy, p.in_h, p.out_h, y0, y1, wy);
    bilinear_coord(ox, p.in_w, p.out_w, x0, x1, wx);
    auto at = [&](int64_t y, int64_t x) { return __bfloat162float(p.in[(y * p.in_w + x) * p.channels + c]); };
    const float top = (1.0f - wx) * at(y0, x0) + wx * at(y0, x1);
    const float bottom = (1.0f - wx) * at(y1, x0) + wx * at(y1, x1);
    p.out[idx] = __float2bfloat16_rn((1.0f - wy) * top + wy * bottom);
}

__global__ void patchify_kernel(PatchifyParams p) {
    detail::pdl_prologue();
    const int64_t ps = p.patch, gw = p.width / ps, gh = p.height / ps, feat = 3 * ps * ps;
    const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (idx >= p.n_img * gh * gw * feat) return;
    const int64_t f = idx % feat, patch = (idx / feat) % (gh * gw), img = idx / (feat * gh * gw);
    const int64_t c = f / (ps * ps), yy = (f / ps) % ps, xx = f % ps;
    const int64_t py = patch / gw, px = patch % gw;
    const float v = p.images[((img * 3 + c) * p.height + py * ps + yy) * p.width + px * ps + xx];
    p.patches[idx] = __float2bfloat16_rn(v);
}

__global__ void vit_tokens_kernel(VitTokensParams p) {
    detail::pdl_prologue();
    const int64_t per_tile = p.n_prefix + p.n_patches;
    const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (idx >= p.n_tiles * per_tile * p.width) return;
    const int64_t c = idx % p.width, row = (idx / p.width) % per_tile, tile = idx / (p.width * per_tile);
    float v;
    if (row < p.n_prefix) {
        v = __bfloat162float(p.prefix[row * p.width + c]);
    } else {
        const int64_t patch = row - p.n_prefix;
        v = __bfloat162float(p.patch_emb[(tile * p.n_patches + patch) * p.width + c]) +
            __bfloat162float(p.pos[patch * p.width + c]);
    }
    p.out[idx] = v;
}

template <typename TI>
__global__ void pixel_shuffle_kernel(PixelShuffleParams p, int64_t tile_stride) {
    detail::pdl_prologue();
    const int64_t s = p.factor, side = p.side, C = p.channels, out_side = side / s;
    const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (idx >= p.n_tiles * side * side * C) return;
    // idx enumerates the output: [tile][token][s²·C].
    const int64_t ch = idx % (s * s * C), tok = (idx / (s * s * C)) % (out_side * out_side);
    const int64_t tile = idx / (s * s * C * out_side * out_side);
    const int64_t di = ch / (s * C), dj = (ch / C) % s, c = ch % C;
    const int64_t i = (tok / out_side) * s + di, j = (tok % out_side) * s + dj;
    const TI* in = static_cast<const TI*>(p.in) + tile * tile_stride * C;
    p.out[idx] = __float2bfloat16_rn(to_float(in[(i * side + j) * C + c]));
}

// Token t's id: ids[t], or the fed token it names (EmbedParams::fed_from).
__device__ __forceinline__ int32_t token_id(const EmbedParams& p, int64_t t) {
    if (t < p.n_fed) {
        const int32_t from = p.fed_from[t];
        if (from >= 0) return p.fed_ids[from];
    }
    return p.ids[t];
}

// One block per sequence: image row index of every token (−1 for text), by a block-wide running count.
__global__ void embed_rows_kernel(EmbedParams p, int32_t* rows) {
    detail::pdl_prologue();
    __shared__ int32_t warp_counts[32];
    __shared__ int32_t carry;
    const int s = blockIdx.x;
    const int64_t start = p.cu_seqlens[s], end = p.cu_seqlens[s + 1];
    const int32_t offset = p.image_row_offset ? p.image_row_offset[s] : 0;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int64_t base = start; base < end; base += blockDim.x) {
        const int64_t t = base + threadIdx.x;
        const bool is_img = t < end && p.image_row_offset != nullptr && token_id(p, t) == p.image_token_id;
        const unsigned ballot = __ballot_sync(0xffffffffu, is_img);
        if (lane == 0) warp_counts[warp] = __popc(ballot);
        __syncthreads();
        int32_t before = carry;
        for (int w = 0; w < warp; ++w) before += warp_counts[w];
        before += __popc(ballot & ((1u << lane) - 1u));
        if (t < end) rows[t] = is_img ? offset + before : -1;
        __syncthreads();
        if (threadIdx.x == 0) {
            int32_t total = 0;
            for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += warp_counts[w];
            carry += total;
        }
        __syncthreads();
    }
}

// Grid (token, column blocks). Out-of-range ids / image rows are written as NaN so they cannot pass
// unnoticed (ids are validated by the tokenizer/scheduler; this is the last line).
template <typename TO>
__global__ void embed_gather_kernel(EmbedParams p, const int32_t* rows) {
    detail::pdl_prologue();
    const int64_t t = blockIdx.x;
    const int32_t id = token_id(p, t), row = rows[t];
    const bf16* src = nullptr;
    if (row >= 0)
        src = row < p.n_image_rows ? p.image_rows + static_cast<int64_t>(row) * p.dim : nullptr;
    else
        src = (id >= 0 && id < p.vocab) ? p.table + static_cast<int64_t>(id) * p.dim : nullptr;
    TO* out = static_cast<TO*>(p.out) + t * p.dim;
    for (int64_t c = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < p.dim;
         c += gridDim.y * static_cast<int64_t>(blockDim.x)) {
        out[c] = detail::from_float<TO>(src ? __bfloat162float(src[c]) : __int_as_float(0x7fc00000));
    }
}

}  // namespace

void bilinear_resize(const BilinearParams& p, cudaStream_t stream) {
    SURF_CHECK(p.in && p.out && p.in_h > 0 && p.in_w > 0 && p.out_h > 0 && p.out_w > 0,
               "bilinear_resize: bad params");
    const int64_t n = p.out_h * p.out_w * p.channels;
    if (n == 0) return;
    detail::launch_kernel(bilinear_kernel, detail::grid_1d(n, 256), 256, 0, stream, p);
    SURF_CUDA_CHECK_LAUNCH();
}

void patchify(const PatchifyParams& p, cudaStream_t stream) {
    SURF_CHECK(p.images && p.patches && p.patch > 0 && p.height % p.patch == 0 && p.width % p.patch == 0,
               "patchify: image ", p.height, "x", p.width, " not a multiple of patch ", p.patch);
    const int64_t n = p.n_img * p.height * p.width * 3;
    if (n == 0) return;
    detail::launch_kernel(patchify_kernel, detail::grid_1d(n, 256), 256, 0, stream, p);
    SURF_CUDA_CHECK_LAUNCH();
}

void vit_tokens(const VitTokensParams& p, cudaStream_t stream) {
    SURF_CHECK(p.patch_emb && p.pos && p.out && (p.n_prefix == 0 || p.prefix), "vit_tokens: null pointer");
    const int64_t n = p.n_tiles * (p.n_prefix + p.n_patches) * p.width;
    if (n == 0) return;
    detail::launch_kernel(vit_tokens_kernel, detail::grid_1d(n, 256), 256, 0, stream, p);
    SURF_CUDA_CHECK_LAUNCH();
}

void pixel_shuffle(const PixelShuffleParams& p, cudaStream_t stream) {
    SURF_CHECK(p.in && p.out && p.factor > 0 && p.side % p.factor == 0, "pixel_shuffle: side ", p.side,
               " factor ", p.factor);
    const int64_t tile_stride = p.in_tile_stride ? p.in_tile_stride : p.side * p.side;
    const int64_t n = p.n_tiles * p.side * p.side * p.channels;
    if (n == 0) return;
    if (p.in_dtype == DType::kF32)
        detail::launch_kernel(pixel_shuffle_kernel<float>, detail::grid_1d(n, 256), 256, 0, stream, p,
                              tile_stride);
    else
        detail::launch_kernel(pixel_shuffle_kernel<bf16>, detail::grid_1d(n, 256), 256, 0, stream, p,
                              tile_stride);
    SURF_CUDA_CHECK_LAUNCH();
}

size_t embed_workspace_bytes(const EmbedParams& p) {
    return static_cast<size_t>(p.n_tok) * 4;
}

void embed_tokens(const EmbedParams& p, void* workspace, cudaStream_t stream) {
    SURF_CHECK(p.ids && p.table && p.cu_seqlens && p.out && workspace, "embed_tokens: null pointer");
    SURF_CHECK(p.image_row_offset == nullptr || p.image_rows != nullptr,
               "embed_tokens: image offsets without rows");
    SURF_CHECK(p.n_fed == 0 || (p.fed_from && p.fed_ids && p.n_fed <= p.n_tok),
               "embed_tokens: fed tokens without their indices or ids, or more than n_tok");
    if (p.n_tok == 0) return;
    auto* rows = static_cast<int32_t*>(workspace);
    detail::launch_kernel(embed_rows_kernel, static_cast<unsigned>(p.n_seq), 256, 0, stream, p, rows);
    SURF_CUDA_CHECK_LAUNCH();
    const dim3 grid(static_cast<unsigned>(p.n_tok), std::max(1u, detail::grid_1d(p.dim, 256 * 4)));
    if (p.out_dtype == DType::kF32)
        detail::launch_kernel(embed_gather_kernel<float>, grid, 256, 0, stream, p, rows);
    else
        detail::launch_kernel(embed_gather_kernel<bf16>, grid, 256, 0, stream, p, rows);
    SURF_CUDA_CHECK_LAUNCH();
}

}  // namespace surf::kernels::cuda
