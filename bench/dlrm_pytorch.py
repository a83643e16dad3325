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
The data generators and the dense part of the model are bench/dlrm_data.py's,
shared with bench/dlrm_fbgemm.py (the same model on torch 2 + FBGEMM's
table-batched embeddings).
"""
import argparse
import json
import os
import sys
import time


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

import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlrm_data import NUM_TABLES, DenseDLRM, load_data  # noqa: E402


class DLRM(DenseDLRM):
    def __init__(self, vocab, dim, fused):
        super().__init__(dim)
        self.vocab, self.fused = vocab, fused
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

    def forward(self, dense, rows, offsets):
        b = dense.shape[0]
        x = self.bottom(dense)  # (B, dim)
        if self.fused:
            # One key per bag: B*26 bags over the concatenated tables.
            e = self.emb((rows + self.row_base).view(-1), offsets).view(b, NUM_TABLES, self.dim)
        else:
            e = torch.stack([emb(rows[:, t].contiguous(), offsets) for t, emb in enumerate(self.embs)], dim=1)
        return self.interact(x, e)


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    dense, rows, labels = load_data(args, "dlrm_pytorch")
    n = dense.shape[0]
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
