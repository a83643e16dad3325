#!/usr/bin/env python3
"""Prints an Optuna study as JSON for the tuner tests: one object per trial with
its number, state, value, params and the strata reason.

Usage: /usr/bin/python3 inspect_study.py STUDY_FILE (journal, or .db for SQLite)
"""
import json
import os
import sys
import warnings

import optuna

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
optuna.logging.set_verbosity(optuna.logging.WARNING)

path = os.path.abspath(sys.argv[1])
if path.endswith(".db"):
    storage = f"sqlite:///{path}"
else:
    storage = optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(path))
study = optuna.load_study(study_name="strata", storage=storage)
print(json.dumps({
    "direction": study.direction.name.lower(),
    "objective": study.user_attrs.get("objective"),
    "trials": [{"number": t.number, "state": t.state.name.lower(), "value": t.value, "params": t.params,
                "reason": t.user_attrs.get("reason", "")} for t in study.trials],
}))
