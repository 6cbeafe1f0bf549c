// surf inspect DIR: the config, the layer pattern, the parameter count, and any missing, unexpected or
// mis-shaped tensors of a checkpoint folder.
#include <cstdio>
#include <map>

#include "apps/cli.h"
#include "base/error.h"
#include "model/checkpoint/config.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/weights.h"

namespace {

using namespace surf::model;

int run_inspect(const surf::cli::Args& args) {
    if (args.positional().size() != 1)
        throw surf::Error(surf::ErrorKind::kInvalidArgument, "expected one model folder");
    const std::string dir = args.positional()[0];
    ModelConfig cfg = load_model_config(dir);
    const Checkpoint ckpt = Checkpoint::open(dir);
    // Shape-derived values (vocabulary rows, prefix tokens) as load_weights reads them.
    const WeightPrefixes px = weight_prefixes(cfg);
    if (const TensorInfo* emb = ckpt.find(px.backbone + "embeddings.weight"); emb && emb->shape.size() == 2) {
        cfg.llm.vocab_size = emb->shape[0];
    }
    if (const TensorInfo* cls = ckpt.find(px.vision + "model.patch_generator.cls_token.token");
        cfg.has_vision && cls && cls->shape.size() == 2) {
        cfg.vision.n_prefix = cls->shape[0];
    }
    const LlmConfig& c = cfg.llm;
    std::printf("model        %s\narchitecture %s\n", dir.c_str(), cfg.architecture.c_str());
    std::printf(
        "language     d_model %lld, %lld layers (%lld mamba2, %lld attention, %lld mlp), vocab %lld\n",
        (long long)c.hidden_size, (long long)c.n_layers(), (long long)c.count(LayerKind::kMamba2),
        (long long)c.count(LayerKind::kAttention), (long long)c.count(LayerKind::kMlp),
        (long long)c.vocab_size);
    std::printf("pattern      %s\n", c.pattern().c_str());
    if (c.count(LayerKind::kMamba2)) {
        std::printf("mamba2       %lld heads x %lld, d_state %lld, %lld groups, conv %lld, chunk %lld\n",
                    (long long)c.mamba_n_heads, (long long)c.mamba_head_dim, (long long)c.d_state,
                    (long long)c.n_groups, (long long)c.conv_kernel, (long long)c.chunk_size);
    }
    if (c.count(LayerKind::kAttention)) {
        std::printf("attention    %lld query / %lld kv heads x %lld\n", (long long)c.n_heads,
                    (long long)c.n_kv_heads, (long long)c.head_dim);
    }
    if (c.count(LayerKind::kMlp)) std::printf("mlp          %lld (relu2)\n", (long long)c.intermediate_size);
    if (cfg.has_vision) {
        std::printf(
            "vision       width %lld, %lld blocks, %lld heads, mlp %lld, patch %lld, prefix tokens %lld\n",
            (long long)cfg.vision.hidden_size, (long long)cfg.vision.n_layers, (long long)cfg.vision.n_heads,
            (long long)cfg.vision.intermediate_size, (long long)cfg.vision.patch_size,
            (long long)cfg.vision.n_prefix);
        std::printf(
            "images       tiles of %lld px, up to %lld (+thumbnail: %s), %lld tokens per tile, projector "
            "%lld\n",
            (long long)cfg.image.tile_size, (long long)cfg.image.max_tiles,
            cfg.image.use_thumbnail ? "yes" : "no", (long long)cfg.image.tokens_per_tile(),
            (long long)cfg.projector_hidden);
    }
    if (cfg.quant.method != QuantMethod::kNone) {
        std::printf("quantization %s (%s): FP8 E4M3 language-model linear layers\n",
                    quant_method_name(cfg.quant.method), cfg.quant.source.c_str());
    }
    std::printf("stop ids    ");
    for (int64_t id : cfg.eos_token_ids) std::printf(" %lld", (long long)id);
    std::printf("\n");

    std::map<std::string, int64_t> by_dtype;
    for (const auto& name : ckpt.names())
        by_dtype[dtype_name(ckpt.get(name).dtype)] += ckpt.get(name).numel();
    const CheckpointReport report = check_checkpoint(cfg, ckpt);
    std::printf("tensors      %zu in the checkpoint;", ckpt.size());
    for (const auto& [dtype, n] : by_dtype) std::printf(" %s %.3fM", dtype.c_str(), n / 1e6);
    std::printf("\nparameters   %.6f B (%lld)\n", report.n_parameters / 1e9, (long long)report.n_parameters);
    for (const auto& name : report.missing) std::printf("MISSING      %s\n", name.c_str());
    for (const auto& m : report.shape_mismatches) std::printf("SHAPE        %s\n", m.c_str());
    for (const auto& m : report.dtype_mismatches) std::printf("DTYPE        %s\n", m.c_str());
    for (const auto& name : report.unexpected) std::printf("UNEXPECTED   %s\n", name.c_str());
    if (report.ok() && report.unexpected.empty())
        std::printf("check        every tensor present with the expected shape and dtype\n");
    if (!report.ok()) {
        // The listing is on stdout; the verdict goes where scripts look for failures as well.
        std::fprintf(stderr,
                     "surf inspect: %s does not load: %zu tensors missing, %zu with the wrong shape, "
                     "%zu with the wrong dtype (listed above)\n",
                     dir.c_str(), report.missing.size(), report.shape_mismatches.size(),
                     report.dtype_mismatches.size());
    }
    return report.ok() ? 0 : 1;
}

SURF_COMMAND(surf::cli::Command{
    "inspect",
    "Show a checkpoint's config, layer pattern, parameter count and tensor problems.",
    "MODEL_DIR",
    {},
    run_inspect});

}  // namespace
