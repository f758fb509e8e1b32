"""Normalization: user inputs become one validated :class:`GemmProblem`.

Every validation of ``gemm``'s arguments happens here, once, before any backend sees the
call. An operand's memory layout is read off its strides: row-major, column-major, or a
transposed view of either are described without a copy; any other strided view is copied
once into C order (host arrays) and the copy is recorded so that ``explain`` can say so.
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError
from ..interop.kinds import common_kind, kind_of
from .dtypes import HALF_DTYPES, INTEGER_DTYPES, check_result_dtype, integer_scalars_refusal, np_name, parse_dtype
from .hints import broadcast_hint, c_cast_hint, cast_hint, promotion_hint
from .layout import check_c_shape
from .operand import Operand, batch_stride, made_real, overlaps, self_overlapping
from .problem import GemmProblem
from .read import NotWhole, OutBatchUnwalkable, read_operand
from .scalars import parse_scalar
from .text import short_repr
from .vectors import joint_lists
from .views import view_interface

__all__ = ["normalize"]

def normalize(a: Any, b: Any, c: Any = None, *, alpha: Any = 1.0, beta: Any = 0.0, out: Any = None, out_dtype: Any = None,
              broadcast_copies: bool = True, views: Sequence[Any] | None = None) -> GemmProblem:
    """:func:`_normalize`, whose refusals of torch operands speak torch's spelling (``a.to(torch.int64)``,
    ``out_dtype=torch.float32``), not NumPy's, which a tensor lacks."""
    try:
        return _normalize(a, b, c, alpha=alpha, beta=beta, out=out, out_dtype=out_dtype, broadcast_copies=broadcast_copies,
                          views=views)
    except (DTypeError, ArgumentError) as exc:
        if kind_of(a) != "torch" and kind_of(b) != "torch":
            raise
        cpu_out = kind_of(out) == "torch" and getattr(getattr(out, "device", None), "type", "") == "cpu"
        text = torch_spelling(str(exc), cpu_out)
        if text == str(exc):
            raise
        again = copy.copy(exc)
        again.args = (text,) + exc.args[1:]
        raise again from None


_NP_CAST = re.compile(r"\b(a|b|c|result)\.astype\((?:np\.|')(\w+)'?\)")
_NP_DTYPE = re.compile(r"out_dtype=np\.(\w+)")
_NP_EMPTY = re.compile(r"np\.empty\((\([^)]*\)), np\.(\w+)\)")


def torch_spelling(text: str, cpu_out: bool = False) -> str:
    """A refusal's NumPy casts said as torch says them: ``x.astype(np.T)`` / ``x.astype('T')`` as ``x.to(torch.T)``,
    ``out_dtype=np.T`` as ``out_dtype=torch.T``; with ``cpu_out`` (the call's out a CPU tensor) ``np.empty(shape, np.T)``
    as ``torch.empty(shape, dtype=torch.T)``."""
    text = _NP_DTYPE.sub(r"out_dtype=torch.\1", _NP_CAST.sub(r"\1.to(torch.\2)", text))
    return _NP_EMPTY.sub(r"torch.empty(\1, dtype=torch.\2)", text) if cpu_out else text


