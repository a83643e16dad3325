#!/usr/bin/env /usr/bin/python3
"""Multi-task MMoE (issue 13, model.kind = mmoe) against the same MMoE in PyTorch,
trained on the same data: a two-task click log written once as CSV (label, label,
13 counts, 26 categoricals), which strata reads with data.csv_columns and PyTorch
holds as tensors in memory before its clock starts.

The model on both sides: 13-64-16 bottom MLP, 26 tables of dim 16 (sum bags, one
key each), the dot interaction (367 wide), 4 shared experts 367-64-32 (ReLU),
one softmax gate per task (367 -> 4), towers 32-16-1; loss = the tasks' BCE
summed; Adam 1e-3 dense, Adagrad 0.05 rows; one epoch at batch --batch, then
every task's AUC on the held-out file.

The labels come from a hidden two-task teacher (task 1 is 0.6 of task 0's logit
plus 0.8 of its own), so AUC compares how well each side learns, beside speed.
strata runs 1 producer + 1 trainer + 1 server on this machine's cores; PyTorch
runs --torch-threads threads. The sides alternate, --repeats times; medians.
Prints, last:

  ratio strata/PEER samples_per_s      (for each peer; the strongest last)
  ratio strata-PEER auc_task0          (a difference against the strongest: 0 = the same quality)
  ratio strata-PEER auc_task1

Peers: Debian's torch 1.13 with nn.EmbeddingBag + sparse Adagrad, and (unless
--skip-fbgemm) torch 2.14 with FBGEMM's table-batched embeddings (EXACT_ADAGRAD
fused into backward, HOST / CPU: what TorchRec runs on a CPU) in the venv of
bench/fbgemm_venv.sh, made the first time.

usage: /usr/bin/python3 bench/model/bench_mmoe.py [--build build] [--samples 262144] [--repeats 3]
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
from bench_common import default_build_dir, mpirun  # noqa: E402

NUM_DENSE, NUM_TABLES, DIM, TASKS = 13, 26, 16, 2


def write_data(path_train, path_eval, n_train, n_eval, vocab, seed):
    """The two-task click log: Zipf rows per table, log-normal counts, teacher labels."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n = n_train + n_eval
    weights = np.arange(1, vocab + 1, dtype=np.float64) ** -1.05
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    rows = np.empty((n, NUM_TABLES), dtype=np.int64)
    for t in range(NUM_TABLES):
        rows[:, t] = np.minimum(np.searchsorted(cdf, rng.random(n)), vocab - 1)
    mu, sigma = rng.uniform(0.0, 3.5, NUM_DENSE), rng.uniform(0.5, 1.5, NUM_DENSE)
    counts = np.floor(np.exp(mu + sigma * rng.standard_normal((n, NUM_DENSE))))
    dense = np.log1p(counts)
    # Teacher: per task, a weight per (table, row) shrinking with the row's rank, and dense weights.
    shrink = 1.0 / np.sqrt(1.0 + np.arange(vocab) / 30.0)
    logits = []
    for task in range(TASKS):
        w = rng.uniform(-1, 1, (NUM_TABLES, vocab)) * shrink * 0.5
        a = rng.uniform(-0.25, 0.25, NUM_DENSE)
        logit = sum(w[t, rows[:, t]] for t in range(NUM_TABLES)) + (dense - dense.mean(0)) @ a
        logits.append(logit)
    logits[1] = 0.6 * logits[0] + 0.8 * logits[1]
    labels = []
    for task, rate in enumerate((0.3, 0.15)):
        lo, hi = -30.0, 30.0
        for _ in range(60):
            mid = (lo + hi) / 2
            (lo, hi) = (mid, hi) if (1 / (1 + np.exp(-(mid + logits[task])))).mean() < rate else (lo, mid)
        p = 1 / (1 + np.exp(-((lo + hi) / 2 + logits[task])))
        labels.append((rng.random(n) < p).astype(np.int64))
    for path, lo_i, hi_i in ((path_train, 0, n_train), (path_eval, n_train, n)):
        with open(path, "w") as f:
            for i in range(lo_i, hi_i):
                f.write(f"{labels[0][i]},{labels[1][i]}," + ",".join(str(int(c)) for c in counts[i]) + "," +
                        ",".join(str(int(r)) for r in rows[i]) + "\n")


