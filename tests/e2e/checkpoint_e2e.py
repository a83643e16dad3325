#!/usr/bin/env python3
"""End-to-end tests of checkpoints: exact restart in both store modes, resharding
onto other layouts, preemption by signal (to mpirun, to the launcher
jobs/strata_mpirun.sh, with the log pipe unread), ranks killed mid-step, damaged
files, and run identity (a used checkpoint.dir refused, decks that differ in a
key that changes the numbers refused). Real mpirun jobs of the strata binary; run by ctest (tests/e2e/CMakeLists.txt).

usage: checkpoint_e2e.py CASE --strata BIN --mpiexec MPIEXEC --workdir DIR
"""
import glob
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from strata_e2e import TINY, run_case_from_command_line  # noqa: E402

PREEMPTED = 85  # runtime/preemption.hpp
BAD_INPUT = 2   # README: a bad deck, command line or input file


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return {line["step"]: line for line in map(json.loads, f)}


def checkpoints(directory):
    return sorted(p for p in glob.glob(os.path.join(directory, "ckpt-*.h5")))


def resume_matches(r, mode, trainers, extra=()):
    """Stop at step 40 with a checkpoint, resume to 60: the same digest, eval
    metrics and loss at every metrics step as a run that never stopped."""
    ranks = trainers + 2
    common = [f"--layout.trainers={trainers}", f"--store.mode={mode}", "--output.metrics_every=10", *extra]
    whole = r.run(f"{mode}_whole", ranks, *common, "--train.steps=60")
    ckpt = os.path.join(r.workdir, f"{mode}_ckpt")
    first = r.run(f"{mode}_first", ranks, *common, "--train.steps=40", "--checkpoint.dir=" + ckpt,
                  "--checkpoint.every_steps=10", "--checkpoint.keep=2")
    files = checkpoints(ckpt)
    assert [os.path.basename(p) for p in files] == ["ckpt-0000000030.h5", "ckpt-0000000040.h5"], files
    assert first["checkpoints"]["written"] == 4
    second = r.run(f"{mode}_second", ranks, *common, "--train.steps=60", "--resume=" + files[-1])
    assert second["checkpoints"]["resumed_from_step"] == 40, second["checkpoints"]
    assert second["steps"] == 60
    assert second["params_digest"] == whole["params_digest"], f"{mode}: resumed run trained different numbers"
    assert second["eval_logloss"] == whole["eval_logloss"] and second["eval_auc"] == whole["eval_auc"]
    assert second.get("eval_hr_at_10") == whole.get("eval_hr_at_10")
    assert second.get("eval_ndcg_at_10") == whole.get("eval_ndcg_at_10")
    assert second.get("tasks") == whole.get("tasks"), (second.get("tasks"), whole.get("tasks"))
    m_whole, m_second = metrics(os.path.join(r.workdir, f"{mode}_whole")), metrics(
        os.path.join(r.workdir, f"{mode}_second"))
    for step in (50, 60):
        assert m_second[step]["loss"] == m_whole[step]["loss"], (step, m_second[step]["loss"], m_whole[step]["loss"])
    # Checkpoints do not change the numbers of the run that writes them.
    with_ckpt = r.run(f"{mode}_with_ckpt", ranks, *common, "--train.steps=60", "--checkpoint.dir=" + ckpt + "2",
                      "--checkpoint.every_steps=15")
    assert with_ckpt["params_digest"] == whole["params_digest"]
    # --resume=latest picks the newest in checkpoint.dir.
    latest = r.run(f"{mode}_latest", ranks, *common, "--train.steps=60", "--checkpoint.dir=" + ckpt,
                   "--resume=latest")
    assert latest["params_digest"] == whole["params_digest"]
    print(f"{mode}: resumed at 40, digest {whole['params_digest'][:16]} as uninterrupted")


def case_resume_ps(r):
    resume_matches(r, "ps", 2)


def case_resume_tiered(r):
    resume_matches(r, "tiered", 2)


def case_resume_tiered_mid_run(r):
    """A checkpoint taken mid-run, while later rounds' plans are in flight with rows
    promoted from a dirty L2 (small L1, caching L2), resumes exactly: those rows'
    newest values exist only in the in-flight plans until the trainer applies them."""
    for trainers in (1, 2):
        # A behaviour-history table of 8000 items beside 6 tables of 5000: L1 evicts, L2 hits.
        common = [f"--layout.trainers={trainers}", "--store.mode=tiered", "--store.l1_mb=0.3", "--store.l2_mb=0.5",
                  "--data.num_tables=6", "--data.synthetic_history_length=20", "--data.synthetic_history_vocab=8000",
                  "--train.steps=120"]
        whole = r.run(f"mid_whole_t{trainers}", trainers + 2, *common)
        assert whole["levels"]["l1"]["evictions"] > 0 and whole["levels"]["l2"]["hits"] > 0, whole["levels"]
        ckpt = os.path.join(r.workdir, f"mid_ckpt_t{trainers}")
        r.run(f"mid_first_t{trainers}", trainers + 2, *common, "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=30",
              "--checkpoint.keep=4")
        middle = os.path.join(ckpt, "ckpt-0000000060.h5")
        assert os.path.exists(middle), checkpoints(ckpt)
        second = r.run(f"mid_second_t{trainers}", trainers + 2, *common, "--resume=" + middle)
        assert second["checkpoints"]["resumed_from_step"] == 60
        assert second["params_digest"] == whole["params_digest"], f"{trainers} trainers: resumed mid-run differs"
        print(f"{trainers} trainers: resumed from a mid-run checkpoint (L2 hits {whole['levels']['l2']['hits']:.0f}), "
              f"digest {whole['params_digest'][:16]} as uninterrupted")


