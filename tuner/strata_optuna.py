"""strata_optuna: the Python side of strata's optuna tuner plugin (ask/tell).

The plugin (plugins/optuna) embeds CPython, imports this module and drives one
TunerSession per search. A study lives in a file so that a later `strata tune`
continues it and several processes (Slurm array tasks) can share it:
  - a name ending in .db: SQLite (sqlite:////abs/path.db);
  - any URL with "://": passed to Optuna as is (e.g. postgresql://...);
  - any other name: Optuna's JournalFileStorage, safe for concurrent writers;
  - empty: an in-memory study that ends with the process.

Errors meant for the user are TunerError; the plugin turns them into
strata::Error. Their message may end with a line "fix: ...".
"""
import math
import os
import warnings

STUDY_NAME = "strata"


class TunerError(Exception):
    """A mistake the user can fix (bad sampler, bad study file)."""


try:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    from optuna.trial import TrialState
except ImportError as error:  # pragma: no cover - depends on the machine
    raise TunerError(f"cannot import optuna ({error})\n"
                     "fix: install Debian's python3-optuna (scripts/deps.sh)") from error

# Journal storage and constant_liar are marked experimental in Optuna 3.1; the
# warnings say nothing the user can act on.
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
optuna.logging.set_verbosity(optuna.logging.WARNING)

_STATES = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED, "failed": TrialState.FAIL}


def _distribution(knob):
    name, kind = knob["name"], knob["type"]
    if kind == "integer":
        return IntDistribution(int(math.ceil(knob["low"])), int(math.floor(knob["high"])), log=knob["log"])
    if kind == "float":
        return FloatDistribution(float(knob["low"]), float(knob["high"]), log=knob["log"])
    if kind == "categorical":
        return CategoricalDistribution(tuple(knob["candidates"]))
    raise TunerError(f"knob {name} has an unknown type {kind!r}")


def _storage(study):
    if not study:
        return None
    if "://" in study:
        return study
    path = os.path.abspath(study)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        raise TunerError(f"cannot create the folder of study file {path}: {error}\n"
                         "fix: set tune.study to a writable path") from error
    if path.endswith(".db"):
        return f"sqlite:///{path}"
    try:
        return optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(path))
    except OSError as error:
        raise TunerError(f"cannot open study journal {path}: {error}\n"
                         "fix: set tune.study to a writable path") from error
    except Exception as error:  # a damaged or foreign file: Optuna replays it as JSON lines
        raise TunerError(f"study journal {path} is not an Optuna journal ({type(error).__name__}: {error})\n"
                         "fix: point tune.study at a journal strata wrote, or at a new path "
                         "(a damaged journal cannot be continued)") from error


def _sampler(name, seed, knobs):
    if name == "tpe":
        # constant_liar: concurrent workers sharing a study do not all pile onto
        # the same promising point while their trials are still running.
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        categorical = [k["name"] for k in knobs if k["type"] == "categorical"]
        if categorical:
            raise TunerError("the cmaes sampler searches numeric knobs only; categorical: "
                             + ", ".join(categorical) + "\n"
                             "fix: use tune.sampler = tpe, or give those knobs a lo:hi range or leave them empty")
        return optuna.samplers.CmaEsSampler(seed=seed)
    raise TunerError(f"unknown sampler {name!r}\nfix: set tune.sampler to tpe, random or cmaes")


class TunerSession:
    """One search: asks trials from a (possibly shared, persistent) study and tells their results."""

    def __init__(self, knobs, objective_name, direction, study="", sampler="tpe", seed=0):
        if direction not in ("maximize", "minimize"):
            raise TunerError(f"unknown direction {direction!r}")
        self.knobs = knobs
        seed = int(seed) % 2**32  # numpy's generators take 32-bit seeds
        self.distributions = {k["name"]: _distribution(k) for k in knobs}
        storage = _storage(study)
        try:
            self.study = optuna.create_study(storage=storage, study_name=STUDY_NAME, direction=direction,
                                             sampler=_sampler(sampler, seed, knobs), load_if_exists=True)
        except TunerError:
            raise
        except Exception as error:
            raise TunerError(f"cannot open study {study!r}: {type(error).__name__}: {error}\n"
                             "fix: point tune.study at an Optuna journal file or .db, or at a new path") from error
        if self.study.direction.name.lower() != direction:
            raise TunerError(f"study {study!r} {self.study.direction.name.lower()}s its objective, "
                             f"this search would {direction} it\n"
                             "fix: use another tune.study for this objective")
        old = self.study.user_attrs.get("objective")
        if old is not None and old != objective_name:
            raise TunerError(f"study {study!r} optimises {old}, not {objective_name}\n"
                             "fix: use another tune.study for this objective")
        if old is None:
            self.study.set_user_attr("objective", objective_name)
        self._check_same_space(study)
        self.pending = {}

    def _check_same_space(self, study):
        """Refuses a knob whose kind or candidates changed since the study's earlier trials.

        Optuna would otherwise fail inside ask(), leaving a trial RUNNING in the study.
        A numeric range may change; the kind (integer/float) and candidate sets may not.
        """
        seen = {}
        for trial in self.study.get_trials(deepcopy=False):
            seen.update(trial.distributions)
        for name, new in self.distributions.items():
            old = seen.get(name)
            if old is None:
                continue
            try:
                optuna.distributions.check_distribution_compatibility(old, new)
            except ValueError as error:
                raise TunerError(f"study {study!r} searched {name} as {old}, but this search declares {new} "
                                 f"({error})\nfix: keep the study's tune.space_* values for {name}, "
                                 "or start a new tune.study") from error

    def ask(self):
        """Returns (trial number, values in knob order); categorical values are candidate indexes."""
        trial = self.study.ask(self.distributions)
        self.pending[trial.number] = trial
        values = []
        for knob in self.knobs:
            value = trial.params[knob["name"]]
            if knob["type"] == "categorical":
                values.append(list(knob["candidates"]).index(value))
            elif knob["type"] == "integer":
                values.append(int(value))
            else:
                values.append(float(value))
        return trial.number, values

    def tell(self, number, state, value, reason):
        trial = self.pending.pop(number, None)
        if trial is None:
            raise TunerError(f"tell for trial {number}, which this session did not ask (or told already)")
        if state not in _STATES:
            raise TunerError(f"unknown trial state {state!r}")
        if reason:
            trial.set_user_attr("reason", reason)
        if state == "complete":
            self.study.tell(trial, float(value))
        else:
            self.study.tell(trial, state=_STATES[state])

    def trial_count(self):
        """Trials in the study, from every process that shares it."""
        return len(self.study.get_trials(deepcopy=False))
