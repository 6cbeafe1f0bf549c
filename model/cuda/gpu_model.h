// The GPU forward pass: one batched step over many sequences, decode rows (one new token on a
// sequence with state) and varlen prefill rows (chunked or whole prompts) together. All buffers —
// weights, Mamba state slots, the paged KV pool, activation workspaces, per-step metadata — are
// allocated at construction for the configured limits; a forward allocates nothing.
#pragma once

#include <array>
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
#include "model/executor.h"

namespace surf::model::cuda {

namespace kc = surf::kernels::cuda;

// The GPU model's options, in three groups by when they apply. Each knob's measurements are in
// docs/BENCHMARKS.md; A/B switches stay so that a benchmark can compare both ways in one run.

// Sizes fixed when GpuModel allocates its buffers (state slots, the KV pool, workspaces).
struct GpuCapacity {
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
    // Replay window K of the decode rows' state update (SsuParams::replay_window; spec/serving.md §1.6): a
    // slot's stored state lags by up to K − 1 decode tokens whose inputs are kept per slot, so a decode step
    // reads and writes the state only every K-th token. 0 = off.
    int ssm_replay_window = 8;
    // An fp32 state with replay held as a bf16 plane plus the low 16 bits (SsuParams::state_split): exact,
    // and a decode row that does not fold reads half the bytes.
    bool ssm_state_split = true;
    bool state_split_applies() const {
        return ssm_state_split && ssm_state == kc::DType::kF32 && ssm_replay_window > 0;
    }
};

// Choices made once, when the model is built: graph capture, GEMM tuning and kernels, streams, SM targets.
struct GpuSetup {
    bool decode_graphs = true;   // replay decode-only steps from CUDA graphs
    bool autotune_gemms = true;  // time cuBLASLt candidates per GEMM shape
    bool gemm_reuse_tuned_in_bucket =
        true;                    // a new row count > 128 reuses its 64-row bucket's tuned algorithm
    bool small_m_kernel = true;  // GEMMs of ≤ 4 rows may run on our small-m kernel where it wins
    int small_m_k_split = 0;     // its k split: 0 = automatic, 1 = one warp a row pair (A/B)
    bool gemm_wgmma = false;     // our Hopper GEMM where tuning finds it faster (off: serving does not gain)
    bool gemm_wgmma_relu2 =
        false;  // the ReLU² GEMMs of ≥ 512 rows on our Hopper GEMM, activation in its epilogue
    bool lm_stream_priority = false;      // language-model steps above the vision tower's stream
    bool vision_stream_priority = false;  // the vision tower above the language model's stream
    int vision_gemm_sms = 0;  // > 0: the ViT's GEMMs planned for this many SMs (cuBLASLt SM target); 0: all
    int lm_gemm_sms = 0;      // > 0: the language model's GEMMs planned for this many SMs; 0: all
    // FP8 E4M3 on load for the language model's linear layers of a bf16/fp32 checkpoint (upload_weights,
    // random_weights); an FP8 checkpoint runs in FP8 without it.
    Quantize quantize = Quantize::kNone;
    // FP8 GEMMs: cuBLASLt's unscaled products in bf16 before the scale epilogue (Fp8GemmContext::
    // set_bf16_products), else fp32.
    bool fp8_bf16_products = true;
    // FP8 GEMMs: cuBLASLt's fast accumulation (Fp8GemmContext::set_fast_accum), as FP8 serving engines run
    // it: faster, with an accumulation error that grows with k yet stays far below E4M3's own steps (measured
    // in docs/BENCHMARKS.md, FP8 accuracy); false promotes the sums into fp32 every few k-steps.
    bool fp8_fast_accum = true;
    // FP8 GEMMs: CUTLASS's kernel with the scales in its epilogue timed beside cuBLASLt's matmul + epilogue
    // pass when a shape is tuned, the faster kept (Fp8GemmContext::set_cutlass; builds with CUTLASS only).
    bool fp8_cutlass = true;
    // With FP8 language-model weights: the vision tower's qkv, fc1 and fc2 in FP8 too (quantize_vision on
    // load, activations per token, the vision stream's own Fp8GemmContext). On surf-tiny's trained tower it
    // changes the image-conditioned next-token choice less often than the FP8 language model does
    // (docs/BENCHMARKS.md, FP8 accuracy); false keeps the tower bf16 (`--vit-fp8 0`).
    bool vit_fp8 = true;
};

// How each step runs; GpuModel::set_step_options changes them between steps. Decode graphs keep the settings
// they were captured with.
struct GpuStepOptions {
    // Mixed steps: the prefill rows' conv + SSD scan beside the decode rows' state update, on a second
    // stream.
    bool overlap_mamba_branches = true;
    bool ssu_after_prefill_conv =
        true;  // the state update waits for the prefill conv, so the scan is placed first
    bool overlap_attention_branches = true;  // mixed steps: prefill and decode attention on two streams
    int ssd_split = 0;  // head-dim slices of the SSD scan; 0 = the rule for the branch layout
    // Split-KV prefill attention where a step's blocks would leave SMs idle; its workspace is allocated only
    // when the model is built with it on.
    bool attention_splits = true;
    bool ssd_wgmma = true;  // the SSD scan on the wgmma kernel where it runs alone (mma.sync beside decode)
    int ssu_split = 0;      // blocks per (sequence, head) of the state update; 0 = the kernel's rule
    bool ssu_bulk_stage = true;  // the state update stages its state by one bulk copy instead of cp.async
    int attention_rows_per_warp = 32;  // query rows per warp of the mma.sync prefill attention: 16 or 32
    int attention_wgmma_keys = 64;  // the wgmma prefill attention's key tile for the language model (0 = off)
    int vit_attention_wgmma_keys =
        208;  // ... and for the vision tower (208: warp-specialized, TMA, head dim 80)
    bool attention_wgmma_warp_specialized =
        true;  // warp-specialized wgmma prefill attention (language model)
    bool vit_attention_wgmma_warp_specialized = true;  // ... and for the vision tower
    bool attention_ws_beside_decode =
        false;  // beside decode rows too (off: the plain wgmma kernel shares SMs better)
    bool decode_attention_pipelined = true;  // decode attention with the next key tile in flight
    bool decode_attention_tma = false;  // decode attention on the TMA kernel (persistent blocks, TMA rings)
    int decode_tma_blocks_per_sm = 1;   // 1 or 2 (the decode workspace is sized for both)
    // A mixed step's attention pair on disjoint SMs (green contexts), decode on the TMA kernel, where the
    // step's cost model (AttentionSplitModel) predicts ≥ 3% gain: −1 = SM counts calibrated in warm_up, N > 0
    // = that count, 0 = off. Only where the TMA kernel and green contexts are available.
    int attention_green_decode_sms = -1;
    bool l2_evict_first = true;    // the decode rows' state and K/V marked evict-first in the L2
    bool mamba_y_bf16 = false;     // the scan's output y stored as bf16 (off: fp32, as the reference)
    bool vit_gelu_in_gemm = true;  // the ViT MLP's GELU (tanh form) in fc1's epilogue (off: exact erf pass)
    bool sampler_binned = true;  // the sampler's binned selection (same tokens; off: radix digits everywhere)
    bool programmatic_launch =
        true;  // kernels may be scheduled while the previous one finishes (same results)
    // Past the last row-mixing layer, the output projection and MLP layers run on the logits rows only.
    bool trailing_layers_on_logit_rows = true;
    // With it, where the last mixer is a Mamba layer: its gate z computed for the logits rows only.
    bool last_mamba_gate_on_logit_rows = true;
    // FP8 linear layers: the norms and the up projection's epilogue write the next GEMM's E4M3 input beside
    // their bf16 output (kc::Fp8RowOut), instead of a quantization pass before the GEMM (same codes).
    bool fp8_fused_quantize = true;
};

// Every option of a GpuModel (GpuModel::load / random), each group also reachable on its own.
struct GpuLimits : GpuCapacity, GpuSetup, GpuStepOptions {};

// A batch's rows and the vision tower's images, as the scheduler plans them (model/executor.h). A decode
// row's token_from indexes sampled_tokens().
using surf::model::ImageJob;
using surf::model::SeqStep;

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

class AttentionTimer;  // attention_pair.cpp

class GpuModel {
public:
    // Both refuse a config whose shapes the kernels do not run (supported_shapes.h: kUnsupported naming every
    // such config.json field) before anything is allocated on the device.
    static std::unique_ptr<GpuModel> load(const std::string& dir, const GpuLimits& limits);
    // Random weights drawn on the GPU from `cfg` (benchmarks).
    static std::unique_ptr<GpuModel> random(ModelConfig cfg, const GpuLimits& limits, uint64_t seed);
    ~GpuModel();

