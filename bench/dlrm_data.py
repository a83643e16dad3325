"""What the two PyTorch peers of strata's DLRM share (bench/dlrm_pytorch.py on
Debian's torch 1.13, bench/dlrm_fbgemm.py on torch 2 + FBGEMM): the data they
train on, held as tensors in memory before the clock starts, and the dense part
of the model (MLPs, dot interaction). Imported by both; runs on either torch.

Import it after setting OPENBLAS_NUM_THREADS / OMP_NUM_THREADS: it loads numpy
and torch, which read them when they load.
"""
import sys

import numpy as np
import torch
from torch import nn

NUM_DENSE = 13
NUM_TABLES = 26


def synthetic_data(n, vocab, zipf_s, seed):
    """(dense (n,13) float32 after log1p, rows (n,26) int64 in [0, vocab), labels (n,) float32).

    Zipf(s) ranks over `vocab` per table, each table's ranks spread over its rows
    by a fixed random permutation as a hash would, log-normal integer counts,
    Bernoulli(0.3) labels."""
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


def criteo_data(path, vocab, who="dlrm"):
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
        sys.exit(f"{who}: no usable lines in {path}")
    d = np.log1p(np.maximum(np.asarray(dense, dtype=np.float64), 0.0)).astype(np.float32)
    return (torch.from_numpy(d), torch.from_numpy(np.asarray(rows, dtype=np.int64)),
            torch.from_numpy(np.asarray(labels, dtype=np.float32)))


def load_data(args, who):
    """The peers' --data / --samples / --vocab / --zipf / --seed, as (dense, rows, labels)."""
    if args.data:
        dense, rows, labels = criteo_data(args.data, args.vocab, who)
    else:
        dense, rows, labels = synthetic_data(args.samples, args.vocab, args.zipf, args.seed)
    if dense.shape[0] < args.batch:
        sys.exit(f"{who}: {dense.shape[0]} samples is less than one batch of {args.batch}")
    return dense, rows, labels


def mlp(sizes, last_relu):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DenseDLRM(nn.Module):
    """The dense part: 13-64-dim bottom MLP, dot interaction of the bottom output
    with the 26 pooled embeddings (27 vectors, 351 pairs i<j) ++ bottom, then the
    (dim+351)-64-32-1 top MLP. The embeddings are the subclass's.

    gather: how the 351 dots are picked out of the (B, 27, 27) products, the
    same values either way: "index" z[:, li, lj] (as the reference DLRM and
    TorchRec's InteractionArch; its backward is an accumulating index_put) or
    "index_select" on the flattened (B, 729) products (its backward is an
    index_add: on torch 2.14 about 1.5 ms less per step at batch 1024)."""

    def __init__(self, dim, gather="index"):
        super().__init__()
        self.dim, self.gather = dim, gather
        self.bottom = mlp([NUM_DENSE, 64, dim], last_relu=True)
        n = NUM_TABLES + 1
        li, lj = torch.triu_indices(n, n, offset=1)  # pairs i < j: 351 for 27 vectors
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.register_buffer("lflat", li * n + lj, persistent=False)
        self.top = mlp([dim + n * (n - 1) // 2, 64, 32, 1], last_relu=False)

    def dense_parameters(self):
        return list(self.bottom.parameters()) + list(self.top.parameters())

    def interact(self, x, e):
        """x (B, dim) bottom output, e (B, 26, dim) pooled embeddings -> logits (B,)."""
        t = torch.cat([x.unsqueeze(1), e], dim=1)  # (B, 27, dim)
        z = torch.bmm(t, t.transpose(1, 2))  # (B, 27, 27)
        if self.gather == "index_select":
            pairs = z.flatten(1).index_select(1, self.lflat)
        else:
            pairs = z[:, self.li, self.lj]
        r = torch.cat([x, pairs], dim=1)  # (B, 367)
        return self.top(r).squeeze(1)  # (B,)
