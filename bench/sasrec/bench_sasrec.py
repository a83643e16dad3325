#!/usr/bin/env python3
"""SASRec: strata (model.kind = sasrec, jagged batches, the tiered store) against a
PyTorch SASRec (the architecture of Kang & McAuley 2018 as pmixer/SASRec.pytorch ports
it: left-padded batches of max_len, nn.MultiheadAttention with a causal mask,
pointwise FFN, BCE on one negative per position) on the same event file, split, model
size, batch and epochs. Both evaluate HR@10 / NDCG@10 of each user's validation event
against 100 items the user never had.

The two sides alternate, `--repeats` times each; medians are printed, and last the
ratios: strata / PyTorch in sequences per second and the two quality differences.

  /usr/bin/python3 bench/sasrec/bench_sasrec.py --build build [--users 3000] [--repeats 3]
"""
import argparse
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_common import ROOT, default_build_dir, mpirun  # noqa: E402


def write_events(path, users, items, min_len, max_len, seed):
    """user item timestamp lines: Zipf-popular items, each user mostly following an
    item's successors (so the next item is predictable), sometimes jumping."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 1.05 for i in range(items)]
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)

    def popular():
        import bisect
        return bisect.bisect_left(cumulative, rng.random() * total)

    events = 0
    with open(path, "w") as f:
        for u in range(users):
            item = popular()
            for t in range(rng.randint(min_len, max_len)):
                f.write(f"{u}\t{item}\t{t}\n")
                events += 1
                item = (item * 7 + rng.choice((1, 2, 3))) % items if rng.random() < 0.6 else popular()
    return events


def read_split(path):
    """Per user, events in timestamp order: (train, validation target) per the SASRec split."""
    by_user = {}
    with open(path) as f:
        for line in f:
            u, i, t = line.split()
            by_user.setdefault(u, []).append((int(t), int(i) + 1))  # 0 is padding
    users = []
    for u, events in by_user.items():
        events.sort(key=lambda e: e[0])
        seq = [i for _, i in events]
        users.append(seq)
    return users


def run_strata(args, events, out_dir):
    cmd = mpirun(3) + [os.path.join(args.build, "bin", "strata"), "train", "--config",
                       os.path.join(ROOT, "inputs", "sasrec.ini"),
                       "--layout.trainers=1", "--layout.producers=1", "--layout.servers=1",
                       "--data.source=sequences", "--data.train=" + events, "--data.sequence_task=next_item",
                       f"--data.max_seq_len={args.max_len}", f"--model.sasrec_max_len={args.max_len}",
                       f"--model.embedding_dim={args.dim}", f"--model.sasrec_blocks={args.blocks}",
                       f"--model.sasrec_heads={args.heads}", f"--train.batch_size={args.batch}",
                       "--train.steps=0", f"--train.epochs={args.epochs}", "--train.eval_batch_size=256",
                       "--optim.dense=adam", f"--optim.dense_lr={args.lr}", "--optim.sparse=adagrad",
                       f"--optim.sparse_lr={args.sparse_lr}", "--output.dir=" + out_dir, "--output.overwrite=true",
                       "--output.progress_every=1000000"]
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    if proc.returncode != 0:
        sys.exit(f"strata failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    with open(os.path.join(out_dir, "summary.json")) as f:
        s = json.load(f)
    cpu = s["cpu_s"]["total"]
    return {"seq_per_s": s["samples_per_s"], "hr": s["eval_hr_at_10"], "ndcg": s["eval_ndcg_at_10"],
            "cpu_per_seq_ms": 1e3 * cpu / max(s["samples"], 1), "wall": wall, "steps": s["steps"],
            "cpu_by_role_ms": {r: 1e3 * (v["user"] + v["sys"]) / max(s["samples"], 1)
                               for r, v in s["cpu_s"].items() if isinstance(v, dict)}}


def run_torch(args, users, num_items):
    import torch
    import torch.nn as nn

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    L, d = args.max_len, args.dim

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d, eps=1e-6)
            self.attn = nn.MultiheadAttention(d, args.heads, batch_first=True)
            self.ln2 = nn.LayerNorm(d, eps=1e-6)
            self.ffn = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))

        def forward(self, x, mask, pad):
            q = self.ln1(x)
            a, _ = self.attn(q, q, q, attn_mask=mask, need_weights=False)
            x = x + a
            x = x + self.ffn(self.ln2(x))
            return x * pad

    class SASRec(nn.Module):
        def __init__(self):
            super().__init__()
            self.item = nn.Embedding(num_items + 1, d, padding_idx=0)
            self.pos = nn.Embedding(L, d)
            self.blocks = nn.ModuleList(Block() for _ in range(args.blocks))
            self.ln = nn.LayerNorm(d, eps=1e-6)
            self.register_buffer("mask", torch.triu(torch.ones(L, L, dtype=torch.bool), 1))

        def states(self, seq):
            pad = (seq > 0).unsqueeze(-1).float()
            x = self.item(seq) * math.sqrt(d) + self.pos.weight.unsqueeze(0)
            x = x * pad
            for b in self.blocks:
                x = b(x, self.mask, pad)
            return self.ln(x)

    model = SASRec()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98))
    rng = random.Random(args.seed)

    def left_pad(seq):
        seq = seq[-L:]
        return [0] * (L - len(seq)) + seq

    train = [u[:-2] if len(u) >= 3 else u for u in users]
    train = [t for t in train if len(t) >= 2]
    steps = 0
    start = time.time()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(args.epochs):
        order = list(range(len(train)))
        rng.shuffle(order)
        for at in range(0, len(order) - args.batch + 1, args.batch):  # full batches, as strata
            rows = [train[i] for i in order[at:at + args.batch]]
            seq = torch.tensor([left_pad(r[:-1]) for r in rows])
            pos = torch.tensor([left_pad(r[1:]) for r in rows])
            neg = torch.tensor([left_pad([rng.randint(1, num_items) for _ in r[1:]]) for r in rows])
            h = model.states(seq)
            ps = (h * model.item(pos)).sum(-1)
            ns = (h * model.item(neg)).sum(-1)
            valid = pos > 0
            loss = (nn.functional.softplus(-ps)[valid].sum() + nn.functional.softplus(ns)[valid].sum()) / len(rows)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
    train_s = time.time() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    sequences = steps * args.batch
    # Evaluation: the validation event (second-to-last) against 100 unseen items.
    hits = ndcg = n = 0
    model.eval()
    with torch.no_grad():
        evals = [u for u in users if len(u) >= 3]
        seen = [set(u) for u in evals]
        for at in range(0, len(evals), 256):
            chunk = evals[at:at + 256]
            seq = torch.tensor([left_pad(u[:-2]) for u in chunk])
            cand = []
            for k, u in enumerate(chunk):
                c = [u[-2]]
                while len(c) < 101:
                    x = rng.randint(1, num_items)
                    if x not in seen[at + k]:
                        c.append(x)
                cand.append(c)
            h = model.states(seq)[:, -1, :]
            scores = (h.unsqueeze(1) * model.item(torch.tensor(cand))).sum(-1)
            rank = (scores[:, 1:] >= scores[:, :1]).sum(1)
            for r in rank.tolist():
                n += 1
                if r < 10:
                    hits += 1
                    ndcg += 1 / math.log2(r + 2)
    return {"seq_per_s": sequences / train_s, "hr": hits / n, "ndcg": ndcg / n,
            "cpu_per_seq_ms": 1e3 * cpu / max(sequences, 1), "steps": steps, "version": torch.__version__}


def torch_pythons(args):
    """The PyTorch interpreters to compare: the venv of bench/fbgemm_venv.sh (a current
    PyTorch, made if missing unless --no-venv) and Debian's python3-torch."""
    pythons = {}
    if not args.no_venv:
        env = dict(os.environ, STRATA_BUILD_DIR=os.path.relpath(args.build, ROOT))
        proc = subprocess.run(["bash", os.path.join(ROOT, "bench", "fbgemm_venv.sh")], capture_output=True,
                              text=True, env=env)
        if proc.returncode == 0 and proc.stdout.strip():
            pythons["torch-venv"] = proc.stdout.strip().splitlines()[-1]
        else:
            print("  (no venv torch: " + proc.stderr.strip()[-300:] + ")")
    pythons["torch-debian"] = "/usr/bin/python3"
    return pythons