    const ModelConfig& config() const { return cfg_; }
    const GpuLimits& limits() const { return limits_; }
    // Between steps (A/B benchmarks): the per-step options; sizes and setup stay. attention_splits takes
    // effect only if the model was built with it (its workspace).
    void set_step_options(const GpuStepOptions& options) {
        static_cast<GpuStepOptions&>(limits_) = options;
        kernels::cuda::set_programmatic_launch(limits_.programmatic_launch);
    }
    cudaStream_t stream() const { return stream_; }
    cudaStream_t vision_stream() const { return vision_stream_; }
    int64_t weight_bytes() const { return w_.bytes; }
    bool fp8() const { return fp8_gemm_ != nullptr; }  // any language-model linear layer in FP8
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
    // One line on the FP8 GEMM shapes planned so far and how they run ("" without FP8).
    std::string fp8_gemm_report() const;
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
    // allocate's steps: the limits' checks; state slots and KV pools; activation buffers; the per-step
    // workspaces (SSD scan, attention, embeddings, metadata); the vision tower's buffers.
    void check_limits() const;
    void allocate_state();
    void allocate_activations();
    void allocate_step_workspaces();
    void allocate_attention_workspaces(int64_t max_pages);
    void allocate_vision();
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
    // mamba_layer's steps: in_proj (without the z columns when the gate is computed on the logits rows
    // only); the prefill rows' conv + SSD scan on `pre_stream`; the decode rows' conv update + state update;
    // the logits rows' z GEMM, pointing the gated norm at those rows.
    void mamba_in_proj(const GpuLayer& L, bool gate_on_tail);
    void mamba_prefill_rows(size_t li, const GpuLayer& L, cudaStream_t pre_stream, bool overlap);
    void mamba_decode_rows(size_t li, const GpuLayer& L, bool overlap);
    void mamba_gate_on_tail(const GpuLayer& L, const LogitRows& tail, kc::GatedRmsNormParams& gn);
    // The scan's output y [n_tok, H·P] (GpuLimits::mamba_y_bf16: bf16, else fp32; y_ is sized for fp32):
    // its dtype and the address of a row.
    kc::DType mamba_y_dtype() const;
    void* mamba_y(int64_t row) const;
    void attention_layer(size_t li, const GpuLayer& L, const LogitRows* tail);
    // Adds x [n_tok, k] · wᵀ into the residual stream (the mixers' last GEMM), or with `tail` only the logits
    // rows' part into logit_in_ (residual rows gathered there, x rows gathered into big_, which the mixer no
    // longer needs, unless x_gathered: x already holds just those rows).
    void mixer_output(const bf16* x, int64_t k, const GpuMatrix& w, const char* op, const LogitRows* tail,
                      bool x_gathered = false);
    // A language-model linear layer: y ← x·wᵀ over rows [row0, row0 + p.n) of w, with p as kc::gemm takes
    // it less its weight pointer. A bf16 w goes through gemm_; an FP8 w quantizes x to E4M3 per token (or
    // with the part's static input scale) into fp8_x_ and runs fp8_gemm_.
    // y_fp8 (from fp8_out_for): y's E4M3 codes too, for the next linear() on y.
    void linear(kc::GemmParams p, const GpuMatrix& w, int64_t row0 = 0, const kc::Fp8RowOut& y_fp8 = {});
    // linear's FP8 GEMM over n rows of w from `row` sharing one activation scheme, into y's columns from
    // y_col; x's codes come from `ready` where they match x, else from a quantization into fp8_x_.
    struct Fp8Ready;
    void fp8_linear_rows(const kc::GemmParams& p, const GpuMatrix& w, float input_scale, int64_t row,
                         int64_t n, int64_t y_col, Fp8Ready& ready, const kc::Fp8RowOut& y_fp8);
    // A producer's FP8 output (into fp8_x_) for its result x [rows, cols] that the linear layer w takes
    // next; none where w is not FP8, its parts quantize x with different static scales, the option is off
    // or the buffer is too small.
    kc::Fp8RowOut fp8_out_for(const GpuMatrix& w, int64_t rows, int64_t cols, bool keep_y = true) const;
    // Records that fp8_x_ holds x's codes (after the producer's launch; nothing where out has none).
    void set_fp8_ready(const kc::Fp8RowOut& out, const void* x, int64_t rows, int64_t cols);
    // The linear layer a layer's input norm feeds.
    static const GpuMatrix& first_linear(const GpuLayer& layer);
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
    // calibrate_attention_split's steps: the serving-sized step staged in step_ (false where it does not
    // fit), the shared pair measured (µs of decode alone, prefill alone, the pair), then each split count.
    bool stage_calibration_step(int64_t prefill_tokens, DeviceBuffer& meta);
    std::array<double, 3> measure_shared_pair(size_t li, AttentionTimer& timer);
    void measure_split_counts(size_t li, AttentionTimer& timer, const std::array<double, 3>& shared);
    // branch_stream_ waits for everything issued so far on stream_.
    void fork_branch();
    // stream_ waits for everything issued so far on branch_stream_.
    void join_branch();
    // forward's steps: checks the rows against the limits and counts them into step_ (plus the logits rows
    // and the rows fed from sampled_tokens()); one row's checks.
    void plan_step(const std::vector<SeqStep>& seqs, int64_t& logit_rows, int64_t& n_fed);
    void check_row(const SeqStep& s) const;
    // A padding row of a graph step: token 0 on the scratch slot and page.
    SeqStep padding_row() const;
    // Word offsets of the per-step metadata's regions in meta_host_ / meta_dev_ (int32 words).
    struct MetaLayout {
        int64_t ids = 0, cu_all = 0, img = 0, slots_dec = 0, lens_dec = 0, bt_dec = 0, slots_pre = 0,
                cu_pre = 0, lens_pre = 0, bt_pre = 0, slot_map = 0, init = 0, replay = 0, fold_slots = 0,
                fold_counts = 0, fed = 0, words = 0;
    };
    MetaLayout meta_layout(int64_t rows, int64_t K, bool with_fed) const;
    // Packs the step's metadata for `rows` rows (seqs, then padding rows), uploads it with one copy and
    // points step_ at the device copy; advances the replay counts.
    void upload_metadata(const std::vector<SeqStep>& seqs, int64_t rows, bool with_fed);
    // The prefill rows that continue a slot with pending replay tokens, and their counts.
    void collect_folds(const std::vector<SeqStep>& seqs, std::vector<int32_t>& fold_slots,
                       std::vector<int32_t>& fold_counts) const;
    void fill_metadata(const std::vector<SeqStep>& seqs, int64_t rows, int64_t K, bool with_fed,
                       const MetaLayout& m, int32_t* host) const;
    void advance_replay_counts(const std::vector<SeqStep>& seqs, int64_t K);
    // The logits rows of `rows` rows (seqs, then padding rows): per row its last token or all of them.
    std::vector<LogitRun> logit_runs(const std::vector<SeqStep>& seqs, int64_t rows) const;
    // Embeddings, every layer and the logits of the step planned in step_.
    void enqueue_step(const std::vector<LogitRun>& runs, int64_t logit_rows);
    // Folds the pending replay tokens of `n` slots (device arrays of slots and their counts) into layer li's
    // state.
    void fold_replay(size_t li, const int32_t* slots, const int32_t* counts, int64_t n, cudaStream_t stream);
    // The vision pass in its steps: the jobs checked (their tile count), the tiles embedded, each ViT
    // block, then the projector into each image's rows.
    int64_t count_image_tiles(const std::vector<ImageJob>& jobs) const;
    void embed_tiles(const std::vector<ImageJob>& jobs, int64_t n_tiles);
    void vit_block(const GpuVitBlock& B, int64_t n_tiles);
    // One ViT linear layer y = act(x·Wᵀ + bias + beta·y) on the vision stream: cuBLASLt in bf16, or (FP8 W)
    // x quantized per token into vit_q_ and vision_fp8_gemm_.
    void vit_linear(const GpuMatrix& W, const bf16* x, const void* bias, void* y, kc::DType y_dtype,
                    int64_t rows, float beta, kc::GemmActivation act = kc::GemmActivation::kNone);
    void project_images(const std::vector<ImageJob>& jobs, int64_t n_tiles);
    uint64_t record_vision();
    void wait_vision(uint64_t ticket);

