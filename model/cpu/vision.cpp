#include "model/cpu/vision.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/error.h"
#include "kernels/cpu/cpu_ops.h"

namespace surf::model::cpu {

namespace k = surf::kernels::cpu;

Tensor tile_position_embedding(const ModelConfig& cfg, const VisionWeights& w) {
    // Stored grid [G·G, width] → channel-first [width, G, G] → bilinear (align_corners=False) to the
    // tile's square patch grid (spec §4.3: max_dim = max(h, w); tiles are square so no window step).
    const int64_t G = w.pos_grid, width = cfg.vision.hidden_size, side = cfg.image.patches_per_side();
    std::vector<float> grid(static_cast<size_t>(width * G * G)),
        resized(static_cast<size_t>(width * side * side));
    for (int64_t i = 0; i < G * G; ++i)
        for (int64_t c = 0; c < width; ++c) grid[c * G * G + i] = w.pos_embed.data[i * width + c];
    k::bilinear_resize({grid.data(), resized.data(), width, G, G, side, side});
    Tensor out({side * side, width});
    for (int64_t i = 0; i < side * side; ++i)
        for (int64_t c = 0; c < width; ++c) out.data[i * width + c] = resized[c * side * side + i];
    return out;
}

namespace {

// Activations of one ViT block, allocated once per vit_forward and reused by every block of every tile.
struct VitWorkspace {
    std::vector<float> h, qkv, attn, out,
        mlp;  // [n_tok, width], [n_tok, 3·width], [n_tok, width] ×2, [n_tok, inter]
    VitWorkspace(int64_t n_tok, int64_t width, int64_t inter)
        : h(static_cast<size_t>(n_tok * width)),
          qkv(static_cast<size_t>(n_tok * 3 * width)),
          attn(h.size()),
          out(h.size()),
          mlp(static_cast<size_t>(n_tok * inter)) {}
};

// x [n_tok, width] ← x + proj(Attn(LN1(x))); x ← x + fc2(GELU(fc1(LN2(x))))
void vit_block(const VisionConfig& cfg, const VitBlockWeights& b, std::vector<float>& x, int64_t n_tok,
               VitWorkspace& ws) {
    const int64_t width = cfg.hidden_size, heads = cfg.n_heads, hd = width / heads,
                  inter = cfg.intermediate_size;
    k::layernorm({x.data(), b.norm1_w.ptr(), b.norm1_b.ptr(), ws.h.data(), n_tok, width, cfg.norm_eps});
    k::linear({ws.h.data(), b.qkv_w.ptr(), b.qkv_b.ptr(), ws.qkv.data(), n_tok, 3 * width,
               width});  // [n_tok, q|k|v]
    k::AttentionParams p;
    p.q = ws.qkv.data(), p.k = ws.qkv.data() + width, p.v = ws.qkv.data() + 2 * width, p.out = ws.attn.data();
    p.T = n_tok, p.L = n_tok, p.n_heads = heads, p.n_kv_heads = heads, p.head_dim = hd;
    p.q_stride = 3 * width, p.kv_stride = 3 * width, p.causal = false;
    k::attention(p);
    k::linear({ws.attn.data(), b.proj_w.ptr(), b.proj_b.ptr(), ws.out.data(), n_tok, width, width});
    for (size_t i = 0; i < x.size(); ++i) x[i] += ws.out[i];

    k::layernorm({x.data(), b.norm2_w.ptr(), b.norm2_b.ptr(), ws.h.data(), n_tok, width, cfg.norm_eps});
    k::linear({ws.h.data(), b.fc1_w.ptr(), b.fc1_b.ptr(), ws.mlp.data(), n_tok, inter, width});
    k::gelu_erf(ws.mlp.data(), n_tok * inter);
    k::linear({ws.mlp.data(), b.fc2_w.ptr(), b.fc2_b.ptr(), ws.out.data(), n_tok, width, inter});
    for (size_t i = 0; i < x.size(); ++i) x[i] += ws.out[i];
}

}  // namespace

Tensor vit_forward(const ModelConfig& cfg, const VisionWeights& w, const Tensor& tile_pos,
                   const Tensor& pixel_values, Dumper* dumper) {
    const int64_t S = cfg.image.tile_size, p = cfg.image.patch_size, side = S / p;
    const int64_t width = cfg.vision.hidden_size, n_prefix = w.prefix.dim(0), n_patch = side * side;
    const int64_t n_tok = n_prefix + n_patch, patch_in = 3 * p * p;
    if (pixel_values.shape.size() != 4 || pixel_values.dim(1) != 3 || pixel_values.dim(2) != S ||
        pixel_values.dim(3) != S) {
        throw Error(ErrorKind::kInvalidArgument, "vision: pixel_values must be [n_tiles, 3, " +
                                                     std::to_string(S) + ", " + std::to_string(S) + "]");
    }
    const int64_t n_tiles = pixel_values.dim(0);
    Tensor features({n_tiles, n_patch, width});
    std::vector<float> patches(static_cast<size_t>(n_patch * patch_in)),
        x(static_cast<size_t>(n_tok * width));
    VitWorkspace ws(n_tok, width, cfg.vision.intermediate_size);
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const float* px = pixel_values.ptr() + tile * 3 * S * S;
        // Patchify: patch (py, px) row-major; features channel-major, then row, then column (spec §4.2).
        for (int64_t py = 0; py < side; ++py)
            for (int64_t pxi = 0; pxi < side; ++pxi)
                for (int64_t c = 0; c < 3; ++c)
                    for (int64_t yy = 0; yy < p; ++yy)
                        for (int64_t xx = 0; xx < p; ++xx)
                            patches[(py * side + pxi) * patch_in + c * p * p + yy * p + xx] =
                                px[c * S * S + (py * p + yy) * S + pxi * p + xx];
        // x = [prefix rows ; patch embeddings + position] (the prefix gets no position embedding).
        std::copy(w.prefix.data.begin(), w.prefix.data.end(), x.begin());
        float* emb = x.data() + n_prefix * width;
        k::linear({patches.data(), w.patch_embed.ptr(), nullptr, emb, n_patch, width, patch_in});
        for (int64_t i = 0; i < n_patch * width; ++i) emb[i] += tile_pos.data[i];
        for (const auto& block : w.blocks) vit_block(cfg.vision, block, x, n_tok, ws);
        std::copy(x.begin() + n_prefix * width, x.end(), features.data.begin() + tile * n_patch * width);
    }
    dump(dumper, "vision.features", features.ptr(), features.shape);
    return features;
}

