#!/usr/bin/env python3
"""One L2 pool for co-trained models (issue 14, benchmark 2): the tiered models
of inputs/multi_model.ini (dlrm_a and din_c; dlrm_b is ps) share
--models.l2_pool_mb=P, against a static equal split of the same bytes
(--store.l2_mb=P/2 each). Two scenarios:

  slack:     dlrm_a's L1 (128 MiB) holds nearly all its rows, so its half of
             the split buys almost nothing; din_c's L1 is small (6 MiB).
  contended: dlrm_a's L1 is 48 MiB: both models use their L2.

Reports per model the L2 hit rate, L3 -> L2 bytes per sample and the final
grant, alternating pool and split, medians of --repeats; checks that every
params_digest is the same on both sides. Prints, last, per scenario:

  ratio pool/split l3_bytes_per_sample total   (target < 1)
  every model pool <= split (L3 bytes per sample, 2 % noise)

usage: /usr/bin/python3 bench/multi_model/bench_l2_pool.py [--build build] [--pool-mb 64] [--repeats 3]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, default_build_dir, mpirun  # noqa: E402

DECK = os.path.join(ROOT, "inputs", "multi_model.ini")
TIERED = ["dlrm_a", "din_c"]
SCENARIOS = {"slack": ["--model.dlrm_a.store.l1_mb=128", "--model.din_c.store.l1_mb=6"],
             "contended": ["--model.dlrm_a.store.l1_mb=48", "--model.din_c.store.l1_mb=6"]}


def run(strata, out, options):
    shutil.rmtree(out, ignore_errors=True)
    cmd = mpirun(9) + [strata, "train", "--config", DECK, "--output.dir=" + out, "--train.eval=false",
                       "--output.progress_every=1000000", *options]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"strata exited {proc.returncode}: {' '.join(cmd)}")
    found = {}
    for name in TIERED + ["dlrm_b"]:
        with open(os.path.join(out, name, "summary.json")) as f:
            s = json.load(f)
        entry = {"digest": s["params_digest"]}
        if name in TIERED:
            entry.update(l2_hit_rate=s["levels"]["l2"]["hit_rate"], l3_bytes=s["bytes_per_sample"]["l3_to_l2"],
                         grant=s.get("l2_pool", {}).get("final_grant_mb"))
        found[name] = entry
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=default_build_dir())
    parser.add_argument("--pool-mb", type=float, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    strata = os.path.join(args.build, "bin", "strata")
    work = tempfile.mkdtemp(prefix="strata-l2-pool-")
    sides = {"pool": [f"--models.l2_pool_mb={args.pool_mb:g}"], "split": [f"--store.l2_mb={args.pool_mb / 2:g}"]}
    results = {}
    try:
        for scenario, options in SCENARIOS.items():
            runs = {side: [] for side in sides}
            for i in range(args.repeats):
                order = list(sides) if i % 2 == 0 else list(reversed(list(sides)))
                for side in order:
                    r = run(strata, os.path.join(work, f"{scenario}_{side}"), options + sides[side])
                    runs[side].append(r)
                    print(f"  {scenario:9s} {side:5s} run {i + 1}: " + ", ".join(
                        f"{n} L2 hit {r[n]['l2_hit_rate']:.4f} L3 {r[n]['l3_bytes']:.1f} B/sample"
                        + (f" grant {r[n]['grant']:.1f} MiB" if r[n]["grant"] is not None else "") for n in TIERED),
                          flush=True)
            digests = {json.dumps({n: r[n]["digest"] for n in r}, sort_keys=True) for rs in runs.values() for r in rs}
            if len(digests) != 1:
                raise SystemExit(f"{scenario}: the pool changed a model's numbers: {digests}")
            results[scenario] = {side: {n: {k: statistics.median(r[n][k] for r in rs)
                                            for k in ("l2_hit_rate", "l3_bytes")} for n in TIERED}
                                 for side, rs in runs.items()}
            for n in TIERED:
                grants = [r[n]["grant"] for r in runs["pool"]]
                results[scenario]["pool"][n]["grant"] = statistics.median(grants)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\npool {args.pool_mb:g} MiB against a split of {args.pool_mb / 2:g} MiB each, median of {args.repeats}; "
          "every digest identical on both sides")
    print("| scenario | model | L2 hit rate split | L2 hit rate pool | L3 B/sample split | L3 B/sample pool | "
          "final grant MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for scenario, r in results.items():
        for n in TIERED:
            print(f"| {scenario} | {n} | {r['split'][n]['l2_hit_rate']:.4f} | {r['pool'][n]['l2_hit_rate']:.4f} | "
                  f"{r['split'][n]['l3_bytes']:.1f} | {r['pool'][n]['l3_bytes']:.1f} | {r['pool'][n]['grant']:.1f} |")
    for scenario, r in results.items():
        split = sum(r["split"][n]["l3_bytes"] for n in TIERED)
        pool = sum(r["pool"][n]["l3_bytes"] for n in TIERED)
        every = all(r["pool"][n]["l3_bytes"] <= r["split"][n]["l3_bytes"] * 1.02 + 0.5 for n in TIERED)
        print(f"{scenario}: every model pool <= split (L3 bytes per sample, 2 % noise): {every}")
        print(f"ratio {scenario} pool/split l3_bytes_per_sample total: {pool / split:.3f}")


if __name__ == "__main__":
    main()
