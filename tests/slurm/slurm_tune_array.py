#!/usr/bin/env python3
"""slurm/tune_array.sbatch against a real Slurm: starts a private single-node
Slurm (private_slurm.py), submits the sweep as a two-task job array sharing one
Optuna journal study, waits for both tasks, and checks that each ran its
trials, that the study holds every trial exactly once with distinct numbers,
and that a best.ini was written. Then it submits the array script once more
(one task) and checks that the study continues: trial numbers go on from where
the first submission stopped.

Installs nothing. Where Slurm cannot start here it exits 77 (a ctest skip) and
says why.

usage: slurm_tune_array.py --strata BIN --workdir DIR --source REPO
"""
import csv
import glob
import os
import subprocess
import sys
import time

from private_slurm import PrivateSlurm, run, test_arguments

TRIALS_PER_TASK = 2


def wait_for_array(slurm, job, tasks, log_glob, timeout=600):
    """Waits until every task of array job `job` has left the queue; {task: final state}."""
    deadline = time.time() + timeout
    while True:
        queued = run(["squeue", "-h", "-j", str(job), "-o", "%i %T"], env=slurm.env, check=False).stdout.strip()
        if not queued:
            break
        if time.time() > deadline:
            logs = "".join(open(p).read()[-2000:] for p in glob.glob(log_glob))
            raise AssertionError(f"array job {job} still queued after {timeout} s:\n{queued}\n{logs}"
                                 + slurm.log_tail())
        time.sleep(0.5)
    # Finished jobs stay visible to scontrol for MinJobAge (300 s by default).
    return {task: slurm.job_field(f"{job}_{task}", "JobState") for task in range(tasks)}


def trial_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def study_trials(python, study):
    """(number, state) of every trial in the journal study, read with Optuna itself."""
    code = ("import optuna,sys\n"
            "s=optuna.load_study(study_name='strata',storage=optuna.storages.JournalStorage("
            "optuna.storages.JournalFileStorage(sys.argv[1])))\n"
            "print('\\n'.join(f'{t.number} {t.state.name}' for t in s.trials))\n")
    out = subprocess.run([python, "-c", code, study], capture_output=True, text=True, check=True).stdout
    return [(int(n), state) for n, state in (line.split() for line in out.splitlines() if line.strip())]


def submit(slurm, args, env, array, out_pattern):
    """sbatch of the array script from the work directory (its runs/ land there)."""
    cmd = ["sbatch", "--parsable", f"--array={array}", f"--chdir={args.workdir}", f"--output={out_pattern}",
           os.path.join(args.source, "slurm", "tune_array.sbatch"),
           "--layout.trainers=2", "--tune.space_l1_mb=0.2:1:log", "--tune.space_l2_mb=0.5",
           "--tune.space_prefetch_depth=1:3", "--tune.space_policy=lru|lookahead", "--tune.warmup_steps=5"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=args.workdir, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"sbatch failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return int(proc.stdout.strip().split(";")[0])


def main():
    args = test_arguments()
    study = os.path.join(args.workdir, "study.journal")
    deck = os.path.join(args.source, "tests", "e2e", "tiny.ini")

    with PrivateSlurm(args.workdir) as slurm:
        env = dict(slurm.env, STRATA_BIN=args.strata, STRATA_DECK=deck, STRATA_STUDY=study,
                   TRIALS=str(TRIALS_PER_TASK), TRIAL_STEPS="20")
        out_pattern = os.path.join(args.workdir, "tune-%A_%a.out")

        job = submit(slurm, args, env, "0-1", out_pattern)
        states = wait_for_array(slurm, job, 2, os.path.join(args.workdir, f"tune-{job}_*.out"))
        numbers = []
        for task in range(2):
            log_path = os.path.join(args.workdir, f"tune-{job}_{task}.out")
            log = open(log_path).read() if os.path.exists(log_path) else "(no log)"
            if states.get(task) not in (None, "COMPLETED"):
                raise AssertionError(f"task {task} of array job {job} ended {states[task]}:\n{log[-3000:]}"
                                     + slurm.log_tail())
            task_dir = os.path.join(args.workdir, f"runs/tune-{job}/task-{task}")
            trials_csv = os.path.join(task_dir, "trials.csv")
            assert os.path.exists(trials_csv), f"task {task} wrote no trials.csv:\n{log[-3000:]}"
            rows = trial_rows(trials_csv)
            assert len(rows) == TRIALS_PER_TASK, (task, rows)
            assert all(r["state"] == "complete" for r in rows), (task, rows)
            assert os.path.exists(os.path.join(task_dir, "best.ini")), f"task {task} wrote no best.ini"
            numbers += [int(r["trial"]) for r in rows]
        assert sorted(numbers) == list(range(2 * TRIALS_PER_TASK)), f"trial numbers {sorted(numbers)}"
        in_study = study_trials(sys.executable, study)
        assert sorted(n for n, _ in in_study) == list(range(2 * TRIALS_PER_TASK)), in_study
        assert all(state == "COMPLETE" for _, state in in_study), in_study

        # A second submission continues the same study.
        again = submit(slurm, args, env, "0", out_pattern)
        wait_for_array(slurm, again, 1, os.path.join(args.workdir, f"tune-{again}_*.out"))
        rows = trial_rows(os.path.join(args.workdir, f"runs/tune-{again}/task-0/trials.csv"))
        continued = sorted(int(r["trial"]) for r in rows)
        first_new = 2 * TRIALS_PER_TASK
        assert continued == list(range(first_new, first_new + TRIALS_PER_TASK)), continued
        assert len(study_trials(sys.executable, study)) == 3 * TRIALS_PER_TASK
        print(f"array job {job}: 2 tasks, trials {sorted(numbers)} in one study; "
              f"job {again} continued it with trials {continued}")


if __name__ == "__main__":
    main()