def _normalize(a: Any, b: Any, c: Any = None, *, alpha: Any = 1.0, beta: Any = 0.0, out: Any = None, out_dtype: Any = None,
               broadcast_copies: bool = True, views: Sequence[Any] | None = None) -> GemmProblem:
    """Validate ``gemm``'s arguments and describe them as a :class:`GemmProblem`.

    ``broadcast_copies=False`` marks host operands whose batch one stride cannot walk
    (``broadcast``) without copying them yet: :meth:`GemmProblem.broadcasts_for` does, once the
    backend is known (the cpu backend needs no copy).

    ``views``: what the plan cache's key read of ``a``, ``b``, ``c`` and ``out``
    (:func:`~polygemm.core.views.operand_view` each, None for one it did not read): a device
    operand's interface is taken from its view rather than read a second time.

    ``a`` and ``b`` are matrices or stacks of matrices whose leading (batch) dimensions
    broadcast as in ``numpy.matmul``; ``c`` and ``out`` have the result's full shape.
    Raises ShapeError, DTypeError or ArgumentError (all ValueError/TypeError subclasses)
    with a message naming the argument, what was given and what would be accepted.
    """
    alpha_f = parse_scalar("alpha", alpha)
    beta_f = parse_scalar("beta", beta)
    read_a, read_b, read_c, read_out = (None,) * 4 if views is None else (view_interface(v) for v in views)
    a, b = joint_lists(a, b)
    _refuse_unaddressable_declared(a, b)  # before reading: reading a strided host operand copies it
    A = read_operand("a", a, read=read_a)
    B = read_operand("b", b, read=read_b)
    if A.cols != B.rows:
        raise ShapeError(
            f"inner dimensions differ: a's matrices are {A.shape} and b's {B.shape}; "
            f"a.shape[-1] (K={A.cols}) must equal b.shape[-2] ({B.rows})"
        )
    # a and b in two places, or of two libraries, first: a cast hint for them would lead to that refusal next
    if A.residency != B.residency:
        raise _different_places((A, B))
    common_kind([("a", a), ("b", b)])
    if A.dtype != B.dtype:
        raise _dtype_mismatch(a, b, A, B)
    if A.dtype.name in INTEGER_DTYPES:  # integer arithmetic takes whole scalars (bool: none), whatever the device
        why = integer_scalars_refusal(A.dtype.name, alpha_f, beta_f)
        if why is not None:
            raise ArgumentError(why)
    batch = _broadcast_batch(A, B)
    m, k, n = A.rows, A.cols, B.cols
    full = batch + (m, n)
    wanted = None if out_dtype is None else parse_dtype("out_dtype", out_dtype)
    _refuse_unaddressable(full, (A.dtype if wanted is None else wanted).itemsize, _full_shape(A), _full_shape(B))
    O = None if out is None else _read_out(out, full, wanted, read_out)
    result = O.dtype if O is not None else (wanted if wanted is not None else A.dtype)
    check_result_dtype(A.dtype, result, "out" if O is not None else "out_dtype")
    C = _read_c(c, beta, beta_f, full, A, B, O, result, wanted, read_c)
    A, B, C, O = _batched((A, B, C, O), batch, full, broadcast_copies)  # type: ignore[assignment]
    assert A is not None and B is not None
    _check_overlaps(A, B, C, O)
    residencies = {op.residency for op in (A, B, C, O) if op is not None}
    if len(residencies) > 1:
        raise _different_places((A, B, C, O))
    residency = residencies.pop()
    kind = common_kind([("a", a), ("b", b), ("c", c), ("out", out)])
    notes = tuple(f"{op.name} was copied once into C order (strides neither row- nor column-major, or non-native byte order)" for op in (A, B, C) if op is not None and op.copied)
    return GemmProblem(m, n, k, A.dtype, A, B, C, O, alpha_f, beta_f, residency, notes, batch, result if O is None else None, kind)


def _holds(values: Any, dtype: np.dtype) -> bool:
    """Whether a list's values (``values``: NumPy's array of them) are all exactly ``dtype``'s (1.5 is no int64,
    300 no int8, 1e6 no float16, 1+1j no float32)."""
    if not isinstance(values, np.ndarray):
        return False
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ComplexWarning, and NumPy's casts of out-of-range integers
        try:
            if dtype.kind in "iu" and values.dtype.kind in "iub" and values.size:
                # integers to integers: their range (-1 goes to uint64 and back unchanged, modulo 2**64)
                info = np.iinfo(dtype)
                return bool(int(values.min()) >= info.min and int(values.max()) <= info.max)
            # the round trip, not a comparison across dtypes: NumPy compares int64 2**60 + 1 with its float32 in
            # float64, where both are 2**60
            return bool(np.array_equal(values.astype(dtype).astype(values.dtype), values, equal_nan=values.dtype.kind in "fc"))
        except (TypeError, ValueError, OverflowError):
            return False


