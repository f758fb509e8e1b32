"""A stand-in for an ``out`` no kernel writes in place (a strided view, an N-D Fortran-ordered stack):
a C-ordered array of its shape, dtype and device made by its own library, and the copy of that into it."""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

__all__ = ["stand_in"]


def _overlaps(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether two elements share memory by a zero stride (a broadcast view): no copy writes such an array as the
    product would."""
    return any(st == 0 and n > 1 for n, st in zip(shape, strides))


def stand_in(out: Any) -> tuple[Any, Callable[[], None]] | None:
    """``(array, copy)``: a new C-ordered array of ``out``'s shape, dtype and device from ``out``'s own library
    (NumPy, CuPy, torch), and the function that copies it into ``out`` (queued on the current stream, as that
    library queues its copies). None for an array of another library, or one whose elements overlap."""
    if isinstance(out, np.ndarray):
        if _overlaps(out.shape, out.strides):
            return None
        tmp = np.empty(out.shape, out.dtype)
        return tmp, lambda: np.copyto(out, tmp)
    module = type(out).__module__.partition(".")[0]
    if module == "cupy":
        cupy: Any = sys.modules["cupy"]
        if _overlaps(tuple(out.shape), tuple(out.strides)):
            return None
        with out.device:
            tmp = cupy.empty(out.shape, out.dtype)

        def to_cupy() -> None:
            with out.device:
                out[...] = tmp
        return tmp, to_cupy
    if module == "torch":
        torch: Any = sys.modules["torch"]
        if _overlaps(tuple(out.shape), tuple(out.stride())):
            return None
        tmp = torch.empty(tuple(out.shape), dtype=out.dtype, device=out.device)
        return tmp, lambda: out.copy_(tmp)
    return None
