#!/usr/bin/env python3
"""The bad-input census (issue 15): table-driven end-to-end cases of what a
careless or hostile user feeds strata — decks, command lines, data files,
checkpoints, output folders, tuner settings, and bad input that only a running
role sees. Each case asserts

  - the exit code (2 for bad input, README "Exit codes"),
  - that the message names what is wrong (the key, the file, the line),
  - one 'strata: error' message and no MPI_ABORT banner,
  - that nothing on disk changed: every case points its outputs at the folders of
    an earlier good run (its output.dir and checkpoint.dir, or a copy of its
    checkpoint), and their checksums are the same before and after.

One ctest entry per group (bad_input_deck, bad_input_data, bad_input_checkpoint,
bad_input_output, bad_input_tune, bad_input_running); the census prints its counts.

usage: bad_input_census.py GROUP --strata BIN --mpiexec MPIEXEC --workdir DIR
"""
import hashlib
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from strata_e2e import TINY, run_case_from_command_line, write_event_file  # noqa: E402

BAD_INPUT = 2


def snapshot(directory):
    """{relative path: sha256} of every file under directory."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, directory)] = hashlib.sha256(f.read()).hexdigest()
    return found


class Census:
    """A good run's folders (kept), then bad cases that must leave them as they are."""

    def __init__(self, r):
        self.r = r
        self.work = r.workdir
        self.out = os.path.join(self.work, "good_out")
        self.ckpt = os.path.join(self.work, "good_ckpt")
        self.passed = 0
        proc = self.strata("train", ["--config", TINY, "--output.dir=" + self.out, "--checkpoint.dir=" + self.ckpt,
                                     "--checkpoint.every_steps=20"], ranks=3)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        self.checkpoint = sorted(f for f in os.listdir(self.ckpt) if f.endswith(".h5"))[-1]
        self.kept = {self.out: snapshot(self.out), self.ckpt: snapshot(self.ckpt)}

    def strata(self, command, args, ranks=3):
        cmd = [self.r.mpiexec, "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        return subprocess.run(cmd + [self.r.strata, command, *args], capture_output=True, text=True, timeout=300,
                              env=env)

    def path(self, name, text=None, data=None):
        """A file in the work folder, written from text or bytes."""
        p = os.path.join(self.work, name)
        if text is not None:
            with open(p, "w") as f:
                f.write(text)
        if data is not None:
            with open(p, "wb") as f:
                f.write(data)
        return p

    def case(self, name, args, needles, ranks=3, command="train", deck=TINY, code=BAD_INPUT, keep_outputs=True):
        """One bad input: args go after `strata COMMAND --config DECK`. keep_outputs:
        the run is pointed at the good run's folders (a check before the start must
        refuse it); False: it gets folders of its own (bad input found while running)."""
        full = (["--config", deck] if deck else []) + list(args)
        if not keep_outputs and command == "train" and not any(a.startswith("--output.dir") for a in args):
            full.append("--output.dir=" + os.path.join(self.work, "out_" + name))
        if keep_outputs:
            if not any(a.startswith("--output.dir") for a in args):
                full.append("--output.dir=" + self.out)
            if command == "train" and not any(a.startswith("--checkpoint.") for a in args):
                full += ["--checkpoint.dir=" + self.ckpt, "--checkpoint.every_steps=5"]
        proc = self.strata(command, full, ranks=ranks)
        text = proc.stdout + proc.stderr
        where = f"case {name}: strata {command} {' '.join(full)}\n{text[-3000:]}"
        assert proc.returncode == code, f"exit code {proc.returncode}, expected {code}; {where}"
        for needle in needles:
            assert needle in text, f"the message lacks {needle!r}; {where}"
        assert text.count("strata: error") == 1, f"not exactly one error message; {where}"
        assert "MPI_ABORT" not in text and "ORTE_ERROR_LOG" not in text, f"an MPI abort banner; {where}"
        for directory, before in self.kept.items():
            assert snapshot(directory) == before, f"{directory} changed; {where}"
        self.passed += 1
        print(f"  {name}: exit {proc.returncode}, names {needles}, nothing changed", flush=True)

    def done(self, group):
        print(f"census {group}: {self.passed} bad inputs, each exit {BAD_INPUT} with one message naming the cause, "
              f"no output or checkpoint changed")


