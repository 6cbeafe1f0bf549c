"""The data side of surf-tiny, on a machine with Chromium (the GPU machine has none):

  python3 -m train.surf_tiny.pipeline tasks  --split train --seed S --count N --out DIR [--families ...]
  python3 -m train.surf_tiny.pipeline record --tasks DIR --out REC [--jobs 2]
  python3 -m train.surf_tiny.pipeline build  --episodes REC1 [REC2 ...] --model MODEL_DIR --data DATA_DIR

`tasks` runs the generator (train/tasks) and gives every page a neutral file name (a hash), so that neither
the split nor the family shows in the URL the agent reads, and sets web_name to the family so that
`surf eval` reports success per family. `record` runs `surf record` on shards of the tasks in parallel.
`build` trains the tokenizer, writes the model folder's config and tokenizer files, and packs the data."""

import argparse
import hashlib
import json
import os
import shutil
import random
import subprocess
import sys

from . import data, export
from .spec import REPO


def make_tasks(split, seed, count, out, families=None):
    cmd = [sys.executable, os.path.join(REPO, "train", "tasks", "generate.py"), "--split", split, "--seed",
           str(seed), "--count", str(count), "--out", out]
    if families:
        cmd += ["--families", families]
    subprocess.run(cmd, check=True)
    lines = []
    with open(os.path.join(out, "tasks.jsonl"), encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)
            old = t["web"][len("file://"):]
            name = hashlib.sha256(f"{split}/{seed}/{t['id']}".encode()).hexdigest()[:16] + ".html"
            new = os.path.join(os.path.dirname(old), name)
            os.replace(old, new)
            t["web"] = "file://" + new
            t["web_name"] = t["family"]
            lines.append(json.dumps(t, ensure_ascii=False))
    with open(os.path.join(out, "tasks.jsonl"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines)


def record(tasks_dir, out, jobs, surf, model, profile, extra):
    tasks = open(os.path.join(tasks_dir, "tasks.jsonl"), encoding="utf-8").read().splitlines()
    # The generator writes the tasks family by family: a seeded shuffle makes a recording stopped early (or a
    # shard) cover every family. The order is the same at every call, so a resumed recording skips its tasks.
    random.Random(len(tasks)).shuffle(tasks)
    procs = []
    for j in range(jobs):
        shard_dir = os.path.join(out, f"shard{j}")
        os.makedirs(shard_dir, exist_ok=True)
        with open(os.path.join(shard_dir, "tasks.jsonl"), "w", encoding="utf-8") as f:
            f.write("\n".join(tasks[j::jobs]) + "\n")
        log = open(os.path.join(shard_dir, "record.log"), "w")
        procs.append(subprocess.Popen([surf, "record", os.path.join(shard_dir, "tasks.jsonl"), "--model", model,
                                       "--profile", profile, "--out", shard_dir, "--extra-points", str(extra)],
                                      stdout=log, stderr=subprocess.STDOUT))
    return [p.wait() for p in procs]


def upload_bytes(folder):
    """The size of a folder as a tar stream, which is what the GPU machine's upload limit counts: every file
    pays a 512-byte header and is padded to 512 bytes."""
    total = 1024
    for root, dirs, names in os.walk(folder):
        total += 512 * len(dirs) + 512
        for n in names:
            total += 512 + -(-os.path.getsize(os.path.join(root, n)) // 512) * 512
    return total


def ship(weights, model, to):
    """Puts trained weights into a model folder together with the config and tokenizer they were trained with
    (weights beside another tokenizer read garbage); the folder's prompts and profile stay. Returns the files."""
    names = sorted(f for f in os.listdir(weights) if export.is_weights_file(f))
    if not any(f.endswith(".safetensors") for f in names):
        raise SystemExit(f"ship: no model*.safetensors in {weights}")
    export.remove_weights(to)
    for f in names:
        shutil.copy(os.path.join(weights, f), os.path.join(to, f))
    for f in export.MODEL_FILES:
        shutil.copy(os.path.join(model, f), os.path.join(to, f))
    return names + list(export.MODEL_FILES)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("tasks")
    t.add_argument("--split", required=True, choices=["train", "eval"])
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--count", type=int, required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--families")
    r = sub.add_parser("record")
    r.add_argument("--tasks", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--extra-points", type=int, default=4)
    r.add_argument("--surf", default=os.path.join(REPO, "build", "surf"))
    r.add_argument("--model", default=os.path.join(REPO, "models", "surf-tiny"),
                   help="a folder with the tokenizer and chat template (weights are not read)")
    r.add_argument("--profile", default=os.path.join(REPO, "models", "surf-tiny", "surf_profile.json"))
    b = sub.add_parser("build")
    b.add_argument("--episodes", nargs="+", required=True, help="record folders (their shard*/episodes.jsonl)")
    b.add_argument("--model", required=True)
    b.add_argument("--data", required=True)
    b.add_argument("--webp-quality", type=int, default=0,
                   help="store the screenshots as lossy WebP of this quality (default: lossless)")
    b.add_argument("--policy-variants", type=int, default=0,
                   help="one-turn policy examples made per episode from its first screenshot (augment.py)")
    b.add_argument("--value-swaps", type=int, default=0,
                   help="copies per episode of a policy session with its typed or answered values replaced")
    b.add_argument("--answer-swaps", type=int, default=0,
                   help="more copies of a policy session whose answer quotes a listed value, and as many "
                        "validator sessions judging such an answer with the value replaced (accepted or not)")
    b.add_argument("--tokenizer-from", help="keep this model folder's tokenizer instead of training one")
    b.add_argument("--parts", type=int, default=1,
                   help="split the episodes into this many packs, DATAa, DATAb, ... (one per chained call)")
    s = sub.add_parser("ship", help="put trained weights and their tokenizer into a model folder")
    s.add_argument("--weights", required=True, help="the exported weights (gpu_train.sh: $OUT/weights)")
    s.add_argument("--model", required=True, help="the model folder the run trained with (config, tokenizer)")
    s.add_argument("--to", default=os.path.join(REPO, "models", "surf-tiny"))
    a = ap.parse_args()
    if a.what == "build" and a.parts < 1:
        ap.error(f"--parts {a.parts}: the episodes need at least one pack")
    if a.what == "ship":
        print(f"shipped into {a.to}: {', '.join(ship(a.weights, a.model, a.to))}")
    elif a.what == "tasks":
        print(f"{make_tasks(a.split, a.seed, a.count, a.out, a.families)} tasks in {a.out}")
    elif a.what == "record":
        codes = record(a.tasks, a.out, a.jobs, a.surf, a.model, a.profile, a.extra_points)
        print(f"record exit codes {codes}")
    else:
        files = []
        for d in a.episodes:
            for root, _, names in os.walk(d):
                files += [os.path.join(root, n) for n in names if n == "episodes.jsonl"]
        if a.tokenizer_from:
            if os.path.abspath(a.tokenizer_from) != os.path.abspath(a.model):
                for f in ("tokenizer.json", "tokenizer_config.json"):
                    shutil.copy(os.path.join(a.tokenizer_from, f), os.path.join(a.model, f))
        else:
            data.write_model_files(a.model, data.train_tokenizer(sorted(files)))
        for k in range(a.parts):
            out = a.data if a.parts == 1 else a.data + chr(ord("a") + k)
            n, tok, shots = data.pack(sorted(files), a.model, out, webp_quality=a.webp_quality,
                                       policy_variants=a.policy_variants, value_swaps=a.value_swaps,
                                       answer_swaps=a.answer_swaps,
                                       part=(k, a.parts))
            print(f"{len(files)} episode files: {n} sequences, {tok} tokens, {shots} images -> {out} "
                  f"({upload_bytes(out) / 1e6:.1f} MB as the upload counts it)")


if __name__ == "__main__":
    main()
