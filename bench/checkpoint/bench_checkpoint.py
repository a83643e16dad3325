#!/usr/bin/env python3
"""Checkpoint benchmark (issue: HDF5 checkpoints). Trains the default deck with a
large vocabulary in both store modes, writing a checkpoint every --every steps,
and reports per checkpoint: the training pause (the trainers' time from the
decision to the next step, write-down of the caches included), the bytes of the
file and the GB/s reached; beside it the disk's plain sequential write speed
(dd with fsync into the same directory). Then text vs HDF5 read speed of the
data readers (bench_read_speed). Ratios last.

usage: bench_checkpoint.py [--build DIR] [--steps N] [--every K] [--vocab V]
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, collect_ratios, default_build_dir, mpirun  # noqa: E402


def disk_write_gbs(directory, mib=1024):
    path = os.path.join(directory, "dd.bin")
    start = time.time()
    subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=16M", f"count={mib // 16}", "conv=fsync"],
                   check=True, capture_output=True)
    seconds = time.time() - start
    os.remove(path)
    return mib * 1048576 / seconds / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=default_build_dir())
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--every", type=int, default=1000)
    p.add_argument("--vocab", type=int, default=1000000)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="strata-bench-ckpt-", dir=os.path.join(args.build))
    strata = os.path.join(args.build, "bin", "strata")
    disk = disk_write_gbs(work)
    print(f"disk: sequential write with fsync {disk:.3f} GB/s ({work})")
    ratios = []
    for mode in ("ps", "tiered"):
        out, ckpt = os.path.join(work, mode), os.path.join(work, mode + "_ckpt")
        cmd = mpirun(4) + [strata, "train", "--config", os.path.join(ROOT, "inputs", "default.ini"),
                           f"--store.mode={mode}", f"--train.steps={args.steps}", "--train.eval=false",
                           f"--data.vocab_sizes={args.vocab}", "--output.dir=" + out, "--checkpoint.dir=" + ckpt,
                           f"--checkpoint.every_steps={args.every}", "--checkpoint.keep=10"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"strata failed:\n{proc.stderr[-3000:]}")
        s = json.load(open(os.path.join(out, "summary.json")))
        files = sorted(glob.glob(os.path.join(ckpt, "ckpt-*.h5")))
        sizes = [os.path.getsize(f) for f in files]
        written = s["checkpoints"]["written"]
        pause = s["checkpoints"]["pause_s"] / max(written, 1)
        # The logged write time of each file (rank 0: the collective write and publish).
        logged = [float(m) for m in re.findall(r"MiB in ([0-9.]+) s", proc.stdout + proc.stderr)]
        last = sizes[-1]
        gbs = last / pause / 1e9
        print(f"{mode}: {written} checkpoints, last {last / 1048576:.1f} MiB with {s['sparse_rows']} rows; "
              f"pause per checkpoint {pause:.2f} s (file writes {', '.join(f'{x:.2f}' for x in logged)} s); "
              f"{gbs:.3f} GB/s of training pause; run {s['samples_per_s']:.0f} samples/s")
        ratios.append((f"{mode} checkpoint GB/s / disk GB/s", gbs / disk))
    shutil.rmtree(work, ignore_errors=True)
    reader = os.path.join(args.build, "bin", "bench_read_speed")
    if os.path.exists(reader):
        text = subprocess.run([reader], capture_output=True, text=True, check=True).stdout
        print("data readers (bench_read_speed):")
        collect_ratios(text, ratios)
    for name, value in ratios:
        print(f"ratio {name}: {value:.3f}")


if __name__ == "__main__":
    main()
