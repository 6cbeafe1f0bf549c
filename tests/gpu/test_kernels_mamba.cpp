// Mamba-2 kernels against the CPU references: varlen conv1d (+ state write-back) and the decode update,
// the chunked SSD scan over packed ragged sequences with slot states, and the decode state update.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>

#include "kernels/cpu/cpu_ops.h"
#include "tests/gpu/gpu_test_util.h"

namespace cpu = surf::kernels::cpu;
namespace cu = surf::kernels::cuda;
using namespace surf::gpu_test;

namespace {

std::vector<int32_t> prefix(const std::vector<int32_t>& lens) {
    std::vector<int32_t> cu{0};
    for (int32_t l : lens) cu.push_back(cu.back() + l);
    return cu;
}

struct MambaShape {
    const char* name;
    int64_t H, P, G, N, chunk;
};

// One decode token per row through the CPU recurrence (cpu::ssd, T = 1) on the states of slots[b]: rows of
// x | B | C at xbc_stride, dt_raw at dt_stride; y [rows, H, P].
void cpu_decode_step(const MambaShape& sh, int64_t rows, const std::vector<int32_t>& slots,
                     const std::vector<float>& xbc, int64_t xbc_stride, const std::vector<float>& dt_raw,
                     int64_t dt_stride, const std::vector<float>& dt_bias, const std::vector<float>& A,
                     const std::vector<float>& D, std::vector<float>& state, std::vector<float>& y) {
    const int64_t H = sh.H, P = sh.P, G = sh.G, N = sh.N;
    std::vector<float> dt(H);
    y.assign(static_cast<size_t>(rows * H * P), 0.0f);
    for (int64_t b = 0; b < rows; ++b) {
        for (int64_t h = 0; h < H; ++h) dt[h] = cpu::softplus(dt_raw[b * dt_stride + h] + dt_bias[h]);
        const float* row = xbc.data() + b * xbc_stride;
        cpu::SsdParams c;
        c.x = row;
        c.B = row + H * P;
        c.C = row + H * P + G * N;
        c.dt = dt.data();
        c.A = A.data();
        c.D = D.data();
        c.state = state.data() + slots[b] * H * P * N;
        c.y = y.data() + b * H * P;
        c.T = 1;
        c.H = H;
        c.P = P;
        c.G = G;
        c.N = N;
        c.x_stride = xbc_stride;
        c.dt_stride = H;
        c.bc_stride = xbc_stride;
        cpu::ssd(c);
    }
}

// The decode update's inputs: rows of xbc_stride holding x [H·P] | B [G·N] | C [G·N], dt_raw rows of
// dt_stride, the per-head vectors, the state (dtype sdt) and y (dtype ydt) on the device.
cu::SsuParams ssu_params(const MambaShape& sh, int64_t batch, const bf16* xbc, int64_t xbc_stride,
                         const bf16* dt_raw, int64_t dt_stride, const float* dt_bias, const float* A,
                         const float* D, void* state, cu::DType sdt, const int32_t* slots, void* y,
                         cu::DType ydt) {
    cu::SsuParams p;
    p.x = xbc;
    p.B = xbc + sh.H * sh.P;
    p.C = xbc + sh.H * sh.P + sh.G * sh.N;
    p.dt_raw = dt_raw;
    p.dt_bias = dt_bias;
    p.A = A;
    p.D = D;
    p.state = state;
    p.state_dtype = sdt;
    p.slots = slots;
    p.y = y;
    p.y_dtype = ydt;
    p.batch = batch;
    p.H = sh.H;
    p.P = sh.P;
    p.G = sh.G;
    p.N = sh.N;
    p.x_stride = xbc_stride;
    p.bc_stride = xbc_stride;
    p.dt_stride = dt_stride;
    return p;
}

// A state of n_slots × hpn values on the device in one of the layouts the kernels take: fp32, bf16, or fp32
// as two 16-bit planes a slot (SsuParams::state_split).
enum class StateFormat { kF32, kBF16, kSplit };
const char* format_name(StateFormat f) {
    return f == StateFormat::kF32    ? "state fp32"
           : f == StateFormat::kBF16 ? "state bf16"
                                     : "state fp32 split";
}
struct StateBuffer {
    StateFormat fmt;
    int64_t hpn;
    DeviceBuffer<float> f32;
    DeviceBuffer<bf16> b16;
    DeviceBuffer<uint16_t> planes;
    StateBuffer(StateFormat f, const std::vector<float>& init, int64_t values_a_slot)
        : fmt(f),
          hpn(values_a_slot),
          f32(f == StateFormat::kF32 ? DeviceBuffer<float>(init) : DeviceBuffer<float>()),
          b16(f == StateFormat::kBF16 ? DeviceBuffer<bf16>(to_bf16(init)) : DeviceBuffer<bf16>()),
          planes(f == StateFormat::kSplit ? DeviceBuffer<uint16_t>(halves_of(init, values_a_slot))
                                          : DeviceBuffer<uint16_t>()) {}
    static std::vector<uint16_t> halves_of(const std::vector<float>& plain, int64_t hpn) {
        std::vector<uint16_t> halves(plain.size() * 2);
        cu::ssm_state_split(plain.data(), halves.data(), static_cast<int64_t>(plain.size()) / hpn, hpn);
        return halves;
    }
    void* get() const {
        return fmt == StateFormat::kF32    ? static_cast<void*>(f32.get())
               : fmt == StateFormat::kBF16 ? static_cast<void*>(b16.get())
                                           : planes.get();
    }
    cu::DType dtype() const { return fmt == StateFormat::kBF16 ? cu::DType::kBF16 : cu::DType::kF32; }
    bool split() const { return fmt == StateFormat::kSplit; }
    std::vector<float> download() const {
        if (fmt == StateFormat::kF32) return f32.download();
        if (fmt == StateFormat::kBF16) return to_float(b16.download());
        const std::vector<uint16_t> halves = planes.download();
        std::vector<float> out(halves.size() / 2);
        cu::ssm_state_join(halves.data(), out.data(), static_cast<int64_t>(out.size()) / hpn, hpn);
        return out;
    }
};

}  // namespace

