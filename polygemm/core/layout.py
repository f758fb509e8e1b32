"""Memory order: a matrix's strides read as row- or column-major with a leading dimension, and the
shape checks every operand passes."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..errors import ShapeError

__all__ = ["Layout", "layout_from_strides", "host_layout", "check_ndim", "check_c_shape"]

Layout = Literal["row", "col"]


def layout_from_strides(shape: tuple[int, int], strides: tuple[int, int]) -> tuple[Layout, int] | None:
    """Describe a 2-D strided view (strides in elements) as row/col-major + ld, or None."""
    r, c = shape
    s0, s1 = strides
    if r == 0 or c == 0 or (r == 1 and c == 1):  # nothing or one element is addressed
        return "row", max(c, 1)
    if r <= 1:  # one row: any positive row stride is fine if the row is contiguous
        if s1 == 1:
            return "row", max(c, 1)
        if s1 >= 1:  # one row with a column stride = a column-major 1xC view with ld=s1
            return "col", s1
        return None
    if c <= 1:
        if s0 == 1:
            return "col", max(r, 1)
        if s0 >= 1:
            return "row", s0
        return None
    if s1 == 1 and s0 >= c:
        return "row", s0
    if s0 == 1 and s1 >= r:
        return "col", s1
    return None


def host_layout(arr: np.ndarray) -> tuple[Layout, int] | None:
    """The layout of an array's matrices (its last two dimensions)."""
    if arr.size == 0:  # nothing is addressed (NumPy may give such arrays any strides)
        return "row", max(arr.shape[-1], 1)
    if not all(s % arr.itemsize == 0 for s in arr.strides[-2:]):
        return None
    return layout_from_strides(arr.shape[-2:], (arr.strides[-2] // arr.itemsize, arr.strides[-1] // arr.itemsize))


def check_ndim(name: str, shape: tuple[int, ...], matmul_hint: bool = False, given: Any = None) -> None:
    """ShapeError unless the operand ``name`` of shape ``shape`` is a matrix or a stack of
    matrices (at least 2-D); the message gives its shape and what to pass: a vector ``a`` as a
    row, a vector ``b`` as a column (and, with ``matmul_hint``, ``polygemm.matmul``, which takes
    vectors), a scalar ``a`` or ``b`` as ``alpha``. ``given``: what the user passed (a list is
    indexed through ``np.asarray``). ``gemm``'s operands and ``polygemm.testing``'s alike are
    checked here."""
    if len(shape) >= 2:
        return
    head = f"{name} must be a matrix or a stack of matrices (at least 2-D); got {len(shape)}-D with shape {shape}"
    # not "reshape it" for all of them: a scalar has no rows and columns to reshape into, and a numpy.matmul user's
    # vector is a row (a) or a column (b), which matmul takes
    also = "; polygemm.matmul takes vectors, as numpy.matmul does" if matmul_hint else ""
    if len(shape) == 1 and name in ("a", "b"):
        k, arr = shape[0], name if given is None or hasattr(given, "shape") else f"np.asarray({name})"
        how = f"a row, {arr}[None, :] (1×{k})" if name == "a" else f"a column, {arr}[:, None] ({k}×1)"
        raise ShapeError(f"{head}, a vector. Pass it as {how}{also}.")
    if not shape and name in ("a", "b"):
        raise ShapeError(f"{head}, a scalar. Scale the product by it with alpha= (the result is alpha * a @ b), or multiply "
                         f"elementwise with *.")
    raise ShapeError(f"{head}. Reshape it, e.g. {name}.reshape(rows, cols).")


def check_c_shape(c_shape: tuple[int, ...], full: tuple[int, ...], a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                  broadcast: str | None = None) -> None:
    """ShapeError unless ``c`` has ``full``, the result's whole shape for ``a`` and ``b`` of
    ``a_shape`` and ``b_shape``. The message names the four shapes and, for a ``c`` that only
    broadcasts to the result (``a @ b + c`` would take it), how to pass it broadcast: ``broadcast``
    (in the terms of c's library: :func:`polygemm.core.hints.broadcast_hint`), else NumPy's."""
    if c_shape == full:
        return
    try:
        fits = tuple(np.broadcast_shapes(c_shape, full)) == full
    except ValueError:
        fits = False
    hint = f". It broadcasts to that shape: pass it broadcast, e.g. {broadcast or f'np.broadcast_to(c, {full})'}" if fits else ""
    raise ShapeError(f"c must have the result's shape {full} for a {a_shape} and b {b_shape}; got {c_shape}{hint}")