def case_deck(r):
    c = Census(r)
    c.case("unknown_key", ["--train.batchsize=4"], ["train.batchsize", "train.batch_size"])
    c.case("unknown_section", ["--trian.steps=4"], ["trian.steps"])
    c.case("bad_choice", ["--store.mode=cache"], ["store.mode", "ps, tiered"])
    c.case("bad_policy", ["--store.policy=fifo"], ["store.policy", "lookahead"])
    c.case("bad_type_int", ["--train.batch_size=many"], ["train.batch_size"])
    c.case("bad_type_float", ["--optim.dense_lr=fast"], ["optim.dense_lr"])
    c.case("bad_type_bool", ["--train.eval=maybe"], ["train.eval"])
    c.case("batch_zero", ["--train.batch_size=0"], ["train.batch_size"])
    c.case("batch_negative", ["--train.batch_size=-4"], ["train.batch_size"])
    c.case("batch_huge", ["--train.batch_size=1000000000000"], ["train.batch_size"])
    c.case("steps_negative", ["--train.steps=-1"], ["train.steps"])
    c.case("lr_nan", ["--optim.dense_lr=nan"], ["optim.dense_lr", "finite"])
    c.case("lr_inf", ["--optim.sparse_lr=inf"], ["optim.sparse_lr"])
    c.case("embedding_dim_zero", ["--model.embedding_dim=0"], ["model.embedding_dim"])
    c.case("bottom_mlp_mismatch", ["--model.bottom_mlp=32,7"], ["model.bottom_mlp"])
    c.case("bottom_mlp_garbage", ["--model.bottom_mlp=32,x"], ["model.bottom_mlp"])
    c.case("model_kind", ["--model.kind=transformer"], ["model.kind", "dlrm"])
    c.case("sequence_model_on_clicks", ["--model.kind=hstu"], ["model.kind = hstu", "data.source"])
    c.case("decay_range", ["--store.policy=lfu_decay", "--store.decay=1.5"], ["store.decay"])
    c.case("horizon_too_far", ["--store.horizon=100000"], ["store.horizon"])
    c.case("depth_negative", ["--store.prefetch_depth=-1"], ["store.prefetch_depth"])
    c.case("l1_beyond_memory", ["--store.mode=tiered", "--store.l1_mb=1000000000"], ["store.l1_mb"])
    c.case("l2_beyond_memory", ["--store.mode=tiered", "--store.l2_mb=1000000000"], ["store.l2_mb"])
    c.case("admission_counters", ["--store.min_count=2", "--store.admission_counters=1e10"],
           ["store.admission_counters"])
    c.case("layout_ranks", ["--layout.trainers=2"], ["layout needs 4", "3 ranks"])
    c.case("layout_no_producer", ["--layout.producers=0"], ["layout.producers"])
    c.case("layout_product", ["--layout.trainers=1", "--layout.ep=2"], ["layout.ep"])
    c.case("layout_sp", ["--layout.sp=2"], ["layout.sp"])
    c.case("tasks_zero", ["--data.synthetic_tasks=0", "--model.kind=mmoe"], ["data.synthetic_tasks"])
    c.case("single_task_model_on_tasks", ["--data.synthetic_tasks=2"], ["model.kind = dlrm", "data.synthetic_tasks"])
    c.case("ple_levels", ["--model.kind=ple", "--data.synthetic_tasks=2", "--model.ple_levels=9"], ["model.ple_levels"])
    c.case("task_experts_negative", ["--model.kind=ple", "--model.task_experts=-1"], ["model.task_experts"])
    c.case("tower_mlp_garbage", ["--model.kind=mmoe", "--model.tower_mlp=8,,4"], ["model.tower_mlp"])
    c.case("eval_capacity_negative", ["--model.kind=moe", "--model.eval_capacity_factor=-1"],
           ["model.eval_capacity_factor"])
    c.case("stall_timeout_negative", ["--runtime.stall_timeout_s=-3"], ["runtime.stall_timeout_s"])
    c.case("blas_threads_negative", ["--runtime.blas_threads=-1"], ["runtime.blas_threads"])
    c.case("missing_deck", [], ["/nonexistent/deck.ini"], deck="/nonexistent/deck.ini")
    c.case("deck_is_folder", [], [c.work], deck=c.work)
    c.case("no_deck", [], ["--config DECK"], deck=None)
    binary = c.path("binary.ini", data=bytes(range(256)) * 4)
    c.case("binary_deck", [], [binary], deck=binary)
    duplicate = c.path("duplicate.ini", "[train]\nbatch_size = 64\nsteps = 10\nbatch_size = 32\n")
    c.case("duplicate_key", [], ["train.batch_size", duplicate, "lines 2 and 4"], deck=duplicate)
    no_equals = c.path("no_equals.ini", "[train]\nbatch_size 64\n")
    c.case("line_without_equals", [], [no_equals, "line 2"], deck=no_equals)
    unknown = c.path("unknown.ini", "[train]\nbatch_size = 64\nlearning_rate = 0.1\n")
    c.case("deck_unknown_key", [], ["train.learning_rate", unknown, "line 3"], deck=unknown)
    unclosed = c.path("unclosed.ini", "[train\nbatch_size = 64\n")
    c.case("unclosed_section", [], [unclosed, "line 1"], deck=unclosed)
    c.case("unknown_command", [], ["unknown command 'trian'"], command="trian", deck=None)
    # Found by fuzz_deck: Boost's message filling looped for ever on these tokens.
    c.case("parser_placeholder_arg", ["--train.batch_size=1%value%"], ["%value%", "option parser"])
    placeholder = c.path("placeholder.ini", "[train]\nsteps = 4\nbatch_size = 06 %value%') for x\n")
    c.case("parser_placeholder_deck", [], [placeholder, "line 3", "%value%"], deck=placeholder)
    c.done("deck")