TEST_CASE("causal_conv1d_varlen and causal_conv1d_update vs the CPU conv with state") {
    std::mt19937 rng(4);
    const int64_t K = 4;
    for (int64_t C : {int64_t{12288}, int64_t{176}}) {
        for (auto sdt : {cu::DType::kF32, cu::DType::kBF16}) {
            const bool s32 = sdt == cu::DType::kF32;
            const std::vector<int32_t> lens{1, 2, 3, 200, 17, 0, 64};
            const std::vector<int32_t> slots{5, 0, 3, 6, 1, 2, 4};
            const std::vector<uint8_t> has_init{1, 1, 1, 0, 1, 1, 1};
            const int64_t n_seq = lens.size(), n_slots = 7, x_stride = C + 64;
            const auto cu_h = prefix(lens);
            const int64_t n_tok = cu_h.back();
            auto x = random_vec(n_tok * x_stride, rng, -2.0f, 2.0f);
            auto w = random_vec(C * K, rng, -0.5f, 0.5f, false), b = random_vec(C, rng, -0.5f, 0.5f, false);
            auto state0 = random_vec(n_slots * C * (K - 1), rng, -2.0f, 2.0f);  // bf16-exact for both dtypes
            // CPU: per sequence, from its slot (or zeros), outputs packed.
            std::vector<float> ref_out(n_tok * C), ref_state(state0);
            for (int64_t s = 0; s < n_seq; ++s) {
                float* st = ref_state.data() + slots[s] * C * (K - 1);
                if (!has_init[s]) std::fill(st, st + C * (K - 1), 0.0f);
                cpu::causal_conv1d({x.data() + cu_h[s] * x_stride, w.data(), b.data(), st,
                                    ref_out.data() + cu_h[s] * C, lens[s], C, K, x_stride});
            }
            DeviceBuffer<bf16> dx(to_bf16(x)), dout(n_tok * C);
            DeviceBuffer<float> dw(w), db(b), dst32(state0);
            DeviceBuffer<bf16> dst16(to_bf16(state0));
            DeviceBuffer<int32_t> dcu(cu_h), dslots(slots);
            DeviceBuffer<uint8_t> dinit(has_init);
            dout.poison();
            cu::ConvVarlenParams p;
            p.x = dx.get();
            p.weight = dw.get();
            p.bias = db.get();
            p.state = s32 ? static_cast<void*>(dst32.get()) : dst16.get();
            p.state_dtype = sdt;
            p.cu_seqlens = dcu.get();
            p.slots = dslots.get();
            p.has_initial_state = dinit.get();
            p.out = dout.get();
            p.n_tok = n_tok;
            p.n_seq = n_seq;
            p.channels = C;
            p.K = K;
            p.x_stride = x_stride;
            cu::causal_conv1d_varlen(p, nullptr);
            const std::string tag = " C=" + std::to_string(C) + (s32 ? " state fp32" : " state bf16");
            compare("conv1d_varlen out" + tag, to_float(dout.download()), ref_out, 1e-2f, 8e-3f);
            compare("conv1d_varlen state" + tag, s32 ? dst32.download() : to_float(dst16.download()),
                    ref_state, 1e-6f, s32 ? 1e-7f : 4e-3f);

            // Decode update: batch of 5 sequences on distinct slots, continuing from ref_state.
            const std::vector<int32_t> dslots_h{4, 2, 6, 0, 5};
            const int64_t batch = dslots_h.size();
            auto xd = random_vec(batch * x_stride, rng, -2.0f, 2.0f);
            std::vector<float> ref_d(batch * C), st_d(s32 ? ref_state : to_float(dst16.download()));
            std::vector<float> st_in(st_d);
            for (int64_t i = 0; i < batch; ++i) {
                cpu::causal_conv1d({xd.data() + i * x_stride, w.data(), b.data(),
                                    st_d.data() + dslots_h[i] * C * (K - 1), ref_d.data() + i * C, 1, C, K,
                                    x_stride});
            }
            DeviceBuffer<bf16> dxd(to_bf16(xd)), doutd(batch * C);
            DeviceBuffer<int32_t> dsl(dslots_h);
            if (s32) dst32.upload(st_in);
            doutd.poison();
            cu::ConvUpdateParams u;
            u.x = dxd.get();
            u.weight = dw.get();
            u.bias = db.get();
            u.state = s32 ? static_cast<void*>(dst32.get()) : dst16.get();
            u.state_dtype = sdt;
            u.slots = dsl.get();
            u.out = doutd.get();
            u.batch = batch;
            u.channels = C;
            u.K = K;
            u.x_stride = x_stride;
            cu::causal_conv1d_update(u, nullptr);
            compare("conv1d_update out" + tag, to_float(doutd.download()), ref_d, 1e-2f, 8e-3f);
            compare("conv1d_update state" + tag, s32 ? dst32.download() : to_float(dst16.download()), st_d,
                    1e-6f, s32 ? 1e-7f : 4e-3f);
        }
    }
}

