#!/usr/bin/python3
"""DLRM training throughput: strata against PyTorch peers on the same work and the same cores.

Same model (13-64-16 bottom, 26 tables x dim 16, dot interaction, 367-64-32-1 top),
same optimizers (Adam 1e-3 dense, Adagrad 0.05 sparse), same data shape (Zipf 1.05
keys over 100000 rows per table, one key per bag), same global batch, 2 cores:
  strata  1t+1p+1s: 3 ranks, 1 trainer with the whole global batch
  strata  2t+1p+1s: 4 ranks on 2 cores, batch_size = global / 2 per trainer
          both with --store.mode=--strata-mode (tiered, strata's default, or ps)
  fbgemm          : bench/dlrm_fbgemm.py on torch 2.14.1 + fbgemm-gpu-cpu 1.9.0 (the
                    venv of bench/fbgemm_venv.sh, made here when missing): the 26
                    tables as one FBGEMM table-batched embedding on the host with
                    exact Adagrad fused into its backward (as TorchRec runs them),
                    nn.Linear + fused Adam, torch 2 + MKL threads 2 and 1
  pytorch-1.13    : bench/dlrm_pytorch.py on Debian's torch 1.13, nn.EmbeddingBag(sparse=True)
                    + Adagrad, nn.Linear + Adam, torch.bmm interaction, in three thread
                    setups: torch 2 threads + OpenBLAS 1, torch 2 + OpenBLAS 2, torch 1 + OpenBLAS 1
strata's ranks and torch 1.13 use the same OpenBLAS, strata's ranks 1 BLAS thread each;
torch 2.14 (the fbgemm peer) calls its own MKL.
Each side's figure is its best configuration; every configuration is printed.
Each run is sized to take about --seconds of training (one short probe run per
configuration sizes it); then --repeats rounds, each running every configuration
once, in turn, so that a slow spell of the machine hits all sides alike; the
MEDIAN of a configuration's repeats counts. strata's figure is its summary.json
samples_per_s (the whole training loop, first steps included); the PyTorch peers'
exclude their warm-up steps. Each run's CPU time (its processes' rusage: start-up
and data set-up included) is also reported, in microseconds per trained sample.

The cores must be otherwise idle: before every run the script waits (up to
--quiet-wait s) until other processes use less than --quiet-cores cores, and
prints the load it found. The last lines are the ratios of the best strata
configuration to the best of each peer:
  ratio strata/fbgemm @256: X.XX
  ratio strata/pytorch-1.13 @256: X.XX
Run: /usr/bin/python3 bench/bench_dlrm.py [--build-dir build] [--strata-mode tiered|ps] [--json out.json]
"""
import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import dlrm_deck, mpirun  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch; not the python3 on PATH
PEER_SIDES = ("fbgemm", "pytorch-1.13")  # the ratio lines, in this order


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.environ.get("STRATA_BUILD_DIR", "build"))
    p.add_argument("--strata-bin", default="", help="strata binary (default BUILD_DIR/bin/strata); "
                   "it is copied first, so that a rebuild during the benchmark does not mix binaries")
    p.add_argument("--batches", default="256,1024", help="global batch sizes")
    p.add_argument("--seconds", type=float, default=15.0, help="target training time of each run")
    p.add_argument("--repeats", type=int, default=3,
                   help="rounds of runs, each running every configuration once; the median counts")
    p.add_argument("--retries", type=int, default=3,
                   help="reruns of a run during which other processes used more than --quiet-cores")
    p.add_argument("--cores", type=int, default=2, help="cores both sides get (PyTorch threads)")
    p.add_argument("--strata-mode", choices=["tiered", "ps"], default="tiered",
                   help="strata's --store.mode: tiered (its default, Scheme B) or ps (Scheme A)")
    p.add_argument("--fbgemm-python", default="",
                   help="python of the FBGEMM peer (default: BUILD_DIR/bench/venv-fbgemm, "
                        "made by bench/fbgemm_venv.sh when missing)")
    p.add_argument("--skip-fbgemm", action="store_true", help="leave the FBGEMM peer out")
    p.add_argument("--vocab", type=int, default=100000)
    p.add_argument("--zipf", type=float, default=1.05)
    p.add_argument("--data", default="", help="Criteo TSV for both sides instead of synthetic data")
    p.add_argument("--quiet-cores", type=float, default=0.3,
                   help="most CPU (in cores) other processes may use when a run starts")
    p.add_argument("--quiet-wait", type=float, default=300.0, help="seconds to wait for a quiet machine")
    p.add_argument("--json", default="", help="also write every result to this file")
    p.add_argument("--keep-runs", action="store_true", help="keep strata's output dirs")
    p.add_argument("--wait-quiet-only", action="store_true",
                   help="only wait for a quiet machine (as before each run), then exit; run_all.sh uses it")
    return p.parse_args()


