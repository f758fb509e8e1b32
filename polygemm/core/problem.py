"""A validated problem (:class:`GemmProblem`) and one call's operands bound to its plan (:class:`Call`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import ArgumentError
from ..interop.torch import torch_stream
from .operand import Operand, Residency, made_real
from .scalars import fits_float32

__all__ = ["GemmProblem", "Call", "common_stream", "new_result_layout"]


def new_result_layout(m: int, n: int, batched: bool) -> str:
    """The layout a new result is planned in: an M×1 one (both at once) column-major, as NumPy classifies a given one,
    so a kernel for a small M serves a small N through the operand swap; a new batch is C-ordered over its matrices."""
    return "col" if n == 1 and m > 1 and not batched else "row"


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
    #: the precision asked of float32 and complex64 products (:mod:`~polygemm.core.precision`): a plan decision
    precision: str = "highest"
    # Derived once, here, from the fields above: the plan cache's key, every backend's rules and the
    # planners read these rather than each working them out again.
    #: ``out`` is ``c`` itself (BLAS-style update)
    in_place: bool = field(init=False, compare=False)
    #: alpha and beta both survive as float32 kernel scalars (:func:`~polygemm.core.scalars.fits_float32`)
    scalars_fit_float32: bool = field(init=False, compare=False)
    #: the result's memory order: ``out``'s, else :func:`new_result_layout`'s (a new result is C-ordered, as its
    #: library makes it; a new M×1 one is both, and planned column-major)
    result_layout: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        out, c = self.out, self.c
        put = object.__setattr__
        put(self, "in_place", out is not None and c is not None and out.ptr == c.ptr and c.residency == out.residency)
        put(self, "scalars_fit_float32", fits_float32(self.alpha) and fits_float32(self.beta))
        put(self, "result_layout", out.layout if out is not None else new_result_layout(self.m, self.n, bool(self.batch)))

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
            return replace(op, pending=False) if as_given else made_real(op, self.batch)

        return replace(self, a=resolved(self.a), b=resolved(self.b), c=resolved(self.c))  # type: ignore[arg-type]

    def described(self) -> tuple[Any, ...]:
        """What this problem is, apart from where its operands lie: its sizes, dtypes, scalars, batch, layouts, strides
        and the operands' 16-byte alignment (which a plan's vector loads and tensor maps depend on); two calls of one
        shape on other arrays alike aligned describe the same problem (:class:`~polygemm.backend.Plan` compares by
        it)."""
        def op(o: Operand | None) -> tuple[Any, ...] | None:
            return None if o is None else (o.name, o.shape, o.dtype, o.layout, o.ld, o.residency, o.batch_dims,
                                           o.batch_stride, o.batch_count, o.copied, o.conj, o.ptr % 16)
        return (self.m, self.n, self.k, self.dtype, self.alpha, self.beta, self.residency, self.batch, self.result_dtype,
                self.kind, self.precision, self.in_place, op(self.a), op(self.b), op(self.c), op(self.out))

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