Tensor project_features(const ModelConfig& cfg, const VisionWeights& w, const Tensor& features,
                        Dumper* dumper) {
    const int64_t n_tiles = features.dim(0), width = cfg.vision.hidden_size,
                  side = cfg.image.patches_per_side();
    const int64_t s = cfg.image.shuffle_factor(), tpt = cfg.image.tokens_per_tile(), in_dim = width * s * s;
    const int64_t hidden = cfg.projector_hidden, d_model = cfg.llm.hidden_size, rows = n_tiles * tpt;
    std::vector<float> shuffled(static_cast<size_t>(rows * in_dim)), normed(shuffled.size());
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
        k::pixel_shuffle({features.ptr() + tile * side * side * width, shuffled.data() + tile * tpt * in_dim,
                          side, width, s});
    }
    // mlp1: RMSNorm → Linear → ReLU² → Linear (spec §3.2 step 4).
    k::rmsnorm({shuffled.data(), nullptr, w.proj_norm.ptr(), normed.data(), rows, in_dim, 1e-5f});
    std::vector<float> h(static_cast<size_t>(rows * hidden));
    k::linear({normed.data(), w.proj_fc1.ptr(), nullptr, h.data(), rows, hidden, in_dim});
    k::relu_squared(h.data(), rows * hidden);
    Tensor out({rows, d_model});
    k::linear({h.data(), w.proj_fc2.ptr(), nullptr, out.ptr(), rows, d_model, hidden});
    dump(dumper, "vision.projected", out.ptr(), out.shape);
    return out;
}

}  // namespace surf::model::cpu
