"""From recorded demonstrations (`surf record`: episodes.jsonl + shots/) to training sequences.

Each recorded session (policy, localizer or validator) becomes one sequence, built exactly as surf's engine
sees it: every call's text parts tokenized on their own (special tokens parsed, no BOS), every image part
expanded to <img> + <image> x n + </img>, then the reply's tokens and the stop token <SPECIAL_12>. Only the
replies carry loss. The tokenizer is trained here on the same text (train_tokenizer).

  python3 -m train.surf_tiny.data tokenizer --episodes E1.jsonl [E2.jsonl ...] --out MODEL_DIR
  python3 -m train.surf_tiny.data pack --episodes E.jsonl --tokenizer MODEL_DIR --out DATA_DIR

`pack` writes DATA_DIR/sequences.npz (tokens, loss mask, image positions) and DATA_DIR/shots/ (the images as
lossless WebP), small enough to travel to the GPU machine.
"""

import argparse
import json
import os
import random
import re
import shutil

import numpy as np

from . import spec
from .spec import ga

STOP = "<SPECIAL_12>"


def read_episodes(paths):
    for path in paths:
        base = os.path.dirname(os.path.abspath(path))
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    ep = json.loads(line)
                    ep["_base"] = base
                    yield ep


def corpus(paths):
    """Every text the model reads or writes in the recordings, plus general varied text."""
    texts = []
    for ep in read_episodes(paths):
        for s in ep["sessions"]:
            for t in s["turns"]:
                texts += [p["text"] for p in t["parts"] if "text" in p]
                texts.append(t["output"])
    return texts + ga.training_corpus(20261128)


def train_tokenizer(paths, seed=20261128):
    """Byte-level BPE in the Nemotron-H / Tekken layout (golden_assets.build_tokenizer), trained on `corpus`."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(ga.SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    reserved = ga.control_tokens() + ga.THINK_TOKENS
    trainer = trainers.BpeTrainer(vocab_size=spec.TEXT_VOCAB, special_tokens=reserved, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    texts = corpus(paths)
    random.Random(seed).shuffle(texts)
    tok.train_from_iterator(texts, trainer=trainer)
    short = spec.TEXT_VOCAB - tok.get_vocab_size()
    if short < 0:
        raise RuntimeError(f"BPE trained {tok.get_vocab_size()} tokens, more than {spec.TEXT_VOCAB}")
    # A corpus too small for every merge leaves reserved ids, so that the image tokens keep their place.
    tok.add_special_tokens([AddedToken(f"<unused_{k}>", special=True, normalized=False) for k in range(short)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ga.IMAGE_TOKENS])
    j = json.loads(tok.to_str())
    for entry in j["added_tokens"]:
        if entry["content"] in ga.THINK_TOKENS:
            entry["special"] = False
    return j


def write_model_files(out, tok_json):
    """tokenizer.json, tokenizer_config.json (with the chat template), config.json and friends."""
    os.makedirs(out, exist_ok=True)
    ids = spec.token_ids(tok_json)
    template, _ = ga.chat_template(spec.REPO)
    dump = lambda name, obj: json.dump(obj, open(os.path.join(out, name), "w", encoding="utf-8"), indent=2,
                                       ensure_ascii=False)
    dump("tokenizer.json", tok_json)
    added = {str(e["id"]): {"content": e["content"], "lstrip": False, "normalized": False, "rstrip": False,
                            "single_word": False, "special": e["special"]} for e in tok_json["added_tokens"]}
    dump("tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": STOP,
        "unk_token": "<unk>", "pad_token": "<unk>", "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "model_max_length": 131072, "added_tokens_decoder": added,
        "chat_template": template})
    top, gen, pre = spec.configs(ids)
    dump("config.json", top)
    dump("generation_config.json", gen)
    dump("preprocessor_config.json", pre)


# The output schema as the prompts once rendered it: a line of its own in the policy and validator system
# prompts (the chat template strips the message's end), inline before a blank line in the localizer's.
_SCHEMA_LINE = re.compile(r"\nSchema: \{[^\n]*\}")
_SCHEMA_INLINE = re.compile(r" Schema: \{[^\n]*\}\n\n")
_SCHEMA_PROMPTS = ("policy_system.md", "localizer.md", "validator_system.md")


def prompts_without_schema(model_dir):
    """Whether the model folder's prompts leave the output schema out (constrained decoding enforces it)."""
    d = os.path.join(model_dir, "prompts")
    files = [os.path.join(d, f) for f in _SCHEMA_PROMPTS if os.path.exists(os.path.join(d, f))]
    return bool(files) and all("{schema}" not in open(f, encoding="utf-8").read() for f in files)


