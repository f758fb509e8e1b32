"""A stand-in for an ``out`` no kernel writes in place (a strided view, an N-D Fortran-ordered stack, another byte order):
a C-ordered array of its shape, dtype and device made by its own library, and the copy of that into it."""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from ..core.dtypes import np_name
from ..core.operand import may_overlap
from ..core.read import OutOverlaps

__all__ = ["stand_in", "overlap_refusal"]


def overlap_refusal(shape: tuple[int, ...], strides: tuple[int, ...], unit: str, fresh: str) -> OutOverlaps:
    """The refusal of an ``out`` of ``shape`` and ``strides`` whose elements may share memory; ``fresh``: an
    expression of an array to pass instead."""
    return OutOverlaps(f"out has shape {shape} and strides {strides} ({unit}): its elements may share memory (a zero "
                       f"step, or steps smaller than what the axes below them span; polygemm cannot tell they do not), "
                       f"where one result would overwrite another. Pass an out of distinct elements, e.g. {fresh}, or "
                       f"omit out to get a new result")


def stand_in(out: Any) -> tuple[Any, Callable[[], None]] | None:
    """``(array, copy)``: a new C-ordered array of ``out``'s shape, dtype and device from ``out``'s own library
    (NumPy, CuPy, torch), and the function that copies it into ``out`` (queued on the current stream, as that
    library queues its copies). None for an array of another library; OutOverlaps for one whose elements may
    share memory."""
    if isinstance(out, np.ndarray):
        if may_overlap(zip(out.shape, out.strides), out.itemsize):
            raise overlap_refusal(out.shape, out.strides, "bytes", f"np.empty({out.shape}, {np_name(out.dtype)})")
        tmp = np.empty(out.shape, out.dtype.newbyteorder("="))  # this machine's byte order, which the kernels write
        return tmp, lambda: np.copyto(out, tmp)
    module = type(out).__module__.partition(".")[0]
    if module == "cupy":
        cupy: Any = sys.modules["cupy"]
        if may_overlap(zip(out.shape, out.strides), int(out.itemsize)):
            raise overlap_refusal(tuple(out.shape), tuple(out.strides), "bytes", f"cupy.empty({tuple(out.shape)}, {np_name(out.dtype)})")
        with out.device:
            tmp = cupy.empty(out.shape, out.dtype)

        def to_cupy() -> None:
            with out.device:
                out[...] = tmp
        return tmp, to_cupy
    if module == "torch":
        torch: Any = sys.modules["torch"]
        if may_overlap(zip(out.shape, out.stride())):  # (torch's steps are in elements)
            raise overlap_refusal(tuple(out.shape), tuple(out.stride()), "elements",
                                  f"torch.empty({tuple(out.shape)}, dtype={out.dtype}, device='{out.device}')")
        tmp = torch.empty(tuple(out.shape), dtype=out.dtype, device=out.device)
        return tmp, lambda: out.copy_(tmp)
    return None
