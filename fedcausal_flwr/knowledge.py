"""Prior knowledge: forbidden edges, required edges and tiers, by variable name.

What a domain expert knows, written as four strings (run-config keys of the algorithms that
take them, e.g. ``dbn.forbid``) or rows of a CSV file (:meth:`Knowledge.from_file`)::

    forbid    = "*->outside_temp, flow->valve@0"   # never these edges
    require   = "valve->flow@0"                    # always these edges
    tiers     = "outside_temp < valve, pump < flow, level"
    exogenous = "outside_temp"

An edge is ``cause->effect`` (or ``effect<-cause``); ``*`` stands for every variable. For
a dynamic Bayesian network ``@k`` names the lag: ``@0`` the same time step (``W``), ``@k``
lag k (block ``A_k``); a forbidden edge without ``@`` holds at every lag, a required one must
say its lag. A variable in a later tier never causes one in an earlier tier, at any lag;
an exogenous variable is caused by no variable, its own past excepted. The file form has one
statement per row: ``forbid,cause,effect[,lag]``, ``require,cause,effect,lag``,
``tier,name,level`` (levels: numbers, lower first) and ``exogenous,name``.

:meth:`Knowledge.masks` checks the names against the data's (an unknown name is an error
naming it) and returns boolean masks that the solvers enforce exactly: a forbidden entry is
held at 0 by the solver's bounds, a required one carries no L1 penalty and survives every
threshold. Required edges that form a directed cycle at lag 0, or that knowledge forbids,
are errors before any round. Pure Python and numpy: no I/O except :meth:`from_file`.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedcausal_flwr.settings import Settings, setting

KEYS = ("forbid", "require", "tiers", "exogenous")
ANY = "*"


@dataclass(frozen=True)
class Edge:
    """``cause -> effect`` at ``lag`` (None: every lag; ``*`` names: every variable)."""

    cause: str
    effect: str
    lag: int | None = None

    def __str__(self) -> str:
        return f"{self.cause}->{self.effect}" + ("" if self.lag is None else f"@{self.lag}")


@dataclass(frozen=True)
class Masks:
    """Boolean masks of a graph ``W`` (d x d) and, for a DBN, its lags ``A`` (p d x d):
    entries held at zero (``forbid_*``) and entries that are always edges (``require_*``)."""

    forbid_W: np.ndarray
    require_W: np.ndarray
    forbid_A: np.ndarray
    require_A: np.ndarray

    def __bool__(self) -> bool:
        return bool(self.forbid_W.any() or self.require_W.any() or self.forbid_A.any()
                    or self.require_A.any())

    def subset(self, idx: Sequence[int], p: int, d: int) -> Masks:
        """The masks restricted to the variables ``idx`` of ``d`` (lag blocks alike)."""
        idx = np.asarray(idx, dtype=int)
        lag = np.concatenate([k * d + idx for k in range(p)]) if p else idx[:0]
        return Masks(self.forbid_W[np.ix_(idx, idx)], self.require_W[np.ix_(idx, idx)],
                     self.forbid_A[np.ix_(lag, idx)], self.require_A[np.ix_(lag, idx)])


def _edge(text: str, where: str) -> Edge:
    """One ``a->b[@k]`` or ``b<-a[@k]``."""
    body, lag = text, None
    if "@" in text:
        body, _, k = text.rpartition("@")
        try:
            lag = int(k.strip())
        except ValueError:
            raise ValueError(f"{where}: {text!r}: the lag after '@' must be a whole number "
                             ">= 0") from None
        if lag < 0:
            raise ValueError(f"{where}: {text!r}: the lag after '@' must be >= 0")
    for arrow, flip in (("->", False), ("<-", True)):
        if body.count(arrow) == 1 and ("<-" if arrow == "->" else "->") not in body:
            a, b = (s.strip() for s in body.split(arrow))
            if not a or not b:
                break
            return Edge(b, a, lag) if flip else Edge(a, b, lag)
    raise ValueError(f"{where}: {text!r} is not an edge; write cause->effect or effect<-cause "
                     "(optionally @lag), e.g. 'valve->flow@0'")


def _items(text: str) -> list[str]:
    return [t.strip() for t in str(text).split(",") if t.strip()]


@dataclass(frozen=True)
class Knowledge:
    """Forbidden and required edges, tiers (earliest first) and exogenous variables."""

    forbidden: tuple[Edge, ...] = ()
    required: tuple[Edge, ...] = ()
    tiers: tuple[tuple[str, ...], ...] = ()
    exogenous: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.forbidden or self.required or self.tiers or self.exogenous)

    @classmethod
    def parse(cls, forbid: str = "", require: str = "", tiers: str = "", exogenous: str = "",
              where: str = "knowledge") -> Knowledge:
        """Knowledge from its four strings (syntax in the module docstring); a malformed
        statement is a ValueError naming ``where`` and the key."""
        required = tuple(_edge(t, f"{where} 'require'") for t in _items(require))
        for e in required:
            if ANY in (e.cause, e.effect):
                raise ValueError(f"{where} 'require': {str(e)!r}: a required edge names both "
                                 "variables ('*' is for forbidden edges)")
        levels = tuple(tuple(_items(t)) for t in str(tiers).split("<") if t.strip())
        if str(tiers).strip() and (len(levels) < 2 or any(not t for t in levels)):
            raise ValueError(f"{where} 'tiers': {tiers!r}: expected two or more groups of "
                             "names separated by '<', earliest first, e.g. 'a, b < c'")
        return cls(tuple(_edge(t, f"{where} 'forbid'") for t in _items(forbid)), required,
                   levels, tuple(_items(exogenous)))

    @classmethod
    def from_config(cls, config: Mapping[str, object], where: str = "run config") -> Knowledge:
        """Knowledge from a config holding some of the keys :data:`KEYS`."""
        return cls.parse(**{k: str(config.get(k, "") or "") for k in KEYS}, where=where)

    @classmethod
    def from_file(cls, path: str | Path) -> Knowledge:
        """Knowledge from a CSV of statements (module docstring), read where it is called: on
        the machine that submits the run, never on the server or a node."""
        rows: dict[str, list[str]] = {k: [] for k in KEYS}
        tiers: dict[float, list[str]] = {}
        with open(path, newline="", encoding="utf-8-sig") as f:
            for n, row in enumerate(csv.reader(f), start=1):
                cells = [c.strip() for c in row]
                if not any(cells) or cells[0].startswith("#"):
                    continue
                kind, args = cells[0].lower(), [c for c in cells[1:] if c]
                where = f"{path}: row {n}"
                if kind in ("forbid", "require") and len(args) in (2, 3):
                    lag = f"@{args[2]}" if len(args) == 3 else ""
                    rows[kind].append(f"{args[0]}->{args[1]}{lag}")
                elif kind == "tier" and len(args) == 2:
                    try:
                        tiers.setdefault(float(args[1]), []).append(args[0])
                    except ValueError:
                        raise ValueError(f"{where}: tier level must be a number") from None
                elif kind == "exogenous" and len(args) == 1:
                    rows["exogenous"].append(args[0])
                else:
                    raise ValueError(f"{where}: expected forbid,cause,effect[,lag] | "
                                     "require,cause,effect,lag | tier,name,level | "
                                     "exogenous,name")
        tier_text = " < ".join(", ".join(tiers[k]) for k in sorted(tiers))
        if len(tiers) == 1:
            tier_text = ""
        return cls.parse(", ".join(rows["forbid"]), ", ".join(rows["require"]), tier_text,
                         ", ".join(rows["exogenous"]), where=str(path))

    def config(self) -> dict[str, str]:
        """The four strings (:data:`KEYS`) that :meth:`from_config` reads back."""
        return {"forbid": ", ".join(map(str, self.forbidden)),
                "require": ", ".join(map(str, self.required)),
                "tiers": " < ".join(", ".join(t) for t in self.tiers),
                "exogenous": ", ".join(self.exogenous)}

    def masks(self, names: Sequence[str], p: int = 0) -> Masks:
        """Enforceable masks over ``names`` (and ``p`` lags; 0: a static graph).

        Raises
        ------
        ValueError
            An unknown name, a lag above ``p`` (or any lag of a static graph), a required
            edge without a lag in a DBN, a required self-loop at lag 0, a required edge that
            the rest forbids, or required edges that form a cycle at lag 0.
        """
        names, d = list(names), len(names)
        pos = {n: i for i, n in enumerate(names)}
        fW, rW = np.zeros((d, d), bool), np.zeros((d, d), bool)
        fA, rA = np.zeros((p * d, d), bool), np.zeros((p * d, d), bool)

        def index(name: str, what: str) -> slice | int:
            if name == ANY:
                return slice(None)
            if name not in pos:
                raise ValueError(f"knowledge {what}: no variable named {name!r}; the data's "
                                 f"variables are {names}")
            return pos[name]

        def lags(e: Edge, what: str) -> list[int]:
            if e.lag is not None and e.lag > p:
                raise ValueError(f"knowledge {what} {str(e)!r}: lag {e.lag}, but the model "
                                 f"has {'no lags' if not p else f'lags 1..{p}'}")
            return list(range(p + 1)) if e.lag is None else [e.lag]

        def mark(W: np.ndarray, A: np.ndarray, i, j, lag: int) -> None:
            if lag == 0:
                W[i, j] = True
            else:
                A[(lag - 1) * d:lag * d][i, j] = True

        for e in self.forbidden:
            i, j = index(e.cause, "'forbid'"), index(e.effect, "'forbid'")
            for lag in lags(e, "'forbid'"):
                mark(fW, fA, i, j, lag)
        level = {}
        for t, group in enumerate(self.tiers):
            for n in group:
                index(n, "'tiers'")
                level[n] = t
        for a, ta in level.items():
            for b, tb in level.items():
                if ta > tb:
                    for lag in range(p + 1):
                        mark(fW, fA, pos[a], pos[b], lag)
        for n in self.exogenous:
            j = index(n, "'exogenous'")
            fW[:, j] = True
            fA[:, j] = True
            fA[[k * d + j for k in range(p)], j] = False  # its own past may drive it
        for e in self.required:
            i, j = index(e.cause, "'require'"), index(e.effect, "'require'")
            if e.lag is None and p:
                raise ValueError(f"knowledge 'require' {str(e)!r}: say the lag of a required "
                                 f"edge, e.g. '{e}@0' (same time step) or '{e}@1'")
            lag = lags(e, "'require'")[0] if p else 0
            if lag == 0 and i == j:
                raise ValueError(f"knowledge 'require' {str(e)!r}: a variable does not cause "
                                 "itself at the same time step")
            if (fW[i, j] if lag == 0 else fA[(lag - 1) * d + i, j]):
                raise ValueError(f"knowledge 'require' {str(e)!r}: the same knowledge forbids "
                                 "it (forbid, tiers or exogenous)")
            mark(rW, rA, i, j, lag)
        np.fill_diagonal(fW, False)  # W has no self-loops anyway
        cycle = _cycle(rW)
        if cycle:
            raise ValueError("knowledge 'require': the required same-time edges form a "
                             "cycle " + " -> ".join(names[k] for k in cycle))
        fW |= rW.T  # with i -> j required, j -> i at lag 0 would close a cycle
        return Masks(fW, rW, fA, rA)


def _cycle(G: np.ndarray) -> list[int]:
    """A directed cycle of the 0/1 graph ``G`` (first node repeated at the end), or []."""
    d, state, stack = G.shape[0], [0] * G.shape[0], []

    def visit(u: int) -> list[int]:
        state[u] = 1
        stack.append(u)
        for v in np.flatnonzero(G[u]):
            if state[v] == 1:
                return stack[stack.index(v):] + [int(v)]
            if state[v] == 0 and (c := visit(int(v))):
                return c
        state[u] = 2
        stack.pop()
        return []

    for u in range(d):
        if state[u] == 0 and (c := visit(u)):
            return c
    return []


@dataclass(frozen=True)
class KnowledgeSettings(Settings):
    """The four knowledge keys of an algorithm's settings (empty: no knowledge); the
    syntax is checked when the settings are made, the names when the data's are known."""

    forbid: str = setting("", "forbid", doc="edges never learned, e.g. '*->temp, a->b@0'")
    require: str = setting("", "require", doc="edges always kept, e.g. 'valve->flow@0'")
    tiers: str = setting("", "tiers", doc="groups of names, earliest first: 'a, b < c < d'")
    exogenous: str = setting("", "exogenous", doc="variables no variable causes: 'a, b'")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.knowledge()

    def knowledge(self) -> Knowledge:
        """The settings' :class:`Knowledge` (a syntax error names the key)."""
        return Knowledge.from_config({k: getattr(self, k) for k in KEYS},
                                     where=f"run config {self.section}.".rstrip("."))