def case_data(r):
    c = Census(r)
    c.case("missing_criteo", ["--data.source=criteo", "--data.train=/nonexistent/train.tsv"],
           ["/nonexistent/train.tsv"])
    c.case("criteo_is_folder", ["--data.source=criteo", "--data.train=" + c.work], [c.work])
    lines = ["1\t" + "\t".join(str(i) for i in range(13)) + "\t" + "\t".join("%08x" % (i * 7919) for i in range(26))]
    good = lines[0]
    criteo = c.path("bad.tsv", "\n".join([good] * 50 + ["1\t2\tthree"] + [good] * 50) + "\n")
    c.case("criteo_strict_line", ["--data.source=criteo", "--data.train=" + criteo, "--data.strict=true"],
           [criteo + ":51"], keep_outputs=False)
    empty = c.path("empty.tsv", "")
    c.case("criteo_empty", ["--data.source=criteo", "--data.train=" + empty], [empty], keep_outputs=False)
    csv = c.path("clicks.csv", "1,0.5,7\n0,0.25,9\n1,x,3\n" * 20)
    c.case("csv_bad_columns", ["--data.source=csv", "--data.train=" + csv, "--data.csv_columns=label,dense:1,bogus"],
           ["data.csv_columns", "bogus"])
    c.case("csv_strict_line", ["--data.source=csv", "--data.train=" + csv, "--data.csv_columns=label,dense:1,cat:1",
                               "--data.strict=true"], [csv + ":3"], keep_outputs=False)
    tasks_csv = c.path("tasks.csv", "1,0.5,0,a\n0,0.25,1,b\n" * 10 + "1,0.5,2,c\n")
    c.case("csv_strict_second_label", ["--data.source=csv", "--data.train=" + tasks_csv, "--model.kind=mmoe",
                                       "--data.csv_columns=label,dense:1,label,cat:1", "--data.strict=true"],
           [tasks_csv + ":21", "column 3"], keep_outputs=False)
    c.case("csv_too_many_labels", ["--data.source=csv", "--data.train=" + tasks_csv, "--model.kind=mmoe",
                                   "--data.csv_columns=" + ",".join(["label"] * 17)], ["data.csv_columns", "16"])
    text_h5 = c.path("not.h5", "this is not an HDF5 file\n")
    c.case("hdf5_not_hdf5", ["--data.source=hdf5", "--data.train=" + text_h5], [text_h5])
    truncated = c.path("truncated.h5", data=open(os.path.join(c.ckpt, c.checkpoint), "rb").read()[:3000])
    c.case("hdf5_truncated", ["--data.source=hdf5", "--data.train=" + truncated], [truncated])
    c.case("hdf5_checkpoint_as_data", ["--data.source=hdf5", "--data.train=" + os.path.join(c.ckpt, c.checkpoint)],
           [c.checkpoint])
    events = c.path("events.txt")
    write_event_file(events)
    bad_line = 1 + next(i for i, line in enumerate(open(events)) if "yesterday" in line)
    sequences = ["--data.source=sequences", "--data.train=" + events, "--data.sequence_side_columns=category",
                 "--data.sequence_task=next_item", "--model.kind=sasrec", "--model.sasrec_max_len=50",
                 "--data.max_seq_len=50", "--train.eval=false"]
    c.case("events_strict_line", sequences + ["--data.strict=true"], [f"{events}:{bad_line}"], keep_outputs=False)
    c.case("events_missing", [a if not a.startswith("--data.train") else "--data.train=/nonexistent/ev.txt"
                              for a in sequences], ["/nonexistent/ev.txt"])
    c.case("sequence_length_spec", ["--data.source=synthetic_sequences", "--data.sequence_length=zipf:x",
                                    "--model.kind=din"], ["data.sequence_length"])
    c.done("data")