    ModelConfig cfg_;
    GpuWeights w_;
    GpuLimits limits_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<kc::GemmContext> gemm_;
    // FP8 weights only: their GEMMs' context, and the activations quantized for the next one ([max_tokens,
    // fp8_cols_] E4M3 codes, [max_tokens] fp32 scales).
    std::unique_ptr<kc::Fp8GemmContext> fp8_gemm_;
    DeviceBuffer fp8_x_, fp8_x_scale_;
    int64_t fp8_cols_ = 0;
    // The matrix whose E4M3 codes a producer left in fp8_x_ (set_fp8_ready). The next linear() call takes
    // it whatever its x, so that codes never outlive the step they were written for.
    struct Fp8Ready {
        const void* x = nullptr;
        int64_t rows = 0, cols = 0;
        float static_scale = 0.0f;
    };
    Fp8Ready fp8_ready_;
    // The vision tower runs on its own stream so that it overlaps the language model's steps (decode
    // steps leave the tensor cores idle). Ticket t's completion is vision_events_[t % ring]; an event is
    // re-recorded only after its previous ticket completed, so tickets older than the ring are done.
    cudaStream_t vision_stream_ = nullptr;
    std::vector<cudaEvent_t> vision_events_;
    uint64_t vision_issued_ = 0;
    std::unique_ptr<kc::GemmContext> vision_gemm_;
    std::unique_ptr<kc::Fp8GemmContext> vision_fp8_gemm_;  // GpuLimits::vit_fp8 only
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
    DeviceBuffer vit_h_, vit_ln_, vit_big_, vit_attn_, vit_patches_, vit_pixels_, vit_shuffled_;
    DeviceBuffer vit_q_, vit_q_scale_;  // FP8 vision: a linear layer's input codes and per-token scales
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
