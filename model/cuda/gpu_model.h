// The GPU forward pass: one batched step over many sequences, decode rows (one new token on a
// sequence with state) and varlen prefill rows (chunked or whole prompts) together. All buffers —
// weights, Mamba state slots, the paged KV pool, activation workspaces, per-step metadata — are
// allocated at construction for the configured limits; a forward allocates nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/green_context.h"
#include "kernels/cuda/ops.h"
#include "model/checkpoint/config.h"
#include "model/cuda/decode_graphs.h"
#include "model/cuda/device_buffer.h"
#include "model/cuda/gpu_weights.h"
#include "model/cuda/op_timer.h"

namespace surf::model::cuda {

namespace kc = surf::kernels::cuda;

struct GpuLimits {
    int64_t max_tokens = 4096;      // tokens per forward (decode rows + prefill rows)
    int64_t max_seqs = 128;         // sequences per forward
    int64_t max_slots = 128;        // Mamba state slots (sequences resident on the GPU)
    int64_t page_size = 16;         // KV tokens per page
    int64_t kv_pages = 8192;        // pages in the pool (per attention layer)
    int64_t max_context = 32768;    // tokens per sequence (sizes block tables and decode workspaces)
    int64_t max_logit_rows = 256;   // logits rows per forward
    int64_t max_image_rows = 8192;  // projector output rows held for the next forward
    int64_t max_tiles = 32;         // tiles per vision call (one batch of images)
    kc::DType ssm_state = kc::DType::kF32;
    // Replay window K of the decode rows' state update (kernels/cuda/ops.h SsuParams::replay_window;
    // ReplaySSM, spec/serving.md §1.6): a slot's stored SSM state lags by up to K − 1 decode tokens whose
    // inputs are kept per slot and layer (K × 22 KB at the Holotron shapes), so a decode step reads the state
    // and writes it only every K-th token. Pending tokens are folded in before a prefill continues the slot
    // and before save_slot. 0 = off (every step reads and writes the state).
    int ssm_replay_window = 8;
    // With an fp32 state and replay: each slot's state held as two 16-bit planes, the values rounded to bf16
    // then the low 16 bits of their fp32 patterns (kernels/cuda/ops.h SsuParams::state_split). The state
    // stays exact fp32; a decode row that does not fold reads only the bf16 plane for y = S·C (half the
    // bytes; the reference computes that product from the state rounded to bf16 too). Same memory. Off: the
    // plain fp32 layout (A/B).
    bool ssm_state_split = true;
    // Whether the state is held as two planes: ssm_state_split where it applies (an fp32 state with replay).
    bool state_split_applies() const {
        return ssm_state_split && ssm_state == kc::DType::kF32 && ssm_replay_window > 0;
    }
    bool decode_graphs = true;   // replay decode-only steps from CUDA graphs
    bool autotune_gemms = true;  // time cuBLASLt candidates per GEMM shape (kernels/cuda/ops.h)
    // Language-model GEMMs of a new row count over 128 take the algorithm tuned for a row count of the same
    // 64-row bucket when it is valid for them (GemmContext::set_reuse_tuned_in_bucket) instead of being tuned
    // inside a step on their third use: fewer tuning stalls inside steps, and serving is no slower
    // (docs/BENCHMARKS.md).
    bool gemm_reuse_tuned_in_bucket = true;
    // GEMMs of ≤ 4 rows (decode steps of few sessions) may run on our small-m kernel where tuning finds it
    // faster than every cuBLASLt candidate (GemmContext::SmallM::kTuned); off: cuBLASLt only (A/B).
    bool small_m_kernel = true;
    // Its k split (kernels/cuda/ops.h gemv): 0 = automatic (warps share the long rows of n = 5,120 / 7,168
    // projections, so that the grid has ≥ 8 blocks an SM), 1 = one warp a row pair everywhere (A/B).
    int small_m_k_split = 0;
    // GEMMs may run on our Hopper kernel (kernels/cuda/gemm_wgmma.cu) where tuning finds it faster than every
    // cuBLASLt candidate (GemmContext::WgmmaGemm::kTuned; both contexts); the MLP's and the projector's ReLU²
    // then ride in its epilogue (on cuBLASLt gemm() runs them as their own pass). Off (the default): cuBLASLt
    // only; the kernel wins only the MLP up projection + ReLU² (bench_gemm) and serving does not gain
    // (docs/BENCHMARKS.md).
    bool gemm_wgmma = false;
    // With gemm_wgmma off: the ReLU² GEMMs of ≥ 512 rows (the MLP up projection and the projector's fc1 in
    // mixed steps) run on our Hopper kernel with the activation in its epilogue, untimed
    // (GemmContext::WgmmaGemm::kReluSquared); everything else on cuBLASLt. Off: serving does not gain from it
    // (docs/BENCHMARKS.md).
    bool gemm_wgmma_relu2 = false;
    bool lm_stream_priority =
        false;  // language-model steps at a higher stream priority than the vision tower
    bool vision_stream_priority =
        false;  // the vision tower at a higher stream priority than the language model
    // > 0: the vision tower's GEMMs are planned for this many SMs (cuBLASLt SM count target), so that the
    // bandwidth-bound language-model kernels running at the same time keep the others. 0: all SMs.
    int vision_gemm_sms = 0;
    // > 0: the language model's GEMMs are planned for this many SMs (experiments with two models' steps
    // running side by side). 0: all SMs.
    int lm_gemm_sms = 0;
    // Split-KV prefill attention of the language model (kernels/cuda/ops.h) when a step's blocks would
    // leave the GPU part idle and no decode attention runs beside it (overlap_attention_branches: the
    // decode rows' blocks fill the last wave instead); off: one pass over the keys per block (A/B).
    bool attention_splits = true;
    // Mixed steps (decode rows and prefill rows together): the prefill rows' conv + SSD scan (Mamba layers)
    // and prefill attention (attention layers) run on a second stream at the device's highest priority,
    // beside the decode rows' state update and decode attention (bandwidth-bound) on the language-model
    // stream, so that the two share SMs instead of running one after the other. Results are identical; mixed
    // steps and serving are faster (docs/BENCHMARKS.md).
    bool overlap_mamba_branches = true;
    // With overlap_mamba_branches: the decode rows' state update waits for the prefill rows' conv (so that
    // the scan's blocks are placed first and the update fills the room left); off: it starts as soon as its
    // own inputs are ready (A/B).
    bool ssu_after_prefill_conv = true;
    bool overlap_attention_branches = true;
    // Head-dim slices per head of the SSD scan (kernels/cuda/ops.h SsdVarlenParams::p_split); 0 = 1 when the
    // Mamba branches overlap (one block per SM leaves room for the state update's), else the kernel's rule.
    int ssd_split = 0;
    // The SSD scan on the Hopper wgmma kernel where it applies (SsdVarlenParams::wgmma: one prompt's heads,
    // one block an SM) in steps whose Mamba branches run one after the other; beside the decode rows' state
    // update (overlapped branches) the mma.sync kernel runs, since the wgmma block's registers leave an SM no
    // room for the update's blocks (the pair is slower on wgmma; docs/BENCHMARKS.md). Off: mma.sync
    // everywhere (A/B).
    bool ssd_wgmma = true;
    // Blocks per (sequence, head) of the decode rows' state update (SsuParams::row_split); 0 = the kernel's
    // rule.
    int ssu_split = 0;
    // The state update (and the replay fold) stages each block's state by one bulk copy on the copy engine
    // (SsuParams::bulk_stage; compute capability ≥ 9.0, as every target this engine is built for) instead of
    // cp.async by every thread; results are bit-identical, the update and the mixed step faster
    // (docs/BENCHMARKS.md). Off: A/B.
    bool ssu_bulk_stage = true;
    // Query rows per warp of the mma.sync prefill attention, language model and vision tower, where the wgmma
    // kernel below is off or unavailable (AttentionPrefillParams::rows_per_warp): 16, or 32 (K/V fragments
    // shared by two m-tiles; 0 = 16). 32: faster on the language model's prefill and on small ViT batches,
    // slightly slower on large ones, serving unchanged (bench_attention; docs/BENCHMARKS.md).
    int attention_rows_per_warp = 32;
    // Prefill attention on the Hopper wgmma kernel (AttentionPrefillParams::wgmma_key_tile: 0 = off, the
    // mma.sync kernel at attention_rows_per_warp; 64, 128 or 208 = its key tile, 208 only in the
    // warp-specialized kernel with TMA copies at head dim 80, i.e. the vision tower's), for the language
    // model's prefill rows and for the vision tower; compute capability 9.0 only (elsewhere the mma.sync
    // kernels run). Faster than mma.sync on every prefill shape bench_attention measures. The ViT's key tile
    // is 208 (5 tiles for a 1,032-token ViT tile instead of 9 of 128, the last holding 8 keys; consumers at
    // 240 registers by setmaxnreg), faster than 128; the language model's is 64, faster than 128
    // (docs/BENCHMARKS.md).
    int attention_wgmma_keys = 64;
    int vit_attention_wgmma_keys = 208;
    // The wgmma prefill attention as warp-specialized blocks (AttentionPrefillParams::wgmma_warp_specialized:
    // one copying warpgroup, two multiplying ones that overlap the softmax with P·V, one block an SM), for
    // the language model (paged cache: cp.async copies) and for the vision tower (contiguous rows: TMA
    // copies, kv_rows). Faster than the plain wgmma kernel on the language model's prefill chunks and on ViT
    // layers, where TMA copies beat cp.async (bench_attention; docs/BENCHMARKS.md).
    bool attention_wgmma_warp_specialized = true;
    bool vit_attention_wgmma_warp_specialized = true;
    // Where a mixed step's attention branches overlap, the language model's prefill attention on the
    // warp-specialized kernel (one 384-thread block fills an SM) instead of the plain wgmma kernel (two
    // 256-thread blocks an SM, whose SMs a decode-attention block can share as the blocks come and go). Alone
    // the warp-specialized kernel is faster, beside the decode the plain one, and serving gains with the
    // plain one (bench_attention --pair; docs/BENCHMARKS.md). Off: the plain kernel beside decode rows; steps
    // without decode rows keep attention_wgmma_warp_specialized.
    bool attention_ws_beside_decode = false;
    // The decode attention's pipelined kernel (AttentionDecodeParams::pipelined: each warp's next 16-key tile
    // in flight while it multiplies the current one). Off: one 32-key tile a warp at a time (A/B). Decode
    // graphs keep the kernel they were captured with.
    bool decode_attention_pipelined = true;
    // The decode attention on the TMA kernel (AttentionDecodeParams::tma: persistent blocks whose warps
    // stream K/V tiles through TMA rings, ≈ 64 KB in flight a block). In a mixed step it runs one block an SM
    // and is issued before the prefill attention, so that every SM holds one decode block and one prefill
    // block (the pair shares SMs instead of taking turns); decode-only steps run decode_tma_blocks_per_sm
    // blocks an SM. Decode graphs keep the kernel they were captured with.
    bool decode_attention_tma = false;
    int decode_tma_blocks_per_sm = 1;  // 1 or 2 (the decode workspace is sized for both)
    // A mixed step's prefill and decode attention in one persistent launch (kc::attention_mixed: each SM
    // multiplies prefill tiles from one ring while it streams decode tiles through another, GQA heads packed
    // for wgmma), instead of the two kernels side by side. Off: slower than the two kernels, in the layer and
    // in serving (docs/BENCHMARKS.md); where the kernel cannot run (kc::attention_mixed_usable) the two
    // kernels run one after the other.
    bool attention_mixed = false;
    // A mixed step's attention pair on disjoint SMs (kernels/cuda/green_context.h): the decode rows on a
    // green context of some SMs (the driver rounds up to its granularity), on the TMA kernel at two blocks an
    // SM (its split plan and grid for those SMs), the prefill rows on the other SMs (warp-specialized where
    // attention_wgmma_warp_specialized). On cp.async the decode kernels pull so few bytes an SM that they
    // need every SM; the TMA kernel's two blocks (≈ 128 KB in flight an SM) pull enough more that the pair is
    // shorter on split SMs than sharing all of them (bench_attention
    // --pair-green; docs/BENCHMARKS.md). Per step, GpuModel::green_for_step predicts both ways from the
    // step's sides (AttentionSplitModel) and splits where that is ≥ 3% faster, on the SM count predicted
    // fastest.
    //   −1 (auto): warm_up measures the model and the counts 40, 48, … (SMs − 40) on the device (a 100-row
    //   decode on 5,000
    //      keys beside a chunk of the warm-up's prefill rows on 5,000 past;
    //      GpuModel::calibrate_attention_split); without warm_up, or where that shape does not fit the
    //      limits, the pair shares every SM.
    //   N > 0: that count only (its factors measured in warm_up where it runs, else AttentionSplitCount's
    //   defaults). 0: off, the two kernels share every SM.
    // Only where the TMA kernel can run, the driver has green contexts and the device has SMs to spare (else
    // the shared pair; a refusal is noted once on stderr).
    int attention_green_decode_sms = -1;
    // The decode rows' once-a-step streams, their SSM state (state update and fold) and their K/V (decode
    // attention), marked evict-first in the L2 (SsuParams / AttentionDecodeParams::l2_evict_first), so that ≈
    // 25 GB a mixed step of them do not push the residual stream, activations and GEMM operand tiles out of
    // the 50 MB L2. Off: no hint (A/B). Decode graphs keep the setting they were captured with. The decode
    // kernels run slightly faster with it, serving is unchanged (docs/BENCHMARKS.md; docs/KERNELS.md,
    // "evict-first in the L2").
    bool l2_evict_first = true;
    // The Mamba layers' scan / state-update output y, which the gated norm reads, stored as bf16 instead of
    // fp32 (as the mamba_ssm kernels return it; HF's pure-PyTorch path, our parity reference, keeps fp32): 21
    // instead of 42 MB a layer written and read at 1,024 rows. The gated norm gets faster but the mixed step
    // does not (bench_step; docs/BENCHMARKS.md), so off: fp32, as the reference.
    bool mamba_y_bf16 = false;
    // The ViT MLP's GELU runs in fc1's GEMM epilogue (tanh form, kernels/cuda/ops.h GemmActivation) instead
    // of as its own exact-erf pass over the [tokens, 5120] activations; off: the separate pass (A/B, parity).
    bool vit_gelu_in_gemm = true;
    // The token sampler's binned selection (kernels/cuda/sampling.cu: two passes over a row, the radix digits
    // only where a bin overflows); off: the radix digits everywhere (A/B). Same tokens either way (tested).
    bool sampler_binned = true;
    // Programmatic dependent launch for this library's kernels (kernels/cuda/ops.h set_programmatic_launch):
    // each may be scheduled while the kernel before it in its stream finishes, waiting on the device for that
    // kernel's results, so that launch and setup overlap the previous kernel's tail. Results are identical.
    // Process-wide (the last model built or switched sets it); decode graphs keep the setting they were
    // captured with. Off: plain launches (A/B).
    bool programmatic_launch = true;
    // Past the last layer that mixes rows (Mamba or attention), a row's output feeds only its own logits:
    // where a step needs logits for fewer rows than it has (prefill chunks and mixed steps: one row a prompt
    // plus the decode rows), that layer's output projection and the MLP layers after it run on those rows
    // only, gathered first. The KV cache and the recurrent state still take every row; the logits are the
    // same computation on the same rows (GEMMs of other row counts may accumulate in another order). Holotron
    // ends "…M-": the last Mamba layer's out_proj and the last MLP layer. Mixed steps and serving are faster
    // with it (docs/BENCHMARKS.md). Off: every layer on every row (A/B).
    bool trailing_layers_on_logit_rows = true;
    // With trailing_layers_on_logit_rows, where the last mixer is a Mamba layer: its gate z (the first
    // d_inner columns of in_proj, read only by the gated norm) is computed for the logits rows only — in_proj
    // runs as its xBC | dt columns on every row and its z columns on the gathered rows — and the gated norm
    // runs on those rows. That saves the gate's share of in_proj on every other row; serving gains slightly
    // (docs/BENCHMARKS.md). gpu_test_gpu_forward's trailing-layer cases cover it. Off: the whole in_proj on
    // every row.
    bool last_mamba_gate_on_logit_rows = true;
};

// One image for the vision tower: its tiles' pixels [n_tiles, 3, S, S] fp32 on the host, and the first
// row of the image-row buffer its n_tiles · tokens_per_tile projected rows go to.
struct ImageJob {
    const float* pixels = nullptr;
    int64_t n_tiles = 0;
    int64_t first_row = 0;
};

// One sequence of a batch. Decode rows (n_tokens == 1, past > 0) must come before prefill rows.
struct SeqStep {
    int32_t slot = -1;            // Mamba state slot
    int64_t past = 0;             // tokens already in the state / KV
    std::vector<int32_t> tokens;  // new tokens
    std::vector<int32_t> pages;   // KV pages covering past + tokens.size() tokens, in order
    int64_t image_row = -1;       // first image row (in the image-row buffer) its image tokens take, or -1
    bool all_logits = false;      // logits for every new token (else the last only)
    // A decode row whose input id is still on the device: GpuModel::sampled_tokens()[token_from], written by
    // the previous step's sampler (a step issued before that step's tokens reach the host); `tokens` then
    // holds one placeholder. −1: the id is tokens[0].
    int32_t token_from = -1;
    bool is_decode() const { return tokens.size() == 1 && past > 0; }
};

// The attention pair's cost in a mixed step (GpuModel::green_for_step), from its two sides' sizes: decode K/V
// bytes and prefill FLOPs at the rates the shared pair's kernels reach alone on every SM; shared ≈ decode +
// shared_prefill_share · prefill; on split SMs ≈ overhead · max(decode_factor · decode, prefill_factor ·
// prefill) for each SM count. Defaults: an H100's at 56 + 76 SMs (bench_attention --pair-green);
// GpuModel::warm_up measures them on the device.
struct AttentionSplitModel {
    double decode_bytes_per_s = 2.8e12;
    double prefill_flops_per_s = 235e12;
    double shared_prefill_share = 0.62;
    bool measured = false;
};
struct AttentionSplitCount {
    double decode_factor = 1.12, prefill_factor = 1.45, overhead = 1.0;
    double shared_us = 0, split_us = 0;  // the calibration shape's pair both ways (0: not measured)
    bool measured = false;
};

class GpuModel {
public:
    static std::unique_ptr<GpuModel> load(const std::string& dir, const GpuLimits& limits);
    // Random weights drawn on the GPU from `cfg` (benchmarks).
    static std::unique_ptr<GpuModel> random(ModelConfig cfg, const GpuLimits& limits, uint64_t seed);
    ~GpuModel();

