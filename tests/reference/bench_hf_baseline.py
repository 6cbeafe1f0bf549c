"""Same-card baseline for bench_serve: HF transformers NemotronH (pure PyTorch paths, no mamba_ssm) at the
Holotron-12B shapes with random bf16 weights, on the agent workload at the concurrency it can handle.

HF has no class for the VL wrapper, so the screenshot is fed as 768 image-sized token positions (random
ids) and the vision tower's cost is left out, which flatters the baseline. Each step appends 768 + 200
tokens and generates 100 (no EOS), continuing the session's cache (stateful). C sessions run in groups of
--batch: a group's sessions advance together in one batched forward (their prompts have equal lengths, so no
padding), groups one after the other. The reference scan's memory grows with batch x tokens (it runs out at
16 x 1024), which bounds the batch.

usage: python3 tests/reference/bench_hf_baseline.py [--steps 2] [--concurrency 1] [--batch 1] [--config tests/fixtures/holotron_12b/config.json]
"""
import argparse
import json
import time

import torch
from transformers import NemotronHConfig, NemotronHForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tests/fixtures/holotron_12b/config.json")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    llm = json.load(open(args.config))["llm_config"]
    cfg = NemotronHConfig(
        vocab_size=llm["vocab_size"], hidden_size=llm["hidden_size"], hybrid_override_pattern=llm["hybrid_override_pattern"],
        num_hidden_layers=llm["num_hidden_layers"], intermediate_size=llm["intermediate_size"],
        num_attention_heads=llm["num_attention_heads"], num_key_value_heads=llm["num_key_value_heads"], head_dim=llm["head_dim"],
        mamba_num_heads=llm["mamba_num_heads"], mamba_head_dim=llm["mamba_head_dim"], ssm_state_size=llm["ssm_state_size"],
        n_groups=llm["n_groups"], conv_kernel=llm["conv_kernel"], chunk_size=llm["chunk_size"], use_conv_bias=True,
        mlp_hidden_act="relu2", layer_norm_epsilon=1e-5, tie_word_embeddings=False, use_mamba_kernels=False)
    torch.manual_seed(0)
    t0 = time.time()
    with torch.device("cuda"):
        model = NemotronHForCausalLM(cfg).to(torch.bfloat16).eval()
    torch.cuda.synchronize()
    print(f"# HF NemotronH {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B params built in {time.time() - t0:.1f} s on "
          f"{torch.cuda.get_device_name()}", flush=True)
    generated = processed = 0
    latencies = []
    t_start = time.time()
    B = args.batch
    for c in range(0, args.concurrency, B):
        past = None
        for s in range(args.steps):
            ids = torch.randint(1000, 131000, (B, 968), device="cuda")
            ts = time.time()
            with torch.no_grad():
                out = model(input_ids=ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tok = out.logits[:, -1:].argmax(-1)
                for _ in range(args.new_tokens - 1):
                    out = model(input_ids=tok, past_key_values=past, use_cache=True)
                    past = out.past_key_values
                    tok = out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            latencies.append(time.time() - ts)
            generated += B * args.new_tokens
            processed += B * (968 + args.new_tokens)
            print(f"sessions {c}..{c + B - 1} step {s}: {latencies[-1]:.2f} s", flush=True)
    wall = time.time() - t_start
    print(f"| HF transformers baseline | C={args.concurrency} (batches of {B}) | output {generated / wall:.1f} tok/s | total {processed / wall:.1f} tok/s | "
          f"step mean {sum(latencies) / len(latencies):.2f} s | peak GPU {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB |")


if __name__ == "__main__":
    main()
