#!/usr/bin/env python3
"""End-to-end tests of the stall watchdog (runtime.stall_timeout_s): a rank
stopped with SIGSTOP (as a hung file system read or a dead GPU would leave it)
ends the job with exit code 86 in bounded time, the ranks still running naming
the rank and the phase they wait for; a healthy run with a short timeout, idle
ranks and checkpoints in it, is not stopped and trains the same numbers.

usage: stall_e2e.py CASE --strata BIN --mpiexec MPIEXEC --workdir DIR
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from strata_e2e import run_case_from_command_line  # noqa: E402
from checkpoint_e2e import SLOW, rank_pids, start_job  # noqa: E402

SLOW_LINKS = [o for o in SLOW if not o.startswith("--train.steps")]  # a modelled network: steps of milliseconds

STALLED = 86  # common/exit_codes.hpp
TIMEOUT_S = 5
BOUND_S = 60  # the job must end this soon after the stop


def stall_lines(text):
    return [line for line in text.splitlines() if line.startswith("strata: stalled: ")]


def stop_rank(r, name, world_rank, *options):
    """SIGSTOP one rank of a running job; returns the output, each rank's stall line and the seconds to the end."""
    job = start_job(r, name, 4, "--layout.trainers=2", *SLOW_LINKS, "--train.steps=1000000",
                    f"--runtime.stall_timeout_s={TIMEOUT_S}", *options)
    victim = None
    try:
        metrics = os.path.join(r.workdir, name, "metrics.jsonl")
        deadline = time.time() + 60
        while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):  # step 20: training has begun
            assert job.poll() is None and time.time() < deadline, "the job did not start training"
            time.sleep(0.05)
        time.sleep(0.5)
        pids = rank_pids(job, world_rank)
        assert len(pids) == 1, f"rank {world_rank}: pids {pids}"
        victim = pids[0]
        os.kill(victim, signal.SIGSTOP)
        stopped = time.time()
        try:
            out, _ = job.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name}: the job still ran {BOUND_S} s after rank {world_rank} stopped")
        took = time.time() - stopped
    finally:
        if victim is not None:  # mpirun ends it; never leave a stopped process behind
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(victim, sig)
                except ProcessLookupError:
                    pass
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert job.returncode == STALLED, f"{name}: exit {job.returncode}, expected {STALLED}\n{out[-4000:]}"
    lines = stall_lines(out)
    assert lines, f"{name}: no stall report\n{out[-4000:]}"
    for line in lines:
        assert f"runtime.stall_timeout_s = {TIMEOUT_S}" in line and "exit code 86" in line, line
    assert sum("fix: " in line for line in out.splitlines()) <= 1, out[-4000:]
    print(f"{name}: exit 86 {took:.1f} s after the stop; {len(lines)} rank(s) reported:")
    for line in lines:
        print("  " + line)
    return lines, took


def reported_by(lines, reporters, needle):
    """A stall line from one of `reporters` (e.g. 'trainer 0 (rank 0)') that names `needle`."""
    return [l for l in lines if any(l.startswith(f"strata: stalled: {who} ") for who in reporters) and needle in l]


def case_stopped_trainer(r):
    lines, _ = stop_rank(r, "trainer", 1)
    assert reported_by(lines, ["trainer 0 (rank 0)"], "trainer 1 (rank 1)"), lines
    assert re.search(r"in step \d+", " ".join(lines)), lines


def case_stopped_producer(r):
    lines, _ = stop_rank(r, "producer", 2)
    assert reported_by(lines, ["trainer 0 (rank 0)", "trainer 1 (rank 1)"],
                       "its next batch from producer 0 (rank 2)"), lines


def case_stopped_server(r):
    # ps: every step pulls rows from the server (tiered trainers may not need it for a while).
    lines, _ = stop_rank(r, "server", 3, "--store.mode=ps")
    assert reported_by(lines, ["trainer 0 (rank 0)", "trainer 1 (rank 1)"], "server 0 (rank 3)"), lines


def case_no_false_alarm(r):
    """A short timeout (3 s) over a run several times longer, with an idle server (tiered:
    the caches hold every row), checkpoints that take about as long as the timeout, and
    evaluation: no stall, and the same numbers as without the watchdog. The key may
    differ on resume; a negative value is refused."""
    timeout = 3
    common = ["--layout.trainers=2", *SLOW_LINKS, "--train.steps=9000", "--checkpoint.every_steps=3000"]
    start = time.time()
    watched = r.run("watched", 4, *common, f"--runtime.stall_timeout_s={timeout}",
                    "--checkpoint.dir=" + os.path.join(r.workdir, "ckpt_watched"))
    took = time.time() - start
    plain = r.run("plain", 4, *common, "--runtime.stall_timeout_s=0",
                  "--checkpoint.dir=" + os.path.join(r.workdir, "ckpt_plain"))
    assert watched["params_digest"] == plain["params_digest"], "the watchdog changed the numbers"
    assert watched["steps"] == 9000 and watched["checkpoints"]["written"] == 3, watched["checkpoints"]
    assert took > 3 * timeout, f"the run took {took:.1f} s: too short to test a {timeout} s timeout"
    # The key may differ on resume (it changes no numbers); a negative one is bad input.
    resumed = r.run("resumed", 4, *common, "--runtime.stall_timeout_s=7",
                    "--checkpoint.dir=" + os.path.join(r.workdir, "ckpt_plain"),
                    "--resume=" + os.path.join(r.workdir, "ckpt_plain", "ckpt-0000006000.h5"))
    assert resumed["params_digest"] == plain["params_digest"], "resumed with another stall timeout: digest differs"
    proc = r.run("negative", 4, "--layout.trainers=2", "--runtime.stall_timeout_s=-1", expect_ok=False)
    assert proc.returncode == 2 and "runtime.stall_timeout_s" in proc.stdout + proc.stderr, \
        (proc.returncode, proc.stdout + proc.stderr)
    print(f"{took:.1f} s with runtime.stall_timeout_s = {timeout}: no stall, digest {watched['params_digest'][:16]} "
          "as without the watchdog")


if __name__ == "__main__":
    run_case_from_command_line({name[5:]: fn for name, fn in globals().items() if name.startswith("case_")})
