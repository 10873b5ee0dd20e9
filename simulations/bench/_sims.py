"""Makes the shared code importable from a script of this folder, however it is run.

``python simulations/<folder>/<script>.py`` puts only the script's folder on ``sys.path``.
Every script imports this module first: it adds ``simulations/`` (``harness``, ``dbn_common``)
and imports ``harness``, which adds the script folders (``paper/``, ``studies/``, ``bench/``:
scripts import each other across them). The same file sits in each folder.
"""

import sys
from pathlib import Path

_SIM_DIR = str(Path(__file__).resolve().parents[1])
if _SIM_DIR not in sys.path:
    sys.path.insert(0, _SIM_DIR)

import harness  # noqa: E402, F401 - puts the script folders on sys.path
