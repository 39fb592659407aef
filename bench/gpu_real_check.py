#!/usr/bin/env python3
"""The real models on the GPU against llama.cpp, on a machine without Node (the H200 of bench/README.md).

llama.cpp's side is recorded beforehand by tools/real_reference.mjs (bench/data/real_reference.json: prompt
ids, greedy ids and llama.cpp's two best tokens at every step, for the prompts of tools/real_models.mjs); this
script runs `sotto generate --json` on the WebGPU backend and on the CPU backend of the same machine and holds
both against it with the rule of tests/web/llm_real.test.mjs: token for token up to the first step where
llama.cpp's top-2 margin is below the recorded near_tie, and there ours must be one of llama.cpp's tokens
within near_tie of its best (`near`; files recorded without it allow the second choice only).

    python3 bench/gpu_real_check.py --sotto BIN --models DIR [--reference FILE] [--threads N]

Prints one line per model, prompt and backend, then a summary; exits 1 if a run breaks the rule.
"""
import argparse
import json
import os
import subprocess
import sys


def near_tie_match(ours, ref, near_tie):
    """(at, margin, error): at = -1 when all tokens are llama.cpp's."""
    ids = ref["ids"]
    for at, want in enumerate(ids):
        if at >= len(ours) or ours[at] != want:
            (best, best_lp), (second, second_lp) = ref["top2"][at]
            margin = best_lp - second_lp
            got = ours[at] if at < len(ours) else None
            near = ref["near"][at] if "near" in ref else ref["top2"][at]
            for token, lp in near[1:]:
                if token == got and best_lp - lp < near_tie:
                    return at, best_lp - lp, None
            return at, margin, (f"token {at} is {got}, llama.cpp's is {best} with a margin of {margin:.4f} "
                                f"over its second choice {second}")
    return -1, None, None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sotto", required=True)
    ap.add_argument("--models", required=True, help="folder holding the real GGUF files")
    ap.add_argument("--reference", default=os.path.join(here, "data", "real_reference.json"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--backends", default="webgpu,cpu")
    args = ap.parse_args()
    with open(args.reference) as f:
        reference = json.load(f)
    near_tie = reference["near_tie"]
    n = reference["n_generate"]
    failures = 0
    for file, runs in reference["models"].items():
        path = os.path.join(args.models, file)
        if not os.path.exists(path):
            print(f"{file}: not in {args.models}, skipped")
            continue
        for ref in runs:
            label = f"{file} {'chat' if ref['special'] else 'plain'} {json.dumps(ref['text'][-40:])}"
            for backend in args.backends.split(","):
                cmd = [args.sotto, "generate", "-m", path, "--prompt-ids", ",".join(map(str, ref["prompt_ids"])),
                       "-n", str(n), "--greedy", "--json", "--ctx", "256", "--backend", backend]
                if backend == "cpu":
                    cmd += ["--threads", str(args.threads)]
                run = subprocess.run(cmd, capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"{label} {backend}: FAILED to run: {run.stderr.strip()}")
                    failures += 1
                    continue
                out = json.loads(run.stdout)
                at, margin, error = near_tie_match(out["ids"], ref, near_tie)
                speed = f"prefill {out['prefill_ms']:.1f} ms, {out['decode_tokens_per_s']:.1f} tokens/s"
                if error:
                    failures += 1
                    print(f"{label} {backend}: MISMATCH: {error} ({speed})")
                elif at == -1:
                    print(f"{label} {backend}: {n}/{n} tokens as llama.cpp ({speed})")
                else:
                    print(f"{label} {backend}: {at}/{n} tokens, then llama.cpp's near tie (margin {margin:.4f}, "
                          f"we took its 2nd choice) ({speed})")
    print(f"{'all runs within the rule' if failures == 0 else f'{failures} runs broke the rule'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
