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
``tier,name,level`` (levels: finite integers, lower first; a name at one level),
``exogenous,name`` and ``known-zero,A|B,target,source``.

A state-space model (FedGC, FedCF) learns couplings between clients, not between
variables: what is known absent there is a block, ``A:m<-n`` (client n's state does not
drive client m's; also ``A:n->m``) or ``B:m<-n`` (client n's input does not drive client
m's state), clients by partition id or ``*`` (run-config key ``statespace.ss-known-zero``,
:func:`parse_known_zero`); :mod:`fedcausal_flwr.statespace.knownzero` turns the blocks into
the masks of its matrices. Every family reads one :class:`Knowledge`.

:meth:`Knowledge.masks` checks the names against the data's (an unknown name is an error
naming it) and returns boolean masks that the solvers enforce exactly: a forbidden entry is
held at 0 by the solver's bounds, a required one carries no L1 penalty and survives every
threshold. Required edges that form a directed cycle at lag 0, or that knowledge forbids,
are errors before any round. The server sends masks, never the text: :meth:`Masks.to_config`
(flat indices, :data:`MASK_KEYS`), read back by :meth:`Masks.from_config`, so no client
parses knowledge. Pure Python and numpy: no I/O except :meth:`from_file`.
"""

from __future__ import annotations

import csv
import io
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from fedcausal_flwr.settings import Settings, setting

KEYS = ("forbid", "require", "tiers", "exogenous")
"""The run-config keys of edge knowledge (in an algorithm's section)."""
KNOWN_ZERO = "known-zero"
"""The :meth:`Knowledge.config` key of known-zero blocks (run config: ``ss-known-zero``)."""
MASK_KEYS = ("knowledge-forbid", "knowledge-require", "knowledge-forbid-lags",
             "knowledge-require-lags")
"""Config keys of :meth:`Masks.to_config`: the flat indices (row-major) of the forbidden and
the required entries of ``W`` and, for a model with lags, of ``A``, comma-separated."""
ANY = "*"
ANY_CLIENT = "*"


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

    def to_config(self) -> dict[str, str]:
        """The masks as :data:`MASK_KEYS` (the lag keys only for a model with lags): what a
        server sends its clients, read back by :meth:`from_config`."""
        arrays = (self.forbid_W, self.require_W, self.forbid_A, self.require_A)
        keys = MASK_KEYS if self.forbid_A.shape[0] else MASK_KEYS[:2]
        return {key: ",".join(map(str, np.flatnonzero(M).tolist()))
                for key, M in zip(keys, arrays, strict=False)}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], d: int, p: int = 0) -> Masks | None:
        """The masks :meth:`to_config` sent over ``d`` variables and ``p`` lags (None when
        the config has none)."""
        if MASK_KEYS[0] not in config:
            return None
        out = []
        for key, rows in zip(MASK_KEYS, (d, d, p * d, p * d), strict=True):
            M = np.zeros(rows * d, bool)
            M[[int(v) for v in str(config.get(key, "") or "").split(",") if v.strip()]] = True
            out.append(M.reshape(rows, d))
        return cls(*out)

    def subset(self, idx: Sequence[int], p: int, d: int) -> Masks:
        """The masks restricted to the variables ``idx`` of ``d`` (lag blocks alike)."""
        idx = np.asarray(idx, dtype=int)
        lag = np.concatenate([k * d + idx for k in range(p)]) if p else idx[:0]
        return Masks(self.forbid_W[np.ix_(idx, idx)], self.require_W[np.ix_(idx, idx)],
                     self.forbid_A[np.ix_(lag, idx)], self.require_A[np.ix_(lag, idx)])


MAX_TEXT = 1_000_000
"""Characters at most in one knowledge string (a key's value), checked before parsing."""
MAX_FILE = 4_000_000
"""Bytes at most in a knowledge file (checked before it is read; only regular files)."""


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


class ZeroBlock(NamedTuple):
    """``matrix`` (``"A"`` or ``"B"``) block ``(target, source)`` known to be 0: client
    ``source``'s state (input) does not drive client ``target``'s state; None: every client."""

    matrix: str
    target: int | None
    source: int | None

    def __str__(self) -> str:
        def name(c: int | None) -> str:
            return ANY_CLIENT if c is None else str(c)
        return f"{self.matrix}:{name(self.target)}<-{name(self.source)}"


def _client_id(text: str, statement: str, where: str) -> int | None:
    """A partition id (``3`` or ``c3``, the result's naming) or ``*`` (None)."""
    t = text.strip()
    if t == ANY_CLIENT:
        return None
    digits = t[1:] if t[:1] in ("c", "C") else t
    if not digits.isdigit():
        raise ValueError(f"{where}: {statement!r}: {t!r} is not a client; name one by its "
                         "partition id (e.g. 2 or c2) or '*' for every client")
    return int(digits)