def run_torch_side(python, args, events):
    """run_torch in `python` (another interpreter, another torch), one JSON line back."""
    cmd = [python, os.path.abspath(__file__), "--torch-side", events] + [
        f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
        if k not in ("torch_side", "no_venv", "build", "repeats") and v is not None]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{python} failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=default_build_dir())
    p.add_argument("--users", type=int, default=3000)
    p.add_argument("--items", type=int, default=5000)
    p.add_argument("--min-len", type=int, default=5)
    p.add_argument("--max-events", type=int, default=120)
    p.add_argument("--max-len", type=int, default=50)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--sparse-lr", type=float, default=0.05)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--torch-threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-venv", action="store_true", help="only Debian's torch")
    p.add_argument("--torch-side", help=argparse.SUPPRESS)  # internal: run the PyTorch side on this event file
    args = p.parse_args()
    if args.torch_side:
        import torch
        res = run_torch(args, read_split(args.torch_side), args.items)
        res["version"] = torch.__version__
        print(json.dumps(res))
        return
    work = tempfile.mkdtemp(prefix="bench-sasrec-")
    events = os.path.join(work, "events.tsv")
    n = write_events(events, args.users, args.items, args.min_len, args.max_events, args.seed)
    pythons = torch_pythons(args)
    print(f"data: {args.users} users, {n} events, {args.items} items; L={args.max_len}, dim {args.dim}, "
          f"{args.blocks} blocks x {args.heads} heads, batch {args.batch}, {args.epochs} epochs; "
          f"PyTorch with {args.torch_threads} threads ({', '.join(pythons)}); "
          "strata 1 trainer + 1 producer + 1 server on the same 2 cores")
    sides = ["strata", *pythons]
    results = {side: [] for side in sides}
    for r in range(args.repeats):
        for side in sides if r % 2 == 0 else reversed(sides):
            res = run_strata(args, events, os.path.join(work, f"strata-{r}")) if side == "strata" else \
                run_torch_side(pythons[side], args, events)
            results[side].append(res)
            print(f"  run {r} {side:12s}: {res['seq_per_s']:9.1f} sequences/s, HR@10 {res['hr']:.4f}, "
                  f"NDCG@10 {res['ndcg']:.4f}, {res['cpu_per_seq_ms']:.3f} CPU-ms/sequence"
                  + (f" (by role {json.dumps({k: round(v, 3) for k, v in res['cpu_by_role_ms'].items()})})"
                     if side == "strata" else ""))
    med = {side: {k: statistics.median(x[k] for x in rs) for k in ("seq_per_s", "hr", "ndcg", "cpu_per_seq_ms")}
           for side, rs in results.items()}
    for side in sides:
        m = med[side]
        version = f" (torch {results[side][0]['version']})" if side != "strata" else ""
        print(f"median {side:12s}: {m['seq_per_s']:.1f} sequences/s, HR@10 {m['hr']:.4f}, NDCG@10 {m['ndcg']:.4f}, "
              f"{m['cpu_per_seq_ms']:.3f} CPU-ms/sequence{version}")
    best = max(pythons, key=lambda side: med[side]["seq_per_s"])  # the strongest peer
    print(f"ratio sasrec sequences/s strata/{best}: {med['strata']['seq_per_s'] / med[best]['seq_per_s']:.3f}")
    print(f"ratio sasrec HR@10 strata-{best}: {med['strata']['hr'] - med[best]['hr']:+.4f}")
    print(f"ratio sasrec NDCG@10 strata-{best}: {med['strata']['ndcg'] - med[best]['ndcg']:+.4f}")


if __name__ == "__main__":
    main()
