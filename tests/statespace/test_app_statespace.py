"""FedGC/FedCF strategy-client pairs through the Message API (in-process Grid).

The reference loop is the oracle for every window size; the wire carries states and
gradients only; bad clients are named and dropped; the counterfactual answer is C_mm B_mn du.
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.common.config import flatten_dict

from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.clients import register, reply
from fedcausal_flwr.statespace import app as app_ss
from fedcausal_flwr.statespace import loop
from fedcausal_flwr.statespace import model as ss
from fedcausal_flwr.statespace.client import FedCFClient, FedGCClient
from fedcausal_flwr.statespace.data import all_clients, merged_config
from fedcausal_flwr.testing import InProcessGrid

RC = {"algorithm": "fedgc", "seed": 3, "statespace.ss-t": 120, "statespace.ss-window": 1,
      "statespace.ss-epochs": 1,
      "min-nodes": 2, "node-wait-s": 5.0}


def run_inprocess(rc: dict, k: int, app=client_app, **start):
    grid = InProcessGrid(app, k, rc)
    return app_ss.strategy(rc["algorithm"], rc).start(grid=grid, **start), grid


def reference(rc: dict, **kwargs):
    model = rc["algorithm"]
    sys, clients = all_clients(merged_config(rc, model))
    return sys, clients, loop.reference(clients, app_ss.settings(model, rc), **kwargs)


@pytest.mark.integration
@pytest.mark.parametrize("algorithm,extra", [
    # the paper, W = 1
    ("fedgc", {"statespace.ss-gc-target": "predicted", "statespace.ss-difference": False}),
    ("fedgc", {"statespace.ss-window": 25, "statespace.ss-epochs": 3}),
    ("fedcf", {"statespace.ss-window": 1}), ("fedcf", {"statespace.ss-window": 40,
                                                       "statespace.ss-epochs": 2}),
    ("fedcf", {"statespace.ss-window": 119, "statespace.ss-epochs": 3,
               "statespace.ss-target": "refined", "statespace.ss-xi": 1.0}),
    ("fedcf", {"statespace.ss-window": 40, "statespace.ss-epochs": 2,
               "statespace.ss-target": "innovation"}),
    ("fedgc", {"statespace.ss-clients": 3, "statespace.ss-window": 30, "statespace.ss-epochs": 2}),
])
def test_flower_path_equals_reference(algorithm, extra):
    rc = {**RC, "algorithm": algorithm, **extra}
    k = int(rc.get("statespace.ss-clients", 2))
    result, grid = run_inprocess(rc, k)
    _, _, ref = reference(rc)
    assert result.status == "completed"
    assert len(result.history) == len(ref.history)
    np.testing.assert_allclose(result.estimates["A_hat"], ref.server.A_hat, rtol=0, atol=1e-10)
    if algorithm == "fedcf":
        np.testing.assert_allclose(result.estimates["B_hat"], ref.server.B_hat, atol=1e-10)
    for a, b in zip(result.history, ref.history, strict=True):
        assert a["L_s"] == pytest.approx(b["L_s"], rel=1e-9, abs=1e-15)
        assert a["L_a_1"] == pytest.approx(b["L_a_1"], rel=1e-9, abs=1e-15)
    for i, ctx in enumerate(grid.contexts.values()):  # the private theta_m, phi_m too
        theta, phi = ctx.state["ss_params"].to_numpy_ndarrays()
        np.testing.assert_allclose(theta, ref.clients[i].theta, atol=1e-10)
        np.testing.assert_allclose(phi, ref.clients[i].phi, atol=1e-10)
    assert np.abs(ref.server.A_hat).max() > 0  # something was learned


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["fedgc", "fedcf"])
def test_only_states_and_gradients_cross_the_wire(algorithm):
    rc = {**RC, "algorithm": algorithm, "statespace.ss-window": 30, "statespace.ss-epochs": 1,
          "statespace.ss-cf-delta": "1,0.5"}
    result, grid = run_inprocess(rc, 2)
    assert result.status == "completed"
    _, clients, _ = reference(rc)
    thetas = [ctx.state["ss_params"].to_numpy_ndarrays()[0] for ctx in grid.contexts.values()]
    secrets = [x for c in clients for x in (c.y, c.C, c.K)] + thetas
    p, u, d = clients[0].dims
    allowed = {(30, p), (29, p), (0, p), (p, p), (p, u), (30, u), (29, u), (), (p,)}
    if algorithm == "fedcf":
        allowed.add((d,))  # the counterfactual answer C_mm delta_h
    for m in grid.sent + grid.received:
        assert not m.has_error()
        for rec in m.content.array_records.values():
            for a in rec.to_numpy_ndarrays():
                assert a.shape in allowed, f"{m.metadata.message_type} carries {a.shape}"
                for x in secrets:  # no row or column of y, C, K, theta appears anywhere
                    for vec in (list(x) + list(x.T)):
                        n = vec.size
                        flat = a.reshape(-1)
                        if flat.size >= n:
                            win = np.lib.stride_tricks.sliding_window_view(flat, n)
                            assert np.abs(win - vec).max(axis=1).min() > 1e-12
        for rec in m.content.config_records.values():
            assert all(isinstance(v, (int, float, str, bool)) for v in rec.values())


def faulty_app(rc: dict, bad: dict[int, str]) -> ClientApp:
    app = ClientApp()

    @app.train("ss_setup")
    @app.train("ss_window")
    @app.query("info")
    def handle(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        k = int(context.node_config["num-partitions"])
        _, clients = all_clients(merged_config(rc))
        c = clients[pid]
        A, C, y = c.A, c.C, c.y.copy()
        if bad.get(pid) == "nan":
            y[5, 1] = np.inf
        elif bad.get(pid) == "unstable":
            A = 1.05 * np.eye(A.shape[0])
        elif bad.get(pid) == "rank":
            C = np.outer(C[:, 0], np.ones(C.shape[1]))
        elif bad.get(pid) == "short":
            y = y[:-7]
        return reply(FedGCClient(A, C, c.K, y, partition_id=pid, num_partitions=k,
                                 state=context.state), msg)

    return app


def test_bad_clients_are_named_and_dropped():
    rc = {**RC, "statespace.ss-clients": 5, "statespace.ss-window": 40, "min-nodes": 1}
    bad = {1: "nan", 2: "unstable", 3: "rank", 4: "short"}
    result, _ = run_inprocess(rc, 5, faulty_app(rc, bad))
    assert result.status == "completed", result.status
    dropped = " | ".join(result.metrics["dropped"])
    for cid, why in [(1, "non-finite"), (2, "unstable"), (3, "full column rank"),
                     (4, "'t': 113")]:
        assert f"client {cid}" in dropped and why in dropped, dropped
    assert result.metrics["clients"] == 1


def test_bad_input_raises_naming_the_client():
    _, clients = all_clients(merged_config(RC))
    c = clients[0]
    y = c.y.copy()
    y[2, 0] = np.inf  # NaN is a missing value (tests/statespace/test_missing_statespace.py)
    with pytest.raises(ValueError, match="client 7: y has 1 non-finite"):
        FedGCClient(c.A, c.C, c.K, y, partition_id=7)
    client = FedGCClient(c.A, c.C, c.K, c.y, partition_id=7)
    cfg = {**ss.FedGCSettings().to_wire(), "phase": "ss_window", "start": 1, "stop": 3,
           "prev-start": 3, "prev-stop": 5}
    with pytest.raises(ValueError, match="client 7: server sent g_tilde of shape"):
        client.fit([np.zeros((3, 2))], cfg)
    with pytest.raises(ValueError, match="client 7: window outside"):
        client.fit([np.zeros((2, 2))], {**cfg, "stop": 10_000})


def test_counterfactual_query_answer_in_result():
    rc = {**RC, "algorithm": "fedcf", "statespace.ss-window": 40, "statespace.ss-epochs": 2,
          "statespace.ss-cf-client": 1, "statespace.ss-cf-source": 0,
          "statespace.ss-cf-delta": "1.0,-0.5"}
    result, _ = run_inprocess(rc, 2)
    sys, clients, ref = reference(rc)
    cf = result.metrics["counterfactual"]
    du = np.array([1.0, -0.5])
    expect = ss.counterfactual(clients[1].C, ss.block(ref.server.B_hat, sys.P, sys.U, 1, 0), du)
    np.testing.assert_allclose(cf["delta_y"], expect, atol=1e-10)
    assert cf["client"] == 1 and cf["source"] == 0
    assert "cf_error_21" in result.metrics and "err_B" in result.metrics


def test_fedcf_client_rejects_a_bad_query():
    _, clients = all_clients(merged_config(RC, "fedcf"))
    c = clients[0]
    client = FedCFClient(c.A, c.C, c.K, c.y, c.B, c.u, partition_id=2)
    with pytest.raises(ValueError, match="client 2: server sent delta_h of shape"):
        client.fit([np.zeros(5)], {"phase": "ss_query"})


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["fedgc", "fedcf"])
def test_dp_run_equals_reference_and_reports_the_total(algorithm):
    rc = {**RC, "algorithm": algorithm, "statespace.ss-window": 30, "statespace.ss-epochs": 2,
          "statespace.ss-dp": True, "statespace.ss-dp-epsilon": 4.0,
          "statespace.ss-dp-clip-msg": 0.5}
    result, grid = run_inprocess(rc, 2)
    _, clients, ref = reference(rc)
    assert result.status == "completed"
    np.testing.assert_allclose(result.estimates["A_hat"], ref.server.A_hat, atol=1e-10)
    plain = reference({**rc, "statespace.ss-dp": False})[2]
    assert np.abs(plain.server.A_hat - ref.server.A_hat).max() > 1e-6  # noise was added
    dp = result.metrics["dp"]
    windows = len(result.history)
    per_epoch = windows // 2
    # FedGC's innovation upload is fixed by the data: one release per window of an epoch
    releases = 2 * per_epoch if algorithm == "fedgc" else 4 * windows
    assert dp["releases_per_client"] == releases
    assert dp["epsilon"] == pytest.approx(4.0, rel=1e-3)  # the total, not per release
    assert dp == ref.dp
    # clipped rows plus noise: what the server saw is not the client's states
    up = [m for m in grid.received if m.metadata.message_type == "train.ss_window"]
    states = up[0].content["arrays"].to_numpy_ndarrays()[0]
    assert states.shape[0] == 30
    full = ss.client_states(clients[0], ss.initial_client(clients[0]), np.arange(1, 31),
                            ss.FedGCSettings().target)
    sent = full[1] if algorithm == "fedgc" else full[0]
    assert np.abs(states - sent).min() > 0
    # the server's gradients travel unnoised (post-processing of the releases)
    down = [m for m in grid.sent if m.metadata.message_type == "train.ss_window"]
    assert down[1].content["config"]["dp-noise"] > 0


@pytest.mark.integration
def test_netsim_clients_through_the_app_equal_the_reference(shared_data):
    from fedcausal_flwr.statespace.data import real_clients, svd_var_client

    path = shared_data("netsim/sim3.mat")
    rc = {**RC, "statespace.ss-data": "netsim", "statespace.ss-data-path": str(path),
          "statespace.ss-clients": 3,
          "statespace.ss-netsim-subjects": 2, "statespace.ss-window": 50,
          "statespace.ss-epochs": 2, "statespace.ss-p": 2}
    result, _ = run_inprocess(rc, 3)
    full = merged_config(rc)
    clients = [svd_var_client(Y, 2, name)[0] for name, Y in real_clients(full)]
    assert [c.dims[2] for c in clients] == [5, 5, 5] and clients[0].y.shape[0] == 400
    ref = loop.reference(clients, ss.FedGCSettings.from_run_config(full))
    assert result.status == "completed"
    np.testing.assert_allclose(result.estimates["A_hat"], ref.server.A_hat, atol=1e-10)


def test_data_defaults_agree_with_the_app_config():
    """The data keys' code defaults (data/statespace.DEFAULTS) are what pyproject declares."""
    import tomllib
    from pathlib import Path

    from fedcausal_flwr.statespace.data import DEFAULTS, FEDCF_DEFAULTS

    doc = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    app = flatten_dict(doc["tool"]["flwr"]["app"]["config"])
    declared = {k for k in app if k.startswith("ss-")}
    settings = set(ss.FedGCSettings.keys()) | set(ss.FedCFSettings.keys())
    assert not set(DEFAULTS) & settings  # a key is data or settings, never both
    for key, value in DEFAULTS.items():
        if key in app:  # model-specific ones (FEDCF_DEFAULTS) travel in the .json
            assert app[key] == value and type(app[key]) is type(value), key
    assert set(FEDCF_DEFAULTS) <= set(DEFAULTS) and not set(FEDCF_DEFAULTS) & declared
    assert declared <= set(DEFAULTS) | settings  # every declared ss-key has one owner