def parse_known_zero(text: str, where: str = "known-zero") -> tuple[ZeroBlock, ...]:
    """The comma-separated statements ``A:m<-n`` (``A_mn = 0``: client n's state does not
    drive client m's; also written ``A:n->m``) and ``B:m<-n`` (``B_mn = 0``: client n's input
    does not drive client m's state), clients by partition id or ``*`` (every client, the
    diagonal block left out); a malformed statement is a ValueError naming ``where``."""
    out = []
    for item in _items(text):
        matrix, colon, body = item.partition(":")
        matrix = matrix.strip().upper()
        arrows = [a for a in ("<-", "->") if body.count(a) == 1]
        if not colon or matrix not in ("A", "B") or len(arrows) != 1:
            raise ValueError(f"{where}: {item!r} is not a known-zero block; write "
                             "'A:target<-source' or 'B:target<-source' (partition ids or "
                             "'*'), e.g. 'A:1<-0, A:2<-*, B:1<-0'")
        left, right = body.split(arrows[0])
        target, source = (left, right) if arrows[0] == "<-" else (right, left)
        block_ = ZeroBlock(matrix, _client_id(target, item, where),
                           _client_id(source, item, where))
        if block_.target is not None and block_.target == block_.source:
            raise ValueError(f"{where}: {item!r}: the diagonal block is client "
                             f"{block_.target}'s own, known to it and not learned")
        out.append(block_)
    return tuple(out)


