#!/usr/bin/python3
"""DLRM training throughput: strata against PyTorch on the same work and the same cores.

Same model (13-64-16 bottom, 26 tables x dim 16, dot interaction, 367-64-32-1 top),
same optimizers (Adam 1e-3 dense, Adagrad 0.05 sparse), same data shape (Zipf 1.05
keys over 100000 rows per table, one key per bag), same global batch, 2 cores:
  strata  1t+1p+1s: 3 ranks, 1 trainer with the whole global batch
  strata  2t+1p+1s: 4 ranks on 2 cores, batch_size = global / 2 per trainer
  pytorch          : bench/dlrm_pytorch.py, torch.set_num_threads(2)
Every rank and PyTorch use the same OpenBLAS; strata's ranks get 1 BLAS thread each.
Each run is sized to take about --seconds of training (one short probe run sizes
it); the best of --repeats runs counts, for both sides alike. strata's figure is
its summary.json samples_per_s (the whole training loop, first steps included);
PyTorch's excludes its warm-up steps.

The cores must be otherwise idle: before every run the script waits (up to
--quiet-wait s) until other processes use less than --quiet-cores cores, and
prints the load it found. The last lines are the ratios:
  ratio strata/pytorch @256: X.XX
Run: /usr/bin/python3 bench/bench_dlrm.py [--build-dir build] [--json out.json]
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch; not the python3 on PATH


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.environ.get("STRATA_BUILD_DIR", "build"))
    p.add_argument("--strata-bin", default="", help="strata binary (default BUILD_DIR/bin/strata); "
                   "it is copied first, so that a rebuild during the benchmark does not mix binaries")
    p.add_argument("--batches", default="256,1024", help="global batch sizes")
    p.add_argument("--seconds", type=float, default=15.0, help="target training time of each run")
    p.add_argument("--repeats", type=int, default=2, help="runs per configuration; the best counts")
    p.add_argument("--cores", type=int, default=2, help="cores both sides get (PyTorch threads)")
    p.add_argument("--vocab", type=int, default=100000)
    p.add_argument("--zipf", type=float, default=1.05)
    p.add_argument("--data", default="", help="Criteo TSV for both sides instead of synthetic data")
    p.add_argument("--quiet-cores", type=float, default=0.3,
                   help="most CPU (in cores) other processes may use when a run starts")
    p.add_argument("--quiet-wait", type=float, default=300.0, help="seconds to wait for a quiet machine")
    p.add_argument("--json", default="", help="also write every result to this file")
    p.add_argument("--keep-runs", action="store_true", help="keep strata's output dirs")
    return p.parse_args()


def busy_cores(interval=1.0):
    """Cores' worth of CPU time used on the whole machine over `interval` seconds."""
    def read():
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)
    b0, t0 = read()
    time.sleep(interval)
    b1, t1 = read()
    ncpu = os.cpu_count() or 1
    return (b1 - b0) / max(t1 - t0, 1e-9) * ncpu


def wait_quiet(args):
    start = time.time()
    busy = busy_cores()
    while busy > args.quiet_cores and time.time() - start < args.quiet_wait:
        time.sleep(4.0)
        busy = busy_cores()
    if busy > args.quiet_cores:
        print(f"  warning: machine still busy ({busy:.2f} cores used by others) after "
              f"{args.quiet_wait:.0f} s; this figure is disturbed", flush=True)
    return busy


class Strata:
    def __init__(self, args, trainers):
        self.args, self.trainers = args, trainers
        self.name = f"strata {trainers}t+1p+1s"
        self.bin = args.strata_snapshot
        self.run_root = args.run_root

    def command(self, batch, steps, out_dir):
        ranks = self.trainers + 2
        mpirun = ["mpirun", "-n", str(ranks), "--oversubscribe", "--bind-to", "none",
                  "-x", "OPENBLAS_NUM_THREADS=1"]
        if os.geteuid() == 0:
            mpirun.append("--allow-run-as-root")
        deck = [f"--layout.trainers={self.trainers}", "--layout.producers=1", "--layout.servers=1",
                f"--train.batch_size={batch // self.trainers}", f"--train.steps={steps}",
                "--train.eval=false", f"--output.dir={out_dir}", "--output.progress_every=1000000",
                "--model.embedding_dim=16", "--model.bottom_mlp=64,16", "--model.top_mlp=64,32",
                "--optim.dense=adam", "--optim.dense_lr=0.001", "--optim.sparse=adagrad", "--optim.sparse_lr=0.05"]
        if self.args.data:
            deck += ["--data.source=criteo", f"--data.train={self.args.data}"]
        else:
            deck += ["--data.source=synthetic", f"--data.vocab_sizes={self.args.vocab}",
                     f"--data.zipf_exponent={self.args.zipf}", "--data.num_tables=26", "--data.num_dense=13",
                     f"--data.synthetic_train_samples={max(1 << 20, steps * batch)}"]
        return mpirun + [str(self.bin), "train", "--config", str(REPO / "inputs/default.ini")] + deck

    def run(self, batch, steps):
        out_dir = self.run_root / f"t{self.trainers}_b{batch}_s{steps}"
        shutil.rmtree(out_dir, ignore_errors=True)
        cmd = self.command(batch, steps, out_dir)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name} failed ({proc.returncode}):\n{' '.join(cmd)}\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        with open(out_dir / "summary.json") as f:
            s = json.load(f)
        if not self.args.keep_runs:
            shutil.rmtree(out_dir, ignore_errors=True)
        return {"samples_per_s": s["samples_per_s"], "train_seconds": s["train_seconds"], "steps": s["steps"],
                "samples": s["samples"], "time_s": s.get("time_s", {}), "train_logloss": s.get("train_logloss"),
                "command": " ".join(cmd)}


