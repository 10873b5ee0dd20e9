"""Settings: one frozen dataclass per algorithm holds every default, once.

A field made with :func:`setting` names its run-config key and what values it allows;
:meth:`Settings.from_run_config` turns a Flower run config (or node config) into settings,
and every construction is validated, so a wrong type or an out-of-range value fails before
any node is contacted, with an error that names the key, the value and what is allowed::

    @dataclass(frozen=True)
    class MySettings(Settings):
        lambda_w: float = setting(0.1, "lambda-w", ge=0)
        mode: str = setting("gda", "iv-mode", choices=("gda", "sgda"))

    MySettings.from_run_config({"lambda-w": -1})
    # ValueError: run config 'lambda-w' = -1: must be >= 0

The run config is sectioned: the keys every algorithm shares (:data:`SHARED_KEYS`) sit at the
top of ``[tool.flwr.app.config]``, each family's keys in its own table
(``[tool.flwr.app.config.dbn]``), which Flower flattens to ``dbn.lambda-w``. A class's
``section`` names its table; :meth:`Settings.from_run_config` reads the keys of its section
(and the shared ones), or a section's keys without their prefix (what the App hands the
family's glue).

A field made with ``setting(..., wire=True)`` is one the clients need: the strategy sends
:meth:`Settings.to_wire` (``{field name: value}``) with its messages and the client reads it
back with :meth:`Settings.from_wire`, the one way settings reach a client. A class whose
``client_message`` names a :class:`ClientMessage` sends that small typed message instead (only
what its clients read), and its ``from_wire`` builds that message, not the whole settings.

The App's config declares exactly :meth:`Settings.app_config` of each
algorithm's defaults (tested), so the App, the scripts and a user's own project agree.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from difflib import get_close_matches
from typing import Any, ClassVar, Self

_META = "fedcausal"
_SEEN: dict[tuple, Any] = {}  # (class, config, overrides) -> its settings (from_run_config)
_SEEN_MAX = 256


def _config_key(cls: type, config: Mapping[str, Any], overrides: Mapping[str, Any]
                ) -> tuple | None:
    """The memo key of a run config: its items with each value's type (1, 1.0 and True
    differ); None when a value cannot be hashed (a list)."""
    try:
        key = (cls, *((k, type(v), v) for k, v in sorted(config.items(), key=_first)), None,
               *((k, type(v), v) for k, v in sorted(overrides.items())))
        hash(key)
    except TypeError:
        return None
    return key


def _first(item: tuple[Any, Any]) -> str:
    """The key of a (key, value) item, as a string (configs may mix key types)."""
    return str(item[0])


SHARED_KEYS = frozenset({"algorithm", "seed", "outputs", "run-name", "min-nodes", "node-wait-s",
                         "round-timeout-s", "node-grace-s", "bind-partitions"})
"""Run-config keys at the top of the run config, read alike by every algorithm."""

# Upper bounds of every size a run config sets: generous for real use, they stop an absurd value
# (10**9 rows) with an error naming the key before the server or a node allocates anything.
MAX_ROWS = 10_000_000
"""Rows (samples, time steps, a batch) of a data set or a client's share of it."""
MAX_VARS = 2000
"""Variables of a model (d, p, u)."""
MAX_LAGS = 100
"""Lags of a DBN (also bounded by the rows of a client)."""
MAX_ROUNDS = 100_000
"""Rounds, epochs and local steps."""
MAX_CLIENTS = 10_000
"""Clients (nodes) of a federation."""
MAX_REPLICAS = 1000
"""Replicas of one run (half samples times penalties)."""
MAX_KEY_BITS = 16384
"""Paillier key size."""
MAX_LIST = 100
"""Values of a comma-separated list key (``dbn.lambda-path``, ``dbn.tau-path``,
``statespace.ss-cf-delta``): a path of 10**5 penalties would multiply a run's cost."""


def numbers(text: str) -> tuple[float, ...]:
    """A comma-separated list of numbers, e.g. ``"0.2,0.1,0.05"`` (empty: none)."""
    return tuple(float(t) for t in str(text).split(",") if t.strip())