@dataclass(frozen=True)
class Knowledge:
    """Forbidden and required edges, tiers (earliest first), exogenous variables and the
    coupling blocks known to be zero (``zero_blocks``, a state-space model's)."""

    forbidden: tuple[Edge, ...] = ()
    required: tuple[Edge, ...] = ()
    tiers: tuple[tuple[str, ...], ...] = ()
    exogenous: tuple[str, ...] = ()
    zero_blocks: tuple[ZeroBlock, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.forbidden or self.required or self.tiers or self.exogenous
                    or self.zero_blocks)

    def edges(self) -> bool:
        """Whether it says anything about edges between variables (all but ``zero_blocks``)."""
        return bool(self.forbidden or self.required or self.tiers or self.exogenous)

    @classmethod
    def parse(cls, forbid: str = "", require: str = "", tiers: str = "", exogenous: str = "",
              where: str = "knowledge", known_zero: str = "",
              known_zero_where: str | None = None) -> Knowledge:
        """Knowledge from its strings (syntax in the module docstring); a malformed
        statement is a ValueError naming ``where`` and the key (``known_zero_where``: what
        names the known-zero blocks, default ``where`` and ``'known-zero'``)."""
        for key, text in (("forbid", forbid), ("require", require), ("tiers", tiers),
                          ("exogenous", exogenous), (KNOWN_ZERO, known_zero)):
            if len(str(text)) > MAX_TEXT:
                raise ValueError(f"{where} {key!r}: {len(str(text))} characters, more than "
                                 f"the limit {MAX_TEXT}")
        required = tuple(_edge(t, f"{where} 'require'") for t in _items(require))
        for e in required:
            if ANY in (e.cause, e.effect):
                raise ValueError(f"{where} 'require': {str(e)!r}: a required edge names both "
                                 "variables ('*' is for forbidden edges)")
        levels = tuple(tuple(_items(t)) for t in str(tiers).split("<") if t.strip())
        if str(tiers).strip() and (len(levels) < 2 or any(not t for t in levels)):
            raise ValueError(f"{where} 'tiers': {tiers!r}: expected two or more groups of "
                             "names separated by '<', earliest first, e.g. 'a, b < c'")
        zeros = parse_known_zero(known_zero, known_zero_where or f"{where} '{KNOWN_ZERO}'")
        return cls(tuple(_edge(t, f"{where} 'forbid'") for t in _items(forbid)), required,
                   levels, tuple(_items(exogenous)), zeros)

    @classmethod
    def from_config(cls, config: Mapping[str, object], where: str = "run config") -> Knowledge:
        """Knowledge from a config holding some of the keys :data:`KEYS` and
        :data:`KNOWN_ZERO` (what :meth:`config` gives)."""
        return cls.parse(**{k: str(config.get(k, "") or "") for k in KEYS}, where=where,
                         known_zero=str(config.get(KNOWN_ZERO, "") or ""))

    @classmethod
    def from_file(cls, path: str | Path) -> Knowledge:
        """Knowledge from a CSV of statements (module docstring), read where it is called: on
        the machine that submits the run, never on the server or a node."""
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: not a regular file")
        if st.st_size > MAX_FILE:
            raise ValueError(f"{path}: {st.st_size} bytes, more than the limit {MAX_FILE}")
        rows: dict[str, list[str]] = {k: [] for k in (*KEYS, KNOWN_ZERO)}
        tiers: dict[int, list[str]] = {}
        seen: dict[str, tuple[int, str]] = {}
        with open(path, newline="", encoding="utf-8-sig") as f:
            text = f.read(MAX_FILE + 1)
        if len(text) > MAX_FILE:
            raise ValueError(f"{path}: more than the limit {MAX_FILE} characters")
        for n, row in enumerate(csv.reader(io.StringIO(text)), start=1):
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
                    level = int(args[1])
                except ValueError:
                    raise ValueError(f"{where}: tier level must be a finite integer, "
                                     f"not {args[1]!r}") from None
                if args[0] in seen:
                    raise ValueError(f"{where}: {args[0]!r} is already at tier level "
                                     f"{seen[args[0]][0]} ({seen[args[0]][1]})")
                seen[args[0]] = (level, f"row {n}")
                tiers.setdefault(level, []).append(args[0])
            elif kind == "exogenous" and len(args) == 1:
                rows["exogenous"].append(args[0])
            elif kind == KNOWN_ZERO and len(args) == 3:
                rows[KNOWN_ZERO].append(f"{args[0]}:{args[1]}<-{args[2]}")
            else:
                raise ValueError(f"{where}: expected forbid,cause,effect[,lag] | "
                                 "require,cause,effect,lag | tier,name,level | "
                                 "exogenous,name | known-zero,A|B,target,source")
        tier_text = " < ".join(", ".join(tiers[k]) for k in sorted(tiers))
        if len(tiers) == 1:
            tier_text = ""
        return cls.parse(", ".join(rows["forbid"]), ", ".join(rows["require"]), tier_text,
                         ", ".join(rows["exogenous"]), where=str(path),
                         known_zero=", ".join(rows[KNOWN_ZERO]))

    def config(self) -> dict[str, str]:
        """The four strings (:data:`KEYS`) and, with blocks, :data:`KNOWN_ZERO`, that
        :meth:`from_config` reads back (a run config's values, in the algorithm's section)."""
        out = {"forbid": ", ".join(map(str, self.forbidden)),
               "require": ", ".join(map(str, self.required)),
               "tiers": " < ".join(", ".join(t) for t in self.tiers),
               "exogenous": ", ".join(self.exogenous)}
        if self.zero_blocks:
            out[KNOWN_ZERO] = ", ".join(map(str, self.zero_blocks))
        return out

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
    """A directed cycle of the 0/1 graph ``G`` (first node repeated at the end), or [].

    Iterative depth-first search (no recursion: a chain of any length is walked).
    """
    d, state = G.shape[0], [0] * G.shape[0]
    for root in range(d):
        if state[root]:
            continue
        stack, todo = [root], [iter(np.flatnonzero(G[root]).tolist())]
        state[root] = 1
        while todo:
            v = next(todo[-1], None)
            if v is None:
                state[stack.pop()] = 2
                todo.pop()
            elif state[v] == 1:
                return stack[stack.index(v):] + [int(v)]
            elif state[v] == 0:
                state[v] = 1
                stack.append(int(v))
                todo.append(iter(np.flatnonzero(G[v]).tolist()))
    return []


@dataclass(frozen=True)
class KnowledgeSettings(Settings):
    """The four knowledge keys of an algorithm's settings (empty: no knowledge); parsed once,
    when the settings are made (a syntax error names the key), the names checked when the
    data's are known."""

    forbid: str = setting("", "forbid", doc="edges never learned, e.g. '*->temp, a->b@0'")
    require: str = setting("", "require", doc="edges always kept, e.g. 'valve->flow@0'")
    tiers: str = setting("", "tiers", doc="groups of names, earliest first: 'a, b < c < d'")
    exogenous: str = setting("", "exogenous", doc="variables no variable causes: 'a, b'")

    def __post_init__(self) -> None:
        super().__post_init__()
        parsed = Knowledge.from_config({k: getattr(self, k) for k in KEYS},
                                       where=f"run config {self.section}.".rstrip("."))
        object.__setattr__(self, "_knowledge", parsed)

    def knowledge(self) -> Knowledge:
        """The settings' :class:`Knowledge`, parsed when they were made (the same object at
        every call)."""
        return self.__dict__["_knowledge"]