def _dtype_mismatch(a: Any, b: Any, A: Operand, B: Operand) -> DTypeError:
    """The refusal of a and b of two dtypes, with the cast to make in the terms of what was passed: a list beside an
    array (or a second list) cast to the array's dtype where its values are all exactly that dtype's (the array's
    dtype is the one meant), else both to the dtype numpy.matmul computes them in."""
    if hasattr(b, "astype") and not hasattr(a, "astype") and _holds(A.array, B.dtype):  # a list beside an array
        how = cast_hint("a", a, B.dtype)
    elif not (hasattr(b, "astype") or hasattr(b, "__dlpack__") or kind_of(b) == "torch") and _holds(B.array, A.dtype):
        how = cast_hint("b", b, A.dtype)  # b a list, a tuple ...
    else:  # two arrays (tensors cast with to), or a list of values the other's dtype would change
        how = promotion_hint(("a", a, A.dtype), ("b", b, B.dtype))
    return DTypeError(f"a and b must share one dtype; got a {A.dtype.name} and b {B.dtype.name}. Cast to one dtype, e.g. {how}.")


def _broadcast_batch(A: Operand, B: Operand) -> tuple[int, ...]:
    """a's and b's batch dimensions broadcast (numpy.matmul rules); ShapeError where they do not broadcast. The batch
    may be one no array can hold: :func:`_refuse_unaddressable` says so of the result."""
    batch_a, batch_b = tuple(n for n, _ in A.batch_dims), tuple(n for n, _ in B.batch_dims)
    batch = _broadcast(batch_a, batch_b)
    if batch is None:
        # both shapes in full, as numpy.matmul names them (the batch dimensions alone left the user to find the arrays)
        raise ShapeError(f"the batch dimensions of a {batch_a} and b {batch_b} do not broadcast (numpy.matmul rules): a is "
                         f"{_full_shape(A)}, b is {_full_shape(B)}; their leading dimensions must be equal or 1")
    return batch


