"""What a reply must be: its arrays' count, shapes, dtypes and finiteness, and a magnitude
screen against the other replies of the same exchange. Pure numpy, no Flower.

A :class:`ReplyFilter` is what an exchange runs on its well-formed replies, in order, before
any is returned: :class:`MagnitudeScreen` here, the Byzantine screen
(:class:`~fedcausal_flwr.federation.robust.ByzantineScreen`), or a user's own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import numpy as np

Shape = tuple[int, ...]
Spec = tuple[tuple[int | None, ...], str]  # (shape, dtype): None matches any length
Expected = Sequence[Shape | Spec]


def array_bytes(arrays: Iterable[np.ndarray]) -> int:
    """Payload size of a list of arrays in bytes (headers not counted)."""
    return int(sum(np.asarray(a).nbytes for a in arrays))


def _spec(entry: Shape | Spec) -> Spec:
    """A plain shape means a finite float64 array of that shape."""
    if len(entry) == 2 and isinstance(entry[0], tuple) and isinstance(entry[1], str):
        return entry  # type: ignore[return-value]
    return tuple(entry), "float"  # type: ignore[return-value]


def reply_problem(arrays: Sequence[np.ndarray], expected: Expected) -> str | None:
    """Why a reply's arrays are unusable (count, shape, dtype, precision, finiteness), or None.

    ``expected`` holds a shape per array (a finite float64 array) or a ``(shape, dtype)`` pair
    whose shape may hold None for any length. The dtype ``"float"`` means float64: every
    protocol computes in float64, and a float16/float32 reply would silently change the result
    (its rounding error is far above the float64 tolerance the reference loops are held to),
    so a lower precision is rejected and named, like an int array.
    """
    if len(arrays) != len(expected):
        return f"expected {len(expected)} arrays, got {len(arrays)}"
    for i, entry in enumerate(expected):
        a, (shape, dtype) = arrays[i], _spec(entry)
        if len(a.shape) != len(shape) or any(w is not None and w != g
                                             for w, g in zip(shape, a.shape, strict=True)):
            return f"array {i} has shape {tuple(a.shape)}, expected {tuple(shape)}"
        if dtype == "float":
            if a.dtype != np.float64:
                lower = np.issubdtype(a.dtype, np.floating)
                return (f"array {i} has dtype {a.dtype}, expected float64"
                        + (" (precision below float64 is rejected)" if lower else ""))
            if not np.all(np.isfinite(a)):
                return f"array {i} has non-finite values"
        elif a.dtype != np.dtype(dtype):
            return f"array {i} has dtype {a.dtype}, expected {dtype}"
    return None


#: Largest |x| any float reply may carry: a value whose square overflows float64 (~1.34e154).
#: Every protocol squares what it receives (a loss, a norm, a Gram matrix), so such a value can
#: only be a fault; it is the bound of a reply when one reply alone leaves nothing to compare.
MAX_ABS = float(np.sqrt(np.finfo(np.float64).max))
#: Magnitude screen (see :func:`outliers`): a reply's array is an outlier when its max |x|
#: exceeds SCREEN_FACTOR times the median max |x| of the same array in the other replies of the
#: exchange, floored at SCREEN_FLOOR (so arrays near zero never trip it: nothing below
#: SCREEN_FACTOR * SCREEN_FLOOR = 1e6 is ever an outlier).
SCREEN_FACTOR = 1e6
SCREEN_FLOOR = 1.0


def peak(a: np.ndarray) -> float | None:
    """Max |x| of a float array (0 for an empty one); None for other dtypes (not screened)."""
    if not np.issubdtype(a.dtype, np.floating):
        return None
    return float(np.max(np.abs(a), initial=0.0))


def outliers(replies: Mapping[int, Sequence[np.ndarray]], *, bound: float | None = None,
             factor: float = SCREEN_FACTOR, floor: float = SCREEN_FLOOR) -> dict[int, str]:
    """Replies whose float arrays are magnitude outliers against the exchange: {cid: why}.

    Two rules, on the max |x| ("peak") of each float array of each reply:

    - **bound**: a peak above ``min(bound, MAX_ABS)`` (``bound``: what the protocol declares
      for the phase, see ``CausalStrategy.reply_bound``). Works with a single reply.
    - **robust**: a peak above ``factor * max(floor, median of the same array's peaks in the
      other replies)`` (replies over the bound excluded). With k replies, one poisoned reply is
      caught whenever k >= 2; ``ceil(k/2) - 1`` poisoned replies out of k still are (the median
      of the others stays honest). The rule only looks upward: a reply smaller than the rest
      is never an outlier.

    Arrays are compared by index, so the replies of one exchange must share their layout
    (count and meaning; shapes may differ). Non-float arrays (ciphertexts, shares, ints) are
    not screened.
    """
    limit = MAX_ABS if bound is None else min(float(bound), MAX_ABS)
    peaks = {c: [peak(np.asarray(a)) for a in arrays] for c, arrays in replies.items()}
    out: dict[int, str] = {}
    for c, ps in peaks.items():
        for i, v in enumerate(ps):
            if v is not None and v > limit:
                out[c] = f"array {i} has |x| up to {v:.3g}, over the bound {limit:.3g}"
                break
    for c, ps in peaks.items():
        if c in out:
            continue
        for i, v in enumerate(ps):
            if v is None or v <= factor * floor:
                continue
            others = [peaks[o][i] for o in peaks
                      if o != c and o not in out and i < len(peaks[o]) and peaks[o][i] is not None]
            if not others:
                continue
            ref = float(np.median(others))
            if v > factor * max(floor, ref):
                out[c] = (f"array {i} has |x| up to {v:.3g}, over {factor:g} x the median "
                          f"{ref:.3g} of the other {len(others)} replies (magnitude outlier)")
                break
    return out


class ReplyFilter(Protocol):
    """Drops replies of one exchange: ``filter(phase, replies) -> {client id: why}``
    (``replies``: the arrays by client id that passed the filters before it). A filter whose
    ``flags`` attribute is true has its drops counted as flagged (the round's ``flagged``,
    ``metrics["flagged"]``); a plain function may be a filter."""

    def __call__(self, phase: str, replies: Mapping[int, Sequence[np.ndarray]]
                 ) -> dict[int, str]: ...


def _no_bound(phase: str) -> float | None:
    return None


@dataclass(frozen=True)
class MagnitudeScreen:
    """The magnitude screen as a reply filter: :func:`outliers` with the protocol's bound for
    the phase (``bound(phase)``, see ``ProtocolHooks.reply_bound``), ``factor`` and
    ``floor``."""

    bound: Callable[[str], float | None] = _no_bound
    factor: float = SCREEN_FACTOR
    floor: float = SCREEN_FLOOR

    def __call__(self, phase: str, replies: Mapping[int, Sequence[np.ndarray]]
                 ) -> dict[int, str]:
        return outliers(replies, bound=self.bound(phase), factor=self.factor,
                        floor=self.floor)


def digest(arrays: Sequence[np.ndarray]) -> str:
    """A hash of arrays' shapes, dtypes and bytes (equal digests: the same numbers)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype.str};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