TICK = os.sysconf("SC_CLK_TCK")


def machine_busy_seconds():
    """CPU seconds the whole machine has spent busy (all cores, /proc/stat), and steal."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...: busy = all but idle, iowait, steal
    busy = sum(fields[:8]) - fields[3] - fields[4] - fields[7]
    return busy / TICK, fields[7] / TICK


def children_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def busy_cores(interval=1.0):
    """Cores' worth of CPU time used on the whole machine over `interval` seconds."""
    b0, _ = machine_busy_seconds()
    t0 = time.monotonic()
    time.sleep(interval)
    b1, _ = machine_busy_seconds()
    return (b1 - b0) / (time.monotonic() - t0)


class Interference:
    """What the rest of the machine did while one of our runs ran: CPU used by
    processes that are not ours (cores, on average) and CPU stolen by the hypervisor."""

    def __enter__(self):
        self.busy0, self.steal0 = machine_busy_seconds()
        self.own0, self.t0 = children_seconds(), time.monotonic()
        return self

    def __exit__(self, *exc):
        busy1, steal1 = machine_busy_seconds()
        wall = max(time.monotonic() - self.t0, 1e-9)
        own = children_seconds() - self.own0
        self.others_cores = max(0.0, (busy1 - self.busy0 - own) / wall)
        self.own_seconds = own
        self.own_cores = own / wall
        self.steal_cores = (steal1 - self.steal0) / wall
        return False


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
    side = "strata"

    def __init__(self, args, trainers):
        self.args, self.trainers = args, trainers
        self.name = f"strata {trainers}t+1p+1s"
        self.bin = args.strata_snapshot
        self.run_root = args.run_root

    def command(self, batch, steps, out_dir):
        ranks = self.trainers + 2
        launcher = mpirun(ranks)
        # tiered (Scheme B) is strata's default store, ps (Scheme A) the other;
        # the tiered store's own benchmarks are in bench/tiered/.
        deck = dlrm_deck(self.args.strata_mode, self.trainers, batch, steps, out_dir, self.args.vocab,
                         self.args.zipf, self.args.data)
        return launcher + [str(self.bin), "train"] + deck

    def run(self, batch, steps):
        out_dir = self.run_root / f"t{self.trainers}_b{batch}_s{steps}"
        shutil.rmtree(out_dir, ignore_errors=True)
        cmd = self.command(batch, steps, out_dir)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        with Interference() as seen:
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
                "sparse_rows": s.get("sparse_rows"), "command": " ".join(cmd), "seen": seen}


