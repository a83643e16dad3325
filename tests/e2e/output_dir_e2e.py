#!/usr/bin/env python3
"""End-to-end tests of output.dir (issue 15): a new `strata train` or `strata tune`
refuses a folder that holds an earlier run's outputs (exit 2, one message naming
the folder and the fixes, nothing on disk changed); --output.overwrite=true
replaces them; a resumed run continues in its own folder. Real mpirun jobs of the
strata binary on tests/e2e/tiny.ini (3 ranks); run by ctest (tests/e2e/CMakeLists.txt).

usage: output_dir_e2e.py CASE --strata BIN --mpiexec MPIEXEC --workdir DIR
"""
import csv
import hashlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from strata_e2e import TINY, run_case_from_command_line  # noqa: E402

BAD_INPUT = 2  # README: a bad command line, deck or input is exit code 2


def snapshot(directory):
    """{relative path: sha256} of every file under directory (the folders too, as None)."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), directory) + "/"] = None
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return found


def strata(r, command, out, *options, ranks=3):
    cmd = [r.mpiexec, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [r.strata, command, "--config", TINY, "--output.dir=" + out, *options]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def ok(proc, what):
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"


def summary(out):
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def metric_steps(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line)["step"] for line in f]


def expect_refused(proc, out, what, names):
    """Exit 2, the error once (from one rank), naming the folder, what it holds and both fixes."""
    text = proc.stdout + proc.stderr
    assert proc.returncode == BAD_INPUT, f"{what}: exit {proc.returncode}, expected {BAD_INPUT}\n{text[-3000:]}"
    assert text.count("strata: error:") == 1, f"{what}: expected one error message\n{text[-3000:]}"
    for needle in [f"output.dir '{out}'", "--output.overwrite=true", "new output.dir", *names]:
        assert needle in text, f"{what}: message lacks '{needle}':\n{text[-3000:]}"
    assert "MPI_ABORT" not in text and "ORTE_ERROR_LOG" not in text, text[-3000:]
    print(f"{what}: exit {proc.returncode}: {text[text.index('strata: error:'):].splitlines()[0]}")


def case_train_twice(r):
    """A second train into the same folder is refused and changes nothing; an empty or
    missing folder is fine; --output.overwrite=true replaces the earlier run."""
    out = os.path.join(r.workdir, "run")
    os.makedirs(out)  # an empty folder is not an earlier run
    ok(strata(r, "train", out), "first run into an empty folder")
    first = summary(out)
    before = snapshot(r.workdir)
    ckpt = os.path.join(r.workdir, "ckpt")
    refused = strata(r, "train", out, "--train.seed=2", "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=20")
    expect_refused(refused, out, "train twice", ["metrics.jsonl", "summary.json"])
    assert snapshot(r.workdir) == before, "a refused run changed files on disk"
    # Also when only one of the outputs is left (a run killed before its summary).
    os.remove(os.path.join(out, "summary.json"))
    before = snapshot(r.workdir)
    expect_refused(strata(r, "train", out), out, "metrics.jsonl alone", ["metrics.jsonl"])
    assert snapshot(r.workdir) == before
    # strata trace writes the same outputs and follows the same rule.
    trace = os.path.join(r.workdir, "run.trace")
    expect_refused(strata(r, "trace", out, "--output.trace=" + trace), out, "trace into it", ["metrics.jsonl"])
    assert not os.path.exists(trace)
    # Replaced on request: the old files go, the new run's are there.
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("the user's own file\n")
    ok(strata(r, "train", out, "--train.seed=2", "--train.steps=40", "--output.overwrite=true"), "overwrite")
    second = summary(out)
    assert second["steps"] == 40 and second["params_digest"] != first["params_digest"], second
    assert metric_steps(out) == [20, 40], metric_steps(out)
    assert open(os.path.join(out, "notes.txt")).read() == "the user's own file\n", "overwrite removed a foreign file"
    # A folder that is a file is a clear error too.
    not_dir = os.path.join(r.workdir, "a_file")
    open(not_dir, "w").close()
    proc = strata(r, "train", not_dir)
    assert proc.returncode == BAD_INPUT and "is not a directory" in proc.stderr, proc.stderr[-2000:]
    print("train: refused twice without change, overwrite replaced the run, digest", second["params_digest"][:16])


TUNE = ["--tune.plugin=grid", "--tune.space_l1_mb=1", "--tune.space_l2_mb=1", "--tune.space_prefetch_depth=1|2",
        "--tune.space_policy=lru", "--tune.trials=10", "--tune.trial_steps=10", "--tune.warmup_steps=2"]


def trial_rows(out):
    with open(os.path.join(out, "trials.csv")) as f:
        return list(csv.DictReader(f))


def case_tune_twice(r):
    """A second grid search into the same folder is refused (no second trial 0 in
    trials.csv, trial-00000/ untouched); --output.overwrite=true starts it afresh."""
    out = os.path.join(r.workdir, "tune")
    ok(strata(r, "tune", out, *TUNE), "first tune")
    rows = trial_rows(out)
    assert [x["trial"] for x in rows] == ["0", "1"] and all(x["state"] == "complete" for x in rows), rows
    assert os.path.exists(os.path.join(out, "trial-00000", "summary.json"))
    before = snapshot(r.workdir)
    expect_refused(strata(r, "tune", out, *TUNE), out, "tune twice", ["trials.csv", "trial-00000/"])
    assert snapshot(r.workdir) == before, "a refused tune changed files on disk"
    # A train into the tune's folder is refused as well.
    expect_refused(strata(r, "train", out), out, "train into a tune folder", ["trials.csv"])
    assert snapshot(r.workdir) == before
    ok(strata(r, "tune", out, *TUNE, "--output.overwrite=true"), "tune with overwrite")
    rows = trial_rows(out)
    assert [x["trial"] for x in rows] == ["0", "1"], rows
    with open(os.path.join(out, "best.ini")) as f:
        assert "overwrite = false" in f.read(), "best.ini must not carry output.overwrite = true"
    print("tune: refused twice without change; overwrite gave one trial 0 and one trial 1")


def case_resume_continues(r):
    """A resumed run continues in its own folder: --resume=latest after a stop at
    step 40, and --resume=auto (a requeue) with no checkpoint yet."""
    out = os.path.join(r.workdir, "run")
    ckpt = os.path.join(r.workdir, "ckpt")
    whole = os.path.join(r.workdir, "whole")
    ok(strata(r, "train", whole), "uninterrupted run")
    ok(strata(r, "train", out, "--train.steps=40", "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=20"),
       "first part")
    ok(strata(r, "train", out, "--checkpoint.dir=" + ckpt, "--resume=latest"), "resumed into its own folder")
    s = summary(out)
    assert s["steps"] == 60 and s["checkpoints"]["resumed_from_step"] == 40, s
    assert s["params_digest"] == summary(whole)["params_digest"], "the resumed run trained other numbers"
    assert metric_steps(out)[-1] == 60, metric_steps(out)
    # A requeued job (checkpoint.resume = auto, as slurm/train.sbatch) stopped before its
    # first checkpoint finds only metrics.jsonl: it starts again in the same folder.
    requeued = os.path.join(r.workdir, "requeued")
    ok(strata(r, "train", requeued, "--train.steps=20"), "requeued, first attempt")
    os.remove(os.path.join(requeued, "summary.json"))
    ok(strata(r, "train", requeued, "--checkpoint.dir=" + os.path.join(r.workdir, "ckpt_auto"),
              "--checkpoint.resume=auto"), "requeued with resume=auto")
    assert summary(requeued)["steps"] == 60
    print("resume: continued to step 60 in its own folder, digest as uninterrupted; resume=auto restarted")


if __name__ == "__main__":
    run_case_from_command_line({name[5:]: fn for name, fn in globals().items() if name.startswith("case_")})
