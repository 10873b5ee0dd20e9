"""The scripts of ``simulations/``, imported as their own folder would: ``harness`` first,
which puts ``simulations/`` and every script folder on ``sys.path`` for good (scripts import
each other across folders, also later, as ``tables.py`` does)."""

import importlib
import sys
from pathlib import Path
from types import ModuleType

SIM = Path(__file__).resolve().parents[2] / "simulations"


def script(name: str) -> ModuleType:
    """The script ``simulations/<group>/<name>.py``, imported."""
    if str(SIM) not in sys.path:
        sys.path.insert(0, str(SIM))
    importlib.import_module("harness")
    return importlib.import_module(name)
