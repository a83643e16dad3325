#!/usr/bin/env python3
"""Parallel layouts (issue 13, benchmarks 1 and 2), what a 2-core machine can show.
There are more ranks than cores here, so more ranks cannot run faster. The
benchmark reports what does not depend on the core count (bytes per step and per
layer, memory per trainer, load balance, drops, AUC, exactness). It also reports
samples/s as measured here, and a modelled step time on one core per trainer:
the measured trainer CPU per step plus the link model's time for the bytes the
layout adds (--gbps, --latency-us, per message).

1. Expert parallel: inputs/moe.ini (4 top-2 experts, dropless). ep = 1 and 2 on
   2 trainers; dp 4, dp 2 x ep 2 and ep 4 on 4 trainers, with the same global
   batch. Then the capacity factor (0, 1.0, 1.25, 1.5, 2.0) at ep = 2 over one
   epoch: drop fraction and eval AUC (evaluated dropless) against dropless.
2. Sequence parallel: hstu on L-event histories (inputs/long_sequence.ini's
   model, 4 trainers, one history per trainer step): sp = 1, 2 (ring and
   alltoall), 4 (ring). Step time, trainer peak RSS, bytes per layer, attention
   max/mean. Then the issue's memory metric: 4 users of which one has a long
   history (--length / 2 and 2 x --length events), 1 sample per trainer step, so
   every step trains one long history; the busiest trainer's bytes per event and
   the longest history that fits --budget-mib per trainer, as for din below.
3. Sequence parallel for din, the issue's memory metric: inputs/din.ini's model
   on click-log lines where one sample per step has a long history (--din-length
   and an eighth of it) and the other seven 20 events, 4 trainers, 2 samples per
   trainer step: sp = 1, 2, 4. The same columns, then the busiest trainer's bytes
   per event of the long history and the longest history that fits
   --budget-mib per trainer; "attn max/mean" is the events' balance.

Each configuration runs --repeats times, alternating configurations, and the
medians are reported. Prints, last:

  ratio ep2/ep1 params_digest_equal        (1 = bit-identical)
  ratio ep2/ep1 modelled_step_time
  ratio capacity1.25 drop_fraction_percent  (target < 1)
  ratio capacity1.25/dropless auc_gap       (target <= 0.001: |mean AUC difference| over --seeds seeds)
  ratio sp2/sp1 params_digest_equal
  ratio sp2/sp1 trainer_peak_rss            (every trainer the home of one history: 1 at best)
  ratio hstu sp2/sp1 longest_history_at_budget  (target >= 0.8 x 2)
  ratio hstu sp4/sp1 longest_history_at_budget  (target >= 0.8 x 4)
  ratio din sp2,sp4/sp1 params_digest_equal
  ratio din sp2/sp1 longest_history_at_budget  (target >= 0.8 x 2)
  ratio din sp4/sp1 longest_history_at_budget  (target >= 0.8 x 4)

usage: /usr/bin/python3 bench/parallel/bench_layouts.py [--build build] [--steps 300] [--repeats 3]
       [--length 4096] [--din-length 131072] [--budget-mib 1024] [--gbps 25] [--latency-us 50] [--only ep|capacity|sp|sp_din]
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, default_build_dir, mpirun  # noqa: E402


def run(strata, ranks, out, options):
    shutil.rmtree(out, ignore_errors=True)
    cmd = mpirun(ranks) + [strata, "train", "--output.dir=" + out, "--output.progress_every=1000000", *options]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"strata exited {proc.returncode}: {' '.join(cmd)}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    summary["wall_s"] = time.time() - start
    return summary


def repeated(strata, configs, repeats, work):
    """configs: name -> (ranks, options). Runs them alternately; name -> list of summaries."""
    results = {name: [] for name in configs}
    for r in range(repeats):
        for name, (ranks, options) in configs.items():
            results[name].append(run(strata, ranks, os.path.join(work, f"{name}-{r}"), options))
    return results


def median(values):
    return statistics.median(values)


def trainer_cpu_per_step(s):
    """CPU-seconds one trainer spends per step (user + sys over the training loop)."""
    cpu = s["cpu_s"]["trainer"]
    trainers = s["layout"]["trainers"]
    return (cpu["user"] + cpu["sys"]) / trainers / max(s["steps"], 1)


def expert_parallel(strata, args, work):
    deck = ["--config", os.path.join(ROOT, "inputs", "moe.ini"), f"--train.steps={args.steps}",
            "--data.synthetic_eval_samples=16384", "--store.mode=tiered"]
    configs = {
        "2t ep1": (4, deck + ["--layout.trainers=2", "--layout.ep=1", "--train.batch_size=256"]),
        "2t ep2": (4, deck + ["--layout.trainers=2", "--layout.ep=2", "--train.batch_size=256"]),
        "4t dp4": (6, deck + ["--layout.trainers=4", "--layout.ep=1", "--train.batch_size=128"]),
        "4t dp2xep2": (6, deck + ["--layout.trainers=4", "--layout.ep=2", "--train.batch_size=128"]),
        "4t ep4": (6, deck + ["--layout.trainers=4", "--layout.ep=4", "--train.batch_size=128"]),
    }
    results = repeated(strata, configs, args.repeats, work)
    print(f"Expert parallel: inputs/moe.ini, {args.steps} steps, global batch 512, medians of {args.repeats}")
    print(f"{'layout':<12} {'samples/s':>10} {'trainer CPU ms/step':>20} {'expert bytes/trainer step':>26} "
          f"{'modelled step ms':>17} {'trainer RSS MiB':>16} {'max/mean load':>14}  digest")
    modelled = {}
    for name, runs in results.items():
        s = runs[0]
        steps, trainers = s["steps"], s["layout"]["trainers"]
        cpu = median([trainer_cpu_per_step(x) for x in runs])
        expert_bytes = s["bytes"]["trainer_experts"] / trainers / steps
        ep = s["layout"]["ep"]
        # Four all-to-alls a step over ep members (plus the replica chain): the bytes
        # leave on one link per trainer.
        link = expert_bytes * 8 / (args.gbps * 1e9) + (4 * (ep - 1) * args.latency_us * 1e-6 if ep > 1 else 0)
        modelled[name] = cpu + link
        rss = median([x["memory"]["peak_rss_training_mib"]["trainer"] for x in runs])
        print(f"{name:<12} {median([x['samples_per_s'] for x in runs]):>10.0f} {cpu * 1e3:>20.2f} "
              f"{expert_bytes:>26.0f} {modelled[name] * 1e3:>17.2f} {rss:>16.1f} "
              f"{s['experts']['max_mean_load']:>14.3f}  {s['params_digest'][:16]}")
    same2 = results["2t ep2"][0]["params_digest"] == results["2t ep1"][0]["params_digest"]
    same4 = len({results[n][0]["params_digest"] for n in ("4t dp4", "4t dp2xep2", "4t ep4")}) == 1
    print(f"bit-identical: ep2 == ep1 on 2 trainers: {same2}; dp4 == dp2xep2 == ep4: {same4}")
    return [("ep2/ep1 params_digest_equal", 1.0 if same2 and same4 else 0.0),
            ("ep2/ep1 modelled_step_time", modelled["2t ep2"] / modelled["2t ep1"])]


def capacity(strata, args, work):
    """Capacity factor against dropless: one epoch of the deck's 262,144 samples,
    evaluated dropless (model.eval_capacity_factor = 0, the default), for
    --seeds model seeds each: one run's AUC moves by about as much as the target
    gap from seed to seed, so the comparison is of means over seeds."""
    deck = ["--config", os.path.join(ROOT, "inputs", "moe.ini"), "--data.synthetic_eval_samples=16384",
            "--store.mode=tiered"]
    epoch_steps = 262144 // 512
    cap_deck = deck + [f"--train.steps={epoch_steps}", "--layout.trainers=2", "--layout.ep=2",
                       "--train.batch_size=256"]
    caps = ["0", "1.0", "1.25", "1.5"]
    seeds = list(range(1, args.seeds + 1))
    configs = {(c, seed): (4, cap_deck + [f"--model.capacity_factor={c}", f"--train.seed={seed}"])
               for seed in seeds for c in caps}
    runs = {key: run(strata, ranks, os.path.join(work, f"cap-{key[0]}-{key[1]}"), options)
            for key, (ranks, options) in configs.items()}
    print(f"\nCapacity factor at ep 2 ({epoch_steps} steps = one epoch, aux_loss_weight 0.01, evaluated dropless), "
          f"seeds {seeds}:")
    print(f"{'capacity':>9} {'drop %':>8} {'eval AUC per seed':>28} {'mean':>7} {'mean - dropless':>16} "
          f"{'max/mean load':>14}")
    mean_auc = {c: statistics.mean(runs[(c, s)]["eval_auc"] for s in seeds) for c in caps}
    spread = max(runs[("0", s)]["eval_auc"] for s in seeds) - min(runs[("0", s)]["eval_auc"] for s in seeds)
    for c in caps:
        drops = statistics.mean(runs[(c, s)]["experts"]["drop_fraction"] for s in seeds)
        load = statistics.mean(runs[(c, s)]["experts"]["max_mean_load"] for s in seeds)
        per_seed = " ".join(f"{runs[(c, s)]['eval_auc']:.4f}" for s in seeds)
        print(f"{c:>9} {100 * drops:>8.3f} {per_seed:>28} {mean_auc[c]:>7.4f} {mean_auc[c] - mean_auc['0']:>+16.4f} "
              f"{load:>14.3f}")
    print(f"dropless AUC spread over seeds: {spread:.4f}")
    drops125 = statistics.mean(runs[("1.25", s)]["experts"]["drop_fraction"] for s in seeds)
    return [("capacity1.25 drop_fraction_percent", 100 * drops125),
            ("capacity1.25/dropless auc_gap", abs(mean_auc["0"] - mean_auc["1.25"]))]


def print_sequence_parallel(title, results, repeats):
    """One row per layout: step time, trainer CPU and peak RSS, bytes per layer, balance, digest."""
    print(f"\n{title}, medians of {repeats}")
    print(f"{'layout':<13} {'step ms':>9} {'trainer CPU ms/step':>20} {'trainer peak MiB':>17} "
          f"{'fwd bytes/layer':>16} {'bwd bytes/layer':>16} {'attn max/mean':>14}  digest")
    for name, runs in results.items():
        s = runs[0]
        step_ms = median([x["train_seconds"] / x["steps"] for x in runs]) * 1e3
        sp = s.get("sequence_parallel", {})
        print(f"{name:<13} {step_ms:>9.1f} {median([trainer_cpu_per_step(x) for x in runs]) * 1e3:>20.1f} "
              f"{median([x['memory']['peak_rss_training_mib']['trainer'] for x in runs]):>17.1f} "
              f"{sp.get('trainer0_bytes_per_layer_forward', 0):>16.0f} "
              f"{sp.get('trainer0_bytes_per_layer_backward', 0):>16.0f} "
              f"{sp.get('attention_max_mean', 1.0):>14.3f}  {s['params_digest'][:16]}")
    return {n: median([x["memory"]["peak_rss_training_mib"]["trainer"] for x in results[n]]) for n in results}


def longest_at_budget(results, model, lengths, budget_mib):
    """From runs named "<model> sp<k> L<length>" at two lengths of the one long history
    per step: the busiest trainer's bytes per event (the slope of its peak RSS), and
    the longest history that fits budget_mib per trainer. Prints a table; returns
    {k: longest}."""
    peak = {n: median([x["memory"]["peak_rss_training_mib"]["trainer"] for x in results[n]]) for n in results}
    print(f"\nLongest trainable {model} history at {budget_mib} MiB per trainer (from the two lengths):")
    print(f"{'layout':<8} {'bytes/event':>12} {'intercept MiB':>14} {'longest events':>15} {'vs sp1':>8} {'target':>7}")
    longest = {}
    for k in (1, 2, 4):
        lo, hi = peak[f"{model} sp{k} L{lengths[0]}"], peak[f"{model} sp{k} L{lengths[1]}"]
        slope = (hi - lo) / (lengths[1] - lengths[0])  # MiB per event
        intercept = lo - slope * lengths[0]
        longest[k] = (budget_mib - intercept) / slope
        print(f"sp {k:<5} {slope * 2**20:>12.0f} {intercept:>14.1f} {longest[k]:>15.0f} "
              f"{longest[k] / longest[1]:>8.2f} {0.8 * k:>7.1f}")
    return longest


def write_din_histories(path, long_events, lines, seed=5):
    """DIN click-log lines (history;candidate;label;dense) where the first sample of
    every 8 (4 trainers x 2 samples: one training step) has a history of
    long_events distinct-looking items and the others 20: one long history per
    step, on trainer 0."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(lines):
            n = long_events if i % 8 == 0 else 20
            history = "|".join(f"i{rng.randrange(1 << 30)}" for _ in range(n))
            f.write(f"{history};i{rng.randrange(1 << 30)};{rng.randint(0, 1)};{rng.randint(0, 50)}\n")


