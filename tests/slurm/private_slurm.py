"""A private single-node Slurm for tests: munged, slurmctld and slurmd from
Debian's slurm-wlm and munge, with config, state and logs under a work
directory, stopped by PID. Installs nothing; where Slurm cannot start here,
skip() exits 77 (a ctest skip) and says why."""
import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

SKIP = 77


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def run(cmd, env=None, check=True, timeout=60):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc


class PrivateSlurm:
    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "slurm")
        shutil.rmtree(self.dir, ignore_errors=True)
        for sub in ("state", "spool", "log", "run", "tmp"):
            os.makedirs(os.path.join(self.dir, sub))
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.pids = []
        self.munged = None

    def write_conf(self):
        node = run(["slurmd", "-C"]).stdout.splitlines()[0]  # NodeName=... CPUs=... RealMemory=...
        fields = dict(f.split("=", 1) for f in node.split())
        name = fields["NodeName"]
        d = self.dir
        conf = f"""ClusterName=strata-test
SlurmctldHost={name}
SlurmUser=root
AuthType=auth/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MailProg=/bin/true
JobRequeue=1
ReturnToService=2
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
TmpFS={d}/tmp
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
NodeName={name} CPUs={fields['CPUs']} RealMemory={int(fields['RealMemory']) // 2} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(conf)
        # PMIx puts per-step directories named by uid and job id (which restarts
        # at 1 with fresh state) under TmpFS and this base; in /tmp a directory
        # left by an earlier private Slurm would make every step fail to launch.
        with open(os.path.join(d, "mpi.conf"), "w") as f:
            f.write(f"PMIxCliTmpDirBase={d}/tmp\n")

    def start(self):
        for tool in ("munged", "slurmctld", "slurmd", "sbatch", "scancel", "scontrol", "mungekey"):
            if not shutil.which(tool):
                skip(f"{tool} is not installed (make deps installs slurm-wlm and munge)")
        if os.geteuid() != 0:
            skip("a private slurmd must run as root here")
        self.write_conf()
        # munge: its key and socket directory, started as the munge user.
        os.makedirs("/run/munge", exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        if not os.path.exists("/etc/munge/munge.key"):
            run(["runuser", "-u", "munge", "--", "mungekey", "--create", "--force"])
        if run(["pgrep", "-x", "munged"], check=False).returncode != 0:
            pidfile = "/run/munge/munged.pid"
            if os.path.exists(pidfile):
                os.remove(pidfile)  # stale: no munged runs
            run(["runuser", "-u", "munge", "--", "munged"])
            # Ours to stop: a test leaves no daemon behind (one already running is
            # the machine's). munged forks into the background; its pid file names
            # the daemon, not the parent that runuser saw exit.
            for _ in range(100):
                if os.path.exists(pidfile) and open(pidfile).read().strip():
                    self.munged = int(open(pidfile).read().strip())
                    break
                time.sleep(0.05)
        if run(["munge", "-n"], check=False).returncode != 0:
            skip("munged does not answer")
        for daemon in ("slurmctld", "slurmd"):
            proc = subprocess.run([daemon], env=self.env, capture_output=True, text=True)
            if proc.returncode != 0:
                self.stop()
                skip(f"{daemon} did not start: {proc.stderr.strip()[-500:]}")
        for pidfile in ("slurmctld.pid", "slurmd.pid"):
            path = os.path.join(self.dir, "run", pidfile)
            for _ in range(100):
                if os.path.exists(path) and open(path).read().strip():
                    break
                time.sleep(0.1)
            if os.path.exists(path):
                self.pids.append(int(open(path).read().strip()))
        # The node must come up before jobs can run.
        for _ in range(200):
            out = run(["sinfo", "-h", "-o", "%T"], env=self.env, check=False).stdout.strip()
            if out.startswith("idle"):
                return
            time.sleep(0.1)
        self.stop()
        skip("the private Slurm node never became idle: " + self.log_tail())

    def log_tail(self):
        text = ""
        for log in glob.glob(os.path.join(self.dir, "log", "*.log")):
            text += f"\n--- {log}\n" + open(log).read()[-1500:]
        return text

    # `with PrivateSlurm(dir) as slurm:` starts it, and on the way out cancels
    # every job and stops the daemons, whatever happened inside.
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        run(["scancel", "--full", "--user=root"], env=self.env, check=False)
        self.stop()
        return False

    def stop(self):
        pids = self.pids + ([self.munged] if self.munged else [])
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in pids:
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)

    def job_field(self, job, field):
        out = run(["scontrol", "show", "job", str(job)], env=self.env, check=False).stdout
        for token in out.split():
            if token.startswith(field + "="):
                return token.split("=", 1)[1]
        return None


def test_arguments(*extra):
    """A Slurm test's command line (--strata, --workdir, --source and the names in
    `extra`, all required), with its work directory made empty."""
    parser = argparse.ArgumentParser()
    for name in ("--strata", "--workdir", "--source", *extra):
        parser.add_argument(name, required=True)
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    return args