    const ModelConfig& config() const { return cfg_; }
    const GpuLimits& limits() const { return limits_; }
    // A/B switch for benchmarks, between steps: takes from `from` the limits that only choose how a step runs
    // (overlap_*_branches, ssu_after_prefill_conv, ssd_split, ssd_wgmma, ssu_split, ssu_bulk_stage,
    // attention_splits, attention_rows_per_warp, *attention_wgmma_keys, *attention_wgmma_warp_specialized,
    // attention_ws_beside_decode, decode_attention_pipelined, decode_attention_tma, decode_tma_blocks_per_sm,
    // attention_mixed, attention_green_decode_sms, l2_evict_first, vit_gelu_in_gemm, mamba_y_bf16,
    // sampler_binned, programmatic_launch)
    // and nothing that sized a buffer. attention_splits takes effect only if the model was built with it (its
    // workspace).
    void set_step_knobs(const GpuLimits& from) {
        limits_.overlap_mamba_branches = from.overlap_mamba_branches;
        limits_.overlap_attention_branches = from.overlap_attention_branches;
        limits_.ssu_after_prefill_conv = from.ssu_after_prefill_conv;
        limits_.ssd_split = from.ssd_split;
        limits_.ssd_wgmma = from.ssd_wgmma;
        limits_.ssu_split = from.ssu_split;
        limits_.ssu_bulk_stage = from.ssu_bulk_stage;
        limits_.attention_splits = from.attention_splits;
        limits_.attention_rows_per_warp = from.attention_rows_per_warp;
        limits_.attention_wgmma_keys = from.attention_wgmma_keys;
        limits_.vit_attention_wgmma_keys = from.vit_attention_wgmma_keys;
        limits_.attention_wgmma_warp_specialized = from.attention_wgmma_warp_specialized;
        limits_.vit_attention_wgmma_warp_specialized = from.vit_attention_wgmma_warp_specialized;
        limits_.attention_ws_beside_decode = from.attention_ws_beside_decode;
        limits_.decode_attention_pipelined = from.decode_attention_pipelined;
        limits_.decode_attention_tma = from.decode_attention_tma;
        limits_.decode_tma_blocks_per_sm = from.decode_tma_blocks_per_sm;
        limits_.attention_mixed = from.attention_mixed;
        limits_.attention_green_decode_sms = from.attention_green_decode_sms;
        limits_.l2_evict_first = from.l2_evict_first;
        limits_.vit_gelu_in_gemm = from.vit_gelu_in_gemm;
        limits_.mamba_y_bf16 = from.mamba_y_bf16;
        limits_.sampler_binned = from.sampler_binned;
        limits_.programmatic_launch = from.programmatic_launch;
        limits_.trailing_layers_on_logit_rows = from.trailing_layers_on_logit_rows;
        limits_.last_mamba_gate_on_logit_rows = from.last_mamba_gate_on_logit_rows;
        kernels::cuda::set_programmatic_launch(limits_.programmatic_launch);
    }
    cudaStream_t stream() const { return stream_; }
    cudaStream_t vision_stream() const { return vision_stream_; }
    int64_t weight_bytes() const { return w_.bytes; }
    int64_t state_bytes_per_slot() const;
    int64_t kv_bytes_per_token() const;
    int32_t image_token_id() const { return image_token_id_; }
    void set_image_token_id(int32_t id) { image_token_id_ = id; }

