#!/usr/bin/python3
"""Causal softmax attention, forward + backward, tokens/s: strata's host kernels
(bench_attention, ONE thread) against PyTorch's scaled_dot_product_attention(is_causal=True)
(TWO threads, torch 2.x from the FBGEMM venv) on the same B, L, heads, dim, fp32.

For each L in --lens, B = --tokens / L sequences of L tokens. Rounds alternate the two
sides (strata, torch, then torch, strata, ...); each figure is the median of --repeats
runs, each run a fresh process that times at least --seconds after warming up for a quarter
of that (at least one step).
Both sides check their result (strata: rows against double precision; torch: the first
queries against an eager float64 softmax(QK^T/sqrt(d) + mask) V). GFLOP/s count the
FlashAttention convention, 14 D H B L (L + 1) / 2 per step (forward 2 GEMMs, backward 5
with the recomputed scores), and are set against this machine's OpenBLAS sgemm rate
(bench_gemm_peak, 1024^3) with the kernels OpenBLAS picks and with its AVX-512 ones.

  /usr/bin/python3 bench/attention/bench_attention.py [--lens 256,1024,4096,16384]
      [--tokens 16384] [--heads 2] [--dim 64] [--repeats 3] [--seconds 1.0]
      [--torch-python PY] [--torch-threads 2] [--torch-1t] [--json FILE]

Prints a table and, last, `ratio strata/sdpa @L=...: X.XX` (strata 1 thread over torch
2 threads). --torch-1t also times torch on 1 thread (a per-core comparison).
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
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from bench_common import default_build_dir  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def flops_per_step(batch, length, heads, dim):
    return 14.0 * dim * heads * batch * length * (length + 1) / 2


# ---- the torch side, run as `bench_attention.py --torch-worker ...` in its own process ----

def torch_worker(args):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, L, H, D = args.batch, args.len, args.heads, args.dim
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    scale = 1.0 / D ** 0.5
    mask = None if has_sdpa else torch.ones(L, L, dtype=torch.bool).triu(1)

    def attention(q, k, v):
        if has_sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # The formula's eager equivalent, for a torch without SDPA (1.13): O(L^2) memory.
        s = (q @ k.transpose(-1, -2)) * scale
        return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v

    # (B, H, L, D) contiguous: SDPA's own layout, the best case for torch.
    q, k, v, g = [torch.rand(B, H, L, D) * 2 - 1 for _ in range(4)]
    for t in (q, k, v):
        t.requires_grad_(True)

    def step():
        for t in (q, k, v):
            t.grad = None
        attention(q, k, v).backward(g)

    warm = time.perf_counter()
    step()  # warm-up (oneDNN primitives, allocator) for at least a quarter of the timed time
    while time.perf_counter() - warm < 0.25 * args.seconds:
        step()
    # Result check: the first n queries only see the first n keys, so they form a
    # self-contained problem for an eager float64 reference (forward and dQ).
    n = min(L, 512)
    with torch.enable_grad():
        q0, k0, v0 = [t.detach()[:1, :, :n].double().requires_grad_(True) for t in (q, k, v)]
        s = (q0 @ k0.transpose(-1, -2)) * scale
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        ref = torch.softmax(s, dim=-1) @ v0
        ref.backward(g[:1, :, :n].double())
    with torch.no_grad():
        out = attention(q, k, v)[:1, :, :n].double()
    mag_o, mag_g = ref.abs().max().item(), q0.grad.abs().max().item()
    error = max((out - ref).abs().max().item() / mag_o,
                (q.grad[:1, :, :n].double() - q0.grad).abs().max().item() / mag_g)
    steps, start = 0, time.perf_counter()
    while True:
        step()
        steps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= args.seconds:
            break
    per_step = elapsed / steps
    print(json.dumps({"side": "torch", "torch": torch.__version__, "sdpa": has_sdpa, "threads": args.threads,
                      "batch": B, "len": L, "heads": H, "dim": D, "steps": steps, "seconds_per_step": per_step,
                      "tokens_per_s": B * L / per_step, "gflops": flops_per_step(B, L, H, D) / per_step * 1e-9,
                      "check_error": error, "check_ok": error < 1e-4}))


# ---- the driver ------------------------------------------------------------------------------

def machine_busy_seconds():
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4] - fields[7]) / TICK


def children_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_quiet(limit_s=30.0, threshold=0.3):
    """Waits (up to limit_s) until the machine's other processes use < threshold cores."""
    start = time.monotonic()
    while True:
        b0, t0 = machine_busy_seconds(), time.monotonic()
        time.sleep(0.5)
        busy = (machine_busy_seconds() - b0) / (time.monotonic() - t0)
        if busy < threshold or time.monotonic() - start > limit_s:
            return busy


