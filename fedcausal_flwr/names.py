"""Variable names: how clients state them, how they travel, how results label graphs.

A client takes ``names`` (one label per variable it holds, default ``x0, x1, ...``) and
reports them in ``query.info`` as the property ``"names"``: one comma-joined string, because
Flower's ``ConfigRecord`` holds scalars and strings only (so a name may not contain a comma).
The strategy checks that the nodes agree on them (a node with other names is dropped, named,
like a node with another shape) and records them in ``RunResult.names``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SEP = ","


def default_names(d: int, prefix: str = "x") -> list[str]:
    """``["x0", "x1", ...]``: the labels of unnamed variables."""
    return [f"{prefix}{i}" for i in range(int(d))]


def checked_names(names: Sequence[str] | None, d: int, who: str = "client",
                  prefix: str = "x", what: str = "data columns") -> list[str]:
    """``names`` as a list of ``d`` distinct non-empty strings without commas (default
    :func:`default_names`), or a ValueError naming the client and the problem."""
    if names is None:
        return default_names(d, prefix)
    if isinstance(names, str):
        raise ValueError(f"{who}: names must be a sequence of strings, got the string "
                         f"{names!r} (split it first)")
    out = [str(n).strip() if isinstance(n, str) else n for n in names]
    if len(out) != d:
        raise ValueError(f"{who}: {len(out)} names for {d} {what}")
    for i, n in enumerate(out):
        if not isinstance(n, str) or not n:
            raise ValueError(f"{who}: name {i} is {n!r}, not a non-empty string")
        if SEP in n:
            raise ValueError(f"{who}: name {i} {n!r} contains {SEP!r} (names travel "
                             "comma-joined in the node's properties)")
    dup = sorted({n for n in out if out.count(n) > 1})
    if dup:
        raise ValueError(f"{who}: duplicated names {dup}")
    return out


def joined(names: Sequence[str]) -> str:
    """The ``"names"`` property: names joined by commas."""
    return SEP.join(names)


def split(prop: Any) -> list[str] | None:
    """A ``"names"`` property back as a list (None when absent or empty)."""
    if prop is None or prop == "":
        return None
    return str(prop).split(SEP)


def lagged_names(names: Sequence[str], p: int) -> list[str]:
    """Row labels of a DBN's lag matrix ``A`` (p d x d): ``name(t-1)`` for every name, then
    ``name(t-2)`` ... (the order of ``Xlag``'s column blocks)."""
    return [f"{n}(t-{k})" for k in range(1, int(p) + 1) for n in names]
