#!/usr/bin/env python3
"""SASRec: strata (model.kind = sasrec, jagged batches, the tiered store) against a
PyTorch SASRec (the architecture of Kang & McAuley 2018 as pmixer/SASRec.pytorch ports
it: left-padded batches of max_len, nn.MultiheadAttention with a causal mask,
pointwise FFN, BCE on one negative per position) on the same event file, split, model
size, batch and epochs. Both evaluate HR@10 / NDCG@10 of each user's validation event
against 100 items the user never had.

The PyTorch side trains what strata trains, so that the quality columns compare the
engines and not two recipes (docs/PERFORMANCE.md lists what differed before):
- the data: each user's most recent max_len events (strata's data.max_seq_len cuts
  the corpus before the split), negatives drawn from the items that occur, never the
  user's own (train and evaluation), one per position, drawn afresh every epoch, and
  the users in a new shuffled order every epoch (as strata's next-item training);
- the network: right-padded batches, so that the causal mask keeps padding out of
  every real token's attention (strata's batches are jagged: a token attends only to
  its own user's earlier tokens), positions counted back from the latest event, no
  dropout, LayerNorm eps 1e-6;
- the item rows: one per item, read as input by the history and as output by the
  candidates (strata's model.tie_item_rows, as the port; `--untied` gives both sides
  two rows per item), uniform in [-0.05, 0.05] (model.row_init_scale); Glorot-uniform
  weights and positions, zero biases;
- the optimizers: Adam (beta2 0.999, eps 1e-8) on the dense weights and element-wise
  Adagrad (lr --sparse-lr, eps 1e-8, accumulators from 0) on the item rows, as strata's
  optim.dense = adam and optim.sparse = adagrad (Adagrad does not move a row whose
  gradient is zero, so the dense torch Adagrad equals strata's sparse one).
`--torch-recipe pmixer` instead runs the port's own recipe (N(0, 1) item rows, Adam on
everything, attention over padding, negatives from every id) for reference.

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


def run_strata(args, events, out_dir, seed=None):
    cmd = mpirun(3) + [os.path.join(args.build, "bin", "strata"), "train", "--config",
                       os.path.join(ROOT, "inputs", "sasrec.ini"),
                       "--layout.trainers=1", "--layout.producers=1", "--layout.servers=1",
                       "--data.source=sequences", "--data.train=" + events, "--data.sequence_task=next_item",
                       f"--data.max_seq_len={args.max_len}", f"--model.sasrec_max_len={args.max_len}",
                       f"--model.embedding_dim={args.dim}", f"--model.sasrec_blocks={args.blocks}",
                       f"--model.sasrec_heads={args.heads}", f"--train.batch_size={args.batch}",
                       "--train.steps=0", f"--train.epochs={args.epochs}", "--train.eval_batch_size=256",
                       "--optim.dense=adam", f"--optim.dense_lr={args.lr}", "--optim.sparse=adagrad",
                       f"--optim.sparse_lr={args.sparse_lr}", "--optim.beta1=0.9", "--optim.beta2=0.999",
                       "--optim.eps=1e-8", "--optim.adagrad_init=0", f"--model.row_init_scale={args.row_init_scale}",
                       "--data.sequence_eval=validation", "--data.sequence_eval_negatives=100",
                       "--output.dir=" + out_dir, "--output.overwrite=true",
                       "--output.progress_every=1000000"]
    if args.untied:
        cmd.append("--model.tie_item_rows=false")
    if seed is not None:  # another model: initial values, user order and negatives
        cmd += [f"--train.seed={seed}", f"--data.data_seed={seed}"]
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

    seed = args.seed if args.torch_seed is None else args.torch_seed
    torch.manual_seed(seed)
    torch.set_num_threads(int(args.torch_threads))
    L, d = args.max_len, args.dim
    strata_recipe = args.torch_recipe == "strata"

    def glorot_(weight, fan_in, fan_out):
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        with torch.no_grad():
            weight.uniform_(-limit, limit)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d, eps=1e-6)
            self.attn = nn.MultiheadAttention(d, args.heads, batch_first=True)
            self.ln2 = nn.LayerNorm(d, eps=1e-6)
            self.ffn = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
            if strata_recipe:  # strata's Linear: Glorot-uniform per d x d matrix, zero bias
                for k in range(3):
                    glorot_(self.attn.in_proj_weight[k * d:(k + 1) * d], d, d)
                nn.init.zeros_(self.attn.in_proj_bias)
                for lin in (self.attn.out_proj, self.ffn[0], self.ffn[2]):
                    glorot_(lin.weight, d, d)
                    nn.init.zeros_(lin.bias)

        def forward(self, x, mask, pad):
            q = self.ln1(x)
            a, _ = self.attn(q, q, q, attn_mask=mask, need_weights=False)
            x = x + a
            x = x + self.ffn(self.ln2(x))
            return x * pad

    class SASRec(nn.Module):
        def __init__(self):
            super().__init__()
            self.item = nn.Embedding(num_items + 1, d, padding_idx=0)  # input rows
            # Output rows: the input rows (tied, strata's default and the port's), or
            # with --untied a second table (strata's model.tie_item_rows = false).
            untied = strata_recipe and args.untied
            self.out = nn.Embedding(num_items + 1, d, padding_idx=0) if untied else self.item
            self.pos = nn.Embedding(L, d)
            self.blocks = nn.ModuleList(Block() for _ in range(args.blocks))
            self.ln = nn.LayerNorm(d, eps=1e-6)
            self.register_buffer("causal", torch.triu(torch.ones(L, L, dtype=torch.bool), 1))
            if strata_recipe:
                with torch.no_grad():
                    for table in {id(t): t for t in (self.item, self.out)}.values():
                        table.weight.uniform_(-args.row_init_scale, args.row_init_scale)
                        table.weight[0].zero_()
                glorot_(self.pos.weight, L, d)

        def states(self, seq, positions):
            """seq (B, L) item ids, 0 = padding; positions (B, L) rows of pos."""
            pad = (seq > 0).unsqueeze(-1).float()
            x = self.item(seq) * math.sqrt(d) + self.pos(positions)
            x = x * pad
            for b in self.blocks:
                x = b(x, self.causal, pad)
            return self.ln(x)

    model = SASRec()
    if strata_recipe:  # optim.dense = adam, optim.sparse = adagrad
        dense = [p for n, p in model.named_parameters() if not n.startswith(("item.", "out."))]
        rows = list({id(w): w for w in (model.item.weight, model.out.weight)}.values())
        opts = [torch.optim.Adam(dense, lr=args.lr, betas=(0.9, 0.999), eps=1e-8),
                torch.optim.Adagrad(rows, lr=args.sparse_lr, eps=1e-8, initial_accumulator_value=0.0)]
    else:
        opts = [torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98))]
    rng = random.Random(seed)

    def padded(seqs):
        """(ids (B, L), positions (B, L), index of each row's last token (B)).
        strata: right-padded, so that the causal mask alone keeps every real token to
        its own user's earlier tokens (strata's jagged attention: no token sees
        padding), positions counted back from the latest event (strata's P[L_b-1-i]).
        pmixer: left-padded, absolute positions, padding attended as the port does."""
        ids, positions, last = [], [], []
        for s in seqs:
            s = s[-L:]
            n = len(s)
            if strata_recipe:
                ids.append(s + [0] * (L - n))
                positions.append([n - 1 - i for i in range(n)] + [0] * (L - n))
                last.append(max(n - 1, 0))
            else:
                ids.append([0] * (L - n) + s)
                positions.append(list(range(L)))
                last.append(L - 1)
        return torch.tensor(ids), torch.tensor(positions), torch.tensor(last)

    if strata_recipe:
        users = [u[-L:] for u in users]  # data.max_seq_len cuts the corpus before the split
    pool = sorted({i for u in users for i in u})  # items that occur
    seen = [set(u) for u in users]

    def negative(k):
        """An item user k never had, from the items that occur (32 tries, as strata)."""
        x = 0
        for _ in range(32):
            x = pool[rng.randrange(len(pool))] if strata_recipe else rng.randint(1, num_items)
            if x not in seen[k]:
                break
        return x

    train = [(k, u[:-2] if len(u) >= 3 else u) for k, u in enumerate(users)]
    train = [(k, t) for k, t in train if len(t) >= 2]
    order = list(range(len(train)))
    steps = 0
    start = time.time()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(args.epochs):
        rng.shuffle(order)  # a new user order and new negatives every epoch, as strata
        for at in range(0, len(order) - args.batch + 1, args.batch):  # full batches, as strata
            rows = [train[i] for i in order[at:at + args.batch]]
            seq, positions, _ = padded([t[:-1] for _, t in rows])
            pos = padded([t[1:] for _, t in rows])[0]
            neg = padded([[negative(k) for _ in t[1:]] for k, t in rows])[0]
            h = model.states(seq, positions)
            ps = (h * model.out(pos)).sum(-1)
            ns = (h * model.out(neg)).sum(-1)
            valid = pos > 0
            loss = (nn.functional.softplus(-ps)[valid].sum() + nn.functional.softplus(ns)[valid].sum()) / len(rows)
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
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
        evals = [k for k, u in enumerate(users) if len(u) >= 3]
        for at in range(0, len(evals), 256):
            chunk = evals[at:at + 256]
            seq, positions, last = padded([users[k][:-2] for k in chunk])
            cand = [[users[k][-2]] + [negative(k) for _ in range(100)] for k in chunk]
            h = model.states(seq, positions)[torch.arange(len(chunk)), last, :]
            scores = (h.unsqueeze(1) * model.out(torch.tensor(cand))).sum(-1)
            rank = (scores[:, 1:] >= scores[:, :1]).sum(1)
            for r in rank.tolist():
                n += 1
                if r < 10:
                    hits += 1
                    ndcg += 1 / math.log2(r + 2)
    return {"seq_per_s": sequences / train_s, "hr": hits / n, "ndcg": ndcg / n,
            "cpu_per_seq_ms": 1e3 * cpu / max(sequences, 1), "steps": steps, "version": torch.__version__}


def torch_pythons(args):
    """The PyTorch sides to compare, name -> (interpreter, threads): the venv of
    bench/fbgemm_venv.sh (a current PyTorch, made if missing unless --no-venv) and
    Debian's python3-torch (unless --no-debian), each with every --torch-threads count.
    With other work on the cores, two spinning OpenMP threads can lose to one."""
    pythons = {}
    if not args.no_venv:
        env = dict(os.environ, STRATA_BUILD_DIR=os.path.relpath(args.build, ROOT))
        proc = subprocess.run(["bash", os.path.join(ROOT, "bench", "fbgemm_venv.sh")], capture_output=True,
                              text=True, env=env)
        if proc.returncode == 0 and proc.stdout.strip():
            pythons["torch-venv"] = proc.stdout.strip().splitlines()[-1]
        else:
            print("  (no venv torch: " + proc.stderr.strip()[-300:] + ")")
    if not args.no_debian:
        pythons["torch-debian"] = "/usr/bin/python3"
    counts = [int(t) for t in str(args.torch_threads).split(",")]
    return {(f"{name}-t{t}" if len(counts) > 1 else name): (python, t)
            for name, python in pythons.items() for t in counts}


def run_torch_side(side, args, events, seed=None):
    """run_torch in side's interpreter (another torch) and thread count, one JSON line back."""
    python, threads = side
    cmd = [python, os.path.abspath(__file__), "--torch-side", events, f"--torch-threads={threads}"] + [
        f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
        if k not in ("torch_side", "no_venv", "no_debian", "build", "repeats", "torch_threads", "quality_seeds",
                     "torch_seed", "untied") and v is not None]
    if args.untied:
        cmd.append("--untied")
    if seed is not None:
        cmd.append(f"--torch-seed={seed}")
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
    p.add_argument("--row-init-scale", type=float, default=0.05, help="strata's model.row_init_scale")
    p.add_argument("--torch-recipe", choices=("strata", "pmixer"), default="strata",
                   help="strata: PyTorch trains what strata trains (default); pmixer: the port's own recipe")
    p.add_argument("--untied", action="store_true",
                   help="two rows per item on both sides (strata's model.tie_item_rows = false)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--torch-threads", default="2", help="PyTorch threads, or a list (1,2): one side per count")
    p.add_argument("--seed", type=int, default=7, help="the event file's seed (and PyTorch's, unless --torch-seed)")
    p.add_argument("--torch-seed", type=int, help=argparse.SUPPRESS)  # internal: PyTorch's model seed
    p.add_argument("--quality-seeds", type=int, default=0,
                   help="then train K more models per side (seeds 1..K: strata train.seed and data.data_seed, "
                        "PyTorch's torch seed) and compare mean HR@10 / NDCG@10 (one seed's difference is noise)")
    p.add_argument("--no-venv", action="store_true", help="only Debian's torch")
    p.add_argument("--no-debian", action="store_true", help="only the venv's torch")
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
          f"PyTorch sides {', '.join(pythons)} ({args.torch_recipe} recipe); "
          "strata 1 trainer + 1 producer + 1 server on the same 2 cores")
    sides = ["strata", *pythons]
    results = {side: [] for side in sides}
    for r in range(args.repeats):
        for side in sides if r % 2 == 0 else reversed(sides):
            res = run_strata(args, events, os.path.join(work, f"strata-{r}")) if side == "strata" else \
                run_torch_side(pythons[side], args, events)
            results[side].append(res)
            print(f"  run {r} {side:15s}: {res['seq_per_s']:9.1f} sequences/s, HR@10 {res['hr']:.4f}, "
                  f"NDCG@10 {res['ndcg']:.4f}, {res['cpu_per_seq_ms']:.3f} CPU-ms/sequence"
                  + (f" (by role {json.dumps({k: round(v, 3) for k, v in res['cpu_by_role_ms'].items()})})"
                     if side == "strata" else ""))
    med = {side: {k: statistics.median(x[k] for x in rs) for k in ("seq_per_s", "hr", "ndcg", "cpu_per_seq_ms")}
           for side, rs in results.items()}
    for side in sides:
        m = med[side]
        version = f" (torch {results[side][0]['version']})" if side != "strata" else ""
        print(f"median {side:15s}: {m['seq_per_s']:.1f} sequences/s, HR@10 {m['hr']:.4f}, NDCG@10 {m['ndcg']:.4f}, "
              f"{m['cpu_per_seq_ms']:.3f} CPU-ms/sequence{version}")
    best = max(pythons, key=lambda side: med[side]["seq_per_s"])  # the strongest peer
    quality = {side: {"hr": [med[side]["hr"]], "ndcg": [med[side]["ndcg"]]} for side in ("strata", best)}
    if args.quality_seeds > 0:
        for seed in range(1, args.quality_seeds + 1):
            for side in ("strata", best):
                res = run_strata(args, events, os.path.join(work, f"strata-seed{seed}"), seed) if side == "strata" \
                    else run_torch_side(pythons[side], args, events, seed)
                quality[side]["hr"].append(res["hr"])
                quality[side]["ndcg"].append(res["ndcg"])
                print(f"  seed {seed} {side:15s}: HR@10 {res['hr']:.4f}, NDCG@10 {res['ndcg']:.4f}")
        for side in ("strata", best):
            q = quality[side]
            print(f"over {len(q['hr'])} models {side:15s}: HR@10 {statistics.mean(q['hr']):.4f} "
                  f"(sd {statistics.stdev(q['hr']):.4f}), NDCG@10 {statistics.mean(q['ndcg']):.4f} "
                  f"(sd {statistics.stdev(q['ndcg']):.4f})")
    print(f"ratio sasrec sequences/s strata/{best}: {med['strata']['seq_per_s'] / med[best]['seq_per_s']:.3f}")
    for metric, name in (("hr", "HR@10"), ("ndcg", "NDCG@10")):
        a, b = quality["strata"][metric], quality[best][metric]
        diff = statistics.mean(a) - statistics.mean(b)
        models = len(a)
        se = math.sqrt(statistics.variance(a) / models + statistics.variance(b) / models) if models > 1 else 0.0
        print(f"ratio sasrec {name} strata-{best}: {diff:+.4f}" +
              (f" (mean of {models} models each, standard error {se:.4f})" if models > 1 else ""))


if __name__ == "__main__":
    main()
