"""Sites that hold different variables, in their own column order (any family).

The federation's graph is over ``D`` variables: the union of the sites' variables
(``variables = "union"``), those every site shares (``"shared"``), or the same ones at every
site (``"same"``: a site with other variables is dropped at discovery). The server sends the
federation's ``variables`` to each site whose list differs; the site answers over the
variables it holds, shaped by the federation. An entry i -> j is *informed* by a site that
holds both i and j; each family pools an entry over the sites that inform it.

Pure numpy: no I/O, no Flower.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.federation.limits import over_cap
from fedcausal_flwr.federation.nodes import NodeInfo, majority_props
from fedcausal_flwr.names import default_names, joined, split


def lag_index(idx: np.ndarray, d: int, p: int) -> np.ndarray:
    """Rows of the lag matrix (p d x d) of the variables ``idx`` of ``d``, lag by lag."""
    return np.concatenate([k * d + np.asarray(idx, int) for k in range(p)])


def union(lists: Sequence[Sequence[str]]) -> list[str]:
    """The variables of all lists, in order of first appearance."""
    out: dict[str, None] = {}
    for names in lists:
        out.update(dict.fromkeys(names))
    return list(out)


def shared(lists: Sequence[Sequence[str]]) -> list[str]:
    """The variables every list has, in the first list's order."""
    common = set(lists[0]).intersection(*map(set, lists[1:])) if lists else set()
    return [n for n in lists[0] if n in common] if lists else []


def unnamed(info: NodeInfo) -> bool:
    """Whether a node's variables carry only the default names ``x0, x1, ...``: unnamed
    columns are matched by position, so such nodes must agree on d."""
    d = int(info.props.get("d", 0))
    return split(info.props.get("names")) in (None, default_names(d))


def held(nodes: Mapping[int, NodeInfo]) -> dict[int, list[str]]:
    """Each site's variables as it reported them (``x0, x1, ...`` when unnamed)."""
    return {c: split(i.props.get("names")) or default_names(int(i.props["d"]))
            for c, i in sorted(nodes.items())}


def site_props(mode: str, infos: Sequence[NodeInfo], same: dict[str, Any],
               p: int | None = None) -> dict[str, Any]:
    """What every node must report: with ``mode`` "union" or "shared" and named variables,
    only the lags ``p`` (the configured ones, else the majority's); otherwise ``same``
    (d, p and the names)."""
    if mode != "same" and not all(unnamed(i) for i in infos):
        return {"p": p} if p else majority_props(infos, ("p",))
    return same


def federation_variables(mode: str, lists: Mapping[int, Sequence[str]],
                         nodes: Mapping[int, NodeInfo], key: str) -> list[str]:
    """The federation's variables from each site's ``lists`` (``mode`` "union" or
    "shared"); a union above the variable cap names the sites that bring the most names no
    other site holds, and fewer than 2 variables is refused (``key``: the run-config key)."""
    out = (union if mode == "union" else shared)(list(lists.values()))
    if mode == "union":  # each list is within the cap (parse_info); the union too
        seen = Counter(n for names in lists.values() for n in set(names))
        own = {f"client {c} (node {nodes[c].node_id})": sum(seen[n] == 1 for n in names)
               for c, names in lists.items()}
        if why := over_cap(len(out), "the union of the sites' variables", own,
                           "names no other site holds"):
            raise ValueError(f"run config {key!r} = 'union': {why}")
    if len(out) < 2:
        raise ValueError(f"run config {key!r} = {mode!r}: {len(out)} variable(s) in the "
                         "federation; need 2")
    return out


def sent_variables(config: Mapping[str, Any], names: Sequence[str], who: str
                   ) -> list[str] | None:
    """The federation's variables the server sent a site (config ``variables``; None: the
    site's own, in its order), checked: no repeats, and some shared with the site's."""
    text = str(config.get("variables", "") or "")
    if not text:
        return None
    variables = split(text) or []
    if len(set(variables)) != len(variables) or not set(names) & set(variables):
        raise ValueError(f"{who}: the server's 'variables' repeat a name or share none with "
                         "this site's")
    return variables


def places(names: Sequence[str], variables: Sequence[str]) -> tuple[list[int], list[int]]:
    """``(mine, at)``: the indices of a site's ``names`` that the federation's ``variables``
    hold, in the site's order, and their places among the federation's."""
    pos = {n: i for i, n in enumerate(variables)}
    mine = [j for j, n in enumerate(names) if n in pos]
    return mine, [pos[names[j]] for j in mine]


def window_columns(names: Sequence[str], variables: Sequence[str], p: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(own, at)``: a site's window columns ``[x_t, x_{t-1}, ..., x_{t-p}]`` over its
    ``names`` that the federation's ``variables`` hold, and where they sit in the
    federation's window (lag by lag)."""
    mine, at = places(names, variables)
    return (lag_index(np.array(mine, int), len(names), p + 1),
            lag_index(np.array(at, int), len(variables), p + 1))


def log_sites(variables: Sequence[str], absent: Mapping[int, Sequence[str]],
              differs: set[int]) -> None:
    """Log, for each site whose list differs, how many of the federation's variables it
    holds and which it lacks (``absent``)."""
    from logging import INFO

    from flwr.common.logger import log

    for c in sorted(differs):
        log(INFO, "client %d: holds %d of the %d variables%s", c,
            len(variables) - len(absent[c]), len(variables),
            f" (lacks {', '.join(absent[c])})" if absent[c] else " in another column order")


def federation_window(Z: np.ndarray, names: Sequence[str], variables: Sequence[str],
                      p: int) -> np.ndarray:
    """A site's window rows placed in the federation's columns (NaN where it holds no
    variable)."""
    own, at = window_columns(names, variables, p)
    out = np.full((len(Z), len(variables) * (p + 1)), np.nan)
    out[:, at] = np.asarray(Z, float)[:, own]
    return out


class SiteVariables:
    """The federation's variables as a strategy keeps them: the list, each site's own, and
    the config that tells a differing site where its columns sit (a strategy mixin:
    ``self.settings`` has ``variables``)."""

    variables: list[str]
    held: dict[int, list[str]]
    differs: set[int]

    def site_props(self, infos: Sequence[NodeInfo], p: int | None = None) -> dict[str, Any]:
        """:func:`site_props` under the settings' ``variables``."""
        return site_props(self.settings.variables, infos, super().expected_props(infos), p)

    def site_variables(self, nodes: Mapping[int, NodeInfo], d: int) -> list[str]:
        """Set and return the federation's variables for the kept ``nodes``, the sites whose
        list differs, and log what each lacks."""
        s = self.settings
        self.held = held(nodes)
        self.variables = (self.agreed_names(d) if s.variables == "same" else
                          federation_variables(s.variables, self.held, nodes,
                                               s.app_key("variables")))
        self.differs = {c for c, v in self.held.items() if v != self.variables}
        log_sites(self.variables, {c: [n for n in self.variables if n not in self.held[c]]
                                   for c in self.differs}, self.differs)
        return self.variables

    def informs(self, cid: int) -> np.ndarray:
        """Boolean (D,): the federation's variables site ``cid`` holds."""
        return np.isin(self.variables, self.held.get(cid, self.variables))

    def site_config(self, cid: int) -> dict[str, Any]:
        """The federation's ``variables`` for a site whose list differs (else nothing)."""
        return {"variables": joined(self.variables)} if cid in self.differs else {}