def case_checkpoint(r):
    c = Census(r)
    newest = os.path.join(c.ckpt, c.checkpoint)
    c.case("resume_missing_file", ["--checkpoint.resume=/nonexistent/ckpt-10.h5",
                                   "--output.dir=" + os.path.join(c.work, "o1")], ["/nonexistent/ckpt-10.h5"],
           keep_outputs=False)
    c.case("resume_latest_empty", ["--checkpoint.resume=latest", "--checkpoint.dir=" + os.path.join(c.work, "none"),
                                   "--output.dir=" + os.path.join(c.work, "o2")], ["checkpoint"], keep_outputs=False)
    copy = os.path.join(c.work, "copy_ckpt")
    os.makedirs(copy, exist_ok=True)
    truncated = os.path.join(copy, "ckpt-truncated.h5")
    with open(newest, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:4000])
    c.case("resume_truncated", ["--checkpoint.resume=" + truncated, "--output.dir=" + os.path.join(c.work, "o3")],
           [truncated], keep_outputs=False)
    c.case("resume_text_file", ["--checkpoint.resume=" + c.path("fake.h5", "not a checkpoint\n"),
                                "--output.dir=" + os.path.join(c.work, "o4")], ["fake.h5"], keep_outputs=False)
    c.case("resume_other_deck", ["--checkpoint.resume=" + newest, "--train.seed=7",
                                 "--checkpoint.dir=" + os.path.join(c.work, "ck5"),
                                 "--output.dir=" + os.path.join(c.work, "o5")], ["train.seed"], keep_outputs=False)
    c.case("resume_other_model", ["--checkpoint.resume=" + newest, "--model.embedding_dim=16",
                                  "--model.bottom_mlp=32,16", "--checkpoint.dir=" + os.path.join(c.work, "ck6"),
                                  "--output.dir=" + os.path.join(c.work, "o6")], ["embedding"], keep_outputs=False)
    c.case("fresh_run_in_used_dir", ["--checkpoint.dir=" + c.ckpt, "--checkpoint.every_steps=5",
                                     "--output.dir=" + os.path.join(c.work, "o7")], [c.ckpt, "--resume"],
           keep_outputs=False)
    c.case("checkpoint_dir_is_file", ["--checkpoint.dir=" + newest, "--checkpoint.every_steps=5"], [newest],
           keep_outputs=False)
    c.case("every_steps_negative", ["--checkpoint.every_steps=-5"], ["checkpoint.every_steps"])
    c.done("checkpoint")


