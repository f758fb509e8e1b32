"""Normalization: user inputs become one validated :class:`GemmProblem`.

Every validation of ``gemm``'s arguments happens here, once, before any backend sees the
call. An operand's memory layout is read off its strides: row-major, column-major, or a
transposed view of either are described without a copy; any other strided view is copied
once into C order (host arrays) and the copy is recorded so that ``explain`` can say so.
"""

from __future__ import annotations

import contextlib
import decimal
import math
import numbers
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Literal

import numpy as np

from .errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from .interop import common_kind, cupy_view, device_index, dlpack_interface, kind_of, torch_dlpack_only, torch_negated, torch_resolved, torch_stream, torch_view

try:  # NumPy's bfloat16 comes from ml_dtypes (a dependency; a missing one only costs bfloat16)
    import ml_dtypes as _ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is installed with polygemm
    _ml_dtypes = None

__all__ = [
    "Operand",
    "GemmProblem",
    "normalize",
    "native_dtype",
    "NotWhole",
    "SUPPORTED_DTYPES",
    "device_interface",
    "Call",
    "operand_view",
    "host_convert",
    "bfloat16",
    "dtype_named",
    "finfo",
    "check_ndim",
    "check_c_shape",
    "HALF_DTYPES",
]

#: dtypes polygemm knows at all; each backend declares the subset it computes.
SUPPORTED_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")
#: the 16-bit input dtypes: products accumulate in float32 and may be stored as float32
HALF_DTYPES: tuple[str, ...] = ("float16", "bfloat16")

_BF16_MISSING = "bfloat16 needs the ml_dtypes package (pip install ml_dtypes), whose bfloat16 is NumPy's"


def bfloat16() -> np.dtype:
    """NumPy's bfloat16 dtype (``ml_dtypes.bfloat16``); DTypeError when ml_dtypes is missing."""
    if _ml_dtypes is None:
        raise DTypeError(_BF16_MISSING)
    return np.dtype(_ml_dtypes.bfloat16)


def dtype_named(name: str) -> np.dtype:
    """The NumPy dtype of one of :data:`SUPPORTED_DTYPES` by name (``"bfloat16"`` too)."""
    return bfloat16() if name == "bfloat16" else np.dtype(name)


def finfo(dtype: Any) -> Any:
    """``numpy.finfo`` of a floating dtype, bfloat16 included (``ml_dtypes.finfo``: NumPy's
    own refuses it): ``eps``, ``tiny``, ``max`` as NumPy's."""
    d = np.dtype(dtype)
    if d.name == "bfloat16":
        if _ml_dtypes is None:  # pragma: no cover - a bfloat16 dtype exists only with ml_dtypes
            raise DTypeError(_BF16_MISSING)
        return _ml_dtypes.finfo(d)
    return np.finfo(d)

_TooHardError = getattr(getattr(np, "exceptions", np), "TooHardError")

Layout = Literal["row", "col"]
Residency = str  # "host", "cuda", "musa", or a plugin's device kind


def device_interface(obj: Any, name: str = "") -> tuple[str, dict] | None:
    """Return ``(residency, interface)`` for a device array, or None for host data.

    CUDA arrays are recognized by ``__cuda_array_interface__`` (pycuda, CuPy, PyTorch).
    Other devices' arrays expose ``__polygemm_array_interface__``: a dict with the same
    keys as the CUDA interface (``shape``, ``typestr``, ``strides``, ``data``) plus
    ``device``, the residency name (e.g. ``"musa"``). ``name`` (the argument's) leads the
    message of an interface that cannot be read.
    """
    try:
        iface = obj.__cuda_array_interface__
    except AttributeError:
        iface = getattr(obj, "__polygemm_array_interface__", None)
        return None if iface is None else (str(iface["device"]), dict(iface))
    except Exception as exc:  # e.g. a torch tensor that needs grad
        who = f"{name} ({type(obj).__name__})" if name else type(obj).__name__
        raise ArgumentError(f"{who}: could not read its __cuda_array_interface__: {exc}") from exc
    return "cuda", dict(iface)


@dataclass(frozen=True)
class Operand:
    """One matrix operand as a kernel sees it.

    ``layout`` is ``"row"`` (element (i, j) at ``ptr + (i*ld + j)*itemsize``) or
    ``"col"`` (``ptr + (i + j*ld)*itemsize``); ``ld`` is in elements. ``array`` is the
    object to hand to the backend: a NumPy array for host data (already copied when
    ``copied`` is set), the user's own object for device data.
    """

    name: str
    array: Any
    shape: tuple[int, int]
    dtype: np.dtype
    layout: Layout
    ld: int
    residency: Residency
    ptr: int
    copied: bool = False
    readonly: bool = False
    interface: dict | None = None
    #: batch dimensions as given: (size, element stride) per leading dimension (N-D operands)
    batch_dims: tuple[tuple[int, int], ...] = ()
    #: elements from one matrix of the (broadcast, flattened) batch to the next; 0: broadcast
    batch_stride: int = 0
    #: how many matrices the problem's batch has (1: a plain matrix product)
    batch_count: int = 1
    #: normalization made a broadcast batch real (a copy) because one stride could not walk it
    broadcast: bool = False
    #: that copy is still to be made or waived (``normalize(..., broadcast_copies=False)``;
    #: :meth:`GemmProblem.broadcasts_for` decides): ``array`` is the user's batch as given
    pending: bool = False

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def aligned16(self) -> bool:
        """Base pointer and leading dimension both multiples of 16 bytes."""
        return self.ptr % 16 == 0 and (self.ld * self.itemsize) % 16 == 0

    @property
    def max_offset(self) -> int:
        """Largest element offset any kernel computes for this operand, over the whole batch
        (0 when empty)."""
        r, c = self.shape
        if r == 0 or c == 0 or self.batch_count == 0:
            return 0
        last = (r - 1) * self.ld + (c - 1) if self.layout == "row" else (r - 1) + (c - 1) * self.ld
        return last + max(0, (self.batch_count - 1) * self.batch_stride)

    @property
    def min_offset(self) -> int:
        """Smallest element offset over the whole batch: 0, or below the base pointer when the
        batch stride is negative (a reversed batch, ``x[::-1]``)."""
        if self.shape[0] == 0 or self.shape[1] == 0 or self.batch_count == 0:
            return 0
        return min(0, (self.batch_count - 1) * self.batch_stride)

    @property
    def nbytes_span(self) -> int:
        """Bytes from the base pointer to one past the last element."""
        r, c = self.shape
        if r == 0 or c == 0:
            return 0
        return (self.max_offset + 1) * self.itemsize

    @property
    def extent(self) -> tuple[int, int]:
        """The bytes the operand addresses, ``[lo, hi)`` relative to its base pointer (lo is
        negative for a reversed batch); ``(0, 0)`` when empty."""
        span = self.nbytes_span
        return (self.min_offset * self.itemsize, span) if span else (0, 0)

    def describe(self) -> str:
        kind = {"row": "row-major", "col": "column-major"}[self.layout]
        extra = ", copied once (strided view or non-native byte order)" if self.copied else ""
        batch = f"{self.batch_count} x " if self.batch_count != 1 else ""
        return f"{self.name}: {batch}{self.rows}x{self.cols} {self.dtype.name} {kind} (ld={self.ld}) on {self.residency}{extra}"