def run_json(cmd, env=None):
    """Runs one measurement on a quiet machine; returns its JSON line plus the cores
    other processes used while it ran (above 0.2 the table marks it disturbed)."""
    wait_quiet()
    busy0, own0, t0 = machine_busy_seconds(), children_seconds(), time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = max(time.monotonic() - t0, 1e-9)
    others = max(0.0, (machine_busy_seconds() - busy0 - (children_seconds() - own0)) / wall)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if not result["check_ok"]:
        raise RuntimeError(f"{' '.join(cmd)}: result check failed (error {result['check_error']:.3g})")
    result["others_cores"] = others
    return result


def sgemm_peaks(build_dir):
    """OpenBLAS sgemm GFLOP/s at 1024^3 for 1 and 2 threads: with the kernels OpenBLAS picks
    (what strata runs) and with OPENBLAS_CORETYPE=SkylakeX (AVX-512, this CPU's real limit)."""
    exe = os.path.join(build_dir, "bin", "bench_gemm_peak")
    peaks = {}
    if not os.path.exists(exe):
        return peaks
    for label, extra in (("default", {}), ("avx512", {"OPENBLAS_CORETYPE": "SkylakeX"})):
        env = dict(os.environ, **extra)
        out = subprocess.run([exe, "--batches=1024", "--seconds=0.3"], capture_output=True, text=True, env=env).stdout
        for line in out.splitlines():
            if line.startswith("# bench_gemm_peak: OpenBLAS"):
                peaks[f"{label}_config"] = line.split("OpenBLAS", 2)[-1].strip()
            if "sgemm 1024x1024x1024" in line:
                threads = int(line.split()[1])
                peaks[f"{label}_{threads}t"] = float(line.split(":")[1].split()[0])
    return peaks


def default_torch_python():
    venv = os.path.join(default_build_dir(), "bench", "venv-fbgemm", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lens", default="256,1024,4096,16384")
    p.add_argument("--tokens", type=int, default=16384, help="B * L of every shape")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=1.0, help="timed time per run (at least one step)")
    p.add_argument("--torch-python", default=None, help="python with torch >= 2.0 (default: the FBGEMM venv's)")
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--torch-1t", action="store_true", help="also time torch on 1 thread")
    p.add_argument("--build-dir", default=default_build_dir())
    p.add_argument("--json", default=None, help="write every run here")
    # The torch worker's own arguments.
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--len", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    return p.parse_args()


