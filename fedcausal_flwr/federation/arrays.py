"""Arrays by name: a phase's arrays packed into wire order from a mapping by name, and a
received list read back into one, refused (naming the array) when its count or shapes differ.

Flower's ``NumPyClient`` sends and receives lists of arrays; a family names each list in its
``<family>/wire.py`` (:class:`~fedcausal_flwr.federation.wire.Phase`). A :class:`Layout` is
one direction of one phase laid out for the wire: per name of the phase a :class:`Slot`, which
is one array or a group of arrays (a network's parameter list, one array per peer, per target,
per replica), each array with its label (for errors) and its spec. Pure numpy, no Flower.

A spec is ``None`` (any array), a shape (its dimensions, ``None`` for any length) or a
``(shape, dtype)`` pair whose dtype ``"float"`` means float64 (as
:func:`~fedcausal_flwr.federation.replies.reply_problem`); :meth:`Layout.specs` gives the
exchange what to expect of a reply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

Spec = Any  # None | tuple[int | None, ...] | tuple[tuple[int | None, ...], str]


class Slot(NamedTuple):
    """One name of a phase: its arrays' ``(label, spec)`` in wire order; ``many``: the name
    stands for a group of arrays (a mapping by label, or a list, in and out)."""

    name: str
    parts: tuple[tuple[str, Spec], ...]
    many: bool = False


def one(name: str, spec: Spec = None) -> Slot:
    """A name that stands for one array (labelled by the name)."""
    return Slot(name, ((name, spec),))


def group(name: str, parts: Iterable[tuple[str, Spec]]) -> Slot:
    """A name that stands for a group of arrays, ``(label, spec)`` each, in wire order
    (labels distinct)."""
    parts = tuple(parts)
    if len({label for label, _ in parts}) != len(parts):
        raise ValueError(f"array {name!r}: labels of its group repeat")
    return Slot(name, parts, True)


def _shape_dtype(spec: Spec) -> tuple[tuple[int | None, ...] | None, str | None]:
    if spec is None:
        return None, None
    if len(spec) == 2 and isinstance(spec[0], tuple) and isinstance(spec[1], str):
        return tuple(spec[0]), spec[1]
    return tuple(spec), None


def _shown(shape: tuple[int | None, ...]) -> str:
    """``(3, 4)``, ``(3,)``, ``(any, 32)``."""
    dims = ["any" if w is None else str(w) for w in shape]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def problem(a: np.ndarray, spec: Spec) -> str | None:
    """Why array ``a`` does not fit ``spec`` (its shape, then its dtype), or None."""
    shape, dtype = _shape_dtype(spec)
    got = tuple(int(n) for n in np.shape(a))
    if shape is not None and (len(got) != len(shape) or any(
            w is not None and w != g for w, g in zip(shape, got, strict=True))):
        return f"has shape {got}, expected {_shown(shape)}"
    if dtype is not None:
        want = np.dtype(np.float64 if dtype == "float" else dtype)
        if np.asarray(a).dtype != want:
            return f"has dtype {np.asarray(a).dtype}, expected {want}"
    return None


class Layout:
    """One direction of one phase on the wire: its slots in the order of the phase's names.

    Parameters
    ----------
    what : str
        What the arrays are, for errors (e.g. ``"vfedcd_update reply"``).
    names : sequence of str
        The phase's names in wire order (``PHASES[phase].up`` or ``.down``).
    slots : iterable of Slot
        One per name (any order); a slot whose name is not one of ``names`` or a name
        without its slot is a ValueError (the layout does not describe the phase).
    """

    def __init__(self, what: str, names: Sequence[str], slots: Iterable[Slot]) -> None:
        by_name = {s.name: s for s in slots}
        extra = [n for n in by_name if n not in names]
        lacking = [n for n in names if n not in by_name]
        if extra or lacking:
            raise ValueError(f"{what}: the layout names {sorted(by_name)}, the phase "
                             f"{list(names)}")
        self.what = what
        self.slots = tuple(by_name[n] for n in names)

    @property
    def names(self) -> tuple[str, ...]:
        """The names, in wire order."""
        return tuple(s.name for s in self.slots)

    def labels(self) -> list[str]:
        """Every array's label, in wire order."""
        return [label for s in self.slots for label, _ in s.parts]

    def specs(self) -> list[Spec]:
        """Every array's spec, in wire order (what the exchange expects of a reply)."""
        return [spec for s in self.slots for _, spec in s.parts]

    def __len__(self) -> int:
        return sum(len(s.parts) for s in self.slots)

    def _checked(self, label: str, a: Any, spec: Spec) -> np.ndarray:
        why = problem(a, spec)
        if why is not None:
            raise ValueError(f"{self.what}: array {label!r} {why}")
        return a

    def pack(self, arrays: Mapping[str, Any]) -> list[np.ndarray]:
        """The arrays in wire order from ``arrays`` by name: one array per single name, per
        group a mapping by label (every label, none else) or a list in wire order. A missing
        or unknown name or label, a group of the wrong size, or an array whose shape or dtype
        differs from its spec is a ValueError naming it."""
        unknown = sorted(set(arrays) - set(self.names))
        if unknown:
            raise ValueError(f"{self.what}: unknown array {unknown[0]!r} (the phase has "
                             f"{', '.join(self.names) or 'no arrays'})")
        out: list[np.ndarray] = []
        for s in self.slots:
            if s.name not in arrays:
                raise ValueError(f"{self.what}: array {s.name!r} missing")
            got = arrays[s.name]
            if not s.many:
                out.append(self._checked(s.name, got, s.parts[0][1]))
                continue
            if isinstance(got, Mapping):
                labels = [label for label, _ in s.parts]
                extra = [k for k in got if k not in labels]
                if extra:
                    raise ValueError(f"{self.what}: unknown array {extra[0]!r} in "
                                     f"{s.name!r}")
                for label, spec in s.parts:
                    if label not in got:
                        raise ValueError(f"{self.what}: array {label!r} missing")
                    out.append(self._checked(label, got[label], spec))
                continue
            if isinstance(got, np.ndarray):
                raise ValueError(f"{self.what}: {s.name!r} is a group of {len(s.parts)} "
                                 "arrays, got one array")
            got = list(got)
            if len(got) != len(s.parts):
                raise ValueError(f"{self.what}: {s.name!r} has {len(got)} arrays, expected "
                                 f"{len(s.parts)}")
            out += [self._checked(label, a, spec)
                    for (label, spec), a in zip(s.parts, got, strict=True)]
        return out

    def unpack(self, arrays: Sequence[np.ndarray]) -> dict[str, Any]:
        """``arrays`` (wire order) by name: a single name's array, a group's arrays as a dict
        by label in wire order. A ValueError when the count differs, or naming the first
        array whose shape or dtype differs from its spec."""
        if len(arrays) != len(self):
            raise ValueError(f"{self.what}: {len(arrays)} arrays, expected {len(self)} ("
                             f"{', '.join(self.names) or 'none'})")
        it = iter(arrays)
        out: dict[str, Any] = {}
        for s in self.slots:
            got = {label: self._checked(label, next(it), spec) for label, spec in s.parts}
            out[s.name] = got if s.many else got[s.name]
        return out
