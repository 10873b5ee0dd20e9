"""Issue 35, item 5: ``nan``/``inf`` refused in every float key (timeouts included) and in
every list of numbers, list lengths bounded; checked once where settings are parsed
(:func:`fedcausal_flwr.settings.coerce`), so every family's keys are covered, each error naming
the key.

The keys are found from the registry (every class an algorithm's run reads), not listed here,
so a float key added later is covered too.
"""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from fedcausal_flwr import registry
from fedcausal_flwr.appconfig import readers
from fedcausal_flwr.settings import MAX_LIST


def _keys(kind: str) -> list[tuple[str, type, str]]:
    """(algorithm, reader class, bare key) of every run-config float (``kind="float"``) or
    number-list (``kind="floats"``) key."""
    out, seen = [], set()
    for alg in registry.ALGORITHMS:
        for cls in readers(alg):
            hints = typing.get_type_hints(cls)
            for f in dataclasses.fields(cls):
                meta = f.metadata.get("fedcausal", {})
                key = meta.get("key")
                if not key or (cls, key) in seen:
                    continue
                if (kind == "float" and hints.get(f.name) is float
                        and not meta.get("allow_inf")) or (kind == "floats"
                                                           and meta.get("floats")):
                    seen.add((cls, key))
                    out.append((alg, cls, key))
    return out


FLOAT_KEYS = _keys("float")
LIST_KEYS = _keys("floats")
LIST_IDS = [f"{c.__name__}-{k}" for _, c, k in LIST_KEYS]


def test_the_keys_are_found():
    keys = {k for _, _, k in FLOAT_KEYS}
    assert {"round-timeout-s", "node-wait-s", "node-grace-s", "lambda-w"} <= keys
    assert {k for _, _, k in LIST_KEYS} >= {"lambda-path", "tau-path", "ss-cf-delta"}


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("alg,cls,key", FLOAT_KEYS,
                         ids=[f"{c.__name__}-{k}" for _, c, k in FLOAT_KEYS])
def test_every_float_key_refuses_nan_and_inf(alg, cls, key, value):
    app_key = cls.app_key(key)
    with pytest.raises(ValueError, match=f"'{app_key}'") as e:
        cls.from_run_config({app_key: value})
    assert "inf" in str(e.value) or "NaN" in str(e.value)


@pytest.mark.parametrize("bad", ["0.1,nan", "inf", "0.2,-inf,0.1", "1e999"])
@pytest.mark.parametrize("alg,cls,key", LIST_KEYS, ids=LIST_IDS)
def test_every_number_list_refuses_nan_and_inf(alg, cls, key, bad):
    app_key = cls.app_key(key)
    with pytest.raises(ValueError, match=f"'{app_key}'.*NaN and inf are not values"):
        cls.from_run_config({app_key: bad})


@pytest.mark.parametrize("alg,cls,key", LIST_KEYS, ids=LIST_IDS)
def test_every_number_list_is_bounded(alg, cls, key):
    app_key = cls.app_key(key)
    cls.from_run_config({app_key: ",".join(["0.1"] * MAX_LIST)})  # the bound itself: accepted
    with pytest.raises(ValueError, match=f"'{app_key}'.*{10**5} values, at most {MAX_LIST}") \
            as e:
        cls.from_run_config({app_key: ",".join(["0.1"] * 10**5)})
    assert len(str(e.value)) < 600  # the value is not echoed whole


def test_the_dp_budget_keeps_inf_as_no_noise():
    from fedcausal_flwr.statespace.settings import FedGCSettings

    s = FedGCSettings.from_run_config({"statespace.ss-dp-epsilon": math.inf})
    assert math.isinf(s.dp_epsilon)
    with pytest.raises(ValueError, match="'statespace.ss-dp-epsilon'"):
        FedGCSettings.from_run_config({"statespace.ss-dp-epsilon": math.nan})


def test_the_app_refuses_them_before_any_node():
    """Through the App's own path (the ServerApp's ``strategy()``), naming the key."""
    from fedcausal_flwr.appconfig import glue

    for rc in ({"dbn.lambda-path": "0.2,nan", "dbn.lambda-select": "holdout"},
               {"dbn.tau-path": ",".join(["0.1"] * 10**5)}, {"dbn.lambda-w": math.inf},
               {"round-timeout-s": math.inf}, {"node-wait-s": math.nan}):
        with pytest.raises(ValueError, match=f"'{next(iter(rc))}'"):
            glue("fdbnl").strategy("fdbnl", {"algorithm": "fdbnl", **rc})
