"""One wire contract: ``setting(wire=True)`` fields travel as ``to_wire()`` and come back with
``from_wire``; each family's phase table names the arrays its client and strategy exchange."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from importlib import import_module

import pytest
from flwr.app import ConfigRecord

from fedcausal_flwr import registry
from fedcausal_flwr.settings import Settings, setting

ALGORITHMS = list(registry.ALGORITHMS)


@dataclass(frozen=True)
class Toy(Settings):
    a: float = setting(0.5, "toy-a", ge=0, wire=True)
    b: tuple[float, float] = setting((0.1, 0.2), wire=True)
    c: int = setting(3, "toy-c")


def test_to_wire_sends_the_wire_fields_by_name_and_from_wire_reads_them_back():
    s = Toy(a=2.0, b=(0.3, 0.4), c=9)
    assert s.to_wire() == {"a": 2.0, "b": [0.3, 0.4]}
    back = Toy.from_wire({**s.to_wire(), "server-round": 3, "c": 7})  # extra keys ignored
    assert (back.a, back.b, back.c) == (2.0, (0.3, 0.4), 3)  # c is not on the wire
    with pytest.raises(ValueError, match=r"client 4: .* lacks the Toy wire settings \['a'\]"):
        Toy.from_wire({"b": [0.1, 0.2]}, "client 4")
    with pytest.raises(ValueError, match="must be >= 0"):
        Toy.from_wire({"a": -1.0, "b": [0.1, 0.2]})


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithms_wire_settings_are_config_record_safe_and_round_trip(algorithm):
    cls = registry.get(algorithm).settings_class()
    s = cls()
    wire = s.to_wire()
    # FDBNL's clients read none of its settings (its local step is closed-form): none travel
    assert bool(wire) == (algorithm != "fdbnl") and set(wire) == set(cls.wire_fields())
    ConfigRecord(wire)  # scalars, strings and lists of them only
    assert cls.from_wire(dict(ConfigRecord(wire))).to_wire() == wire


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_clients_phases_are_in_its_familys_phase_table(algorithm):
    a = registry.get(algorithm)
    table = import_module(f"{a.package}.wire").PHASES
    table = table.get(algorithm, table)  # the state-space family has one table per algorithm
    assert set(a.client_class().phases) <= set(table)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_client_message_bounds_each_value_as_its_settings_field_does(algorithm):
    cls = registry.get(algorithm).settings_class()
    message = cls.client_message
    if message is None:
        pytest.skip(f"{algorithm}'s clients read its settings' own wire fields")
    own = {f.name: f for f in dataclasses.fields(cls)}
    for f in dataclasses.fields(message):
        assert f.name in own, f"{message.__name__}.{f.name} is no field of {cls.__name__}"
        mine, theirs = (g.metadata["fedcausal"] for g in (f, own[f.name]))
        for bound in ("ge", "gt", "le", "lt"):
            assert mine[bound] == theirs[bound], (f.name, bound)
        assert theirs["choices"] is None or set(theirs["choices"]) <= set(mine["choices"])
