#!/usr/bin/python3
"""PyTorch peer of strata's DLRM: the same model, optimizers and data shape, timed
on the CPU. Prints one JSON line with samples/s. Run it with Debian's
/usr/bin/python3 (python3-torch); the python3 first on PATH has no torch.

Model (as strata's deck inputs/default.ini):
  dense (B, 13) -> log1p(max(x, 0)) -> Linear(13,64)+ReLU -> Linear(64,16)+ReLU
  26 bags, one key each, sum pooling, dim 16 -> (B, 26, 16)
  dot interaction over [bottom, e_0..e_25] (B, 27, 16): 351 dots i<j ++ bottom -> 367
  Linear(367,64)+ReLU -> Linear(64,32)+ReLU -> Linear(32,1), BCE with logits
  dense: Adam lr 1e-3; embeddings: Adagrad lr 0.05 on sparse gradients.

Data: synthetic (Zipf(s) ranks over `vocab` per table, each table's ranks spread
over its rows by a fixed random permutation as a hash would, log-normal integer
counts, Bernoulli(0.3) labels) or a Criteo TSV file (--data). All of it is
tensors in memory before the clock starts, and the log transform of the counts is
done then too (strata does it on its producer rank, off the trainer's path).
"""
import argparse
import json
import os
import sys
import time

NUM_DENSE = 13
NUM_TABLES = 26


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256, help="global batch size")
    p.add_argument("--steps", type=int, default=2000, help="timed training steps")
    p.add_argument("--warmup", type=int, default=50, help="untimed steps before the clock starts")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (OpenMP threads of torch's ops)")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="OpenBLAS threads (its own pthread pool, beside torch's OpenMP one); 1 by default "
                        "because with both pools as wide as the cores they fight over them: on 2 cores "
                        "--threads=2 --blas-threads=2 measured about half the samples/s of --blas-threads=1")
    p.add_argument("--vocab", type=int, default=100000, help="rows per table; key -> row = key mod vocab")
    p.add_argument("--zipf", type=float, default=1.05, help="Zipf exponent of the synthetic keys")
    p.add_argument("--dim", type=int, default=16, help="embedding dimension")
    p.add_argument("--samples", type=int, default=1 << 20,
                   help="synthetic samples held in memory (the loop cycles over them)")
    p.add_argument("--data", default="", help="Criteo TSV file instead of synthetic data")
    p.add_argument("--tables", choices=["fused", "per_table"], default="fused",
                   help="fused: one EmbeddingBag over all 26 tables' rows with row offsets; "
                        "per_table: 26 EmbeddingBags (as the reference DLRM)")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


args = parse_args()
# OpenBLAS (which torch's Debian build calls for GEMM) reads its thread count at load.
os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


def synthetic_data(n, vocab, zipf_s, seed):
    """(dense (n,13) float32 after log1p, rows (n,26) int64 in [0, vocab), labels (n,) float32)."""
    rng = np.random.default_rng(seed)
    # Finite Zipf over ranks 0..vocab-1: P(r) ~ (r+1)^-s, by inverting its CDF.
    weights = np.arange(1, vocab + 1, dtype=np.float64) ** -zipf_s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    rows = np.empty((n, NUM_TABLES), dtype=np.int64)
    for t in range(NUM_TABLES):
        ranks = np.minimum(np.searchsorted(cdf, rng.random(n)), vocab - 1)
        rows[:, t] = rng.permutation(vocab)[ranks]  # hot rows scattered, as after hashing
    mu = rng.uniform(0.0, 4.0, NUM_DENSE)
    sigma = rng.uniform(0.5, 1.5, NUM_DENSE)
    counts = np.floor(np.exp(mu + sigma * rng.standard_normal((n, NUM_DENSE))))
    dense = np.log1p(np.maximum(counts, 0.0)).astype(np.float32)
    labels = (rng.random(n) < 0.3).astype(np.float32)
    return torch.from_numpy(dense), torch.from_numpy(rows), torch.from_numpy(labels)


def criteo_data(path, vocab):
    """The same tensors from a Criteo TSV file: label, 13 ints, 26 hex categoricals."""
    labels, dense, rows = [], [], []
    with open(path, "r", newline="") as f:
        for line in f:
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) < 1 + NUM_DENSE:
                continue
            fields += [""] * (1 + NUM_DENSE + NUM_TABLES - len(fields))
            try:
                labels.append(float(fields[0]))
                dense.append([float(x) if x else 0.0 for x in fields[1:1 + NUM_DENSE]])
                rows.append([int(x, 16) % vocab if x else 0 for x in fields[1 + NUM_DENSE:1 + NUM_DENSE + NUM_TABLES]])
            except ValueError:
                continue
    if not labels:
        sys.exit(f"dlrm_pytorch: no usable lines in {path}")
    d = np.log1p(np.maximum(np.asarray(dense, dtype=np.float64), 0.0)).astype(np.float32)
    return (torch.from_numpy(d), torch.from_numpy(np.asarray(rows, dtype=np.int64)),
            torch.from_numpy(np.asarray(labels, dtype=np.float32)))


