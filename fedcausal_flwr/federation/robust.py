"""The Byzantine screen: clients whose update lies far from the others' robust centre.

For the replies of one exchange, each client's update is a vector v_k (one or more groups:
what the server aggregates, as the protocol's ``robust_view`` declares). Per group,

    c = coordinate-wise median of {v_j},     d_k = ||v_k - c||_2,
    s = max(median_j d_j, floor * ||c||_2),  r_k = d_k / s,

and a client is flagged when ``max over groups r_k > factor``. Under an honest majority
(at most ``ceil(K/2) - 1`` of K liars) the median c and the spread s are set by honest
clients, so a liar's ratio grows with how far it moves its update (a sign flip moves it by
2||v||, zeros or a 2x scaling by ||v||), while an honest client's ratio stays near 1 however
heterogeneous the data are, as long as no honest client is ``factor`` times more atypical than
the median client. ``floor`` keeps a spread near zero (honest clients that agree almost
exactly, late in a consensus) from making rounding differences look far. At most
``ceil(K/2) - 1`` clients are flagged (the farthest): more would break the assumption the
rule rests on. A NaN in v_k marks a number client k's data do not inform (a site without
one of the variables): it is left out of the median and of d_k, so an entry that one site
alone informs is not screened. Pure numpy; cost O(K P log K) for P numbers per client.

Detection alone does not bound a liar that stays under ``factor`` (an *adaptive* liar that
sees the honest replies). :func:`robust_mean` bounds what any f < K/2 clients can do to an
aggregate: the coordinate-wise trimmed mean (drop the b largest and b smallest of each
coordinate, average the rest) or the coordinate-wise median. Yin, Chen, Ramchandran and
Bartlett (2018, "Byzantine-robust distributed learning: towards optimal statistical rates",
ICML; Theorems 1 and 4): with b >= f, each coordinate of the trimmed mean lies within the range
of the honest values of that coordinate, and the median's error is of order
sigma (f/K + 1/sqrt(n)) for honest spread sigma. So a liar's influence on every coordinate is
bounded by the honest clients' spread, whatever it sends; what it costs honest runs is the
efficiency of trimming 2b of K values (measured in ``simulations/studies/byzantine.py``).
Centred clipping ("clipped-mean", :func:`clipped_mean`; Karimireddy, He and Jaggi 2021,
"Learning from history for Byzantine robust optimization", ICML) keeps every client's whole
update but clips its offset from the coordinate-wise median to tau, half the median client's
distance: f liars move the aggregate by at most f tau / K per pass, whatever they send, and
an honest run loses only the tails of the honest offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedcausal_flwr.settings import ROBUST_RULES

#: Fewest replies the screen compares: with two, neither can be told from the other.
MIN_CLIENTS = 3
#: The robust aggregation rules (``robust-rule``): "mean" (none: the protocol's plain mean),
#: "trimmed-mean" (coordinate-wise, ``robust-trim`` of K from each side), "median",
#: "clipped-mean" (centred clipping).
RULES = ROBUST_RULES
#: Passes of the centred clipping ("clipped-mean"), each from the last one's centre, and its
#: clip radius as a share of the median client's distance from the median (chosen on the
#: adaptive liar's development seeds, ``simulations/studies/byzantine.py``).
CLIP_PASSES = 3
CLIP_RADIUS = 0.5


def trim_count(k: int, trim: float) -> int:
    """Values dropped from each side of a coordinate informed by k clients: floor(trim k),
    at most ceil(k/2) - 1 (so at least one value, or two for an even k, remain)."""
    return max(0, min(int(np.floor(trim * k + 1e-9)), (k - 1) // 2))


def robust_mean(values: Sequence[np.ndarray], rule: str, trim: float = 0.2) -> np.ndarray:
    """The coordinate-wise robust centre of ``values`` (one array per client, same shape;
    NaN: a number that client does not inform, left out; a coordinate nobody informs is 0).

    ``rule``: "trimmed-mean" drops :func:`trim_count` (k, ``trim``) values from each side of
    each coordinate (k: the clients that inform it) and averages the rest; "median" is the
    coordinate-wise median; "mean" the plain mean. Bounded influence: see the module.
    """
    if rule not in RULES:
        raise ValueError(f"robust rule must be one of {RULES}, got {rule!r}")
    V = np.stack([np.asarray(v, dtype=np.float64) for v in values])
    n = np.sum(~np.isnan(V), axis=0)
    if rule == "clipped-mean":
        return clipped_mean(V, n)
    if rule == "median":
        out = np.zeros(V.shape[1:])
        seen = n > 0
        out[seen] = np.nanmedian(V[:, seen], axis=0)
        return out
    S = np.sort(V, axis=0)  # NaN last
    b = np.maximum(0, np.minimum(np.floor(trim * n + 1e-9), (n - 1) // 2)).astype(int)
    if rule == "mean":
        b = np.zeros_like(n)
    idx = np.arange(V.shape[0]).reshape((-1,) + (1,) * (V.ndim - 1))
    keep = (idx >= b) & (idx < n - b)
    total = np.sum(np.where(keep, S, 0.0), axis=0)
    return total / np.maximum(np.sum(keep, axis=0), 1)


def clipped_mean(V: np.ndarray, n: np.ndarray, passes: int = CLIP_PASSES,
                 radius: float = CLIP_RADIUS) -> np.ndarray:
    """Centred clipping of the K client arrays ``V`` (K x ...; NaN: not informed; ``n``: the
    clients informing each coordinate): from c = the coordinate-wise median, ``passes`` times
    c <- c + sum_k clip(v_k - c, tau) / n, clip(x, tau) = x min(1, tau / ||x||), tau =
    ``radius`` times the median client's distance ||v_k - c|| from the first centre
    (Karimireddy, He and Jaggi 2021, Eq. 2). Each client moves c by at most tau / n per pass,
    and tau is set by an honest client under an honest majority."""
    seen = n > 0
    informed = ~np.isnan(V)
    c = np.zeros(V.shape[1:])
    c[seen] = np.nanmedian(V[:, seen], axis=0)
    axes = tuple(range(1, V.ndim))
    tau = None
    for _ in range(passes):
        D = np.where(informed, V - c, 0.0)
        dist = np.sqrt(np.sum(D * D, axis=axes))
        if tau is None:
            tau = radius * float(np.median(dist))
        scale = np.where(dist > tau, tau / np.maximum(dist, 1e-300), 1.0)
        c = c + np.sum(scale.reshape((-1,) + (1,) * len(axes)) * D, axis=0) / np.maximum(n, 1)
    return c


def screen_ratios(views: Mapping[int, Sequence[np.ndarray]], floor: float) -> dict[int, float]:
    """Each client's largest ratio r_k = d_k / s over its groups (see the module); {} for
    fewer than :data:`MIN_CLIENTS` clients."""
    ids = sorted(views)
    if len(ids) < MIN_CLIENTS:
        return {}
    groups = {len(views[c]) for c in ids}
    if len(groups) != 1:
        raise ValueError(f"robust views with different numbers of groups: {sorted(groups)}")
    ratio = np.zeros(len(ids))
    for g in range(groups.pop()):
        V = np.stack([np.ravel(np.asarray(views[c][g], dtype=np.float64)) for c in ids])
        if np.isnan(V).any():  # NaN: a number the client does not inform
            centre = np.zeros(V.shape[1])
            seen = ~np.all(np.isnan(V), axis=0)
            centre[seen] = np.nanmedian(V[:, seen], axis=0)
            dist = np.linalg.norm(np.nan_to_num(V - centre), axis=1)
        else:
            centre = np.median(V, axis=0)
            dist = np.linalg.norm(V - centre, axis=1)
        spread = max(float(np.median(dist)), floor * float(np.linalg.norm(centre)))
        r = dist / spread if spread > 0 else np.where(dist > 0, np.inf, 0.0)
        ratio = np.maximum(ratio, r)
    return {c: float(r) for c, r in zip(ids, ratio, strict=True)}


def byzantine_outliers(views: Mapping[int, Sequence[np.ndarray]], *, factor: float,
                       floor: float, cohorts: Mapping[int, Hashable] | None = None
                       ) -> dict[int, str]:
    """Clients whose update is more than ``factor`` times the typical distance from the
    robust centre: {cid: why}, at most ``ceil(K/2) - 1`` of the K compared (the farthest).

    ``cohorts``: clients whose updates differ by design (e.g. first replies, with no duals
    yet, beside returning clients') are compared within their cohort when it has at least
    :data:`MIN_CLIENTS` members; a smaller cohort's members with everyone (never unscreened).
    """
    groups: dict[Hashable, list[int]] = {}
    for c in views:
        groups.setdefault(None if cohorts is None else cohorts.get(c), []).append(c)
    screens = [(g, g) for g in groups.values() if len(g) >= MIN_CLIENTS or len(groups) == 1]
    small = [c for g in groups.values() if len(g) < MIN_CLIENTS for c in g]
    if small and len(groups) > 1:
        screens.append((list(views), small))
    out: dict[int, str] = {}
    for members, judged in screens:
        ratios = screen_ratios({c: views[c] for c in members}, floor)
        far = sorted((c for c in judged if ratios.get(c, 0.0) > factor),
                     key=lambda c: -ratios[c])
        for c in far[:(len(ratios) - 1) // 2]:
            out[c] = (f"update {ratios[c]:.3g} x the typical distance from the median of the "
                      f"{len(ratios)} replies (over {factor:g}): flagged by the Byzantine "
                      "screen")
    return dict(sorted(out.items()))


@dataclass(frozen=True)
class ByzantineScreen:
    """The Byzantine screen as a reply filter (see
    :class:`~fedcausal_flwr.federation.replies.ReplyFilter`): :func:`byzantine_outliers` on
    what ``view(phase, cid, arrays)`` gives of each reply (None: not screened), within the
    cohorts ``cohort(phase, cid)``; its drops are counted as flagged."""

    view: Callable[[str, int, list[np.ndarray]], list[np.ndarray] | None]
    cohort: Callable[[str, int], Hashable]
    factor: float
    floor: float
    flags: ClassVar[bool] = True

    def __call__(self, phase: str, replies: Mapping[int, list[np.ndarray]]) -> dict[int, str]:
        views = {c: v for c, a in replies.items() if (v := self.view(phase, c, a)) is not None}
        return byzantine_outliers(views, factor=self.factor, floor=self.floor,
                                  cohorts={c: self.cohort(phase, c) for c in views})