@dataclass
class RepeatScreen:
    """Replies that the client's data fix, screened for consistency: a reply filter that
    flags (see :class:`ReplyFilter`)

    - a client whose ``check(phase, cid, arrays)`` gives a reason (one reply alone, e.g.
      states that cannot be a filter's: all zero), and
    - a client whose fixed numbers for a request differ from what it sent the first time it
      answered that request: ``view(phase, cid, arrays)`` gives ``(key, arrays)``, the
      numbers of the reply that its data fix for the request ``key`` (e.g. the states of a
      window's time steps, asked again in every epoch), or None (nothing fixed). Only a
      :func:`digest` per (client, key) is kept.

    A lie that changes (one that reacts to what it learns, noise, a lie begun after the first
    answer) is then caught at the first repeat; a liar must commit to one lie from its first
    reply. What such a screen cannot see: a lie told the same way every time, which is, to
    the server, only another client's data."""

    view: Callable[[str, int, list[np.ndarray]], tuple[Hashable, list[np.ndarray]] | None]
    check: Callable[[str, int, list[np.ndarray]], str | None] | None = None
    seen: dict[tuple[int, Hashable], str] = field(default_factory=dict)
    flags: ClassVar[bool] = True

    def __call__(self, phase: str, replies: Mapping[int, list[np.ndarray]]) -> dict[int, str]:
        out: dict[int, str] = {}
        for c, arrays in sorted(replies.items()):
            why = self.check(phase, c, arrays) if self.check is not None else None
            got = None if why else self.view(phase, c, arrays)
            if got is not None:
                key, fixed = got
                first = self.seen.setdefault((c, key), digest(fixed))
                if first != digest(fixed):
                    why = (f"numbers its data fix for {key} differ from its first answer to "
                           "the same request: flagged by the repeat screen")
            if why:
                out[c] = why
        return out
