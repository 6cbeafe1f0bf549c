#include "model/cuda/supported_shapes.h"

#include <filesystem>

#include "base/error.h"

namespace surf::model::cuda {

namespace {

// Each rule cites the kernel check it mirrors (kernels/cuda/); a kernel change that widens or narrows what it
// runs changes the rule here with it.

// causal_conv1d_varlen / _update: the taps are unrolled for kK = 4 only (conv1d.cu, SURF_CHECK p.K == kK).
constexpr int64_t kConvKernel = 4;
// ssd_varlen and selective_state_update dispatch d_state over {16, 32, 64, 128} (ssd.cu, ssu.cu: launch_*).
bool state_size_instantiated(int64_t n) {
    return n == 16 || n == 32 || n == 64 || n == 128;
}
// ssd_varlen pads a head's P columns to at most 128 and selective_state_update stages at most 128 state rows
// (ssd.cu, ssu.cu: SURF_CHECK p.P ≤ 128).
constexpr int64_t kMaxMambaHeadDim = 128;
// ssd_varlen's chunk buffers hold kMaxChunk = 128 tokens in steps of 16 (ssd_common.cuh, ssd.cu).
constexpr int64_t kMaxChunk = 128, kChunkStep = 16;
// gated_rmsnorm launches one grid column per group (norm.cu: SURF_CHECK groups ≤ 65535).
constexpr int64_t kMaxGroups = 65535;
// The attention kernels pad head_dim to 16, 48, 80 or 128 in 8-wide vectors (attention_flash.cuh:
// padded_head_dim; attention.cu: kv_cache_append), for the language model and the vision tower alike.
constexpr int64_t kMaxHeadDim = 128, kHeadDimStep = 8;
// attention_decode: a block holds the query heads of one kv head, at most 16 (attention_decode.cu).
constexpr int64_t kMaxGqaGroup = 16;

bool head_dim_supported(int64_t head_dim) {
    return head_dim >= kHeadDimStep && head_dim <= kMaxHeadDim && head_dim % kHeadDimStep == 0;
}

const char* const kHeadDimRange = "a multiple of 8 from 8 to 128";

void check_mamba(const LlmConfig& c, const std::string& at, std::vector<ShapeProblem>& out) {
    if (c.conv_kernel != kConvKernel) out.push_back({at + "conv_kernel", c.conv_kernel, "4"});
    if (!state_size_instantiated(c.d_state))
        out.push_back({at + "ssm_state_size", c.d_state, "16, 32, 64, 128"});
    if (c.mamba_head_dim < 1 || c.mamba_head_dim > kMaxMambaHeadDim)
        out.push_back({at + "mamba_head_dim", c.mamba_head_dim, "1 to 128"});
    if (c.chunk_size < kChunkStep || c.chunk_size > kMaxChunk || c.chunk_size % kChunkStep != 0)
        out.push_back({at + "chunk_size", c.chunk_size, "a multiple of 16 from 16 to 128"});
    // The scan writes the prefill rows' fp32 y after the decode rows' (GpuModel::mamba_layer), and ssd_varlen
    // needs that address 8-byte aligned (ssd.cu: SURF_CHECK p.y): with an odd d_inner an odd number of decode
    // rows breaks it. (GpuStepOptions::mamba_y_bf16, off by default, needs a multiple of 4.)
    if (c.d_inner() % 2 != 0)
        out.push_back({at + "mamba_num_heads * " + at + "mamba_head_dim", c.d_inner(), "an even product"});
    if (c.n_groups > kMaxGroups) out.push_back({at + "n_groups", c.n_groups, "at most 65535"});
}

void check_attention(const LlmConfig& c, const std::string& at, std::vector<ShapeProblem>& out) {
    if (!head_dim_supported(c.head_dim)) out.push_back({at + "head_dim", c.head_dim, kHeadDimRange});
    const int64_t group = c.n_kv_heads > 0 ? c.n_heads / c.n_kv_heads : 0;
    if (group > kMaxGqaGroup) {
        out.push_back({at + "num_attention_heads / " + at + "num_key_value_heads", group,
                       "at most 16 query heads per key/value head"});
    }
}

}  // namespace

std::vector<ShapeProblem> unsupported_cuda_shapes(const ModelConfig& cfg) {
    std::vector<ShapeProblem> out;
    const LlmConfig& c = cfg.llm;
    const std::string at = cfg.llm_key.empty() ? "" : cfg.llm_key + ".";
    if (c.count(LayerKind::kMamba2) > 0) check_mamba(c, at, out);
    if (c.count(LayerKind::kAttention) > 0) check_attention(c, at, out);
    // The ViT's attention runs the same prefill kernel at head dim width / heads (GpuModel::encode_images).
    // Its other kernels (patchify, pixel shuffle, norms, GEMMs) run every shape load_model_config accepts.
    if (cfg.has_vision && cfg.vision.n_heads > 0) {
        const int64_t head_dim = cfg.vision.hidden_size / cfg.vision.n_heads;
        if (!head_dim_supported(head_dim)) {
            out.push_back(
                {"vision_config.hidden_size / vision_config.num_attention_heads", head_dim, kHeadDimRange});
        }
    }
    return out;
}

void check_cuda_shapes(const ModelConfig& cfg) {
    const std::vector<ShapeProblem> problems = unsupported_cuda_shapes(cfg);
    if (problems.empty()) return;
    const std::string file =
        cfg.dir.empty() ? "the model config" : (std::filesystem::path(cfg.dir) / "config.json").string();
    auto named = [](const ShapeProblem& p) { return p.field + " = " + std::to_string(p.value); };
    std::string message = file + ": ";
    if (problems.size() == 1) {
        message += named(problems[0]) +
                   " is not supported by the CUDA backend (supported: " + problems[0].supported + ")";
    } else {
        message += "the CUDA backend does not support " + std::to_string(problems.size()) +
                   " of this model's shapes: ";
        for (size_t i = 0; i < problems.size(); ++i) {
            message += (i ? "; " : "") + named(problems[i]) + " (supported: " + problems[i].supported + ")";
        }
    }
    throw Error(ErrorKind::kUnsupported, message + "; run it with --backend cpu");
}

}  // namespace surf::model::cuda
