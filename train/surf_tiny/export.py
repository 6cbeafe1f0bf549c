"""Export: the trained PyTorch model → a surf model folder (bf16 safetensors in the real checkpoint layout,
split in files under 16 MB, with config.json, tokenizer and chat template copied from the model folder)."""

import json
import os
import shutil

import torch



# The files of a model folder that describe its weights: the config and the tokenizer they were trained with.
MODEL_FILES = ("config.json", "generation_config.json", "preprocessor_config.json", "tokenizer.json",
               "tokenizer_config.json")


def is_weights_file(name):
    return name.startswith("model") and name.endswith((".safetensors", ".index.json"))


def remove_weights(folder):
    for f in os.listdir(folder):
        if is_weights_file(f):
            os.remove(os.path.join(folder, f))


def export(model, model_dir, out, max_file_mb=15, weights_only=False):
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    for name in MODEL_FILES:
        if not weights_only and os.path.abspath(model_dir) != os.path.abspath(out):
            shutil.copy(os.path.join(model_dir, name), os.path.join(out, name))
    ckpt = to_checkpoint(model)
    tensors = {k: (v if v.dtype == torch.int64 else v.to(torch.bfloat16)).contiguous() for k, v in ckpt.items()}
    names = sorted(tensors)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    shards, cur, size = [], [], 0
    for n in names:
        b = tensors[n].numel() * tensors[n].element_size()
        if cur and size + b > max_file_mb * 1e6:
            shards.append(cur)
            cur, size = [], 0
        cur.append(n)
        size += b
    shards.append(cur)
    remove_weights(out)
    if len(shards) == 1:
        save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        return
    weight_map = {}
    for i, part in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({n: tensors[n] for n in part}, os.path.join(out, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
              open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)


def read_checkpoint(model_dir):
    from safetensors.torch import load_file
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    ckpt = {}
    for f in files:
        ckpt.update(load_file(os.path.join(model_dir, f)))
    return ckpt


# HF RadioModel's attention names differ between transformers releases; both map to RADIO's fused qkv.
_ATTN_NAMES = [("attention.attention.query", "attention.attention.key", "attention.attention.value",
                "attention.output.dense"),
               ("attention.q_proj", "attention.k_proj", "attention.v_proj", "attention.o_proj")]
_RP = "vision_model.radio_model."


def _attn_names(sd, i):
    for names in _ATTN_NAMES:
        if f"encoder.layer.{i}.{names[0]}.weight" in sd:
            return names
    raise KeyError(f"no known attention tensor names in RADIO layer {i}")


def to_checkpoint(model):
    """SurfTiny → {checkpoint name: fp32 tensor} in the real layout (spec/holotron.md §1.6, §4.5)."""
    out = {}
    for name, t in model.llm.state_dict().items():
        out[("language_model.backbone." + name[len("model."):]) if name.startswith("model.")
            else "language_model." + name] = t
    sd = model.radio.state_dict()
    out[_RP + "model.patch_generator.embedder.weight"] = sd["embeddings.patch_projection.weight"]
    out[_RP + "model.patch_generator.pos_embed"] = sd["embeddings.position_embedding"]
    out[_RP + "model.patch_generator.cls_token.token"] = sd["embeddings.cls_register_token"]
    for i in range(model.radio.config.num_hidden_layers):
        h, b = f"encoder.layer.{i}.", f"{_RP}model.blocks.{i}."
        q, k, v, o = _attn_names(sd, i)
        for kind in ("weight", "bias"):
            for n in ("norm1", "norm2", "mlp.fc1", "mlp.fc2"):
                out[f"{b}{n}.{kind}"] = sd[f"{h}{n}.{kind}"]
            out[f"{b}attn.qkv.{kind}"] = torch.cat([sd[f"{h}{x}.{kind}"] for x in (q, k, v)], 0)
            out[f"{b}attn.proj.{kind}"] = sd[f"{h}{o}.{kind}"]
        for n in ("layer_scale1.lambda1", "layer_scale2.lambda1"):
            if h + n in sd and not torch.all(sd[h + n] == 1.0):
                raise RuntimeError("RADIO has no layer scale: HF's must stay 1.0")
    out[_RP + "summary_idxs"] = sd.get("summary_idxs", torch.arange(model.radio.config.num_cls_tokens))
    out[_RP + "input_conditioner.norm_mean"] = torch.tensor(model.radio.config.norm_mean).view(3, 1, 1)
    out[_RP + "input_conditioner.norm_std"] = torch.tensor(model.radio.config.norm_std).view(3, 1, 1)
    out["mlp1.0.weight"] = model.mlp1.norm_weight
    out["mlp1.1.weight"] = model.mlp1.fc1.weight
    out["mlp1.3.weight"] = model.mlp1.fc2.weight
    return {k: (v.detach().float() if v.is_floating_point() else v.detach()).cpu().contiguous().clone()
            for k, v in out.items()}


def _resized_pos_embed(pos, shape):
    """A position table [1, n*n, d] brought to `shape` by bilinear interpolation on its square grid, so that
    weights trained on one tile size start a model of another."""
    if tuple(pos.shape) == tuple(shape):
        return pos
    import torch.nn.functional as F
    src, dst, d = int(round(pos.shape[1] ** 0.5)), int(round(shape[1] ** 0.5)), pos.shape[-1]
    grid = pos.reshape(1, src, src, d).permute(0, 3, 1, 2)
    out = F.interpolate(grid, size=(dst, dst), mode="bilinear", align_corners=False)
    return out.permute(0, 2, 3, 1).reshape(shape)


def load_into(model, model_dir, language_model_only=False):
    """Loads an exported folder's weights into a SurfTiny (as fp32): the inverse of to_checkpoint. With
    language_model_only, the vision tower and the projector keep the weights they have."""
    if language_model_only:
        own = {k: v.clone() for k, v in model.state_dict().items() if k.startswith(("radio.", "mlp1."))}
        load_into(model, model_dir)
        model.load_state_dict(own, strict=False)
        return
    t = {k: v.float() if v.is_floating_point() else v for k, v in read_checkpoint(model_dir).items()}
    llm = {("model." + k[len("language_model.backbone."):]) if k.startswith("language_model.backbone.")
           else k[len("language_model."):]: v for k, v in t.items() if k.startswith("language_model.")}
    model.llm.load_state_dict(llm, strict=True)
    sd = dict(model.radio.state_dict())
    sd["embeddings.patch_projection.weight"] = t[_RP + "model.patch_generator.embedder.weight"]
    sd["embeddings.position_embedding"] = _resized_pos_embed(t[_RP + "model.patch_generator.pos_embed"],
                                                             sd["embeddings.position_embedding"].shape)
    sd["embeddings.cls_register_token"] = t[_RP + "model.patch_generator.cls_token.token"]
    for i in range(model.radio.config.num_hidden_layers):
        h, b = f"encoder.layer.{i}.", f"{_RP}model.blocks.{i}."
        q, k, v, o = _attn_names(sd, i)
        for kind in ("weight", "bias"):
            for n in ("norm1", "norm2", "mlp.fc1", "mlp.fc2"):
                sd[f"{h}{n}.{kind}"] = t[f"{b}{n}.{kind}"]
            for x, part in zip((q, k, v), t[f"{b}attn.qkv.{kind}"].chunk(3, 0)):
                sd[f"{h}{x}.{kind}"] = part
            sd[f"{h}{o}.{kind}"] = t[f"{b}attn.proj.{kind}"]
    model.radio.load_state_dict(sd, strict=True)
    model.mlp1.load_state_dict({"norm_weight": t["mlp1.0.weight"], "fc1.weight": t["mlp1.1.weight"],
                                "fc2.weight": t["mlp1.3.weight"]}, strict=True)
