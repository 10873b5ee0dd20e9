"""Node-local data (issue 10 item 1): each SuperNode names its own CSV with
``--node-config data-path=...``; the run equals the one on the same arrays handed to the
clients directly, and every bad file is refused naming the node, file, row and column."""

from __future__ import annotations

import csv
import hashlib
import hmac

import numpy as np
import pytest
from flwr.clientapp import ClientApp

import fedcausal_flwr.strategies as strategies
from fedcausal_flwr import registry
from fedcausal_flwr.appconfig import glue, settings_class
from fedcausal_flwr.client_app import app as client_app
from fedcausal_flwr.clients import register
from fedcausal_flwr.data.csvdata import read_csv
from fedcausal_flwr.data.timeseries import lagged_segments
from fedcausal_flwr.statespace.data import svd_var_client
from fedcausal_flwr.testing import InProcessGrid
from fedcausal_flwr.vertical.data import VerticalData
from tests.helpers.faults import SMALL, same_result

COMMON = {"min-nodes": 2, "node-wait-s": 5.0, "round-timeout-s": 30.0, "seed": 1}


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def run(algorithm, rc, app, k, node_configs=None):
    """One in-process run without the built-in evaluator (own data: no known truth)."""
    s = settings_class(algorithm).from_run_config(rc)
    strategy = registry.get(algorithm).strategy_class()(s)
    return strategy.start(grid=InProcessGrid(app, k, rc, node_configs))


def reference_app(algorithm, data):
    """A user's ClientApp handing each node its arrays directly."""
    app = ClientApp()
    register(app, algorithm, lambda ctx: data[int(ctx.node_config["partition-id"])])
    return app


def check_equal(algorithm, rc, data, node_configs):
    """The App's own path (its strategy and ClientApp, each node reading its CSV) equals the
    run on the arrays handed to the clients directly."""
    k = len(node_configs)
    strategy = glue(algorithm).strategy(algorithm, rc)
    assert strategy.evaluate_fn is None  # the nodes' own data: no built-in truth to score
    got = strategy.start(grid=InProcessGrid(client_app, k, rc, node_configs))
    ref = run(algorithm, rc, reference_app(algorithm, data), k)
    assert got.status == "completed", got.status
    assert ref.status == "completed", ref.status
    assert same_result(got, ref)
    return got


# ---- time series: FDBNL / PFDBNL -----------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["fdbnl", "pfdbnl"])
def test_dbn_csv_equals_arrays(tmp_path, algorithm):
    rng = np.random.default_rng(0)
    names = ["G1", "G2", "G3", "G4"]
    rc = {"algorithm": algorithm, "dbn.data": "node", "dbn.lags": 1, "dbn.num-rounds": 4,
          "dbn.lambda-w": 0.05,
          "dbn.lambda-a": 0.05, **COMMON}
    data, cfgs = {}, {}
    for pid in range(3):
        X = rng.standard_normal((30, 4))
        if pid == 1:  # two replicates: lags never cross from one to the other
            seg = ["r1"] * 12 + ["r2"] * 18
            path = write(tmp_path / f"n{pid}.csv", ["rep", *names],
                         [[s, *x] for s, x in zip(seg, X, strict=True)])
            cfgs[pid] = {"data-path": path, "segment-column": "rep"}
            Xt, Xlag = lagged_segments([X[:12], X[12:]], 1, pad="drop")
        else:
            cfgs[pid] = {"data-path": write(tmp_path / f"n{pid}.csv", names, X.tolist())}
            Xt, Xlag = lagged_segments([X], 1, pad="drop")
        data[pid] = {"Xt": Xt, "Xlag": Xlag}
    got = check_equal(algorithm, rc, data, cfgs)
    assert np.shape(got.estimates["W"]) == (4, 4)


# ---- state space: FedGC / FedCF --------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("algorithm", ["fedgc", "fedcf"])
def test_statespace_csv_equals_arrays(tmp_path, algorithm):
    rng = np.random.default_rng(1)
    T = 60
    rc = {"algorithm": algorithm, "statespace.ss-data": "node", "statespace.ss-p": 2,
          "statespace.ss-window": 20,
          "statespace.ss-epochs": 1, **COMMON}
    data, cfgs = {}, {}
    for pid, D in enumerate((3, 4)):
        Y = np.cumsum(rng.standard_normal((T, D)), axis=0) * 0.1 + rng.standard_normal((T, D))
        names = [f"c{pid}_{j}" for j in range(D)]
        cfgs[pid] = {"data-path": write(tmp_path / f"n{pid}.csv", names, Y.tolist())}
        c, _ = svd_var_client((Y - Y.mean(0)) / Y.std(0), 2)
        data[pid] = {"A": c.A, "C": c.C, "K": c.K, "y": c.y, "B": c.B, "u": c.u}
    check_equal(algorithm, rc, data, cfgs)


