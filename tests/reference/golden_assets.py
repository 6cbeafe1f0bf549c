"""Non-model assets of the golden fixtures: tokenizer, chat template, test image, image tiling.

Used by make_golden.py (see its docstring for the contract). Everything here is deterministic given the seed.
"""

import json
import os
import random

import numpy as np
from PIL import Image, ImageDraw

# Pre-tokenizer split regex of the Mistral-NeMo "Tekken" style tokenizer that Nemotron-H ships
# (letters with case runs, single digits, punctuation runs, newlines, spaces), followed by a byte-level
# mapping without its own regex. A C++ tokenizer must implement this pattern verbatim.
SPLIT_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

N_CONTROL = 20  # ids 0..19: <unk>, <s>, </s>, <SPECIAL_3> … <SPECIAL_19> (Nemotron has 0..999)
THINK_TOKENS = ["<think>", "</think>"]  # ids 20, 21: added, not special (they appear in decoded text)
IMAGE_TOKENS = ["<image>", "<img>", "</img>"]  # appended after the text vocabulary, as in the VL checkpoint


def control_tokens():
    toks = ["<unk>", "<s>", "</s>"]
    toks += [f"<SPECIAL_{i}>" for i in range(3, N_CONTROL)]
    return toks


def training_corpus(seed):
    """Self-contained varied text (no external files, so the tokenizer is reproducible): English-like prose
    from a word list, seeded pseudo-words built from syllables (enough distinct merges for a 2k vocabulary),
    code, JSON actions, numbers and non-ASCII lines (accents, CJK, Cyrillic, Greek, emoji) so byte-level
    merges of multi-byte characters exist."""
    rng = random.Random(seed)
    words = ("the a of and to in is you that it for on are with as be this have from or by not but what all "
             "web page button click image screen user assistant system describe picture colour red green "
             "blue circle square tile model token layer state browser search result form field submit login "
             "navigate scroll down up left right window tab open close text input value number price date "
             "weather sky "
             "detail careful agent answer briefly short note three things Paris London Tokyo "
             "café naïve résumé über straße").split()
    syll = ("ka ri to me na su lo pe ti ra mo ne shi ku ba de fi go ha ji lu mi no pa qu se tu vi wa xe yo "
            "za tion ing er an en on al or ar th st ch ph sk tr pl gr").split()
    pseudo = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(1500)]
    texts = []
    for _ in range(4000):
        n = rng.randint(4, 18)
        s = " ".join(rng.choice(words) if rng.random() < 0.6 else rng.choice(pseudo) for _ in range(n))
        s = s[0].upper() + s[1:] + rng.choice([".", "!", "?", ":", ";", ",", ".\n", "\n\n"])
        texts.append(s)
    for i in range(600):
        texts.append(f"def {rng.choice(pseudo)}_{i}(x, y={rng.randint(0, 999)}):\n"
                     f"    return x * {rng.random():.4f} + y"
                     f"  # {rng.choice(pseudo)}\n")
        texts.append(f"{{\"action\": \"click\", \"x\": {rng.randint(0, 1000)}, "
                     f"\"y\": {rng.randint(0, 1000)}}}")
        texts.append(f"<SPECIAL_11>User\n{rng.choice(pseudo).capitalize()} {rng.randint(0, 99999)} items "
                     f"cost "
                     f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d} on {rng.randint(1, 28)}/"
                     f"{rng.randint(1, 12)}.")
    texts += ["日本語のテキストと漢字。画像を説明してください。", "中文文本，图像描述。请点击按钮。",
              "Ελληνικά κείμενα και εικόνες", "Русский текст о картинке и кнопке", "emoji 🙂🚀👍 ok",
              "tab\tand\r\nCRLF lines\n\n\n",
              "Ünïcödé àccénts: ç ñ ø å ß œ"] * 40
    return texts