    // Vision work runs on its own stream and overlaps language-model steps. Each call returns a ticket;
    // a forward whose rows use image rows waits for the ticket it is given (tickets are ordered: waiting
    // for one covers every earlier one).
    static constexpr uint64_t kLatestVision = ~uint64_t{0};
    // A batch of images (≤ max_tiles tiles in all) through the vision tower in one pass: pixels are
    // staged in pinned memory and uploaded asynchronously; projector rows land at each job's first_row.
    uint64_t encode_images(const std::vector<ImageJob>& jobs);
    // One image; returns the number of rows (n_tiles · tokens per tile).
    int64_t encode_images(const float* pixels, int64_t n_tiles, int64_t first_row);
    const bf16* image_rows() const { return image_rows_.as<bf16>(); }
    // Image rows computed elsewhere (e.g. an embedding cache) copied into the buffer.
    uint64_t put_image_rows(const bf16* device_rows, int64_t n_rows, int64_t first_row);

    // One step over `seqs`; logits rows (per sequence: all new tokens or the last) end on the device,
    // in sequence order. Returns the number of logits rows. Decode-only steps replay a CUDA graph.
    int64_t forward(const std::vector<SeqStep>& seqs, uint64_t vision_ticket = kLatestVision);
    // Runs throw-away steps on the scratch slot and page so that the GEMM shapes of every decode-graph batch
    // bucket and of a `prefill_tokens`-row step (with row_buckets: and of every 64-row bucket of row counts
    // over 128 below it, the steps a partly filled mixed step runs) are planned and tuned before serving
    // (tuning inside a step stalls it, and a serving run meets hundreds of shapes). Returns the seconds it
    // took.
    double warm_up(int64_t prefill_tokens, bool row_buckets = true);
    // Vision passes over zero pixels (image rows from row 0: call before any request), once each with their
    // GEMM shapes tuned on that first use; each entry is one pass as its images' tile counts. Returns
    // seconds. A pass that is empty, has an image of no tiles or exceeds max_tiles / max_image_rows is an
    // error.
    double warm_up_vision(const std::vector<std::vector<int64_t>>& batches);
    int64_t decode_graphs_captured() const { return graphs_ ? graphs_->captured() : 0; }
    int64_t decode_graph_launches() const { return graphs_ ? graphs_->launches() : 0; }
    // Attention layers whose pair ran on split SMs (GpuLimits::attention_green_decode_sms).
    int64_t green_attention_pairs() const { return green_pairs_; }
    // The attention pair's cost model and the split SM counts it chooses among, as warm_up measured them
    // (GpuLimits:: attention_green_decode_sms); counts the driver refused are absent.
    const AttentionSplitModel& attention_split_model() const { return split_model_; }
    std::vector<std::pair<int, AttentionSplitCount>> attention_split_counts() const;
    // One line on what calibrate_attention_split measured ("" where it did not run).
    std::string attention_split_report() const;
    // warm_up's measurement of AttentionSplitModel and of each split count
    // (GpuLimits::attention_green_decode_sms) on a serving-sized pair (decode rows beside a chunk of
    // prefill_tokens rows in all) over the first KV pages, which it reads and never writes; returns without
    // measuring where the shape does not fit or nothing splits. Public for benchmarks that skip warm_up
    // (bench_step).
    void calibrate_attention_split(int64_t prefill_tokens);
    // GPU time per op (profiling runs; while enabled, decode steps run kernel by kernel, not as graphs).
    OpTimer& op_timer() { return timer_; }
    // The GEMM shapes tuned so far (language model, then vision tower).
    std::vector<kc::GemmContext::TuneRecord> gemm_tune_log() const;
    // How many GEMM shapes have been tuned and the GPU seconds their tuning runs took (both contexts).
    std::pair<int64_t, double> gemm_tune_totals() const;
    // [rows, vocab] fp32 on the device, rows logits_stride() apart (the vocabulary rounded up to 64 so the
    // lm_head GEMM writes aligned rows; a vocabulary of 131,075 would otherwise force 4-byte-aligned
    // kernels).
    const float* logits() const { return logits_.as<float>(); }
    // max_logit_rows int32 on the device where the engine's sampler writes a step's tokens, so that the next
    // step's decode rows can read their ids from it before the host has them (SeqStep::token_from).
    int32_t* sampled_tokens() { return sampled_tokens_.as<int32_t>(); }
    int64_t logits_stride() const { return (cfg_.llm.vocab_size + 63) / 64 * 64; }
    void copy_logits_to_host(int64_t rows, std::vector<float>& host);