def case_resume_din(r):
    """Every model kind resumes exactly: DIN over the synthetic history table, tiered."""
    resume_matches(r, "tiered", 2, ("--model.kind=din", "--data.synthetic_history_length=16"))


def case_resume_multi_task(r):
    """A multi-task model (two-level PLE on two-task data) resumes exactly, every task's AUC too."""
    resume_matches(r, "tiered", 2, ("--model.kind=ple", "--data.synthetic_tasks=2", "--model.task_experts=1",
                                    "--model.ple_levels=2", "--model.expert_mlp=16,8", "--model.tower_mlp=8"))


def case_resume_sparse_adam(r):
    """Row-wise Adam's state, step counts included, is checkpointed and resumed exactly."""
    resume_matches(r, "tiered", 2, ("--optim.sparse=adam", "--optim.sparse_lr=0.01"))


def case_resume_sequences(r):
    """Sequence sources resume exactly, mid-epoch and across epochs: SASRec on next-item
    samples (2000 users: an epoch is 8 steps of 2 x 128) and DIN on click samples."""
    sequences = ["--data.source=synthetic_sequences", "--data.sequence_users=2000", "--data.sequence_items=5000",
                 "--data.sequence_length=uniform:3:60", "--data.max_seq_len=32"]
    resume_matches(r, "tiered", 2, (*sequences, "--model.kind=sasrec", "--data.sequence_task=next_item",
                                    "--model.sasrec_max_len=32"))
    r_din = os.path.join(r.workdir, "din")
    os.makedirs(r_din)
    r.workdir = r_din
    resume_matches(r, "ps", 2, (*sequences, "--model.kind=din"))


