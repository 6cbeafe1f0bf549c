"""surf-tiny in PyTorch: the HF NemotronH language model and RADIO tower with the VL wrapper's pixel shuffle and
mlp1 (tests/reference/golden_model.py builds them; the golden fixtures prove that composition equals surf's
engine). Adds what training needs: image rows scattered into the token embeddings of a padded batch, and the
loss on the reply tokens only."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import ssd
from .spec import gm

# RMS the projector's first matrix's output is held at (scale_penalty, rebalance): with ReLU² after it, the
# inner activations then have RMS about 0.3 and the last matrix's entries stay near the size of a fresh init.
PRE_RMS = 0.5


class SurfTiny(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        vl = {"force_image_size": config["force_image_size"], "projector_hidden_size": config["projector_hidden_size"]}
        self.llm, self.radio, self.mlp1 = gm.build_models(config["llm_config"], config["vision_config"], vl)
        for layer in self.llm.model.layers:
            if layer.block_type == "linear_attention":
                layer.mixer.time_step_limit = (0.0, float("inf"))  # no dt clamp, as surf and vLLM
        ssd.install(self.llm)  # the Mamba-2 training forward as matmuls (ssd.py)
        for name, p in self.radio.named_parameters():
            if "layer_scale" in name:
                p.requires_grad_(False)  # C-RADIO has no layer scale: HF's stays the identity
        # Training runs attention through PyTorch's fused kernels: eager attention (the golden reference's, for
        # exactness) materialises each head's 1600×1600 probabilities of the 640-pixel tile in fp32.
        for part in (self.llm, self.radio):
            part.config._attn_implementation = "sdpa"
        self.image_id = config["img_context_token_id"]
        # Training only (never exported): the query of pointer_loss, from the state that starts the reply.
        hidden = config["llm_config"]["hidden_size"]
        self.point_head = nn.Linear(hidden, hidden)  # its bias is a query that every reply shares
        # The projector's inner activations (its first matrix's output), for scale_penalty and rebalance.
        self.mlp1.fc1.register_forward_hook(lambda module, inputs, output: setattr(self, "_inner", output))
        self.scale_weight = 0.1  # weight of scale_penalty in the loss
        self.rows_scale = 1.0  # the RMS scale_penalty holds the projector rows at, over the text embeddings'
        self.last_scales = None
        self.last_pointer = None  # the last batch's pointer_loss, for the log

    def image_rows(self, pixels):
        """[n_tiles, 3, S, S] normalised → [n_tiles · (S/32)², hidden] projector rows, tiles in order. Keeps the
        RMS of the ViT's output, of the projector's first matrix's output and of the rows for scale_penalty."""
        feats, _, projected = gm.vision_forward(self.radio, self.mlp1, pixels)
        self.last_scales = (_rms(feats), _rms(self._inner), _rms(projected))
        return projected

    def embed(self, tokens, pixels, row_index=None):
        """The input embeddings of tokens [B, T] with the image rows in place of the <image> tokens: pixels
        [n_tiles, 3, S, S] are the batch's images in (row, position) order, or, with row_index, each distinct
        image once and row_index the projector row of every <image> token in that order."""
        emb = self.llm.model.embeddings(tokens)
        is_image = tokens == self.image_id
        if pixels is not None and pixels.shape[0]:
            rows = self.image_rows(pixels).to(emb.dtype)
            if row_index is not None:
                rows = rows[row_index]
            if rows.shape[0] != int(is_image.sum()):
                raise RuntimeError(f"{rows.shape[0]} image rows for {int(is_image.sum())} <image> tokens")
            emb = emb.masked_scatter(is_image[..., None], rows)
        return emb

    def text_rms(self):
        return _rms(self.llm.model.embeddings.weight).detach()

    def scale_penalty(self):
        """(log RMS of the ViT's output)² + (log of the projector's inner RMS over PRE_RMS)² + (log of the rows'
        RMS over the text embeddings' RMS)². These scales are free in the forward pass (pre-LN blocks, the
        projector's RMSNorm, ReLU² homogeneous of degree 2), but the gradient that reaches the vision tower
        shrinks as they grow, and under Adam parameters with vanishing gradients drift: without this pull the
        rows grow to thousands of times the text embeddings and the vision tower stops learning."""
        feat, pre, rows = self.last_scales
        return torch.log(feat) ** 2 + torch.log(pre / PRE_RMS) ** 2 + torch.log(rows / (self.rows_scale * self.text_rms())) ** 2

    @torch.no_grad()
    def rebalance(self, pixels):
        """Brings trained weights back to working scales, each step exact:
        - the ViT's output to RMS 1, by scaling every write into its residual stream (patch and position
          embeddings, class/register tokens, attention and MLP outputs) by one factor; its blocks are pre-LN and
          the projector starts with an RMSNorm, so nothing downstream changes;
        - the projector's inner activations to RMS PRE_RMS, scaling its first matrix by 1/a and its last by a²
          (ReLU² is homogeneous of degree 2), which leaves its output unchanged;
        - the rows to the RMS of the text embeddings through the last matrix. This step does change the
          language model's input (its residual stream carries the rows), so the model relearns to read images
          at that scale."""
        self.image_rows(pixels)
        f = 1.0 / float(self.last_scales[0])
        for name, p in self.radio.named_parameters():
            if name.startswith("embeddings.") or name.endswith(("o_proj.weight", "o_proj.bias", "mlp.fc2.weight",
                                                                   "mlp.fc2.bias")):
                p.mul_(f)
        self.image_rows(pixels)
        a = float(self.last_scales[1]) / PRE_RMS
        self.mlp1.fc1.weight.div_(a)
        self.mlp1.fc2.weight.mul_(a * a)
        self.image_rows(pixels)
        self.mlp1.fc2.weight.mul_(self.rows_scale * float(self.text_rms()) / float(self.last_scales[2]))

    def pointer_loss(self, hidden, tokens, loss_mask, targets):
        """Mean cross-entropy, over the rows with a target, of picking the image token that holds the element's
        centre (targets [B]: its index among the row's image tokens, -1 none) by the score of each image token's
        hidden state against point_head of the state just before the reply, both at the input of the last
        attention layer (`hidden`), which reads the image for the reply; the final layers' output keeps much
        less of where things are. The score is an unscaled dot product, and point_head's bias is a query shared
        by every reply (what an element looks like); with a 1/√d scale and no bias the loss stays at chance.
        A direct gradient from the element asked for to the place it is drawn at: the reply's digits alone give
        the image path too weak a signal for the language model to read it."""
        losses = []
        for b in torch.nonzero(targets >= 0)[:, 0].tolist():
            images = torch.nonzero(tokens[b] == self.image_id)[:, 0]
            first_reply = int(torch.nonzero(loss_mask[b])[0, 0])
            query = self.point_head(hidden[b, first_reply - 1]).float()
            scores = hidden[b, images].float() @ query
            losses.append(F.cross_entropy(scores[None], targets[b:b + 1]))
        return torch.stack(losses).mean() if losses else None

    def forward(self, tokens, loss_mask, pixels, row_index=None, text_mask=None, text_weight=0.0, points=None,
                point_weight=0.0):
        """tokens [B, T] (right-padded), loss_mask [B, T] (1 on reply tokens), pixels and row_index as embed
        takes them. With text_mask (1 on the prompt's text tokens)
        and text_weight > 0 the prompt's text is also predicted, at that weight: the replies alone are a few
        percent of the tokens, and reading the prompt (the task, the history) is what they need. With points
        (pointer targets [B], synth.Maker.collate) and point_weight > 0, pointer_loss joins at that weight.
        Returns (loss to minimise, mean loss on the replies, number of reply tokens)."""
        emb = self.embed(tokens, pixels, row_index)
        want_points = points is not None and point_weight > 0
        out = self.llm.model(inputs_embeds=emb, use_cache=False, output_hidden_states=want_points)
        hidden = out.last_hidden_state
        # Position t predicts token t+1: keep the positions whose next token carries loss.
        reply = loss_mask[:, 1:].bool()
        use = reply | text_mask[:, 1:].bool() if text_mask is not None and text_weight > 0 else reply
        logits = self.llm.lm_head(hidden[:, :-1][use]).float()
        per_token = F.cross_entropy(logits, tokens[:, 1:][use], reduction="none")
        on_reply = reply[use]
        n = int(on_reply.sum())
        reply_loss = per_token[on_reply].sum() / max(1, n)
        extra = self.scale_weight * self.scale_penalty() if self.scale_weight and pixels is not None and \
            pixels.shape[0] else 0.0
        if want_points:
            last_attention = self.config["llm_config"]["hybrid_override_pattern"].rindex("*")
            pointer = self.pointer_loss(out.hidden_states[last_attention], tokens, loss_mask, points)
            self.last_pointer = None if pointer is None else float(pointer.detach())
            if pointer is not None:
                extra = extra + point_weight * pointer
        if use is reply:
            return reply_loss + extra, reply_loss, n
        text = per_token[~on_reply]
        return reply_loss + extra + text_weight * text.sum() / max(1, text.numel()), reply_loss, n


