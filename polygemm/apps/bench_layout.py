"""The operand layouts ``polygemm bench`` times: :class:`Shape`, an M×N×K product that carries
how A and B lie in memory (``--shapes 4096x6144x4096:nt``), and the text it is shown as.

A layout is two letters, A's then B's: ``n``, the operand as stored (row-major, C order),
``t``, the transposed view of a row-major array (its last two axes swapped, no copy). A torch
``nn.Linear`` weight ``W`` is stored ``[N, K]`` and applied as ``x @ W.T``: layout ``nt``. A
weight stored ``[K, N]`` (Flax and Keras ``Dense`` kernels, Hugging Face GPT-2's ``Conv1D``,
the backward pass's ``dY @ W``) is ``nn``; a weight gradient ``dY.T @ X`` is ``tn``.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["LAYOUTS", "LAYOUT_FORM", "Shape", "layout_of", "shape_text", "parse_layout"]

#: every layout a shape may carry; "nn" is a plain ``MxNxK``'s
LAYOUTS: tuple[str, ...] = ("nn", "nt", "tn", "tt")

#: the accepted form of a shape with a layout, for usage errors
LAYOUT_FORM = ("MxNxK or MxNxK:LAYOUT, LAYOUT two letters for A and B, each n (as stored, row-major) or t "
               "(a transposed view): nn, nt, tn or tt; e.g. 4096x6144x4096:nt")


class Shape(tuple[int, int, int]):  # (m, n, k): unpacks as the triple it is
    """An M×N×K product whose operands lie as ``layout`` says (:data:`LAYOUTS`).

    It is the triple ``(m, n, k)`` (it unpacks, indexes and takes ``max`` as one), with the
    layout beside it; a plain triple is a shape of layout ``nn``, so ``Shape(m, n, k)`` equals
    and hashes as ``(m, n, k)``, while ``Shape(m, n, k, "nt")`` is another problem and equals
    neither (a preset may hold the same sizes in two layouts).
    """

    _layout: str

    def __new__(cls, m: int, n: int, k: int, layout: str = "nn") -> "Shape":
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
        self = super().__new__(cls, (int(m), int(n), int(k)))
        self._layout = layout
        return self

    @property
    def layout(self) -> str:
        """Two letters, A's and B's: ``n`` as stored, ``t`` a transposed view."""
        return str(self._layout)

    @property
    def trans_a(self) -> bool:
        return self._layout[0] == "t"

    @property
    def trans_b(self) -> bool:
        return self._layout[1] == "t"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple):
            return NotImplemented
        return tuple.__eq__(self, other) is True and layout_of(other) == self._layout

    def __ne__(self, other: object) -> bool:
        same = self.__eq__(other)
        return same if same is NotImplemented else not same

    def __hash__(self) -> int:
        return tuple.__hash__(self) if self._layout == "nn" else hash((tuple(self), self._layout))

    def __getnewargs__(self) -> tuple[Any, ...]:  # pickles (e.g. to a worker process) with its layout
        return (*self, self._layout)

    def __repr__(self) -> str:
        return f"Shape({self[0]}, {self[1]}, {self[2]}, {self._layout!r})"


def layout_of(shape: Any) -> str:
    """The layout of a :class:`Shape`; ``nn`` for a plain ``(m, n, k)`` triple."""
    return str(getattr(shape, "layout", "nn"))


def shape_text(m: int, n: int, k: int, layout: str = "nn", sep: str = "x") -> str:
    """``MxNxK`` as ``--shapes`` takes it, ``:LAYOUT`` appended where it is not ``nn``."""
    return sep.join(map(str, (m, n, k))) + (f":{layout}" if layout != "nn" else "")


def parse_layout(text: str, spec: str) -> str:
    """The letters after ``MxNxK:`` in ``spec``; argparse.ArgumentTypeError with the accepted form."""
    layout = text.strip().lower()
    if layout not in LAYOUTS:
        said = "no layout after ':'" if not layout else f"layout {text!r} is not one of {', '.join(LAYOUTS)}"
        raise argparse.ArgumentTypeError(f"{said} in {spec!r}; a shape is {LAYOUT_FORM}")
    return layout