class PyTorch:
    side = "pytorch-1.13"

    def __init__(self, args, threads, blas_threads):
        self.args, self.threads, self.blas_threads = args, threads, blas_threads
        self.name = f"pytorch-1.13 {threads}thr blas{blas_threads}"

    def command(self, batch, steps):
        cmd = [PYTHON, str(REPO / "bench/dlrm_pytorch.py"), f"--batch={batch}", f"--steps={steps}",
               f"--threads={self.threads}", f"--blas-threads={self.blas_threads}",
               f"--vocab={self.args.vocab}", f"--zipf={self.args.zipf}"]
        if self.args.data:
            cmd.append(f"--data={self.args.data}")
        return cmd

    def run(self, batch, steps):
        cmd = self.command(batch, steps)
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(self.blas_threads), OMP_NUM_THREADS=str(self.threads))
        with Interference() as seen:
            proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name} failed ({proc.returncode}):\n{' '.join(cmd)}\n{proc.stderr[-3000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["command"] = " ".join(cmd)
        r["seen"] = seen
        return r


class FBGEMM:
    """bench/dlrm_fbgemm.py with the python of its venv; its defaults are its fastest
    settings measured (fused Adam, no bounds check, index_select interaction gather)."""
    side = "fbgemm"

    def __init__(self, args, threads):
        self.args, self.threads = args, threads
        self.name = f"fbgemm {threads}thr"

    def command(self, batch, steps):
        cmd = [str(self.args.fbgemm_python), str(REPO / "bench/dlrm_fbgemm.py"), f"--batch={batch}",
               f"--steps={steps}", f"--threads={self.threads}", f"--vocab={self.args.vocab}",
               f"--zipf={self.args.zipf}"]
        if self.args.data:
            cmd.append(f"--data={self.args.data}")
        return cmd

    def run(self, batch, steps):
        cmd = self.command(batch, steps)
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), MKL_NUM_THREADS=str(self.threads))
        with Interference() as seen:
            proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{self.name} failed ({proc.returncode}):\n{' '.join(cmd)}\n{proc.stderr[-3000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["command"] = " ".join(cmd)
        r["seen"] = seen
        return r


def fbgemm_python(args, build):
    """The FBGEMM peer's interpreter: --fbgemm-python, or the venv of
    bench/fbgemm_venv.sh under the build folder, which that script makes when it is
    missing (a few minutes, ~5.5 GB from PyPI) and otherwise only checks."""
    if args.fbgemm_python:
        return Path(args.fbgemm_python)
    env = dict(os.environ, FBGEMM_VENV=str(build / "bench" / "venv-fbgemm"))
    proc = subprocess.run(["bash", str(REPO / "bench/fbgemm_venv.sh")], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, text=True)  # its progress goes to our stderr
    if proc.returncode != 0 or not proc.stdout.strip():
        sys.exit("bench_dlrm: bench/fbgemm_venv.sh failed (see above); --fbgemm-python PY names another "
                 "interpreter with torch 2.14 + fbgemm-gpu-cpu, --skip-fbgemm leaves the peer out")
    return Path(proc.stdout.strip().splitlines()[-1])


def clean_run(peer, batch, steps, args):
    """One run, rerun (up to args.retries times) while other processes disturbed it."""
    for attempt in range(args.retries + 1):
        wait_quiet(args)
        r = peer.run(batch, steps)
        seen = r.pop("seen")
        r.update(others_cores=round(seen.others_cores, 2), own_cores=round(seen.own_cores, 2),
                 steal_cores=round(seen.steal_cores, 2), disturbed=seen.others_cores > args.quiet_cores,
                 cpu_seconds=round(seen.own_seconds, 3),
                 cpu_us_per_sample=round(1e6 * seen.own_seconds / max(r["samples"], 1), 2))
        if not r["disturbed"]:
            return r
        print(f"  ({peer.name} @{batch}: others used {seen.others_cores:.2f} cores during the run: "
              f"{r['samples_per_s']:.0f} samples/s discarded{', rerun' if attempt < args.retries else ''})",
              flush=True)
    return r


def run_steps(peer, batch, args):
    """A probe run sizes a configuration's runs to ~args.seconds of training."""
    probe_steps = max(20, 60000 // batch)
    probe = clean_run(peer, batch, probe_steps, args)
    return max(probe_steps, int(args.seconds * probe["samples_per_s"] / batch))


def measure_all(peers, batch, args):
    """Every configuration's median of args.repeats runs; each round runs every
    configuration once, in turn, so that a slow spell of the machine is shared."""
    steps = {p.name: run_steps(p, batch, args) for p in peers}
    runs = {p.name: [] for p in peers}
    for rnd in range(args.repeats):
        for peer in peers:
            r = clean_run(peer, batch, steps[peer.name], args)
            runs[peer.name].append(r)
            flag = "  DISTURBED" if r["disturbed"] else ""
            print(f"  [{rnd + 1}/{args.repeats}] {peer.name:<24} global batch {batch:5d}: "
                  f"{r['samples_per_s']:10.0f} samples/s ({r['steps']} steps, {r['train_seconds']:.1f} s; "
                  f"CPU {r['cpu_seconds']:.1f} s = {r['cpu_us_per_sample']:.1f} us/sample, "
                  f"{r['own_cores']:.2f} cores; others {r['others_cores']:.2f}){flag}", flush=True)
    return {name: summarize(rs) for name, rs in runs.items()}


def summarize(runs):
    """The median of the undisturbed runs (of all, marked disturbed, when none was);
    the run nearest it stands for the configuration's other fields."""
    clean = [r for r in runs if not r["disturbed"]] or runs
    median = statistics.median(r["samples_per_s"] for r in clean)
    rep = min(clean, key=lambda r: abs(r["samples_per_s"] - median))
    return dict(rep, samples_per_s=median, disturbed=rep["disturbed"],
                cpu_us_per_sample=statistics.median(r["cpu_us_per_sample"] for r in clean),
                all_samples_per_s=[r["samples_per_s"] for r in runs],
                all_cpu_us_per_sample=[r["cpu_us_per_sample"] for r in runs])


def same_blas_kernels(build):
    """strata restarts itself with OPENBLAS_CORETYPE when OpenBLAS falls back to
    its generic kernels on an AVX-512/AVX2 CPU (backend/host/blas_kernels.hpp).
    Give every peer the kernels strata will use, so both sides run the same GEMM."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return os.environ["OPENBLAS_CORETYPE"]
    probe = build / "bin" / "bench_gemm_peak"
    if not probe.exists():
        return "(unknown)"
    header = subprocess.run([str(probe), "--threads=1", "--batches=128", "--square=64"], capture_output=True,
                            text=True).stdout.splitlines()[0]
    flags = open("/proc/cpuinfo").read()
    if " Prescott " in header + " ":
        wanted = "SkylakeX" if " avx512f" in flags and " avx512bw" in flags else "Haswell" if " avx2" in flags else ""
        if wanted:
            os.environ["OPENBLAS_CORETYPE"] = wanted
            return wanted + " (OpenBLAS chose Prescott; set for every peer, as strata does for itself)"
    return header.split("NO_AFFINITY")[-1].split()[0] if "NO_AFFINITY" in header else "(as detected)"


def main():
    args = parse_args()
    if args.wait_quiet_only:
        busy = wait_quiet(args)
        print(f"# machine quiet: others used {busy:.2f} cores", flush=True)
        return
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
    print(f"# OpenBLAS kernels for every peer: {same_blas_kernels(build)}", flush=True)
    strata = [Strata(args, 1), Strata(args, 2)]
    fbgemm = []
    if not args.skip_fbgemm:
        args.fbgemm_python = fbgemm_python(args, build)
        print(f"# fbgemm peer: {args.fbgemm_python}", flush=True)
        fbgemm = [FBGEMM(args, args.cores), FBGEMM(args, 1)]
    pytorch = [PyTorch(args, args.cores, 1), PyTorch(args, args.cores, args.cores), PyTorch(args, 1, 1)]
    peers = strata + fbgemm + pytorch
    sides = {"strata": strata, "fbgemm": fbgemm, "pytorch-1.13": pytorch}
    print(f"# DLRM throughput, {args.cores} cores, strata --store.mode={args.strata_mode}, data "
          f"{args.data or f'synthetic zipf {args.zipf} vocab {args.vocab}'}, ~{args.seconds:.0f} s per run, "
          f"median of {args.repeats} rounds (each runs every configuration once)", flush=True)
    results = {}
    for batch in batches:
        for name, r in measure_all(peers, batch, args).items():
            results[(name, batch)] = r

    def cell(r):  # median, the spread of the repeats, * when no undisturbed run was had
        runs = r["all_samples_per_s"]
        return f"{r['samples_per_s']:.0f}{'*' if r['disturbed'] else ''} ({min(runs):.0f}-{max(runs):.0f})"

    def best(side, batch):
        return max(results[(p.name, batch)]["samples_per_s"] for p in sides[side])

    compared = [side for side in PEER_SIDES if sides[side]]
    ratios = {side: {b: best("strata", b) / best(side, b) for b in batches} for side in compared}
    print(f"\nsamples/s, median of the repeats (their range); * = disturbed by other processes; "
          f"strata --store.mode={args.strata_mode}")
    print("| global batch | " + " | ".join(p.name for p in peers) + " | "
          + " | ".join(f"best strata / best {side}" for side in compared) + " |")
    print("|---:|" + "---:|" * (len(peers) + len(compared)))
    for batch in batches:
        cells = " | ".join(cell(results[(p.name, batch)]) for p in peers)
        print(f"| {batch} | {cells} | " + " | ".join(f"{ratios[side][batch]:.2f}" for side in compared) + " |")
    print("\nCPU microseconds per trained sample, median of the repeats (whole processes: start-up and "
          "data set-up included)")
    print("| global batch | " + " | ".join(p.name for p in peers) + " |")
    print("|---:|" + "---:|" * len(peers))
    for batch in batches:
        print(f"| {batch} | " + " | ".join(f"{results[(p.name, batch)]['cpu_us_per_sample']:.1f}" for p in peers)
              + " |")
    print()
    for batch in batches:
        for peer in peers:
            r = results[(peer.name, batch)]
            parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.get("time_s", {}).items()))
            print(f"# {peer.name} @{batch}: {r['train_seconds']:.1f} s, CPU used {r['own_cores']:.2f} of "
                  f"{args.cores} cores (whole process, start-up included){'; time_s: ' + parts if parts else ''}")
    if args.json:
        out = {"batches": batches, "cores": args.cores, "strata_mode": args.strata_mode,
               "strata_binary_sha256": digest, "strata_built": built, "repeats": args.repeats,
               "fbgemm_python": str(args.fbgemm_python) if fbgemm else None,
               "results": [dict(v, peer=k[0], side=next(p.side for p in peers if p.name == k[0]), global_batch=k[1])
                           for k, v in results.items()],
               "ratios": {side: {str(b): r for b, r in by_batch.items()} for side, by_batch in ratios.items()}}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    print()
    for side in compared:
        for batch in batches:
            print(f"ratio strata/{side} @{batch}: {ratios[side][batch]:.2f}")


if __name__ == "__main__":
    main()