@dataclass(frozen=True)
class GemmProblem:
    """A validated ``out = alpha * a @ b + beta * c``: sizes, dtypes, layouts, residency."""

    m: int
    n: int
    k: int
    dtype: np.dtype
    a: Operand
    b: Operand
    c: Operand | None
    out: Operand | None
    alpha: float
    beta: float
    residency: Residency
    notes: tuple[str, ...] = field(default=())
    #: the broadcast batch shape (NumPy matmul rules); () for one matrix product
    batch: tuple[int, ...] = ()
    #: the result's dtype when no ``out`` says it (``out_dtype=``); None: the inputs' dtype
    result_dtype: np.dtype | None = None
    #: the operands' library ("numpy", "cupy", "torch", ...): a new result is of this kind
    kind: str = "numpy"

    @property
    def out_dtype(self) -> np.dtype:
        if self.out is not None:
            return self.out.dtype
        return self.result_dtype if self.result_dtype is not None else self.dtype

    @property
    def count(self) -> int:
        """The number of matrix products (the batch's size; 1 without a batch)."""
        return math.prod(self.batch)

    @property
    def result_shape(self) -> tuple[int, ...]:
        return self.batch + (self.m, self.n)

    @property
    def empty(self) -> bool:
        """True when no product needs computing (M, N, K or the batch is zero)."""
        return self.m == 0 or self.n == 0 or self.k == 0 or self.count == 0

    @property
    def in_place(self) -> bool:
        """True when ``out`` is ``c`` itself (BLAS-style update)."""
        return self.out is not None and self.c is not None and self.out.ptr == self.c.ptr and self.c.residency == self.out.residency

    def shape_str(self) -> str:
        mnk = f"{self.m}x{self.n}x{self.k}"
        return f"{'x'.join(map(str, self.batch))} batch of {mnk}" if self.batch else mnk

    def operands(self) -> list[Operand]:
        return [op for op in (self.a, self.b, self.c, self.out) if op is not None]

    def broadcasts_for(self, backend: Any) -> "GemmProblem":
        """This problem (normalized with ``broadcast_copies=False``) for the backend chosen to
        run it: host operands whose batch one stride cannot walk are copied to the broadcast
        batch, unless the backend takes such batches as they are (``broadcasts_host_batches``:
        the cpu backend's numpy.matmul broadcasts by itself, at no copy)."""
        if not any(op.pending for op in self.operands()):
            return self
        as_given = bool(getattr(backend, "broadcasts_host_batches", False))

        def resolved(op: Operand | None) -> Operand | None:
            if op is None or not op.pending:
                return op
            return replace(op, pending=False) if as_given else _made_real(op, self.batch)

        return replace(self, a=resolved(self.a), b=resolved(self.b), c=resolved(self.c))  # type: ignore[arg-type]

    def without_data(self) -> "GemmProblem":
        """The same description with no reference to the operands' data (what a cached plan
        and ``last_plan()`` keep: provenance, not arrays)."""
        def bare(op: Operand | None) -> Operand | None:
            return None if op is None else replace(op, array=None, interface=None)

        return replace(self, a=bare(self.a), b=bare(self.b), c=bare(self.c), out=bare(self.out))  # type: ignore[arg-type]

    def with_call(self, call: "Call") -> "GemmProblem":
        """This problem bound to another call's operands (same shapes, layouts and dtypes)."""
        def bound(op: Operand | None, obj: Any, ptr: int) -> Operand | None:
            return None if op is None else replace(op, array=obj, ptr=ptr)

        return replace(self, a=bound(self.a, call.a, call.a_ptr), b=bound(self.b, call.b, call.b_ptr),  # type: ignore[arg-type]
                       c=bound(self.c, call.c, call.c_ptr), out=bound(self.out, call.out, call.out_ptr),
                       alpha=call.alpha, beta=call.beta)


def _layout_from_strides(shape: tuple[int, int], strides: tuple[int, int]) -> tuple[Layout, int] | None:
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


_DTYPE_HELP = ("float16, float32 or float64, and bfloat16 (ml_dtypes.bfloat16 for NumPy arrays) "
               "(each backend computes a subset: see `polygemm variants`)")


def _np_name(dtype: np.dtype) -> str:
    """How a user spells ``dtype`` in NumPy code (bfloat16 is ml_dtypes')."""
    return "ml_dtypes.bfloat16" if dtype.name == "bfloat16" else f"np.{dtype.name}"


def _cast_hint(name: str, given: Any, dtype: np.dtype) -> str:
    """An expression that gives the user's ``name`` (``given``: the object passed) the supported
    dtype ``dtype``, in the terms its kind has (a list has no ``astype``, a tensor has ``to``)."""
    np_name = _np_name(dtype)
    if given is None or hasattr(given, "astype"):
        return f"{name}.astype({np_name})"
    if kind_of(given) == "torch":  # a tensor has no astype
        return f"{name}.to(torch.{dtype.name})"
    if hasattr(given, "__dlpack__"):  # an array of a library polygemm reads through DLPack only
        return f"np.from_dlpack({name}).astype({np_name}) for CPU data, or its own library's conversion"
    return f"np.asarray({name}, dtype={np_name})"  # a list, tuple, memoryview ...


def promotion_hint(x: tuple[str, Any, np.dtype], y: tuple[str, Any, np.dtype]) -> str:
    """How to give two arrays of different dtypes (each ``(name, given, dtype)``) one: the narrower
    cast up to the dtype numpy.matmul computes them in (float16 with float32: float32). The hint had
    been ``b.astype(a.dtype)`` whatever the two were, which for a float16 ``a`` and a float32 ``b``
    rounded ``b`` to float16 (inf beyond 65504), unlike the product NumPy gives. Where NumPy promotes
    them to no dtype (bfloat16 with float16), both go to float32, as torch and JAX promote them, which
    holds either exactly; the cast of the second to the first's (bfloat16 past 65504 to float16's inf, or
    float16 to bfloat16's 8 bits), once the only hint, follows as the other way."""
    try:
        wide: np.dtype | None = np.result_type(x[2], y[2])
    except TypeError:  # numpy.exceptions.DTypePromotionError (bfloat16 with float16)
        wide = None
    if wide is None and x[2].name in HALF_DTYPES and y[2].name in HALF_DTYPES:
        f32 = np.dtype(np.float32)
        return (f"{_cast_hint(x[0], x[1], f32)} and {_cast_hint(y[0], y[1], f32)} (float32: what torch and JAX compute "
                f"{x[2].name} with {y[2].name} in, holding both exactly; NumPy promotes them to no dtype), or "
                f"{_cast_hint(y[0], y[1], x[2])} to compute in {x[2].name}")
    if wide is None or wide.name not in SUPPORTED_DTYPES:
        return _cast_hint(y[0], y[1], x[2])
    casts = " and ".join(_cast_hint(name, given, wide) for name, given, dt in (x, y) if dt != wide)
    return f"{casts} ({wide.name}: what numpy.matmul computes {x[2].name} with {y[2].name} in)"


