#!/usr/bin/env python3
"""Several models in one job (config/model_set.hpp, runtime/model_set_job.hpp):
each co-trained model ends bit-identical to the same model trained alone
(--models.only), in ps and tiered mode, and after a checkpoint + resume or a
preemption; bad model decks are refused naming the key, line or model.

usage: multi_model_e2e.py CASE --strata BIN --mpiexec MPIEXEC --workdir DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from strata_e2e import run_case_from_command_line  # noqa: E402

PREEMPTED = 85
BAD_INPUT = 2

# A tiny DLRM on one producer, trainer and server each, over a synthetic click log.
ONE_OF_EACH = """
[layout]
producers = 1
trainers = 1
servers = 1

[data]
source = synthetic
synthetic_train_samples = 65536
synthetic_eval_samples = 4096
num_tables = 6
vocab_sizes = 5000
zipf_exponent = 1.05

[model]
embedding_dim = 8
bottom_mlp = 32,8
top_mlp = 32
"""

# Three models over one tiny synthetic click log with a behaviour history: a
# tiered DLRM on 2 trainers, a ps DLRM variant with its own optimizer settings,
# and a tiered DIN. 4 + 3 + 3 = 10 ranks.
DECK = """
[models]
names = dlrm_a, dlrm_b, din_c
""" + ONE_OF_EACH.replace(
    "zipf_exponent = 1.05\n", "zipf_exponent = 1.05\nsynthetic_history_length = 20\nsynthetic_history_vocab = 8000\n") + """
[train]
batch_size = 128
steps = 60

[store]
mode = tiered
l1_mb = 0.4
l2_mb = 0.5

[output]
metrics_every = 10
progress_every = 20

[model.dlrm_a]
kind = dlrm
layout.trainers = 2

[model.dlrm_b]
kind = dlrm
top_mlp = 64,16
optim.sparse_lr = 0.1
store.mode = ps