    // State slots and KV pages: save to / restore from host memory (offload; a fork is a host copy too).
    // save_slot first folds the slot's pending replay tokens into its state (GpuLimits::ssm_replay_window),
    // so the host copy is the plain state.
    void save_slot(int32_t slot, std::vector<uint8_t>& host);
    void load_slot(int32_t slot, const std::vector<uint8_t>& host);
    void save_pages(const std::vector<int32_t>& pages, std::vector<uint8_t>& host) const;
    void load_pages(const std::vector<int32_t>& pages, const std::vector<uint8_t>& host);

    // Dumps of the last forward for parity tests: residual stream after each layer when enabled.
    void keep_layer_outputs(bool keep) { keep_layers_ = keep; }
    void copy_layer_output(int64_t layer, int64_t n_tok, std::vector<float>& host) const;
    void copy_vision_features(int64_t n_tiles,
                              std::vector<float>& host) const;  // [n_tiles, side², width] of the last encode

private:
    GpuModel(ModelConfig cfg, GpuWeights w, const GpuLimits& limits, cudaStream_t stream);
    void allocate();
    // A logits row source: `count` consecutive tokens of the step starting at token `first`.
    struct LogitRun {
        int64_t first, count;
    };
    // The step's logits rows: its runs and their row total; GEMMs over them take gemm_rows rows (count
    // rounded up to a multiple of 8, capped by the buffers), so that a step's varying logits row count maps
    // onto few GEMM shapes, each tuned once in warm_up. Rows past count hold stale values, and what is
    // computed from them is never read.
    struct LogitRows {
        const std::vector<LogitRun>& runs;
        int64_t count, gemm_rows;
    };
    // count rounded up to a multiple of 8, within the logits buffers (the lm_head's and the trailing layers'
    // GEMM rows).
    int64_t logit_gemm_rows(int64_t count) const;
    // The mixers add their output projection into the residual stream for every row of the step, or with
    // `tail` only for the logits rows (GpuLimits::trailing_layers_on_logit_rows: the residual rows are
    // gathered into logit_in_ first).
    void mamba_layer(size_t li, const GpuLayer& L, const LogitRows* tail);
    void attention_layer(size_t li, const GpuLayer& L, const LogitRows* tail);
    // Adds x [n_tok, k] · wᵀ into the residual stream (the mixers' last GEMM), or with `tail` only the logits
    // rows' part into logit_in_ (residual rows gathered there, x rows gathered into big_, which the mixer no
    // longer needs, unless x_gathered: x already holds just those rows).
    void mixer_output(const bf16* x, int64_t k, const GpuMatrix& w, const char* op, const LogitRows* tail,
                      bool x_gathered = false);
    // h ← h + down(ReLU²(up(x))) for n rows: x = normed_, h = `residual` (residual_ or, past the last mixer,
    // logit_in_).
    void mlp_layer(const GpuLayer& L, float* residual, int64_t n);
    // Copies the rows of `runs` (row_bytes each) from src to consecutive rows of dst.
    void gather_rows(void* dst, const void* src, size_t row_bytes, const std::vector<LogitRun>& runs);
    // Whether this step runs its prefill rows' branch of a layer on branch_stream_ (GpuLimits overlap
    // flags; mixed steps only; never while per-op timing, whose events assume one stream).
    bool overlap_branches(bool enabled) const;
    // A mixed step's attention pair (model/cuda/attention_pair.cpp): both kinds of rows of step_ from qkv
    // into out, on split SMs where `green` is given, else sharing them (one after the other, side by side on
    // branch_stream_, or in one launch: GpuLimits).
    void attention_pair(size_t li, const bf16* qkv, bf16* out, kc::GreenPair* green);
    kc::AttentionPrefillParams pair_prefill_params(size_t li, const bf16* qkv, bf16* out, bool overlap,
                                                   bool green) const;
    // (Checks that decode_ws_ holds the plan's workspace.)
    kc::AttentionDecodeParams pair_decode_params(size_t li, const bf16* qkv, bf16* out,
                                                 const kc::GreenPair* green) const;
    // Whether the TMA decode kernel can run on this model's caches (kc::attention_decode_tma_usable; asked
    // once).
    bool tma_decode_usable(size_t li);
    // The green contexts this step's pair should run on (the count AttentionSplitModel predicts fastest,
    // where that beats sharing the SMs by ≥ 3%), or null: not a mixed step, the knob off, no TMA decode, or
    // every count refused.
    kc::GreenPair* green_for_step(size_t li);
    // The green contexts for `sms` decode SMs, created on first use; null where the device or driver refused
    // them (noted once on stderr).
    kc::GreenPair* green_pair(int sms);
    // branch_stream_ waits for everything issued so far on stream_.
    void fork_branch();
    // stream_ waits for everything issued so far on branch_stream_.
    void join_branch();
    // Embeddings, every layer and the logits of the step planned in step_.
    void enqueue_step(const std::vector<LogitRun>& runs, int64_t logit_rows);
    // Folds the pending replay tokens of `n` slots (device arrays of slots and their counts) into layer li's
    // state.
    void fold_replay(size_t li, const int32_t* slots, const int32_t* counts, int64_t n, cudaStream_t stream);
    uint64_t record_vision();
    void wait_vision(uint64_t ticket);