def _float_list(text: str, bad: Any, meta: Mapping[str, Any]) -> None:
    """Check a comma-separated list of numbers (a ``setting(..., floats=True)`` field): every
    value finite and within the field's bounds, between ``min_items`` and :data:`MAX_LIST`
    values; ``bad(why)`` makes the ValueError that names the key."""
    parts = [t for t in text.split(",") if t.strip()]
    if len(parts) > MAX_LIST:
        raise bad(f"{len(parts)} values, at most {MAX_LIST}")
    try:
        values = [float(t) for t in parts]
    except ValueError:
        raise bad("expected comma-separated numbers") from None
    if len(values) < int(meta.get("min_items") or 0):
        raise bad(f"expected comma-separated numbers, at least {meta['min_items']}")
    if not all(map(math.isfinite, values)):
        raise bad("NaN and inf are not values")
    for op, test in (("ge", lambda a, b: a >= b), ("gt", lambda a, b: a > b),
                     ("le", lambda a, b: a <= b), ("lt", lambda a, b: a < b)):
        if meta.get(op) is not None and not all(test(v, meta[op]) for v in values):
            raise bad(f"every value must be {dict(ge='>=', gt='>', le='<=', lt='<')[op]} "
                      f"{meta[op]}")


def section_view(section: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``section`` without their prefix, beside the shared keys.

    A config that holds no key of ``section`` is taken to be such a view already and comes
    back as it is.
    """
    prefix = section + "."
    if not section or not any(str(k).startswith(prefix) for k in config):
        return dict(config)
    out = {k: v for k, v in config.items() if k in SHARED_KEYS}
    out.update({k[len(prefix):]: v for k, v in config.items() if str(k).startswith(prefix)})
    return out


def setting(default: Any, key: str | None = None, *, ge: float | None = None,
            gt: float | None = None, le: float | None = None, lt: float | None = None,
            choices: Sequence[Any] | None = None, doc: str = "", wire: bool = False,
            instead_of: tuple[str, Any] | None = None, floats: bool = False,
            min_items: int = 0, allow_inf: bool = False) -> Any:
    """A dataclass field with its run-config ``key`` (None: not in the run config) and bounds
    (``default`` ``dataclasses.MISSING``: none, the field must be given); ``wire``: the
    clients need it (sent by :meth:`Settings.to_wire`); ``instead_of``: ``(other key, its
    default)``, the key under which another algorithm of the section reads this field's
    value, refused by :meth:`Settings.from_run_config` when set to other than its default.

    A float is finite unless ``allow_inf`` (NaN never). ``floats``: a str field holding
    comma-separated numbers, each finite and within the bounds, ``min_items`` to
    :data:`MAX_LIST` of them."""
    meta = {"key": key, "ge": ge, "gt": gt, "le": le, "lt": lt,
            "choices": tuple(choices) if choices is not None else None, "doc": doc,
            "wire": wire, "instead_of": instead_of, "floats": floats, "min_items": min_items,
            "allow_inf": allow_inf}
    return dataclasses.field(default=default, metadata={_META: meta})


def _meta(f: dataclasses.Field) -> dict[str, Any]:
    return f.metadata.get(_META, {"key": None})


def _allowed(meta: Mapping[str, Any], kind: type) -> str:
    """What a field allows, in words."""
    parts = [kind.__name__]
    if meta.get("floats"):
        parts = ["str of comma-separated numbers, such as '0.1,0.05', each"]
    if meta.get("choices") is not None:
        return "one of " + ", ".join(repr(c) for c in meta["choices"])
    for op, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if meta.get(op) is not None:
            parts.append(f"{word} {meta[op]}")
    if meta.get("floats"):
        parts.append(f"and finite, {meta.get('min_items') or 0} to {MAX_LIST} of them")
    elif kind is float:
        parts.append(", inf allowed" if meta.get("allow_inf") else ", finite")
    return " ".join(parts).replace(" ,", ",")


def coerce(value: Any, kind: type, where: str, meta: Mapping[str, Any]) -> Any:
    """``value`` as ``kind`` (int, float, bool or str) within the bounds of ``meta``.

    Raises
    ------
    ValueError
        Naming ``where`` (the key), the value and what is allowed.
    """
    def bad(why: str) -> ValueError:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else f"{shown[:80]}... ({len(shown)} characters)"
        return ValueError(f"{where} = {shown}: {why} (allowed: {_allowed(meta, kind)})")

    if kind is bool:
        if not isinstance(value, bool):
            raise bad("expected true or false")
        out: Any = value
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("expected an integer")
        out = int(value)
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("expected a number")
        out = float(value)
        if out != out:
            raise bad("NaN is not a value")
        if math.isinf(out) and not meta.get("allow_inf"):
            raise bad("inf is not a value")
    elif kind is str:
        if not isinstance(value, str):
            raise bad("expected a string")
        if meta.get("floats"):
            _float_list(value, bad, meta)
            return value
        out = value
    else:
        return value
    if meta.get("choices") is not None and out not in meta["choices"]:
        raise bad("not an allowed value")
    for op, test in (("ge", lambda a, b: a >= b), ("gt", lambda a, b: a > b),
                     ("le", lambda a, b: a <= b), ("lt", lambda a, b: a < b)):
        if meta.get(op) is not None and not test(out, meta[op]):
            raise bad(f"must be {dict(ge='>=', gt='>', le='<=', lt='<')[op]} {meta[op]}")
    return out


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, resolved once per class (a client builds its settings
    at every message; resolving the hints was most of that cost)."""
    return typing.get_type_hints(cls)


@functools.cache
def _registered_section_keys(section: str) -> frozenset[str]:
    """Every bare key the registered algorithms of ``section`` read (none: not registered)."""
    from fedcausal_flwr import registry

    out: set[str] = set()
    for name in registry.sections().get(section, ()):
        alg = registry.get(name)
        out |= set(alg.raw_keys) | {k for c in alg.reader_classes() for k in c.keys()}
    return frozenset(out - SHARED_KEYS)


@dataclass(frozen=True)
class Settings:
    """Base of every algorithm's settings: validation and the run-config mapping."""

    section: ClassVar[str] = ""
    """The run-config table of its keys (``"dbn"``: ``dbn.lambda-w``); "" for shared keys."""

    client_message: ClassVar[type[ClientMessage] | None] = None
    """What its clients read, as a small typed message (None: its own wire fields)."""

    def __post_init__(self) -> None:
        hints = field_types(type(self))
        for f in fields(self):
            meta = _meta(f)
            kind = hints.get(f.name)
            if kind in (int, float, bool, str):
                where = f"run config {self.app_key(meta['key'])!r}" if meta.get("key") \
                    else f"{type(self).__name__}.{f.name}"
                object.__setattr__(self, f.name,
                                   coerce(getattr(self, f.name), kind, where, meta))

    @classmethod
    def keys(cls) -> dict[str, str]:
        """``{run-config key: field name}`` of every field that the run config can set."""
        return {_meta(f)["key"]: f.name for f in fields(cls) if _meta(f).get("key")}

    @classmethod
    def coerced(cls, key: str, value: Any, where: str) -> Any:
        """``value`` of the run-config key ``key`` (bare) coerced and bounded as its field is
        (:func:`coerce`); a ValueError naming ``where``, where the value came from."""
        name = cls.keys()[key]
        field = next(f for f in fields(cls) if f.name == name)
        return coerce(value, field_types(cls)[name], where, _meta(field))

    @classmethod
    def app_key(cls, key: str) -> str:
        """The key as the App's run config spells it: ``<section>.<key>`` unless shared."""
        return key if key in SHARED_KEYS or not cls.section else f"{cls.section}.{key}"

    @classmethod
    def section_keys(cls) -> frozenset[str]:
        """The bare keys of ``section`` that a run reads: this class's and, for a registered
        section, those of every class an algorithm of the section reads
        (as :func:`fedcausal_flwr.appconfig.section_keys` lists them)."""
        return frozenset(cls.keys()) | _registered_section_keys(cls.section)

    @classmethod
    def read_instead(cls) -> dict[str, tuple[str, Any]]:
        """``{other key: (own key, other default)}`` of the fields read under their own key
        where another algorithm of the section reads another (``setting(instead_of=...)``:
        PFDBNL's own lambdas)."""
        return {m["instead_of"][0]: (m["key"], m["instead_of"][1])
                for m in map(_meta, fields(cls)) if m.get("instead_of")}

    @classmethod
    def from_run_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """Settings from a run config: its keys over the defaults, then ``overrides``.

        ``config`` is sectioned (``dbn.lambda-w``) or one section's view (``lambda-w``). Keys of
        other sections are ignored; a key of this class with a wrong type or value, or given
        without its section beside sectioned keys, raises a ValueError naming it; so does a
        sectioned key that nothing of its section reads (a typo such as ``dbn.lamda-w``,
        :meth:`section_keys`; the nearest key named), and the other key of a field this class
        reads under its own (:meth:`read_instead`) set to other than its default, which this
        class would otherwise ignore.

        The settings of a config seen before are returned again (they are frozen): a
        client process answers every message of a run from the same run config.
        """
        key = _config_key(cls, config, overrides)
        if key is not None and (hit := _SEEN.get(key)) is not None:
            return hit
        settings = cls._parse_run_config(config, overrides)
        if key is not None:
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            _SEEN[key] = settings
        return settings

    @classmethod
    def _parse_run_config(cls, config: Mapping[str, Any], overrides: Mapping[str, Any]
                          ) -> Self:
        """:meth:`from_run_config` without the memo."""
        if cls.section and any(str(k).startswith(cls.section + ".") for k in config):
            stale = [k for k in cls.keys() if k in config and k not in SHARED_KEYS]
            if stale:
                raise ValueError("run config: " + "; ".join(
                    f"{k!r} is now {cls.app_key(k)!r}" for k in stale))
            known, prefix = cls.section_keys(), cls.section + "."
            unknown = sorted(k[len(prefix):] for k in map(str, config)
                             if k.startswith(prefix) and k[len(prefix):] not in known)
            if unknown:
                raise ValueError("run config: " + "; ".join(
                    f"{cls.app_key(k)!r} is not a key of section {cls.section!r}"
                    + (f" (did you mean {cls.app_key(near[0])!r}?)" if (near := get_close_matches(
                        k, sorted(known), n=1, cutoff=0.6)) else "") for k in unknown))
        config = section_view(cls.section, config)
        ignored = [(k, mine) for k, (mine, default) in cls.read_instead().items()
                   if k in config and k not in cls.keys() and config[k] != default]
        if ignored:
            raise ValueError("run config: " + "; ".join(
                f"{cls.app_key(k)!r} = {config[k]!r} is not read by {cls.__name__}: set "
                f"{cls.app_key(mine)!r} instead" for k, mine in ignored))
        values = {name: config[key] for key, name in cls.keys().items() if key in config}
        values.update(overrides)
        return cls(**values)

    def run_config(self) -> dict[str, Any]:
        """``{run-config key: value}`` within the section (what the family's glue reads)."""
        return {key: getattr(self, name) for key, name in self.keys().items()}

    def app_config(self) -> dict[str, Any]:
        """``{sectioned key: value}``: what the App's ``[tool.flwr.app.config]`` declares."""
        return {self.app_key(k): v for k, v in self.run_config().items()}

    @classmethod
    def wire_fields(cls) -> tuple[str, ...]:
        """Names of the fields the clients need (``setting(..., wire=True)``, or those of
        its ``client_message``)."""
        if cls.client_message is not None:
            return cls.client_message.wire_fields()
        return tuple(f.name for f in fields(cls) if _meta(f).get("wire"))

    def client_inputs(self) -> Settings:
        """The typed message of what its clients read (``client_message``), from its fields;
        itself when it has none."""
        message = self.client_message
        if message is None:
            return self
        return message(**{f.name: getattr(self, f.name) for f in fields(message)})

    def to_wire(self) -> dict[str, Any]:
        """``{field name: value}`` of the wire fields, ConfigRecord-safe (a tuple as a list)."""
        inputs = self.client_inputs()
        return {name: list(v) if isinstance(v := getattr(inputs, name), tuple) else v
                for name in self.wire_fields()}

    @classmethod
    def from_wire(cls, config: Mapping[str, Any], who: str = "client") -> Any:
        """The settings a client works with: the wire fields from ``config`` (what
        :meth:`to_wire` sent; other keys ignored), every other field at its default; for a
        class with a ``client_message``, that message alone.

        Raises
        ------
        ValueError
            When a wire field is missing (naming it and the class), or a value is not allowed.
        """
        made = cls.client_message or cls
        names = cls.wire_fields()
        missing = [n for n in names if n not in config]
        if missing:
            raise ValueError(f"{who}: the server's message lacks the {cls.__name__} wire "
                             f"settings {missing}")
        hints, values = field_types(made), {n: config[n] for n in names}
        for n, v in values.items():
            if typing.get_origin(hints[n]) is tuple and isinstance(v, list):
                values[n] = tuple(v)  # a ConfigRecord carries a tuple as a list
        return made(**values)

    def replace(self, **changes: Any) -> Self:
        """A validated copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def items(self) -> Iterator[tuple[str, Any]]:
        """``(field, value)`` pairs, for ``result.json``."""
        for f in fields(self):
            yield f.name, getattr(self, f.name)

    def asdict(self) -> dict[str, Any]:
        """Every field, for ``result.json``."""
        return dict(self.items())


@dataclass(frozen=True)
class ClientMessage(Settings):
    """A phase's client inputs: a small typed message of only what the client reads of the
    settings; every field travels (:meth:`Settings.to_wire`), none has a default."""

    @classmethod
    def wire_fields(cls) -> tuple[str, ...]:
        """Every field."""
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class RunSettings(Settings):
    """What every strategy shares: how many replies an exchange needs, how long to wait, and
    whether a client's partition is bound to its node id."""

    min_nodes: int = setting(2, "min-nodes", ge=1, le=MAX_CLIENTS)
    node_wait_s: float = setting(60.0, "node-wait-s", gt=0)
    timeout_s: float = setting(600.0, "round-timeout-s", gt=0)
    grace_s: float = setting(30.0, "node-grace-s", gt=0,
                             doc="the wait for a node that stopped answering and came back, "
                                 "and for a new SuperNode's query.info between rounds "
                                 "(at most round-timeout-s)")
    bind_partitions: bool = setting(False, "bind-partitions",
                                    doc="a client's partition stays with the node id that "
                                        "held it at discovery: only that node id may rejoin, "
                                        "another node claiming it is refused (use with "
                                        "SuperNode authentication, where a node id is its "
                                        "registered key's); false: partition ids are "
                                        "self-declared and a new node id may take a missing "
                                        "client's place")


#: The federation's variables when sites hold different ones (``variables``;
#: ``federation.sites``): their union, those every site shares, or the same at every site.
VARIABLE_SETS = ("union", "shared", "same")


def variables_setting() -> Any:
    """The ``variables`` key (one default, one doc, for every family that takes it)."""
    return setting("union", "variables", choices=VARIABLE_SETS,
                   doc="graph over the union of the sites' variables, the shared ones, or "
                       "the same ones at every site")


@dataclass(frozen=True)
class SiteSettings(Settings):
    """``variables``: the federation's variables when sites hold different ones (``"union"``:
    all, each entry learned from the sites that hold both its variables; ``"shared"``: those
    every site has; ``"same"``: a site with other variables is dropped)."""

    variables: str = variables_setting()


#: The robust aggregation rules (``robust-rule``; ``federation.robust.robust_mean``): "mean"
#: (none: the protocol's plain mean), "trimmed-mean", "median", "clipped-mean".
ROBUST_RULES = ("mean", "trimmed-mean", "median", "clipped-mean")


@dataclass(frozen=True)
class ScreenedRunSettings(RunSettings):
    """A horizontal protocol's settings, with its Byzantine screen
    (:mod:`~fedcausal_flwr.federation.robust`): with 3 or more replies, a client whose update
    lies more than ``byzantine_factor`` times the typical distance from the coordinate-wise
    median is flagged, named and left out of the round (an honest majority assumed)."""

    byzantine_screen: bool = setting(
        True, "byzantine-screen",
        doc="flag and leave out clients whose update is far from the others' (3+ replies)")
    byzantine_factor: float = setting(
        2.5, "byzantine-factor", gt=1,
        doc="a client is flagged when its distance from the median update exceeds this times "
            "the median client's distance")
    byzantine_floor: float = setting(
        0.05, "byzantine-floor", ge=0,
        doc="the typical distance is at least this times the median update's norm (honest "
            "clients that agree almost exactly are not flagged for rounding)")
    robust_rule: str = setting(
        "mean", "robust-rule", choices=ROBUST_RULES,
        doc="how the server combines the clients' updates where the protocol supports it "
            "(federation.robust.robust_mean): mean (plain), trimmed-mean (coordinate-wise, "
            "robust-trim of the clients dropped from each side: bounded influence of up to "
            "that many liars), median, clipped-mean (centred clipping around the median: each "
            "client moves the aggregate by at most half the median client's distance / K per "
            "pass)")
    robust_trim: float = setting(
        0.2, "robust-trim", ge=0, lt=0.5,
        doc="share of the clients the trimmed mean drops from each side of each coordinate")
