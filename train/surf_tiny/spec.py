"""surf-tiny's shapes and the files that describe them (config.json, generation_config.json,
preprocessor_config.json) in the real Nemotron-Nano-VL checkpoint layout (spec/holotron.md), so that surf's
engine loads the model unchanged on the CPU and on the GPU.

The sizes are chosen for a 2-core CPU: a 1280x720 screenshot tiles into a 4x2 grid of 256-pixel tiles plus
a thumbnail (9 tiles, 576 image tokens); the ViT is narrow and shallow; the language model is a 14-layer
hybrid (6 Mamba-2, 2 attention, 6 MLP) of width 256 over a 4,096-token vocabulary."""

import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))

import golden_assets as ga  # noqa: E402  (tiling, tokenizer layout, chat template: shared with the fixtures)
import golden_model as gm  # noqa: E402  (HF model build and the checkpoint renames)

SIZES = {
    "vocab_size": 4096,        # text tokens + <image> <img> </img> at the end
    "hidden": 256,
    "pattern": "M-M*-M-M-M*-M-",
    "intermediate": 1024,
    "n_heads": 4, "n_kv_heads": 2, "head_dim": 64,
    "mamba_heads": 16, "mamba_head_dim": 32, "d_state": 32, "n_groups": 2, "conv_kernel": 4, "chunk": 64,
    # One 640-pixel tile for every screenshot: the ViT's position table then places each image token on the
    # page, where a grid of tiles leaves the language model to count tokens to know which tile it is in.
    "tile": 640, "max_tiles": 1,
    "vit_hidden": 192, "vit_layers": 6, "vit_heads": 3, "vit_max_img": 640,
    "vit_n_cls": 1, "vit_register_multiple": 4, "vit_args_model": "vit_surf_tiny_patch16",
    "projector_hidden": 1024,
}

TEXT_VOCAB = SIZES["vocab_size"] - len(ga.IMAGE_TOKENS)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def token_ids(tokenizer_json):
    """The ids of the control, think and image tokens in a tokenizer.json dict."""
    ids = {t: tokenizer_json["model"]["vocab"][t] for t in ga.control_tokens() + ga.THINK_TOKENS}
    for e in tokenizer_json["added_tokens"]:
        ids[e["content"]] = e["id"]
    return ids


def configs(ids):
    """(config.json, generation_config.json, preprocessor_config.json) as dicts."""
    s = SIZES
    llm = gm.llm_config_dict(s, ids)
    # dt is never clamped (vLLM, surf): training uses the same rule, and the checkpoint says so.
    llm["time_step_limit"] = [0.0, 1e30]
    vis = gm.vision_config_dict(s, CLIP_MEAN, CLIP_STD)
    top = {
        "architectures": ["NemotronH_Nano_VL_V2"], "model_type": "NemotronH_Nano_VL_V2", "torch_dtype": "bfloat16",
        "llm_config": llm, "vision_config": vis, "force_image_size": s["tile"], "patch_size": 16,
        "downsample_ratio": 0.5, "ps_version": "v2", "image_tag_type": "internvl", "use_thumbnail": True,
        "max_num_tiles": s["max_tiles"], "norm_mean": list(CLIP_MEAN), "norm_std": list(CLIP_STD),
        "vit_hidden_size": s["vit_hidden"], "projector_hidden_size": s["projector_hidden"],
        "img_context_token": "<image>", "img_start_token": "<img>", "img_end_token": "</img>",
        "img_context_token_id": ids["<image>"], "img_start_token_id": ids["<img>"],
        "img_end_token_id": ids["</img>"], "tie_word_embeddings": False, "vocab_size": s["vocab_size"],
    }
    gen = {"bos_token_id": ids["<s>"], "eos_token_id": [ids["</s>"], ids["<SPECIAL_12>"]],
           "pad_token_id": ids["<unk>"], "do_sample": False}
    pre = {"image_processor_type": "NemotronNanoVLV2ImageProcessor", "image_size": s["tile"],
           "max_num_tiles": s["max_tiles"], "use_thumbnail": True, "patch_size": 16, "downsample_ratio": 0.5,
           "norm_mean": list(CLIP_MEAN), "norm_std": list(CLIP_STD)}
    return top, gen, pre


def image_token_count(width, height):
    """Image-context tokens surf expands one image of this size into (spec §5 step 8)."""
    s = SIZES
    cols, rows = ga.pick_grid(width, height, ga.candidate_grids(s["max_tiles"]), s["tile"])
    n_tiles = cols * rows + (1 if cols * rows > 1 else 0)
    return n_tiles * (s["tile"] // 32) ** 2
