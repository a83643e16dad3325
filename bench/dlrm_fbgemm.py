#!/usr/bin/env python3
"""FBGEMM peer of strata's DLRM: the model of bench/dlrm_pytorch.py, with its 26
embedding tables as ONE FBGEMM table-batched embedding (TBE) on the CPU, as
TorchRec runs embeddings on a CPU host. Prints one JSON line with samples/s.

Run it with the virtual environment of bench/fbgemm_venv.sh (torch 2.14.1,
fbgemm-gpu-cpu 1.9.0, torchrec; it is not Debian's torch 1.13):
  bash bench/fbgemm_venv.sh   # prints the venv's python, creates it if missing
  build/bench/venv-fbgemm/bin/python bench/dlrm_fbgemm.py --batch 1024 --steps 500

Model: as bench/dlrm_pytorch.py (bench/dlrm_data.py's dense part: 13-64-16
bottom MLP, dot interaction of 27 vectors, 351 pairs i<j ++ bottom -> 367-64-32-1
top MLP, BCE with logits; nn.Linear + torch.optim.Adam lr 1e-3), but the
embeddings are fbgemm_gpu's SplitTableBatchedEmbeddingBagsCodegen:
  26 tables of --vocab rows x --dim, EmbeddingLocation.HOST, ComputeDevice.CPU,
  FP32 weights, PoolingMode.SUM, one key per bag;
  optimizer OptimType.EXACT_ADAGRAD (per-element Adagrad, as strata's and as
  torch.optim.Adagrad: G += g*g; w -= lr * g / (sqrt(G) + eps)), lr 0.05,
  eps 1e-10 (torch.optim.Adagrad's default, which dlrm_pytorch.py uses), no
  weight decay, initial accumulator 0. The CPU TBE supports EXACT_ADAGRAD, so
  nothing is approximated (EXACT_ROWWISE_ADAGRAD, TorchRec's usual choice, keeps
  one accumulator per row: a different, cheaper optimizer, not used here).
  The optimizer is fused into the backward: the TBE's backward kernel updates
  its rows in place and no embedding gradient is materialized (TorchRec's
  fused-optimizer mode); only the dense parameters go through Adam.
The embedding weights start as dlrm_pytorch.py's (uniform(-0.05, 0.05), drawn in
the same order from the same seed), so with the same flags both report nearly
the same mean_loss: a check that this is the same training.

Data: bench/dlrm_data.py's (the same synthetic generator and Criteo reader as
dlrm_pytorch.py), in memory before the clock starts; the keys are also laid
out table-major (26, n) then, the layout the TBE reads (TorchRec's
KeyedJaggedTensor is feature-major); each step copies its (26, B) slice.

Tuning (all honest: they change how the same work is run, not the work):
  --threads        torch.set_num_threads: OpenMP threads of torch's ops, MKL's
                   GEMM and FBGEMM's CPU kernels (one pool; this torch calls MKL,
                   not OpenBLAS, so there is no second BLAS pool to fight it)
  --adam           torch.optim.Adam implementation: fused (one kernel over all
                   dense parameters, the fastest on this CPU), foreach or single
  --bounds-check   FBGEMM's per-batch check of the keys against the table sizes;
                   none by default: the keys are in range by construction
                   (TorchRec's default is warning, which costs a pass over them)
  --index-dtype    int64 (default) or int32 keys and offsets
  --gather         index_select (default) or index: how the interaction picks the
                   351 dots out of the (B, 27, 27) products; the same values
                   (bench/dlrm_data.py). dlrm_pytorch.py uses index (z[:, li, lj],
                   as the reference DLRM and TorchRec), whose backward (an
                   accumulating index_put) cost this peer a third of its samples/s
                   at batch 256 (67k against 105k samples/s on 2 threads) and a
                   fifth at 1024; index_select's backward is an index_add.
Measured on 2 cores (AMD EPYC, AVX-512), batch 256 and 1024, medians of three:
the 2-thread defaults above were the fastest; --threads 1 was 5-15% slower,
--adam foreach/single, --bounds-check warning, --index-dtype int32 and
OMP_WAIT_POLICY=ACTIVE no faster, OMP_WAIT_POLICY=PASSIVE half as fast, and
torch.compile of the interaction slower than eager index_select (2.2 against
1.3 ms forward+backward at batch 1024).
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
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (OpenMP threads of every op)")
    p.add_argument("--interop-threads", type=int, default=1,
                   help="torch.set_num_interop_threads (nothing here runs ops in parallel with each other)")
    p.add_argument("--vocab", type=int, default=100000, help="rows per table; key -> row = key mod vocab")
    p.add_argument("--zipf", type=float, default=1.05, help="Zipf exponent of the synthetic keys")
    p.add_argument("--dim", type=int, default=16, help="embedding dimension")
    p.add_argument("--samples", type=int, default=1 << 20,
                   help="synthetic samples held in memory (the loop cycles over them)")
    p.add_argument("--data", default="", help="Criteo TSV file instead of synthetic data")
    p.add_argument("--adam", choices=["fused", "foreach", "single"], default="fused",
                   help="torch.optim.Adam implementation of the dense update")
    p.add_argument("--bounds-check", choices=["none", "warning"], default="none",
                   help="FBGEMM's check of the keys against the table sizes, every batch")
    p.add_argument("--index-dtype", choices=["int64", "int32"], default="int64")
    p.add_argument("--gather", choices=["index", "index_select"], default="index_select",
                   help="how the interaction picks its 351 dots (bench/dlrm_data.py DenseDLRM)")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


args = parse_args()
os.environ["OMP_NUM_THREADS"] = str(args.threads)
os.environ["MKL_NUM_THREADS"] = str(args.threads)

import torch  # noqa: E402
from torch import nn  # noqa: E402

try:
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import (  # noqa: E402
        BoundsCheckMode, EmbeddingLocation, PoolingMode)
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (  # noqa: E402
        ComputeDevice, OptimType, SplitTableBatchedEmbeddingBagsCodegen)
except ImportError as e:
    sys.exit(f"dlrm_fbgemm: {e}; run it with the python of bench/fbgemm_venv.sh")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlrm_data import NUM_TABLES, DenseDLRM, load_data  # noqa: E402

ADAGRAD_LR = 0.05
ADAGRAD_EPS = 1e-10  # torch.optim.Adagrad's default, as bench/dlrm_pytorch.py


class DLRM(DenseDLRM):
    def __init__(self, vocab, dim, index_dtype, bounds_check, gather):
        super().__init__(dim, gather)
        state = torch.get_rng_state()  # whatever the TBE draws, the weights below are dlrm_pytorch.py's
        self.emb = SplitTableBatchedEmbeddingBagsCodegen(
            embedding_specs=[(vocab, dim, EmbeddingLocation.HOST, ComputeDevice.CPU)] * NUM_TABLES,
            optimizer=OptimType.EXACT_ADAGRAD, learning_rate=ADAGRAD_LR, eps=ADAGRAD_EPS,
            weight_decay=0.0, pooling_mode=PoolingMode.SUM,
            bounds_check_mode=BoundsCheckMode.NONE if bounds_check == "none" else BoundsCheckMode.WARNING,
            embedding_table_index_type=index_dtype, embedding_table_offset_type=index_dtype,
            device=torch.device("cpu"))
        torch.set_rng_state(state)
        # dlrm_pytorch.py's fused EmbeddingBag: one (26*vocab, dim) uniform(-0.05, 0.05) draw.
        init = torch.empty(NUM_TABLES * vocab, dim).uniform_(-0.05, 0.05)
        with torch.no_grad():
            for t, w in enumerate(self.emb.split_embedding_weights()):
                w.copy_(init[t * vocab:(t + 1) * vocab])

    def forward(self, dense, keys, offsets):
        """keys: (26*B,) table-major (table t's B keys, then table t+1's)."""
        x = self.bottom(dense)  # (B, dim)
        e = self.emb(keys, offsets).view(dense.shape[0], NUM_TABLES, self.dim)  # (B, 26*dim) -> (B, 26, dim)
        return self.interact(x, e)


def main():
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.interop_threads)
    torch.manual_seed(args.seed)
    index_dtype = torch.int64 if args.index_dtype == "int64" else torch.int32
    t0 = time.perf_counter()
    dense, rows, labels = load_data(args, "dlrm_fbgemm")
    keys = rows.t().contiguous().to(index_dtype)  # (26, n): the TBE's table-major layout
    n = dense.shape[0]
    load_s = time.perf_counter() - t0

    model = DLRM(args.vocab, args.dim, index_dtype, args.bounds_check, args.gather)
    adam = {"fused": {"fused": True}, "foreach": {"foreach": True}, "single": {"foreach": False}}[args.adam]
    dense_opt = torch.optim.Adam(model.dense_parameters(), lr=1e-3, **adam)
    loss_fn = nn.BCEWithLogitsLoss()
    b = args.batch
    offsets = torch.arange(NUM_TABLES * b + 1, dtype=index_dtype)  # one key per bag
    batches = n // b

    def step(i):
        lo = (i % batches) * b
        out = model(dense[lo:lo + b], keys[:, lo:lo + b].reshape(-1), offsets)
        loss = loss_fn(out, labels[lo:lo + b])
        dense_opt.zero_grad(set_to_none=True)
        loss.backward()  # also applies Adagrad to the looked-up embedding rows
        dense_opt.step()
        return loss.detach()

    for i in range(args.warmup):
        step(i)
    start = time.perf_counter()
    loss_sum = 0.0
    for i in range(args.steps):
        loss_sum += float(step(args.warmup + i))  # float() also keeps the step synchronous
    seconds = time.perf_counter() - start

    import fbgemm_gpu
    print(json.dumps({
        "peer": "fbgemm", "torch": torch.__version__, "fbgemm_gpu": getattr(fbgemm_gpu, "__version__", "?"),
        "threads": torch.get_num_threads(), "interop_threads": args.interop_threads,
        "optimizer": "EXACT_ADAGRAD", "adam": args.adam, "bounds_check": args.bounds_check,
        "index_dtype": args.index_dtype, "gather": args.gather, "data": args.data or "synthetic",
        "batch": b, "steps": args.steps,
        "warmup": args.warmup, "samples": args.steps * b, "train_seconds": round(seconds, 4),
        "samples_per_s": round(args.steps * b / seconds, 1), "mean_loss": round(loss_sum / args.steps, 5),
        "load_seconds": round(load_s, 2),
    }))


if __name__ == "__main__":
    main()
