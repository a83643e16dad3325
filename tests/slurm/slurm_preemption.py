#!/usr/bin/env python3
"""The Slurm path of preemption, against a real Slurm: starts a private
single-node Slurm (munged, slurmctld, slurmd from Debian's slurm-wlm and munge;
config, state and logs under WORKDIR), submits slurm/train.sbatch with sbatch,
preempts it with `scancel --signal=USR1 --batch` once it has checkpointed,
checks that it checkpointed, requeued itself and finished with the digest of an
uninterrupted run, then stops the daemons by PID.

Installs nothing. Where Slurm cannot start here it exits 77 (a ctest skip) and
says why; it never reports a pass it did not earn.

usage: slurm_preemption.py --strata BIN --mpiexec MPIEXEC --workdir DIR --source REPO
"""
import glob
import json
import os
import shutil
import time

from private_slurm import PrivateSlurm, run, test_arguments


def main():
    args = test_arguments("--mpiexec")
    deck = os.path.join(args.source, "tests", "e2e", "tiny.ini")
    options = ["--layout.trainers=2", "--train.steps=150", "--links.network_gbps=1",
               "--links.network_latency_us=3000", "--output.metrics_every=50"]

    # The uninterrupted reference, with plain mpirun.
    reference_dir = os.path.join(args.workdir, "reference")
    cmd = [args.mpiexec, "-n", "4", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    run(cmd + [args.strata, "train", "--config", deck, "--output.dir=" + reference_dir, *options], timeout=600)
    reference = json.load(open(os.path.join(reference_dir, "summary.json")))

    with PrivateSlurm(args.workdir) as slurm:
        run_dir = os.path.join(args.workdir, "slurm-run")
        shutil.rmtree(run_dir, ignore_errors=True)
        env = dict(slurm.env, STRATA_BIN=args.strata, STRATA_DECK=deck, STRATA_RUN_DIR=run_dir)
        out = run(["sbatch", "--parsable", f"--chdir={args.source}",
                   f"--output={args.workdir}/slurm-%j.out", os.path.join(args.source, "slurm", "train.sbatch"),
                   *options, "--checkpoint.every_steps=20"], env=env).stdout.strip()
        job = int(out.split(";")[0])
        checkpoints = os.path.join(run_dir, "checkpoints")
        deadline = time.time() + 300
        while not glob.glob(os.path.join(checkpoints, "ckpt-*.h5")):
            if time.time() > deadline:
                raise AssertionError("no checkpoint before the preemption\n" + slurm.log_tail())
            state = slurm.job_field(job, "JobState")
            if state in ("COMPLETED", "FAILED", "CANCELLED"):
                raise AssertionError(f"job ended ({state}) before its first checkpoint\n" + slurm.log_tail())
            time.sleep(0.1)
        run(["scancel", "--signal=USR1", "--batch", str(job)], env=env)
        # The job checkpoints, exits 85, requeues itself, and the requeued run finishes.
        deadline = time.time() + 600
        nudged = False
        pending_since = None
        while True:
            state = slurm.job_field(job, "JobState")
            restarts = int(slurm.job_field(job, "Restarts") or 0)
            if state == "COMPLETED" and restarts >= 1:
                break
            if state == "PENDING" and restarts >= 1 and not nudged:
                # Slurm holds a requeued job back for a while (BeginTime) so that the old
                # batch step can finish tearing down; a test need not wait two minutes, but
                # it leaves that teardown a few seconds (released too early, slurmd refuses
                # the launch with "already killed").
                pending_since = pending_since or time.time()
                if time.time() - pending_since > 8:
                    run(["scontrol", "update", f"JobId={job}", "StartTime=now"], env=env, check=False)
                    nudged = True
            if state in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") or time.time() > deadline:
                log = "".join(open(p).read() for p in glob.glob(os.path.join(args.workdir, f"slurm-{job}.out")))
                raise AssertionError(f"job {job} ended {state} after {restarts} restarts\n{log[-4000:]}"
                                     + slurm.log_tail())
            time.sleep(0.2)
        log = open(os.path.join(args.workdir, f"slurm-{job}.out")).read()
        assert "requeueing" in log, log[-3000:]
        summary = json.load(open(os.path.join(run_dir, "summary.json")))
        assert summary["checkpoints"]["resumed_from_step"] > 0, summary["checkpoints"]
        assert summary["params_digest"] == reference["params_digest"], (summary["params_digest"],
                                                                        reference["params_digest"])
        print(f"job {job}: preempted, resumed from step {summary['checkpoints']['resumed_from_step']}, "
              f"finished with the uninterrupted digest {reference['params_digest'][:16]}")


if __name__ == "__main__":
    main()