def build_tokenizer(text_vocab, seed):
    """Trains a byte-level BPE with HF `tokenizers` and returns (tokenizer.json dict, id map)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    reserved = control_tokens() + THINK_TOKENS
    trainer = trainers.BpeTrainer(vocab_size=text_vocab, special_tokens=reserved, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_corpus(seed), trainer=trainer)
    if tok.get_vocab_size() != text_vocab:
        raise RuntimeError(f"BPE trained {tok.get_vocab_size()} tokens, wanted {text_vocab}: "
                           "enlarge the corpus")
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in IMAGE_TOKENS])
    j = json.loads(tok.to_str())
    for entry in j["added_tokens"]:
        if entry["content"] in THINK_TOKENS:
            entry["special"] = False  # decoded like text; still matched whole before BPE
    # A BOS-adding post-processor, as chat tokenizers usually carry: the fixtures tokenize with
    # add_special_tokens=False (spec §6.1), so an engine must NOT apply it to chat prompts.
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
    }
    ids = {t: j["model"]["vocab"].get(t) for t in reserved}
    for e in j["added_tokens"]:
        ids[e["content"]] = e["id"]
    assert ids["<unk>"] == 0 and ids["<s>"] == 1 and ids["</s>"] == 2 and ids["<SPECIAL_10>"] == 10
    assert ids["<SPECIAL_11>"] == 11 and ids["<SPECIAL_12>"] == 12
    assert [ids[t] for t in IMAGE_TOKENS] == [text_vocab, text_vocab + 1, text_vocab + 2]
    return j, ids


# Used when prompts/chat_template_nemotron_nano_v2_vl.jinja does not exist. Follows spec §6.2 (Megatron
# nemotron-h-5p5-reasoning inference format). All output comes from {{ }} expressions with explicit "\n", so
# the result does not depend on trim_blocks/lstrip_blocks. Images in list content render as "<image>\n".
FALLBACK_CHAT_TEMPLATE = (
    "{%- set ns = namespace(system='', reasoning=true) -%}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set ns.system = messages[0]['content'] -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- if '/no_think' in ns.system -%}{%- set ns.reasoning = false -%}{%- endif -%}"
    "{%- for m in loop_messages -%}"
    "{%- if m['role'] == 'user' and m['content'] is string and '/no_think' in m['content'] -%}"
    "{%- set ns.reasoning = false -%}{%- endif -%}{%- endfor -%}"
    "{%- if enable_thinking is defined and not enable_thinking -%}"
    "{%- set ns.reasoning = false -%}{%- endif -%}"
    "{{- '<SPECIAL_10>System\\n' + (ns.system | replace('/no_think', '') | replace('/think', '') | trim)"
    " + '\\n' -}}"
    "{%- for m in loop_messages -%}"
    "{%- if m['content'] is string -%}{%- set content = m['content'] -%}"
    "{%- else -%}{%- set content = namespace(s='') -%}"
    "{%- for part in m['content'] -%}"
    "{%- if part['type'] == 'image' -%}{%- set content.s = content.s + '<image>\\n' -%}"
    "{%- elif part['type'] == 'text' -%}{%- set content.s = content.s + part['text'] -%}{%- endif -%}"
    "{%- endfor -%}{%- set content = content.s -%}{%- endif -%}"
    "{%- if m['role'] == 'user' -%}{{- '<SPECIAL_11>User\\n' + content + '\\n' -}}"
    "{%- elif m['role'] == 'assistant' -%}"
    "{{- '<SPECIAL_11>Assistant\\n' + (content.split('</think>')[-1] | trim) + '\\n<SPECIAL_12>\\n' -}}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<SPECIAL_11>Assistant\\n' -}}"
    "{%- if ns.reasoning -%}{{- '<think>\\n' -}}{%- else -%}{{- '<think></think>' -}}{%- endif -%}"
    "{%- endif -%}"
)


def chat_template(repo_root):
    path = os.path.join(repo_root, "prompts", "chat_template_nemotron_nano_v2_vl.jinja")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read(), os.path.relpath(path, repo_root)
    return FALLBACK_CHAT_TEMPLATE, "make_golden fallback (spec §6.2)"


def render_chat(template, messages):
    """Renders like HF apply_chat_template (sandboxed jinja2, trim_blocks, lstrip_blocks)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True)