def mlp(sizes, last_relu):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, vocab, dim, fused):
        super().__init__()
        self.vocab, self.dim, self.fused = vocab, dim, fused
        self.bottom = mlp([NUM_DENSE, 64, dim], last_relu=True)
        n = NUM_TABLES + 1
        li, lj = torch.triu_indices(n, n, offset=1)  # pairs i < j: 351 for 27 vectors
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.top = mlp([dim + n * (n - 1) // 2, 64, 32, 1], last_relu=False)
        if fused:
            self.emb = nn.EmbeddingBag(NUM_TABLES * vocab, dim, mode="sum", sparse=True)
            self.register_buffer("row_base", torch.arange(NUM_TABLES, dtype=torch.int64) * vocab,
                                 persistent=False)
            nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        else:
            self.embs = nn.ModuleList(nn.EmbeddingBag(vocab, dim, mode="sum", sparse=True)
                                      for _ in range(NUM_TABLES))
            for e in self.embs:
                nn.init.uniform_(e.weight, -0.05, 0.05)

    def sparse_parameters(self):
        return [self.emb.weight] if self.fused else [e.weight for e in self.embs]

    def dense_parameters(self):
        return list(self.bottom.parameters()) + list(self.top.parameters())

    def forward(self, dense, rows, offsets):
        b = dense.shape[0]
        x = self.bottom(dense)  # (B, dim)
        if self.fused:
            # One key per bag: B*26 bags over the concatenated tables.
            e = self.emb((rows + self.row_base).view(-1), offsets).view(b, NUM_TABLES, self.dim)
        else:
            e = torch.stack([emb(rows[:, t].contiguous(), offsets) for t, emb in enumerate(self.embs)], dim=1)
        t = torch.cat([x.unsqueeze(1), e], dim=1)  # (B, 27, dim)
        z = torch.bmm(t, t.transpose(1, 2))  # (B, 27, 27)
        r = torch.cat([x, z[:, self.li, self.lj]], dim=1)  # (B, 367)
        return self.top(r).squeeze(1)  # (B,)


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    if args.data:
        dense, rows, labels = criteo_data(args.data, args.vocab)
    else:
        dense, rows, labels = synthetic_data(args.samples, args.vocab, args.zipf, args.seed)
    n = dense.shape[0]
    if n < args.batch:
        sys.exit(f"dlrm_pytorch: {n} samples is less than one batch of {args.batch}")
    load_s = time.perf_counter() - t0

    model = DLRM(args.vocab, args.dim, args.tables == "fused")
    dense_opt = torch.optim.Adam(model.dense_parameters(), lr=1e-3)
    sparse_opt = torch.optim.Adagrad(model.sparse_parameters(), lr=0.05)
    loss_fn = nn.BCEWithLogitsLoss()
    b = args.batch
    bags = b * NUM_TABLES if args.tables == "fused" else b
    offsets = torch.arange(bags, dtype=torch.int64)
    batches = n // b

    def step(i):
        lo = (i % batches) * b
        out = model(dense[lo:lo + b], rows[lo:lo + b], offsets)
        loss = loss_fn(out, labels[lo:lo + b])
        dense_opt.zero_grad(set_to_none=True)
        sparse_opt.zero_grad(set_to_none=True)
        loss.backward()
        dense_opt.step()
        sparse_opt.step()
        return loss

    for i in range(args.warmup):
        step(i)
    start = time.perf_counter()
    loss_sum = 0.0
    for i in range(args.steps):
        loss_sum += float(step(args.warmup + i))  # float() also keeps the step synchronous
    seconds = time.perf_counter() - start

    print(json.dumps({
        "peer": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "blas_threads": args.blas_threads,
        "tables": args.tables, "data": args.data or "synthetic", "batch": b, "steps": args.steps,
        "warmup": args.warmup, "samples": args.steps * b, "train_seconds": round(seconds, 4),
        "samples_per_s": round(args.steps * b / seconds, 1), "mean_loss": round(loss_sum / args.steps, 5),
        "load_seconds": round(load_s, 2),
    }))


if __name__ == "__main__":
    main()
