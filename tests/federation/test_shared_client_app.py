"""One user ClientApp serves several algorithms: ``register`` once per algorithm, and each
message goes to the algorithm its config names (every strategy sends ``algorithm``), also
where two algorithms share a phase (FDBNL/PFDBNL ``query.info``, FDBNL/FedIV ``train.local``,
FedGC/FedCF ``train.ss_setup``/``train.ss_window``)."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fedcausal_flwr import registry
from fedcausal_flwr.appconfig import glue
from fedcausal_flwr.client_app import app as the_apps_client_app
from fedcausal_flwr.clients import register
from fedcausal_flwr.strategies import FDBNL, FedGC
from fedcausal_flwr.testing import InProcessGrid
from tests.helpers.faults import SMALL, same_result


def shared_app(algorithms) -> ClientApp:
    """A user's ClientApp serving ``algorithms``, each node on the App's built-in data."""
    app = ClientApp()
    for a in algorithms:
        register(app, a, lambda context, a=a: glue(a).client(a, context))
    return app


ALL = shared_app(registry.ALGORITHMS)


def run(algorithm, client_app):
    rc, k = SMALL[algorithm]
    grid = InProcessGrid(client_app, k, rc)
    return glue(algorithm).strategy(algorithm, rc).start(grid=grid), grid


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", sorted(registry.ALGORITHMS))
def test_one_client_app_serves_every_algorithm(algorithm):
    """Each algorithm against the ClientApp serving all six equals its run against the App's
    own ClientApp, and every message it sent named it."""
    got, grid = run(algorithm, ALL)
    ref, _ = run(algorithm, the_apps_client_app)
    assert got.status == "completed", got.status
    assert same_result(got, ref)
    assert {m.content["config"]["algorithm"] for m in grid.sent} == {algorithm}


def dbn_data(context):
    rng = np.random.default_rng(int(context.node_config["partition-id"]))
    X = rng.standard_normal((30, 3))
    return {"Xt": X[1:], "Xlag": X[:-1], "names": ["a", "b", "c"]}


def statespace_data(context):
    from fedcausal_flwr.statespace.data import svd_var_client

    rng = np.random.default_rng(10 + int(context.node_config["partition-id"]))
    Y = rng.standard_normal((60, 3))
    c, _ = svd_var_client(Y, 2)
    return {"A": c.A, "C": c.C, "K": c.K, "y": c.y}


def test_two_algorithms_of_a_users_project_on_one_client_app():
    """The user's way: one ClientApp, ``register`` for FDBNL and for FedGC, two ServerApp
    runs against it; each equals its run against a ClientApp serving it alone."""
    both = ClientApp()
    register(both, "fdbnl", dbn_data)
    register(both, "fedgc", statespace_data)
    alone = {"fdbnl": register(ClientApp(), "fdbnl", dbn_data),
             "fedgc": register(ClientApp(), "fedgc", statespace_data)}
    for name, strategy in (("fdbnl", lambda: FDBNL(min_nodes=2, node_wait_s=5)),
                           ("fedgc", lambda: FedGC(min_nodes=2, node_wait_s=5, window=20,
                                                   epochs=1))):
        got = strategy().start(grid=InProcessGrid(both, 2), num_rounds=2)
        ref = strategy().start(grid=InProcessGrid(alone[name], 2), num_rounds=2)
        assert got.status == ref.status == "completed", (got.status, ref.status)
        assert same_result(got, ref)


def message(message_type, algorithm=None):
    config = {} if algorithm is None else {"algorithm": algorithm}
    msg = Message(RecordDict({"config": ConfigRecord(config)}), dst_node_id=1,
                  message_type=message_type)
    msg.metadata.__dict__["_message_id"] = msg.object_id
    return msg


def ask(app, msg):
    ctx = Context(run_id=1, node_id=1, state=RecordDict(),
                  node_config={"partition-id": 0, "num-partitions": 2}, run_config={})
    return app(msg, ctx)


def test_a_message_naming_no_algorithm_goes_to_the_only_one_that_fits():
    """An older server (or a user's own strategy with another ``algorithm`` name) sends no
    known name: a phase only one registered algorithm has is still answered by it; a shared
    one is refused, naming the candidates."""
    both = ClientApp()
    register(both, "fdbnl", dbn_data)
    register(both, "fedgc", statespace_data)
    props = ask(both, message("query.info", "fdbnl")).content["properties"]
    assert props["d"] == 3 and props["p"] == 1
    assert ask(both, message("query.info", "fedgc")).content["properties"]["t"] == 60
    # train.ss_setup is FedGC's alone
    assert ask(both, message("train.ss_setup", "mine")).content["arrays"]
    with pytest.raises(ValueError, match="could be fdbnl or fedgc"):
        ask(both, message("query.info"))
    one = register(ClientApp(), "fdbnl", dbn_data)
    assert ask(one, message("query.info")).content["properties"]["d"] == 3


def test_registering_an_algorithm_twice_is_refused():
    app = register(ClientApp(), "fdbnl", dbn_data)
    with pytest.raises(ValueError, match="'fdbnl' is already registered"):
        register(app, "FDBNL", dbn_data)
    register(app, "pfdbnl", dbn_data)  # shares query.info: fine