@pytest.mark.integration
def test_a_users_own_client_app_with_register():
    """Another Flower project: its own ClientApp registers FedGC with its data, its own
    ServerApp runs FedGC with settings; the run equals the reference loop."""
    from flwr.app import RecordDict
    from flwr.serverapp import ServerApp

    from fedcausal_flwr.strategies import FedGC, FedGCSettings

    _, clients = all_clients(merged_config({**RC, "statespace.ss-shift-known": False}))
    user_client_app = ClientApp()
    register(user_client_app, "fedgc", lambda context: {
        k: getattr(clients[int(context.node_config["partition-id"])], k)
        for k in ("A", "C", "K", "y")})
    settings = FedGCSettings(window=20, epochs=2, node_wait_s=5)
    user_server_app, out = ServerApp(), {}

    @user_server_app.main()
    def server_main(grid, context: Context) -> None:
        out["result"] = FedGC(settings).start(grid=grid)

    grid = InProcessGrid(user_client_app, 2)
    user_server_app(grid, Context(1, 0, {}, RecordDict(), {}))
    result, ref = out["result"], loop.reference(clients, settings)
    assert result.status == "completed" and len(result.history) == len(ref.history) == 12
    assert "err_A" not in result.metrics  # no truth attached to a user's data
    np.testing.assert_allclose(result.estimates["A_hat"], ref.server.A_hat, atol=1e-10)
    np.testing.assert_allclose(result.arrays["A_hat"].numpy(), ref.server.A_hat, atol=1e-10)
    theta = grid.contexts[1001].state["ss_params"].to_numpy_ndarrays()[0]
    np.testing.assert_allclose(theta, ref.clients[1].theta, atol=1e-10)