[model.din_c]
kind = din
din_attention_mlp = 16
"""
MODELS = {"dlrm_a": 4, "dlrm_b": 3, "din_c": 3}
ALL_RANKS = sum(MODELS.values())


def write_deck(r, name="multi.ini", text=DECK):
    path = os.path.join(r.workdir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def launch(r, ranks, deck, out, *options, popen=False):
    cmd = [r.mpiexec, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [r.strata, "train", "--config", deck, "--output.dir=" + os.path.join(r.workdir, out), *options]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if popen:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                start_new_session=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def train(r, ranks, deck, out, *options, code=0):
    proc = launch(r, ranks, deck, out, *options)
    if proc.returncode != code:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise AssertionError(f"{out}: exit code {proc.returncode}, expected {code}")
    return proc


def summaries(r, out):
    """The job's summary.json and each model's own."""
    root = os.path.join(r.workdir, out)
    with open(os.path.join(root, "summary.json")) as f:
        job = json.load(f)
    models = {}
    for name in job["models"]:
        with open(os.path.join(root, job["models"][name]["summary"])) as f:
            models[name] = json.load(f)
    return job, models


def alone(r, deck, prefix, *options):
    """Each model trained alone on its own ranks: the reference."""
    found = {}
    for name, ranks in MODELS.items():
        train(r, ranks, deck, f"{prefix}_{name}", f"--models.only={name}", *options)
        job, models = summaries(r, f"{prefix}_{name}")
        assert list(job["models"]) == [name], job["models"]
        found[name] = models[name]
    return found


def same_numbers(co, ref, what, keys=("steps", "samples", "eval_auc", "eval_logloss", "train_logloss")):
    for name in MODELS:
        a, b = co[name], ref[name]
        assert a["params_digest"] == b["params_digest"], f"{what}: {name} differs from the same model alone"
        for key in keys:
            assert a[key] == b[key], f"{what}: {name} {key} {a[key]} != {b[key]}"


def case_co_trained_equals_alone(r):
    deck = write_deck(r)
    train(r, ALL_RANKS, deck, "co")
    job, co = summaries(r, "co")
    assert job["order"] == list(MODELS), job["order"]
    assert set(job["models"]) == set(MODELS)
    for name in MODELS:
        assert co[name]["model"] == name
        assert job["models"][name]["params_digest"] == co[name]["params_digest"]
    assert co["dlrm_a"]["mode"] == "tiered" and co["dlrm_b"]["mode"] == "ps" and co["din_c"]["mode"] == "tiered"
    assert co["dlrm_a"]["layout"]["trainers"] == 2 and co["din_c"]["layout"]["trainers"] == 1
    # The tiered models evict (L1 and L2 far below their rows): the caches are exercised.
    assert co["dlrm_a"]["levels"]["l1"]["evictions"] > 0 and co["din_c"]["levels"]["l2"]["evictions"] > 0
    # Different models trained different numbers.
    assert len({co[n]["params_digest"] for n in MODELS}) == 3
    same_numbers(co, alone(r, deck, "alone"), "co-trained vs alone")
    # Shared ingestion (on by default): the producers made each training chunk
    # of 256 samples about once for all three models, not once per model
    # (dlrm_a's 2 trainers read 60 chunks, the others 30 each: 120 apart).
    shared = {n: co[n]["shared_ingest"] for n in MODELS}
    made = sum(s["chunks_made"] for s in shared.values())
    hits = sum(s["chunk_hits"] for s in shared.values())
    assert 60 <= made <= 90, f"chunks made {made} (60 once each, 120 without sharing): {shared}"
    assert hits >= 120 - made, shared
    # All three train batches of 128: each de-duplicated batch is made about once
    # (120 distinct of the 240 the models read) and copied by the others.
    batches = sum(s["batches_made"] for s in shared.values())
    assert 120 <= batches <= 180, f"batches made {batches} (120 once each, 240 without sharing): {shared}"
    # Without it each model makes its own samples, with the same numbers.
    train(r, ALL_RANKS, deck, "co_apart", "--models.shared_ingest=false")
    _, apart = summaries(r, "co_apart")
    assert all("shared_ingest" not in apart[n] for n in MODELS)
    same_numbers(apart, co, "shared ingestion off vs on")
    print(f"shared ingestion: {made} chunks made for 120 reads, {hits} copied; {batches} batches made for 240")
    # A model's digest does not depend on the others' store mode.
    train(r, ALL_RANKS, deck, "co_ps", "--store.mode=ps")
    _, co_ps = summaries(r, "co_ps")
    same_numbers(co_ps, co, "all ps vs mixed (tiered == ps)")
    print("co-trained == alone for " + ", ".join(f"{n} {co[n]['params_digest'][:12]}" for n in MODELS))


def case_resume(r):
    """A co-trained job stopped with checkpoints resumes every model exactly, and a
    preempted one (SIGUSR1 mid-run) continues to the same numbers."""
    deck = write_deck(r)
    train(r, ALL_RANKS, deck, "whole")
    _, whole = summaries(r, "whole")
    ckpt = os.path.join(r.workdir, "ckpt")
    train(r, ALL_RANKS, deck, "first", "--train.steps=40", "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=20")
    for name in MODELS:
        assert sorted(os.listdir(os.path.join(ckpt, name)))[-1] == "ckpt-0000000040.h5", os.listdir(os.path.join(ckpt, name))
    train(r, ALL_RANKS, deck, "second", "--checkpoint.dir=" + ckpt, "--resume=latest")
    _, second = summaries(r, "second")
    for name in MODELS:
        assert second[name]["checkpoints"]["resumed_from_step"] == 40, (name, second[name]["checkpoints"])
    resumed = ("steps", "eval_auc", "eval_logloss", "train_logloss")  # samples count from the resume
    same_numbers(second, whole, "resumed at 40 vs whole", resumed)
    # Preemption: every model still training checkpoints at its next step boundary
    # and the job exits 85. dlrm_b (12 steps) has finished before the signal: the
    # resumed job does not train it again, and its numbers stand.
    slow = ["--links.network_gbps=1", "--links.network_latency_us=20000", "--train.steps=120",
            "--model.dlrm_b.train.steps=12"]
    train(r, ALL_RANKS, deck, "slow_whole", *slow)
    _, slow_whole = summaries(r, "slow_whole")
    pckpt = os.path.join(r.workdir, "pckpt")
    job = launch(r, ALL_RANKS, deck, "preempted", *slow, "--checkpoint.dir=" + pckpt, popen=True)
    out_dir = os.path.join(r.workdir, "preempted")
    deadline = time.time() + 120
    def trained_a_window(name):  # its first metrics line (step 10): it is past its start
        path = os.path.join(out_dir, name, "metrics.jsonl")
        return os.path.exists(path) and os.path.getsize(path) > 0

    while time.time() < deadline and not (
            os.path.exists(os.path.join(out_dir, "dlrm_b", "summary.json")) and
            all(trained_a_window(n) for n in ("dlrm_a", "din_c"))):
        assert job.poll() is None, "the job ended before it was signalled:\n" + job.stdout.read()
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGUSR1)
    out, _ = job.communicate(timeout=300)
    assert job.returncode == PREEMPTED, f"exit {job.returncode}, expected {PREEMPTED}:\n{out}"
    # The same folder, as a requeued Slurm job would continue.
    proc = train(r, ALL_RANKS, deck, "preempted", *slow, "--checkpoint.dir=" + pckpt, "--resume=latest")
    assert "model dlrm_b finished in an earlier run of this job" in proc.stdout, proc.stdout
    _, continued = summaries(r, "preempted")
    steps = {n: continued[n]["checkpoints"]["resumed_from_step"] for n in ("dlrm_a", "din_c")}
    assert all(0 < s < 120 for s in steps.values()), steps
    same_numbers(continued, slow_whole, "preempted and resumed vs whole", resumed)
    print(f"resume at 40 exact; preempted at steps {steps} (dlrm_b done before), resumed exact")


def case_text_shared(r):
    """Shared ingestion of a text file: the models' producers parse each chunk of
    the shard once (malformed lines included, counted by every model), each model
    still ends equal to itself alone, with its own batch size, and a checkpoint
    taken inside a chunk resumes exactly."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from strata_e2e import write_criteo
    tsv, eval_tsv = os.path.join(r.workdir, "train.tsv"), os.path.join(r.workdir, "eval.tsv")
    write_criteo(tsv, 12000)
    write_criteo(eval_tsv, 2000, seed=9)
    with open(tsv) as f:
        lines = f.read().splitlines()
    for i in (3, 700, 701, 9000):
        lines[i] = "garbage\tline"
    with open(tsv, "w") as f:
        f.write("\n".join(lines) + "\nbad last line\n")
    text = DECK.replace("source = synthetic", f"source = criteo\ntrain = {tsv}\neval = {eval_tsv}\nstrict = false")
    text = text.replace("steps = 60", "epochs = 2").replace("store.mode = ps", "store.mode = ps\ntrain.batch_size = 100")
    text = text.replace("kind = din\ndin_attention_mlp = 16", "kind = dlrm\nbottom_mlp = 16,8")
    text = text.replace("l1_mb = 0.4", "l1_mb = 2").replace("l2_mb = 0.5", "l2_mb = 4")
    deck = write_deck(r, "text.ini", text)
    train(r, ALL_RANKS, deck, "text_co")
    _, co = summaries(r, "text_co")
    ref = alone(r, deck, "text_alone")
    same_numbers(co, ref, "text co-trained vs alone")
    for name in MODELS:
        assert co[name]["data"] == ref[name]["data"], (name, co[name]["data"], ref[name]["data"])
        assert co[name]["data"]["malformed_lines"] == 10, co[name]["data"]  # 5 per pass, 2 passes
    shared = {n: co[n]["shared_ingest"] for n in MODELS}
    made = sum(s["chunks_made"] for s in shared.values())
    # Each model reads 2 passes of 47 chunks of 256 samples and 8 evaluation chunks: 306 apart.
    assert made <= 0.6 * 306, f"chunks made {made} of 306 apart: {shared}"
    # dlrm_a and din_c (batch 128) share their de-duplicated batches: 2 passes of 93 full ones.
    batches = shared["dlrm_a"]["batches_made"] + shared["din_c"]["batches_made"]
    assert 186 <= batches <= 0.75 * 372, f"batches made {batches} of 372 apart: {shared}"
    ckpt = os.path.join(r.workdir, "text_ckpt")
    train(r, ALL_RANKS, deck, "text_first", "--train.steps=50", "--checkpoint.dir=" + ckpt,
          "--checkpoint.every_steps=50")
    train(r, ALL_RANKS, deck, "text_second", "--checkpoint.dir=" + ckpt, "--resume=latest")
    _, second = summaries(r, "text_second")
    same_numbers(second, co, "text resumed at 50 vs whole", ("steps", "eval_auc", "eval_logloss", "train_logloss"))
    print(f"text: co-trained == alone, {made} chunks made of 306 apart, {batches} batches of 372, "
          "resume at step 50 exact")