def case_resume_hdf5_sequences(r):
    """SASRec on behaviour sequences read from HDF5 (strata convert --from
    synthetic_sequences) resumes exactly mid-epoch, and trains the generator's numbers."""
    h5 = os.path.join(r.workdir, "sequences.h5")
    synthetic = ["--data.sequence_users=2000", "--data.sequence_items=5000", "--data.sequence_length=uniform:3:60"]
    proc = subprocess.run([r.strata, "convert", "--from", "synthetic_sequences", "--to", h5, *synthetic],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    model = ["--model.kind=sasrec", "--data.sequence_task=next_item", "--model.sasrec_max_len=32",
             "--data.max_seq_len=32"]
    resume_matches(r, "tiered", 2, ("--data.source=hdf5", "--data.train=" + h5, *model))
    generated = r.run("generated", 4, "--layout.trainers=2", "--store.mode=tiered", "--output.metrics_every=10",
                      "--train.steps=60", "--data.source=synthetic_sequences", *synthetic, *model)
    with open(os.path.join(r.workdir, "tiered_whole", "summary.json")) as f:
        whole = json.load(f)
    assert generated["params_digest"] == whole["params_digest"], "HDF5 sequences trained other numbers"


def case_resume_files(r):
    """File sources resume at the producers' reader positions: Criteo text with
    two producers (each its own byte shard) and its HDF5 conversion, over two
    epochs with the checkpoint inside the second; also with admission on."""
    from strata_e2e import write_criteo
    tsv, h5 = os.path.join(r.workdir, "train.tsv"), os.path.join(r.workdir, "train.h5")
    write_criteo(tsv, 5000)
    proc = subprocess.run([r.strata, "convert", "--from", "criteo", "--input", tsv, "--to", h5, "--force"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for source, path in (("criteo", tsv), ("hdf5", h5)):
        common = ["--layout.trainers=2", "--layout.producers=2", "--train.steps=0", "--train.epochs=2",
                  "--train.batch_size=64", "--model.embedding_dim=8", "--model.bottom_mlp=32,8",
                  "--store.min_count=2", "--store.admission_counters=4096",
                  f"--data.source={source}", f"--data.train={path}", "--train.eval=false"]
        whole = r.run(f"{source}_whole", 5, *common)
        ckpt = os.path.join(r.workdir, f"{source}_ckpt")
        steps_per_epoch = whole["steps"] // 2
        stop_at = steps_per_epoch + steps_per_epoch // 2
        r.run(f"{source}_first", 5, *common, "--checkpoint.dir=" + ckpt, f"--checkpoint.every_steps={stop_at}")
        saved = [p for p in checkpoints(ckpt) if p.endswith("%010d.h5" % stop_at)]
        assert saved, checkpoints(ckpt)
        resumed = r.run(f"{source}_resumed", 5, *common, "--resume=" + saved[0])
        assert resumed["steps"] == whole["steps"], (resumed["steps"], whole["steps"])
        assert resumed["params_digest"] == whole["params_digest"], f"{source}: resumed digest differs"
        print(f"{source}: resumed at step {stop_at} of {whole['steps']} (epoch 2), digest equal")


def case_reshard(r):
    """A checkpoint continues on another layout: rows re-hash to their new
    servers and owners, the data stream continues at the next sample. More or
    fewer servers and producers change nothing (synthetic data); more or fewer
    trainers at the same global batch stay within float tolerance."""
    ckpt = os.path.join(r.workdir, "ckpt")
    base = ["--output.metrics_every=10"]
    two = r.run("two_whole", 4, "--layout.trainers=2", "--train.batch_size=128", *base, "--train.steps=60")
    r.run("two_first", 4, "--layout.trainers=2", "--train.batch_size=128", *base, "--train.steps=30",
          "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=30")
    saved = checkpoints(ckpt)[-1]
    # 2 trainers -> 1 trainer (same global batch 256).
    one = r.run("one_resumed", 3, "--layout.trainers=1", "--train.batch_size=256", *base, "--train.steps=60",
                "--resume=" + saved)
    for key in ("eval_logloss", "eval_auc"):
        assert abs(one[key] - two[key]) < 1e-4, (key, one[key], two[key])
    # Same trainers, 2 servers and 2 producers: bit for bit.
    wide = r.run("wide_resumed", 6, "--layout.trainers=2", "--layout.servers=2", "--layout.producers=2",
                 "--train.batch_size=128", *base, "--train.steps=60", "--resume=" + saved)
    assert wide["params_digest"] == two["params_digest"], "more servers/producers changed the numbers"
    # 1 trainer -> 4 trainers (global batch 256).
    ckpt1 = os.path.join(r.workdir, "ckpt1")
    single = r.run("single_whole", 3, "--layout.trainers=1", "--train.batch_size=256", *base, "--train.steps=60")
    r.run("single_first", 3, "--layout.trainers=1", "--train.batch_size=256", *base, "--train.steps=30",
          "--checkpoint.dir=" + ckpt1, "--checkpoint.every_steps=30")
    four = r.run("four_resumed", 6, "--layout.trainers=4", "--train.batch_size=64", *base, "--train.steps=60",
                 "--resume=" + checkpoints(ckpt1)[-1])
    for key in ("eval_logloss", "eval_auc"):
        assert abs(four[key] - single[key]) < 1e-4, (key, four[key], single[key])
    assert four["sparse_rows"] == single["sparse_rows"]
    print("2->1, 1->4 within 1e-4; 1->2 servers/producers bit for bit")


def case_reshard_experts(r):
    """Expert-parallel storage (issue 13): under layout.ep = 2 each trainer holds only
    its own experts, yet its checkpoints hold the whole model. A moe checkpoint of
    ep = 2 continues on ep = 1 and one of ep = 1 on ep = 2, and so do a two-level
    ple's, each ending bit-identical to the uninterrupted ep = 1 run (Adam state
    included: the digest reads it)."""
    moe = ["--model.kind=moe", "--model.num_experts=4", "--model.top_k=2", "--layout.trainers=2",
           "--train.batch_size=64", "--store.mode=ps", "--optim.dense=adam"]
    # A two-level ple: every level's experts are a sharded run of the layout between
    # replicated gates.
    ple = ["--model.kind=ple", "--data.synthetic_tasks=2", "--model.num_experts=2", "--model.task_experts=1",
           "--model.ple_levels=2", "--model.expert_mlp=16,8", "--model.tower_mlp=8", "--layout.trainers=2",
           "--train.batch_size=64", "--store.mode=ps", "--optim.dense=adam", "--train.eval=false"]
    for name, args in (("moe", moe), ("ple", ple)):
        whole = r.run(f"{name}_whole", 4, *args, "--layout.ep=1", "--train.steps=40")
        for first_ep, then_ep in ((2, 1), (1, 2)):
            ckpt = os.path.join(r.workdir, f"{name}_ckpt_ep{first_ep}")
            r.run(f"{name}_first_ep{first_ep}", 4, *args, f"--layout.ep={first_ep}", "--train.steps=20",
                  "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=20")
            resumed = r.run(f"{name}_ep{first_ep}_to_ep{then_ep}", 4, *args, f"--layout.ep={then_ep}",
                            "--train.steps=40", "--resume=" + checkpoints(ckpt)[-1])
            assert resumed["checkpoints"]["resumed_from_step"] == 20, resumed["checkpoints"]
            assert resumed["params_digest"] == whole["params_digest"], \
                f"{name}: ep {first_ep} -> {then_ep} changed the numbers"
        print(f"{name} ep 2 -> 1 and 1 -> 2 bit for bit ({whole['params_digest'][:16]})")


def case_reshard_sequences(r):
    """The sequence models reshard too: an HSTU checkpoint of 1 server + 1 producer
    continues on 2 + 2 bit for bit (rows re-hash, the sequence stream continues at
    its next sample), and a SASRec checkpoint of 2 trainers continues on 1 at the
    same global batch within float tolerance."""
    sequences = ["--data.source=synthetic_sequences", "--data.sequence_users=2000", "--data.sequence_items=5000",
                 "--data.sequence_length=uniform:3:60", "--data.max_seq_len=32", "--data.sequence_task=next_item",
                 "--output.metrics_every=10"]
    hstu = [*sequences, "--model.kind=hstu", "--model.sasrec_max_len=32", "--layout.trainers=2",
            "--train.batch_size=64"]
    whole = r.run("hstu_whole", 4, *hstu, "--train.steps=40")
    ckpt = os.path.join(r.workdir, "hstu_ckpt")
    r.run("hstu_first", 4, *hstu, "--train.steps=20", "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=20")
    wide = r.run("hstu_wide", 6, *hstu, "--layout.servers=2", "--layout.producers=2", "--train.steps=40",
                 "--resume=" + checkpoints(ckpt)[-1])
    assert wide["checkpoints"]["resumed_from_step"] == 20, wide["checkpoints"]
    assert wide["params_digest"] == whole["params_digest"], "hstu: 2 servers/producers changed the numbers"
    assert wide["eval_hr_at_10"] == whole["eval_hr_at_10"]

    sasrec = [*sequences, "--model.kind=sasrec", "--model.sasrec_max_len=32"]
    two = r.run("sasrec_two", 4, *sasrec, "--layout.trainers=2", "--train.batch_size=64", "--train.steps=40")
    ckpt2 = os.path.join(r.workdir, "sasrec_ckpt")
    r.run("sasrec_first", 4, *sasrec, "--layout.trainers=2", "--train.batch_size=64", "--train.steps=20",
          "--checkpoint.dir=" + ckpt2, "--checkpoint.every_steps=20")
    one = r.run("sasrec_one", 3, *sasrec, "--layout.trainers=1", "--train.batch_size=128", "--train.steps=40",
                "--resume=" + checkpoints(ckpt2)[-1])
    assert one["sparse_rows"] == two["sparse_rows"]
    for key in ("eval_hr_at_10", "eval_ndcg_at_10"):
        assert abs(one[key] - two[key]) < 2e-3, (key, one[key], two[key])
    print(f"hstu 1->2 servers/producers bit for bit ({whole['params_digest'][:16]}); "
          f"sasrec 2->1 trainers HR@10 {one['eval_hr_at_10']:.4f} vs {two['eval_hr_at_10']:.4f}")


def start_job(r, name, ranks, *options):
    cmd = [r.mpiexec, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [r.strata, "train", "--config", TINY, "--output.dir=" + os.path.join(r.workdir, name), *options]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def rank_pids(job, world_rank):
    """PIDs of the strata process with OMPI_COMM_WORLD_RANK = world_rank under this job."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                session = int(f.read().rsplit(")", 1)[1].split()[3])
        except OSError:
            continue
        if session == os.getsid(job.pid) and f"OMPI_COMM_WORLD_RANK={world_rank}".encode() in env:
            found.append(int(pid))
    return found


def wait_for_checkpoint(directory, job, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if checkpoints(directory):
            return
        if job.poll() is not None:
            raise AssertionError("the job ended before its first checkpoint:\n" + job.stdout.read())
        time.sleep(0.05)
    raise AssertionError("no checkpoint appeared")


# A tiny run slowed down by a modelled network, so that signals and kills land mid-run.
SLOW = ["--links.network_gbps=1", "--links.network_latency_us=3000", "--train.steps=120"]


def case_preempt_signal(r):
    """SIGUSR1 (what Slurm sends before preemption): checkpoint at the next step
    boundary, exit code 85; the resumed run ends as if never stopped."""
    whole = r.run("whole", 4, "--layout.trainers=2", *SLOW)
    ckpt = os.path.join(r.workdir, "ckpt")
    job = start_job(r, "preempted", 4, "--layout.trainers=2", *SLOW, "--checkpoint.dir=" + ckpt,
                    "--checkpoint.every_steps=20")
    wait_for_checkpoint(ckpt, job)
    job.send_signal(signal.SIGUSR1)  # to mpirun, which forwards it to every rank
    out, _ = job.communicate(timeout=300)
    assert job.returncode == PREEMPTED, f"exit {job.returncode}, expected {PREEMPTED}\n{out[-3000:]}"
    with open(os.path.join(r.workdir, "preempted", "summary.json")) as f:
        s = json.load(f)
    assert s["preempted"] and s["steps"] < 120, s
    assert os.path.basename(checkpoints(ckpt)[-1]) == "ckpt-%010d.h5" % s["steps"], checkpoints(ckpt)
    resumed = r.run("resumed", 4, "--layout.trainers=2", *SLOW, "--checkpoint.dir=" + ckpt, "--resume=latest")
    assert resumed["params_digest"] == whole["params_digest"]
    print(f"preempted at step {s['steps']}, resumed to the uninterrupted digest")


def case_kill_rank(r):
    """SIGKILL a trainer, a producer and a server at random steps: the job ends
    (no hang), and a restart from the last complete checkpoint ends bit-identical."""
    # A pause before every staged round keeps the job running long enough to be
    # killed mid-run however fast the machine is (it changes no numbers).
    slow = [*SLOW, "--store.fault_staging_delay_ms=25"]
    whole = r.run("whole", 4, "--layout.trainers=2", "--store.mode=tiered", *slow)
    rng = random.Random(11)
    for victim, world_rank in (("trainer", 1), ("producer", 2), ("server", 3)):
        ckpt = os.path.join(r.workdir, "ckpt_" + victim)
        job = start_job(r, "killed_" + victim, 4, "--layout.trainers=2", "--store.mode=tiered", *slow,
                        "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=10")
        wait_for_checkpoint(ckpt, job)
        time.sleep(rng.uniform(0.0, 0.5))
        pids = rank_pids(job, world_rank)
        assert len(pids) == 1, f"{victim}: pids {pids}"
        os.kill(pids[0], signal.SIGKILL)
        try:
            out, _ = job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            raise AssertionError(f"killing the {victim} left the job hanging")
        assert job.returncode != 0, f"{victim}: mpirun exited 0 after a rank was killed"
        resumed = r.run("resumed_" + victim, 4, "--layout.trainers=2", "--store.mode=tiered", *slow,
                        "--checkpoint.dir=" + ckpt, "--resume=latest")
        assert resumed["params_digest"] == whole["params_digest"], victim
        print(f"{victim} killed after {os.path.basename(checkpoints(ckpt)[-1])}: resumed bit-identical")


LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "jobs", "strata_mpirun.sh")


def start_with_launcher(r, name, ranks, *options):
    """The job through jobs/strata_mpirun.sh, the supported launcher (README), as a
    scheduler or a terminal starts it: its own session, output read by us."""
    cmd = [LAUNCHER, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [r.strata, "train", "--config", TINY, "--output.dir=" + os.path.join(r.workdir, name), *options]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MPIRUN=r.mpiexec)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def launcher_stops_with_checkpoint(r, sig):
    """A stop signal to the launcher (SIGTERM from a scheduler, SIGINT from Ctrl-C):
    checkpoint at the next step boundary, exit 85, resume to the uninterrupted digest."""
    whole = r.run("whole", 4, "--layout.trainers=2", *SLOW)
    ckpt = os.path.join(r.workdir, "ckpt")
    job = start_with_launcher(r, "stopped", 4, "--layout.trainers=2", *SLOW, "--checkpoint.dir=" + ckpt,
                              "--checkpoint.every_steps=20")
    try:
        wait_for_checkpoint(ckpt, job)
        start = time.time()
        job.send_signal(sig)
        out, _ = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    took = time.time() - start
    assert job.returncode == PREEMPTED, f"exit {job.returncode}, expected {PREEMPTED}\n{out[-3000:]}"
    with open(os.path.join(r.workdir, "stopped", "summary.json")) as f:
        s = json.load(f)
    assert s["preempted"] and s["steps"] < 120, s
    newest = checkpoints(ckpt)[-1]
    assert os.path.basename(newest) == "ckpt-%010d.h5" % s["steps"], checkpoints(ckpt)
    resumed = r.run("resumed", 4, "--layout.trainers=2", *SLOW, "--checkpoint.dir=" + ckpt, "--resume=latest")
    assert resumed["params_digest"] == whole["params_digest"]
    print(f"{signal.Signals(sig).name} to the launcher: checkpoint at step {s['steps']}, exit 85 {took:.1f} s "
          "after the signal, resumed to the uninterrupted digest")


def case_launcher_sigterm(r):
    launcher_stops_with_checkpoint(r, signal.SIGTERM)


def case_launcher_sigint(r):
    launcher_stops_with_checkpoint(r, signal.SIGINT)


def blocked_writing(pid):
    """Whether the process sits in write(2) to its stdout or stderr (/proc/PID/syscall)."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            fields = f.read().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "1" and int(fields[1], 16) in (1, 2)


def case_log_pipe_unread(r):
    """mpirun stops reading the ranks' output (stopped here; a launcher shutting down
    does the same): rank 0, logging every step, blocks writing to its full stderr pipe.
    A stop signal still ends in a checkpoint (written while mpirun is stopped: log
    lines that do not fit are dropped instead), and the job exits 85."""
    slow = [o for o in SLOW if not o.startswith("--train.steps")] + ["--train.steps=4000"]
    whole = r.run("whole", 4, "--layout.trainers=2", *slow)
    ckpt = os.path.join(r.workdir, "ckpt")
    job = start_job(r, "unread", 4, "--layout.trainers=2", *slow, "--output.progress_every=1",
                    "--checkpoint.dir=" + ckpt)
    metrics_file = os.path.join(r.workdir, "unread", "metrics.jsonl")
    stopped = False
    try:
        deadline = time.time() + 60
        while not (os.path.exists(metrics_file) and os.path.getsize(metrics_file) > 0):  # training has begun
            assert job.poll() is None and time.time() < deadline, "the job did not start training"
            time.sleep(0.05)
        ranks = [rank_pids(job, w)[0] for w in range(4)]
        os.kill(job.pid, signal.SIGSTOP)  # mpirun reads nothing from here on
        stopped = True
        deadline = time.time() + 60
        while not blocked_writing(ranks[0]):
            assert time.time() < deadline, "rank 0 never blocked on its log output"
            time.sleep(0.1)
        blocked_at = len(metrics(os.path.join(r.workdir, "unread")))
        for pid in ranks:  # as Slurm's scancel does: SIGTERM to every task
            os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 60
        while not checkpoints(ckpt):
            assert time.time() < deadline, "no checkpoint while the log pipe was full"
            time.sleep(0.1)
        written = checkpoints(ckpt)[-1]
        os.kill(job.pid, signal.SIGCONT)
        stopped = False
        out, _ = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            if stopped:
                os.kill(job.pid, signal.SIGCONT)
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert job.returncode == PREEMPTED, f"exit {job.returncode}, expected {PREEMPTED}\n{out[-3000:]}"
    resumed = r.run("resumed", 4, "--layout.trainers=2", *slow, "--checkpoint.dir=" + ckpt, "--resume=latest")
    assert os.path.basename(resumed["checkpoints"]["resumed_from"]) == os.path.basename(written), \
        (resumed["checkpoints"], written)
    assert resumed["params_digest"] == whole["params_digest"]
    print(f"rank 0 blocked on a full log pipe ({blocked_at} metrics lines by then); SIGTERM still wrote "
          f"{os.path.basename(written)}; exit 85; resumed to the uninterrupted digest")


def case_damaged_checkpoints(r):
    """Truncated, corrupted, foreign and mismatched files are clear errors; with
    --resume=latest the loader falls back to the previous good checkpoint."""
    ckpt = os.path.join(r.workdir, "ckpt")
    whole = r.run("whole", 4, "--layout.trainers=2", "--train.steps=60")
    r.run("first", 4, "--layout.trainers=2", "--train.steps=40", "--checkpoint.dir=" + ckpt,
          "--checkpoint.every_steps=20")
    good, newest = checkpoints(ckpt)[-2:]
    with open(newest, "r+b") as f:
        f.truncate(os.path.getsize(newest) // 2)
    r.expect_error("truncated", 4, "--layout.trainers=2", "--resume=" + newest, contains=[newest])
    proc = r.run("fallback", 4, "--layout.trainers=2", "--train.steps=60", "--checkpoint.dir=" + ckpt,
                 "--resume=latest", expect_ok=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert newest in text and good in text, "the fallback must name both files"
    with open(os.path.join(r.workdir, "fallback", "summary.json")) as f:
        assert json.load(f)["params_digest"] == whole["params_digest"]
    # A different model shape is refused before anything is loaded.
    r.expect_error("other_shape", 4, "--layout.trainers=2", "--model.embedding_dim=4", "--model.bottom_mlp=32,4",
                   "--resume=" + good, contains=[good, "embedding"])
    # Not a checkpoint at all.
    foreign = os.path.join(r.workdir, "foreign.h5")
    with open(foreign, "w") as f:
        f.write("label\tI1\n")
    r.expect_error("foreign", 4, "--layout.trainers=2", "--resume=" + foreign, contains=[foreign])
    r.expect_error("missing", 4, "--layout.trainers=2", "--resume=" + os.path.join(r.workdir, "none"),
                   contains=["none"])
    print("damaged files refused; latest fell back from", os.path.basename(newest), "to", os.path.basename(good))


def sha256s(directory):
    """{file name: sha256} of every file in `directory`."""
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def expect_refused(r, name, ranks, *options, contains):
    """A run that must stop with the bad-input exit code and one message holding every part of `contains`."""
    proc = r.run(name, ranks, *options, expect_ok=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == BAD_INPUT, f"{name}: exit {proc.returncode}, expected {BAD_INPUT}\n{text[-3000:]}"
    for needle in contains:
        assert needle in text, f"{name}: message lacks '{needle}':\n{text[-3000:]}"
    assert text.count("strata: error:") == 1, f"{name}: the error must be printed once:\n{text[-3000:]}"
    return text


def case_used_dir_refused(r):
    """A fresh run (no --resume) refuses a checkpoint.dir holding another run's
    checkpoints, naming the directory and the three fixes, and changes none of
    its files; so does a resume of another run that would write into it."""
    ckpt = os.path.join(r.workdir, "ckpt")
    common = ["--layout.trainers=2", "--train.steps=40", "--checkpoint.every_steps=20"]
    r.run("first", 4, *common, "--checkpoint.dir=" + ckpt)
    before = sha256s(ckpt)
    assert sorted(before) == ["ckpt-0000000020.h5", "ckpt-0000000040.h5"], before
    expect_refused(r, "second", 4, *common, "--train.seed=2", "--checkpoint.dir=" + ckpt,
                   contains=[ckpt, "--resume=latest", "checkpoint.dir", "--checkpoint.overwrite=true"])
    assert sha256s(ckpt) == before, "a refused run changed the checkpoints"
    # Without checkpoints of its own cadence too: a preemption would write there.
    expect_refused(r, "second_no_cadence", 4, "--layout.trainers=2", "--checkpoint.dir=" + ckpt,
                   contains=[ckpt, "--checkpoint.overwrite=true"])
    # Another run's checkpoint resumed into this directory would overwrite its files as well.
    other = os.path.join(r.workdir, "other")
    r.run("other", 4, "--layout.trainers=2", "--train.steps=20", "--checkpoint.every_steps=20",
          "--checkpoint.dir=" + other)
    expect_refused(r, "other_into_ckpt", 4, *common, "--checkpoint.dir=" + ckpt,
                   "--resume=" + checkpoints(other)[-1], contains=[ckpt, "another run", "--checkpoint.overwrite=true"])
    assert sha256s(ckpt) == before, "a refused resume changed the checkpoints"
    # The run that owns the directory continues it.
    resumed = r.run("resumed", 4, "--layout.trainers=2", "--train.steps=60", "--checkpoint.every_steps=20",
                    "--checkpoint.dir=" + ckpt, "--resume=latest")
    assert resumed["checkpoints"]["resumed_from_step"] == 40 and resumed["steps"] == 60
    assert sorted(os.path.basename(p) for p in checkpoints(ckpt))[-1] == "ckpt-0000000060.h5"
    print("fresh run and another run's resume refused (exit 2), files unchanged; the owner resumed")


def case_overwrite(r):
    """--checkpoint.overwrite=true: a fresh run removes the old checkpoints first
    (before it writes anything), and what it leaves is its own."""
    ckpt = os.path.join(r.workdir, "ckpt")
    r.run("old", 4, "--layout.trainers=2", "--train.steps=40", "--checkpoint.every_steps=20",
          "--checkpoint.dir=" + ckpt)
    assert len(checkpoints(ckpt)) == 2
    with open(os.path.join(ckpt, "ckpt-0000000040.h5.tmp"), "w") as f:
        f.write("an interrupted write")
    with open(os.path.join(ckpt, "notes.txt"), "w") as f:
        f.write("not a checkpoint")
    proc = r.run("new", 4, "--layout.trainers=2", "--train.seed=2", "--train.steps=20", "--checkpoint.every_steps=20",
                 "--checkpoint.dir=" + ckpt, "--checkpoint.overwrite=true", expect_ok=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert "checkpoint.overwrite = true: removed 3 checkpoint file(s)" in text, text[-3000:]
    # The old run's step-40 file would have survived a run that only overwrote step 20.
    assert sorted(os.listdir(ckpt)) == ["ckpt-0000000020.h5", "notes.txt"], os.listdir(ckpt)
    # Its checkpoints are the new run's: they resume with its deck (seed 2), not the old one's.
    whole = r.run("new_whole", 4, "--layout.trainers=2", "--train.seed=2", "--train.steps=40")
    resumed = r.run("new_resumed", 4, "--layout.trainers=2", "--train.seed=2", "--train.steps=40",
                    "--checkpoint.dir=" + ckpt, "--resume=latest")
    assert resumed["params_digest"] == whole["params_digest"]
    expect_refused(r, "old_deck", 4, "--layout.trainers=2", "--train.steps=40", "--checkpoint.dir=" + ckpt,
                   "--resume=latest", contains=["train.seed: '2' in the checkpoint, '1' in this run"])
    print("overwrite removed the old files first; the new run's checkpoints resume with its deck")


def case_resume_deck_changed(r):
    """A resume whose deck differs in a key that changes the numbers is refused
    naming each key with both values; keys of run length, outputs and layout may
    differ, and the run still ends at the uninterrupted digest."""
    ckpt = os.path.join(r.workdir, "ckpt")
    whole = r.run("whole", 4, "--layout.trainers=2", "--train.steps=60")
    r.run("first", 4, "--layout.trainers=2", "--train.steps=40", "--checkpoint.every_steps=20",
          "--checkpoint.dir=" + ckpt)
    before = sha256s(ckpt)
    latest = ["--checkpoint.dir=" + ckpt, "--resume=latest", "--train.steps=60"]
    expect_refused(r, "seed", 4, "--layout.trainers=2", *latest, "--train.seed=2",
                   contains=["train.seed: '1' in the checkpoint, '2' in this run", checkpoints(ckpt)[-1]])
    expect_refused(r, "lr_and_dim", 4, "--layout.trainers=2", *latest, "--optim.dense_lr=0.002",
                   "--model.embedding_dim=4", "--model.bottom_mlp=32,4",
                   contains=["optim.dense_lr: '0.001' in the checkpoint, '0.002' in this run",
                             "model.embedding_dim: '8' in the checkpoint, '4' in this run", "model.bottom_mlp"])
    expect_refused(r, "sparse_optimizer", 4, "--layout.trainers=2", *latest, "--optim.sparse=adam",
                   contains=["optim.sparse: 'adagrad' in the checkpoint, 'adam' in this run"])
    expect_refused(r, "global_batch", 4, "--layout.trainers=2", *latest, "--train.batch_size=64",
                   contains=["train.batch_size", "global batch"])
    assert sha256s(ckpt) == before
    # train.steps (40 -> 60) and output cadence differ: allowed, and exact.
    resumed = r.run("longer", 4, "--layout.trainers=2", *latest, "--output.metrics_every=7",
                    "--output.progress_every=3", "--checkpoint.keep=5")
    assert resumed["checkpoints"]["resumed_from_step"] == 40 and resumed["steps"] == 60
    assert resumed["params_digest"] == whole["params_digest"]
    print("changed seed, lr, shape, sparse optimizer, global batch refused by name; a longer run resumed to the same digest")


def damage_sparse_values(strata, path):
    """Writes 4 bytes of 0xff inside /sparse/values of `path` (found with
    `strata ckpt verify`, which names the dataset whose rows fail) and returns
    the verify message."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        original = f.read()
    for offset in range(size // 8, size - 4, max(size // 97, 1)):
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(b"\xff\xff\xff\xff")
        proc = subprocess.run([strata, "ckpt", "verify", path], capture_output=True, text=True)
        if proc.returncode != 0 and "of /sparse/values do not match their checksum" in proc.stderr:
            return proc.stderr
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(original[offset:offset + 4])
    raise AssertionError(f"no offset of {path} lies in /sparse/values")


def case_damaged_sparse_rows(r):
    """A damaged row block in the newest checkpoint: --resume=latest and
    --resume=auto fall back to the previous good file, say which file and why,
    and end at the uninterrupted digest; naming the damaged file is a clear error."""
    ckpt = os.path.join(r.workdir, "ckpt")
    whole = r.run("whole", 4, "--layout.trainers=2", "--train.steps=60")
    r.run("first", 4, "--layout.trainers=2", "--train.steps=40", "--checkpoint.every_steps=20",
          "--checkpoint.dir=" + ckpt)
    good, newest = checkpoints(ckpt)[-2:]
    damage_sparse_values(r.strata, newest)
    for resume in ("latest", "auto"):
        proc = r.run("fallback_" + resume, 4, "--layout.trainers=2", "--train.steps=60", "--checkpoint.dir=" + ckpt,
                     "--resume=" + resume, expect_ok=False)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 0, text[-3000:]
        assert f"checkpoint {newest} is not usable" in text and "/sparse/values" in text, text[-3000:]
        assert f"resuming from {good}" in text, text[-3000:]
        with open(os.path.join(r.workdir, "fallback_" + resume, "summary.json")) as f:
            s = json.load(f)
        assert s["checkpoints"]["resumed_from_step"] == 20, s["checkpoints"]
        assert s["params_digest"] == whole["params_digest"], f"{resume}: fallback resumed different numbers"
    # The damaged file named on its own has nothing to fall back to.
    expect_refused(r, "named", 4, "--layout.trainers=2", "--train.steps=60", "--resume=" + newest,
                   contains=[newest, "/sparse/values", "checksum"])
    print("damaged /sparse/values of", os.path.basename(newest), "-> fell back to", os.path.basename(good),
          "with the uninterrupted digest")


if __name__ == "__main__":
    run_case_from_command_line({name[5:]: fn for name, fn in globals().items() if name.startswith("case_")})