class PyTorch:
    def __init__(self, args):
        self.args = args
        self.name = f"pytorch {args.cores} threads"

    def command(self, batch, steps):
        cmd = [PYTHON, str(REPO / "bench/dlrm_pytorch.py"), f"--batch={batch}", f"--steps={steps}",
               f"--threads={self.args.cores}", f"--vocab={self.args.vocab}", f"--zipf={self.args.zipf}"]
        if self.args.data:
            cmd.append(f"--data={self.args.data}")
        return cmd

    def run(self, batch, steps):
        cmd = self.command(batch, steps)
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(self.args.cores), OMP_NUM_THREADS=str(self.args.cores))
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name} failed ({proc.returncode}):\n{' '.join(cmd)}\n{proc.stderr[-3000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["command"] = " ".join(cmd)
        return r


def measure(peer, batch, args):
    """Probe, size the run to ~args.seconds, then the best of args.repeats runs."""
    probe_steps = max(20, 50000 // batch)
    wait_quiet(args)
    probe = peer.run(batch, probe_steps)
    steps = max(probe_steps, int(args.seconds * probe["samples_per_s"] / batch))
    best, runs = None, []
    for _ in range(args.repeats):
        busy = wait_quiet(args)
        r = peer.run(batch, steps)
        r["others_busy_cores"] = round(busy, 2)
        runs.append(r)
        print(f"  {peer.name:<20} global batch {batch:5d}: {r['samples_per_s']:10.0f} samples/s "
              f"({r['steps']} steps, {r['train_seconds']:.1f} s, others used {busy:.2f} cores)", flush=True)
        if best is None or r["samples_per_s"] > best["samples_per_s"]:
            best = r
    best = dict(best, all_samples_per_s=[x["samples_per_s"] for x in runs])
    return best


def main():
    args = parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    build = Path(args.build_dir) if Path(args.build_dir).is_absolute() else REPO / args.build_dir
    source = Path(args.strata_bin) if args.strata_bin else build / "bin" / "strata"
    if not source.exists():
        sys.exit(f"bench_dlrm: {source} not found; build it (cmake --build {args.build_dir} --target strata)")
    args.run_root = build / "bench" / "dlrm_runs"
    args.run_root.mkdir(parents=True, exist_ok=True)
    args.strata_snapshot = args.run_root / "strata"
    shutil.copy2(source, args.strata_snapshot)
    digest = hashlib.sha256(args.strata_snapshot.read_bytes()).hexdigest()[:16]
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(source.stat().st_mtime))
    print(f"# strata binary {source} (built {built}, sha256 {digest}), run from a copy", flush=True)
    peers = [Strata(args, 1), Strata(args, 2), PyTorch(args)]
    print(f"# DLRM throughput, {args.cores} cores, data {args.data or f'synthetic zipf {args.zipf} vocab {args.vocab}'}, "
          f"~{args.seconds:.0f} s per run, best of {args.repeats}", flush=True)
    results = {}
    for batch in batches:
        for peer in peers:
            results[(peer.name, batch)] = measure(peer, batch, args)

    print("\n| global batch | strata 1t+1p+1s | strata 2t+1p+1s | pytorch | strata best / pytorch |")
    print("|---:|---:|---:|---:|---:|")
    ratios = {}
    for batch in batches:
        s1 = results[(peers[0].name, batch)]["samples_per_s"]
        s2 = results[(peers[1].name, batch)]["samples_per_s"]
        pt = results[(peers[2].name, batch)]["samples_per_s"]
        ratios[batch] = max(s1, s2) / pt
        print(f"| {batch} | {s1:.0f} | {s2:.0f} | {pt:.0f} | {ratios[batch]:.2f} |")
    print()
    for batch in batches:
        for peer in peers[:2]:
            t = results[(peer.name, batch)]["time_s"]
            r = results[(peer.name, batch)]
            if t:
                parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(t.items()))
                print(f"# {peer.name} @{batch} time_s over {r['train_seconds']:.1f} s: {parts}")
    if args.json:
        out = {"batches": batches, "cores": args.cores,
               "results": [dict(v, peer=k[0], global_batch=k[1]) for k, v in results.items()],
               "ratios": {str(b): r for b, r in ratios.items()}}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    print()
    for batch in batches:
        print(f"ratio strata/pytorch @{batch}: {ratios[batch]:.2f}")


if __name__ == "__main__":
    main()