@pytest.mark.integration
def test_fedcf_inputs_from_the_csv_equal_arrays(tmp_path):
    """Node config ``input-columns``: those columns are the known inputs u (CSV units), the
    rest the measurements; B_mm is identified beside A_mm, as from arrays."""
    rng = np.random.default_rng(3)
    T = 80
    rc = {"algorithm": "fedcf", "statespace.ss-data": "node", "statespace.ss-p": 2,
          "statespace.ss-window": 20, "statespace.ss-epochs": 1,
          **COMMON}
    data, cfgs = {}, {}
    for pid, D in enumerate((3, 4)):
        Y, u = rng.standard_normal((T, D)), rng.standard_normal((T, 1))
        Y[1:] += 0.8 * u[:-1]
        names = [f"c{pid}_{j}" for j in range(D)]
        cfgs[pid] = {"data-path": write(tmp_path / f"n{pid}.csv", [f"valve{pid}", *names],
                                        np.column_stack([u, Y]).tolist()),
                     "input-columns": f"valve{pid}"}
        c, _ = svd_var_client((Y - Y.mean(0)) / Y.std(0), 2, u=u)
        assert c.B.shape == (2, 1) and np.abs(c.B).max() > 0.1
        data[pid] = {"A": c.A, "C": c.C, "K": c.K, "y": c.y, "B": c.B, "u": c.u,
                     "names": names}
    check_equal("fedcf", rc, data, cfgs)


@pytest.mark.parametrize("given,words", [
    ("valve,pump", "input-columns='valve,pump': not in the header ['pump']"),
    ("valve,valve", "input-columns='valve,valve': repeats a name"),
    ("valve,x,y", "1 measurement columns, fewer than the ss-p = 2 states"),
])
def test_fedcf_bad_input_columns_are_named(tmp_path, given, words):
    path = write(tmp_path / "a.csv", ["valve", "x", "y", "z"],
                 np.random.default_rng(0).standard_normal((10, 4)).tolist())
    rc = {"algorithm": "fedcf", "statespace.ss-p": 2, **COMMON}
    grid = InProcessGrid(client_app, 1, rc, {0: {"data-path": path, "input-columns": given}})
    with pytest.raises(ValueError, match="client 0: data-path") as e:
        glue("fedcf").client("fedcf", grid.contexts[1000])
    assert words in str(e.value)


def test_statespace_refuses_a_segment_column(tmp_path):
    path = write(tmp_path / "a.csv", ["s", "x", "y", "z"], [["a", 1, 2, 3]] * 5)
    rc = {"algorithm": "fedgc", **COMMON}
    ctx = InProcessGrid(client_app, 1, rc, {0: {"data-path": path, "segment-column": "s"}})
    with pytest.raises(ValueError, match="client 0: node config segment-column is not"):
        glue("fedgc").client("fedgc", ctx.contexts[1000])


# ---- FedIV ---------------------------------------------------------------------------
@pytest.mark.integration
def test_fediv_csv_equals_arrays(tmp_path):
    from fedcausal_flwr.iv.data import IVDataConfig, own_split

    rng = np.random.default_rng(2)
    rc = {**SMALL["fediv"][0], "iv.iv-rounds": 2, "iv.iv-instrument": "z1,z2",
          "iv.iv-treatment": "x", "iv.iv-outcome": "y", **COMMON}
    data, cfgs = {}, {}
    for pid, n in enumerate((80, 120, 60)):
        z = rng.uniform(-1, 1, (n, 2))
        e = 0.3 * rng.standard_normal(n)
        x = z.sum(1) / 2 + e
        y = np.abs(x) + e
        other = rng.standard_normal(n)  # a column no role names
        cfgs[pid] = {"data-path": write(tmp_path / f"n{pid}.csv", ["y", "other", "z1", "x",
                                                                    "z2"],
                                        np.column_stack([y, other, z[:, 0], x, z[:, 1]]))}
        tr, va = own_split(n, IVDataConfig.from_run_config(rc), pid)
        data[pid] = {"train": (x[tr, None], y[tr], z[tr]), "val": (x[va, None], y[va], z[va]),
                     "device": "cpu"}
    check_equal("fediv", rc, data, cfgs)


