#!/usr/bin/env python3
"""Several models in one job (issue 14, benchmark 1): the three models of
inputs/multi_model.ini (two DLRMs and a DIN on one synthetic click log) trained
in one co-training job with shared ingestion (each sample and each
de-duplicated batch made once per node), the same job with
--models.shared_ingest=false, and the three trained as separate jobs, one after
the other, on the same data. Alternates the sides, takes medians.

Reports wall time, producer CPU-seconds per sample of the data pass (the
producers' user + sys from each rank's getrusage, summed over the models, per
sample of one model's pass), total peak RSS over all ranks, and checks that
every model's params_digest is the same on both sides. Prints, last:

  ratio co_training/one_model producer_cpu_per_sample  (target <= 1.25; separate jobs: 3)
  ratio co_training/separate wall_time

usage: /usr/bin/python3 bench/multi_model/bench_co_training.py [--build build] [--samples N] [--repeats 3]
       [--store-mode ps|tiered]   (default: the deck's, dlrm_b ps and the others tiered)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, default_build_dir, mpirun  # noqa: E402

DECK = os.path.join(ROOT, "inputs", "multi_model.ini")
MODELS = ["dlrm_a", "dlrm_b", "din_c"]
RANKS_PER_MODEL = 3  # the deck's 1 producer + 1 trainer + 1 server


def run(strata, ranks, out, options):
    shutil.rmtree(out, ignore_errors=True)
    cmd = mpirun(ranks) + [strata, "train", "--config", DECK, "--output.dir=" + out, *options]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"strata exited {proc.returncode}: {' '.join(cmd)}")
    return wall


def model_figures(out, name):
    with open(os.path.join(out, name, "summary.json")) as f:
        s = json.load(f)
    producer = s["cpu_s"]["producer"]
    rss = s["memory"]["peak_rss_mib"]
    return {"digest": s["params_digest"], "samples": s["samples"],
            "producer_cpu": producer["user"] + producer["sys"],
            "cpu_total": s["cpu_s"]["total"],
            "rss_mib": sum(rss.values())}  # one rank per role in this deck


def co_trained(strata, options, work):
    out = os.path.join(work, "co")
    wall = run(strata, RANKS_PER_MODEL * len(MODELS), out, options)
    return wall, {n: model_figures(out, n) for n in MODELS}


def co_trained_apart(strata, options, work):
    return co_trained(strata, options + ["--models.shared_ingest=false"], work)


def separate(strata, options, work):
    wall, figures = 0.0, {}
    for name in MODELS:
        out = os.path.join(work, "alone_" + name)
        wall += run(strata, RANKS_PER_MODEL, out, options + [f"--models.only={name}"])
        figures[name] = model_figures(out, name)
    return wall, figures


def summarize(side, wall, figures):
    samples = figures[MODELS[0]]["samples"]  # every model trains the same pass
    producer = sum(f["producer_cpu"] for f in figures.values())
    return {"side": side, "wall_s": wall, "samples": samples,
            "producer_cpu_us_per_sample": 1e6 * producer / samples,
            "producer_cpu_us_per_sample_per_model": {n: 1e6 * f["producer_cpu"] / f["samples"]
                                                     for n, f in figures.items()},
            "cpu_us_per_sample_all_ranks": 1e6 * sum(f["cpu_total"] for f in figures.values()) / samples,
            "peak_rss_mib_sum": sum(f["rss_mib"] for f in figures.values()),
            "digests": {n: f["digest"] for n, f in figures.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=default_build_dir())
    parser.add_argument("--samples", type=int, default=262144, help="synthetic training samples (one pass)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store-mode", choices=["ps", "tiered"], help="every model's store.mode")
    args = parser.parse_args()
    strata = os.path.join(args.build, "bin", "strata")
    options = [f"--data.synthetic_train_samples={args.samples}", "--train.eval=false",
               "--output.progress_every=1000000"]
    if args.store_mode:
        options.append(f"--store.mode={args.store_mode}")
    work = tempfile.mkdtemp(prefix="strata-co-training-")
    sides = [("co-trained", co_trained), ("co-trained apart", co_trained_apart), ("separate", separate)]
    runs = {side: [] for side, _ in sides}
    try:
        for i in range(args.repeats):
            for side, fn in sides if i % 2 == 0 else list(reversed(sides)):
                wall, figures = fn(strata, options, work)
                runs[side].append(summarize(side, wall, figures))
                r = runs[side][-1]
                print(f"  {side:16s} run {i + 1}: {r['wall_s']:6.2f} s, producer {r['producer_cpu_us_per_sample']:6.2f} "
                      f"CPU-us/sample, all ranks {r['cpu_us_per_sample_all_ranks']:6.2f}, "
                      f"RSS {r['peak_rss_mib_sum']:7.1f} MiB", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {side: {k: statistics.median(r[k] for r in rs)
                  for k in ("wall_s", "producer_cpu_us_per_sample", "cpu_us_per_sample_all_ranks", "peak_rss_mib_sum")}
           for side, rs in runs.items()}
    same = all(r["digests"] == runs["separate"][0]["digests"] for rs in runs.values() for r in rs)
    one_model = statistics.median(statistics.mean(r["producer_cpu_us_per_sample_per_model"].values())
                                  for r in runs["separate"])
    mode = args.store_mode or "the deck's (dlrm_b ps, dlrm_a and din_c tiered)"
    print(f"\n{len(MODELS)} models ({', '.join(MODELS)}), {args.samples} samples each, store mode {mode}, "
          f"median of {args.repeats}:")
    print("| side | wall s | producer CPU-us/sample of the pass | all ranks CPU-us/sample | peak RSS sum MiB |")
    print("|---|---:|---:|---:|---:|")
    for side, m in med.items():
        print(f"| {side} | {m['wall_s']:.2f} | {m['producer_cpu_us_per_sample']:.2f} | "
              f"{m['cpu_us_per_sample_all_ranks']:.2f} | {m['peak_rss_mib_sum']:.1f} |")
    print(f"one model's producer alone: {one_model:.2f} CPU-us/sample; every digest identical on both sides: {same}")
    if not same:
        raise SystemExit("co-trained and separate models trained different numbers")
    print(f"ratio co_training_apart/one_model producer_cpu_per_sample: "
          f"{med['co-trained apart']['producer_cpu_us_per_sample'] / one_model:.3f}")
    print(f"ratio co_training/one_model producer_cpu_per_sample: "
          f"{med['co-trained']['producer_cpu_us_per_sample'] / one_model:.3f}")
    print(f"ratio co_training/separate wall_time: {med['co-trained']['wall_s'] / med['separate']['wall_s']:.3f}")


if __name__ == "__main__":
    main()
