"""VFedCD replicas (edge confidence): replicas ride in the run's own messages, each equals
its reference loop, replica 0 is the ordinary run bit for bit, every party derives the same
halves, and the result carries each edge's selection frequency and the stable set."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.secure.shares import backend as he_backend
from fedcausal_flwr.stability import (
    complementary_halves,
    selection_frequency,
    stability_bound,
)
from fedcausal_flwr.vertical import dispatch, loop
from fedcausal_flwr.vertical import model as V
from fedcausal_flwr.vertical.data import party_data
from fedcausal_flwr.vertical.model import VFedCDSettings
from tests.helpers.vfedcd import RC, run

R2 = {**RC, "vertical.replicas": 2}


@pytest.fixture(scope="module")
def runs():
    """One Flower run without replicas and one with two (mock backend, 20 rows)."""
    return run(RC), run(R2)


@pytest.mark.integration
def test_replica_zero_is_the_ordinary_run_bit_for_bit_in_the_same_exchanges(runs):
    (plain, g0), (rep, g2) = runs
    assert plain.status == rep.status == "completed"
    np.testing.assert_array_equal(rep.estimates["B"], plain.estimates["B"])
    np.testing.assert_array_equal(rep.estimates["dag"], plain.estimates["dag"])
    assert [h["loss"] for h in rep.history] == [h["loss"] for h in plain.history]
    assert "B_frequency" not in plain.estimates and "stability" not in plain.metrics
    types = [m.metadata.message_type for m in g0.sent]
    assert types == [m.metadata.message_type for m in g2.sent]  # same exchanges, same order
    sizes = [sum(a.numpy().nbytes for a in m.content["arrays"].values()) if "arrays" in
             m.content else 0 for m in g2.sent]
    assert sum(sizes) > 2 * sum(sum(a.numpy().nbytes for a in m.content["arrays"].values())
                                if "arrays" in m.content else 0 for m in g0.sent)


@pytest.mark.integration
def test_each_replica_in_flower_equals_its_reference_loop(runs):
    _, (rep, _) = runs
    xs = [party_data(R2, i, 3)[0] for i in range(3)]
    s = VFedCDSettings.from_run_config(R2)
    refs = loop.train_replicas(xs, s)
    graphs = np.stack([V.graph(ref.F, [2, 2, 2]) for ref in refs[1:]])
    conf, metrics = V.edge_confidence(graphs, s.tau, s.stability_threshold)
    np.testing.assert_array_equal(rep.estimates["B_frequency"], conf["B_frequency"])
    np.testing.assert_array_equal(rep.estimates["B_stable"], conf["B_stable"])
    assert rep.metrics["stability"] == pytest.approx(metrics)
    assert not np.array_equal(graphs[0], graphs[1])  # the halves differ


@pytest.mark.integration
def test_the_result_names_and_shapes_the_frequencies(runs):
    _, (rep, _) = runs
    f = np.asarray(rep.estimates["B_frequency"])
    assert f.shape == (6, 6) and set(np.unique(f)) <= {0.0, 0.5, 1.0}
    assert rep.names["B_frequency"] == rep.names["B"]
    m = rep.metrics["stability"]
    assert m["replicas"] == 2 and m["candidates"] == 30 and m["threshold"] == 0.75
    assert m["false_edge_bound"] == pytest.approx(m["mean_selected"] ** 2 / (0.5 * 30))
    np.testing.assert_array_equal(rep.estimates["B_stable"], f >= 0.75)


def test_every_party_derives_the_same_halves_and_the_same_exchanges():
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(21, 2)) for _ in range(3)]
    s = VFedCDSettings.paper(epochs=1, batch=8, he_backend="mock", key_bits=256,
                             insecure_test_keys=True, replicas=4)
    parties = [dispatch.Replicas(k, x, [2, 2, 2], s, he_backend("mock", 256))
               for k, x in enumerate(xs)]
    for p in parties[1:]:
        for a, b in zip(p.rows, parties[0].rows, strict=True):
            np.testing.assert_array_equal(a, b)
        assert all(np.array_equal(a, b) for a, b in
                   zip(p.batches(0, 1), parties[0].batches(0, 1), strict=True))
    rows = parties[0].rows
    assert len(rows[1]) == len(rows[2]) == 10 and not set(rows[1]) & set(rows[2])
    assert not np.array_equal(rows[1], rows[3])  # pair 2 is another split
    logs = {}
    for reps in (0, 4):
        logs[reps] = []
        dispatch.run_replicas(xs, VFedCDSettings.paper(
            epochs=1, batch=8, he_backend="mock", key_bits=256, insecure_test_keys=True,
            replicas=reps), he_backend("mock", 256), 1, log=logs[reps])
    assert [p for p, _ in logs[0]] == [p for p, _ in logs[4]]


def test_the_stability_helpers():
    halves = [complementary_halves(9, r, 5) for r in (1, 2)]
    assert [len(h) for h in halves] == [4, 4] and not set(halves[0]) & set(halves[1])
    np.testing.assert_array_equal(complementary_halves(9, 1, 5), halves[0])
    assert stability_bound(3.0, 30, 0.75) == pytest.approx(0.6)
    g = np.array([[[0.0, 0.8]], [[0.0, 0.2]], [[0.5, -0.9]]])
    np.testing.assert_array_equal(selection_frequency(g, 0.5), [[1 / 3, 2 / 3]])
    for bad in (lambda: stability_bound(1.0, 30, 0.5), lambda: complementary_halves(9, 0, 5)):
        with pytest.raises(ValueError):
            bad()


@pytest.mark.parametrize("changes, words", [
    ({"replicas": 3}, ["'vertical.replicas'", "even"]),
    ({"replicas": 2, "mode": "ctv"}, ["'vertical.replicas'", "'vfedcd'"]),
    ({"stability_threshold": 0.5}, ["stability-threshold"])])
def test_bad_replica_settings_are_refused_naming_the_key(changes, words):
    with pytest.raises(ValueError) as e:
        VFedCDSettings(**changes)
    assert all(w in str(e.value) for w in words)


def test_too_small_a_half_for_the_steps_is_refused_naming_the_keys():
    s = VFedCDSettings(batch=1, replicas=2)
    with pytest.raises(ValueError, match="'vertical.batch'.*'vertical.replicas'"):
        V.replica_batches(10, s, 1, 0)


@pytest.mark.integration
def test_the_view_labels_the_frequencies_as_bs_layer(runs):
    from fedcausal_flwr.vertical import view

    (plain, _), (rep, _) = runs
    assert plain.frequencies() == {} and view.layers(plain)[0].frequency is None
    layer = view.layers(rep)[0]
    np.testing.assert_array_equal(layer.frequency, rep.estimates["B_frequency"])
    assert layer.sources == rep.names["B"]
    f = rep.frequencies()
    v = rep.names["B"]
    assert f[(v[0], v[1], 0)] == rep.estimates["B_frequency"][0, 1]
    assert {(s, t) for s, t, *_ in rep.stable_edges()} == {
        (v[i], v[j]) for i, j in zip(*np.nonzero(rep.estimates["B_stable"]), strict=True)}
    # a threshold applies to B, never to the frequencies or the stable set
    cut = rep.threshold(10.0)
    np.testing.assert_array_equal(cut.estimates["B_frequency"], rep.estimates["B_frequency"])