def case_output(r):
    c = Census(r)
    c.case("output_dir_of_earlier_run", ["--output.dir=" + c.out], [c.out, "output.overwrite"])
    c.case("output_dir_is_file", ["--output.dir=" + os.path.join(c.out, "summary.json")], ["summary.json"])
    c.case("tune_into_earlier_run", ["--output.dir=" + c.out, "--tune.trials=1", "--tune.space_l1_mb=1|2"], [c.out],
           command="tune")
    good = "1\t" + "\t".join(str(i) for i in range(13)) + "\t" + "\t".join("%08x" % (i * 7919) for i in range(26))
    criteo = c.path("ok.tsv", (good + "\n") * 20)
    c.case("convert_without_force", ["--from", "criteo", "--input", criteo, "--to", os.path.join(c.out, "summary.json")],
           ["summary.json", "--force"], command="convert", deck=None, ranks=1, keep_outputs=False)
    c.case("convert_missing_input", ["--from", "criteo", "--input", "/nonexistent/in.tsv", "--to",
                                     os.path.join(c.work, "x.h5")], ["/nonexistent/in.tsv"], command="convert",
           deck=None, ranks=1, keep_outputs=False)
    c.done("output")


def case_tune(r):
    c = Census(r)
    out = ["--output.dir=" + os.path.join(c.work, "tune_out")]
    c.case("tune_no_deck", out, ["--config DECK"], command="tune", deck=None, keep_outputs=False)
    c.case("tune_unknown_plugin", out + ["--tune.plugin=annealing"], ["tune.plugin", "annealing"], command="tune",
           keep_outputs=False)
    c.case("tune_unknown_sampler", out + ["--tune.plugin=optuna", "--tune.sampler=bayes"], ["tune.sampler"],
           command="tune", keep_outputs=False)
    c.case("tune_trials_zero", out + ["--tune.trials=0"], ["tune.trials"], command="tune", keep_outputs=False)
    c.case("tune_bad_space", out + ["--tune.space_l1_mb=a:b"], ["tune.space_l1_mb"], command="tune",
           keep_outputs=False)
    c.case("tune_bad_layout_space", out + ["--tune.space_layout=1/x/1"], ["tune.space_layout"], command="tune",
           keep_outputs=False)
    c.case("tune_missing_plugin", out + ["--tune.plugin=/nonexistent/plugin.so"], ["/nonexistent/plugin.so"],
           command="tune", keep_outputs=False)
    c.case("tune_garbage_study", out + ["--tune.plugin=optuna", "--tune.study=" + c.path("study.log", data=b"\xff\xfe{{{")],
           ["study.log"], command="tune", keep_outputs=False)
    c.done("tune")


def case_running(r):
    """Bad input only a running role can see: exit 2 on every rank, one message."""
    c = Census(r)
    sasrec = ["--data.source=synthetic_sequences", "--data.sequence_task=next_item", "--data.sequence_users=300",
              "--data.sequence_items=500", "--data.sequence_length=uniform:20:60", "--data.max_seq_len=0",
              "--model.kind=sasrec", "--model.sasrec_max_len=8", "--train.eval=false"]
    c.case("history_longer_than_model", sasrec + ["--layout.trainers=2"], ["model.sasrec_max_len = 8"], ranks=4,
           keep_outputs=False)
    c.case("l1_below_window", ["--store.mode=tiered", "--store.l1_mb=0.001"], ["store.l1_mb", "prefetch window"],
           keep_outputs=False)
    c.done("running")


if __name__ == "__main__":
    run_case_from_command_line({name[5:]: fn for name, fn in globals().items() if name.startswith("case_")})
