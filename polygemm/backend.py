"""The Backend contract: what every backend (built-in or plugin) provides.

A backend is a class with a ``name``, a ``priority``, a ``probe()`` that says whether it
can run here (and why not), a static variant table (``variants()``, no device needed),
``capabilities()`` for the live device, ``plan()`` that decides what will run without
running it, and ``run()`` that computes. Device helpers (``to_device``, ``to_host``,
``synchronize``, ``timer``) serve benchmarks and the conformance suite.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, ContextManager, Sequence

import numpy as np

from .errors import ArgumentError, DTypeError, PolygemmError, UnsupportedProblemError, did_you_mean
from .core.hints import unsupported_dtype
from .core.layout import host_layout
from .core.precision import PRECISIONS, governed, looser_or_equal, precision_refusal
from .core.problem import Call, GemmProblem
from .core.read import read_operand
from .core.scalars import FLOAT32_MAX, fits_float32
from .core.text import short_repr

__all__ = ["Availability", "Variant", "Capabilities", "Plan", "Backend", "store_result", "check_call", "fits_float32", "FLOAT32_MAX",
           "variant_hint"]

def variant_hint(name: str, known: Sequence[str]) -> str:
    """`` (did you mean 'blas'?)`` for a variant name that is not one of ``known`` (nor ``"auto"``)
    but is close to one: the same up to case and surrounding spaces (device names ignore them,
    variant names do not: ``variant="AUTO"``, ``"BLAS"``), else a near spelling; "" otherwise."""
    choices = list(known) + ["auto"]
    folded = [k for k in choices if k.lower() == name.strip().lower() and k != name]
    return f" (did you mean {folded[0]!r}?)" if folded else did_you_mean([name], choices, cutoff=0.85)


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run on this machine; ``reason`` says why not."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Variant:
    """One selectable kernel of a backend, described statically (no device needed).

    ``auto`` says whether ``variant="auto"`` may pick it (vendor-library comparators never
    are); ``vendor`` marks those comparators. ``requirements`` is a human-readable summary
    of what the kernel needs (multiples, alignment) and what the backend does otherwise.
    """

    name: str
    dtypes: tuple[str, ...]
    description: str
    layout: str = "any"
    tile: str = ""
    requirements: str = "none"
    auto: bool = True
    vendor: bool = False
    #: output dtypes other than the input's this variant can write (e.g. float32 for float16 inputs)
    out_dtypes: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict, compare=False, repr=False)
    #: the precision class of its float32 (and complex64) products (:mod:`polygemm.core.precision`): "highest" for
    #: SGEMM-level error, "high" for the 3-pass class, "medium" for one pass
    precision: str = "highest"


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers on the device it found."""

    backend: str
    device_name: str
    dtypes: tuple[str, ...]
    residencies: tuple[str, ...]
    variants: tuple[Variant, ...]
    notes: tuple[str, ...] = ()


