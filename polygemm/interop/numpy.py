"""NumPy: the result type ``numpy.matmul`` would follow for ndarray subclasses, and raw bytes of
bfloat16 arrays for buffer consumers."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .kinds import kind_of, stood_for, takes_side

__all__ = ["result_like", "subclass_wrapper", "raw_view"]

def result_like(a: Any, b: Any, c: Any = None) -> Any:
    """The operand whose type the result takes: for NumPy subclasses (``np.matrix``) the one
    ``numpy.matmul`` would follow, the subclass of higher ``__array_priority__`` (``a`` on a
    tie), unless that priority is below a plain ndarray operand's (0: NumPy then returns a plain
    ndarray, or a scalar); else the first of ``a``, ``b`` and ``c`` whose library sets the result's kind (an object
    offering only DLPack or an array interface takes no side: a tensor beside it decides, in either place); ``a``
    when none does."""
    subs = [x for x in (a, b) if isinstance(x, np.ndarray) and type(x) is not np.ndarray]
    if not subs:
        if takes_side(kind_of(stood := stood_for(a)), stood):
            return a
        return next((x for x in (b, c) if x is not None and takes_side(kind_of(stood := stood_for(x)), stood)), a)
    best = max(subs, key=lambda x: float(getattr(x, "__array_priority__", 0.0)))  # max keeps the first of equals
    plain = next((x for x in (a, b) if type(x) is np.ndarray), None)
    return plain if plain is not None and float(getattr(best, "__array_priority__", 0.0)) < 0.0 else best


def raw_view(arr: np.ndarray) -> np.ndarray:
    """``arr`` as bytes a buffer consumer can take: bfloat16 (whose ``ml_dtypes`` type has no
    buffer format, so memoryview and pycuda's copies refuse it) as uint16, others as they are."""
    return arr.view(np.uint16) if arr.dtype.name == "bfloat16" else arr


def subclass_wrapper(like: Any) -> Callable[[np.ndarray], Any] | None:
    """For an ndarray subclass (``np.matrix``): a NumPy result as that subclass, through its
    ``__array_wrap__``, as ``numpy.matmul`` returns it (np.matrix makes a 1-D result a row);
    None for a plain ndarray or anything else."""
    if isinstance(like, np.ndarray) and type(like) is not np.ndarray:
        return like.__array_wrap__  # type: ignore[no-any-return]
    return None