def strip_schema(text):
    """A recorded prompt text as the schema-free prompts render it."""
    return _SCHEMA_LINE.sub("", _SCHEMA_INLINE.sub("\n", text))


# The policy turn with the task first (as recorded before the task moved) and the same turn as a policy_turn.md
# that names the task after the element list renders it: the reply then starts right after the task, as the
# localizer's starts right after its element.
_TASK_FIRST = re.compile(r"Task: ([^\n]*)\n(Step \d+ of \d+\..*?)\n(Page elements \(x, y from 0 to 1000\):\n.*?)\n"
                         r"Screenshot:\n", re.S)


def task_after_elements(model_dir):
    """Whether the model folder's policy turn puts {task} after {elements}."""
    path = os.path.join(model_dir, "prompts", "policy_turn.md")
    if not os.path.exists(path):
        return False
    t = open(path, encoding="utf-8").read()
    return "{elements}" in t and t.find("{task}") > t.find("{elements}")


def move_task(text):
    """A recorded policy turn with the task first, as a task-after-elements policy_turn.md renders it."""
    return _TASK_FIRST.sub(lambda m: f"{m.group(2)}\n{m.group(3)}\nTask: {m.group(1)}\nScreenshot:\n", text)


class Encoder:
    """Tokenizes recorded text as the model folder's prompts render it now: recordings made while the prompts
    carried the output schema lose it when the folder's prompts do not, and a policy turn recorded with the
    task first gets it after the element list when the folder's policy_turn.md has it there."""

    def __init__(self, model_dir):
        from tokenizers import Tokenizer
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.ids = spec.token_ids(json.load(open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8")))
        self.strip_schema = prompts_without_schema(model_dir)
        self.move_task = task_after_elements(model_dir)

    def text(self, s):
        return self.tok.encode(s, add_special_tokens=False).ids

    def prompt(self, s):
        if self.strip_schema:
            s = strip_schema(s)
        if self.move_task:
            s = move_task(s)
        return self.text(s)


def is_target(session, k):
    """Whether turn k's reply is a training target. A policy answer that the run went on past was rejected by the
    validator (a deliberate mistake, `surf record --mistakes`): it stays as context, and is no target. Recordings
    mark such turns with "loss": false; older ones are recognised by that rule."""
    turn = session["turns"][k]
    if "loss" in turn:
        return bool(turn["loss"])
    if session["role"] != "policy" or k == len(session["turns"]) - 1:
        return True
    try:
        return json.loads(turn["output"])["action"]["type"] != "answer"
    except (ValueError, KeyError, TypeError):
        return True


def encode_session(enc, session, shot_index, shot_sizes):
    """(tokens, loss mask, [(position of the first <image>, shot index)]) of one recorded session."""
    toks, mask, images = [], [], []
    for t, turn in enumerate(session["turns"]):
        for part in turn["parts"]:
            if "text" in part:
                ids = enc.prompt(part["text"])
                toks += ids
                mask += [0] * len(ids)
            else:
                k = shot_index[part["image"]]
                n = spec.image_token_count(*shot_sizes[k])
                toks.append(enc.ids["<img>"])
                images.append((len(toks), k))
                toks += [enc.ids["<image>"]] * n + [enc.ids["</img>"]]
                mask += [0] * (n + 2)
        out = enc.text(turn["output"]) + [enc.ids[STOP]]
        toks += out
        mask += [1 if is_target(session, t) else 0] * len(out)
    return toks, mask, images


def pack(paths, model_dir, out, max_tokens=8192, webp_quality=0, policy_variants=0, value_swaps=0, answer_swaps=0,
         part=(0, 1)):
    """Packs the episodes' sessions; the screenshots become WebP, lossless unless webp_quality (1-100) is
    given: lossy shots trade a little image detail for packs that fit the GPU machine's upload.
    policy_variants > 0 adds that many one-turn policy sessions per episode, and value_swaps > 0 that many copies
    of a policy session whose typed or answered values are other values (augment.py). answer_swaps > 0 adds
    that many more of a policy session whose answer quotes a listed value, and as many validator sessions that
    judge such an answer with the value replaced (augment.validator_swaps). part (k, n) keeps
    every n-th episode from the k-th, so that n packs split the episodes between them."""
    from .augment import answered_values, policy_variants as make_variants, value_swaps as make_swaps, \
        validator_swaps
    rng = random.Random(20261129)
    from PIL import Image
    enc = Encoder(model_dir)
    os.makedirs(os.path.join(out, "shots"), exist_ok=True)
    shot_index, shot_names, shot_sizes = {}, [], []
    seq_tokens, seq_mask, seq_role, seq_family, seq_episode, img_rows = [], [], [], [], [], []
    episode_keys = []
    roles = {"policy": 0, "localizer": 1, "validator": 2}
    families = {}
    for i, ep in enumerate(read_episodes(paths)):
        if i % part[1] != part[0]:
            continue
        fam = families.setdefault(ep.get("family", ""), len(families))
        # An episode's key is its first screenshot's name (a content hash): unique across seeds and packs,
        # so that a held-out split by episode (heldout.py) keeps all of a task's sequences on one side.
        first = next((p["image"] for s in ep["sessions"] for t in s["turns"] for p in t["parts"] if "image" in p), "")
        episode_keys.append(os.path.splitext(os.path.basename(first))[0] or ep.get("id", ""))
        for s in ep["sessions"]:
            for t in s["turns"]:
                for p in t["parts"]:
                    if "image" in p and p["image"] not in shot_index:
                        # Recorded names are content hashes: a shot converted by an earlier pack is reused.
                        src = os.path.join(ep["_base"], p["image"])
                        name = os.path.splitext(os.path.basename(p["image"]))[0] + ".webp"
                        dst = os.path.join(out, "shots", name)
                        if not os.path.exists(dst):
                            with Image.open(src) as im:
                                if webp_quality:
                                    im.convert("RGB").save(dst + ".tmp", format="WEBP", quality=webp_quality,
                                                           method=4)
                                else:
                                    im.convert("RGB").save(dst + ".tmp", format="WEBP", lossless=True,
                                                           quality=100, method=1)
                            os.replace(dst + ".tmp", dst)
                        with Image.open(dst) as im:
                            shot_sizes.append(im.size)
                        shot_index[p["image"]] = len(shot_names)
                        shot_names.append(name)
        sessions = list(ep["sessions"])
        policy = next((s for s in sessions if s["role"] == "policy"), None)
        if policy and policy_variants:
            sessions += make_variants(policy, rng, policy_variants)
        if policy and value_swaps:
            sessions += make_swaps(policy, rng, value_swaps)
        if policy and answer_swaps and answered_values(policy):
            sessions += make_swaps(policy, rng, answer_swaps)
        if answer_swaps:
            sessions += [v for s in ep["sessions"] for v in validator_swaps(s, rng, answer_swaps)]
        for s in sessions:
            if s["role"] not in roles:
                continue
            toks, mask, images = encode_session(enc, s, shot_index, shot_sizes)
            if len(toks) > max_tokens:
                continue
            n = len(seq_tokens)
            seq_tokens.append(np.array(toks, np.int16))
            seq_mask.append(np.array(mask, np.uint8))
            seq_role.append(roles[s["role"]])
            seq_family.append(fam)
            seq_episode.append(len(episode_keys) - 1)
            img_rows += [(n, pos, k) for pos, k in images]
    lens = np.array([len(t) for t in seq_tokens], np.int64)
    np.savez_compressed(
        os.path.join(out, "sequences.npz"), tokens=np.concatenate(seq_tokens), mask=np.concatenate(seq_mask),
        offsets=np.concatenate([[0], np.cumsum(lens)]), role=np.array(seq_role, np.int8),
        family=np.array(seq_family, np.int16), episode=np.array(seq_episode, np.int32),
        episode_keys=np.array(episode_keys), images=np.array(img_rows, np.int64).reshape(-1, 3),
        shot_sizes=np.array(shot_sizes, np.int32), shot_names=np.array(shot_names))
    json.dump({"families": list(families), "roles": list(roles), "sequences": len(seq_tokens),
               "tokens": int(lens.sum()), "loss_tokens": int(sum(m.sum() for m in seq_mask)),
               "shots": len(shot_names)}, open(os.path.join(out, "summary.json"), "w"), indent=1)
    return len(seq_tokens), int(lens.sum()), len(shot_names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["tokenizer", "pack"])
    ap.add_argument("--episodes", nargs="+", required=True)
    ap.add_argument("--tokenizer", help="model folder holding tokenizer.json (pack)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.what == "tokenizer":
        write_model_files(a.out, train_tokenizer(a.episodes))
        print(f"tokenizer and config written to {a.out}")
    else:
        n, t, s = pack(a.episodes, a.tokenizer, a.out)
        print(f"{n} sequences, {t} tokens, {s} images -> {a.out}")


if __name__ == "__main__":
    main()
