// Mamba-2 mixer (spec §1.5): in_proj → split z | xBC | dt → causal conv + SiLU over xBC →
// SSD scan with D skip → gated grouped RMSNorm with z → out_proj.
#include <algorithm>

#include "kernels/cpu/cpu_ops.h"
#include "model/cpu/blocks.h"

namespace surf::model::cpu {

namespace k = surf::kernels::cpu;

void mamba2_mixer(const LlmConfig& cfg, const MambaWeights& w, const float* x, int64_t T, MambaState& state,
                  float* out) {
    const int64_t d_inner = cfg.d_inner(), conv_dim = cfg.conv_dim();
    const int64_t H = cfg.mamba_n_heads, P = cfg.mamba_head_dim, G = cfg.n_groups, N = cfg.d_state;
    const int64_t proj_dim = cfg.in_proj_dim();

    // zxbcdt [T, proj_dim]: z = [0, d_inner), xBC = [d_inner, d_inner + conv_dim), dt_raw = last H.
    std::vector<float> zxbcdt(static_cast<size_t>(T * proj_dim));
    project(w.in_proj, x, T, zxbcdt.data());

    // xBC' [T, conv_dim] = SiLU(conv(xBC)), continuing the conv state.
    std::vector<float> xbc(static_cast<size_t>(T * conv_dim));
    k::causal_conv1d({zxbcdt.data() + d_inner, w.conv_w.ptr(), w.conv_b.ptr(), state.conv.ptr(), xbc.data(),
                      T, conv_dim, cfg.conv_kernel, proj_dim});

    // dt [T, H] = softplus(dt_raw + dt_bias), clamped to time_step_limit when the config sets one.
    std::vector<float> dt(static_cast<size_t>(T * H));
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < H; ++h) {
            float v = k::softplus(zxbcdt[t * proj_dim + d_inner + conv_dim + h] + w.dt_bias.data[h]);
            if (cfg.dt_min > 0.0f) v = std::max(v, cfg.dt_min);
            if (cfg.dt_max > 0.0f) v = std::min(v, cfg.dt_max);
            dt[t * H + h] = v;
        }
    }

    // y [T, H, P] = SSD(x, dt, A, B, C) + D·x; x = xBC'[:, :d_inner], B, C = the next G·N each.
    std::vector<float> y(static_cast<size_t>(T * d_inner));
    k::SsdParams ssd;
    ssd.x = xbc.data();
    ssd.B = xbc.data() + d_inner;
    ssd.C = xbc.data() + d_inner + G * N;
    ssd.dt = dt.data();
    ssd.A = w.A.ptr();
    ssd.D = w.D.ptr();
    ssd.state = state.ssm.ptr();
    ssd.y = y.data();
    ssd.T = T, ssd.H = H, ssd.P = P, ssd.G = G, ssd.N = N;
    ssd.x_stride = conv_dim, ssd.dt_stride = H, ssd.bc_stride = conv_dim;
    ssd.chunk = T > 1 ? cfg.chunk_size : 0;  // decode: the one-token recurrence
    k::ssd(ssd);

    // Gated grouped RMSNorm: v = y ⊙ SiLU(z), normalised per group of d_inner / G channels.
    std::vector<float> normed(static_cast<size_t>(T * d_inner));
    k::gated_rmsnorm({y.data(), zxbcdt.data(), w.norm.ptr(), normed.data(), T, d_inner, d_inner / G, proj_dim,
                      cfg.norm_eps});

    project(w.out_proj, normed.data(), T, out);
}

}  // namespace surf::model::cpu