def run_strata(strata, work, train, evalf, batch, samples):
    out = os.path.join(work, "strata")
    shutil.rmtree(out, ignore_errors=True)
    steps = samples // batch
    cmd = mpirun(3) + [strata, "train", "--config", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "inputs", "mmoe.ini"), "--layout.trainers=1", "--layout.producers=1",
        "--layout.servers=1", "--data.source=csv", "--data.train=" + train, "--data.eval=" + evalf,
        "--data.csv_columns=label,label,dense:13,cat:26", f"--train.batch_size={batch}", f"--train.steps={steps}",
        "--model.num_experts=4", "--model.expert_mlp=64,32", "--model.tower_mlp=16", "--model.bottom_mlp=64,16",
        "--model.embedding_dim=16", "--optim.dense=adam", "--optim.dense_lr=0.001", "--optim.sparse=adagrad",
        "--optim.sparse_lr=0.05", "--output.dir=" + out, "--output.progress_every=1000000"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"strata failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    s = json.load(open(os.path.join(out, "summary.json")))
    cpu = s["cpu_s"]
    roles = {r: cpu[r]["user"] + cpu[r]["sys"] for r in ("trainer", "producer", "server")}
    return {"samples_per_s": s["samples_per_s"], "auc": [t["eval_auc"] for t in s["tasks"]],
            "cpu_us_per_sample": {r: 1e6 * v / s["samples"] for r, v in roles.items()}}


TORCH_SIDE = r'''
import json, sys, time
import numpy as np, torch
from torch import nn
train, evalf, batch, threads, tables = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.set_num_threads(threads); torch.manual_seed(1)
def load(path):
    a = np.loadtxt(path, delimiter=",", dtype=np.int64)
    return (torch.from_numpy(a[:, 0:2].astype(np.float32)), torch.from_numpy(np.log1p(a[:, 2:15]).astype(np.float32)),
            torch.from_numpy(a[:, 15:41].copy()))
ytr, dtr, rtr = load(train); yev, dev, rev = load(evalf)
vocab = int(max(rtr.max(), rev.max())) + 1
def mlp(sizes, last_relu):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu: layers.append(nn.ReLU())
    return nn.Sequential(*layers)
class MMoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = mlp([13, 64, 16], True)
        if tables == "tbe":  # FBGEMM's table-batched embeddings, Adagrad fused into backward (TorchRec's CPU path)
            from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation, PoolingMode
            from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
                ComputeDevice, OptimType, SplitTableBatchedEmbeddingBagsCodegen)
            self.emb = SplitTableBatchedEmbeddingBagsCodegen(
                embedding_specs=[(vocab, 16, EmbeddingLocation.HOST, ComputeDevice.CPU)] * 26,
                optimizer=OptimType.EXACT_ADAGRAD, learning_rate=0.05, eps=1e-10, weight_decay=0.0,
                pooling_mode=PoolingMode.SUM, device=torch.device("cpu"))
            with torch.no_grad():
                for w in self.emb.split_embedding_weights(): w.uniform_(-0.05, 0.05)
        else:
            self.emb = nn.EmbeddingBag(26 * vocab, 16, mode="sum", sparse=True)
            nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        self.register_buffer("base", torch.arange(26, dtype=torch.int64) * vocab)
        li, lj = torch.triu_indices(27, 27, offset=1)
        self.register_buffer("li", li); self.register_buffer("lj", lj)
        w = 16 + 27 * 26 // 2
        self.experts = nn.ModuleList(mlp([w, 64, 32], True) for _ in range(4))
        self.gates = nn.ModuleList(nn.Linear(w, 4) for _ in range(2))
        self.towers = nn.ModuleList(mlp([32, 16, 1], False) for _ in range(2))
    def dense_parameters(self):
        return [p for n, p in self.named_parameters() if not n.startswith("emb.")]
    def forward(self, dense, rows, offsets):
        b = dense.shape[0]
        x = self.bottom(dense)
        if tables == "tbe":
            e = self.emb(rows.t().reshape(-1), offsets).view(b, 26, 16)  # table-major keys
        else:
            e = self.emb((rows + self.base).view(-1), offsets).view(b, 26, 16)
        t = torch.cat([x.unsqueeze(1), e], 1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        z = torch.cat([x, z], 1)
        outs = torch.stack([ex(z) for ex in self.experts], 1)  # (B, 4, 32)
        logits = []
        for g, tower in zip(self.gates, self.towers):
            w = torch.softmax(g(z), 1).unsqueeze(2)
            logits.append(tower((w * outs).sum(1)).squeeze(1))
        return torch.stack(logits, 1)
model = MMoE()
dopt = torch.optim.Adam(model.dense_parameters(), lr=1e-3)
sopt = torch.optim.Adagrad([model.emb.weight], lr=0.05) if tables != "tbe" else None
lossf = nn.BCEWithLogitsLoss(reduction="sum")
def offsets_of(b):
    return torch.arange(b * 26 + (1 if tables == "tbe" else 0), dtype=torch.int64)
offsets = offsets_of(batch)
steps = dtr.shape[0] // batch
start = time.perf_counter()
for i in range(steps):
    lo = i * batch
    out = model(dtr[lo:lo + batch], rtr[lo:lo + batch], offsets)
    loss = lossf(out, ytr[lo:lo + batch]) / batch
    dopt.zero_grad(set_to_none=True)
    if sopt: sopt.zero_grad(set_to_none=True)
    loss.backward(); dopt.step()
    if sopt: sopt.step()
seconds = time.perf_counter() - start
def auc(s, y):
    order = np.argsort(s, kind="mergesort"); s, y = s[order], y[order]
    ranks = np.empty(len(s)); i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]: j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1; i = j + 1
    pos = y.sum(); neg = len(y) - pos
    return float((ranks[y > 0.5].sum() - pos * (pos + 1) / 2) / (pos * neg))
with torch.no_grad():
    probs = []
    for lo in range(0, dev.shape[0], 4096):
        d = dev[lo:lo + 4096]
        probs.append(torch.sigmoid(model(d, rev[lo:lo + 4096], offsets_of(d.shape[0]))))
    p = torch.cat(probs).numpy()
print(json.dumps({"samples_per_s": steps * batch / seconds, "auc": [auc(p[:, k], yev[:, k].numpy()) for k in range(2)],
                  "torch": torch.__version__, "threads": threads, "tables": tables}))
'''