def _broadcast(shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape ``shape_a`` and ``shape_b`` broadcast to (aligned at their last axes, each pair of lengths equal or
    one of them 1), None where they do not broadcast. Computed here, not by np.broadcast_shapes, which raises the same
    ValueError for shapes that broadcast to more elements than its index type counts as for shapes that do not."""
    n = max(len(shape_a), len(shape_b))
    shape = []
    for x, y in zip((1,) * (n - len(shape_a)) + shape_a, (1,) * (n - len(shape_b)) + shape_b):
        if x != y and x != 1 and y != 1:
            return None
        shape.append(y if x == 1 else x)
    return tuple(shape)


def _full_shape(op: Operand) -> tuple[int, ...]:
    """An operand's whole shape: its batch dimensions, then its matrices'."""
    return tuple(n for n, _ in op.batch_dims) + op.shape


#: NumPy's largest array, in bytes: its size * itemsize must fit its index type (intp)
_MAX_BYTES = int(np.iinfo(np.intp).max)
_MAX_TEXT = f"2**{_MAX_BYTES.bit_length()} - 1"


def _refuse_unaddressable(full: tuple[int, ...], itemsize: int, shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> None:
    """ShapeError where the result (shape ``full``, elements of ``itemsize`` bytes) is larger than any array can be:
    NumPy refuses such an array ("array is too big"), and no memory holds it, so the product is refused before any
    work (a copy of a broadcast operand, which may itself exceed memory) rather than failing in it."""
    count = math.prod(full)
    if count * itemsize <= _MAX_BYTES:
        return
    raise ShapeError(f"the result of a {shape_a} @ b {shape_b} is too large: its shape {full} holds {_rough(count)} "
                     f"elements of {itemsize} bytes ({_rough(count * itemsize)} bytes), more than an array can address "
                     f"({_MAX_TEXT} bytes, NumPy's limit: numpy.matmul says 'array is too big'); compute it in pieces, e.g. "
                     f"a slice of the batch or a block of a's rows or b's columns at a time")


def _rough(n: int) -> str:
    """A large count in three significant digits (1.21e+24), as a refusal reads it."""
    return f"{n:.3g}" if n < 10**300 else f"about 10**{len(str(n)) - 1}"  # (beyond a float's range: its digits)


def _refuse_unaddressable_declared(a: Any, b: Any) -> None:
    """:func:`_refuse_unaddressable` on the shapes and dtype ``a`` and ``b`` declare (``.shape``, ``.dtype``), before
    either is read: reading a strided host operand copies it, and the copy of a broadcast one can be as impossible as
    the result. Operands without a declared shape or itemsize, or whose shapes do not multiply, are left to the checks
    after reading (which say what is wrong with them)."""
    shape_a, shape_b = _declared_shape(a), _declared_shape(b)
    if shape_a is None or shape_b is None or len(shape_a) < 2 or len(shape_b) < 2 or shape_a[-1] != shape_b[-2]:
        return
    batch = _broadcast(shape_a[:-2], shape_b[:-2])
    itemsize = getattr(getattr(a, "dtype", None), "itemsize", None)
    if batch is not None and isinstance(itemsize, int):
        _refuse_unaddressable(batch + (shape_a[-2], shape_b[-1]), itemsize, shape_a, shape_b)


def _declared_shape(x: Any) -> tuple[int, ...] | None:
    """The shape an array declares (``.shape``), None for one that declares none (a list: NumPy would have to read it)
    or one that cannot say (a nested torch tensor)."""
    try:
        shape = getattr(x, "shape", None)
        return None if shape is None else tuple(int(n) for n in shape)
    except Exception:
        return None


def _read_out(out: Any, full: tuple[int, ...], wanted: Any, read: tuple[str, dict] | None = None) -> Operand:
    """``out`` read as a writable operand of the result's shape ``full`` (and of ``wanted``, out_dtype, when given)."""
    m, n = full[-2:]
    batch = full[:-2]
    O = read_operand("out", out, writable=True, read=read)
    if O.shape != (m, n) or tuple(x for x, _ in O.batch_dims) != batch:
        raise ShapeError(f"out must have the result's shape {full}; got {tuple(x for x, _ in O.batch_dims) + O.shape}")
    if wanted is not None and O.dtype != wanted:
        raise DTypeError(f"out is {O.dtype.name} but out_dtype={wanted.name}; pass one of them, or both the same")
    if self_overlapping(O):
        # an as_strided out whose matrices (or rows) share elements: each write would race the others and the
        # result be whatever came last; torch refuses such an out as well
        raise ArgumentError(f"out's elements overlap in memory (shape {full}, element strides "
                            f"{tuple(st for _, st in O.batch_dims) + ((O.ld, 1) if O.layout == 'row' else (1, O.ld))}): "
                            f"each element of the result needs its own place; pass a C-ordered array, e.g. "
                            f"np.empty({full}, {np_name(O.dtype)}), or omit out to get a new result")
    return O


def _read_c(c: Any, beta: Any, beta_f: float, full: tuple[int, ...], A: Operand, B: Operand, O: Operand | None, result: np.dtype,
            wanted: Any, read: tuple[str, dict] | None = None) -> Operand | None:
    """``c`` read as an operand of the result's shape and dtype; None without it (then beta must be 0)."""
    if c is not None:
        # a 1-D c (a bias, as a @ b + bias broadcasts it) or a scalar: told how to pass it broadcast, before the
        # operand check's "at least 2-D ... reshape it", which cannot work for it
        c_shape = getattr(c, "shape", None)
        if c_shape is None and isinstance(c, (int, float, list, tuple)):
            try:
                c_shape = np.shape(c)
            except ValueError:  # a ragged list: read_operand names c in its ShapeError, not NumPy's bare ValueError
                c_shape = None
        if c_shape is not None and len(c_shape) < 2:
            check_c_shape(tuple(c_shape), full, tuple(x for x, _ in A.batch_dims) + A.shape, tuple(x for x, _ in B.batch_dims) + B.shape,
                          broadcast_hint("c", c, full, result))
        C = read_operand("c", c, read=read)
        c_full = tuple(x for x, _ in C.batch_dims) + C.shape
        if c_full != full:
            check_c_shape(c_full, full, tuple(x for x, _ in A.batch_dims) + A.shape, tuple(x for x, _ in B.batch_dims) + B.shape,
                          broadcast_hint("c", c, full, result))
        if C.dtype != result:
            wider = (f", or ask for a {C.dtype.name} result with out_dtype=np.{C.dtype.name} (where the device writes one: "
                     f"cpu, cuda)"
                     if O is None and wanted is None and A.dtype.name in HALF_DTYPES and C.dtype == np.float32 else "")
            raise DTypeError(f"c must have the dtype of the result ({result.name}); got {C.dtype.name}. Cast it, e.g. "
                             f"{c_cast_hint(c, C.dtype, result)}{wider}")
        return C
    if beta_f != 0.0:
        # out= with beta is cuBLAS's C (cupy.cublas.gemm(..., out=c, beta=1) adds into out): polygemm reads only c, so
        # a user who passed the array as out is told that c may be out itself
        into = (f"; to add into out's values as cuBLAS's C does, pass out as c too: gemm(a, b, out, beta={short_repr(beta)}, out=out)"
                if O is not None else "")
        raise ArgumentError(f"beta={short_repr(beta)} needs c: pass c (shape {full}) or set beta=0{into}")
    return None


def _batched(ops: tuple[Operand | None, ...], batch: tuple[int, ...], full: tuple[int, ...], broadcast_copies: bool) -> list[Operand | None]:
    """Each operand with the one stride that walks its batch; a host batch one stride cannot walk made real (or marked
    pending, ``broadcast_copies=False``); a device one refused (NotWhole), an out's too (OutBatchUnwalkable)."""
    count = math.prod(batch)
    ops_out: list[Operand | None] = []
    for op in ops:
        if op is None:
            ops_out.append(None)
            continue
        stride = batch_stride(op, batch)
        if op.rows * op.cols == 0 or count == 0:  # nothing of it is addressed (NumPy gives such arrays any strides)
            stride = stride or 0
        elif stride is None or (op.name in ("out", "c") and stride == 0 and count > 1):
            if op.name == "out":
                # not "make it contiguous": a copy of out would receive the result while out did not; say what out
                # is and what to pass instead (as for its matrices' strides). gemm writes a NumPy, CuPy or torch out
                # through a C-ordered stand-in unless its elements overlap; this is what the others, and those, read
                arr = op.array
                shape, strides = (tuple(arr.shape), tuple(arr.strides)) if isinstance(arr, np.ndarray) else \
                    (tuple(x for x, _ in op.batch_dims) + op.shape, tuple(s for _, s in op.batch_dims))
                raise OutBatchUnwalkable(f"out has shape {shape} and strides {strides}: its batch (all but the last two axes) is "
                                    f"not one that a single stride walks (e.g. batch axes swapped, an outer batch axis reversed or stepped, one matrix for several); "
                                    f"polygemm writes such an out only through a C-ordered array of its own library (NumPy, "
                                    f"CuPy, torch) and only where no two of its elements share memory. Pass a C-ordered array, e.g. "
                                    f"np.empty({full}, {np_name(op.dtype)}), or omit out to get a new result")
            if op.residency != "host":  # a device array is not copied here: gemm has its own library make it whole
                given = tuple(x for x, _ in op.batch_dims)
                full_shape = batch + op.shape
                raise NotWhole(
                    f"{op.name}'s batch {given} (strides {tuple(s for _, s in op.batch_dims)} elements) "
                    f"{'broadcasts to' if given != batch else 'is'} {batch}, which one stride cannot walk on the device"
                    f"{' (c is read once per matrix of the result)' if op.name == 'c' else ''}; polygemm copies CuPy "
                    f"arrays and torch tensors so, not other device arrays: pass {op.name} broadcast to {full_shape} "
                    f"and made contiguous in its own library",
                    op.name, full_shape)
            if broadcast_copies:
                ops_out.append(made_real(op, batch))  # the broadcast made real: one stride walks it
            else:  # marked; the copy (or none) is the backend's to decide
                ops_out.append(replace(op, pending=True, batch_stride=op.rows * op.cols, batch_count=count))
            continue
        ops_out.append(replace(op, batch_stride=stride, batch_count=count) if batch else op)
    return ops_out


def _check_overlaps(A: Operand, B: Operand, C: Operand | None, O: Operand | None) -> None:
    """ArgumentError when out overlaps a or b, or c other than as c itself (in place)."""
    if O is None:
        return
    for other in (A, B):
        if overlaps(O, other):
            raise ArgumentError(f"out overlaps {other.name}; pass a separate array for out (it may be c itself, not a or b)")
    if C is not None and overlaps(O, C) and not (O.ptr == C.ptr and O.layout == C.layout and O.ld == C.ld and O.batch_stride == C.batch_stride):
        raise ArgumentError("out partly overlaps c; pass c itself as out (in-place update) or a separate array")


def _different_places(ops: tuple[Any, ...]) -> ArgumentError:
    """The refusal of operands that live in different places, naming where each is."""
    where = ", ".join(f"{op.name} on {op.residency}" for op in ops if op is not None)
    return ArgumentError(f"operands live in different places ({where}); move them to one device (or all to host NumPy arrays)")