def case_l2_pool(r):
    """One L2 pool for the tiered models of a node: memory moves to the model
    whose ghost rows say it would help, from the one whose L2 is hardly used
    (dlrm_a's L1 holds nearly all its rows), within the pool; every model
    still ends equal to itself alone."""
    deck = write_deck(r)
    pool = ["--models.l2_pool_mb=4", "--train.steps=1200", "--model.dlrm_a.store.l1_mb=8",
            "--model.din_c.store.l1_mb=0.5"]
    train(r, ALL_RANKS, deck, "pool", *pool)
    _, co = summaries(r, "pool")
    ref = alone(r, deck, "pool_alone", "--train.steps=1200", "--model.dlrm_a.store.l1_mb=8",
                "--model.din_c.store.l1_mb=0.5")
    same_numbers(co, ref, "pooled vs alone")
    a, c = co["dlrm_a"]["l2_pool"], co["din_c"]["l2_pool"]
    assert "l2_pool" not in co["dlrm_b"], "a ps model holds no share of the pool"
    assert a["pool_mb"] == 4 and c["pool_mb"] == 4
    assert c["final_grant_mb"] > 2.0 + 0.1 and a["final_grant_mb"] < 2.0 - 0.1, (a, c)  # from the equal split
    assert a["final_grant_mb"] + c["final_grant_mb"] <= 4 + 1e-6, (a, c)
    assert a["changes"] > 0 and c["changes"] > 0, (a, c)
    print(f"l2 pool: dlrm_a {a['final_grant_mb']:.2f} MiB, din_c {c['final_grant_mb']:.2f} MiB of 4; equal to alone")