def test_fediv_needs_the_role_columns(tmp_path):
    path = write(tmp_path / "a.csv", ["z", "x", "y"], [[1, 2, 3], [2, 3, 4], [3, 1, 2]])
    rc = {**SMALL["fediv"][0], "iv.iv-instrument": "z", "iv.iv-treatment": "x",
          "iv.iv-outcome": "w"}
    grid = InProcessGrid(client_app, 1, rc, {0: {"data-path": path}})
    with pytest.raises(ValueError, match=r"client 0: data-path .*a\.csv: row 1: no column "
                                         r"'w' \(run config iv-outcome\)"):
        glue("fediv").client("fediv", grid.contexts[1000])
    grid = InProcessGrid(client_app, 1, {**rc, "iv.iv-outcome": ""}, {0: {"data-path": path}})
    with pytest.raises(ValueError, match="need the run config's iv-outcome"):
        glue("fediv").client("fediv", grid.contexts[1000])


# ---- VFedCD --------------------------------------------------------------------------
KEY = "shared-by-the-parties-only"
#: the parties' own consent to the test-only mock backend and small keys: a party with its own
#: data takes consent only from its node config, never from the run config (SMALL's keys)
CONSENT = {"vfedcd-accept-backends": "mock", "vfedcd-min-key-bits": 256}


@pytest.mark.integration
def test_vfedcd_csv_equals_arrays_and_the_server_sees_no_id(tmp_path):
    rng = np.random.default_rng(3)
    n, parts = 20, (3, 3)
    X = rng.standard_normal((n, sum(parts)))
    ids = [f"patient-{i:03d}" for i in range(n)]
    token = [int.from_bytes(hmac.new(KEY.encode(), i.encode(), hashlib.sha256).digest()[:8],
                            "big", signed=True) for i in ids]
    order = np.argsort(token)
    rc = {**SMALL["vfedcd"][0], "vertical.data": "node", "vertical.parts": "3,3", **COMMON}
    data, cfgs, start = {}, {}, 0
    for pid, d in enumerate(parts):
        cols = np.arange(start, start + d)
        rows = rng.permutation(n) if pid else np.arange(n)  # party 1's file in another order
        cfgs[pid] = {"data-path": write(tmp_path / f"p{pid}.csv",
                                        ["id", *[f"v{c}" for c in cols]],
                                        [[ids[r], *X[r, cols]] for r in rows]),
                     "id-key": KEY, **CONSENT}
        x = X[order][:, cols]
        # the raw rows, transformed by the client as the App's CSV path does (handing in
        # (x - mean) / sd computed here differs from it in the last bits of some values)
        data[pid] = {"x": x, "transform": VerticalData.from_run_config(rc).transform,
                     "columns": cols,
                     "sample_ids": np.asarray(token, dtype=np.int64)[order],
                     "accept_backends": "mock", "min_key_bits": 256}
        start += d
    check_equal("vfedcd", rc, data, cfgs)
    grid = InProcessGrid(client_app, 2, rc, cfgs)
    s = settings_class("vfedcd").from_run_config(rc)
    strategies.VFedCD(s).start(grid=grid)
    wire = repr([m.content for m in grid.sent + grid.received])
    assert not any(i in wire for i in ids) and KEY not in wire


def _vertical_files(tmp_path, n: int, rows_of, key_of=lambda pid: KEY) -> dict:
    """Two parties' CSVs (id, a, b) of one 12 x 4 sample; party pid holds ``rows_of(pid)``."""
    X = np.random.default_rng(4).standard_normal((12, 4))
    return {pid: {"data-path": write(tmp_path / f"p{pid}.csv", ["id", f"a{pid}", f"b{pid}"],
                                     [[str(r), *X[r, 2 * pid:2 * pid + 2]]
                                      for r in rows_of(pid)]),
                  "id-key": key_of(pid), **CONSENT} for pid in range(2)}


