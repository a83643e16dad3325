#!/usr/bin/env python3
"""Does Scheme B pay off? strata's tiered store (its default) against its ps mode
(Scheme A) on the model and data of bench/bench_dlrm.py, and the producer's
staging cost at a small L1. Prints, ratios last:

  1. samples/s tiered/ps at each --batches global batch, link model off, and with
     a modelled 25 Gb/s + 50 us network (PCIe-class host-to-device 512 Gb/s + 2 us);
     target >= 1.0 without, >= 1.5 with the network model.
  2. CPU-seconds per sample over all ranks, tiered/ps (summary.json's
     cpu_us_per_sample.total: every rank's user + sys over the training loop);
     target <= 1.0.
  3. the producer's staging CPU per sample on inputs/default.ini (26 keys per
     sample, 2 trainers x 256) with each trainer's L1 = 2 % of the rows the ps run
     ends with (cpu_us_per_sample.producer_staging); target <= 3 us.
  4. the sparse side's physical limit: 26 keys per sample, each a value row and
     an Adagrad state row of 16 floats gathered and scatter-updated, at the random
     gather + scatter-add rate bench_gather_scatter measures at dim 16; and the
     share of it strata's best run reaches.

Every comparison alternates the two sides (ps, tiered, ps, tiered, ...) and takes
the median of --repeats runs each, after waiting for a quiet machine; tiered and
ps must end with the same params_digest (the exactness invariant) or the
benchmark fails.

usage: bench_scheme_b.py [--build DIR] [--batches 256,1024] [--trainers 2] [--repeats 3] [--seconds 8]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, default_build_dir, dlrm_deck, mpirun  # noqa: E402
from bench_dlrm import Interference, wait_quiet  # noqa: E402

NETWORK_25G = ["--links.network_gbps=25", "--links.network_latency_us=50",
               "--links.h2d_gbps=512", "--links.h2d_latency_us=2"]
KEYS_PER_SAMPLE = 26
ROW_BYTES = (16 + 16) * 4  # dim 16 values + Adagrad state, float32


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=default_build_dir())
    p.add_argument("--batches", default="256,1024")
    p.add_argument("--trainers", type=int, default=2, help="trainer ranks (plus 1 producer and 1 server)")
    p.add_argument("--repeats", type=int, default=3, help="runs per side; the median counts")
    p.add_argument("--seconds", type=float, default=8.0, help="target training time per run")
    p.add_argument("--staging-steps", type=int, default=1500, help="steps of the default-deck staging runs")
    p.add_argument("--quiet-cores", type=float, default=0.3)
    p.add_argument("--quiet-wait", type=float, default=60.0)
    return p.parse_args()


class Runner:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="strata-bench-scheme-b-")
        self.count = 0

    def run(self, options):
        """One strata run; its summary.json plus the other processes' load during it."""
        wait_quiet(self.args)
        out = os.path.join(self.work, f"run{self.count}")
        self.count += 1
        cmd = mpirun(self.args.trainers + 2) + [os.path.join(self.args.build, "bin", "strata"), "train"]
        cmd += [o.replace("OUT_DIR", out) for o in options]
        with Interference() as seen:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"strata failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        shutil.rmtree(out, ignore_errors=True)
        summary["others_cores"] = seen.others_cores
        return summary

    def alternate(self, sides):
        """sides: name -> options. Runs each side --repeats times, in turn; checks
        that all runs end with one digest; returns name -> list of summaries."""
        runs = {name: [] for name in sides}
        for rep in range(self.args.repeats):
            for name, options in sides.items():
                s = self.run(options)
                runs[name].append(s)
                print(f"    [{rep + 1}/{self.args.repeats}] {name:<28} {s['samples_per_s']:9.0f} samples/s, "
                      f"CPU {s['cpu_us_per_sample']['total']:5.2f} us/sample (trainer "
                      f"{s['cpu_us_per_sample']['trainer']:.2f}, producer {s['cpu_us_per_sample']['producer']:.2f}, "
                      f"server {s['cpu_us_per_sample']['server']:.2f}); others {s['others_cores']:.2f} cores",
                      flush=True)
        digests = {s["params_digest"] for rs in runs.values() for s in rs}
        if len(digests) != 1:
            sys.exit(f"the runs end with different parameters ({sorted(digests)}): the exactness invariant broke")
        return runs


def median(runs, key):
    return statistics.median(key(s) for s in runs)