def make_image(width, height, seed):
    """A deterministic RGB test picture: gradients, shapes, lines and a little noise (no flat tiles)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 255 * (x / max(width - 1, 1))
    g = 255 * (y / max(height - 1, 1))
    b = 127.5 + 127.5 * np.sin(x / 7.0) * np.cos(y / 11.0)
    arr = np.stack([r, g, b], -1) + rng.normal(0, 12, (height, width, 3))
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img)
    d.ellipse([width * 0.1, height * 0.15, width * 0.45, height * 0.7], fill=(240, 30, 30), outline=(0, 0, 0))
    d.rectangle([width * 0.55, height * 0.4, width * 0.9, height * 0.9], fill=(20, 200, 60))
    d.line([0, height - 1, width - 1, 0], fill=(255, 255, 255), width=3)
    d.text((4, 4), "surf", fill=(0, 0, 0))
    return img


# ---- static InternVL-style tiling (spec §5), written from the algorithm description ----

def candidate_grids(max_num, min_num=1):
    grids = set((i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                if min_num <= i * j <= max_num)
    return sorted(grids, key=lambda g: g[0] * g[1])


SPEC_GRID_ORDER_12 = [(1, 1), (1, 2), (2, 1), (3, 1), (1, 3), (2, 2), (4, 1), (1, 4), (5, 1), (1, 5),
                      (1, 6), (6, 1), (3, 2), (2, 3), (7, 1), (1, 7), (4, 2), (2, 4), (1, 8), (8, 1),
                      (1, 9), (3, 3), (9, 1), (2, 5), (5, 2), (10, 1), (1, 10), (11, 1), (1, 11), (12, 1),
                      (3, 4), (4, 3), (1, 12), (6, 2), (2, 6)]


def pick_grid(width, height, grids, tile):
    aspect = width / height
    best_diff, best = float("inf"), (1, 1)
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best_diff, best = diff, (cols, rows)
        elif diff == best_diff and width * height > 0.5 * tile * tile * cols * rows:
            best = (cols, rows)
    return best


def tile_image(img, tile, max_num, use_thumbnail):
    """Returns (list of PIL tiles in processor order, (cols, rows))."""
    grids = candidate_grids(max_num)
    if max_num == 12:
        assert grids == SPEC_GRID_ORDER_12, "candidate grid order differs from spec §5"
    cols, rows = pick_grid(img.width, img.height, grids, tile)
    resized = img.resize((tile * cols, tile * rows))  # Pillow default: BICUBIC for RGB
    tiles = []
    for k in range(cols * rows):
        x0, y0 = (k % cols) * tile, (k // cols) * tile
        tiles.append(resized.crop((x0, y0, x0 + tile, y0 + tile)))
    if use_thumbnail and len(tiles) != 1:
        tiles.append(img.resize((tile, tile)))
    return tiles, (cols, rows)


def tiles_to_pixels(tiles, tile, mean, std):
    """vLLM's per-tile transform: RGB, Resize((tile,tile), BICUBIC) (a no-op here), ToTensor, Normalize."""
    import torch
    import torchvision.transforms as T
    from torchvision.transforms import InterpolationMode
    tf = T.Compose([T.Lambda(lambda im: im.convert("RGB")),
                    T.Resize((tile, tile), interpolation=InterpolationMode.BICUBIC),
                    T.ToTensor(), T.Normalize(mean=mean, std=std)])
    px = torch.stack([tf(t) for t in tiles])
    # Independent check of ToTensor+Normalize on the raw bytes.
    raw = torch.stack([torch.from_numpy(np.asarray(t.convert("RGB"), dtype=np.float32)).permute(2, 0, 1)
                       for t in tiles]) / 255.0
    ref = (raw - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.allclose(px, ref, atol=1e-6), "torchvision normalisation differs from the manual one"
    return px