def _rms(x):
    return x.float().pow(2).mean().sqrt()


def init_weights(model, seed):
    """Standard small-model init: linears N(0, 0.02) with residual outputs scaled by 1/√(2·layers), norms 1,
    Mamba's A_log = log U(1, 16), D = 1, dt_bias = softplus⁻¹ of a log-uniform dt in [1e-3, 1e-1], the ViT's
    position embedding a 2D sin-cos table (sincos_2d)."""
    g = torch.Generator().manual_seed(seed)
    n_layers = len(model.config["llm_config"]["hybrid_override_pattern"])
    resid = 1.0 / math.sqrt(2 * n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_scale" in name:
                p.fill_(1.0)
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 15 + 1))
            elif name.endswith("mixer.D"):
                p.fill_(1.0)
            elif name.endswith("dt_bias"):
                dt = torch.exp(torch.rand(p.shape, generator=g) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif p.dim() == 1 and ("norm" in name or name.endswith("norm_weight")):
                p.fill_(1.0)
            elif p.dim() == 1:
                p.zero_()
            elif name.endswith("conv1d.weight"):
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
            elif name.endswith("position_embedding"):
                p.copy_(sincos_2d(p.shape))
            elif name.endswith("cls_register_token"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            else:
                std = 0.02
                if name.endswith(("out_proj.weight", "o_proj.weight", "down_proj.weight", "fc2.weight", "dense.weight")):
                    std *= resid
                p.copy_(torch.randn(p.shape, generator=g) * std)


def highpass_patches(model, share):
    """Makes `share` of the ViT's patch filters sum to zero over their inputs, so that a patch of one grey
    (a page's white or black background) gives them nothing and a patch holding strokes or edges gives them
    its whole response: at a random init, content against background is then the patches' largest feature.
    The other filters keep the patch's level (filled colours)."""
    w = model.radio.embeddings.patch_projection.weight
    n = int(round(share * w.shape[0]))
    with torch.no_grad():
        w[:n] -= w[:n].mean(dim=1, keepdim=True)


def saliency_init(model, share=0.9, layer_scale=0.05, gain=300.0, seed=7):
    """An init under which a page element's image rows share one direction, as a white square's do at any init
    (dev/target_consistency.py): `share` of the patch filters high-pass (highpass_patches: a flat patch gives
    them nothing), the ViT's blocks near the identity (their layer scales at `layer_scale`), and the
    projector's first rows in pairs (+c, −c) over those channels of the four merged patches, whose ReLU²s sum
    to c², written by its second matrix into one fixed direction with `gain`. A patch with strokes or edges
    then adds its energy along that direction whatever its colours; training is free to change all of it."""
    highpass_patches(model, share)
    d = model.radio.embeddings.patch_projection.weight.shape[0]
    n = int(round(share * d))
    fc1, fc2 = model.mlp1.fc1, model.mlp1.fc2
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(fc2.weight.shape[0], generator=g)
    u /= u.norm()
    with torch.no_grad():
        for name, p in model.radio.named_parameters():
            if "layer_scale" in name:
                p.fill_(layer_scale)
        pairs = [(q * d + c, sign) for q in range(4) for c in range(n) for sign in (1.0, -1.0)]
        rows = min(len(pairs), fc1.weight.shape[0]) // 2 * 2
        fc1.weight[:rows].zero_()
        for r, (column, sign) in enumerate(pairs[:rows]):
            fc1.weight[r, column] = sign
        fc2.weight[:, :rows] = (gain / rows) * u[:, None]


def sincos_2d(shape, base=200.0):
    """[1, g·g, d] position table: for row and column, sin and cos of the index at d/4 frequencies from 1 to
    1/base (MAE's init, with a base fitted to a grid of tens of patches). Smooth in the position, so where a
    patch lies is a near-linear read-out from the first step on; random rows would have to be learned one by
    one, which a localizer trained from scratch does not manage."""
    _, n, d = shape
    g = int(round(math.sqrt(n)))
    if g * g != n or d % 4:
        raise ValueError(f"position table {tuple(shape)}: needs a square grid and a width divisible by 4")
    freq = base ** (-torch.arange(d // 4, dtype=torch.float64) / (d // 4))
    idx = torch.arange(g, dtype=torch.float64)
    row, col = torch.meshgrid(idx, idx, indexing="ij")
    parts = []
    for pos in (row.reshape(-1), col.reshape(-1)):
        angle = pos[:, None] * freq[None, :]
        parts += [angle.sin(), angle.cos()]
    return torch.cat(parts, dim=1).float()[None]