@dataclass(eq=False)
class Plan:
    """What will run for one problem, and why. ``str(plan)`` is a readable summary.

    Two plans are equal when they run the same: the same problem (:meth:`GemmProblem.described`: sizes, dtypes,
    scalars, layouts, not the operands' addresses) by the same backend, variant and launch; where a plan came from
    (``cached``, ``uncached``) and the backend's private objects are no part of it."""

    backend: str
    variant: str
    reason: str
    problem: GemmProblem = field(repr=False)
    device: str = ""
    layouts: dict[str, str] = field(default_factory=dict)
    copies: list[str] = field(default_factory=list)
    padding: str | None = None
    launch: dict[str, Any] = field(default_factory=dict)
    candidates: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: backend-private decisions consumed by ``run``/``execute`` (a backend's own typed object,
    #: e.g. the cuda backend's prepared launch); plugins may keep a dict here
    private: Any = field(default_factory=dict, repr=False)
    #: True when this plan came from the core's plan cache (set on what ``explain`` returns)
    cached: bool = False
    #: why a plan made for a call is not kept for the next one ("" when it is): an operand the cache does not key
    #: (a list, an ndarray subclass, another library's CPU array), or the cache turned off
    uncached: str = ""
    #: the precision used and the error bound that holds (set by the core from the variant's precision)
    precision: str = ""
    #: the precision class the variant computes float32 in ("highest", "high", "medium"; set by the core, "" before):
    #: what ``verify=``'s threshold allows for, which may be tighter than the one the call asked
    computed_precision: str = ""

    @property
    def precision_met(self) -> str:
        """The precision class whose error bound the product meets: the variant's own (which may be tighter than the
        call asked), or the one asked where the core has set none; ``verify=``'s threshold allows for it."""
        return self.computed_precision or self.problem.precision

    def _compared(self) -> tuple[Any, ...]:
        return (self.backend, self.variant, self.reason, self.problem.described(), self.device, self.layouts, self.copies,
                self.padding, self.launch, self.candidates, self.notes, self.precision)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]  # mutable: as a dataclass with eq

    def bind(self, call: Call) -> "Plan":
        """A copy of this plan whose problem carries ``call``'s operands, alpha and beta."""
        import copy

        bound = copy.copy(self)
        bound.problem = self.problem.with_call(call)
        return bound

    def __str__(self) -> str:
        p = self.problem
        lines = [
            f"polygemm plan: {p.shape_str()} (MxNxK) {p.dtype.name} -> {p.out_dtype.name}, alpha={p.alpha:g}, beta={p.beta:g}",
            f"  backend : {self.backend}" + (f" on {self.device}" if self.device else ""),
            f"  variant : {self.variant}",
            f"  why     : {self.reason}",
        ]
        if self.precision:
            lines.append(f"  precision: {self.precision}")
        if self.layouts:
            lines.append("  layouts : " + ", ".join(f"{k}={v}" for k, v in self.layouts.items()))
        if p.in_place:
            lines.append("  in place: out is c (" + ("read, then overwritten with the result)" if p.beta != 0
                                                      else "overwritten with the result; beta = 0, so never read)"))
        lines.append("  copies  : " + ("; ".join(self.copies) if self.copies else "none"))
        lines.append(f"  padding : {self.padding or 'none'}")
        # "cached for the next" only where it is: a call the cache never keys (a memmap, a list, a cache turned off)
        # plans again each time, and a user timing it is told why
        lines.append("  cache   : " + ("this plan was reused from the plan cache" if self.cached
                                       else f"planned for this call, not cached: {self.uncached}" if self.uncached
                                       else "planned for this call (cached for the next)"))
        if self.launch:
            lines.append("  launch  : " + ", ".join(f"{k}={v}" for k, v in self.launch.items()))
        for name, why in self.candidates:
            lines.append(f"  passed over {name}: {why}")
        for note in self.notes:
            lines.append(f"  note    : {note}")
        return "\n".join(lines)


