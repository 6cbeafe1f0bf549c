// The GPU forward pass: one batched step over many sequences, decode rows (one new token on a
// sequence with state) and varlen prefill rows (chunked or whole prompts) together. All buffers —
// weights, Mamba state slots, the paged KV pool, activation workspaces, per-step metadata — are
// allocated at construction for the configured limits; a forward allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/ops.h"
#include "model/config.h"
#include "model/cuda/device_buffer.h"
#include "model/cuda/gpu_weights.h"

namespace surf::model::cuda {

namespace kc = surf::kernels::cuda;

struct GpuLimits {
    int64_t max_tokens = 4096;        // tokens per forward (decode rows + prefill rows)
    int64_t max_seqs = 128;           // sequences per forward
    int64_t max_slots = 128;          // Mamba state slots (sequences resident on the GPU)
    int64_t page_size = 16;           // KV tokens per page
    int64_t kv_pages = 8192;          // pages in the pool (per attention layer)
    int64_t max_context = 32768;      // tokens per sequence (sizes block tables and decode workspaces)
    int64_t max_logit_rows = 256;     // logits rows per forward
    int64_t max_image_rows = 8192;    // projector output rows held for the next forward
    int64_t max_tiles = 32;           // tiles per vision call
    kc::DType ssm_state = kc::DType::kF32;
};

// One sequence of a batch. Decode rows (n_tokens == 1, past > 0) must come before prefill rows.
struct SeqStep {
    int32_t slot = -1;                 // Mamba state slot
    int64_t past = 0;                  // tokens already in the state / KV
    std::vector<int32_t> tokens;       // new tokens
    std::vector<int32_t> pages;        // KV pages covering past + tokens.size() tokens, in order
    int64_t image_row = -1;            // first image row (in the image-row buffer) its image tokens take, or -1
    bool all_logits = false;           // logits for every new token (else the last only)
    bool is_decode() const { return tokens.size() == 1 && past > 0; }
};

class GpuModel {
public:
    static std::unique_ptr<GpuModel> load(const std::string& dir, const GpuLimits& limits);
    // Random weights drawn on the GPU from `cfg` (benchmarks).
    static std::unique_ptr<GpuModel> random(ModelConfig cfg, const GpuLimits& limits, uint64_t seed);
    ~GpuModel();

    const ModelConfig& config() const { return cfg_; }
    const GpuLimits& limits() const { return limits_; }
    cudaStream_t stream() const { return stream_; }
    int64_t weight_bytes() const { return w_.bytes; }
    int64_t state_bytes_per_slot() const;
    int64_t kv_bytes_per_token() const;
    int32_t image_token_id() const { return image_token_id_; }
    void set_image_token_id(int32_t id) { image_token_id_ = id; }

    // Vision: pixel tiles [n_tiles, 3, S, S] fp32 (host) → projector rows written to the image-row
    // buffer at `first_row`; returns the number of rows (n_tiles · tokens per tile).
    int64_t encode_images(const float* pixels, int64_t n_tiles, int64_t first_row);
    const bf16* image_rows() const { return image_rows_.as<bf16>(); }
    // Image rows computed elsewhere (e.g. an embedding cache) copied into the buffer.
    void put_image_rows(const bf16* device_rows, int64_t n_rows, int64_t first_row);

    // One step over `seqs`; logits rows (per sequence: all new tokens or the last) end on the device,
    // in sequence order. Returns the number of logits rows.
    int64_t forward(const std::vector<SeqStep>& seqs);
    const float* logits() const { return logits_.as<float>(); }  // [rows, vocab] fp32, device
    void copy_logits_to_host(int64_t rows, std::vector<float>& host);

    // State slots: copy (fork), and save/restore to host memory (offload).
    void copy_slot(int32_t from, int32_t to);
    void save_slot(int32_t slot, std::vector<uint8_t>& host) const;
    void load_slot(int32_t slot, const std::vector<uint8_t>& host);
    void copy_pages(const std::vector<int32_t>& from, const std::vector<int32_t>& to);
    void save_pages(const std::vector<int32_t>& pages, std::vector<uint8_t>& host) const;
    void load_pages(const std::vector<int32_t>& pages, const std::vector<uint8_t>& host);

    // Dumps of the last forward for parity tests: residual stream after each layer when enabled.
    void keep_layer_outputs(bool keep) { keep_layers_ = keep; }
    void copy_layer_output(int64_t layer, int64_t n_tok, std::vector<float>& host) const;
    void copy_vision_features(int64_t n_tiles, std::vector<float>& host) const;  // [n_tiles, side², width] of the last encode

private:
    GpuModel(ModelConfig cfg, GpuWeights w, const GpuLimits& limits, cudaStream_t stream);
    void allocate();
    void mamba_layer(size_t li, const GpuLayer& L);
    void attention_layer(size_t li, const GpuLayer& L);
    void mlp_layer(const GpuLayer& L);

    ModelConfig cfg_;
    GpuWeights w_;
    GpuLimits limits_;
    cudaStream_t stream_ = nullptr;
    std::unique_ptr<kc::GemmContext> gemm_;
    // The vision tower runs on its own stream so that it overlaps the language model's steps (decode
    // steps leave the tensor cores idle); a forward waits for the image rows written before it.
    cudaStream_t vision_stream_ = nullptr;
    cudaEvent_t vision_done_ = nullptr;
    std::unique_ptr<kc::GemmContext> vision_gemm_;
    DeviceBuffer vision_cu_;  // [max_tiles + 1] int32 tile offsets
    int32_t image_token_id_ = -1;

    // Persistent state: per Mamba layer conv + SSM slots; per attention layer K and V page pools.
    std::vector<DeviceBuffer> conv_state_, ssm_state_, k_cache_, v_cache_;
    // Activation workspaces sized by limits.
    DeviceBuffer residual_, normed_, big_, xbc_, y_, attn_, logits_, ssd_ws_, decode_ws_, embed_ws_, logit_in_, image_rows_;
    DeviceBuffer vit_h_, vit_ln_, vit_big_, vit_attn_, vit_patches_, vit_pixels_, vit_shuffled_;
    std::vector<DeviceBuffer> layer_out_;
    bool keep_layers_ = false;
    // Per-step metadata: one pinned staging buffer and its device mirror.
    PinnedBuffer meta_host_;
    DeviceBuffer meta_dev_;

    // The current step (set by forward for the layer functions).
    struct Step {
        int64_t n_tok = 0, n_dec = 0, n_pre = 0, n_pre_tok = 0, max_pages = 0, max_len = 0, max_q = 0;
        const int32_t *slots_dec = nullptr, *slots_pre = nullptr, *cu_pre = nullptr, *bt_dec = nullptr, *bt_pre = nullptr;
        const int32_t *lens_dec = nullptr, *lens_pre = nullptr, *slot_mapping = nullptr;
        const uint8_t* has_init_pre = nullptr;
    } step_;
};

}  // namespace surf::model::cuda
