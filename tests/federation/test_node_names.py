"""Issue 35, item 3: every name list a node sends is bounded before the server allocates
anything from it. A node listing more names than the variable cap, or a name longer than
``MAX_NAME_CHARS``, is refused at discovery naming the node (its id and partition), never
echoing its names beyond a short prefix; the union of the sites' names (``dbn.variables=union``)
and the sum of VFedCD's parties' attributes are checked against the cap, naming each
contributor, before any array of the federation's size exists.
"""

from __future__ import annotations

import pytest
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fedcausal_flwr.client_app import handle
from fedcausal_flwr.dbn import app as app_dbn
from fedcausal_flwr.federation.limits import MAX_NAME_CHARS, NAME_PROPS, props_problem
from fedcausal_flwr.federation.nodes import NodeInfo
from fedcausal_flwr.settings import MAX_VARS
from tests.helpers.nodes import RC, run

LIAR = 2


def lying_app(props: dict) -> ClientApp:
    """The App's client, but partition LIAR's ``query.info`` properties are changed by
    ``props`` (its data and every other reply stay honest)."""

    class App(ClientApp):
        def __call__(self, msg: Message, context: Context) -> Message:
            reply = handle(msg, context)
            if (msg.metadata.message_type == "query.info"
                    and int(context.node_config["partition-id"]) == LIAR):
                changed = {**dict(reply.content["properties"]), **props}
                return Message(RecordDict({"properties": ConfigRecord(changed)}), reply_to=msg)
            return reply

    return App()


def names(k: int, stem: str = "secret") -> str:
    return ",".join(f"{stem}{i}" for i in range(k))


@pytest.mark.parametrize("count", [3000, 10**5])
def test_a_node_listing_more_names_than_the_cap_is_dropped_named(count):
    """Before: 10**5 names made the server attempt a 9.3 GiB allocation; 3,000 started a
    3,003-variable run. Now the node is dropped at discovery and the run goes on."""
    result, grid, _ = run({**RC, "num-rounds": 2}, 4, lying_app({"names": names(count)}))
    assert result.status == "completed" and result.metrics["clients"] == 3
    assert len(result.names["variables"]) == 5
    dropped = " | ".join(result.metrics["dropped"])
    assert f"node {grid.node_id(LIAR)} (partition-id {LIAR})" in dropped
    assert f"lists {count} names, above the variable cap of {MAX_VARS}" in dropped
    assert "secret" not in dropped  # the node's names are not echoed


def test_a_name_longer_than_the_limit_is_refused_naming_the_node_with_a_short_prefix():
    long = "s" * 100_000
    result, grid, _ = run({**RC, "num-rounds": 2}, 4,
                          lying_app({"names": f"x0,x1,{long},x3,x4"}))
    assert result.status == "completed" and result.metrics["clients"] == 3
    dropped = " | ".join(result.metrics["dropped"])
    assert f"node {grid.node_id(LIAR)} (partition-id {LIAR})" in dropped
    assert f"100000 characters, above {MAX_NAME_CHARS}" in dropped
    assert len(dropped) < 1000 and "s" * 30 not in dropped


def test_a_name_at_the_limit_is_accepted():
    ok = "v" * MAX_NAME_CHARS
    assert props_problem({"names": f"{ok},{ok[:-1]}"}) is None
    assert props_problem({"names": names(MAX_VARS)}) is None
    assert props_problem({"names": names(MAX_VARS + 1)}) is not None


@pytest.mark.parametrize("key", NAME_PROPS)
def test_every_name_list_property_is_bounded(key):
    assert "above the variable cap" in props_problem({key: names(MAX_VARS + 1)})
    assert f"above {MAX_NAME_CHARS}" in props_problem({key: "a" * (MAX_NAME_CHARS + 1)})


@pytest.mark.parametrize("props", [{"d": 10**8}, {"p": -1}, {"u": "7"}, {"d": True}])
def test_size_properties_are_bounded(props):
    assert "not an integer in [0, 2000]" in props_problem(props)


def _infos(lists: list[list[str]]) -> dict[int, NodeInfo]:
    return {c: NodeInfo(100 + c, c, len(lists), {"d": len(x), "p": 1, "n": 40,
                                                  "names": ",".join(x)})
            for c, x in enumerate(lists)}


def test_the_union_of_the_sites_names_is_checked_against_the_cap_naming_the_sites():
    """Each list within the cap, their union not: refused before any array is built, naming
    each site by how many names only it holds (the names themselves are not listed)."""
    honest = [f"x{i}" for i in range(5)]
    liar = [f"secret{i}" for i in range(MAX_VARS - 1)]
    strategy = app_dbn.strategy("fdbnl", RC)
    strategy.p = 1  # as setup() sets it before federation()
    with pytest.raises(ValueError) as e:
        strategy.federation(_infos([honest, honest, liar]))
    msg = str(e.value)
    assert "'dbn.variables' = 'union'" in msg
    assert f"are {MAX_VARS + 4}, above the variable cap of {MAX_VARS}" in msg
    assert msg.index(f"client 2 (node 102) {MAX_VARS - 1}") < msg.index("client 0 (node 100) 0")
    assert "secret" not in msg
    strategy.federation(_infos([honest, honest, liar[:MAX_VARS - 5]]))  # at the cap: fine
    assert len(strategy.variables) == MAX_VARS


def test_vfedcd_parties_attributes_are_checked_against_the_cap(monkeypatch):
    """Each party's columns within the cap, their sum not: stopped naming each party."""
    import fedcausal_flwr.federation.strategy as base
    from fedcausal_flwr.federation.errors import ProtocolStopped
    from fedcausal_flwr.vertical import app as app_v

    rc = {"algorithm": "vfedcd", "vertical.he-backend": "mock", "vertical.key-bits": 256,
          "vertical.insecure-test-keys": True}
    strategy = app_v.strategy("vfedcd", rc)
    cols = (range(1500), range(1500, 3000))
    infos = {c: NodeInfo(100 + c, c, 2, {"n": 10, "columns": ",".join(map(str, r))})
             for c, r in enumerate(cols)}
    monkeypatch.setattr(base.CausalStrategy, "discover", lambda self, grid: infos)
    with pytest.raises(ProtocolStopped, match=r"the parties' attributes are 3000, above the "
                                              r"variable cap of 2000 .*party 0 \(node 100\) "
                                              r"1500"):
        strategy.discover(None)
    infos[1] = NodeInfo(101, 1, 2, {"n": 10, "columns": "1500,99999"})
    with pytest.raises(ProtocolStopped, match=r"party 1 \(node 101\) reports column '99999', "
                                              r"not an attribute index in \[0, 1502\)"):
        strategy.discover(None)