def store_result(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """The tail of every host computation: the result itself, C-ordered as numpy.matmul's is, or copied into ``out``
    and ``out``. A kernel that stores a column-major result (operands swapped for column-major inputs) hands back a
    C-ordered copy: ``memoryview(r).cast`` and torch's ``.view(-1)`` on the tensor made of it need one."""
    if out is None:
        return np.ascontiguousarray(result)
    np.copyto(out, result)
    return out


def check_call(plan: Plan, call: Call) -> None:
    """ArgumentError unless ``call``'s operands are those ``plan`` was made for: the same operands
    present, each of the plan's shape, dtype, memory layout and batch strides (device arrays:
    also where they live, their 16-byte alignment class and the pointer the call passes), and
    alpha and beta of the plan's kind (1 or not, 0 or not: plans may decide on them). Cheap (attributes,
    no data); the core's own calls skip it (``call.matched``: its cache key fixes all of these)."""
    p = plan.problem
    for name, op, x in (("a", p.a, call.a), ("b", p.b, call.b), ("c", p.c, call.c), ("out", p.out, call.out)):
        if op is None or x is None:
            if op is not None or x is not None:
                has = "has" if op is not None else "has no"
                raise ArgumentError(f"this call {'lacks' if op is not None else 'passes'} {name}, but its plan {has} {name}; "
                                    f"make the plan for these operands (or call polygemm.gemm, which plans and caches)")
            continue
        want = tuple(n for n, _ in op.batch_dims) + op.shape
        shape = getattr(x, "shape", None)
        why = ""
        if shape is not None and tuple(shape) != want:
            why = f"has shape {tuple(shape)}"
        elif isinstance(x, np.ndarray):
            if x.dtype != op.dtype:
                why = f"is {x.dtype.name}{'' if x.dtype.isnative else ' (non-native byte order)'}"
            elif host_layout(x) != (op.layout, op.ld):
                why = f"has strides {x.strides}"
            elif tuple((int(n), int(st) // x.itemsize) for n, st in zip(x.shape[:-2], x.strides[:-2])) != op.batch_dims:
                why = f"has batch strides {x.strides[:-2]}"
        else:  # a device (or DLPack) array: described as the plan's operand was, then compared
            why = _device_mismatch(name, op, x, getattr(call, f"{name}_ptr", 0))
        if why:
            plan_is = f"{want} {op.dtype.name} {op.layout}-major (ld={op.ld})"
            raise ArgumentError(f"{op.name} {why}, but the plan was made for {plan_is}; make the plan for these operands "
                                f"(or call polygemm.gemm, which plans and caches)")
    for name, now, then, pivot in (("alpha", call.alpha, p.alpha, 1.0), ("beta", call.beta, p.beta, 0.0)):
        if (now == pivot) != (then == pivot):
            raise ArgumentError(f"{name}={now:g} but the plan was made for {name}={then:g} ({name} {pivot:g} or not is "
                                f"decided at plan time); make the plan for this call")


def _device_mismatch(name: str, op: Any, x: Any, ptr: int) -> str:
    """How device operand ``x`` differs from the plan's ``op`` ("" if it does not): dtype,
    memory order, leading dimension, batch strides, where it lives, the pointer's 16-byte
    alignment (plans pick aligned builds by it), and the pointer the call passes for it."""
    try:
        got = read_operand(name, x, writable=name == "out")
    except PolygemmError as exc:
        return f"cannot be read as the plan's operand ({exc})"
    if got.dtype != op.dtype:
        return f"is {got.dtype.name}"
    if got.conj != op.conj:
        return "has the conjugate bit set" if got.conj else "lacks the conjugate bit"
    if (got.layout, got.ld) != (op.layout, op.ld):
        return f"is {got.layout}-major with ld={got.ld}"
    if got.batch_dims != op.batch_dims:
        return f"has batch strides {tuple(st for _, st in got.batch_dims)} (elements)"
    if got.residency != op.residency:
        return f"lives on {got.residency}"
    if got.residency == "host":  # a CPU DLPack array: read through NumPy, wherever it lies
        return ""
    if (got.ptr % 16 == 0) != (op.ptr % 16 == 0):
        return "is not 16-byte aligned as the plan's was" if got.ptr % 16 else "is 16-byte aligned where the plan's was not"
    if got.ptr and ptr and ptr != got.ptr:
        return f"is at {got.ptr:#x} but the call passes {name}_ptr={ptr:#x}"
    return ""


def host_layouts(problem: GemmProblem) -> dict[str, str]:
    """The ``layouts`` entry of a plan: each operand's memory order as found."""
    return {op.name: f"{op.layout}-major ld={op.ld}" for op in problem.operands()}


class Backend(abc.ABC):
    """Base class of every polygemm backend.

    Subclasses set ``name`` and ``priority`` and implement ``probe``, ``variants``,
    ``plan`` and ``run``. ``supports`` (used by ``device="auto"``) returns None when the
    backend can compute a problem, else the reason it cannot; the default derives it
    from ``residencies`` and the dtypes of ``variants()``.
    """

    name: ClassVar[str] = ""
    priority: ClassVar[int] = 300
    #: where this backend's operands may live; "host" means it accepts NumPy arrays.
    residencies: ClassVar[tuple[str, ...]] = ("host",)
    #: kernels take alpha and beta as float32: values beyond its range are refused at plan time
    float32_scalars: ClassVar[bool] = False
    #: computes batches of products (N-D operands, ``numpy.matmul`` broadcasting); a backend
    #: without it is given 2-D problems only
    batched: ClassVar[bool] = False
    #: takes host operands' batches with any strides, broadcast ones included (no copy to a
    #: batch one stride walks is made for it): the cpu backend, whose numpy.matmul broadcasts
    broadcasts_host_batches: ClassVar[bool] = False
    #: reads operands whose values are their memory's conjugates (``Operand.conj``: torch's lazy ``z.conj()`` on the
    #: GPU, read without a copy); a backend without it is refused them, never given the memory as if unconjugated
    reads_conjugates: ClassVar[bool] = False

    # -- discovery -------------------------------------------------------------------
    @abc.abstractmethod
    def probe(self) -> Availability:
        """Say whether this backend can run here. Must not raise."""

    @abc.abstractmethod
    def variants(self) -> Sequence[Variant]:
        """The static variant table (no device needed)."""

    def capabilities(self) -> Capabilities:
        """Live capabilities; the default is the static table with no device name."""
        vs = tuple(self.variants())
        dtypes = tuple(sorted({d for v in vs for d in v.dtypes}))
        return Capabilities(self.name, self.device_name(), dtypes, self.residencies, vs)

    def device_name(self) -> str:
        return ""

    def dtypes(self) -> tuple[str, ...]:
        return tuple(sorted({d for v in self.variants() for d in v.dtypes}))

    def precisions(self, dtype: str) -> tuple[str, ...]:
        """The precisions a call may ask of this backend for ``dtype`` inputs, most accurate first: those its
        most accurate auto variant meets (a path meets every precision looser than its own, :mod:`~polygemm.core.precision`);
        every one for dtypes a precision does not govern (or it does not compute). Override to declare otherwise."""
        if not governed(dtype):
            return PRECISIONS
        own = [v.precision for v in self.variants() if v.auto and dtype in v.dtypes] \
            or [v.precision for v in self.variants() if dtype in v.dtypes]  # (auto's own refusal says it has none)
        return looser_or_equal(min(own, key=PRECISIONS.index)) if own else PRECISIONS

    def supports(self, problem: GemmProblem) -> str | None:
        """None if this backend can compute ``problem``, else the reason it cannot: the message of
        the error :meth:`check_problem` raises (one rule set, :meth:`refusal`)."""
        refused = self.refusal(problem)
        return None if refused is None else str(refused)

    def for_device(self, index: int) -> "Backend":
        """This backend on its device ``index`` (what ``device="name:index"`` selects). The
        default has one device: index 0 is the backend itself, others are refused."""
        if index == 0:
            return self
        from .errors import BackendUnavailableError

        raise BackendUnavailableError(f"device {short_repr(f'{self.name}:{index}')}: backend {self.name!r} has one device; use {self.name!r}")

    def get_variant(self, name: str) -> Variant:
        for v in self.variants():
            if v.name == name:
                return v
        names = [v.name for v in self.variants()]
        # 'auto' is listed as device errors list it (variant="AUTO" gets the hint of it)
        raise UnsupportedProblemError(f"variant={short_repr(name)} is not a variant of backend {self.name!r}{variant_hint(name, names)}; "
                                      f"known: {', '.join(names)} (or 'auto')")

    def check_problem(self, problem: GemmProblem, variant: Variant | None = None) -> None:
        """Raise the right error when this backend (or ``variant``) cannot take ``problem``."""
        refused = self.refusal(problem, variant)
        if refused is not None:
            raise refused

    def scalar_dtype(self, dtype: np.dtype) -> np.dtype | None:
        """What this backend's kernels take alpha and beta as in products of ``dtype``: float32 where
        ``float32_scalars`` says so (a check's threshold allows for their rounding), else None (the
        product's own precision)."""
        return np.dtype(np.float32) if self.float32_scalars else None

    def refusal(self, problem: GemmProblem, variant: Variant | None = None) -> PolygemmError | None:
        """The error this backend (or ``variant``) refuses ``problem`` with, or None: its dtypes
        (``variants()``), ``out_dtypes``, ``residencies``, ``batched`` and :meth:`scalar_dtype`.
        :meth:`supports` says its message, :meth:`check_problem` raises it."""
        dtype = problem.dtype.name
        dtypes = self.dtypes()
        # the order device="auto" reports first: scalars, batches and residency before dtypes
        if not problem.scalars_fit_float32 and self.scalar_dtype(problem.dtype) == np.float32:
            for what, value in (("alpha", problem.alpha), ("beta", problem.beta)):
                if not fits_float32(value):
                    why = "" if abs(value) > FLOAT32_MAX else " (below float32's normal range, where it keeps fewer digits)"
                    return UnsupportedProblemError(
                        f"{what}={value:g} does not fit the float32 scalars of backend {self.name!r}{why}; "
                        f"scale a or c by it first, or use device='cpu' (device='auto' does so)")
        if problem.batch and not self.batched:
            return UnsupportedProblemError(
                f"backend {self.name!r} computes one matrix product per call (2-D operands); these are stacks of matrices "
                f"(batch shape {tuple(problem.batch)}, {problem.count} products): pass each product's 2-D operands in a "
                f"call of its own, or use a backend with batches (cpu, cuda; device='auto' takes one)")
        if problem.residency not in self.residencies:
            return UnsupportedProblemError(f"backend {self.name!r} cannot take operands on {problem.residency}; it takes "
                                           f"{', '.join(self.residencies)} data")
        conjugated = [op.name for op in problem.operands() if op.conj]
        if conjugated and not self.reads_conjugates:
            first = conjugated[0]
            return UnsupportedProblemError(f"{', '.join(conjugated)} {'is a torch tensor' if len(conjugated) == 1 else 'are torch tensors'} "
                                           f"with the conjugate bit set (a lazy z.conj()), which backend {self.name!r} does not "
                                           f"read; pass {first}.resolve_conj() (a conjugated copy), or device='cuda'")
        if dtype not in dtypes:
            return DTypeError(unsupported_dtype(self.name, dtype, dtypes, problem.residency, widens=lambda target: any(
                "float32" in v.out_dtypes for v in self.variants() if target in v.dtypes)))
        if variant is not None and dtype not in variant.dtypes:
            return DTypeError(f"variant {variant.name!r} of backend {self.name!r} computes {', '.join(variant.dtypes)}, not {dtype}")
        if governed(dtype):
            offered = looser_or_equal(variant.precision) if variant is not None else self.precisions(dtype)
            if problem.precision not in offered:
                where = f"variant {variant.name!r} of backend {self.name!r}" if variant is not None else f"backend {self.name!r}"
                return precision_refusal(where, dtype, problem.precision, offered)
        if problem.out_dtype != problem.dtype:
            candidates = [variant] if variant is not None else [v for v in self.variants() if dtype in v.dtypes]
            if not any(problem.out_dtype.name in v.out_dtypes for v in candidates):
                where = f"variant {variant.name!r}" if variant is not None else f"backend {self.name!r}"
                return DTypeError(f"{where} writes {dtype} results only, not {problem.out_dtype.name}; pass out (or "
                                  f"out_dtype) as {dtype}, or use a device that widens (device='auto' picks one)")
        return None

    # -- planning and running ---------------------------------------------------------
    @abc.abstractmethod
    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        """Decide what will run for ``problem`` (honouring ``variant``) without running it."""

    @abc.abstractmethod
    def run(self, plan: Plan) -> Any:
        """Compute ``plan.problem`` as planned; return the result (``out`` when given).

        Host operands give a NumPy result; device operands give a device array of the
        same kind. Failures raise DeviceError with the vendor's message.
        """

    def execute(self, plan: Plan, call: Call) -> Any:
        """Compute ``plan`` (possibly made for an earlier call, from the plan cache) on ``call``'s
        operands, which have the shapes, layouts, dtypes and alignment the plan was made for.

        The core calls this; it must re-decide nothing. A call not made by the core is first
        checked against the plan (:func:`check_call`: ArgumentError when its operands are not
        those the plan was made for). The default binds the call into a copy of the plan and
        calls :meth:`run` (enough for plugins); built-in backends override it.
        """
        if not call.matched:
            check_call(plan, call)
        return self.run(plan.bind(call))

    def direct_host_call(self, plan: Plan) -> Callable[[Any, Any, Any], Any] | None:
        """For a host plan of alpha 1 and beta 0 whose product needs nothing but ``a``, ``b`` and ``out``
        (None when not given): a function ``f(a, b, out)`` returning what :meth:`execute` would, which the
        core calls on the plan's cached calls instead of binding a :class:`Call` (decided once, with the plan).
        The default, None: every call goes through :meth:`execute`."""
        return None

    # -- device helpers (benchmarks, conformance suite) -------------------------------
    def launcher(self, variant: str, a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
        """A raw launch of ``variant`` on device arrays for ``polygemm bench --mode kernel``: an
        object that queues one product per call (no API, no synchronization) and has
        ``variant`` (the kernel that runs) and ``close()``. None (the default): the backend has
        no raw path and benchmarks time ``polygemm.gemm`` instead."""
        return None

    def active(self) -> ContextManager[None]:
        """A context in which device helpers and launchers may be called (e.g. a pushed CUDA
        context); the default needs none."""
        return contextlib.nullcontext()

    def to_device(self, array: np.ndarray) -> Any:
        """Copy a host array to this backend's device (host backends return it as is)."""
        return array

    def to_host(self, array: Any) -> np.ndarray:
        """Copy a device array back to the host as NumPy."""
        return np.asarray(array)

    def synchronize(self) -> None:
        """Wait for all work this backend queued."""

    def timer(self) -> Callable[[Callable[[], Any]], float]:
        """Return ``time(fn) -> seconds`` measuring one call of ``fn`` on the device.

        The default uses the host clock after ``synchronize``; device backends time
        with their events.
        """
        import time

        def _time(fn: Callable[[], Any]) -> float:
            self.synchronize()
            t0 = time.perf_counter()
            fn()
            self.synchronize()
            return time.perf_counter() - t0

        return _time

    def __repr__(self) -> str:
        return f"<polygemm backend {self.name!r} priority={self.priority}>"