// ssd_varlen runs on bf16 tensor cores: x, B, C are bf16 already; C·Bᵀ ⊙ decay·dt, B ⊙ decay·dt and the
// entering state copy used for C·S are rounded to bf16 for the mma (fp32 accumulation; dt, cumsums and the
// running state fp32). Bound: ‖err‖/‖ref‖ ≤ 5e-3 and every element within 3e-2·rms(ref) + 2e-2·|ref| (y; the
// state 2e-2·rms): the 300-token Holotron prompt from zeros has 2 of its 3.07 M y elements at 2.4e-2·rms, the
// same in both kernels (mma.sync and wgmma agree to rounding), so this is the bf16-operand scheme's tail, not
// a kernel's.
TEST_CASE("ssd_varlen: chunked scan over packed ragged sequences from slot states vs the CPU recurrence") {
    std::mt19937 cases_rng(5);
    struct Case {
        MambaShape sh;
        std::vector<int32_t> lens;
        bool y_bf16;
        int64_t p_split = 0;              // 0: the kernel's choice (2 when few (sequence, head) blocks)
        bool first_without_init = false;  // sequence 0 starts from zeros (else sequence 1 does)
    };
    const std::vector<Case> cases{
        {{"holotron", 128, 80, 8, 128, 128}, {1, 300, 128, 45, 0, 517}, false},
        {{"holotron y bf16", 128, 80, 8, 128, 128}, {129, 1, 256, 17}, true},
        {{"p128 n128 chunk64", 4, 128, 1, 128, 64}, {200, 64, 3, 1}, false},
        {{"tiny", 8, 16, 2, 16, 16}, {1, 40, 16, 7, 33, 2}, false},
        {{"small", 12, 24, 4, 32, 32}, {1, 40, 16, 7, 33, 2, 0, 95}, false},
        {{"p20 n64 (element loads)", 6, 20, 3, 64, 64}, {70, 1, 64, 200}, true},
        // Head-dim slices: one long prompt at the Holotron shape (automatic: 128 blocks → 2 slices of 40),
        // forced slices of 12 (element loads) and of 32.
        {{"holotron one prompt (p slices)", 128, 80, 8, 128, 128}, {924}, false},
        // One prompt from zeros, its last chunk partial (the wgmma kernel takes single prompts).
        {{"holotron one prompt, no initial state", 128, 80, 8, 128, 128}, {300}, true, 0, true},
        {{"small, 2 p slices", 12, 24, 4, 32, 32}, {1, 40, 16, 7, 33, 2, 0, 95}, true, 2},
        {{"p128 n128, 4 p slices", 4, 128, 1, 128, 64}, {200, 64, 3, 1}, false, 4},
        // Many sequences of many chunks; an empty sequence without an initial state (its slot is zeroed).
        {{"tiny, many chunks", 8, 16, 2, 16, 16}, {5, 0, 300, 17, 160, 1, 64, 99, 250, 33}, false},
    };
    for (const Case& cs : cases) {
        const MambaShape& sh = cs.sh;
        // The split layout holds the same fp32 values, so its results must equal the fp32 layout's bit for
        // bit.
        std::vector<std::vector<float>> f32_y, f32_state;  // per kernel choice
        const std::mt19937 case_rng = cases_rng;           // every layout sees the same inputs
        cases_rng.discard(4096);
        for (StateFormat fmt : {StateFormat::kF32, StateFormat::kBF16, StateFormat::kSplit}) {
            std::mt19937 rng = case_rng;
            const std::vector<int32_t>& lens = cs.lens;
            // Distinct slots in shuffled order, one slot left untouched.
            std::vector<int32_t> slots(lens.size() + 1);
            std::iota(slots.begin(), slots.end(), 0);
            std::shuffle(slots.begin(), slots.end(), rng);
            slots.pop_back();
            std::vector<uint8_t> has_init(lens.size(), 1);
            if (cs.first_without_init)
                has_init[0] = 0;
            else if (has_init.size() > 1)
                has_init[1] = 0;
            const int64_t n_seq = lens.size(), n_slots = n_seq + 1, H = sh.H, P = sh.P, G = sh.G, N = sh.N;
            const auto cu_h = prefix(lens);
            const int64_t n_tok = cu_h.back();
            // In-place layout as in the model: x, B, C read from the conv output row, dt from in_proj.
            const int64_t conv_dim = H * P + 2 * G * N, xbc_stride = conv_dim, dt_stride = H + 8;
            auto xbc = random_vec(n_tok * xbc_stride, rng, -1.0f, 1.0f);
            auto dt_raw = random_vec(n_tok * dt_stride, rng, -3.0f, 0.5f);
            auto dt_bias = random_vec(H, rng, -1.0f, 0.0f, false);
            auto A = random_vec(H, rng, -4.0f, -0.5f, false), D = random_vec(H, rng, -1.0f, 1.0f, false);
            auto state0 = random_vec(n_slots * H * P * N, rng, -1.0f, 1.0f);
            // CPU: dt after softplus, per-sequence ssd (token recurrence: the exact definition).
            std::vector<float> dt(n_tok * H);
            for (int64_t t = 0; t < n_tok; ++t)
                for (int64_t h = 0; h < H; ++h)
                    dt[t * H + h] = cpu::softplus(dt_raw[t * dt_stride + h] + dt_bias[h]);
            std::vector<float> ref_y(n_tok * H * P), ref_state(state0);
            for (int64_t s = 0; s < n_seq; ++s) {
                float* st = ref_state.data() + slots[s] * H * P * N;
                if (!has_init[s]) std::fill(st, st + H * P * N, 0.0f);
                const float* row = xbc.data() + cu_h[s] * xbc_stride;
                cpu::SsdParams c;
                c.x = row;
                c.B = row + H * P;
                c.C = row + H * P + G * N;
                c.dt = dt.data() + cu_h[s] * H;
                c.A = A.data();
                c.D = D.data();
                c.state = st;
                c.y = ref_y.data() + cu_h[s] * H * P;
                c.T = lens[s];
                c.H = H;
                c.P = P;
                c.G = G;
                c.N = N;
                c.x_stride = xbc_stride;
                c.dt_stride = H;
                c.bc_stride = xbc_stride;
                c.chunk = 0;
                if (lens[s] > 0) cpu::ssd(c);
            }
            DeviceBuffer<bf16> dxbc(to_bf16(xbc)), ddt(to_bf16(dt_raw)), dyh(n_tok * H * P);
            DeviceBuffer<float> ddtb(dt_bias), dA(A), dD(D), dy(n_tok * H * P);
            DeviceBuffer<int32_t> dcu(cu_h), dslots(slots);
            DeviceBuffer<uint8_t> dinit(has_init);
            // The Holotron shape (N = 128, P = 80) runs the wgmma kernel on compute capability 9.0 by
            // default: check the mma.sync kernel there too.
            for (bool wgmma : {true, false}) {
                if (!wgmma && !(N == 128 && P == 80)) continue;
                const StateBuffer dst(fmt, state0, H * P * N);
                cu::SsdVarlenParams p;
                p.x = dxbc.get();
                p.B = dxbc.get() + H * P;
                p.C = dxbc.get() + H * P + G * N;
                p.dt_raw = ddt.get();
                p.dt_bias = ddtb.get();
                p.A = dA.get();
                p.D = dD.get();
                p.state = dst.get();
                p.state_dtype = dst.dtype();
                p.state_split = dst.split();
                p.cu_seqlens = dcu.get();
                p.slots = dslots.get();
                p.has_initial_state = dinit.get();
                p.y = cs.y_bf16 ? static_cast<void*>(dyh.get()) : dy.get();
                p.y_dtype = cs.y_bf16 ? cu::DType::kBF16 : cu::DType::kF32;
                p.n_tok = n_tok;
                p.n_seq = n_seq;
                p.H = H;
                p.P = P;
                p.G = G;
                p.N = N;
                p.chunk = sh.chunk;
                p.x_stride = xbc_stride;
                p.bc_stride = xbc_stride;
                p.dt_stride = dt_stride;
                p.p_split = cs.p_split;
                p.wgmma = wgmma;
                const size_t ws_bytes = cu::ssd_workspace_bytes(p);
                CHECK(ws_bytes == 0);  // fused: the running state stays on chip
                DeviceBuffer<uint8_t> ws(ws_bytes);
                dy.poison();
                dyh.poison();
                cu::ssd_varlen(p, ws.get(), nullptr);
                const std::string tag =
                    std::string(" ") + sh.name + " " + format_name(fmt) +
                    (N == 128 && P == 80 ? (wgmma ? " (wgmma where available)" : " (mma.sync)") : "");
                const auto rms = [](const std::vector<float>& v) {
                    double acc = 0.0;
                    for (float e : v) acc += static_cast<double>(e) * e;
                    return static_cast<float>(std::sqrt(acc / std::max<size_t>(v.size(), 1)));
                };
                const float y_rms = rms(ref_y), st_rms = rms(ref_state);
                const std::vector<float> got_y = cs.y_bf16 ? to_float(dyh.download()) : dy.download(),
                                         got_state = dst.download();
                compare("ssd_varlen y" + tag, got_y, ref_y, 3e-2f * y_rms, 2e-2f, 5e-3);
                // Untouched slots keep their values (to bf16 rounding of the stored state).
                compare("ssd_varlen final state" + tag, got_state, ref_state, 2e-2f * st_rms, 2e-2f, 5e-3);
                const size_t k = wgmma ? 0 : 1;
                if (fmt == StateFormat::kF32) {
                    f32_y.resize(2), f32_state.resize(2);
                    f32_y[k] = got_y, f32_state[k] = got_state;
                } else if (fmt == StateFormat::kSplit) {
                    CHECK_MESSAGE(std::memcmp(got_y.data(), f32_y[k].data(), got_y.size() * 4) == 0,
                                  "y bit for bit as fp32" << tag);
                    CHECK_MESSAGE(
                        std::memcmp(got_state.data(), f32_state[k].data(), got_state.size() * 4) == 0,
                        "state bit for bit as fp32" << tag);
                }
            }
        }
    }
}

