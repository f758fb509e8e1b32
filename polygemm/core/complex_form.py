"""A complex product as the real one it equals, for checks that bound real products only (the host's ``verify=``
check, :mod:`polygemm.testing`'s error bound): ``[[Ar, -Ai], [Ai, Ar]] · [[Br], [Bi]] = [[Cr], [Ci]]``, an
M×N complex product a 2M×N real one over 2K, its first M rows the real parts, the next M the imaginary parts."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["real_form", "stacked", "part_dtype"]

#: a complex dtype's parts
_PARTS = {"complex64": np.dtype(np.float32), "complex128": np.dtype(np.float64)}


def part_dtype(dtype: Any) -> np.dtype:
    """The dtype of ``dtype``'s real and imaginary parts (float32 for complex64, float64 for complex128); a real
    dtype is its own."""
    dt = np.dtype(dtype)
    return _PARTS.get(dt.name, dt)


def stacked(x: Any) -> np.ndarray:
    """``x``'s real parts over its imaginary parts (rows): the result, C or a reference in the real form."""
    z = np.asarray(x).astype(np.complex128)
    return np.concatenate([z.real, z.imag], -2)


def real_form(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """The real form's left operand ``[[Ar, -Ai], [Ai, Ar]]`` (2M×2K) and right one ``[[Br], [Bi]]`` (2K×N), in
    float64 (exact for complex64 and complex128 parts)."""
    a_ = np.asarray(a).astype(np.complex128)
    big = np.concatenate([np.concatenate([a_.real, -a_.imag], -1), np.concatenate([a_.imag, a_.real], -1)], -2)
    return big, stacked(b)