@pytest.mark.integration
def test_vfedcd_parties_align_on_the_ids_they_share(tmp_path):
    """Party 1 lacks ID 11 and lists its rows backwards: the run trains on the 11 shared IDs,
    standardized over them, exactly as if both files held only those rows."""
    rc = {**SMALL["vfedcd"][0], "vertical.parts": "2,2", **COMMON}
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    ragged = _vertical_files(tmp_path / "a", 12,
                             lambda pid: range(10, -1, -1) if pid else range(12))
    shared = _vertical_files(tmp_path / "b", 12, lambda pid: range(11))
    res, same = (run("vfedcd", rc, client_app, 2, c) for c in (ragged, shared))
    assert res.status == same.status == "completed", res.status
    assert np.array_equal(res.estimates["B"], same.estimates["B"])


def test_vfedcd_parties_without_shared_ids_stop_the_run(tmp_path):
    """Another key: other keyed hashes, no ID in common; the run stops saying so."""
    cfgs = _vertical_files(tmp_path, 12, lambda pid: range(12),
                           key_of=lambda pid: "another key" if pid else KEY)
    res = run("vfedcd", {**SMALL["vfedcd"][0], "vertical.parts": "2,2", **COMMON}, client_app, 2,
              cfgs)
    assert res.status.startswith("stopped") and "share 0 sample ids" in res.status, res.status
    assert "same id-key" in res.status


def test_vfedcd_without_a_shared_key_aligns_by_private_set_intersection(tmp_path,
                                                                         monkeypatch):
    """No id-key: the party reports no ids, only that it aligns by PSI (tests/vertical/
    test_psi.py runs it); with the key, its keyed hashes as before."""
    monkeypatch.delenv("FEDCAUSAL_ID_KEY", raising=False)
    path = write(tmp_path / "p.csv", ["id", "a"], [["x", 1], ["y", 2]])
    for cfg, alignment in (({}, "psi"), ({"id-key": KEY}, "ids")):
        grid = InProcessGrid(client_app, 1, SMALL["vfedcd"][0],
                             {0: {"data-path": path, "columns": "0", **cfg}})
        props = glue("vfedcd").client("vfedcd", grid.contexts[1000]).get_properties({})
        assert props["alignment"] == alignment and ("ids" in props) == (alignment == "ids")


# ---- node config ---------------------------------------------------------------------
def test_node_data_path_must_be_a_csv_and_wins_over_the_run_config(tmp_path):
    rc = {"algorithm": "fdbnl", "dbn.data": "dream4", "dbn.data-path": "/nowhere/x.tsv", **COMMON}
    grid = InProcessGrid(client_app, 1, rc, {0: {"data-path": str(tmp_path / "x.tsv")}})
    with pytest.raises(ValueError, match=r"client 0: node config data-path=.* must name a "
                                         r"\.csv"):
        glue("fdbnl").client("fdbnl", grid.contexts[1000])
    path = write(tmp_path / "ok.csv", ["a", "b"], [[1, 2], [2, 1], [0, 3]])
    grid = InProcessGrid(client_app, 1, rc, {0: {"data-path": path}})
    c = glue("fdbnl").client("fdbnl", grid.contexts[1000])  # the run config's file unread
    assert (c.n, c.d, c.p) == (2, 2, 1)


