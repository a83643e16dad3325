#!/usr/bin/env python3
"""strata report: renders a run's metrics.jsonl as PNG plots (called by `strata report --run DIR`).

Writes into DIR: throughput.png (samples/s and loss per step), hit_rate.png (window hit
rate per cache level, tiered runs) and bytes.png (cumulative bytes per link).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        sys.exit(f"strata report: error: {path} does not exist (is {run_dir} a strata output.dir?)")
    lines = []
    with open(path) as f:
        for number, text in enumerate(f, 1):
            text = text.strip()
            if not text:
                continue
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError as e:
                sys.exit(f"strata report: error: {path}:{number}: not JSON ({e})")
    if not lines:
        sys.exit(f"strata report: error: {path} has no metrics lines")
    summary = {}
    summary_path = os.path.join(run_dir, "summary.json")
    if os.path.isfile(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    return lines, summary


def title(summary, what):
    mode = summary.get("mode", "?")
    links = summary.get("link_model", "off")
    return f"{what} — store {mode}" + ("" if links == "off" else f" (link model: {links})")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", required=True, help="the run's output.dir")
    args = parser.parse_args()
    lines, summary = load(args.run)
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
    written.append(os.path.join(args.run, "throughput.png"))
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
        written.append(os.path.join(args.run, "hit_rate.png"))
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
    written.append(os.path.join(args.run, "bytes.png"))
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    for path in written:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
