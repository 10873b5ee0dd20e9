"""``python -m fedcausal_flwr new <algorithm> DIR``: write a starter Flower App.

``flwr new`` downloads its templates from the network; this writes one of the package's own
examples (:mod:`fedcausal_flwr.starter`) into ``DIR``, named after it. ``new --list`` lists the
algorithms. Exits 2 on a usage error (unknown algorithm, a non-empty ``DIR`` without
``--force``, a folder name Flower refuses).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    """The command line: ``new [--list] [--force] <algorithm> DIR``."""
    ap = argparse.ArgumentParser(prog="python -m fedcausal_flwr", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    new = sub.add_parser("new", help="write a starter Flower App for one algorithm")
    new.add_argument("algorithm", nargs="?", help="fdbnl, pfdbnl, fedgc, fedcf, fediv or vfedcd")
    new.add_argument("dir", nargs="?", type=Path, help="the App's folder (its name names it)")
    new.add_argument("--list", action="store_true", help="list the algorithms and exit")
    new.add_argument("--force", action="store_true",
                     help="write into a non-empty DIR (the starter's files are overwritten)")
    return ap


def next_steps(algorithm: str, target: Path) -> str:
    """What to run once the App is written."""
    return (f"Wrote the {algorithm} starter App to {target}. Next:\n"
            f"  python -m fedcausal_flwr.launch simulate --app {target} --nodes 2"
            "   # each node makes the example's data\n"
            f"  flwr build --app {target}                                  # its FAB\n"
            f"  {target}/README.md: the setting, your own CSVs (node config data-path)")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    from fedcausal_flwr import starter

    ap = parser()
    args = ap.parse_args(argv)
    if args.list:
        for name in starter.algorithms():
            print(name)
        return 0
    if args.algorithm is None or args.dir is None:
        ap.error(f"new needs an algorithm and a DIR; algorithms: "
                 f"{', '.join(starter.algorithms())}")
    try:
        starter.write_app(args.algorithm, args.dir, force=args.force)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(next_steps(args.algorithm.strip().lower(), args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