TEST_CASE(
    "selective_state_update: one decode step on slot states (fp32 and bf16 state, whole heads and row "
    "slices)") {
    std::mt19937 rng(6);
    for (MambaShape sh :
         {MambaShape{"holotron", 128, 80, 8, 128, 0}, MambaShape{"tiny_fp32", 8, 16, 2, 16, 0},
          MambaShape{"small_bf16", 12, 24, 4, 32, 0}}) {
        for (auto sdt : {cu::DType::kF32, cu::DType::kBF16}) {
            for (auto ydt : {cu::DType::kF32, cu::DType::kBF16}) {
                const bool s32 = sdt == cu::DType::kF32, y32 = ydt == cu::DType::kF32;
                const int64_t H = sh.H, P = sh.P, G = sh.G, N = sh.N, batch = 9, n_slots = 12;
                const std::vector<int32_t> slots{3, 0, 11, 7, 1, 5, 9, 2, 10};
                const int64_t xbc_stride = H * P + 2 * G * N + 16, dt_stride = H + 4;
                auto xbc = random_vec(batch * xbc_stride, rng);
                auto dt_raw = random_vec(batch * dt_stride, rng, -3.0f, 0.5f);
                auto dt_bias = random_vec(H, rng, -1.0f, 0.0f, false);
                auto A = random_vec(H, rng, -4.0f, -0.5f, false), D = random_vec(H, rng, -1.0f, 1.0f, false);
                auto state0 = random_vec(n_slots * H * P * N, rng);
                std::vector<float> ref_y, ref_state(state0);
                cpu_decode_step(sh, batch, slots, xbc, xbc_stride, dt_raw, dt_stride, dt_bias, A, D,
                                ref_state, ref_y);
                // Row splits: the automatic choice (2 for the fp32 Holotron head), whole heads, and halves /
                // quarters of the state rows per block where the head dim divides.
                // Each with the state staged by cp.async and by one bulk copy a block
                // (SsuParams::bulk_stage).
                for (int64_t sb = 0; sb < 8; ++sb) {
                    const int64_t split = std::array<int64_t, 4>{0, 1, 2, 4}[sb / 2];
                    const bool bulk = sb % 2 == 1;
                    if ((split > 0 && P % split != 0) || (bulk && !cu::ssu_bulk_stage_available())) continue;
                    DeviceBuffer<bf16> dxbc(to_bf16(xbc)), ddt(to_bf16(dt_raw)), dst16(to_bf16(state0)),
                        dyh(batch * H * P);
                    DeviceBuffer<float> ddtb(dt_bias), dA(A), dD(D), dst32(state0), dyf(batch * H * P);
                    DeviceBuffer<int32_t> dslots(slots);
                    cu::SsuParams p =
                        ssu_params(sh, batch, dxbc.get(), xbc_stride, ddt.get(), dt_stride, ddtb.get(),
                                   dA.get(), dD.get(), s32 ? static_cast<void*>(dst32.get()) : dst16.get(),
                                   sdt, dslots.get(), y32 ? static_cast<void*>(dyf.get()) : dyh.get(), ydt);
                    p.row_split = split;
                    p.bulk_stage = bulk;
                    dyf.poison();
                    dyh.poison();
                    cu::selective_state_update(p, nullptr);
                    const std::string tag = std::string(" ") + sh.name +
                                            (s32 ? " state fp32" : " state bf16") +
                                            (y32 ? " y fp32" : " y bf16") + " row split " +
                                            std::to_string(split) + (bulk ? " bulk" : "");
                    const float ytol = (s32 && y32) ? 1e-4f : 2e-2f;
                    compare("ssu y" + tag, y32 ? dyf.download() : to_float(dyh.download()), ref_y, ytol,
                            s32 && y32 ? 1e-4f : 1e-2f);
                    // Untouched slots must keep their values exactly; touched ones match the CPU step.
                    compare("ssu state" + tag, s32 ? dst32.download() : to_float(dst16.download()), ref_state,
                            s32 ? 1e-5f : 1e-2f, s32 ? 1e-5f : 8e-3f);
                }
            }
        }
    }
}