def expect_refused(r, name, ranks, deck, *options, contains):
    proc = launch(r, ranks, deck, name, *options)
    text = proc.stdout + proc.stderr
    assert proc.returncode == BAD_INPUT, f"{name}: exit {proc.returncode}, expected {BAD_INPUT}\n{text}"
    for needle in contains:
        assert needle in text, f"{name}: message lacks '{needle}':\n{text}"
    assert text.count("strata: error") == 1, f"{name}: not exactly one error message:\n{text}"
    print(f"{name}: refused, message ok")


def case_bad_decks(r):
    deck = write_deck(r)
    expect_refused(r, "world", 4, deck, contains=["models need 10", "mpirun -n 10", "--models.only"])
    expect_refused(r, "only_unknown", 3, deck, "--models.only=nope",
                   contains=["--models.only=nope", "dlrm_a, dlrm_b, din_c"])
    expect_refused(r, "shared_key", ALL_RANKS, deck, "--model.din_c.data.num_tables=3",
                   contains=["data.num_tables", "shared by every model", "[data]"])
    bad = DECK.replace("din_attention_mlp = 16", "din_attention_mlp = 16\nstore.l1_megabytes = 3")
    line = bad.splitlines().index("store.l1_megabytes = 3") + 1
    expect_refused(r, "unknown_key", ALL_RANKS, write_deck(r, "unknown.ini", bad),
                   contains=["store.l1_megabytes", f"line {line}"])
    bad = DECK.replace("optim.sparse_lr = 0.1", "optim.sparse_lr = fast")
    line = bad.splitlines().index("optim.sparse_lr = fast") + 1
    expect_refused(r, "bad_value", ALL_RANKS, write_deck(r, "value.ini", bad),
                   contains=["model 'dlrm_b'", "optim.sparse_lr", f"line {line}"])
    bad = DECK.replace("names = dlrm_a, dlrm_b, din_c", "names = dlrm_a, dlrm_b")
    expect_refused(r, "unlisted_section", 7, write_deck(r, "unlisted.ini", bad),
                   contains=["[model.din_c]", "does not list"])
    bad = DECK.replace("names = dlrm_a, dlrm_b, din_c", "names = dlrm_a, dlrm_a, dlrm_b, din_c")
    expect_refused(r, "twice", ALL_RANKS, write_deck(r, "twice.ini", bad), contains=["listed twice"])
    bad = DECK.replace("names = dlrm_a, dlrm_b, din_c", "names = ")
    expect_refused(r, "no_names", ALL_RANKS, write_deck(r, "empty.ini", bad), contains=["lists no model", "line 3"])
    bad = DECK.replace("kind = din\n", "kind = dinn\n")
    expect_refused(r, "bad_kind", ALL_RANKS, write_deck(r, "kind.ini", bad), contains=["model 'din_c'", "dinn"])
    # A model that cannot read the data stops the job before any model starts.
    bad = DECK.replace("kind = din\n", "kind = din\nbottom_mlp = 32,5\n")
    expect_refused(r, "bad_model", ALL_RANKS, write_deck(r, "model.ini", bad), contains=["model 'din_c'"])
    # One model failing mid-run ends the whole job, its error naming the model.
    proc = launch(r, ALL_RANKS, deck, "nan", "--model.dlrm_b.optim.dense_lr=1e30", "--model.dlrm_b.optim.sparse_lr=1e30")
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text
    assert "model 'dlrm_b': the training loss became NaN" in text, text
    print("nan: the job ended, naming model dlrm_b")
    expect_refused(r, "shared_ingest", ALL_RANKS, deck, "--models.shared_ingest=maybe",
                   contains=["models.shared_ingest", "'maybe'", "true"])
    bad = DECK.replace("names = dlrm_a, dlrm_b, din_c", "names = dlrm_a, dlrm_b, din_c\nshared_ingest_mb = 0")
    expect_refused(r, "shared_ingest_mb", ALL_RANKS, write_deck(r, "ingest_mb.ini", bad),
                   contains=["models.shared_ingest_mb", "line 4", "MiB"])
    expect_refused(r, "pool_floor_without_pool", ALL_RANKS, deck, "--model.din_c.store.l2_min_mb=1",
                   contains=["model 'din_c'", "store.l2_min_mb", "l2_pool_mb"])
    expect_refused(r, "pool_floors", ALL_RANKS, deck, "--models.l2_pool_mb=2", "--store.l2_min_mb=1.5",
                   contains=["store.l2_min_mb", "more than models.l2_pool_mb"])
    expect_refused(r, "pool_size", ALL_RANKS, deck, "--models.l2_pool_mb=lots",
                   contains=["models.l2_pool_mb", "'lots'"])
    # A used output.dir is refused for the job as for one model.
    train(r, ALL_RANKS, deck, "used")
    expect_refused(r, "used", ALL_RANKS, deck, contains=["already holds the outputs", "--output.overwrite"])