def _check_dtype(name: str, dtype: np.dtype, given: Any = None) -> np.dtype:
    """``dtype`` if polygemm knows it, else DTypeError saying how to convert ``name`` (``given``:
    what the user passed, when it is not an array: a list has no ``astype``). ``out`` is told
    to be an array of the result's dtype instead: a converted copy of it would receive the
    result, and ``out`` itself would not."""
    if dtype.name not in SUPPORTED_DTYPES:
        if name == "out":
            raise DTypeError(f"out has dtype {dtype.name}; the result is written in the dtype of a and b (or float32 for "
                             f"float16 and bfloat16 inputs), one of {_DTYPE_HELP}. Pass an out of that dtype, e.g. "
                             f"np.empty(out.shape, a.dtype), or omit out (a converted copy of out would receive the result, "
                             f"not out)")
        how = _cast_hint(name, given, np.dtype(np.float32))
        if given is not None and not hasattr(given, "astype") and not hasattr(given, "__dlpack__"):  # a list, tuple, memoryview ...
            how += f" (NumPy reads this {type(given).__name__} as {dtype.name})"
        raise DTypeError(f"{name} has dtype {dtype.name}; polygemm supports {_DTYPE_HELP}. Convert it, e.g. {how}.")
    return dtype


def _host_layout(arr: np.ndarray) -> tuple[Layout, int] | None:
    """The layout of an array's matrices (its last two dimensions)."""
    if arr.size == 0:  # nothing is addressed (NumPy may give such arrays any strides)
        return "row", max(arr.shape[-1], 1)
    if not all(s % arr.itemsize == 0 for s in arr.strides[-2:]):
        return None
    return _layout_from_strides(arr.shape[-2:], (arr.strides[-2] // arr.itemsize, arr.strides[-1] // arr.itemsize))


def native_dtype(dtype: Any) -> np.dtype[Any]:
    """``dtype`` in this machine's byte order: what polygemm computes and returns for operands of
    ``dtype`` (a '>f8' operand is read through a native copy, and compared as float64)."""
    dt = np.dtype(dtype)
    return dt if dt.isnative else dt.newbyteorder("=")


_planning = threading.local()


@contextlib.contextmanager
def planning_only() -> Iterator[None]:
    """Within it (``explain``), the copies a host operand needs are described, not made: :func:`host_convert` gives
    an array of the copy's shape, dtype and order whose memory is never touched. explain of a strided 64 MB view had
    copied it on every call, and of a broadcast one too large for memory had raised MemoryError."""
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
        return np.ascontiguousarray(arr, dtype=native_dtype(arr.dtype))
    return np.ascontiguousarray(arr)


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
    # "Reshape it, e.g. a.reshape(rows, cols)" had been said of all of them: a scalar has no rows and columns to
    # reshape into, and a numpy.matmul user's vector is a row (a) or a column (b), which matmul would have taken
    also = "; polygemm.matmul takes vectors, as numpy.matmul does" if matmul_hint else ""
    if len(shape) == 1 and name in ("a", "b"):
        k, arr = shape[0], name if given is None or hasattr(given, "shape") else f"np.asarray({name})"
        how = f"a row, {arr}[None, :] (1×{k})" if name == "a" else f"a column, {arr}[:, None] ({k}×1)"
        raise ShapeError(f"{head}, a vector. Pass it as {how}{also}.")
    if not shape and name in ("a", "b"):
        raise ShapeError(f"{head}, a scalar. Scale the product by it with alpha= (the result is alpha * a @ b), or multiply "
                         f"elementwise with *.")
    raise ShapeError(f"{head}. Reshape it, e.g. {name}.reshape(rows, cols).")


def check_c_shape(c_shape: tuple[int, ...], full: tuple[int, ...], a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    """ShapeError unless ``c`` has ``full``, the result's whole shape for ``a`` and ``b`` of
    ``a_shape`` and ``b_shape``. The message names the four shapes and, for a ``c`` that only
    broadcasts to the result (``a @ b + c`` would take it), how to pass it broadcast."""
    if c_shape == full:
        return
    try:
        fits = tuple(np.broadcast_shapes(c_shape, full)) == full
    except ValueError:
        fits = False
    hint = f". It broadcasts to that shape: pass it broadcast, e.g. np.broadcast_to(c, {full})" if fits else ""
    raise ShapeError(f"c must have the result's shape {full} for a {a_shape} and b {b_shape}; got {c_shape}{hint}")


def _unwritable_strides(name: str, arr: np.ndarray) -> ArgumentError:
    """The refusal of an ``out`` no kernel writes in place: what its strides do (most often the
    last axis's: a view like ``x[..., ::2]``), and what to pass instead."""
    size = arr.itemsize
    np_name = _np_name(arr.dtype)
    if arr.ndim > 2:  # a Fortran-ordered stack interleaves its matrices: "pass a Fortran-ordered array" would not do
        what = (f"a C-ordered array, e.g. np.empty({arr.shape}, {np_name}), or one whose last two axes are a transposed "
                f"C order, e.g. np.empty(batch + (n, m)).swapaxes(-1, -2)")
    else:
        what = f"a C- or Fortran-ordered array, e.g. np.empty({arr.shape}, {np_name})"
    if _host_layout(arr) is not None:  # the matrices are fine: a batch stride is not a whole number of elements
        return ArgumentError(f"{name} has strides {arr.strides}: its batch strides (all but the last two) are not whole "
                             f"numbers of its {size}-byte elements; pass {what}, or omit {name} to get a new result")

    def step(st: int) -> str:
        if st % size:
            return f"{st} bytes, not a whole number of its {size}-byte elements"
        n = st // size
        return f"{n} element{'' if abs(n) == 1 else 's'}" + (" (reversed)" if n < 0 else "")

    why = f"the last axis steps by {step(arr.strides[-1])}, the second-to-last by {step(arr.strides[-2])}"
    if arr.ndim > 2 and arr.flags.f_contiguous:
        why += " (an N-D Fortran-ordered array interleaves its matrices)"
    return ArgumentError(
        f"{name} has strides {arr.strides}: its matrices (the last two axes) are neither row- nor column-major: {why}. "
        f"polygemm writes a matrix in place only row-major (the last axis steps by 1 element, the second-to-last by at "
        f"least a row) or column-major (the second-to-last steps by 1, the last by at least a column). Pass {what}, or "
        f"omit {name} to get a new result")


def _host_operand(name: str, obj: Any, *, writable: bool, given: Any = None) -> Operand:
    """``obj`` (``given``: what the user passed, when ``obj`` is NumPy's view of it) as an operand."""
    if obj is None:
        raise ArgumentTypeError(f"{name} must be a matrix (a 2-D NumPy array, array-like or device array); got None")
    if isinstance(obj, (str, bytes, bytearray)):
        # NumPy reads a string as a 0-D array of text: it had been "got 0-D with shape (). Reshape it, e.g.
        # a.reshape(rows, cols)", a ValueError, where numpy.matmul raises a TypeError (no loop for dtype '<U1')
        raise ArgumentTypeError(f"{name} must be a matrix (a 2-D NumPy array, array-like or device array); got "
                                f"{type(obj).__name__} {obj!r:.40}")
    if not writable and kind_of(obj) == "dask":
        # NumPy reads a dask array through its __array__, which computes the whole graph into one array in this
        # process: gemm(A, B) (and matmul, explain) on dask arrays had run every task, held A and B whole in memory
        # and returned a NumPy array where numpy.matmul returns a lazy dask array, "same kind out" broken unsaid
        args = "A, B, c, beta=..." if name == "c" else "A, B"
        raise ArgumentTypeError(f"{name} is a {type(obj).__module__.partition('.')[0]}.{type(obj).__name__}; polygemm multiplies "
                                f"arrays in memory and would compute it whole here. Call polygemm.dask.gemm({args}) for a "
                                f"lazy dask array computed block by block, or pass {name}.compute() for an in-memory result")
    if isinstance(obj, np.ma.MaskedArray):
        if writable:  # out.filled(0) would be a copy: the result would not reach the user's array
            raise ArgumentError(f"{name} is a masked array; polygemm writes no mask. Pass its data, {name}.data (written in "
                                f"place; the mask stays as it is), or omit {name} to get a new result")
        raise ArgumentError(f"{name} is a masked array; polygemm ignores no mask. Fill it first, e.g. {name}.filled(0), or pass {name}.data")
    if writable:
        if not isinstance(obj, np.ndarray):
            # a TypeError too, as numpy.matmul's "return arrays must be of ArrayType"
            hint = (f" (numpy.matmul's tuple form: pass the array itself, {name}={name}[0], or use polygemm.matmul, which takes it)"
                    if isinstance(obj, tuple) and len(obj) == 1 and hasattr(obj[0], "shape") else "")
            raise ArgumentTypeError(f"{name} must be a NumPy array (or a device array) that can receive the result; got {type(obj).__name__}{hint}")
        arr = obj
        if not arr.flags.writeable:
            raise ArgumentError(f"{name} is read-only; pass a writeable array (or omit {name} to get a new one)")
        if not arr.dtype.isnative:
            raise DTypeError(f"{name} has non-native byte order ({arr.dtype.str}); pass an array of the native {arr.dtype.name} (e.g. np.empty(shape, np.{arr.dtype.name}))")
    else:
        try:
            arr = np.asarray(obj)
        except ValueError as exc:
            # a ragged list ([[1., 2.], [3.]]) is a matter of shape, a ValueError to NumPy (numpy.matmul raises one): it had
            # been a DTypeError, a TypeError, which `except ValueError` written for numpy.matmul let through
            raise ShapeError(f"{name} could not be converted to an array: {str(exc).rstrip('.')}. Pass a matrix or a stack of matrices "
                             f"whose rows all have the same length") from exc
        except Exception as exc:
            t = type(obj)
            if t.__module__.partition(".")[0] == "jax" and "Tracer" in t.__name__:
                # inside jax.jit, vmap or grad: an abstract value, no array; its dtype is fine (a DTypeError had said so)
                raise ArgumentTypeError(f"{name} is a JAX tracer ({t.__name__}): polygemm runs on concrete arrays, not inside "
                                        f"jax.jit, vmap or grad; call it outside the transformation (or through "
                                        f"jax.pure_callback)") from exc
            raise DTypeError(f"{name} could not be converted to an array: {exc}") from exc
        if arr.dtype == object and not isinstance(obj, np.ndarray):
            raise DTypeError(f"{name} is a {type(obj).__name__} that NumPy reads as an object array; pass a numeric matrix "
                             f"of {_DTYPE_HELP}")
        # an ndarray of dtype object goes on to _check_dtype, which names its dtype, the supported ones and the cast; it had
        # been told "a is a ndarray that NumPy reads as an object array; pass a numeric matrix", naming no dtype to cast to
    check_ndim(name, arr.shape, matmul_hint=True, given=obj if given is None else given)
    _check_dtype(name, arr.dtype, obj if given is None else given)
    copied = False
    desc = _host_layout(arr)
    if desc is None or not arr.dtype.isnative or any(s % arr.itemsize for s in arr.strides):
        if writable:
            raise _unwritable_strides(name, arr)
        arr = host_convert(arr)
        copied = True
        desc = _host_layout(arr)
        assert desc is not None
    layout, ld = desc
    ptr = arr.__array_interface__["data"][0]
    bdims = tuple((int(n), int(st) // arr.itemsize) for n, st in zip(arr.shape[:-2], arr.strides[:-2]))
    return Operand(name, arr, (int(arr.shape[-2]), int(arr.shape[-1])), arr.dtype, layout, int(ld), "host", ptr, copied,
                   not arr.flags.writeable, None, bdims)


def _device_operand(name: str, obj: Any, residency: str, iface: dict, *, writable: bool, given: Any = None) -> Operand:
    shape = tuple(int(s) for s in iface.get("shape", ()))
    check_ndim(name, shape, matmul_hint=True)
    dtype = _interface_dtype(name, obj, iface)
    _check_dtype(name, dtype, obj if given is None else given)
    ptr, readonly = iface["data"]
    ptr = int(ptr or 0)
    if ptr % dtype.itemsize:
        raise ArgumentError(
            f"{name} is a {residency} array whose data pointer {ptr:#x} is not a multiple of its "
            f"element size ({dtype.itemsize} bytes); pass an array aligned to its dtype (e.g. a fresh copy)"
        )
    if writable and readonly:
        raise ArgumentError(f"{name} is a read-only {residency} array; pass a writeable one")
    strides = iface.get("strides")
    if strides is None:  # C order
        estrides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            estrides[i] = estrides[i + 1] * max(shape[i + 1], 1)
    else:
        if any(int(s) % dtype.itemsize for s in strides):
            raise UnsupportedStrides(name, residency, strides)
        estrides = [int(s) // dtype.itemsize for s in strides]
    if 0 in shape:  # nothing is addressed
        desc: tuple[Layout, int] | None = ("row", max(shape[-1], 1))
    else:
        desc = _layout_from_strides(shape[-2:], (estrides[-2], estrides[-1]))  # type: ignore[arg-type]
    if desc is None:
        raise UnsupportedStrides(name, residency, strides)
    layout, ld = desc
    bdims = tuple(zip(shape[:-2], estrides[:-2]))
    return Operand(name, obj, (shape[-2], shape[-1]), dtype, layout, int(ld), residency, ptr, False, bool(readonly), iface, bdims)


def _interface_dtype(name: str, obj: Any, iface: dict) -> np.dtype:
    """The dtype of a device array's interface. A typestr cannot say bfloat16 (NumPy writes
    ``<V2``, raw bytes): such an array's own ``dtype`` attribute (pycuda's ``GPUArray`` of
    ``ml_dtypes.bfloat16``) says it; the interfaces read from DLPack give ``"bfloat16"``."""
    typestr = iface.get("typestr")
    if typestr == "bfloat16":
        return bfloat16()
    try:
        dtype = np.dtype(typestr)
    except Exception as exc:
        raise DTypeError(f"{name} has an unreadable typestr {typestr!r}: {exc}") from exc
    if dtype.kind == "V":
        own = getattr(obj, "dtype", None)
        if isinstance(own, np.dtype) and own.name == "bfloat16" and own.itemsize == dtype.itemsize:
            return own
    return dtype


class OutBatchUnwalkable(ArgumentError):
    """``out``'s batch is not one that a single stride walks (polygemm writes ``out`` in place,
    never into a copy). Its own class so that ``matmul``, which hands ``gemm`` a view of the
    ``out`` it was given, can say it of that ``out`` rather than of the view."""


class NotWhole(ArgumentError):
    """A device input (``a``, ``b`` or ``c``) that no kernel addresses as it is: matrices neither
    row- nor column-major, or a batch one stride cannot walk. ``gemm`` has a CuPy array or a
    torch tensor made whole by its own library (broadcast to ``shape`` first, when set) and
    calls again; other device arrays get this error."""

    def __init__(self, message: str, name: str = "", shape: tuple[int, ...] | None = None) -> None:
        # name's default: unpickling calls the class with the message alone (name and shape come back from __dict__)
        super().__init__(message)
        self.name, self.shape = name, shape


def UnsupportedStrides(name: str, residency: str, strides: Any) -> ArgumentError:
    """A device array whose matrices are neither row- nor column-major (no unit step along one
    of the last two axes, or a reversed one). A device ``out`` cannot be copied for the kernel."""
    msg = (f"{name} is a {residency} array with strides {strides} (bytes) that are neither row- nor column-major "
           f"(one of its last two axes must step by one element, forward)")
    if name == "out":
        return ArgumentError(f"{msg}; pass an out that is (e.g. a new contiguous array), or omit out to get a new result")
    return NotWhole(f"{msg}; polygemm copies CuPy arrays and torch tensors so (their own library makes them contiguous), "
                    f"not other device arrays: make it contiguous first", name)


def _operand(name: str, obj: Any, *, writable: bool = False) -> Operand:
    obj = torch_resolved(name, obj, writable=writable)  # a torch lazy negation: materialized (an out with one refused)
    # torch's __cuda_array_interface__ refuses bfloat16: those tensors come through DLPack
    via_dlpack = torch_dlpack_only(obj)
    dev = None if via_dlpack else device_interface(obj, name)
    if dev is None:
        if not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
            where, data, iface = dlpack_interface(name, obj)
            # a torch tensor is writeable like its array-interface kin; other DLPack device data may not be
            torch_device = iface is not None and kind_of(obj) == "torch"
            if writable and iface is None and not data.flags.writeable and _legacy_dlpack(obj):
                # a writeable array of a producer that speaks only DLPack before 1.0 had been told it "must be ... a
                # writeable CPU DLPack array": what makes it read-only here is the old protocol, which has no read-only
                # flag, so NumPy reads every such export read-only (and an immutable array may hide behind one)
                raise ArgumentError(f"{name} ({type(obj).__name__}) offers only DLPack's pre-1.0 export (its __dlpack__ takes no "
                                    f"max_version), which cannot say that its memory may be written, so polygemm reads it "
                                    f"read-only; pass a NumPy array (or a writeable CPU DLPack array of DLPack 1.0) as {name}, "
                                    f"or omit {name} to get a new result")
            if writable and ((iface is not None and not torch_device) or (iface is None and not data.flags.writeable)):
                raise ArgumentError(f"{name} must be an array polygemm can write (NumPy, a writeable CPU DLPack array, or a "
                                    f"__cuda_array_interface__ array such as CuPy's or torch's); got a {type(obj).__name__}. "
                                    f"Omit {name} to get a new result")
            if iface is None:
                return _host_operand(name, data, writable=writable, given=obj)
            # a torch tensor stays the operand (its stream and memory are the tensor's)
            return _device_operand(name, obj if torch_device else data, where, iface, writable=writable and torch_device, given=obj)
        return _host_operand(name, obj, writable=writable)
    return _device_operand(name, obj, dev[0], dev[1], writable=writable)


def _legacy_dlpack(obj: Any) -> bool:
    """Whether ``obj.__dlpack__`` is of DLPack before 1.0: it takes no ``max_version`` (its CPU exports
    carry no read-only flag, and NumPy reads them read-only)."""
    try:
        obj.__dlpack__(max_version=(1, 0))
    except TypeError:
        return True
    except Exception:  # refused for another reason: not a question of the protocol's version
        return False
    return False


def _ml_real(value: Any) -> bool:
    """Whether ``value`` is a real scalar of ml_dtypes (bfloat16, float8_e4m3fn, int4, ...): NumPy
    counts none of them among its floating or integer scalars; each converts exactly to a float64.
    Its complex types (complex32, bcomplex32) are not real."""
    return (isinstance(value, np.generic) and type(value).__module__.partition(".")[0] == "ml_dtypes"
            and "complex" not in type(value).__name__)


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message that quotes what the user passed.

    PolygemmError's messages are kept short (one line a reason): alpha=[1.0] * 10000 had been quoted whole (a 50,000-
    character message), and a list given as beta, variant, out_dtype or device likewise. A ``__repr__``
    that raises (a hostile or half-built object) gives the type's name instead of replacing the error being raised.
    The registry quotes a plugin's objects with it too (its default 40 characters there)."""
    try:
        text = repr(value)
    except BaseException:  # a hostile __repr__ (a plugin's even calling sys.exit() must not break polygemm)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shape_attr(value: Any) -> tuple[int, ...] | None:
    """The shape another library's array declares (dask, CuPy, torch, JAX, an array-API array), or None."""
    if isinstance(value, (np.ndarray, np.generic)) or type(value).__module__ in ("builtins", "fractions", "decimal"):
        return None
    try:
        shape = getattr(value, "shape", None)
        return None if shape is None else tuple(int(n) for n in shape)
    except Exception:
        return None


def _foreign_0d(value: Any) -> bool:
    """Whether ``value`` is a 0-D array of another library than NumPy: a dask reduction, ``cupy.linalg.norm(x)``,
    ``torch.tensor(2.0)``, ``jnp.float32(2)`` (a 0-D JAX array), an array-API array."""
    return _shape_attr(value) == ()


def _foreign_size1(value: Any) -> bool:
    shape = _shape_attr(value)
    return shape is not None and math.prod(shape) == 1


def _host_0d(name: str, value: Any) -> Any:
    """A 0-D array of another library as ``alpha``/``beta`` take it: its element, when the array is CPU data read
    through DLPack (torch CPU, JAX on the CPU, array-API arrays), as a 0-D NumPy array is read; else ``value`` as it
    is, for the refusal to say how to pass it (a device or lazy array is never read behind the caller's back)."""
    if not (hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__")):
        return value
    try:
        value = torch_resolved(name, value)  # DLPack drops torch's negative bit (z.conj().imag): its value, not its negative
        if getattr(value, "requires_grad", False) and callable(getattr(value, "detach", None)):
            # its value, as float(alpha) reads it (polygemm takes no gradient through alpha); torch's DLPack export refuses
            # a tensor that requires grad, and the refusal had blamed memory "polygemm does not read ... the device"
            value = value.detach()
        if value.__dlpack_device__()[0] not in (1, 3):  # kDLCPU, kDLCUDAHost: device data is not exported at all
            return value
        kind, data, _ = dlpack_interface(name, value)
    except Exception:  # refused or unreadable: the refusal says to pass float(...)
        return value
    if kind == "host" and isinstance(data, np.ndarray) and data.ndim == 0:
        # its element, real or not: a bool or complex one is then refused as NumPy's own 0-D array is (quoting the
        # element), not told float(alpha), which would turn True into 1.0
        return data[()]
    return value


def _foreign_scalar_hint(name: str, value: Any) -> str:
    """How to pass a 0-D (or one-element) array of another library as ``alpha``/``beta``. README's "0-D arrays" had
    been refused for them with the very words "or a 0-D array of one" and no way on."""
    t = type(value)
    what = "0-D" if _foreign_0d(value) else "one-element"
    if t.__module__.partition(".")[0] == "dask":  # lazy: polygemm computes no dask array (its operands neither)
        get = f"{name}.compute()" if what == "0-D" else f"{name}.compute().item()"
        return f"; {name} is a {what} dask array (lazy), which polygemm does not compute: pass {get}"
    kind = f"{t.__module__.partition('.')[0]}.{t.__name__}"
    if what == "one-element":
        return f"; a one-element {kind} is no scalar: pass {name}.item()"
    return (f"; {name} is a 0-D {kind} whose value polygemm does not read (not CPU memory it can read through DLPack): "
            f"pass float({name}), which its own library reads (waiting for the device)")


def _real_element(x: Any) -> bool:
    """Whether ``x``, an element read from an array, is a real number ``alpha`` and ``beta`` take."""
    return _ml_real(x) or (isinstance(x, (np.floating, np.integer)) and not isinstance(x, np.timedelta64))


def _scalar(name: str, value: Any) -> float:
    """``alpha`` or ``beta`` as a finite float64: an int, a float, a ``Fraction``, a NumPy integer or
    floating scalar, a real ml_dtypes scalar (bfloat16, float8_*, int4 ...: each is exactly a
    float64) or a 0-D array of one; ArgumentError naming ``name`` otherwise (bools, and
    ``numpy.timedelta64``, which NumPy counts among its integers, are no factor)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-D array is its value to NumPy
        value = value[()]
    elif not isinstance(value, (numbers.Real, np.generic, np.ndarray)) and (_foreign_0d(value) or hasattr(value, "__dlpack__")):
        value = _host_0d(name, value)  # another library's 0-D array: its element when it is CPU data
    if isinstance(value, (bool, np.bool_, np.timedelta64)) or not (_ml_real(value) or isinstance(value, (numbers.Real, np.floating, np.integer))):
        how = f"; convert it, e.g. float({name})" if isinstance(value, decimal.Decimal) else ""
        if isinstance(value, np.ndarray) and value.size == 1 and _real_element(value.reshape(-1)[0]):
            # a one-element array (x.sum(keepdims=True), a norm over an axis) had been refused with no way on
            how = f"; a one-element array of {value.ndim} dimension{'s' if value.ndim > 1 else ''} is no scalar: pass {name}.item()"
        elif _foreign_0d(value) or _foreign_size1(value):
            how = _foreign_scalar_hint(name, value)
        # a TypeError too (a string, a complex, a Decimal is no value of the wrong size but of the wrong kind: NumPy's
        # arithmetic raises TypeError for each); nan, inf and a float64 overflow below stay ValueErrors
        raise ArgumentTypeError(f"{name} must be a real number (an int, a float, a Fraction or a NumPy real scalar, "
                            f"ml_dtypes' real scalars too, or a 0-D array of one); got {short_repr(value)} ({type(value).__name__}){how}")
    try:
        v = float(value)
    except OverflowError:
        raise ArgumentError(f"{name} is too large for a float64 ({str(value)[:20]}...); pass a finite real number") from None
    if not math.isfinite(v):
        if isinstance(value, np.floating) and np.isfinite(value):  # a longdouble beyond float64's range
            raise ArgumentError(f"{name} is too large for a float64 ({value!r}); pass a finite real number within float64's range")
        raise ArgumentError(f"{name} must be finite; got {value!r}")
    return v


def _overlaps(x: Operand, y: Operand) -> bool:
    if x.residency != y.residency:
        return False
    if x.residency == "host":
        try:
            return bool(np.shares_memory(x.array, y.array, max_work=1000))
        except _TooHardError:
            return True  # cannot prove them apart cheaply: treated as overlapping (the error says what to do)
    (lo1, hi1), (lo2, hi2) = x.extent, y.extent
    return x.ptr + lo1 < y.ptr + hi2 and y.ptr + lo2 < x.ptr + hi1 and hi1 > lo1 and hi2 > lo2


def parse_dtype(name: str, value: Any) -> np.dtype:
    """``value`` as a NumPy dtype: anything ``numpy.dtype`` takes, or another library's dtype
    object (``torch.float32``) by its name; DTypeError naming ``name`` otherwise."""
    try:
        dt = np.dtype(value)
    except TypeError:  # another library's dtype object, e.g. torch.float32, or "bfloat16" without ml_dtypes
        tail = str(value).rsplit(".", 1)[-1]
        if tail not in SUPPORTED_DTYPES:
            raise DTypeError(f"{name}={short_repr(value)} is not a dtype polygemm writes; pass float32 (or float16, bfloat16, float64)") from None
        return dtype_named(tail)
    if dt.kind in "OSUMm" or (dt.kind == "V" and dt.type.__module__.partition(".")[0] != "ml_dtypes"):  # ml_dtypes' are V too
        # a list, a structured or a text dtype had been taken as "void" and the result told to cast to it
        raise DTypeError(f"{name}={short_repr(value)} is no numeric dtype (NumPy reads it as {dt.name}); pass float32 (or "
                         f"float16, bfloat16, float64)")
    if not dt.isnative:
        raise DTypeError(f"{name}={value!r} is {dt.name} in non-native byte order; results are written in this machine's "
                         f"byte order: pass {dt.name!r}")
    return dt


def check_result_dtype(inputs: np.dtype, result: np.dtype, given_by: str) -> None:
    """The result has the inputs' dtype, or float32 for float16 and bfloat16 inputs (their
    accumulation type); DTypeError naming what gave ``result`` (``out`` or ``out_dtype``) otherwise."""
    half = inputs.name in HALF_DTYPES
    if result != inputs and not (half and result == np.float32):
        # what to do, as a numpy.matmul user needs telling: numpy casts its result into an out of any
        # same-kind dtype (float32 inputs into a float64 out), polygemm writes out in the result's dtype
        # only (out is never a copy); the refusal had named the dtype and left the way there to guess
        if given_by == "out":
            how = (f"pass an out of {inputs.name}{' or float32' if half else ''}, or omit out and cast the result "
                   f"into yours (out[...] = result)")
        elif result.name in SUPPORTED_DTYPES:
            how = f"omit {given_by}, or cast a and b to {result.name} to compute in it"
        else:  # no dtype polygemm computes: casting a and b to it (int64, complex64) had been the advice
            how = (f"omit {given_by} ({result.name} is no dtype polygemm computes: {', '.join(SUPPORTED_DTYPES)}), and "
                   f"cast the result if you need it so (result.astype({result.name!r}))")
        raise DTypeError(
            f"the result dtype must be {inputs.name}"
            + (f" (or float32: {inputs.name} products accumulate in float32 and may be stored so)" if half else "")
            + f"; got {given_by} {result.name}: {how}"
        )


def _self_overlapping(op: Operand) -> bool:
    """Whether two elements of ``op`` (all its matrices) may share memory: its dimensions of more than one element,
    sorted by stride, must each step past everything the smaller ones reach (the usual sufficient test; an out that
    fails it is refused, one that passes it has each element to itself)."""
    dims = [(op.rows, op.ld if op.layout == "row" else 1), (op.cols, 1 if op.layout == "row" else op.ld)]
    dims += [(int(n), int(st)) for n, st in op.batch_dims if st != 0]  # one matrix for several: refused as such below
    reach = 0
    for n, st in sorted(((n, abs(st)) for n, st in dims if n > 1), key=lambda d: d[1]):
        if st <= reach:
            return True
        reach += st * (n - 1)
    return False


def _made_real(op: Operand, batch: tuple[int, ...]) -> Operand:
    """A host operand broadcast to ``batch`` in a copy (one stride walks it)."""
    arr = host_convert(op.array, batch)
    op = replace(op, array=arr, ptr=arr.__array_interface__["data"][0], copied=True, broadcast=True, pending=False,
                 batch_dims=tuple((int(x), int(st) // arr.itemsize) for x, st in zip(arr.shape[:-2], arr.strides[:-2])))
    stride = _batch_stride(op, batch)
    assert stride is not None
    return replace(op, batch_stride=stride, batch_count=math.prod(batch))


def _batch_stride(op: Operand, batch: tuple[int, ...]) -> int | None:
    """One element stride that walks ``op``'s matrices in the order of the flattened
    ``batch`` (0: one matrix for all), or None when its batch strides need more than one."""
    dims = [(1, 0)] * (len(batch) - len(op.batch_dims)) + list(op.batch_dims)
    eff = [0 if n == 1 else st for (n, st) in dims]  # broadcast dimensions do not move
    stride: int | None = None
    period = 1  # matrices per step of dimension j in the flattened batch
    for j in range(len(batch) - 1, -1, -1):
        if batch[j] != 1:
            if stride is None:
                if eff[j] % period:
                    return None
                stride = eff[j] // period
            elif eff[j] != stride * period:
                return None
        period *= batch[j]
    return stride or 0


def normalize(a: Any, b: Any, c: Any = None, *, alpha: Any = 1.0, beta: Any = 0.0, out: Any = None, out_dtype: Any = None,
              broadcast_copies: bool = True) -> GemmProblem:
    """Validate ``gemm``'s arguments and describe them as a :class:`GemmProblem`.

    ``broadcast_copies=False`` marks host operands whose batch one stride cannot walk
    (``broadcast``) without copying them yet: :meth:`GemmProblem.broadcasts_for` does, once the
    backend is known (the cpu backend needs no copy).

    ``a`` and ``b`` are matrices or stacks of matrices whose leading (batch) dimensions
    broadcast as in ``numpy.matmul``; ``c`` and ``out`` have the result's full shape.
    Raises ShapeError, DTypeError or ArgumentError (all ValueError/TypeError subclasses)
    with a message naming the argument, what was given and what would be accepted.
    """
    alpha_f = _scalar("alpha", alpha)
    beta_f = _scalar("beta", beta)
    A = _operand("a", a)
    B = _operand("b", b)
    if A.cols != B.rows:
        raise ShapeError(
            f"inner dimensions differ: a's matrices are {A.shape} and b's {B.shape}; "
            f"a.shape[-1] (K={A.cols}) must equal b.shape[-2] ({B.rows})"
        )
    if A.dtype != B.dtype:
        if hasattr(b, "astype") and not hasattr(a, "astype"):  # a list beside an array: the array's dtype is the one meant
            how = _cast_hint("a", a, B.dtype)
        elif not (hasattr(b, "astype") or hasattr(b, "__dlpack__") or kind_of(b) == "torch"):  # b a list, a tuple ...
            how = _cast_hint("b", b, A.dtype)
        else:  # two arrays (tensors cast with to): to the dtype numpy.matmul computes them in
            how = promotion_hint(("a", a, A.dtype), ("b", b, B.dtype))
        raise DTypeError(f"a and b must share one dtype; got a {A.dtype.name} and b {B.dtype.name}. Cast to one dtype, e.g. {how}.")
    try:
        batch = tuple(int(x) for x in np.broadcast_shapes(tuple(n for n, _ in A.batch_dims), tuple(n for n, _ in B.batch_dims)))
    except ValueError:
        # both shapes in full, as numpy.matmul names them (the batch dimensions alone left the user to find the arrays)
        raise ShapeError(f"the batch dimensions of a {tuple(n for n, _ in A.batch_dims)} and b {tuple(n for n, _ in B.batch_dims)} "
                         f"do not broadcast (numpy.matmul rules): a is {tuple(n for n, _ in A.batch_dims) + A.shape}, b is "
                         f"{tuple(n for n, _ in B.batch_dims) + B.shape}; their leading dimensions must be equal or 1") from None
    m, k, n = A.rows, A.cols, B.cols
    full = batch + (m, n)
    wanted = None if out_dtype is None else parse_dtype("out_dtype", out_dtype)
    O = None
    if out is not None:
        O = _operand("out", out, writable=True)
        if O.shape != (m, n) or tuple(x for x, _ in O.batch_dims) != batch:
            raise ShapeError(f"out must have the result's shape {full}; got {tuple(x for x, _ in O.batch_dims) + O.shape}")
        if wanted is not None and O.dtype != wanted:
            raise DTypeError(f"out is {O.dtype.name} but out_dtype={wanted.name}; pass one of them, or both the same")
        if _self_overlapping(O):
            # an as_strided out whose matrices (or rows) share elements: each write raced the others and the result
            # was whatever came last (608 of 960 elements wrong on the GPU); torch refuses such an out as well
            raise ArgumentError(f"out's elements overlap in memory (shape {full}, element strides "
                                f"{tuple(st for _, st in O.batch_dims) + ((O.ld, 1) if O.layout == 'row' else (1, O.ld))}): "
                                f"each element of the result needs its own place; pass a C-ordered array, e.g. "
                                f"np.empty({full}, {_np_name(O.dtype)}), or omit out to get a new result")
    result = O.dtype if O is not None else (wanted if wanted is not None else A.dtype)
    check_result_dtype(A.dtype, result, "out" if O is not None else "out_dtype")
    C = None
    if c is not None:
        # a 1-D c (a bias, as a @ b + bias broadcasts it) or a scalar: told how to pass it broadcast, before the
        # operand check's "at least 2-D ... reshape it", which cannot work for it
        c_shape = getattr(c, "shape", None)
        if c_shape is None and isinstance(c, (int, float, list, tuple)):
            try:
                c_shape = np.shape(c)
            except ValueError:  # a ragged list: _operand names c in its ShapeError (NumPy's bare ValueError had escaped)
                c_shape = None
        if c_shape is not None and len(c_shape) < 2:
            check_c_shape(tuple(c_shape), full, tuple(x for x, _ in A.batch_dims) + A.shape, tuple(x for x, _ in B.batch_dims) + B.shape)
        C = _operand("c", c)
        check_c_shape(tuple(x for x, _ in C.batch_dims) + C.shape, full, tuple(x for x, _ in A.batch_dims) + A.shape,
                      tuple(x for x, _ in B.batch_dims) + B.shape)
        if C.dtype != result:
            wider = (f", or ask for a {C.dtype.name} result with out_dtype=np.{C.dtype.name}"
                     if O is None and wanted is None and A.dtype.name in HALF_DTYPES and C.dtype == np.float32 else "")
            raise DTypeError(f"c must have the dtype of the result ({result.name}); got {C.dtype.name}. Cast it, e.g. "
                             f"{_cast_hint('c', c, result)}{wider}")
    elif beta_f != 0.0:
        # out= with beta is cuBLAS's C (cupy.cublas.gemm(..., out=c, beta=1) adds into out): polygemm reads only c, and
        # the refusal had said "pass c" to a user who had passed the array as out; say that c may be out itself
        into = (f"; to add into out's values as cuBLAS's C does, pass out as c too: gemm(a, b, out, beta={short_repr(beta)}, out=out)"
                if O is not None else "")
        raise ArgumentError(f"beta={short_repr(beta)} needs c: pass c (shape {full}) or set beta=0{into}")
    count = math.prod(batch)
    ops: list[Operand | None] = []
    for op in (A, B, C, O):
        if op is None:
            ops.append(None)
            continue
        stride = _batch_stride(op, batch)
        if op.rows * op.cols == 0 or count == 0:  # nothing of it is addressed (NumPy gives such arrays any strides)
            stride = stride or 0
        elif stride is None or (op.name in ("out", "c") and stride == 0 and count > 1):
            if op.name == "out":
                # it had said "pass a contiguous array (e.g. ascontiguousarray)": a copy of out, which would receive
                # the result while out did not; say what out is and what to pass instead (as for its matrices' strides)
                arr = op.array
                shape, strides = (tuple(arr.shape), tuple(arr.strides)) if isinstance(arr, np.ndarray) else \
                    (tuple(x for x, _ in op.batch_dims) + op.shape, tuple(s for _, s in op.batch_dims))
                raise OutBatchUnwalkable(f"out has shape {shape} and strides {strides}: its batch (all but the last two axes) is "
                                    f"not one that a single stride walks (e.g. batch axes swapped, an outer batch axis reversed or stepped, one matrix for several); "
                                    f"polygemm writes out in place, never into a copy. Pass a C-ordered array, e.g. "
                                    f"np.empty({full}, {_np_name(op.dtype)}), or omit out to get a new result")
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
                ops.append(_made_real(op, batch))  # the broadcast made real: one stride walks it
            else:  # marked; the copy (or none) is the backend's to decide
                ops.append(replace(op, pending=True, batch_stride=op.rows * op.cols, batch_count=count))
            continue
        ops.append(replace(op, batch_stride=stride, batch_count=count) if batch else op)
    A, B, C, O = ops  # type: ignore[assignment]
    assert A is not None and B is not None
    if O is not None:
        for other in (A, B):
            if _overlaps(O, other):
                raise ArgumentError(f"out overlaps {other.name}; pass a separate array for out (it may be c itself, not a or b)")
        if C is not None and _overlaps(O, C) and not (O.ptr == C.ptr and O.layout == C.layout and O.ld == C.ld and O.batch_stride == C.batch_stride):
            raise ArgumentError("out partly overlaps c; pass c itself as out (in-place update) or a separate array")
    residencies = {op.residency for op in (A, B, C, O) if op is not None}
    if len(residencies) > 1:
        where = ", ".join(f"{op.name} on {op.residency}" for op in (A, B, C, O) if op is not None)
        raise ArgumentError(f"operands live in different places ({where}); move them to one device (or all to host NumPy arrays)")
    residency = residencies.pop()
    kind = common_kind([("a", a), ("b", b), ("c", c), ("out", out)])
    notes = tuple(f"{op.name} was copied once into C order (strides neither row- nor column-major, or non-native byte order)" for op in (A, B, C) if op is not None and op.copied)
    return GemmProblem(m, n, k, A.dtype, A, B, C, O, alpha_f, beta_f, residency, notes, batch, result if O is None else None, kind)


class Call:
    """One call's operands, bound to a plan: what ``Backend.execute`` reads per call.

    ``a``, ``b``, ``c``, ``out`` are the objects to compute with (host operands after any
    copy the plan recorded; device operands as the user gave them), ``*_ptr`` their device
    addresses (0 for host data and absent operands), ``stream`` the CUDA stream the operands
    named through ``__cuda_array_interface__`` (None when none did).
    """

    __slots__ = ("a", "b", "c", "out", "a_ptr", "b_ptr", "c_ptr", "out_ptr", "alpha", "beta", "stream", "alloc", "matched")

    def __init__(self, a: Any, b: Any, c: Any, out: Any, a_ptr: int, b_ptr: int, c_ptr: int, out_ptr: int,
                 alpha: float, beta: float, stream: int | None, alloc: Any = None, matched: bool = False) -> None:
        self.a, self.b, self.c, self.out = a, b, c, out
        self.a_ptr, self.b_ptr, self.c_ptr, self.out_ptr = a_ptr, b_ptr, c_ptr, out_ptr
        self.alpha, self.beta, self.stream = alpha, beta, stream
        #: ``alloc(shape, dtype)`` for a new device result of the operands' library (None: the backend's own)
        self.alloc = alloc
        #: the operands are known to be those of the plan they run under (the core's calls: the
        #: plan cache's key fixes them); False: ``Backend.execute`` checks them first
        self.matched = matched

    @classmethod
    def from_problem(cls, p: GemmProblem) -> "Call":
        """The call ``p``'s operands make. Raises ArgumentError for a problem that holds no data
        (that of a plan from ``polygemm.explain`` or ``last_plan``, which describe a call only)."""
        missing = [op.name for op in p.operands() if op.array is None]
        if missing:
            raise ArgumentError(
                f"this plan holds no operands ({', '.join(missing)} absent): plans from polygemm.explain() and last_plan() "
                f"describe a call without its data, so they cannot be run; call polygemm.gemm(a, b, ...), which reuses the plan")

        def obj(op: Operand | None) -> Any:
            return None if op is None else op.array

        def ptr(op: Operand | None) -> int:
            return 0 if op is None or op.residency == "host" else op.ptr

        streams = [op.interface.get("stream") if op.interface.get("stream") is not None else torch_stream(op.array)
                   for op in p.operands() if op.interface is not None]
        return cls(obj(p.a), obj(p.b), obj(p.c), obj(p.out), ptr(p.a), ptr(p.b), ptr(p.c), ptr(p.out), p.alpha, p.beta,
                   common_stream(streams), matched=True)


def common_stream(streams: list[Any]) -> int | None:
    """The stream a call runs on from the operands' ``stream`` entries: None when none named
    one, the one they all named, else -1 (several: the backend synchronizes before running)."""
    named = {int(s) for s in streams if s is not None}
    if not named:
        return None
    return named.pop() if len(named) == 1 else -1


def operand_view(obj: Any) -> tuple[tuple, int, Any] | None:
    """What a repeated call needs of one operand, read cheaply: ``(key, device pointer, stream)``.

    ``key`` holds everything a plan depends on (kind, shape, strides, dtype, read-only flag and,
    for device data, the pointer's 16-byte alignment class). None for objects that take the
    full normalization every time (anything but a NumPy array or a device array).
    """
    if type(obj) is np.ndarray:
        return ("host", obj.shape, obj.strides, obj.dtype, obj.flags.writeable), 0, None
    if obj is None:
        return (), 0, None
    tv = cupy_view(obj)
    if tv is None:
        tv = torch_view(obj)
    if tv is not None:
        return tv
    if torch_negated(obj):  # a lazy negation (a subclass's too: torch_view passed it over) is resolved every call
        return None
    try:
        iface = obj.__cuda_array_interface__
        where = "cuda"
    except AttributeError:
        iface = getattr(obj, "__polygemm_array_interface__", None)
        if iface is None:
            return None
        where = iface.get("device")
    except Exception:  # e.g. a torch tensor that needs grad: the full normalization says so
        return None
    try:
        ptr, readonly = iface["data"]
        ptr = int(ptr or 0)
        strides = iface.get("strides")
        key = (where, tuple(iface["shape"]), None if strides is None else tuple(strides), iface["typestr"], bool(readonly), ptr % 16)
    except (KeyError, TypeError):
        return None
    stream = iface.get("stream")
    return key + (type(obj), device_index(obj)), ptr, stream if stream is not None else torch_stream(obj)
