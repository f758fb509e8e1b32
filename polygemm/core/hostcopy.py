"""Host conversions: the one copy a host operand gets when no kernel reads it as it is, and
``planning_only``, under which such copies are described and not made (``explain``)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import numpy as np

from .dtypes import native_dtype

__all__ = ["planning_only", "host_convert"]

_planning = threading.local()


@contextlib.contextmanager
def planning_only() -> Iterator[None]:
    """Within it (``explain``), the copies a host operand needs are described, not made: :func:`host_convert` gives
    an array of the copy's shape, dtype and order whose memory is never touched, so that explain of a large strided
    view copies nothing, and of a broadcast one too large for memory raises no MemoryError."""
    before = getattr(_planning, "on", False)
    _planning.on = True
    try:
        yield
    finally:
        _planning.on = before


def _stand_in(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """A C-ordered array of ``shape`` and ``dtype`` for planning only: never read nor written. np.empty's pages are not
    touched until used; one too large to reserve is a strided view of one element (the planners read no data)."""
    try:
        return np.empty(shape, dtype)
    except (MemoryError, ValueError):
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.append(step)
            step *= max(int(n), 1)
        return np.lib.stride_tricks.as_strided(np.empty(1, dtype), shape, tuple(reversed(strides)), writeable=False)


def host_convert(arr: np.ndarray, batch: tuple[int, ...] | None = None) -> np.ndarray:
    """The copy a host operand gets when kernels cannot read it as it is: native byte order,
    C order (for strided views that are neither row- nor column-major, and for non-native
    byte order, whose bytes no kernel reads) and, with ``batch``, broadcast to that batch
    (when its batch strides cannot be walked with one stride). Under :func:`planning_only`, a stand-in for it."""
    if getattr(_planning, "on", False):
        return _stand_in(tuple(batch) + tuple(arr.shape[-2:]) if batch is not None else tuple(arr.shape), native_dtype(arr.dtype))
    if batch is not None:
        arr = np.broadcast_to(arr, batch + arr.shape[-2:])
    if not arr.dtype.isnative:
        return np.array(arr, dtype=native_dtype(arr.dtype), order="C", copy=True)
    # a copy even where NumPy calls the view C-contiguous: it ignores the stride of a length-1 axis, which a kernel
    # reads (a row of a packed record's field: strides (33, 8)), so ascontiguousarray would hand the same view back
    return np.array(arr, order="C", copy=True)
