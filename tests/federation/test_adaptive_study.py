"""The adaptive-liar study's summary (``simulations/studies/byzantine.py --adaptive-summary``)
keeps what it was given apart: honest from attacked runs, and each clipping radius its own row."""

from __future__ import annotations

import pytest

from tests.helpers.sims import script

byzantine = script("byzantine")


def _rec(seed, rule, honest, value, tau=None, flagged=None):
    r = {"algorithm": "fdbnl", "k": 5, "seed": seed, "rule": rule, "honest": honest,
         "liars": [] if honest else [1], "metric": "shd_w", "value": value,
         "status": "completed", "round_s": 0.02,
         "robustness": {"flagged": flagged or {}}}
    if tau is not None:
        r["clip_radius"] = tau
    return r


def test_adaptive_summary_keeps_honest_attacked_and_radii_apart():
    records = [_rec(1, "mean", True, 1.0), _rec(2, "mean", True, 3.0),
               _rec(1, "mean", False, 9.0, flagged={"client 1": 2}), _rec(2, "mean", False, 7.0),
               _rec(1, "clipped-mean", True, 0.0, tau=0.5),
               _rec(1, "clipped-mean", False, 4.0, tau=0.5),
               _rec(1, "clipped-mean", False, 6.0, tau=1.0)]
    rows = {x["rule"]: x for x in byzantine.summarize_adaptive(records)["rows"]}
    assert list(rows) == ["mean", "clipped-mean (tau 0.5)", "clipped-mean (tau 1)"]
    mean = rows["mean"]
    assert mean["honest"] == pytest.approx((2.0, 2 ** 0.5))
    assert mean["attacked"] == pytest.approx((8.0, 2 ** 0.5))
    assert mean["liars"] == [1] and mean["flagged"] == ["client 1"]
    assert rows["clipped-mean (tau 0.5)"]["attacked_values"] == [4.0]
    assert rows["clipped-mean (tau 1)"]["attacked_values"] == [6.0]
    assert rows["clipped-mean (tau 1)"]["honest_values"] == []