def steps_for(runner, batch):
    """Sizes a batch's runs to ~--seconds of training from one short ps probe."""
    probe_steps = max(50, 100000 // batch)
    s = runner.run(dlrm_deck("ps", runner.args.trainers, batch, probe_steps, "OUT_DIR"))
    return max(probe_steps, int(runner.args.seconds * s["samples_per_s"] / batch))


def physical_limit(build):
    """Samples/s the sparse side could reach at the random gather + scatter-add
    rate of bench_gather_scatter (dim 16), and that program's output."""
    out = subprocess.run([os.path.join(build, "bin", "bench_gather_scatter")], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"dim\s+16: .*strata ([0-9.]+) GB/s", out)
    if not m:
        sys.exit("bench_gather_scatter printed no dim 16 line:\n" + out)
    # bench_gather_scatter counts 5 row-sized transfers per row (gather: read +
    # write out; scatter-add: read gradient + read row + write row).
    rows_per_s = float(m.group(1)) * 1e9 / (16 * 4 * 5)
    rows_per_sample = KEYS_PER_SAMPLE * ROW_BYTES / (16 * 4)  # value row + state row per key
    return rows_per_s / rows_per_sample, rows_per_s, out


def main():
    args = parse_args()
    runner = Runner(args)
    batches = [int(b) for b in args.batches.split(",")]
    ratios, best_samples_per_s = [], 0.0
    print(f"# Scheme B vs Scheme A: bench_dlrm.py's model and data, {args.trainers} trainers + 1 producer + "
          f"1 server, median of {args.repeats} alternating runs", flush=True)
    for batch in batches:
        steps = steps_for(runner, batch)
        for label, links in (("link model off", []), ("25 Gb/s + 50 us network", NETWORK_25G)):
            print(f"  global batch {batch}, {steps} steps, {label}:", flush=True)
            runs = runner.alternate({
                "ps": dlrm_deck("ps", args.trainers, batch, steps, "OUT_DIR") + links,
                "tiered": dlrm_deck("tiered", args.trainers, batch, steps, "OUT_DIR") + links})
            sps = {k: median(v, lambda s: s["samples_per_s"]) for k, v in runs.items()}
            cpu = {k: median(v, lambda s: s["cpu_us_per_sample"]["total"]) for k, v in runs.items()}
            stall = median(runs["tiered"], lambda s: s["time_s"].get("trainer_stall", 0.0)  # summed over trainers
                           / max(s["train_seconds"] * args.trainers, 1e-9))
            print(f"    median: ps {sps['ps']:.0f}, tiered {sps['tiered']:.0f} samples/s; CPU us/sample ps "
                  f"{cpu['ps']:.2f}, tiered {cpu['tiered']:.2f}; tiered trainers stalled {100 * stall:.1f} % of "
                  f"the loop", flush=True)
            target = "1.5" if links else "1.0"
            ratios.append((f"samples/s tiered/ps @{batch}, {label} (target >= {target})", sps["tiered"] / sps["ps"]))
            if not links:
                ratios.append((f"CPU-s per sample tiered/ps @{batch} (target <= 1.0)", cpu["tiered"] / cpu["ps"]))
                best_samples_per_s = max(best_samples_per_s, sps["tiered"])

    # 3. Staging cost at a small L1 on the default deck.
    deck = ["--config", os.path.join(ROOT, "inputs", "default.ini"), f"--train.steps={args.staging_steps}",
            "--train.eval=false", "--output.dir=OUT_DIR", "--output.progress_every=1000000"]
    rows = runner.run(deck + ["--store.mode=ps"])["sparse_rows"]
    l1_mb = "%.6f" % (0.02 * rows * ROW_BYTES / 1048576.0)
    print(f"  default deck, {args.staging_steps} steps, L1 = 2 % of {rows} rows ({l1_mb} MiB per trainer):", flush=True)
    runs = runner.alternate({"ps": deck + ["--store.mode=ps"],
                             "tiered L1=2%": deck + ["--store.mode=tiered", f"--store.l1_mb={l1_mb}"]})
    small = runs["tiered L1=2%"]
    staging = median(small, lambda s: s["cpu_us_per_sample"]["producer_staging"])
    print(f"    median: producer staging {staging:.2f} us of CPU per sample, producer in all "
          f"{median(small, lambda s: s['cpu_us_per_sample']['producer']):.2f}; L1 hit "
          f"{median(small, lambda s: s['levels']['l1']['hit_rate']):.3f}; samples/s ps "
          f"{median(runs['ps'], lambda s: s['samples_per_s']):.0f}, tiered "
          f"{median(small, lambda s: s['samples_per_s']):.0f}", flush=True)
    ratios.append(("producer staging CPU us/sample at L1=2% (target <= 3)", staging))

    # 4. The physical limit of the sparse side.
    limit, rows_per_s, out = physical_limit(args.build)
    print(f"  sparse physical limit: {KEYS_PER_SAMPLE} keys x (value + Adagrad state row) per sample at "
          f"{rows_per_s / 1e6:.1f} M random rows/s gathered + scatter-added (bench_gather_scatter, dim 16) = "
          f"{limit:.0f} samples/s on one core", flush=True)
    for line in out.splitlines():
        print("    " + line)
    ratios.append(("strata tiered best samples/s / sparse physical limit", best_samples_per_s / limit))
    shutil.rmtree(runner.work, ignore_errors=True)
    print()
    for name, value in ratios:
        print(f"ratio {name}: {value:.3f}")


if __name__ == "__main__":
    main()