    ModelConfig cfg_;
    GpuWeights w_;
    GpuLimits limits_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<kc::GemmContext> gemm_;
    // The vision tower runs on its own stream so that it overlaps the language model's steps (decode
    // steps leave the tensor cores idle). Ticket t's completion is vision_events_[t % ring]; an event is
    // re-recorded only after its previous ticket completed, so tickets older than the ring are done.
    cudaStream_t vision_stream_ = nullptr;
    std::vector<cudaEvent_t> vision_events_;
    uint64_t vision_issued_ = 0;
    std::unique_ptr<kc::GemmContext> vision_gemm_;
    // The prefill rows' branch of a mixed step's layer (GpuLimits::overlap_*_branches), at the highest
    // priority; fork / ready (the prefill conv is done) / join events, re-recorded every layer.
    cudaStream_t branch_stream_ = nullptr;
    cudaEvent_t branch_fork_ = nullptr, branch_ready_ = nullptr, branch_join_ = nullptr;
    // GpuLimits::attention_green_decode_sms: per SM count asked for, its green contexts (null: refused) and
    // factors.
    struct GreenSplit {
        std::unique_ptr<kc::GreenPair> pair;
        AttentionSplitCount cost;
    };
    std::map<int, GreenSplit> green_;
    AttentionSplitModel split_model_;
    int tma_decode_usable_ =
        -1;               // kc::attention_decode_tma_usable for this model's caches (−1: not yet asked)
    int device_sms_ = 0;  // the device's SMs (decode workspace bound, green splits)
    int64_t green_pairs_ = 0;   // attention layers run on the green contexts (tests)
    DeviceBuffer vision_cu_;    // [max_tiles + 1] int32 tile offsets (all tiles have the same length)
    PinnedBuffer vit_staging_;  // [max_tiles, 3, S, S] fp32 pixels on their way to vit_pixels_
    cudaEvent_t staging_free_ = nullptr;  // the last upload from vit_staging_ finished
    // Decode-only steps: graphs over padded batches; padding rows use the scratch slot and page.
    std::unique_ptr<DecodeGraphs> graphs_;
    OpTimer timer_;
    int32_t scratch_slot_ = 0, scratch_page_ = 0;
    bool warming_up_ = false;  // warm_up's steps may name the scratch slot
    int32_t image_token_id_ = -1;

