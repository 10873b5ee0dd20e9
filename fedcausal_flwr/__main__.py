"""``python -m fedcausal_flwr new <algorithm> DIR``: write a starter Flower App.

The command lives with the other tools in :mod:`fedcausal_flwr.cli.starter` (its
:func:`~fedcausal_flwr.cli.starter.main`); this entry point hands it the command line.
"""

from __future__ import annotations

import sys

from fedcausal_flwr.cli.starter import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