def din_sequence_parallel(strata, args, work):
    """The issue's memory metric: the longest history a trainer can train at a fixed
    per-trainer budget. One long history per step (the rest short), at two lengths;
    the trainers' largest peak RSS grows linearly with the long history's events, so
    its slope is the bytes per event on the busiest trainer and the intercept the
    rest; the longest trainable history at --din-budget-mib is (budget - intercept) /
    slope."""
    lengths = (args.din_length // 8, args.din_length)
    configs = {}
    for L in lengths:
        path = os.path.join(work, f"din-{L}.csv")
        write_din_histories(path, L, 64)
        deck = ["--config", os.path.join(ROOT, "inputs", "din.ini"), "--data.source=csv", "--data.train=" + path,
                "--data.csv_delimiter=;", "--data.csv_columns=seq:|,cand,label,dense:1",
                "--model.din_history_table=0", f"--data.max_seq_len={L}", "--train.batch_size=2", "--train.steps=0",
                "--train.epochs=1", "--train.eval=false", "--layout.trainers=4", "--layout.sp_min_len=256",
                "--store.mode=ps"]
        for k in (1, 2, 4):
            configs[f"din sp{k} L{L}"] = (6, deck + [f"--layout.sp={k}"])
    results = repeated(strata, configs, args.repeats, work)
    print_sequence_parallel(f"Sequence parallel: din, one history of {lengths[0]} or {lengths[1]} events per step "
                            "(the other 7 samples 20), 4 trainers, 2 samples per trainer step", results, args.repeats)
    longest = longest_at_budget(results, "din", lengths, args.budget_mib)
    digests = {k: {results[f"din sp{k} L{L}"][0]["params_digest"] for L in lengths} for k in (1, 2, 4)}
    same = all(digests[k] == digests[1] for k in (2, 4))
    return [("din sp2,sp4/sp1 params_digest_equal", float(same)),
            ("din sp2/sp1 longest_history_at_budget", longest[2] / longest[1]),
            ("din sp4/sp1 longest_history_at_budget", longest[4] / longest[1])]


def sequence_parallel(strata, args, work):
    L = args.length
    deck = ["--config", os.path.join(ROOT, "inputs", "long_sequence.ini"), "--model.kind=hstu",
            "--data.sequence_users=16", "--data.sequence_items=5000", f"--data.sequence_length=fixed:{L}",
            f"--data.max_seq_len={L}", f"--model.hstu_max_len={L}", "--model.embedding_dim=64",
            "--model.hstu_heads=4", "--model.hstu_blocks=2", "--layout.sp_min_len=256", "--train.batch_size=1",
            "--train.steps=4", "--train.eval=false", "--layout.trainers=4", "--store.mode=ps"]
    configs = {
        "sp1": (6, deck + ["--layout.sp=1"]),
        "sp2 ring": (6, deck + ["--layout.sp=2", "--layout.sp_mode=ring"]),
        "sp2 alltoall": (6, deck + ["--layout.sp=2", "--layout.sp_mode=alltoall"]),
        "sp4 ring": (6, deck + ["--layout.sp=4", "--layout.sp_mode=ring"]),
    }
    results = repeated(strata, configs, args.repeats, work)
    rss = print_sequence_parallel(f"Sequence parallel: hstu, {L} events per history, 4 trainers, 1 history per "
                                  "trainer step", results, args.repeats)
    digests = {results[n][0]["params_digest"] for n in configs}
    # The metric: 4 users, one with a long history, 1 sample per trainer step,
    # so every step (one epoch of 4 users, reshuffled) trains one long history.
    lengths = (args.length // 2, 2 * args.length)
    long_runs = {}
    for L in lengths:
        path = os.path.join(work, f"hstu-{L}.txt")
        rng = random.Random(7)
        with open(path, "w") as f:
            for user, n in enumerate([L + 2, 22, 22, 22]):
                f.writelines(f"u{user} i{rng.randrange(200000)} {t}\n" for t in range(n))
        one_long = [d for d in deck if not d.startswith(("--data.", "--model.hstu_max_len", "--train.steps"))] + [
            "--data.source=sequences", "--data.train=" + path, "--data.sequence_timestamps=true",
            f"--data.max_seq_len={L + 8}", f"--model.hstu_max_len={L + 8}", "--train.steps=0", "--train.epochs=3"]
        for k in (1, 2, 4):
            long_runs[f"hstu sp{k} L{L}"] = (6, one_long + [f"--layout.sp={k}", "--layout.sp_mode=ring"])
    long_results = repeated(strata, long_runs, 1, work)
    print_sequence_parallel(f"Sequence parallel: hstu, one history of {lengths[0]} or {lengths[1]} events per step "
                            "(the other 3 samples 21), 4 trainers, 1 sample per trainer step", long_results, 1)
    longest = longest_at_budget(long_results, "hstu", lengths, args.budget_mib)
    same = all(len({long_results[f"hstu sp{k} L{L}"][0]["params_digest"] for k in (1, 2, 4)}) == 1 for L in lengths)
    return [("sp2/sp1 params_digest_equal", 1.0 if len(digests) == 1 and same else 0.0),
            ("sp2/sp1 trainer_peak_rss", rss["sp2 ring"] / rss["sp1"]),
            ("hstu sp2/sp1 longest_history_at_budget", longest[2] / longest[1]),
            ("hstu sp4/sp1 longest_history_at_budget", longest[4] / longest[1])]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=default_build_dir())
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--gbps", type=float, default=25.0)
    parser.add_argument("--latency-us", type=float, default=50.0)
    parser.add_argument("--din-length", type=int, default=131072)
    parser.add_argument("--budget-mib", type=float, default=1024.0)
    parser.add_argument("--only", choices=["ep", "capacity", "sp", "sp_din"], default=None)
    args = parser.parse_args()
    strata = os.path.join(args.build, "bin", "strata")
    work = tempfile.mkdtemp(prefix="strata-layouts-")
    try:
        ratios = []
        if args.only in (None, "ep"):
            ratios += expert_parallel(strata, args, work)
        if args.only in (None, "capacity"):
            ratios += capacity(strata, args, work)
        if args.only in (None, "sp"):
            ratios += sequence_parallel(strata, args, work)
        if args.only in (None, "sp_din"):
            ratios += din_sequence_parallel(strata, args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    for name, value in ratios:
        print(f"ratio {name}: {value:.4f}")


if __name__ == "__main__":
    main()
