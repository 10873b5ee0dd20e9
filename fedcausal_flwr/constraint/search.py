"""The PC algorithm on any conditional-independence test: the stable skeleton search (Colombo
& Maathuis 2014, Algorithm 4.1, in causal-learn's order of tests), unshielded colliders and
Meek's rules (Meek 1995, R1-R3), with forbidden and required edges.

A graph is a matrix ``G`` of endpoints: ``G[i, j] = G[j, i] = 1`` for ``i -- j``, ``G[i, j] = 1,
G[j, i] = 0`` for ``i -> j``, zeros for no edge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

#: ``test(i, j, S) -> (statistic, p-value)``
Test = Callable[[int, int, tuple[int, ...]], tuple[float, float]]


@dataclass
class Skeleton:
    """The adjacencies the search kept, with what it learned of every pair.

    ``p_max[i, j]`` is the largest p-value of any test of i and j (their edge's p-value:
    the edge stays while it is at most alpha), ``stat[i, j]`` the statistic of that test,
    ``sepsets[(i, j)]`` the conditioning sets that separated them, ``tests`` the count.
    """

    adjacent: np.ndarray
    p_max: np.ndarray
    stat: np.ndarray
    sepsets: dict[tuple[int, int], list[frozenset[int]]] = field(default_factory=dict)
    tests: int = 0


def skeleton(m: int, test: Test, alpha: float, allowed: np.ndarray | None = None,
             max_depth: int | None = None) -> Skeleton:
    """PC-stable's adjacency search over ``m`` variables.

    ``allowed[i, j]`` says whether the pair may be adjacent at all (both directions
    forbidden: never adjacent, never tested). Removals take effect at the end of each depth;
    a pair's separating sets are every set at that depth with p > alpha (causal-learn's
    stable search, so the result equals ``causallearn.search.ConstraintBased.PC.pc``'s).
    """
    allowed = np.ones((m, m), bool) if allowed is None else np.asarray(allowed, bool)
    adj = allowed & allowed.T & ~np.eye(m, dtype=bool)
    p_max = np.where(adj, 0.0, 1.0)
    stat = np.zeros((m, m))
    np.fill_diagonal(p_max, 0.0)
    out = Skeleton(adj, p_max, stat)
    cache: dict[tuple[int, int, tuple[int, ...]], tuple[float, float]] = {}

    def tested(x: int, y: int, S: tuple[int, ...]) -> tuple[float, float]:
        key = (min(x, y), max(x, y), tuple(sorted(S)))
        if key not in cache:
            cache[key] = test(x, y, S)
            out.tests += 1
        return cache[key]

    depth = -1
    while adj.sum(1).max(initial=0) - 1 > depth:
        depth += 1
        if max_depth is not None and depth > max_depth:
            break
        removal: set[tuple[int, int]] = set()
        for x in range(m):
            neigh = np.flatnonzero(adj[x])
            if len(neigh) < depth - 1:
                continue
            for y in neigh:
                seps: set[int] = set()
                for S in combinations([v for v in neigh if v != y], depth):
                    r, p = tested(x, int(y), tuple(int(s) for s in S))
                    if p >= out.p_max[x, y]:
                        out.p_max[x, y] = out.p_max[y, x] = p
                        out.stat[x, y] = out.stat[y, x] = r
                    if p > alpha:
                        removal |= {(x, int(y)), (int(y), x)}
                        seps.update(int(s) for s in S)
                if (x, int(y)) in removal:
                    for a, b in ((x, int(y)), (int(y), x)):
                        out.sepsets.setdefault((a, b), []).append(frozenset(seps))
        for x, y in removal:
            adj[x, y] = False
    out.adjacent = adj
    return out


def colliders(sk: Skeleton, forbidden: np.ndarray | None = None,
              required: np.ndarray | None = None) -> np.ndarray:
    """The skeleton with its unshielded colliders x -> y <- z oriented (y in no separating
    set of x and z), a collider whose edge into y is already oriented away skipped
    (causal-learn's ``uc_priority=2``), and forbidden/required edges respected."""
    m = len(sk.adjacent)
    G = sk.adjacent.astype(int)
    F = np.zeros((m, m), bool) if forbidden is None else np.asarray(forbidden, bool)
    Q = np.zeros((m, m), bool) if required is None else np.asarray(required, bool)
    _apply_required(G, Q)
    for x, y, z in _unshielded(sk.adjacent):
        if F[x, y] or F[z, y] or Q[y, x] or Q[y, z]:
            continue
        if any(y in S for S in sk.sepsets.get((x, z), [])):
            continue
        if not _directed(G, y, x) and not _directed(G, y, z):
            G[x, y], G[y, x], G[z, y], G[y, z] = 1, 0, 1, 0
    return G


def meek(G: np.ndarray, forbidden: np.ndarray | None = None,
         required: np.ndarray | None = None) -> np.ndarray:
    """Meek's rules R1-R3 applied until nothing changes (an orientation that would close a
    directed cycle, or that knowledge forbids, is not made)."""
    G = np.array(G, int)
    m = len(G)
    F = np.zeros((m, m), bool) if forbidden is None else np.asarray(forbidden, bool)
    Q = np.zeros((m, m), bool) if required is None else np.asarray(required, bool)
    adj = (G + G.T) > 0
    changed = True
    while changed:
        changed = False
        for a, b in zip(*np.nonzero(np.triu(_undirected(G))), strict=True):
            for i, j in ((int(a), int(b)), (int(b), int(a))):
                if not _undirected(G)[i, j] or F[i, j] or Q[j, i]:
                    continue
                into_i = np.flatnonzero((G[:, i] == 1) & (G[i, :] == 0))
                r1 = any(not adj[k, j] for k in into_i if k != j)
                mid = np.flatnonzero(_directed_all(G)[i] & _directed_all(G)[:, j])
                r2 = mid.size > 0
                und_i = np.flatnonzero(_undirected(G)[i])
                into_j = [k for k in und_i if _directed(G, int(k), j)]
                r3 = any(not adj[a_, b_] for a_, b_ in combinations(into_j, 2))
                if (r1 or r2 or r3) and not _reaches(G, j, i):
                    G[i, j], G[j, i] = 1, 0
                    changed = True
    return G


def pc_graph(sk: Skeleton, forbidden: np.ndarray | None = None,
             required: np.ndarray | None = None) -> np.ndarray:
    """The CPDAG of PC: colliders, then Meek's rules."""
    return meek(colliders(sk, forbidden, required), forbidden, required)


def _apply_required(G: np.ndarray, Q: np.ndarray) -> None:
    for i, j in zip(*np.nonzero(Q & (G > 0)), strict=True):
        G[i, j], G[j, i] = 1, 0


def _unshielded(adj: np.ndarray) -> list[tuple[int, int, int]]:
    """Unshielded triples x - y - z, x < z, in causal-learn's order (by y, then x, then z)."""
    m = len(adj)
    out = []
    for y in range(m):
        for x in np.flatnonzero(adj[y]):
            for z in np.flatnonzero(adj[y]):
                if z > x and not adj[x, z]:
                    out.append((int(x), y, int(z)))
    return out


def _directed(G: np.ndarray, i: int, j: int) -> bool:
    return bool(G[i, j] == 1 and G[j, i] == 0)


def _directed_all(G: np.ndarray) -> np.ndarray:
    return (G == 1) & (G.T == 0)


def _undirected(G: np.ndarray) -> np.ndarray:
    return (G == 1) & (G.T == 1)


def _reaches(G: np.ndarray, a: int, b: int) -> bool:
    """Whether a directed path leads from a to b."""
    D = _directed_all(G)
    seen, stack = {a}, [a]
    while stack:
        for k in np.flatnonzero(D[stack.pop()]):
            if int(k) == b:
                return True
            if int(k) not in seen:
                seen.add(int(k))
                stack.append(int(k))
    return False
