#!/usr/bin/env python3
"""Scheme B benchmarks (issue: multi-level parameter store). Runs strata in ps and
tiered mode on the same Zipf 1.05 synthetic work and prints, ratios last:

  1. L3 (network) bytes per sample, tiered vs ps, with L1 + L2 = 5 % of the rows.
  2. look-ahead hit rate vs Belady MIN at 1 %, 5 %, 10 % capacity (bench_cache_simulator).
  3. samples/s with L1 = 2 % of the rows vs every row in L1, link model on.
  4. samples/s tiered vs ps with the link model at 100 Gb/s network, PCIe Gen5 host-to-device.
  5. random row gather + scatter-add against memcpy (bench_gather_scatter).

The workload is the default deck (26 tables x 100000 rows, Zipf 1.05, 2 trainers x
batch 256); "the rows" are the distinct rows the ps run ends with.

usage: bench_tiered.py [--build DIR] [--steps N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, collect_ratios, default_build_dir, mpirun  # noqa: E402
LINKS_100G_GEN5 = ["--links.network_gbps=100", "--links.network_latency_us=5",
                   "--links.h2d_gbps=512", "--links.h2d_latency_us=2"]


def run(build, out, *options, steps):
    cmd = mpirun(4) + [os.path.join(build, "bin", "strata"), "train", "--config", os.path.join(ROOT, "inputs", "default.ini"),
            f"--train.steps={steps}", "--train.eval=false", "--output.dir=" + out, *options]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"strata failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def l3_bytes_per_sample(s):
    b = s["bytes"]
    if s["mode"] == "ps":
        return (b["server_to_trainer"] + b["trainer_to_server"]) / s["samples"]
    return (b["l3_to_l2"] + b["l2_to_l3"]) / s["samples"]


def megabytes(rows, row_bytes):
    return "%.6f" % (rows * row_bytes / 1048576.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=default_build_dir())
    parser.add_argument("--steps", type=int, default=1500)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="strata-bench-tiered-")
    row_bytes = (16 + 16) * 4  # dim 16 + Adagrad state, float32
    ratios = []

    ps = run(args.build, os.path.join(work, "ps"), "--store.mode=ps", steps=args.steps)
    rows = ps["sparse_rows"]
    print(f"workload: default deck, {args.steps} steps x global batch 512, {rows} distinct rows")
    # 1. 5 % of the rows in L1 + L2: 1 % per trainer L1, 3 % in the producer's L2.
    budgets = ["--store.l1_mb=" + megabytes(0.01 * rows, row_bytes), "--store.l2_mb=" + megabytes(0.03 * rows, row_bytes)]
    tiered = run(args.build, os.path.join(work, "tiered5"), "--store.mode=tiered", *budgets, steps=args.steps)
    assert tiered["params_digest"] == ps["params_digest"], "tiered and ps digests differ"
    ps_b, t_b = l3_bytes_per_sample(ps), l3_bytes_per_sample(tiered)
    print(f"1. L3 bytes/sample: ps {ps_b:.1f}, tiered (L1+L2 = 5 %) {t_b:.1f}; "
          f"L1 hit {tiered['levels']['l1']['hit_rate']:.3f}, L2 hit {tiered['levels']['l2']['hit_rate']:.3f}")
    ratios.append(("L3 bytes/sample tiered/ps (target <= 0.05)", t_b / ps_b))
    # The same with frequency admission (keys seen once share a default row) on both sides.
    ps_a = run(args.build, os.path.join(work, "ps_admit"), "--store.mode=ps", "--store.min_count=2", steps=args.steps)
    t_a = run(args.build, os.path.join(work, "tiered5_admit"), "--store.mode=tiered", "--store.min_count=2", *budgets,
              steps=args.steps)
    assert t_a["params_digest"] == ps_a["params_digest"], "tiered and ps digests differ with admission"
    psa_b, ta_b = l3_bytes_per_sample(ps_a), l3_bytes_per_sample(t_a)
    print(f"   with store.min_count=2: ps {psa_b:.1f}, tiered {ta_b:.1f} bytes/sample; rows stored "
          f"{ps_a['sparse_rows']} (of {rows} without admission); L1 hit {t_a['levels']['l1']['hit_rate']:.3f}, "
          f"L2 hit {t_a['levels']['l2']['hit_rate']:.3f}")
    ratios.append(("L3 bytes/sample tiered/ps with min_count=2 (target <= 0.05)", ta_b / psa_b))

    # 2. trace and simulator.
    trace = os.path.join(work, "run.trace")
    subprocess.run(mpirun(4) + [os.path.join(args.build, "bin", "strata"), "trace", "--config",
                          os.path.join(ROOT, "inputs", "default.ini"), f"--train.steps={args.steps}",
                          "--train.eval=false", "--output.dir=" + os.path.join(work, "trace"),
                          "--output.trace=" + trace], check=True, capture_output=True)
    # The engine's defaults: store.prefetch_depth 2, store.horizon 128.
    sim = subprocess.run([os.path.join(args.build, "bin", "bench_cache_simulator"), trace, "--depth", "2",
                          "--horizon", "128"], check=True, capture_output=True, text=True).stdout
    print("2. cache simulator (hit rate per policy):")
    collect_ratios(sim, ratios, suffix=" (target >= 0.98)")

    # 3. L1 = 2 % of rows vs everything in L1, link model on.
    small = run(args.build, os.path.join(work, "l1small"), "--store.mode=tiered", *LINKS_100G_GEN5,
                "--store.l1_mb=" + megabytes(0.02 * rows, row_bytes), "--store.l2_mb=256", steps=args.steps)
    full = run(args.build, os.path.join(work, "l1full"), "--store.mode=tiered", *LINKS_100G_GEN5,
               "--store.l1_mb=" + megabytes(1.5 * rows, row_bytes), "--store.l2_mb=256", steps=args.steps)
    print(f"3. samples/s with link model: L1 = 2 % {small['samples_per_s']:.0f}, all rows in L1 "
          f"{full['samples_per_s']:.0f}")
    ratios.append(("step time L1=2% / L1=all (target <= 1.10)", full["samples_per_s"] / small["samples_per_s"]))

    # 4. tiered vs ps with the link model.
    ps_links = run(args.build, os.path.join(work, "ps_links"), "--store.mode=ps", *LINKS_100G_GEN5, steps=args.steps)
    print(f"4. samples/s with link model ({ps_links['link_model']}): ps {ps_links['samples_per_s']:.0f}, "
          f"tiered (L1 = 2 %) {small['samples_per_s']:.0f}")
    ratios.append(("samples/s tiered/ps with link model", small["samples_per_s"] / ps_links["samples_per_s"]))

    # 5. gather + scatter of random rows against memcpy.
    gs = subprocess.run([os.path.join(args.build, "bin", "bench_gather_scatter")], check=True, capture_output=True,
                        text=True).stdout
    print("5. gather + scatter-add of random rows (1 GiB table):")
    collect_ratios(gs, ratios)

    for name, value in ratios:
        print(f"ratio {name}: {value:.4f}")


if __name__ == "__main__":
    main()
