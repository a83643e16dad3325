#!/usr/bin/env python3
"""Several models in one job (issue 14, benchmark 3): a learning-rate search of
strata tune run one trial at a time (mpirun -n 3) against the same search with
--tune.co_train=3 (mpirun -n 9: three trials co-trained over one pass of the
producers, each sample parsed and hashed once for the three). The grid plugin
asks the same trials on both sides and each co-trained model is bit-identical
to the same model alone, so both sides must find the same best trial with the
same eval AUC (checked). Alternates the sides, takes medians.

The data: a Criteo-format TSV written once (parsing and hashing text is the
feature extraction that co-training shares), or the synthetic source.

Reports per side the search's wall time, trials per hour, the CPU-seconds of
all its ranks (getrusage of the mpirun children), and the best trial. Prints, last:

  ratio co_train/sequential trials_per_hour

usage: /usr/bin/python3 bench/multi_model/bench_tune_co_train.py [--build build] [--data criteo|synthetic]
       [--lines 200000] [--trial-steps 600] [--repeats 3] [--store-mode tiered|ps]
"""
import argparse
import csv
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import default_build_dir, mpirun  # noqa: E402

RANKS_PER_TRIAL = 3  # 1 producer + 1 trainer + 1 server
SPARSE_LR = "0.02|0.05|0.1"
DENSE_LR = "0.001|0.01"


def write_criteo(path, lines, seed):
    """Criteo-like TSV: label, 13 integers (some empty), 26 hex categoricals (Pareto-hot)."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(lines):
            hot = rng.random()
            label = rng.random() < (0.15 + 0.3 * hot)
            ints = ["" if rng.random() < 0.1 else str(int(rng.expovariate(0.1 + hot))) for _ in range(13)]
            cats = ["" if rng.random() < 0.05 else "%08x" % (int(rng.paretovariate(1.1) * (t + 1) * 97) % 20000)
                    for t in range(26)]
            f.write("\t".join([str(int(label))] + ints + cats) + "\n")


def deck(path, data_lines, train, evalf, steps, mode):
    if train:
        data = f"source = criteo\ntrain = {train}\neval = {evalf}\nnum_tables = 26\nvocab_sizes = 100000\n"
    else:
        data = (f"source = synthetic\nsynthetic_train_samples = {data_lines}\nsynthetic_eval_samples = 16384\n"
                "num_tables = 26\nvocab_sizes = 100000\nzipf_exponent = 1.05\n")
    with open(path, "w") as f:
        f.write(f"""[layout]
producers = 1
trainers = 1
servers = 1

[data]
{data}
[model]
embedding_dim = 16
bottom_mlp = 64,16
top_mlp = 64,32

[train]
batch_size = 256

[store]
mode = {mode}
l1_mb = 8
l2_mb = 16

[output]
metrics_every = 1000000

[tune]
plugin = grid
space_l1_mb =
space_l2_mb =
space_prefetch_depth =
space_policy =
space_sparse_lr = {SPARSE_LR}
space_dense_lr = {DENSE_LR}
objective = eval_auc
trials = 6
trial_steps = {steps}
warmup_steps = 0
""")


def run(strata, config, out, co_train):
    shutil.rmtree(out, ignore_errors=True)
    ranks = RANKS_PER_TRIAL * co_train
    cmd = mpirun(ranks) + [strata, "tune", "--config", config, "--output.dir=" + out,
                           f"--tune.co_train={co_train}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"strata exited {proc.returncode}: {' '.join(cmd)}")
    with open(os.path.join(out, "trials.csv")) as f:
        rows = list(csv.DictReader(f))
    done = [x for x in rows if x["state"] == "complete"]
    if len(done) != 6:
        raise SystemExit(f"{out}: {len(done)} of 6 trials complete: {rows}")
    best = max(done, key=lambda x: float(x["eval_auc"]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "trials": len(rows),
            "best": (best["optim.sparse_lr"], best["optim.dense_lr"], best["eval_auc"]),
            "aucs": sorted((x["optim.sparse_lr"], x["optim.dense_lr"], x["eval_auc"]) for x in done)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=default_build_dir())
    parser.add_argument("--data", choices=["criteo", "synthetic"], default="criteo")
    parser.add_argument("--lines", type=int, default=200000, help="training samples (lines of the TSV)")
    parser.add_argument("--trial-steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store-mode", choices=["tiered", "ps"], default="tiered")
    args = parser.parse_args()
    strata = os.path.join(args.build, "bin", "strata")
    work = tempfile.mkdtemp(prefix="strata_tune_co_")
    train = evalf = ""
    if args.data == "criteo":
        train, evalf = os.path.join(work, "train.tsv"), os.path.join(work, "eval.tsv")
        write_criteo(train, args.lines, 1)
        write_criteo(evalf, 16384, 2)
    config = os.path.join(work, "tune.ini")
    deck(config, args.lines, train, evalf, args.trial_steps, args.store_mode)
    print(f"# strata tune, 6 trials (optim.sparse_lr {SPARSE_LR} x optim.dense_lr {DENSE_LR}) of "
          f"{args.trial_steps} steps x batch 256, objective eval_auc, data {args.data} "
          f"({args.lines} samples), store {args.store_mode}; {args.repeats} alternating runs per side, medians")
    sides = {"sequential": 1, "co_train": 3}
    runs = {name: [] for name in sides}
    for repeat in range(args.repeats):
        for name in (sides if repeat % 2 == 0 else reversed(list(sides))):
            figures = run(strata, config, os.path.join(work, name), sides[name])
            runs[name].append(figures)
            print(f"  run {repeat + 1} {name:10s} {figures['wall']:7.2f} s wall, {figures['cpu']:7.2f} CPU-s, "
                  f"best {figures['best']}", flush=True)
    first = runs["sequential"][0]
    for name in sides:
        for figures in runs[name]:
            if figures["aucs"] != first["aucs"]:
                raise SystemExit(f"{name}: the trials' eval AUCs differ from the sequential search's")
    print(f"\n{'side':12s} {'wall s':>8s} {'trials/hour':>12s} {'CPU-s':>8s} {'CPU-s/trial':>12s}  best (sparse_lr, "
          "dense_lr, eval_auc)")
    rate = {}
    for name in sides:
        wall = statistics.median(x["wall"] for x in runs[name])
        cpu = statistics.median(x["cpu"] for x in runs[name])
        rate[name] = 6 * 3600 / wall
        print(f"{name:12s} {wall:8.2f} {rate[name]:12.0f} {cpu:8.2f} {cpu / 6:12.2f}  {runs[name][0]['best']}")
    print("\nboth sides: the same six eval AUCs, bit for bit, and the same best trial")
    shutil.rmtree(work, ignore_errors=True)
    print(f"ratio co_train/sequential trials_per_hour {rate['co_train'] / rate['sequential']:.2f}")


if __name__ == "__main__":
    main()