# strata tune --tune.co_train: trials co-trained three at a time over one pass of the producers.
TUNE_DECK = ONE_OF_EACH + """
[train]
batch_size = 128

[store]
l1_mb = 0.4
l2_mb = 0.5

[tune]
plugin = grid
space_l1_mb =
space_l2_mb =
space_prefetch_depth =
space_policy =
space_sparse_lr = 0.02|0.05
space_dense_lr = 0.001|0.01
objective = eval_auc
trials = 4
trial_steps = 30
warmup_steps = 0
"""


def tune(r, ranks, deck, out, *options):
    cmd = [r.mpiexec, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [r.strata, "tune", "--config", deck, "--output.dir=" + os.path.join(r.workdir, out), *options]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def trials_of(r, out):
    import csv
    with open(os.path.join(r.workdir, out, "trials.csv")) as f:
        return list(csv.DictReader(f))


def case_tune_co_train(r):
    """Four trials co-trained three at a time (a pass of three, then a pass of one
    with six ranks idle) find the same objective for every trial, bit for bit,
    as the same search run one trial at a time, and the same best deck; the
    trials shared the producers' samples; bad co-training settings are refused."""
    deck = write_deck(r, "tune.ini", TUNE_DECK)
    for out, ranks, options in (("seq", 3, ()), ("co", 9, ("--tune.co_train=3",))):
        proc = tune(r, ranks, deck, out, *options)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seq, co = trials_of(r, "seq"), trials_of(r, "co")
    assert len(seq) == len(co) == 4, (seq, co)
    key = lambda x: (x["optim.sparse_lr"], x["optim.dense_lr"])
    assert {key(x) for x in seq} == {key(x) for x in co} and len({key(x) for x in co}) == 4, (seq, co)
    by_key = {key(x): x for x in seq}
    for row in co:
        assert row["state"] == "complete" and row["direction"] == "maximize", row
        assert row["eval_auc"] == by_key[key(row)]["eval_auc"], (row, by_key[key(row)])
        a = json.load(open(os.path.join(r.workdir, "co", "trial-%05d" % int(row["trial"]), "summary.json")))
        b = json.load(open(os.path.join(r.workdir, "seq", "trial-%05d" % int(by_key[key(row)]["trial"]),
                                        "summary.json")))
        assert a["params_digest"] == b["params_digest"], (row, a["params_digest"], b["params_digest"])
    passes = sorted(x for x in os.listdir(os.path.join(r.workdir, "co")) if x.startswith("pass-"))
    assert passes == ["pass-00000", "pass-00003"], passes
    first = json.load(open(os.path.join(r.workdir, "co", passes[0], "summary.json")))
    assert sorted(first["models"]) == ["trial_00000", "trial_00001", "trial_00002"], first["models"]
    shared = [json.load(open(os.path.join(r.workdir, "co", "trial-%05d" % t, "summary.json")))["shared_ingest"]
              for t in range(3)]
    assert sum(x["chunk_hits"] for x in shared) > 0 and sum(x["batch_hits"] for x in shared) > 0, shared
    best = lambda out: [x for x in open(os.path.join(r.workdir, out, "best.ini")) if not x.startswith("#")]
    strip = lambda lines: [x.replace(os.path.join(r.workdir, "co"), "OUT").replace(os.path.join(r.workdir, "seq"), "OUT")
                           for x in lines if "co_train" not in x]
    assert strip(best("co")) == strip(best("seq")), "the co-trained search chose another best deck"
    print("4 trials: co-trained objectives == one at a time, bit for bit; best decks equal")
    # Optuna asks three trials before it hears of any (its sampler sees them as
    # running), and eval_logloss is minimised.
    study = os.path.join(r.workdir, "study.journal")
    proc = tune(r, 9, deck, "optuna", "--tune.co_train=3", "--tune.plugin=optuna", "--tune.study=" + study,
                "--tune.objective=eval_logloss", "--tune.space_sparse_lr=0.01:0.2:log",
                "--tune.space_dense_lr=0.0005:0.02:log")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = trials_of(r, "optuna")
    assert [int(x["trial"]) for x in rows] == [0, 1, 2, 3], rows
    assert all(x["state"] == "complete" and x["direction"] == "minimize" for x in rows), rows
    best_row = min(rows, key=lambda x: float(x["eval_logloss"]))
    first_line = open(os.path.join(r.workdir, "optuna", "best.ini")).readline()
    assert f"trial {best_row['trial']}, eval_logloss = " in first_line and "(minimize)" in first_line, first_line
    print("optuna, co-trained, eval_logloss minimised: 4 trials complete, best.ini the lowest")
    for name, ranks, options, needles in (
            ("throughput", 9, ("--tune.co_train=3", "--tune.objective=samples_per_s"),
             ["tune.co_train = 3", "samples_per_s", "tune.objective = eval_auc"]),
            ("world", 6, ("--tune.co_train=3",), ["needs 3 x the layout's 3 ranks", "mpirun -n 9"]),
            ("layouts", 9, ("--tune.co_train=3", "--tune.space_layout=1/1/1"), ["tune.space_layout"]),
            ("objective", 3, ("--tune.objective=auc",), ["tune.objective", "eval_auc"]),
            ("count", 3, ("--tune.co_train=0",), ["tune.co_train", "from 1"])):
        proc = tune(r, ranks, deck, "bad_" + name, *options)
        text = proc.stdout + proc.stderr
        assert proc.returncode == BAD_INPUT, f"{name}: exit {proc.returncode}\n{text[-3000:]}"
        for needle in needles:
            assert needle in text, f"{name}: message lacks '{needle}':\n{text[-3000:]}"
        print(f"{name}: refused, message ok")


# [models] share_tables: two models train one set of embedding tables.
SHARE_DECK = """
[models]
names = twin_a, twin_b
share_tables = twin_a, twin_b
""" + ONE_OF_EACH + """
[optim]
sparse = sgd
sparse_lr = 0.05

[train]
batch_size = 128
steps = 60

[store]
mode = ps

[model.twin_a]
kind = dlrm

[model.twin_b]
kind = dlrm
"""


def case_share_tables(r):
    """Two identical models sharing their tables see the same batches and send the
    same row gradients; the servers sum them (exactly 2g) and take one SGD step, so
    each twin ends bit-identical to the model alone with twice the sparse learning
    rate, and not to the model alone with its own. Two different models sharing
    tables on 2 trainers each end the same on every run (the sums' fixed order);
    the borrower's servers hold nothing. Bad settings are refused naming the key."""
    deck = write_deck(r, "twins.ini", SHARE_DECK)
    train(r, 6, deck, "twins")
    _, twins = summaries(r, "twins")
    train(r, 3, deck, "alone_2lr", "--models.only=twin_a", "--optim.sparse_lr=0.1")
    _, doubled = summaries(r, "alone_2lr")
    train(r, 3, deck, "alone_lr", "--models.only=twin_a")
    _, own = summaries(r, "alone_lr")
    for name in ("twin_a", "twin_b"):
        assert twins[name]["params_digest"] == doubled["twin_a"]["params_digest"], (name, twins[name]["params_digest"])
        assert twins[name]["eval_auc"] == doubled["twin_a"]["eval_auc"]
    assert twins["twin_a"]["params_digest"] != own["twin_a"]["params_digest"], "the twins did not share their rows"
    print("twins sharing tables == one model with twice the sparse lr, bit for bit")

    different = SHARE_DECK.replace("names = twin_a, twin_b", "names = ctr_a, ctr_b").replace(
        "share_tables = twin_a, twin_b", "share_tables = ctr_a, ctr_b").replace(
        "sparse = sgd", "sparse = adagrad").replace("trainers = 1", "trainers = 2").replace(
        "[model.twin_a]\nkind = dlrm", "[model.ctr_a]\nkind = dlrm").replace(
        "[model.twin_b]\nkind = dlrm", "[model.ctr_b]\nkind = dlrm\ntop_mlp = 64,16\noptim.dense_lr = 0.003")
    deck = write_deck(r, "different.ini", different)
    digests = []
    for run in ("first", "second"):
        train(r, 8, deck, run)
        job, models = summaries(r, run)
        assert job["share_tables"] == ["ctr_a", "ctr_b"], job
        digests.append({name: models[name]["params_digest"] for name in models})
        assert models["ctr_b"]["memory"]["server_bytes_per_row"] == 0, models["ctr_b"]["memory"]
        assert models["ctr_a"]["memory"]["server_bytes_per_row"] > 0, models["ctr_a"]["memory"]
    assert digests[0] == digests[1], digests
    train(r, 4, deck, "ctr_a_alone", "--models.only=ctr_a")
    _, alone = summaries(r, "ctr_a_alone")
    assert alone["ctr_a"]["params_digest"] != digests[0]["ctr_a"], "ctr_b's gradients did not reach the shared rows"
    print("two different models sharing tables: the same digests on every run")

    # Checkpoints: the owner's files hold the shared rows, the borrower's its own
    # state; a resume continues both to the numbers of the run in one go.
    ckpt = os.path.join(r.workdir, "ckpt")
    train(r, 8, deck, "to_40", "--train.steps=40", "--checkpoint.dir=" + ckpt, "--checkpoint.every_steps=20")
    train(r, 8, deck, "from_40", "--checkpoint.dir=" + ckpt, "--resume=latest")
    _, resumed = summaries(r, "from_40")
    for name in ("ctr_a", "ctr_b"):
        assert resumed[name]["checkpoints"]["resumed_from_step"] == 40, resumed[name]["checkpoints"]
        assert resumed[name]["params_digest"] == digests[0][name], (name, "resumed at 40 differs from the whole run")
    # The borrower's files hold no rows: alone it would resume with fresh tables.
    expect_refused(r, "share_resume_alone", 4, deck, "--models.only=ctr_b", "--checkpoint.dir=" + ckpt,
                   "--resume=latest", contains=["holds no embedding rows after 40 steps", "models.share_tables"])
    # Their latest checkpoints at different steps cannot continue together.
    os.remove(os.path.join(ckpt, "ctr_b", "ckpt-0000000040.h5"))
    expect_refused(r, "share_resume_apart", 8, deck, "--checkpoint.dir=" + ckpt, "--resume=latest",
                   contains=["resume from checkpoints of different steps (20 and 40)"])
    # A sharing model that cannot start (no checkpoint of its own to resume)
    # ends the job at once instead of leaving the other waiting for its requests.
    shutil.rmtree(os.path.join(ckpt, "ctr_b"))
    proc = launch(r, 8, deck, "share_missing", "--checkpoint.dir=" + ckpt, "--resume=latest")
    text = proc.stdout + proc.stderr
    assert proc.returncode == BAD_INPUT, (proc.returncode, text[-3000:])
    assert "no complete checkpoint" in text and "model 'ctr_b' could not start" in text, text[-3000:]
    print("shared tables resume exactly from their checkpoints; checkpoints of different steps, or missing, are refused")

    # A preemption stops every sharing model after the same step (they decide
    # each step together) and checkpoints both; the requeued job ends as one run would.
    slow = ["--links.network_gbps=1", "--links.network_latency_us=20000", "--train.steps=120",
            "--output.metrics_every=10"]
    train(r, 8, deck, "slow_whole", *slow)
    _, slow_whole = summaries(r, "slow_whole")
    pckpt = os.path.join(r.workdir, "pckpt")
    job = launch(r, 8, deck, "preempted", *slow, "--checkpoint.dir=" + pckpt, popen=True)
    deadline = time.time() + 120
    metrics = [os.path.join(r.workdir, "preempted", name, "metrics.jsonl") for name in ("ctr_a", "ctr_b")]
    while time.time() < deadline and not all(os.path.exists(m) and os.path.getsize(m) > 0 for m in metrics):
        assert job.poll() is None, "the job ended before it was signalled:\n" + job.stdout.read()
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGUSR1)
    out, _ = job.communicate(timeout=300)
    assert job.returncode == PREEMPTED, f"exit {job.returncode}, expected {PREEMPTED}:\n{out[-3000:]}"
    stops = sorted(line.split("stopping after step ")[1].split()[0] for line in out.splitlines()
                   if "stopping after step" in line)
    assert len(stops) == 2 and stops[0] == stops[1], (stops, out[-3000:])
    train(r, 8, deck, "preempted", *slow, "--checkpoint.dir=" + pckpt, "--resume=latest")
    _, continued = summaries(r, "preempted")
    for name in ("ctr_a", "ctr_b"):
        assert continued[name]["params_digest"] == slow_whole[name]["params_digest"], (name, "preempted + resumed")
    print(f"preempted: both models stopped after step {stops[0]}, checkpointed, and resumed exactly")
    deck = write_deck(r, "twins.ini", SHARE_DECK)
    expect_refused(r, "share_tiered", 6, deck, "--store.mode=tiered",
                   contains=["model 'twin_a'", "models.share_tables", "store.mode = tiered", "store.mode = ps"])
    expect_refused(r, "share_trainers", 7, deck, "--model.twin_b.layout.trainers=2",
                   contains=["model 'twin_b'", "layout.trainers", "unlike 'twin_a'"])
    expect_refused(r, "share_producers", 7, deck, "--model.twin_b.layout.producers=2",
                   "--model.twin_b.layout.trainers=1", contains=["layout.producers", "unlike 'twin_a'"])
    expect_refused(r, "share_lr", 6, deck, "--model.twin_b.optim.sparse_lr=0.2",
                   contains=["optim.sparse_lr", "one sparse optimizer"])
    expect_refused(r, "share_unknown", 6, deck, "--models.share_tables=twin_a,nope",
                   contains=["'nope'", "twin_a, twin_b"])
    expect_refused(r, "share_one", 6, deck, "--models.share_tables=twin_a",
                   contains=["fewer than two models"])


if __name__ == "__main__":
    run_case_from_command_line({name[5:]: fn for name, fn in globals().items() if name.startswith("case_")})