TEST_CASE(
    "selective_state_update with replay: staggered rows over 2K + 3 steps vs the sequential CPU recurrence; "
    "ssm_replay_fold") {
    // Each step feeds every row a new token; row b joins at step b, so the rows' pending counts differ (rows
    // fold on different steps, as in serving). y of every step must match the CPU's one-token-at-a-time
    // update; after a final ssm_replay_fold every slot's state must match the CPU state (untouched slots
    // exactly). The split fp32 state: its folds are exact fp32 (state tolerance as fp32), its other rows take
    // y from the bf16 plane alone (each value within 2⁻⁸ of itself relative: y's tolerance as the bf16
    // state's, which also rounds at every fold).
    std::mt19937 rng(16);
    for (MambaShape sh :
         {MambaShape{"holotron", 128, 80, 8, 128, 0}, MambaShape{"tiny_fp32", 8, 16, 2, 16, 0},
          MambaShape{"small_bf16", 12, 24, 4, 32, 0}}) {
        for (StateFormat fmt : {StateFormat::kSplit, StateFormat::kF32, StateFormat::kBF16}) {
            for (int64_t K : {int64_t{3}, int64_t{8}}) {
                for (int64_t sb = 0; sb < 6;
                     ++sb) {  // splits 0 / 1 / 2, the state staged by cp.async or one bulk copy
                    const int64_t split = sb / 2;
                    const bool bulk = sb % 2 == 1;
                    if ((split > 0 && sh.P % split != 0) || (bulk && !cu::ssu_bulk_stage_available()))
                        continue;
                    const bool s32 = fmt == StateFormat::kF32;       // y and the state exact to fp32 rounding
                    const bool state32 = fmt != StateFormat::kBF16;  // the state after a fold
                    const int64_t H = sh.H, P = sh.P, G = sh.G, N = sh.N, n_slots = 8, rows = 5,
                                  steps = 2 * K + 3;
                    const std::vector<int32_t> slot_of{3, 0, 7, 1, 5};
                    const int64_t xbc_stride = H * P + 2 * G * N + 8, dt_stride = H + 2;
                    auto dt_bias = random_vec(H, rng, -1.0f, 0.0f, false);
                    auto A = random_vec(H, rng, -4.0f, -0.5f, false),
                         D = random_vec(H, rng, -1.0f, 1.0f, false);
                    auto state0 =
                        random_vec(n_slots * H * P * N, rng);  // bf16-exact, so a bf16 state starts equal
                    std::vector<float> ref_state(state0);
                    DeviceBuffer<float> ddtb(dt_bias), dA(A), dD(D);
                    const StateBuffer dst(fmt, state0, H * P * N);
                    const int64_t entry = cu::ssm_replay_entry_elems(H, P, G, N);
                    DeviceBuffer<bf16> replay(static_cast<size_t>(n_slots * K * entry));
                    replay.poison();  // entries are written before they are read
                    std::vector<int32_t> count(n_slots, 0);
                    int64_t folds = 0;
                    const std::string tag = std::string(" ") + sh.name + " " + format_name(fmt) + " K " +
                                            std::to_string(K) + " row split " + std::to_string(split) +
                                            (bulk ? " bulk" : "");
                    for (int64_t t = 0; t < steps; ++t) {
                        const int64_t batch = std::min<int64_t>(rows, t + 1);  // rows 0 … t
                        std::vector<int32_t> slots(slot_of.begin(), slot_of.begin() + batch),
                            counts(static_cast<size_t>(batch));
                        for (int64_t b = 0; b < batch; ++b) counts[b] = count[slots[b]];
                        auto xbc = random_vec(batch * xbc_stride, rng);
                        auto dt_raw = random_vec(batch * dt_stride, rng, -3.0f, 0.5f);
                        std::vector<float> ref_y;
                        cpu_decode_step(sh, batch, slots, xbc, xbc_stride, dt_raw, dt_stride, dt_bias, A, D,
                                        ref_state, ref_y);
                        DeviceBuffer<bf16> dxbc(to_bf16(xbc)), ddt(to_bf16(dt_raw));
                        DeviceBuffer<float> dy(batch * H * P);
                        DeviceBuffer<int32_t> dslots(slots), dcounts(counts);
                        dy.poison();
                        cu::SsuParams p = ssu_params(sh, batch, dxbc.get(), xbc_stride, ddt.get(), dt_stride,
                                                     ddtb.get(), dA.get(), dD.get(), dst.get(), dst.dtype(),
                                                     dslots.get(), dy.get(), cu::DType::kF32);
                        p.state_split = dst.split();
                        p.row_split = split;
                        p.replay = replay.get();
                        p.replay_count = dcounts.get();
                        p.replay_window = K;
                        p.bulk_stage = bulk;
                        cu::selective_state_update(p, nullptr);
                        // y reads the state, which a bf16 state holds rounded at every fold while the CPU
                        // keeps it in fp32: y sums N = 128 such values (|S| ≲ 2, |C| ≤ 1), so its error grows
                        // like √N · 2⁻⁹ · |S| a fold, ≈ 0.02 after a few folds (a 3e-2 tail seen once in
                        // 51,200 values; rel_l2 stays ≈ 1e-3). The split state's rows that do not fold read
                        // each value rounded to bf16: y's error is a sum of N such terms (≈ 0.04 at most in
                        // 51,200 sums of this size, rel_l2 ≈ 2e-3), fresh each step.
                        const float ytol = s32 ? 1e-4f : fmt == StateFormat::kSplit ? 6e-2f : 4e-2f;
                        const double yl2 = fmt == StateFormat::kSplit ? 5e-3 : -1.0;
                        if (!compare("ssu replay y step " + std::to_string(t) + tag, dy.download(), ref_y,
                                     ytol, s32 ? 1e-4f : 1e-2f, yl2))
                            break;
                        for (int32_t s : slots) {
                            folds += count[s] == K - 1;
                            count[s] = static_cast<int32_t>((count[s] + 1) % K);
                        }
                    }
                    CHECK(folds >= rows);  // every row folded at least once inside the steps
                    // Fold what is pending (rows with none are no-ops), then compare every slot.
                    std::vector<int32_t> counts;
                    for (int32_t s : slot_of) counts.push_back(count[s]);
                    DeviceBuffer<int32_t> dslots(slot_of), dcounts(counts);
                    cu::SsuParams f;
                    f.dt_bias = ddtb.get();
                    f.A = dA.get();
                    f.state = dst.get();
                    f.state_dtype = dst.dtype();
                    f.state_split = dst.split();
                    f.slots = dslots.get();
                    f.batch = rows;
                    f.H = H;
                    f.P = P;
                    f.G = G;
                    f.N = N;
                    f.row_split = split;
                    f.replay = replay.get();
                    f.replay_count = dcounts.get();
                    f.replay_window = K;
                    f.bulk_stage = bulk;
                    cu::ssm_replay_fold(f, nullptr);
                    const std::vector<float> got = dst.download();
                    compare("ssu replay state after fold" + tag, got, ref_state, state32 ? 1e-5f : 1e-2f,
                            state32 ? 1e-4f : 8e-3f);
                    // Slots no row names are bit-identical (2, 4, 6).
                    for (int64_t s : {2, 4, 6}) {
                        const auto first = static_cast<std::ptrdiff_t>(s * H * P * N),
                                   last = first + static_cast<std::ptrdiff_t>(H * P * N);
                        CHECK_MESSAGE(
                            std::equal(got.begin() + first, got.begin() + last, state0.begin() + first),
                            "slot " << s << tag);
                    }
                }
            }
        }
    }
}

