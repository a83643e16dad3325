"""What the benchmark scripts share: the repository root, the build folder,
the mpirun command for this machine, and the `ratio NAME: VALUE` lines that
every benchmark prints last and that a script collects from the programs it runs."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_build_dir():
    return os.path.join(ROOT, os.environ.get("STRATA_BUILD_DIR", "build"))


def mpirun(ranks):
    """mpirun for `ranks` ranks sharing this machine's cores, one BLAS thread each."""
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe", "--bind-to", "none", "-x", "OPENBLAS_NUM_THREADS=1"]
    return cmd + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def collect_ratios(output, ratios, suffix="", indent="   "):
    """Prints a program's output indented, except its `ratio NAME: VALUE` lines,
    which are appended to `ratios` as (NAME + suffix, VALUE) for the caller to print last."""
    for line in output.splitlines():
        if line.startswith("ratio"):
            name, value = line.rsplit(":", 1)
            ratios.append((name.replace("ratio ", "") + suffix, float(value)))
        else:
            print(indent + line)