    // Persistent state: per Mamba layer conv + SSM slots; per attention layer K and V page pools.
    std::vector<DeviceBuffer> conv_state_, ssm_state_, k_cache_, v_cache_;
    // Replay entries per Mamba layer ([slots, K, entry] bf16) and, on the host, each slot's pending token
    // count (every decode step adds one to all layers alike; the K-th folds them; a prefill step or save_slot
    // folds the rest). The scratch slot's count stays 0.
    std::vector<DeviceBuffer> ssm_replay_;
    std::vector<int32_t> replay_count_;
    DeviceBuffer fold_meta_;  // [slot, count] of save_slot's fold
    // Activation workspaces sized by limits.
    DeviceBuffer residual_, normed_, big_, xbc_, y_, attn_, logits_, ssd_ws_, decode_ws_, embed_ws_,
        logit_in_, image_rows_;
    DeviceBuffer sampled_tokens_;  // sampled_tokens()
    DeviceBuffer prefill_ws_;      // split-KV partial results of prefill attention
    DeviceBuffer mixed_counters_;  // kc::attention_mixed's work-queue counters (zero between launches)
    DeviceBuffer vit_h_, vit_ln_, vit_big_, vit_attn_, vit_patches_, vit_pixels_, vit_shuffled_;
    std::vector<DeviceBuffer> layer_out_;
    bool keep_layers_ = false;
    // Per-step metadata: one pinned staging buffer and its device mirror. The buffer is rewritten only once
    // the previous step's upload from it has run (meta_uploaded_): steps that sample nothing (prefill
    // chunks) are queued without the host waiting for the GPU.
    PinnedBuffer meta_host_;
    DeviceBuffer meta_dev_;
    cudaEvent_t meta_uploaded_ = nullptr;

