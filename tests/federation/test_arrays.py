"""The arrays-by-name adapter: packs a phase by name, refuses what differs, naming the array."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.federation.arrays import Layout, group, one
from fedcausal_flwr.vertical import wire


def _update_reply() -> Layout:
    """A VFedCD-like reply: a group of per-target graph fragments and one scalar."""
    return Layout("vfedcd_update reply", ("B", "h"), [
        group("B", [("B.t0", ((3, 2), "float")), ("B.t1", ((3, 4), "float"))]),
        one("h", ((), "float"))])


def test_pack_orders_by_the_phase_names_and_unpack_is_its_inverse():
    lay = _update_reply()
    b0, b1, h = np.zeros((3, 2)), np.ones((3, 4)), np.array(2.0)
    out = lay.pack({"h": h, "B": {"B.t1": b1, "B.t0": b0}})
    assert [a.shape for a in out] == [(3, 2), (3, 4), ()]
    assert out[0] is b0 and out[1] is b1 and out[2] is h
    assert lay.pack({"B": [b0, b1], "h": h})[1] is b1  # a group may come as a list
    got = lay.unpack(out)
    assert list(got) == ["B", "h"] and list(got["B"]) == ["B.t0", "B.t1"]
    assert got["B"]["B.t1"] is b1 and got["h"] is h
    assert lay.labels() == ["B.t0", "B.t1", "h"]
    assert lay.specs() == [((3, 2), "float"), ((3, 4), "float"), ((), "float")]


def test_a_reply_with_a_wrong_shape_is_refused_naming_the_array():
    lay = _update_reply()
    arrays = [np.zeros((3, 2)), np.zeros((3, 2)), np.array(1.0)]
    with pytest.raises(ValueError, match=r"^vfedcd_update reply: array 'B.t1' has shape "
                                         r"\(3, 2\), expected \(3, 4\)$"):
        lay.unpack(arrays)
    with pytest.raises(ValueError, match="array 'h' has shape"):
        lay.unpack([np.zeros((3, 2)), np.zeros((3, 4)), np.zeros(1)])


def test_a_reply_with_a_wrong_dtype_is_refused_naming_the_array():
    lay = _update_reply()
    with pytest.raises(ValueError, match="array 'B.t0' has dtype float32, expected float64"):
        lay.unpack([np.zeros((3, 2), np.float32), np.zeros((3, 4)), np.array(1.0)])
    ints = Layout("x reply", ("z",), [one("z", ((None,), "uint64"))])
    ints.unpack([np.zeros(7, np.uint64)])  # None: any length
    with pytest.raises(ValueError, match="array 'z' has dtype int64, expected uint64"):
        ints.unpack([np.zeros(7, np.int64)])
    with pytest.raises(ValueError, match=r"array 'z' has shape \(2, 3\), expected \(any,\)"):
        ints.unpack([np.zeros((2, 3), np.uint64)])


def test_a_reply_with_a_wrong_count_is_refused_naming_what_it_should_hold():
    lay = _update_reply()
    with pytest.raises(ValueError, match=r"vfedcd_update reply: 2 arrays, expected 3 \(B, h\)"):
        lay.unpack([np.zeros((3, 2)), np.zeros((3, 4))])
    with pytest.raises(ValueError, match="4 arrays, expected 3"):
        lay.unpack([np.zeros((3, 2)), np.zeros((3, 4)), np.array(1.0), np.array(1.0)])


def test_pack_refuses_a_missing_or_unknown_name_or_label_and_a_wrong_group_size():
    lay = _update_reply()
    b = {"B.t0": np.zeros((3, 2)), "B.t1": np.zeros((3, 4))}
    with pytest.raises(ValueError, match="array 'h' missing"):
        lay.pack({"B": b})
    with pytest.raises(ValueError, match="unknown array 'W'"):
        lay.pack({"B": b, "h": np.array(1.0), "W": np.zeros(1)})
    with pytest.raises(ValueError, match="array 'B.t1' missing"):
        lay.pack({"B": {"B.t0": b["B.t0"]}, "h": np.array(1.0)})
    with pytest.raises(ValueError, match="unknown array 'B.t2' in 'B'"):
        lay.pack({"B": {**b, "B.t2": np.zeros((3, 1))}, "h": np.array(1.0)})
    with pytest.raises(ValueError, match="'B' is a group of 2 arrays, got one array"):
        lay.pack({"B": np.zeros((2, 3, 2)), "h": np.array(1.0)})
    with pytest.raises(ValueError, match="'B' has 1 arrays, expected 2"):
        lay.pack({"B": [b["B.t0"]], "h": np.array(1.0)})
    with pytest.raises(ValueError, match=r"array 'B.t1' has shape \(3, 2\), expected \(3, 4\)"):
        lay.pack({"B": [b["B.t0"], b["B.t0"]], "h": np.array(1.0)})


def test_a_layout_must_describe_the_phase_and_labels_are_distinct():
    with pytest.raises(ValueError, match="the layout names"):
        Layout("p reply", ("B", "h"), [one("B")])
    with pytest.raises(ValueError, match="the layout names"):
        Layout("p reply", ("B",), [one("B"), one("h")])
    with pytest.raises(ValueError, match="repeat"):
        group("B", [("B.t0", None), ("B.t0", None)])


def test_vfedcd_layouts_name_every_array_per_peer_target_and_replica():
    reply = wire.layout("vfedcd_update", "up", 1, 3, copies=2)
    assert reply.names == ("frag", "B")
    labels = reply.labels()
    assert labels[:3] == ["p0.r0.frag.t0", "p0.r0.frag.t1", "p0.r0.frag.t2"]
    assert labels[6:9] == ["p2.r0.frag.t0", "p2.r0.frag.t1", "p2.r0.frag.t2"]
    assert labels[12:] == [f"r{r}.B.t{t}" for r in range(2) for t in range(3)]
    plain = wire.layout("vfedcd_share", "down", 0, 2)
    assert plain.labels() == ["p1.he2ss.t0", "p1.he2ss.t1", "G"]
    # the relay: what party 0 sends party 2 arrives labelled by its source
    sent = {0: {"p2.z": np.zeros(1), "p1.z": np.ones(1)}, 1: {"p2.z": np.full(1, 2.0)}}
    assert {d: list(m) for d, m in wire.routed(sent).items()} == {2: ["p0.z", "p1.z"],
                                                                  1: ["p0.z"]}
    assert wire.by_peer({"p1.r0.z": 1, "p1.r1.z": 2, "p3.r0.z": 3}) == {
        1: {"r0.z": 1, "r1.z": 2}, 3: {"r0.z": 3}}
    shares = wire.addressed({1: {"z": np.zeros((2, 3), np.uint64)}})
    assert shares["p1.z"].shape == (6,)  # shares travel flat


def test_a_vfedcd_reply_with_a_wrong_fragment_is_refused_naming_it():
    d = [2, 3]

    def spec(name, peer, r, t):
        return {"frag": ((None,), "uint64"), "B": ((5, d[t]), "float")}[name]

    reply = wire.layout("vfedcd_update", "up", 0, 2, spec=spec)
    good = [np.zeros(4, np.uint64), np.zeros(6, np.uint64), np.zeros((5, 2)), np.zeros((5, 3))]
    assert list(reply.unpack(good)["B"]) == ["B.t0", "B.t1"]
    bad = [*good[:3], np.zeros((5, 2))]
    with pytest.raises(ValueError, match=r"vfedcd_update reply: array 'B.t1' has shape "
                                         r"\(5, 2\), expected \(5, 3\)"):
        reply.unpack(bad)


def test_a_party_refuses_a_message_whose_arrays_differ_naming_itself_and_the_phase():
    from fedcausal_flwr.vertical.client import VFedCDClient

    party = VFedCDClient(np.zeros((4, 2)), [0, 1], np.arange(4), partition_id=1,
                         num_partitions=2)
    with pytest.raises(ValueError, match=r"^party 1: vfedcd_keys message: 1 arrays, "
                                         r"expected 0 \(none\)$"):
        party.fit([np.zeros(3)], {"phase": "vfedcd_keys"})
