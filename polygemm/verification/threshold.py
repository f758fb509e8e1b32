"""The threshold of the check, from the error bound of the dtypes used (the bound the tests hold every
kernel to, :mod:`polygemm.testing.bounds`).

A product is correct when, elementwise, ``|E_ij| <= tol_ij = c*K*u_acc*|alpha|*(|A|@|B|)_ij +
c*u_acc*|beta|*|C0_ij| + u_out*|C_ref_ij| + tiny_out``. The check compares ``C·r`` with
``alpha·A·(B·r) + beta·C0·r`` for a fresh random ``r`` of ±1, independent of the product: row i's
difference is ``sum_j r_j E_ij``, which (Hoeffding) exceeds ``lam * ||E_i||_2`` with probability at
most ``2 exp(-lam²/2)`` whatever E is, 2e-31 for ``lam = 12``. And ``||E_i||_2 <= ||tol_i||_2``, which
the triangle inequality bounds by terms that matrix-vector products give: ``||(|A||B|)_i||_2 <=
sum_k |a_ik| ||b_k||_2`` (``|A|`` times B's row norms), ``||C0_i||_2`` and ``||C_i||_2``. So the
threshold

    T_i = a·|alpha|·(|A|·||B_k||_2)_i + c0·|beta|·||C0_i||_2 + c·||C_i||_2 + t0

is exceeded by no correct product (2e-31 a row), however its inputs are scaled (each row has its own
threshold), and a wrong element moves its row's difference by its whole error (``|r_j| = 1``): an
error above twice the threshold is always caught, above it unless the row's own rounding error (far
below the threshold) cancels it. The check's own sums add their rounding (``u_chk``: float64 on the
host, in plain sums; float32 on a device, in compensated sums).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..core.dtypes import HALF_DTYPES, finfo
from ..core.precision import MEDIUM_INPUT_ERROR

__all__ = ["LAMBDA", "BOUND_FACTOR", "Coefficients", "coefficients", "unit"]

#: how many standard deviations of the random sum the threshold allows: 2·exp(-72) = 2e-31 a row
LAMBDA = 12.0
#: the tests' safety constant on the accumulation terms (polygemm.testing.bounds.BOUND_CONSTANT), also
#: applied to the result's rounding (the bound's u_out·|C_ref| is taken of the computed C here)
BOUND_FACTOR = 2.0


def unit(dtype: np.dtype) -> float:
    """Unit roundoff (half an ulp of 1) of a floating dtype."""
    return float(finfo(dtype).eps) / 2.0


@dataclass(frozen=True)
class Coefficients:
    """``threshold = a·|alpha|·(|A|·||B_k||) + c0·|beta|·||C0_i|| + c·||C_i|| + t0`` for one row (or column)."""

    a: float
    c0: float
    c: float
    t0: float


@functools.lru_cache(maxsize=512)  # a pure function of its arguments, asked once per checked call
def coefficients(k: int, length: int, dtype: np.dtype, out_dtype: np.dtype, check_dtype: np.dtype,
                 scalar_dtype: np.dtype | None = None, compensated: bool = False, precision: str = "highest") -> Coefficients:
    """The threshold's coefficients for a product of inner size ``k`` checked along vectors of ``length``
    (N for rows, M for columns), inputs of ``dtype``, a result of ``out_dtype``, the check's sums in
    ``check_dtype`` (``compensated``: Kahan sums, as the device kernel makes them; else plain sums);
    ``scalar_dtype``: what the kernels took alpha and beta as (float32 scalars round them); ``precision``: the one the
    call asked (``"medium"`` allows float32 and complex64 inputs rounded to bfloat16's 8 bits: 2·2^-8 of ``|A|·|B|``
    more; :data:`polygemm.core.precision.MEDIUM_INPUT_ERROR`)."""
    acc = np.dtype(np.float32) if dtype.name in HALF_DTYPES else dtype
    u_acc, u_out, u_chk = unit(acc), unit(out_dtype), unit(check_dtype)
    u_sc = unit(scalar_dtype) if scalar_dtype is not None and scalar_dtype.itemsize < dtype.itemsize else 0.0
    root = math.sqrt(max(length, 1))
    # the check's own rounding, against the same 2-norm terms (a 1-norm is at most root times a 2-norm): compensated
    # sums err by 2u of their 1-norm (7u more where the device sums a 16-byte vector's 8 terms by fused multiply-adds
    # before its compensated add), their reduction across a warp and block by about 8u more, and the device's
    # slices of a row (at most 64, added by atomics) by one u each; B·r is stored once rounded, and enters A·(B·r)
    # twice over; plain sums err by (terms)·u; the combining steps a few u
    own = 96.0 * (1.0 + root) * u_chk if compensated else (k + length + 8) * root * u_chk
    lam, c = LAMBDA, BOUND_FACTOR
    u_in = MEDIUM_INPUT_ERROR if precision == "medium" and dtype.name in ("float32", "complex64") else 0.0
    return Coefficients(
        a=lam * (c * (max(k, 1) * u_acc + u_sc) + u_in) + own,
        c0=lam * c * (u_acc + u_sc) + own,
        c=lam * c * u_out + own,
        t0=lam * root * float(finfo(out_dtype).tiny) + (k + length) * float(finfo(check_dtype).tiny),
    )