@pytest.mark.parametrize("algorithm", ["fedgc", "fedcf"])
def test_num_rounds_bounds_the_windows_and_the_last_gradients_arrive(algorithm):
    rc = {**RC, "algorithm": algorithm, "statespace.ss-window": 20, "statespace.ss-epochs": 2}
    result, grid = run_inprocess(rc, 2, num_rounds=3)
    _, _, ref = reference(rc, num_rounds=3)
    assert result.status == "completed" and len(result.history) == len(ref.history) == 3
    np.testing.assert_allclose(result.estimates["A_hat"], ref.server.A_hat, atol=1e-10)
    for i, ctx in enumerate(grid.contexts.values()):  # window 3's gradients were applied
        theta = ctx.state["ss_params"].to_numpy_ndarrays()[0]
        np.testing.assert_allclose(theta, ref.clients[i].theta, atol=1e-10)


@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["fedgc", "fedcf"])
def test_initial_arrays_warm_start_the_server_model(algorithm):
    from flwr.app import ArrayRecord

    rc = {**RC, "algorithm": algorithm, "statespace.ss-window": 30, "statespace.ss-epochs": 1}
    sys, clients, cold = reference(rc)
    rng = np.random.default_rng(9)
    n, k = sum(sys.P), sum(sys.U) if algorithm == "fedcf" else 0
    A0, B0 = 0.2 * rng.standard_normal((n, n)), 0.2 * rng.standard_normal((n, k))
    arrays = [A0, B0] if algorithm == "fedcf" else [A0]
    result, _ = run_inprocess(rc, 2, initial_arrays=ArrayRecord(arrays))
    start = ss.ServerParams(*ss.off_diagonal(A0, B0, sys.P, sys.U if k else [0] * len(sys.P)))
    warm = loop.reference(clients, app_ss.settings(algorithm, rc), spar=start)
    np.testing.assert_allclose(result.estimates["A_hat"], warm.server.A_hat, atol=1e-10)
    assert np.abs(warm.server.A_hat - cold.server.A_hat).max() > 1e-3
    strategy = app_ss.strategy(algorithm, rc)
    with pytest.raises(ValueError, match="warm start takes"):
        strategy.start(grid=InProcessGrid(client_app, 2, rc), initial_arrays=[A0[:1]])


def test_settings_are_checked_before_any_node_and_families_do_not_mix():
    from fedcausal_flwr.strategies import FedCFSettings, FedGC

    with pytest.raises(ValueError, match="'statespace.ss-window' = 0: must be >= 1"):
        app_ss.strategy("fedgc", {**RC, "statespace.ss-window": 0})
    with pytest.raises(ValueError, match="'statespace.ss-cf-delta'"):
        app_ss.strategy("fedcf", {**RC, "statespace.ss-cf-delta": "one"})
    with pytest.raises(TypeError, match="FedGC takes FedGCSettings"):
        FedGC(FedCFSettings())
    with pytest.raises(TypeError, match="unexpected keyword"):
        FedGC().start(grid=None, num_round=3)