def main():
    args = parse()
    if args.torch_worker:
        return torch_worker(args)
    lens = [int(x) for x in args.lens.split(",")]
    torch_python = args.torch_python or default_torch_python()

    source = os.path.join(args.build_dir, "bin", "bench_attention")
    snapshot_dir = tempfile.mkdtemp(prefix="bench_attention_")
    binary = os.path.join(snapshot_dir, "bench_attention")
    shutil.copy2(source, binary)  # a rebuild during the run cannot mix binaries
    with open(binary, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(source)))
    print(f"# strata {source} (built {built}, sha256 {digest}), run from a copy; 1 thread (OPENBLAS_NUM_THREADS=1)")
    probe = subprocess.run([torch_python, "-c", "import torch, torch.nn.functional as F; "
                            "print(torch.__version__, hasattr(F, 'scaled_dot_product_attention'))"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        sys.exit(f"bench_attention.py: {torch_python} has no torch:\n{probe.stderr[-2000:]}")
    version, has_sdpa = probe.stdout.split()
    peer = ("F.scaled_dot_product_attention(is_causal=True)" if has_sdpa == "True"
            else "eager softmax(QK^T*scale + causal mask) V (this torch has no SDPA)")
    print(f"# torch {version} ({torch_python}): {peer}, torch.set_num_threads({args.torch_threads})")
    print(f"# H={args.heads} D={args.dim} fp32, B*L={args.tokens}, median of {args.repeats} alternating runs, "
          f">= {args.seconds} s timed each", flush=True)

    sides = [("strata", 1), ("torch", args.torch_threads)] + ([("torch", 1)] if args.torch_1t else [])
    runs = {(side, t, L): [] for side, t in sides for L in lens}
    strata_env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for r in range(args.repeats):
        for L in lens:
            batch = max(1, args.tokens // L)
            order = sides if r % 2 == 0 else sides[::-1]
            for side, threads in order:
                if side == "strata":
                    cmd = [binary, f"--batch={batch}", f"--len={L}", f"--heads={args.heads}", f"--dim={args.dim}",
                           f"--seconds={args.seconds}", "--json"]
                    res = run_json(cmd, strata_env)
                else:
                    cmd = [torch_python, os.path.abspath(__file__), "--torch-worker", f"--batch={batch}",
                           f"--len={L}", f"--heads={args.heads}", f"--dim={args.dim}", f"--threads={threads}",
                           f"--seconds={args.seconds}"]
                    res = run_json(cmd)
                runs[(side, threads, L)].append(res)
                flag = "  (disturbed: others used %.2f cores)" % res["others_cores"] if res["others_cores"] > 0.2 else ""
                print(f"  round {r + 1} L={L:<6} {side:<6} {threads}t  {res['tokens_per_s']:>10.0f} tokens/s  "
                      f"{res['gflops']:6.1f} GFLOP/s{flag}", flush=True)

    wait_quiet()
    peaks = sgemm_peaks(args.build_dir)
    med = {key: statistics.median(x["tokens_per_s"] for x in v) for key, v in runs.items()}
    print()
    if peaks:
        print(f"# sgemm 1024^3 (bench_gemm_peak): OpenBLAS's own choice ({peaks.get('default_config', '?')}) "
              f"{peaks.get('default_1t', 0):.0f} GFLOP/s on 1 thread, {peaks.get('default_2t', 0):.0f} on 2; "
              f"AVX-512 kernels (SkylakeX) {peaks.get('avx512_1t', 0):.0f} and {peaks.get('avx512_2t', 0):.0f}")
    header = f"{'L':>6} {'B':>4}  " + "  ".join(f"{side + ' ' + str(t) + 't':>26}" for side, t in sides)
    print(header)
    for L in lens:
        batch = max(1, args.tokens // L)
        cells = []
        for side, t in sides:
            tps = med[(side, t, L)]
            gf = flops_per_step(batch, L, args.heads, args.dim) * tps / (batch * L) * 1e-9
            peak = peaks.get(f"avx512_{t}t")
            share = f" {100 * gf / peak:3.0f}%" if peak else ""
            cells.append(f"{tps:>9.0f} tok/s {gf:5.1f} GF/s{share}")
        print(f"{L:>6} {batch:>4}  " + "  ".join(f"{c:>26}" for c in cells))
    print("# GF/s: GFLOP/s at 14 D H B L (L+1) / 2 per step; %: of the AVX-512 sgemm rate at the same thread count")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"strata_binary_sha256": digest, "strata_built": built, "torch": version, "sdpa": has_sdpa,
                       "peaks": peaks, "runs": {f"{s} {t}t L={L}": v for (s, t, L), v in runs.items()}}, f, indent=1)
    shutil.rmtree(snapshot_dir, ignore_errors=True)
    peer_name = "sdpa" if has_sdpa == "True" else "torch-eager"
    if args.torch_1t:
        for L in lens:
            print(f"ratio strata/{peer_name}-1t @L={L} (per core): {med[('strata', 1, L)] / med[('torch', 1, L)]:.2f}")
    for L in lens:
        print(f"ratio strata/{peer_name} @L={L} (strata 1 thread, torch {args.torch_threads}): "
              f"{med[('strata', 1, L)] / med[('torch', args.torch_threads, L)]:.2f}")


if __name__ == "__main__":
    main()
