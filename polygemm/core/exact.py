"""Integer and bool products, exactly as numpy.matmul computes them.

numpy.matmul computes integers in their own dtype, wrapping modulo 2**bits on overflow, and bool as
the logical product (any of a[i, k] and b[k, j]). Wrapping arithmetic is exact modulo 2**bits
whatever the order of the sums, so a product computed in 64-bit integers (wrapping modulo 2**64)
and cast to the dtype (keeping the low bits) is numpy.matmul's result exactly; alpha and beta scale
and add in the same arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import integer_scalars_refusal
from ..errors import ArgumentError

__all__ = ["exact_integer_product"]


def _scalar(value: float, work: Any) -> Any:
    """A whole ``value`` as a ``work`` (int64 or uint64) scalar, modulo 2**64 as the arithmetic wraps."""
    return np.array(int(value) % 2**64, dtype=np.uint64).astype(work)[()]


def exact_integer_product(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, alpha: float, beta: float,
                          out_dtype: np.dtype) -> np.ndarray:
    """``alpha * a @ b + beta * c`` for integer (or bool) ``a`` and ``b``, exactly as numpy.matmul computes the
    product in ``out_dtype`` (the inputs' dtype): wrapping modulo 2**bits, bool logical. ``c`` is read only when
    ``beta != 0``. ArgumentError for alpha or beta that integer arithmetic does not take (a cached plan is made for
    alpha 1 or not, beta 0 or not: a call reusing it is checked here, before anything is written)."""
    why = integer_scalars_refusal(out_dtype.name, alpha, beta)
    if why is not None:
        raise ArgumentError(why)
    if out_dtype.kind == "b":
        logical: np.ndarray = np.matmul(a, b)  # numpy's logical product (alpha 1, beta 0: refused otherwise)
        return logical
    work = np.uint64 if out_dtype.kind == "u" else np.int64
    with np.errstate(all="ignore"):  # wrapping is the arithmetic asked for, not an error
        acc: np.ndarray = np.matmul(a.astype(work, copy=False), b.astype(work, copy=False))
        if alpha != 1.0:
            acc *= _scalar(alpha, work)
        if beta != 0.0 and c is not None:
            acc += _scalar(beta, work) * np.asarray(c).astype(work, copy=False)
        return acc.astype(out_dtype)