def run_torch(work, train, evalf, batch, threads, python="/usr/bin/python3", tables="embedding_bag"):
    script = os.path.join(work, "mmoe_torch.py")
    with open(script, "w") as f:
        f.write(TORCH_SIDE)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    proc = subprocess.run([python, script, train, evalf, str(batch), str(threads), tables], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"the PyTorch side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fbgemm_python(build):
    """The FBGEMM peer's interpreter, made once by bench/fbgemm_venv.sh (None if that fails)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, STRATA_BUILD_DIR=os.path.relpath(build, root))
    proc = subprocess.run(["bash", os.path.join(root, "bench", "fbgemm_venv.sh")], capture_output=True, text=True,
                          env=env, cwd=root)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        print(f"(no FBGEMM peer: fbgemm_venv.sh failed: {proc.stderr[-500:]})")
        return None
    return lines[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=default_build_dir())
    p.add_argument("--samples", type=int, default=262144)
    p.add_argument("--eval-samples", type=int, default=32768)
    p.add_argument("--vocab", type=int, default=100000)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--skip-fbgemm", action="store_true", help="leave out the torch 2 + FBGEMM TBE peer")
    args = p.parse_args()
    strata = os.path.join(args.build, "bin", "strata")
    peers = {"pytorch": ("/usr/bin/python3", "embedding_bag")}
    if not args.skip_fbgemm:
        python = fbgemm_python(args.build)
        if python:
            peers["fbgemm"] = (python, "tbe")
    work = tempfile.mkdtemp(prefix="strata-bench-mmoe-")
    try:
        train, evalf = os.path.join(work, "train.csv"), os.path.join(work, "eval.csv")
        t0 = time.time()
        write_data(train, evalf, args.samples, args.eval_samples, args.vocab, 11)
        print(f"data: {args.samples} training and {args.eval_samples} held-out samples, 2 tasks "
              f"({time.time() - t0:.0f} s to write)")
        sides = {name: [] for name in ["strata", *peers]}
        for r in range(args.repeats):
            sides["strata"].append(run_strata(strata, work, train, evalf, args.batch, args.samples))
            for name, (python, tables) in peers.items():
                sides[name].append(run_torch(work, train, evalf, args.batch, args.torch_threads, python, tables))
            print(f"repeat {r}: " + ", ".join(f"{k} {v[-1]['samples_per_s']:.0f} samples/s AUC "
                                              f"{v[-1]['auc'][0]:.4f} / {v[-1]['auc'][1]:.4f}"
                                              for k, v in sides.items()), flush=True)
        med = {k: statistics.median(x["samples_per_s"] for x in v) for k, v in sides.items()}
        auc = {k: [statistics.median(x["auc"][t] for x in v) for t in range(TASKS)] for k, v in sides.items()}
        cpu = {r: statistics.median(x["cpu_us_per_sample"][r] for x in sides["strata"])
               for r in ("trainer", "producer", "server")}
        print(f"strata 1t+1p+1s: {med['strata']:.0f} samples/s, AUC {auc['strata'][0]:.4f} / {auc['strata'][1]:.4f}, "
              f"CPU-us per sample trainer {cpu['trainer']:.1f} producer {cpu['producer']:.1f} "
              f"server {cpu['server']:.1f}")
        for name in peers:
            first = sides[name][0]
            print(f"{name} (torch {first['torch']}, {first['tables']}, {args.torch_threads} threads): "
                  f"{med[name]:.0f} samples/s, AUC {auc[name][0]:.4f} / {auc[name][1]:.4f}, CPU-us per sample about "
                  f"{1e6 * args.torch_threads / med[name]:.1f} (threads x wall)")
        strongest = max(peers, key=lambda k: med[k])
        print()
        for name in peers:
            if name != strongest:
                print(f"ratio strata/{name} samples_per_s: {med['strata'] / med[name]:.3f}")
        print(f"ratio strata/{strongest} samples_per_s: {med['strata'] / med[strongest]:.3f}")
        for t in range(TASKS):
            print(f"ratio strata-{strongest} auc_task{t}: {auc['strata'][t] - auc[strongest][t]:+.4f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
