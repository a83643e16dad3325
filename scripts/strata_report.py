#!/usr/bin/env python3
"""strata report: renders a run's metrics.jsonl as PNG plots (called by `strata report --run DIR`).

Writes into DIR: throughput.png (samples/s and loss per step), hit_rate.png (window hit
rate per cache level, tiered runs) and bytes.png (cumulative bytes per link). When DIR
holds a trials.csv (written by `strata tune`), also tuning.png: the objective of every
trial and the best-so-far curve, with pruned and failed trials marked.
"""
import argparse
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402



def fail(message):
    """A bad input: one line on stderr and exit code 2, as strata's other commands."""
    print(message, file=sys.stderr)
    sys.exit(2)

def load(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        fail(f"strata report: error: {path} does not exist (is {run_dir} a strata output.dir?)")
    lines = []
    with open(path, "rb") as f:  # bytes: a damaged or binary file must be an error, not a traceback
        for number, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                fail(f"strata report: error: {path}:{number}: not UTF-8 text (a damaged or binary file?); "
                         "fix: point --run at a strata output.dir, or rerun the job to rewrite metrics.jsonl")
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as e:
                fail(f"strata report: error: {path}:{number}: not JSON ({e})")
            if not isinstance(record, dict):
                fail(f"strata report: error: {path}:{number}: a metrics line must be a JSON object")
            lines.append(record)
    if not lines:
        fail(f"strata report: error: {path} has no metrics lines")
    summary = {}
    summary_path = os.path.join(run_dir, "summary.json")
    if os.path.isfile(summary_path):
        try:
            with open(summary_path, "rb") as f:
                summary = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            fail(f"strata report: error: {summary_path} is not a JSON summary ({e}); "
                     "fix: rerun the job, or remove the damaged file")
        if not isinstance(summary, dict):
            fail(f"strata report: error: {summary_path} is not a JSON object")
    return lines, summary


def title(summary, what):
    mode = summary.get("mode", "?")
    links = summary.get("link_model", "off")
    return f"{what} — store {mode}" + ("" if links == "off" else f" (link model: {links})")


def render_metrics(run):
    """throughput.png, hit_rate.png and bytes.png from metrics.jsonl; returns the paths written."""
    lines, summary = load(run)
    steps = [m["step"] for m in lines]
    written = []

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(steps, [m["samples_per_s"] for m in lines], color="tab:blue")
    ax.set_xlabel("step")
    ax.set_ylabel("samples/s", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(steps, [m["loss"] for m in lines], color="tab:red")
    ax2.set_ylabel("train loss", color="tab:red")
    ax.set_title(title(summary, "throughput and loss"))
    fig.tight_layout()
    written.append(os.path.join(run, "throughput.png"))
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)

    if "levels" in lines[0]:
        fig, ax = plt.subplots(figsize=(8, 4))
        for level in ("l1", "l2"):
            ax.plot(steps, [m["levels"][f"{level}_hit_rate_window"] for m in lines], label=level.upper())
        ax.set_ylim(0, 1)
        ax.set_xlabel("step")
        ax.set_ylabel("hit rate (unique keys per window)")
        ax.legend()
        ax.set_title(title(summary, "hit rate per level"))
        fig.tight_layout()
        written.append(os.path.join(run, "hit_rate.png"))
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    links = {f"{name} (network)" if "server" in name else name: [m["bytes"][name] for m in lines]
             for name in lines[0]["bytes"]}
    if "levels" in lines[0]:
        for name, label in (("bytes_l3_to_l2", "L3->L2 (network)"), ("bytes_l2_to_l3", "L2->L3 (network)"),
                            ("bytes_l2_to_l1", "L2->L1 (host-to-device)"), ("bytes_l1_to_l2", "L1->L2"),
                            ("bytes_all_to_all", "trainer all-to-all")):
            links[label] = [m["levels"][name] for m in lines]
    for label, values in links.items():
        if any(values):
            ax.plot(steps, [v / 1e6 for v in values], label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("MB (cumulative)")
    ax.legend(fontsize=8)
    ax.set_title(title(summary, "bytes per link"))
    fig.tight_layout()
    written.append(os.path.join(run, "bytes.png"))
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    return written


def load_trials(path):
    """trials.csv rows as dicts, plus the objective's column name (the fifth column from the end)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        fail(f"strata report: error: {path} is not a strata trials.csv ({e})")
    tail = ["direction", "state", "reason", "seconds"]
    if not rows or len(rows[0]) < 6 or rows[0][-4:] != tail:
        fail(f"strata report: error: {path} is not a strata trials.csv "
                 f"(its header must end with <objective>,{','.join(tail)})")
    header = rows[0]
    trials = [dict(zip(header, row)) for row in rows[1:] if len(row) == len(header) and row != header]
    return trials, header[-5]


def render_tuning(run):
    """tuning.png: objective per trial (in the order they finished) and the best so far."""
    path = os.path.join(run, "trials.csv")
    trials, objective = load_trials(path)
    maximize = not trials or trials[0]["direction"] != "minimize"
    better = (lambda a, b: a > b) if maximize else (lambda a, b: a < b)
    done_x, done_y, best_x, best_y = [], [], [], []
    marks = {"pruned": [], "failed": []}
    best = None
    for index, trial in enumerate(trials, 1):
        if trial["state"] == "complete":
            value = float(trial[objective])
            done_x.append(index)
            done_y.append(value)
            if best is None or better(value, best[0]):
                best = (value, trial["trial"])
        elif trial["state"] in marks:
            marks[trial["state"]].append(index)
        if best is not None:
            best_x.append(index)
            best_y.append(best[0])

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.scatter(done_x, done_y, s=18, color="tab:blue", label=f"{objective} (complete)")
    ax.step(best_x, best_y, where="post", color="tab:green", label="best so far")
    low = min(done_y) if done_y else 0
    for state, color, shape in (("pruned", "tab:orange", "v"), ("failed", "tab:red", "x")):
        if marks[state]:
            ax.scatter(marks[state], [low] * len(marks[state]), color=color, marker=shape,
                       label=f"{state} ({len(marks[state])})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial, in the order they finished")
    ax.set_ylabel(objective)
    summary = f"best {best[0]:.6g} at trial {best[1]}" if best else "no complete trial"
    ax.set_title(f"tuning: {len(trials)} trials, {'maximize' if maximize else 'minimize'} {objective}, {summary}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = os.path.join(run, "tuning.png")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", required=True, help="the run's output.dir")
    args = parser.parse_args()
    has_metrics = os.path.isfile(os.path.join(args.run, "metrics.jsonl"))
    has_trials = os.path.isfile(os.path.join(args.run, "trials.csv"))
    written = []
    # A tuning folder may hold only trials.csv; any other folder needs metrics.jsonl.
    if has_metrics or not has_trials:
        written += render_metrics(args.run)
    if has_trials:
        written.append(render_tuning(args.run))
    for path in written:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
