#!/usr/bin/env python3
"""Tuner benchmark (issue: plugin auto-tuner). On the default deck's Zipf 1.05
workload with the link model on (100 Gb/s network, PCIe Gen5 host-to-device),
all inside `strata tune` runs of 4 ranks:
  1. the deck's default configuration, measured as a one-trial search;
  2. the exhaustive grid over the space below;
  3. Optuna (TPE) with a quarter of the grid's trials.
--scenario layouts does the same on inputs/moe.ini (4 top-2 experts) over 6
ranks, searching how the ranks divide the work: the producer/trainer/server split
and, on 4 trainers, dp x ep (docs/PARALLEL.md), with the batch size and L1 budget.
--scenario din_moe_long searches the same layouts on inputs/din_moe_long.ini: DIN
over histories of up to 2,000 items with a 4-expert top-2 tower (long sequences and
experts, where the split of the ranks and of the trainers into dp x ep matters).
Each trial trains --warmup unmeasured steps, then --steps measured ones. A
single short trial is noisy (+-10 % here), and the best of 72 noisy trials is
biased upwards (the winner's curse), so the default, the grid's best and
Optuna's best configurations are then re-measured alike: --repeats runs of
4 x --steps steps each, median. Prints every search's best and, last, the
ratios of the re-measured medians: tuned (grid best) / default, and Optuna's
best / the grid's best (the raw, single-trial ratios are printed too).

usage: bench_tune.py [--build DIR] [--steps N] [--warmup N] [--scenario store|layouts|din_moe_long]
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, default_build_dir, mpirun  # noqa: E402
LINKS = ["--links.network_gbps=100", "--links.network_latency_us=5", "--links.h2d_gbps=512",
         "--links.h2d_latency_us=2"]
# The space: L1 budget, prefetch depth, policy, role split, batch size (L2 fixed).
# On 4 ranks the valid splits are 1/2/1 and 1/1/2 (a producer needs a trainer).
SPACE = ["--tune.space_l1_mb=4|64", "--tune.space_l2_mb=256", "--tune.space_prefetch_depth=1|2|4",
         "--tune.space_policy=lru|lookahead", "--tune.space_layout=1/2/1|1/1/2",
         "--tune.space_batch_size=256|512|1024"]
GRID_TRIALS = 2 * 3 * 2 * 2 * 3
DEFAULT = ["--tune.space_l1_mb=64", "--tune.space_l2_mb=256", "--tune.space_prefetch_depth=2",
           "--tune.space_policy=lookahead", "--tune.space_layout=1/2/1", "--tune.space_batch_size=256"]

# The layouts scenario (issue 13): 6 ranks, the MoE deck; every split of the ranks
# and of 4 trainers into dp x ep, batch size per trainer, L1 budget.
LAYOUTS = "1/4/1|1/4/1,ep=2|1/4/1,ep=4|1/4/1,dp=2,ep=2|2/3/1|1/3/2|2/2/2,ep=2|1/2/3,ep=2"
SPACE_LAYOUTS = ["--tune.space_l1_mb=4|64", "--tune.space_l2_mb=256", "--tune.space_prefetch_depth=2",
                 "--tune.space_policy=lookahead", "--tune.space_layout=" + LAYOUTS,
                 "--tune.space_batch_size=128|256|512"]
GRID_TRIALS_LAYOUTS = 2 * 8 * 3
DEFAULT_LAYOUTS = ["--tune.space_l1_mb=64", "--tune.space_l2_mb=256", "--tune.space_prefetch_depth=2",
                   "--tune.space_policy=lookahead", "--tune.space_layout=1/4/1,ep=2", "--tune.space_batch_size=128"]
# The long-sequence MoE scenario (issue 13): 6 ranks, DIN over histories of up to
# 2,000 items with a 4-expert top-2 tower (inputs/din_moe_long.ini); the same
# splits and dp x ep, smaller batches (a sample carries its whole history).
SPACE_LONG = ["--tune.space_l1_mb=16|64", "--tune.space_l2_mb=256", "--tune.space_prefetch_depth=2",
              "--tune.space_policy=lookahead", "--tune.space_layout=" + LAYOUTS,
              "--tune.space_batch_size=16|32|64"]
DEFAULT_LONG = ["--tune.space_l1_mb=64", "--tune.space_l2_mb=256", "--tune.space_prefetch_depth=2",
                "--tune.space_policy=lookahead", "--tune.space_layout=1/4/1,ep=2", "--tune.space_batch_size=32"]
SCENARIOS = {"store": ("default.ini", 4, SPACE, GRID_TRIALS, DEFAULT),
             "layouts": ("moe.ini", 6, SPACE_LAYOUTS, GRID_TRIALS_LAYOUTS, DEFAULT_LAYOUTS),
             "din_moe_long": ("din_moe_long.ini", 6, SPACE_LONG, GRID_TRIALS_LAYOUTS, DEFAULT_LONG)}
SCENARIO = SCENARIOS["store"]


def tune(build, out, plugin, trials, extra, steps, warmup):
    shutil.rmtree(out, ignore_errors=True)
    deck, ranks = SCENARIO[0], SCENARIO[1]
    cmd = mpirun(ranks) + [os.path.join(build, "bin", "strata"), "tune", "--config", os.path.join(ROOT, "inputs", deck),
            f"--tune.plugin={plugin}", f"--tune.trials={trials}", f"--tune.trial_steps={steps}",
            f"--tune.warmup_steps={warmup}", "--tune.l1_limit_mb=1024", "--tune.l2_limit_mb=8192",
            "--output.dir=" + out, *LINKS, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"strata tune failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    rows = list(csv.DictReader(open(os.path.join(out, "trials.csv"))))
    done = [r for r in rows if r["state"] == "complete"]
    best = max(done, key=lambda r: float(r["samples_per_s"]))
    return rows, best


KNOB_KEYS = {"store.l1_mb": "tune.space_l1_mb", "store.l2_mb": "tune.space_l2_mb",
             "store.prefetch_depth": "tune.space_prefetch_depth", "store.policy": "tune.space_policy",
             "layout": "tune.space_layout", "train.batch_size": "tune.space_batch_size"}


def remeasure(build, work, name, row, steps, warmup, repeats):
    """The configuration of a trials.csv row, as one-trial searches, `repeats` times: the median."""
    fixed = [f"--{KNOB_KEYS[k]}={v}" for k, v in row.items() if k in KNOB_KEYS]
    values = []
    for i in range(repeats):
        _, best = tune(build, os.path.join(work, f"{name}_{i}"), "grid", 1, fixed, steps, warmup)
        values.append(float(best["samples_per_s"]))
    values.sort()
    return values[len(values) // 2], values


def describe(row):
    return ", ".join(f"{k}={v}" for k, v in row.items() if k.startswith(("store.", "layout", "train.")))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=default_build_dir())
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="store")
    args = p.parse_args()
    global SCENARIO
    SCENARIO = SCENARIOS[args.scenario]
    _, _, space, grid_trials, default_space = SCENARIO
    print(f"scenario {args.scenario}: inputs/{SCENARIO[0]} on {SCENARIO[1]} ranks")
    work = tempfile.mkdtemp(prefix="strata-bench-tune-")
    _, default = tune(args.build, os.path.join(work, "default"), "grid", 1, default_space, args.steps, args.warmup)
    print(f"default deck: {float(default['samples_per_s']):.0f} samples/s ({describe(default)})")
    rows, grid = tune(args.build, os.path.join(work, "grid"), "grid", grid_trials, space, args.steps, args.warmup)
    print(f"grid: {len(rows)} trials, best {float(grid['samples_per_s']):.0f} samples/s ({describe(grid)})")
    budget = grid_trials // 4
    study = os.path.join(work, "study.journal")
    rows, best = tune(args.build, os.path.join(work, "optuna"), "optuna", budget,
                      space + ["--tune.study=" + study, "--tune.seed=3"], args.steps, args.warmup)
    print(f"optuna: {len(rows)} trials, best {float(best['samples_per_s']):.0f} samples/s ({describe(best)})")
    print(f"single-trial ratios: grid best / default {float(grid['samples_per_s']) / float(default['samples_per_s']):.3f}, "
          f"optuna best / grid best {float(best['samples_per_s']) / float(grid['samples_per_s']):.3f}")
    long_steps = 4 * args.steps
    medians = {}
    for name, row in (("default", default), ("grid", grid), ("optuna", best)):
        medians[name], runs = remeasure(args.build, work, "re_" + name, row, long_steps, args.warmup, args.repeats)
        print(f"re-measured {name} best ({long_steps} steps x {args.repeats}): median {medians[name]:.0f} "
              f"samples/s (runs {', '.join(f'{v:.0f}' for v in runs)})")
    tag = "" if args.scenario == "store" else f" ({args.scenario})"
    print(f"ratio tuned/default{tag} samples/s (target >= 1.3): {medians['grid'] / medians['default']:.3f}")
    print(f"ratio optuna@{budget}/grid@{grid_trials}{tag} best samples/s (target >= 0.95): "
          f"{medians['optuna'] / medians['grid']:.3f}")


if __name__ == "__main__":
    main()
