"""One knowledge object for every family (issue 33): parsed once when the settings are made,
one wire form for its masks (the server sends masks, no client parses knowledge text) and one
parser for a state-space model's known-zero blocks; the launcher's knowledge file feeds all."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr import knowledge
from fedcausal_flwr.cli import launch
from fedcausal_flwr.knowledge import MASK_KEYS, Knowledge, Masks, ZeroBlock
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.strategies import FDBNLSettings, PFDBNLSettings
from fedcausal_flwr.vertical.model import VFedCDSettings
from tests.helpers.dbn import RC, run_inprocess

NAMES = ["a", "b", "c", "d"]


@pytest.mark.parametrize("make", [
    lambda: FDBNLSettings(forbid="a->b", tiers="a < b, c"),
    lambda: PFDBNLSettings(require="a->b@0"),
    lambda: VFedCDSettings(exogenous="a"),
    lambda: ss.FedCFSettings(known_zero="A:1<-0, B:*<-2"),
])
def test_the_settings_parse_their_knowledge_once(make):
    s = make()
    k = s.knowledge()
    assert k and s.knowledge() is k  # the same object at every call: no second parse
    assert s.replace().knowledge() == k  # a copy parses its own, to the same knowledge


def test_masks_travel_as_flat_indices_and_come_back_the_same():
    k = Knowledge.parse(forbid="*->a, c->d@1", require="b->c@0, a->d@2", tiers="a < b, c, d")
    m = k.masks(NAMES, 2)
    cfg = m.to_config()
    assert sorted(cfg) == sorted(MASK_KEYS) and all(isinstance(v, str) for v in cfg.values())
    back = Masks.from_config(cfg, len(NAMES), 2)
    for f in ("forbid_W", "require_W", "forbid_A", "require_A"):
        assert np.array_equal(getattr(back, f), getattr(m, f)), f
    assert cfg["knowledge-require-lags"] == str(4 * 4 + 0 * 4 + 3)  # a->d@2: block A_2, (0, 3)
    static = Knowledge.parse(forbid="b->a", require="c->d").masks(NAMES)
    assert sorted(static.to_config()) == list(MASK_KEYS[:2])  # a static graph has no lags
    assert static.to_config() == {"knowledge-forbid": "4,14", "knowledge-require": "11"}
    assert Masks.from_config({"seed": 1}, 4, 1) is None  # nothing sent: no knowledge


def test_pfdbnl_clients_get_masks_not_knowledge_text():
    rc = {**RC, "algorithm": "pfdbnl", "dbn.num-rounds": 2, "dbn.forbid": "x0->x1, *->x4@1",
          "dbn.require": "x2->x3@0", "dbn.tiers": "x1 < x0"}
    result, grid = run_inprocess(rc, 3)
    assert result.status == "completed"
    sent = [dict(m.content.config_records.get("config", {})) for m in grid.sent
            if m.metadata.message_type.startswith("train")]
    m = Knowledge.parse(forbid="x0->x1, *->x4@1", require="x2->x3@0",
                        tiers="x1 < x0").masks([f"x{i}" for i in range(5)], 1)
    assert sent and all(c["knowledge-forbid"] == m.to_config()["knowledge-forbid"]
                        and c["knowledge-require"] == "13" for c in sent)
    assert not any(k in c for c in sent for k in ("forbid", "require", "tiers", "exogenous"))
    assert not any("x0" in str(v) for c in sent for v in c.values())
    for W, A in zip(result.estimates["W_local"], result.estimates["A_local"], strict=True):
        assert np.all(W[m.forbid_W] == 0) and np.all(A[m.forbid_A] == 0)  # clients enforce


def test_known_zero_blocks_are_knowledge_statements_naming_the_key():
    k = Knowledge.parse(known_zero="A:1<-0, B:c2->*")
    assert k.zero_blocks == (ZeroBlock("A", 1, 0), ZeroBlock("B", None, 2)) and not k.edges()
    assert Knowledge.from_config(k.config()) == k
    assert ss.FedGCSettings(known_zero="A:1<-0").zero_blocks() == (ZeroBlock("A", 1, 0),)
    assert ss.parse_known_zero is knowledge.parse_known_zero  # one parser, knowledge.py's
    with pytest.raises(ValueError, match="'statespace.ss-known-zero'.*not a known-zero block"):
        ss.FedGCSettings(known_zero="A:1-0")
    with pytest.raises(ValueError, match="knowledge 'known-zero'.*not a known-zero block"):
        Knowledge.parse(known_zero="C:1<-0")


def test_the_knowledge_file_feeds_every_family(tmp_path):
    path = tmp_path / "k.csv"
    path.write_text("known-zero,A,1,0\nknown-zero,B,*,2\n")
    assert Knowledge.from_file(path).zero_blocks == (ZeroBlock("A", 1, 0),
                                                     ZeroBlock("B", None, 2))
    assert launch.knowledge_config(path, "fedcf") == {
        "statespace.ss-known-zero": "A:1<-0, B:*<-2"}
    assert launch.knowledge_config(path, "fedgc") == {
        "statespace.ss-known-zero": "A:1<-0, B:*<-2"}
    with pytest.raises(ValueError, match="fdbnl takes no known-zero blocks.*ss-known-zero"):
        launch.knowledge_config(path, "fdbnl")
    path.write_text("forbid,a,b\n")
    with pytest.raises(ValueError, match="fedcf takes no edge knowledge.*ss-known-zero"):
        launch.knowledge_config(path, "fedcf")


def test_long_require_chain_is_walked_without_recursion():
    names = [f"v{i}" for i in range(1200)]
    chain = ", ".join(f"{a}->{b}" for a, b in zip(names, names[1:], strict=False))
    m = Knowledge.parse(require=chain).masks(names)
    assert m.require_W.sum() == len(names) - 1
    with pytest.raises(ValueError, match="cycle"):
        Knowledge.parse(require=chain + ", v1199->v0").masks(names)


def test_knowledge_string_over_the_limit_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="'forbid'.*limit"):
        Knowledge.parse(forbid="a->b, " * (knowledge.MAX_TEXT // 5))


@pytest.mark.parametrize("level", ["nan", "inf", "1.5"])
def test_tier_level_must_be_a_finite_integer(tmp_path, level):
    f = tmp_path / "k.csv"
    f.write_text(f"tier,a,0\ntier,b,{level}\n")
    with pytest.raises(ValueError, match="row 2: tier level must be a finite integer"):
        Knowledge.from_file(f)


def test_a_name_at_two_tier_levels_is_refused_naming_both_rows(tmp_path):
    f = tmp_path / "k.csv"
    f.write_text("tier,a,0\ntier,b,1\ntier,a,2\n")
    with pytest.raises(ValueError, match=r"row 3: 'a' is already at tier level 0 \(row 1\)"):
        Knowledge.from_file(f)


def test_knowledge_file_not_regular_or_too_large_is_refused(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="/dev/zero: not a regular file"):
        Knowledge.from_file("/dev/zero")
    f = tmp_path / "k.csv"
    f.write_text("forbid,a,b\n" * 10)
    monkeypatch.setattr(knowledge, "MAX_FILE", 50)
    with pytest.raises(ValueError, match="more than the limit 50"):
        Knowledge.from_file(f)