    // The current step (set by forward for the layer functions).
    struct Step {
        int64_t n_tok = 0, n_dec = 0, n_pre = 0, n_pre_tok = 0, max_pages = 0, max_len = 0, max_q = 0;
        int64_t max_len_dec = 0;  // the decode rows' longest context (their attention's split plan; max_len
                                  // counts prefill rows too)
        double dec_keys = 0,
               pre_pairs = 0;  // keys the decode rows read; query-key pairs of the prefill rows (causal)
        const int32_t *slots_dec = nullptr, *slots_pre = nullptr, *cu_pre = nullptr, *bt_dec = nullptr,
                      *bt_pre = nullptr;
        const int32_t *lens_dec = nullptr, *lens_pre = nullptr, *slot_mapping = nullptr;
        const int32_t *ids = nullptr, *cu_all = nullptr, *image_offsets = nullptr;
        const int32_t* fed_from = nullptr;  // [n_dec] SeqStep::token_from of the decode rows (null: none fed)
        const uint8_t* has_init_pre = nullptr;
        // Replay: the decode rows' pending counts; the prefill rows whose slot has pending tokens to fold
        // first.
        const int32_t *replay_dec = nullptr, *fold_slots = nullptr, *fold_counts = nullptr;
        int64_t n_fold = 0;
    } step_;
};

}  // namespace surf::model::cuda
