"""What the benchmark scripts share: the repository root, the build folder,
the mpirun command for this machine, and the `ratio NAME: VALUE` lines that
every benchmark prints last and that a script collects from the programs it runs."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_build_dir():
    return os.path.join(ROOT, os.environ.get("STRATA_BUILD_DIR", "build"))


def mpirun(ranks):
    """mpirun for `ranks` ranks sharing this machine's cores, one BLAS thread each."""
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe", "--bind-to", "none", "-x", "OPENBLAS_NUM_THREADS=1",
           "--mca", "btl", "self,vader"]  # one machine: shared memory, no TCP listeners
    return cmd + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def dlrm_deck(mode, trainers, batch, steps, out_dir, vocab=100000, zipf=1.05, data=""):
    """strata's options for the DLRM of bench_dlrm.py (13-64-16 bottom, 26 tables x
    dim 16, 367-64-32-1 top, Adam 1e-3 dense, Adagrad 0.05 sparse; Zipf `zipf` keys
    over `vocab` rows per table, or Criteo TSV `data`) with global batch `batch`
    split over `trainers`, 1 producer and 1 server; after inputs/default.ini."""
    deck = ["--config", os.path.join(ROOT, "inputs", "default.ini"),
            f"--store.mode={mode}", f"--layout.trainers={trainers}", "--layout.producers=1", "--layout.servers=1",
            f"--train.batch_size={batch // trainers}", f"--train.steps={steps}",
            "--train.eval=false", f"--output.dir={out_dir}", "--output.progress_every=1000000",
            "--model.embedding_dim=16", "--model.bottom_mlp=64,16", "--model.top_mlp=64,32",
            "--optim.dense=adam", "--optim.dense_lr=0.001", "--optim.sparse=adagrad", "--optim.sparse_lr=0.05"]
    if data:
        return deck + ["--data.source=criteo", f"--data.train={data}"]
    return deck + ["--data.source=synthetic", f"--data.vocab_sizes={vocab}", f"--data.zipf_exponent={zipf}",
                   "--data.num_tables=26", "--data.num_dense=13",
                   f"--data.synthetic_train_samples={max(1 << 20, steps * batch)}"]


def collect_ratios(output, ratios, suffix="", indent="   "):
    """Prints a program's output indented, except its `ratio NAME: VALUE` lines,
    which are appended to `ratios` as (NAME + suffix, VALUE) for the caller to print last."""
    for line in output.splitlines():
        if line.startswith("ratio"):
            name, value = line.rsplit(":", 1)
            ratios.append((name.replace("ratio ", "") + suffix, float(value)))
        else:
            print(indent + line)