TEST_CASE(
    "selective_state_update: every staging path (state by cp.async or one bulk copy, inputs in 16-byte "
    "chunks or one value a load, L2 hint or none) gives bit-identical results") {
    // The state reaches shared memory by cp.async or (SsuParams::bulk_stage) one bulk copy; the replay kernel
    // loads its small inputs (this step's and the pending tokens' x, B, C) in 16-byte chunks when every row
    // is 16-byte aligned, else one value a load. The same logical inputs, laid out with a row stride of
    // 12,304 (chunks) and 12,300 elements (not a multiple of 8: one value a load), through the four paths: y,
    // the states and the entries must match bit for bit, for the read-and-write update, a replay step over
    // staggered counts (rows folding and rows storing entries) and ssm_replay_fold. A last path marks the
    // state's loads and stores evict-first in the L2 (SsuParams::l2_evict_first).
    std::mt19937 rng(27);
    const int64_t H = 128, P = 80, G = 8, N = 128, K = 8, batch = 11, n_slots = 13, width = H * P + 2 * G * N;
    const std::vector<int32_t> slots{3, 0, 12, 7, 1, 5, 9, 2, 10, 4, 8};
    const int64_t dt_stride = H + 4, entry = cu::ssm_replay_entry_elems(H, P, G, N);
    auto rows = random_vec(batch * width, rng);
    auto dt_raw = random_vec(batch * dt_stride, rng, -3.0f, 0.5f);
    auto dt_bias = random_vec(H, rng, -1.0f, 0.0f, false);
    auto A = random_vec(H, rng, -4.0f, -0.5f, false), D = random_vec(H, rng, -1.0f, 1.0f, false);
    auto state0 = random_vec(n_slots * H * P * N, rng);
    auto entries = random_vec(n_slots * K * entry, rng);
    std::vector<int32_t> counts(batch);
    for (int64_t b = 0; b < batch; ++b) counts[b] = static_cast<int32_t>(b % K);  // 0 … 7: row 7 folds
    DeviceBuffer<bf16> ddt(to_bf16(dt_raw));
    DeviceBuffer<float> ddtb(dt_bias), dA(A), dD(D);
    DeviceBuffer<int32_t> dslots(slots), dcounts(counts);
    const int n_bulk = cu::ssu_bulk_stage_available() ? 2 : 1;
    for (StateFormat fmt : {StateFormat::kF32, StateFormat::kBF16, StateFormat::kSplit}) {
        for (int mode = 0; mode < 3; ++mode) {  // 0 read-and-write update, 1 replay step, 2 replay fold
            if (mode == 0 && fmt == StateFormat::kSplit) continue;  // the split state is for replay only
            std::vector<float> y_ref, state_ref;
            std::vector<bf16> entries_ref;
            for (int path = 0; path <= 2 * n_bulk; ++path) {
                const bool evict_first =
                    path == 2 * n_bulk;  // with the engine's staging: bulk where available, chunks
                const bool bulk = evict_first ? n_bulk == 2 : path / 2 == 1,
                           chunks = evict_first || path % 2 == 0;
                const int64_t stride = width + (chunks ? 16 : 12);
                std::vector<float> xbc(static_cast<size_t>(batch * stride), 0.25f);
                for (int64_t b = 0; b < batch; ++b)
                    std::copy_n(rows.begin() + b * width, width, xbc.begin() + b * stride);
                DeviceBuffer<bf16> dxbc(to_bf16(xbc));
                DeviceBuffer<float> dy(batch * H * P);
                DeviceBuffer<bf16> dentries(to_bf16(entries));
                const StateBuffer dst(fmt, state0, H * P * N);
                dy.poison();
                cu::SsuParams p = ssu_params(MambaShape{"holotron", H, P, G, N, 0}, batch, dxbc.get(), stride,
                                             ddt.get(), dt_stride, ddtb.get(), dA.get(), dD.get(), dst.get(),
                                             dst.dtype(), dslots.get(), dy.get(), cu::DType::kF32);
                p.state_split = dst.split();
                p.bulk_stage = bulk;
                p.l2_evict_first = evict_first;
                if (mode > 0) p.replay = dentries.get(), p.replay_count = dcounts.get(), p.replay_window = K;
                if (mode == 2)
                    cu::ssm_replay_fold(p, nullptr);
                else
                    cu::selective_state_update(p, nullptr);
                const std::vector<float> y = dy.download(), state = dst.download();
                const std::vector<bf16> ent = dentries.download();
                if (path == 0) {
                    y_ref = y, state_ref = state, entries_ref = ent;
                    continue;
                }
                const std::string tag = std::string(format_name(fmt)) +
                                        (mode == 0   ? " update"
                                         : mode == 1 ? " replay step"
                                                     : " replay fold") +
                                        (bulk ? ", bulk copy" : ", cp.async") +
                                        (chunks ? ", 16-byte chunks" : ", one value a load") +
                                        (evict_first ? ", L2 evict-first" : "") +
                                        " vs cp.async, 16-byte chunks";
                // The fold writes no y: both buffers keep their poison, which compares equal bit for bit too.
                CHECK_MESSAGE(std::memcmp(y.data(), y_ref.data(), y.size() * 4) == 0, "y " << tag);
                CHECK_MESSAGE(std::memcmp(state.data(), state_ref.data(), state.size() * 4) == 0,
                              "state " << tag);
                CHECK_MESSAGE(std::memcmp(ent.data(), entries_ref.data(), ent.size() * 2) == 0,
                              "entries " << tag);
            }
        }
    }
}
