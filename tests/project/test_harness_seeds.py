"""``--seeds`` of every script under ``simulations/`` (one place: ``simulations/harness.py``).

One number is one seed, never a count; ``a..b`` is an inclusive range; ``--n-seeds N`` is the
count 0..N-1 (issue 34: ``--seeds 100`` once ran seeds 0..99 and ``--seeds 0`` none).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "simulations"))
import harness  # noqa: E402


@pytest.mark.parametrize(("argv", "seeds"), [
    (["--seeds", "7"], [7]),
    (["--seeds", "0"], [0]),
    (["--seeds", "3", "7"], [3, 7]),
    (["--seeds", "100..103"], [100, 101, 102, 103]),
    (["--seeds", "5..5", "9"], [5, 9]),
    (["--n-seeds", "3"], [0, 1, 2]),
    ([], [0, 1, 2, 3]),
])
def test_seeds_on_the_command_line(argv, seeds):
    ap = harness.parser("x", seeds=4)
    assert ap.parse_args(argv).seeds == seeds


def test_a_list_default_and_no_n_seeds_left_on_the_namespace():
    ns = harness.parser("x", seeds=[100, 101]).parse_args([])
    assert ns.seeds == [100, 101] and not hasattr(ns, "n_seeds")


@pytest.mark.parametrize("argv", [["--seeds", "3", "--n-seeds", "2"], ["--seeds", "9..3"],
                                  ["--seeds", "x"], ["--n-seeds", "0"]])
def test_bad_seeds_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        harness.parser("x", seeds=4).parse_args(argv)
    assert "seeds" in capsys.readouterr().err


def test_an_int_default_is_a_count():
    assert harness.seed_list(3) == [0, 1, 2] and harness.seed_list(["3"]) == [3]
