"""The threshold of the check, from the error bound of the dtypes used (the bound the tests hold every
kernel to, :mod:`polygemm.testing.bounds`), summed along the check vector.

A product is correct when, elementwise, ``|E| <= c*K*u_acc*|alpha|*(|A|@|B|) + c*u_acc*|beta|*|C0|
+ u_out*|C_ref| + tiny_out``. The check compares ``C·r`` with ``alpha·A·(B·r) + beta·C0·r`` for a
random ``r`` of ±1: the difference is ``E·r``, so a correct product keeps every row of it within the
sum of its elements' bounds, ``cA·|alpha|·|A|·(|B|·1) + cC0·|beta|·|C0|·1 + cC·|C|·1 + t0``, plus
the rounding of the check's own sums (``u_chk``: float64 on the host, float32 on a device). That is
the threshold: no correct product exceeds it, whatever the inputs' scaling (each row has its own),
and a wrong element moves its row's difference by its whole error (``|r_j| = 1``), so any error
above twice the threshold is caught, and above it unless the row's real rounding error (far below
the threshold in practice) happens to cancel it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.dtypes import HALF_DTYPES, finfo

__all__ = ["VERIFY_CONSTANT", "Coefficients", "coefficients", "unit"]

#: the safety factor on every term: the tests' constant (2), doubled, so that accumulation orders and
#: roundings a kernel may use (truncating tensor-core sums, split-K) stay clear of the threshold
VERIFY_CONSTANT = 4.0


def unit(dtype: np.dtype) -> float:
    """Unit roundoff (half an ulp of 1) of a floating dtype."""
    return float(finfo(dtype).eps) / 2.0


@dataclass(frozen=True)
class Coefficients:
    """``threshold = a·(|alpha|·|A|·(|B|·|r|)) + c0·(|beta|·|C0|·|r|) + c·(|C|·|r|) + t0`` for one row (or column)."""

    a: float
    c0: float
    c: float
    t0: float


def coefficients(k: int, length: int, dtype: np.dtype, out_dtype: np.dtype, check_dtype: np.dtype,
                 scalar_dtype: np.dtype | None = None) -> Coefficients:
    """The threshold's coefficients for a product of inner size ``k`` checked along vectors of ``length``
    (N for rows, M for columns), inputs of ``dtype``, a result of ``out_dtype``, the check's sums in
    ``check_dtype``; ``scalar_dtype``: what the kernels took alpha and beta as (float32 scalars round them)."""
    acc = np.dtype(np.float32) if dtype.name in HALF_DTYPES else dtype
    u_acc, u_out, u_chk = unit(acc), unit(out_dtype), unit(check_dtype)
    u_sc = unit(scalar_dtype) if scalar_dtype is not None and scalar_dtype.itemsize < dtype.itemsize else 0.0
    sums = (k + length + 4) * u_chk  # the check's own sums: B·r (length), A·(B·r) (k), and the few combining steps
    const = VERIFY_CONSTANT
    return Coefficients(
        a=const * (max(k, 1) * u_acc + u_sc + sums),
        c0=const * (u_acc + u_sc + sums),
        c=const * (u_out + sums),
        t0=const * (length * float(finfo(out_dtype).tiny) + (k + length) * float(finfo(check_dtype).tiny)),
    )
