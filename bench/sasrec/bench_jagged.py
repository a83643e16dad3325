#!/usr/bin/env python3
"""Jagged against padded: strata's SASRec step time on Zipf-distributed sequence lengths
capped at --cap (jagged: each sequence costs its own length) against the same model on
the same number of sequences all --cap long, which is exactly the work of a padded batch
(every padded token is computed like a real one). The token ratio it prints bounds what
the linear layers can gain; attention, quadratic in each length, gains more (its pair
count sum L_i (L_i + 1) / 2 against B cap (cap + 1) / 2). Sides alternate; medians of
--repeats.

  /usr/bin/python3 bench/sasrec/bench_jagged.py --build build [--cap 4096] [--users 64]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, default_build_dir, mpirun  # noqa: E402


def run(args, law, out_dir):
    cmd = mpirun(3) + [os.path.join(args.build, "bin", "strata"), "train", "--config",
                       os.path.join(ROOT, "inputs", "sasrec.ini"),
                       "--layout.trainers=1", "--layout.producers=1", "--layout.servers=1",
                       "--data.source=synthetic_sequences", f"--data.sequence_users={args.users}",
                       f"--data.sequence_items={args.items}", f"--data.sequence_length={law}",
                       f"--data.max_seq_len={args.cap}", f"--model.sasrec_max_len={args.cap}",
                       f"--model.embedding_dim={args.dim}", f"--train.batch_size={args.batch}",
                       f"--train.steps={args.steps}", "--train.eval=false",
                       "--output.dir=" + out_dir, "--output.overwrite=true", "--output.progress_every=1000000"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"strata failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    with open(os.path.join(out_dir, "summary.json")) as f:
        s = json.load(f)
    return s["train_seconds"] / s["steps"], s["keys_per_batch"]["total"] / 3  # history + 2 candidates per token


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=default_build_dir())
    p.add_argument("--cap", type=int, default=4096)
    p.add_argument("--min-len", type=int, default=3)
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--users", type=int, default=256)
    p.add_argument("--items", type=int, default=100000)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="bench-jagged-")
    laws = {"jagged": f"zipf:{args.min_len}:{args.cap}:{args.zipf}", "padded": f"fixed:{args.cap}"}
    times = {k: [] for k in laws}
    tokens = {}
    for r in range(args.repeats):
        for side in (("jagged", "padded") if r % 2 == 0 else ("padded", "jagged")):
            t, tok = run(args, laws[side], os.path.join(work, f"{side}-{r}"))
            times[side].append(t)
            tokens[side] = tok
            print(f"  run {r} {side}: {1e3 * t:.1f} ms per step, {tok:.0f} history tokens per batch")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"jagged ({laws['jagged']}): {1e3 * med['jagged']:.1f} ms/step, {tokens['jagged']:.0f} tokens/batch; "
          f"padded to {args.cap}: {1e3 * med['padded']:.1f} ms/step, {tokens['padded']:.0f} tokens/batch "
          f"(batch {args.batch}, dim {args.dim}, 2 blocks)")
    print(f"ratio padded/jagged step time: {med['padded'] / med['jagged']:.2f}")
    print(f"ratio padded/jagged tokens: {tokens['padded'] / tokens['jagged']:.2f}")


if __name__ == "__main__":
    main()