# ---- bad CSVs: node, file, row and column named ----------------------------------------
BAD = {
    "nan": ("a,b\n1,2\n3,nan\n", r"row 3, column 2 \('b'\): not a finite number"),
    "empty-cell": ("a,b\n1,2\n,4\n", r"row 3, column 1 \('a'\): empty cell"),
    "text": ("a,b\n1,2\n3,abc\n", r"row 3, column 2 \('b'\): not a number$"),
    "too-few-rows": ("a,b\n1,2\n", "too few rows: 1 data rows after the header; need at "
                                   "least 2"),
    "duplicated-name": ("a,b,a\n1,2,3\n4,5,6\n", r"row 1, column 3 \('a'\): duplicated "
                                                 r"variable name \(also column 1\)"),
    "missing-name": ("a,,c\n1,2,3\n4,5,6\n", "row 1, column 2: missing variable name"),
    "extra-field": ("a,b\n1,2\n3,4,5\n", "row 3, column 3: a value without a variable name"),
    "short-row": ("a,b,c\n1,2,3\n4,5\n", r"row 3, column 3 \('c'\): missing value"),
    "empty-file": ("", "empty file; expected a header row of variable names"),
    "blank-file": ("\n\n", "empty file"),
    "inf": ("a,b\n1,inf\n3,4\n", r"row 2, column 2 \('b'\): not a finite"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_csv_names_node_file_row_and_column(tmp_path, case):
    text, words = BAD[case]
    path = tmp_path / f"{case}.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"^client 2: data-path {path}: {words}"):
        read_csv(path, "client 2")


@pytest.mark.parametrize("algorithm", ["fdbnl", "pfdbnl", "fedgc", "fedcf", "fediv", "vfedcd"])
def test_a_bad_csv_fails_on_its_node_for_every_algorithm(tmp_path, algorithm):
    path = tmp_path / "bad.csv"
    text = "a,b,c\n1,2,3\n4,oops,6\n1,1,1\n2,2,2\n"
    if algorithm == "vfedcd":  # its ID column comes first: the bad cell is then column 3
        ids = ["id", *"xyzw"]
        text = "".join(f"{i},{line}\n" for i, line in zip(ids, text.split(), strict=True))
    path.write_text(text)
    rc = {**(SMALL[algorithm][0]), "iv.iv-instrument": "a", "iv.iv-treatment": "b",
          "iv.iv-outcome": "c", "vertical.parts": "3"}
    grid = InProcessGrid(client_app, 1, rc, {0: {"data-path": str(path), "id-key": KEY}})
    who = "party" if algorithm == "vfedcd" else "client"
    col = 3 if algorithm == "vfedcd" else 2
    with pytest.raises(ValueError, match=rf"{who} 0: data-path {path}: row 3, column {col} "
                                         r"\('b'\): not a number$"):
        glue(algorithm).client(algorithm, grid.contexts[1000])


def test_segment_errors_name_the_row(tmp_path):
    path = write(tmp_path / "s.csv", ["rep", "a"], [["r1", 1], ["r2", 2], ["r1", 3]])
    with pytest.raises(ValueError, match=r"client 0: data-path .*: row 4, column 1 \('rep'\): "
                                         "its segment resumes"):
        read_csv(path, "client 0", segment_column="rep")
    path = write(tmp_path / "t.csv", ["rep", "a"], [["r1", 1], ["r1", 2], ["r2", 3]])
    rc = {"algorithm": "fdbnl", "dbn.lags": 1, **COMMON}
    grid = InProcessGrid(client_app, 1, rc, {0: {"data-path": path, "segment-column": "rep"}})
    with pytest.raises(ValueError, match=r"row 4: too few rows: its segment has 1 rows"):
        glue("fdbnl").client("fdbnl", grid.contexts[1000])
    grid = InProcessGrid(client_app, 1, rc, {0: {"data-path": path, "segment-column": "x"}})
    with pytest.raises(ValueError, match=r"row 1: no column named 'x' \(node config "
                                         "segment-column\\)"):
        glue("fdbnl").client("fdbnl", grid.contexts[1000])


def test_duplicated_ids_are_named(tmp_path):
    path = write(tmp_path / "d.csv", ["id", "a"], [["p1", 1], ["p2", 2], ["p1", 3]])
    with pytest.raises(ValueError, match=r"row 4, column 1 \('id'\): duplicated ID "
                                         r"\(also row 2\)"):
        read_csv(path, "party 1", id_column="id")


def test_names_come_back_in_header_order(tmp_path):
    path = write(tmp_path / "n.csv", ["rep", "x3", "x1"], [["a", 1, 2], ["a", 3, 4]])
    t = read_csv(path, "client 0", segment_column="rep")
    assert t.names == ["x3", "x1"] and t.segments == ["a", "a"]
    np.testing.assert_array_equal(t.values, [[1, 2], [3, 4]])


def test_names_reach_a_client_that_takes_them():
    from fedcausal_flwr.data.csvdata import constructor_kwargs

    class Named:
        def __init__(self, x, names=None):
            pass

    class Unnamed:
        def __init__(self, x):
            pass

    assert constructor_kwargs(Named, ["a", "b"]) == {"names": ["a", "b"]}
    assert constructor_kwargs(Unnamed, ["a", "b"]) == {}


@pytest.mark.parametrize("algorithm,rc", [
    ("fdbnl", {"dbn.data": "node"}), ("fedgc", {"statespace.ss-data": "node"}),
    ("fediv", {"iv.iv-outcome": "y"}), ("vfedcd", {"vertical.data": "node"})])
def test_a_run_on_node_data_refuses_a_node_without_its_csv(algorithm, rc):
    rc = {**SMALL[algorithm][0], **rc}
    grid = InProcessGrid(client_app, 1, rc)
    with pytest.raises(ValueError, match="has no node config data-path"):
        glue(algorithm).client(algorithm, grid.contexts[1000])
