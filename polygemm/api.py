"""``gemm`` and ``explain``: normalize -> dispatch -> plan -> run -> report, with a plan cache.

The first call with a given description of its operands (shapes, strides, dtypes, where they
live, their 16-byte alignment class, whether ``c``/``out`` are given, whether alpha is 1 and
beta 0, device, variant) normalizes and validates them, picks the backend and plans; the plan
is cached (bounded, least recently used first out, thread-safe). A repeated call reads only the
operands' interfaces, checks what depends on the pointers themselves (overlaps), and hands the
cached plan and the call's operands to the backend.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import os
import sysconfig
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Protocol, Union

import numpy as np
import numpy.typing as npt

from . import registry
from .backend import Backend, Plan, fits_float32
from .errors import ArgumentError, ArgumentTypeError, DeviceError, PolygemmError, ShapeError, did_you_mean
from .interop import allocator, cupy_views, dlpack_interface, host_wrapper, made_whole, result_like, torch_unwritable, torch_views, torch_written
from .problem import (Call, GemmProblem, NotWhole, OutBatchUnwalkable, _check_dtype, _host_layout, _np_name, _scalar, common_stream, device_interface, planning_only,
                      host_convert, normalize, operand_view, short_repr)

__all__ = ["gemm", "matmul", "explain", "last_plan", "plan_cache_info", "clear_plan_cache", "ArrayInput", "DTypeLike"]


class CudaArray(Protocol):
    """A device array exposing the CUDA array interface (CuPy, PyTorch, pycuda, Numba)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


class DLPackArray(Protocol):
    """An array offering the DLPack protocol (JAX, PyTorch, CuPy, NumPy ...)."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> tuple[int, int]: ...


#: what ``gemm`` takes as an operand: NumPy arrays and array-likes, CUDA or DLPack arrays
ArrayInput = Union["npt.ArrayLike", CudaArray, DLPackArray]
#: a result dtype: a NumPy dtype or its name, or another library's dtype object (torch.float32)
DTypeLike = Union["npt.DTypeLike", Any]

log = logging.getLogger("polygemm")
_local = threading.local()

def _cache_size(raw: str | None, default: int = 256) -> int:
    """$POLYGEMM_PLAN_CACHE_SIZE as a count (unset or empty: the default; not a whole number
    >= 0: the default, with a warning saying so, rather than a failed import)."""
    if raw is None or not raw.strip():
        return default
    try:
        size = int(raw)
        why = "is negative (0 turns the cache off)" if size < 0 else ""
    except ValueError:
        size, why = default, "is not a whole number"
    if why:
        import warnings

        warnings.warn(f"POLYGEMM_PLAN_CACHE_SIZE={raw!r} {why}; keeping {default} plans", RuntimeWarning, stacklevel=2)
        return default
    return size


#: how many plans the cache keeps ($POLYGEMM_PLAN_CACHE_SIZE; 0 turns the cache off)
PLAN_CACHE_SIZE = _cache_size(os.environ.get("POLYGEMM_PLAN_CACHE_SIZE"))


@dataclass(frozen=True)
class _Entry:
    """A cached plan and what a repeated call needs to bind operands to it."""

    backend: Backend
    plan: Plan
    #: host a, b, c: how normalization copied them (None: not; () : C order and native byte
    #: order; a batch shape: also broadcast to it), repeated on each call
    convert: tuple[tuple[int, ...] | None, tuple[int, ...] | None, tuple[int, ...] | None]
    spans: tuple[int, int, int, int]  # device a, b, c, out: bytes from the pointer to past the last element
    #: host data of another library (torch CPU, JAX, ...): NumPy result -> that kind (no copy)
    wrap: Callable[[Any], Any] | None = None
    #: device operands and no ``out``: makes the result in the operands' library, on their
    #: device (the key holds both); None: the backend allocates its own
    alloc: Callable[[tuple[int, ...], Any], Any] | None = None
    #: device a, b, c, out: bytes below the pointer each addresses (a reversed batch: x[::-1]; else 0)
    lows: tuple[int, int, int, int] = (0, 0, 0, 0)
    #: a third party's backend, whose run() the core checks (:func:`_plugin_execute`); decided
    #: once with the plan, not on every call
    plugin: bool = False
    #: the plan's operands are host data (``problem.residency == "host"``), read on every call
    host: bool = False


#: a free-threaded build (3.13t): there OrderedDict's methods are not atomic (move_to_end beside
#: another thread's clear or popitem crashed CPython 3.13t, gh-125996) and the counters' += lose
#: counts, so a lookup takes the lock as put and clear do
_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


class PlanCache:
    """A bounded, thread-safe map from a call's description to its plan (LRU eviction)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _get_locked(self, key: tuple[Any, ...]) -> _Entry | None:
        with self._lock:
            return self._get(key)

    def _get(self, key: tuple[Any, ...]) -> _Entry | None:
        # without the lock (with the GIL): a call's hit is the host path's commonest step, and
        # each of OrderedDict's get and move_to_end is atomic on its own (put and clear hold the
        # lock for their several steps); the counters are statistics
        data = self._data
        entry = data.get(key)
        if entry is None:
            self.misses += 1
            return None
        try:
            data.move_to_end(key)
        except KeyError:  # evicted by another thread's put since the get: the entry is still good for this call
            pass
        self.hits += 1
        return entry

    #: the plan for a call's key, or None (counted as a hit or a miss); chosen once, not per call
    get = _get_locked if _FREE_THREADED else _get

    def put(self, key: tuple[Any, ...], entry: _Entry) -> None:
        if self.maxsize <= 0:
            return
        with self._lock:
            self._data[key] = entry
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def info(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize}


_cache = PlanCache(PLAN_CACHE_SIZE)
if hasattr(os, "register_at_fork"):
    # a child of os.fork made while another thread held the lock (putting a plan) had it held forever: its first new
    # plan hung. The child's cache takes a lock of its own (its plans, copied with it, stay good).
    os.register_at_fork(after_in_child=lambda: setattr(_cache, "_lock", threading.Lock()))

# The call's default device ($POLYGEMM_DEVICE) is read on every call (a change takes effect at
# once), from the environment mapping's raw store: ``os.environ.get`` encodes the key and
# decodes the value each time, a twentieth of a small call's whole host path.
_ENV_DATA: Any = getattr(os.environ, "_data", None)
try:
    _ENV_KEY: Any = os.environ.encodekey("POLYGEMM_DEVICE")
except AttributeError:  # an environment mapping without CPython's internals: read it the usual way
    _ENV_DATA = None


def plan_cache_info() -> dict[str, int]:
    """Hits, misses, current size and bound of the plan cache."""
    return _cache.info()


def clear_plan_cache() -> None:
    """Forget every cached plan (the next call of each kind plans again)."""
    _cache.clear()


#: what ``device=`` takes: a backend name ("cpu", "cuda", "cuda:1", "auto"), or the device object
#: of the operands' library (``torch.device``, ``cupy.cuda.Device``), named as it names itself
DeviceLike = Union[str, Any]


def _full_plan(a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: str | None, variant: Any, out: Any,
               out_dtype: Any) -> tuple[Backend, Plan, GemmProblem]:
    """Normalize and validate everything, select the backend and plan (the uncached path)."""
    if not isinstance(variant, str) or not variant:  # None, 3: a TypeError too; '' a ValueError only
        raise (ArgumentError if isinstance(variant, str) else ArgumentTypeError)(
            f"variant must be a variant name or 'auto'; got {short_repr(variant)}")
    problem: GemmProblem = normalize(a, b, c, alpha=alpha, beta=beta, out=out, out_dtype=out_dtype, broadcast_copies=False)
    backend, passed = registry.select(problem, device, variant)
    problem = problem.broadcasts_for(backend)  # a broadcast batch copied only for a backend that needs it
    backend.check_problem(problem)
    plan = _plugin_plan(backend, problem, variant) if _is_plugin(backend) else backend.plan(problem, variant)
    plan.candidates = passed + plan.candidates
    copies = [f"{op.name} broadcast over the batch {problem.batch} into a copy (one stride cannot walk its batch)" if op.broadcast
              else f"{op.name} copied once into C order (strided view or non-native byte order)"
              for op in (problem.a, problem.b, problem.c) if op is not None and op.copied]
    plan.copies = copies + plan.copies
    plan.problem = problem.without_data()  # a cached plan keeps provenance, never the data
    return backend, plan, problem


def _is_plugin(backend: Backend) -> bool:
    """A backend of another distribution (an entry point): its plan() and run() are held to the
    contract by the core (:func:`_plugin_plan`, :func:`_plugin_execute`); the built-ins are not."""
    # by the base name: a built-in's device handle is named with its index ("cuda:0")
    return registry.split_index(backend.name)[0] not in registry.BUILTIN_PRIORITY


def _broken(backend: Backend, what: str) -> DeviceError:
    return DeviceError(f"backend {backend.name!r} ({type(backend).__module__}.{type(backend).__qualname__}) {what}; "
                       f"this is a fault of that plugin: report it to its authors, or pass another device")


def _plugin_plan(backend: Backend, problem: GemmProblem, variant: str) -> Plan:
    """A plugin's plan(), checked: its own errors (polygemm's) as they are; anything else it
    raises (a KeyError of its tile table) or returns (None, a dict, another backend's plan) is
    a DeviceError naming the plugin. These had reached the caller as an AttributeError
    ("'NoneType' object has no attribute 'candidates'") or a bare KeyError naming no backend,
    and a plan naming another backend had been reported by last_plan()/explain() as that one's."""
    try:
        plan = backend.plan(problem, variant)
    except PolygemmError:
        raise
    except Exception as exc:
        raise _broken(backend, f"failed in plan(): {type(exc).__name__}: {exc}") from exc
    if not isinstance(plan, Plan):
        raise _broken(backend, f"plan() returned {type(plan).__name__} {plan!r:.60}, not a polygemm.backend.Plan")
    if plan.backend != backend.name:
        raise _broken(backend, f"plan() returned a plan for backend {plan.backend!r}; Plan(backend=...) must be "
                               f"self.name ({backend.name!r})")
    # the core's own copy, with its own lists, to complete and cache: a plugin may keep the Plan it returns and return
    # it again (a table of plans by shape). The core had completed that very object (its problem, candidates, copies):
    # the plan cached for gemm(a, b) then described the later gemm(a, b, out=o) and ran with an out it did not have.
    mine = copy.copy(plan)
    mine.layouts, mine.launch, mine.copies = dict(plan.layouts), dict(plan.launch), list(plan.copies)
    mine.candidates, mine.notes = list(plan.candidates), list(plan.notes)
    return mine


def _plugin_execute(backend: Backend, plan: Plan, call: Call) -> Any:
    """A plugin's execute (its run()), held to the contract the caller relies on: a host result
    is a NumPy array of the result's shape and dtype, and ``out`` when one is given (written, not
    a new array beside it); what it raises that is not polygemm's is a DeviceError naming it;
    and a failed call leaves a host ``out`` (and so a ``c`` updated in place) as it was, whatever
    the plugin wrote into it before failing. Each of these had reached the caller silently: a
    (M+1, N) or float64 result, None, an ``out`` returned unwritten (its old values read as the
    product), a half-written ``out`` after a raise."""
    problem = plan.problem
    out = call.out
    host = problem.residency == "host"
    saved = out.copy() if host and isinstance(out, np.ndarray) and out.size else None  # O(M*N) beside the O(M*N*K) product
    if host:  # the inputs as read-only views: a plugin that wrote into c (or a, b) had changed the caller's arrays
        call = _read_only_inputs(call)

    def restore() -> None:
        if saved is not None:
            np.copyto(out, saved)

    try:
        result = backend.execute(plan, call)
    except PolygemmError:
        restore()
        raise
    except Exception as exc:
        restore()
        wrote = (" (it wrote into an input: a, b and c are read-only to a plugin's run(); compute into a new array, or into "
                 "problem.out.array when out is given)") if isinstance(exc, ValueError) and "read-only" in str(exc) else ""
        raise _broken(backend, f"failed in run() on {problem.shape_str()} (MxNxK) {problem.dtype.name}, variant "
                               f"{plan.variant!r}: {type(exc).__name__}: {exc}{wrote}") from exc
    want = problem.result_shape
    shape = getattr(result, "shape", None)
    why = None
    if host and not isinstance(result, np.ndarray):
        why = f"run() returned {type(result).__name__}, not a NumPy array"
    elif shape is None or tuple(shape) != want:
        why = f"run() returned a result of shape {None if shape is None else tuple(shape)}, not the result's {want}"
    elif host and result.dtype != problem.out_dtype:
        why = f"run() returned a {result.dtype.name} result, not {problem.out_dtype.name}"
    elif host and out is not None and not (result is out or (
            result.__array_interface__["data"][0] == out.__array_interface__["data"][0] and result.strides == out.strides)):
        why = "run() returned a new array instead of writing out (it must write problem.out.array and return it)"
    if why is not None:
        restore()
        raise _broken(backend, f"{why}, for {problem.shape_str()} (MxNxK) {problem.dtype.name}, variant {plan.variant!r}"
                               + ("; out was left as it was" if out is not None and host else ""))
    return result


def _read_only(x: Any) -> Any:
    if type(x) is not np.ndarray or not x.flags.writeable:
        return x
    view = x.view()
    view.flags.writeable = False
    return view


def _read_only_inputs(call: Call) -> Call:
    """``call`` with its host a, b and c as read-only views of the same memory (no copy); ``out``
    as it is, and ``c`` too when it is ``out`` (in place: written as ``out``)."""
    c = call.c if call.c is call.out else _read_only(call.c)
    return Call(_read_only(call.a), _read_only(call.b), c, call.out, call.a_ptr, call.b_ptr, call.c_ptr,
                call.out_ptr, call.alpha, call.beta, call.stream, call.alloc, call.matched)


def _key(a: Any, b: Any, c: Any, out: Any, alpha: float, beta: float, device: str | None, variant: Any, out_dtype: Any = None) -> tuple[tuple[Any, ...], Any] | None:
    """The cache key of a call and the operands' (pointer, stream) views; None when some
    operand takes the full normalization every time."""
    if type(variant) is not str or not (device is None or type(device) is str):
        return None
    if out_dtype is not None:
        try:
            hash(out_dtype)
        except TypeError:
            return None
    if out is not None and torch_unwritable(out):  # an inference tensor outside inference mode: refused by the full
        return None                                  # normalization, whatever plan the cache holds for its shapes
    views: Any = cupy_views(a, b, c, out)  # a CuPy or torch user's call: one read of the current stream
    if views is None:
        views = torch_views(a, b, c, out)
    if views is None:
        views = operand_view(a), operand_view(b), operand_view(c), operand_view(out)
        if None in views:
            return None
    va, vb, vc, vo = views
    if device is None:  # $POLYGEMM_DEVICE as the key, in the environment's raw form
        device = _ENV_DATA.get(_ENV_KEY) if _ENV_DATA is not None else os.environ.get("POLYGEMM_DEVICE")
    # in place as the plan reads it (out's data is c's): for host arrays also another view of c's memory (c.view(),
    # c[...]), as for device data the pointers say. By object identity alone, the plan made for out=c.view() (in
    # place) was reused for a later out distinct from c, and last_plan()/explain() called that call in place.
    in_place = out is not None and c is not None and (
        out is c or (vo[1] != 0 and vo[1] == vc[1])
        or (type(out) is np.ndarray and type(c) is np.ndarray and np.may_share_memory(out, c)
            # may_share_memory compares bounds only: c = buf[::2] and out = buf[1::2] (or two column blocks of one
            # matrix) interleave without sharing an element; their plan (not in place) had been reused for a later
            # out=c and described it as a separate out. In place is normalize's test: the same data pointer.
            and out.__array_interface__["data"][0] == c.__array_interface__["data"][0]))
    # whether alpha and beta fit float32 (kernels with float32 scalars refuse them otherwise, and
    # auto goes elsewhere): a plan made for scalars that fit is not one for scalars that do not
    one, zero = alpha == 1.0, beta == 0.0
    fit32 = one or fits_float32(alpha), zero or fits_float32(beta)
    key = (device, variant, registry.generation(), va[0], vb[0], vc[0], vo[0], one, zero, in_place, out_dtype, fit32)
    return key, views


def _overlap_free(entry: _Entry, a: Any, b: Any, c: Any, out: Any, views: list[Any]) -> bool:
    """Whether ``out`` is clear of ``a``, ``b`` and (unless it is ``c`` itself) ``c`` for these
    pointers; False sends the call through the full check, which says what is wrong."""
    if out is None:
        return True
    if entry.host:
        may_share = np.may_share_memory
        if may_share(out, a) or may_share(out, b):
            return False
        if c is None or c is out or not may_share(out, c):
            return True
        # another view of c's very memory (out=c[...], or c[:4] for both in a blocked loop): in place, as the key
        # says. Only c itself had been, so such a call was planned anew every time while the cache counted a hit.
        return bool(out.__array_interface__["data"][0] == c.__array_interface__["data"][0] and out.strides == c.strides)
    spans, lows = entry.spans, entry.lows
    if not spans[3]:  # an empty out overlaps nothing
        return True
    o_ptr = views[3][1]
    o_lo, o_hi = o_ptr + lows[3], o_ptr + spans[3]
    for i in (0, 1, 2):
        ptr = views[i][1]
        if not spans[i] or (i == 2 and ptr == o_ptr):  # absent or empty; or c itself, in place
            continue
        if ptr + lows[i] < o_hi and o_lo < ptr + spans[i]:
            return False
    return True


def _entry_for(backend: Backend, plan: Plan, problem: GemmProblem, like: Any) -> _Entry:
    ops = (problem.a, problem.b, problem.c, problem.out)
    def conversion(op: Any) -> tuple[int, ...] | None:
        if op is None or not op.copied:
            return None
        return problem.batch if op.broadcast else ()

    wrap = host_wrapper(problem.kind, like) if problem.residency == "host" and problem.out is None else None
    alloc = allocator(problem.kind, like) if problem.residency != "host" and problem.out is None else None
    convert = tuple(conversion(op) for op in ops[:3])
    return _Entry(backend, plan,
                  _NO_CONVERSION if convert == _NO_CONVERSION else convert,  # type: ignore[arg-type]
                  tuple(0 if op is None else op.nbytes_span for op in ops),  # type: ignore[arg-type]
                  wrap, alloc,
                  tuple(0 if op is None else op.extent[0] for op in ops),  # type: ignore[arg-type]
                  _is_plugin(backend), problem.residency == "host")


_NO_CONVERSION = (None, None, None)  # _Entry.convert of a plan that copied nothing (compared by identity per call)


def _convert(x: Any, how: tuple[int, ...] | None) -> Any:
    if how is None:
        return x
    return host_convert(x, how or None)


def _bind(a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: DeviceLike | None, variant: Any, out: Any,
          out_dtype: Any = None) -> tuple[_Entry, Call, bool]:
    """The plan for this call (cached or made now) and the call's operands bound to it."""
    al = alpha if type(alpha) is float and math.isfinite(alpha) else _scalar("alpha", alpha)
    be = beta if type(beta) is float and math.isfinite(beta) else _scalar("beta", beta)
    if device is not None and type(device) is not str:  # torch.device, cupy.cuda.Device: keyed by name
        device = registry.device_arg_name(device)
    found = _key(a, b, c, out, al, be, device, variant, out_dtype)
    if found is not None:
        key, views = found
        entry = _cache.get(key)
        if entry is not None and _overlap_free(entry, a, b, c, out, views):
            conv = entry.convert
            if conv is not _NO_CONVERSION:  # host operands the plan copied: copied again, the same way
                a, b, c = _convert(a, conv[0]), _convert(b, conv[1]), _convert(c, conv[2])
            va, vb, vc, vo = views
            sa, sb, sc, so = va[2], vb[2], vc[2], vo[2]
            if sb == sa and (sc is None or sc == sa) and (so is None or so == sa):
                stream = sa  # the common case: every operand names one stream, or none names any
            else:
                stream = common_stream([sa, sb, sc, so])
            call = Call(a, b, c, out, va[1], vb[1], vc[1], vo[1], al, be, stream, None, True)  # matched: the key fixes them
            return entry, call, True
    backend, plan, problem = _full_plan(a, b, c, al, be, device, variant, out, out_dtype)
    entry = _entry_for(backend, plan, problem, result_like(a, b))
    if found is not None:
        _cache.put(found[0], entry)
    return entry, Call.from_problem(problem), False


def _bind_whole(a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: DeviceLike | None, variant: Any, out: Any,
                out_dtype: Any = None, first: NotWhole | None = None) -> tuple[_Entry, Call, bool, list[str]]:
    """:func:`_bind`, after a CuPy or torch input that no kernel addresses as it is (matrices
    neither row- nor column-major, a batch one stride cannot walk) is made whole by its own
    library, as host views are copied once; also what was copied so, for the plan. ``first``:
    what :func:`_bind` of these operands raised already (not bound, nor counted, again)."""
    made: list[str] = []
    failed = first
    while True:
        if failed is not None:  # handled outside the except: what follows is not chained to this NotWhole
            given = {"a": a, "b": b, "c": c}[failed.name]
            whole = made_whole(given, failed.shape) if failed.name not in made else None
            if whole is None:
                raise failed
            made.append(failed.name)
            if failed.name == "a":
                a = whole
            elif failed.name == "b":
                b = whole
            else:
                c = whole
        try:
            return (*_bind(a, b, c, alpha, beta, device, variant, out, out_dtype), made)
        except NotWhole as exc:
            failed = exc


def _not_cached(a: Any, b: Any, c: Any, out: Any) -> str:
    """Why the plan made for a call with these operands is not kept for the next one ("" when it is). Such calls had
    been reported "planned for this call (cached for the next)" (last_plan(), explain(), polygemm gemm) while each one
    planned again and plan_cache_info() counted none of them."""
    if _cache.maxsize <= 0:
        return "$POLYGEMM_PLAN_CACHE_SIZE=0 turns the plan cache off"
    for name, x in (("a", a), ("b", b), ("c", c), ("out", out)):
        if operand_view(x) is not None:
            continue
        t = type(x)
        what = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__.partition('.')[0]}.{t.__qualname__}"
        if isinstance(x, np.ndarray):  # memmap, np.matrix, a user's subclass
            then = "written in place all the same" if name == "out" else "the result is then a plain ndarray"
            hint = f"; np.asarray({name}) is the same memory as a plain ndarray, whose calls are cached ({then})"
        elif isinstance(x, (list, tuple)):
            hint = f"; convert it once, np.asarray({name}), to reuse the plan"
        else:
            hint = ""
        return (f"{name} is a {what}, which the cache does not key (only NumPy ndarrays and device arrays): each call "
                f"with it plans again{hint}")
    return ""


def _copies_note(made: list[str]) -> list[str]:
    return [f"{name} (a device array whose matrices or batch no kernel addresses as given) was made contiguous "
            f"by its own library first" for name in made]


def gemm(
    a: ArrayInput,
    b: ArrayInput,
    c: ArrayInput | None = None,
    *extra: NoReturn,
    alpha: float = 1.0,
    beta: float = 0.0,
    device: DeviceLike | None = None,
    variant: str = "auto",
    out: ArrayInput | None = None,
    out_dtype: DTypeLike | None = None,
    **unexpected: NoReturn,
) -> Any:
    """Return ``alpha * (a @ b) + beta * c``, computed by the chosen backend.

    ``a`` (M×K) and ``b`` (K×N) are NumPy arrays (or array-likes), or device arrays
    (``__cuda_array_interface__`` objects, MUSA arrays). Stacks of matrices (N-D) are a batch
    of products whose leading dimensions broadcast as in ``numpy.matmul``. Any memory order
    of the matrices is used as it is; other strided views are copied once. ``c`` (the
    result's shape) is read only when ``beta != 0``. ``out`` receives the result and is
    returned; it may be ``c`` itself (in place). ``out_dtype`` asks for a wider result
    (float32 for float16 inputs) when no ``out`` says it.
    ``device`` is a backend name or ``"auto"`` (default: ``$POLYGEMM_DEVICE`` or auto), or the
    operands' own device object (``tensor.device``, ``cupy.cuda.Device(1)``); an explicit device
    never falls back. ``variant`` picks a kernel of that backend.

    The result is of the operands' kind: NumPy in, NumPy out; CuPy in, CuPy out; torch in,
    torch out (same device); JAX or other DLPack arrays through their ``from_dlpack``; pycuda
    and other device arrays give a pycuda ``GPUArray``; ``out`` itself when given. Device work is queued
    on the stream the operands name (``__cuda_array_interface__``'s ``stream``, torch's current
    stream; the default stream when they name none) and not waited for, as CuPy and PyTorch do.
    Operands that name different streams are synchronized with first, and the call returns
    with the result written (no one stream orders the work for all of them).
    Raises ShapeError / DTypeError / ArgumentError for bad inputs,
    BackendUnavailableError when the device cannot run, DeviceError on device failure.
    """
    if extra or unexpected:
        raise _misused("gemm", extra, unexpected)
    first: NotWhole | None = None
    try:
        entry, call, hit = _bind(a, b, c, alpha, beta, device, variant, out, out_dtype)
        made: list[str] = []
    except NotWhole as exc:  # a device operand its own library must make contiguous first
        first = exc
    if first is not None:  # (outside the except: what the retry raises is not chained to this NotWhole)
        entry, call, hit, made = _bind_whole(a, b, c, alpha, beta, device, variant, out, out_dtype, first)
    if out is None and not entry.host:
        call.alloc = entry.alloc  # a new device result of the operands' library
    backend = entry.backend
    result = _plugin_execute(backend, entry.plan, call) if entry.plugin else backend.execute(entry.plan, call)
    if out is not None:
        result = out  # the user's own object (a DLPack out was written through a NumPy view)
        torch_written(out)  # a torch out: autograd learns of the in-place write, as from torch's own out=
    elif entry.wrap is not None:
        result = entry.wrap(result)
    # last_plan() copies it: the cached plan stays out of the caller's hands; with this call's alpha and beta, and why
    # its plan is not cached (looked into only when it was made now)
    _local.last = (entry.plan, hit, made, call.alpha, call.beta, "" if hit else _not_cached(a, b, c, out))
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", entry.plan)
    return result


# -- another library's spellings ---------------------------------------------------------------------------------------
# gemm, matmul and explain take ``*extra`` and ``**unexpected`` (typed NoReturn: a type checker still refuses anything
# passed there) only to say what a user of another library's GEMM meant. Python's own "gemm() got an unexpected keyword
# argument 'dtype'" (numpy.matmul's dtype), "... 'trans_a'" (scipy's BLAS), "... 'input'" (torch), or "matmul() takes 2
# positional arguments but 3 were given" (numpy.matmul(a, b, out)) named the word and no way on.

_ACCEPTED = {
    "gemm": ("c", "alpha", "beta", "device", "variant", "out", "out_dtype"),
    "explain": ("c", "alpha", "beta", "device", "variant", "out", "out_dtype"),
    "matmul": ("out", "out_dtype", "device"),
    "polygemm.dask.gemm": ("c", "alpha", "beta", "device", "variant", "out_dtype"),
}
_AS_OUT_DTYPE = " (the result's dtype is out_dtype=, e.g. out_dtype=np.float32 for float16 operands; a and b are never cast)"
_TRANSPOSED = " (pass the transposed view instead, {x}.T: polygemm reads a column-major view as it is, with no copy)"
_POSITIONAL = " (pass the operands by position: {func}(a, b{c}))"
_FOREIGN: dict[str, str] = {
    "dtype": _AS_OUT_DTYPE, "preferred_element_type": _AS_OUT_DTYPE, "result_type": _AS_OUT_DTYPE, "acc_dtype": _AS_OUT_DTYPE,
    **{k: _TRANSPOSED.format(x="a") for k in ("transa", "trans_a", "transpose_a", "adjoint_a", "adj_a", "adj_x", "ta")},
    **{k: _TRANSPOSED.format(x="b") for k in ("transb", "trans_b", "transpose_b", "adjoint_b", "adj_b", "adj_y", "tb")},
    **{k: _POSITIONAL for k in ("input", "other", "x1", "x2", "mat1", "mat2", "A", "B", "x", "y", "self", "tensor")},
    "overwrite_c": " (to update c in place, pass it as out too: gemm(a, b, c, beta=1.0, out=c))",
    "bias": " (a bias is c with beta=1.0: gemm(a, b, np.broadcast_to(bias, (M, N)), beta=1.0))",
    "stream": " (device work runs on the stream the operands name: CuPy's or torch's current stream, as their matmul does)",
    "precision": " (the precision is the operands' dtype: float16 and bfloat16 accumulate in float32; variant= names a kernel)",
    **{k: " (a numpy.matmul ufunc keyword polygemm has no counterpart for: nothing is cast, and the result is a new array "
          "or out itself)" for k in ("casting", "order", "subok", "signature", "where", "axes", "axis", "extobj")},
}


def _misused(func: str, extra: tuple[Any, ...], unexpected: dict[str, Any]) -> ArgumentTypeError:
    """The refusal of arguments ``func`` does not take, saying what a user of another library meant by them. An
    ArgumentTypeError: a TypeError, as Python's own refusal is."""
    accepted = _ACCEPTED[func]
    takes = ", ".join(f"{k}=" for k in accepted if k != "c")
    if extra:
        given = 2 + (func != "matmul") + len(extra)
        if func == "matmul":
            how = ("out is a keyword: matmul(a, b, out=out) (numpy.matmul also takes it third by position; c, alpha and "
                   "beta are polygemm.gemm's)") if len(extra) == 1 else "a and b are its only positional arguments"
        else:
            how = (f"alpha and beta are keywords: {func}(a, b, c, alpha=..., beta=...) (BLAS's order)"
                   + ("" if func == "polygemm.dask.gemm" else "; out is a keyword too: out=..."))
        return ArgumentTypeError(f"{func}() takes {'2' if func == 'matmul' else 'from 2 to 3'} positional arguments but "
                                 f"{given} were given: {how}")
    name = next(iter(unexpected))
    hint = _FOREIGN.get(name)
    if hint is None and func == "matmul" and name.lower() in _ACCEPTED["gemm"] and name.lower() not in accepted:  # gemm's c, alpha ...
        hint = f" (matmul is numpy.matmul's a @ b; polygemm.gemm(a, b, c, alpha=, beta=, variant=) takes {name.lower()})"
    if func == "polygemm.dask.gemm" and name.lower() == "out":  # dask's results are lazy: nothing is written until stored
        hint = (" (the result is a lazy dask array: store it with result.store(target) or dask.array.store, or "
                "compute() it)")
    if hint is None:  # C=, Out=, Alpha=, aplha=
        hint = did_you_mean([name], accepted)
    elif hint is _POSITIONAL:  # the template: which operands this function takes by position
        hint = _POSITIONAL.format(func=func, c="" if func == "matmul" else ", c")
        if name == "input" and func != "matmul":
            hint = f" (pass the operands by position: {func}(a, b, c); torch.matmul's input is a, torch.addmm's input is c)"
    return ArgumentTypeError(f"{func}() got an unexpected keyword argument {short_repr(name)}{hint}; it takes "
                             f"{'a and b' if func == 'matmul' else 'a, b and c'} by position and the keywords {takes}")


def matmul(a: ArrayInput, b: ArrayInput, *extra: NoReturn, out: ArrayInput | None = None, out_dtype: DTypeLike | None = None,
           device: DeviceLike | None = None, **unexpected: NoReturn) -> Any:
    """``a @ b`` with ``numpy.matmul``'s semantics, computed by polygemm's ``variant="auto"`` on
    ``device``: matrices and stacks of matrices (leading dimensions broadcast), and vectors: a
    1-D ``a`` is a row (1×K) and a 1-D ``b`` a column (K×1), that dimension dropped from the
    result (matrix @ vector is a vector, vector @ vector a 0-D array). ``out`` has the result's
    shape (or is a tuple of that one array, numpy.matmul's ufunc form). Scalars (0-D operands)
    are refused, as NumPy refuses them.
    """
    if extra or unexpected:
        raise _misused("matmul", extra, unexpected)
    if isinstance(out, tuple) and len(out) == 1:  # numpy.matmul is a ufunc: out=(arr,) names the one output
        out = out[0]
    for name, x in (("a", a), ("b", b)):
        if x is None or isinstance(x, (str, bytes, bytearray)):  # a string is no scalar to scale by (NumPy: 0-D text)
            raise ArgumentTypeError(f"{name} must be a vector, a matrix or a stack of matrices (a NumPy array, array-like or "
                                f"device array); got {'None' if x is None else f'{type(x).__name__} {x!r:.40}'}")
    a, nda = _dlpack_vector(a, "a")
    b, ndb = _dlpack_vector(b, "b")
    for name, nd, x in (("a", nda, a), ("b", ndb, b)):
        if nd == 0:
            raise ShapeError(f"{name} is a scalar (0-D {type(x).__name__}); matmul takes vectors (1-D) and matrices or stacks "
                             f"of matrices (at least 2-D), and refuses scalars as numpy.matmul does: scale with a * b instead")
    va, vb = nda == 1, ndb == 1
    if not (va or vb):
        return gemm(a, b, out=out, out_dtype=out_dtype, device=device)
    a2: Any = _unit_axis(a, "a", -2) if va else a  # (K,) -> (1, K)
    b2: Any = _unit_axis(b, "b", -1) if vb else b  # (K,) -> (K, 1)
    out2 = _dlpack_vector(out, "out")[0] if out is not None else None
    if out is not None:  # a view of out with the unit dimensions back, written in place
        # a NumPy scalar (np.float32(0)) has a shape and a reshape, but it is immutable: its reshape is a new
        # array, which would receive the result while out came back unchanged (numpy.matmul refuses it too)
        if isinstance(out2, (list, tuple, np.generic)) or not hasattr(out2, "shape"):
            raise ArgumentTypeError(f"out must be a NumPy array (or a device array) that can receive the result; got {type(out).__name__}"
                                + (f" (a NumPy scalar cannot be written; pass np.empty((), {_np_name(out.dtype)}))"
                                   if isinstance(out, np.generic) else ""))
        want, got = _vector_result_shape(a2, b2, va, vb), tuple(getattr(out2, "shape"))
        if want is not None and got != want:
            raise ShapeError(f"out must have the result's shape {want}; got {got}")
        if vb:
            out2 = _unit_axis(out2, "out", -1)
        if va:
            out2 = _unit_axis(out2, "out", -2)
        if isinstance(out, np.ndarray) and isinstance(out2, np.ndarray) and out2.size and _host_layout(out2) is None:
            # said of the out given (gemm would name the strides of the matrix view made of it)
            raise ArgumentError(f"out has strides {out.strides}: its last axis, the result's vector, steps by "
                                f"{out.strides[-1]} bytes ({out.itemsize}-byte elements); polygemm writes a vector "
                                f"result forward, a whole number of elements at a time (x[::-1] runs backwards). Pass "
                                f"a C-ordered out, e.g. np.empty({out.shape}, np.{out.dtype.name}), or omit out to get "
                                f"a new result")
    try:
        res = gemm(a2, b2, out=out2, out_dtype=out_dtype, device=device)
    except ShapeError as exc:  # the message names the matrices the vectors became
        # only the vectors' lengths are read, through _shape_of: a vector or the other operand may be a list (no .shape)
        ka, kb = (_shape_of(a2) or (0,))[-1], (_shape_of(b2) or (0, 0))[-2]
        taken = ([f"a, a vector of {ka}, taken as a row 1×{ka}"] if va else []) \
            + ([f"b, a vector of {kb}, taken as a column {kb}×1"] if vb else [])
        raise ShapeError(f"{exc} ({'; '.join(taken)})") from None
    except OutBatchUnwalkable:
        # an out whose batch one stride cannot walk (vector @ stack into a Fortran-ordered (2, 5, 2) out): gemm said it of
        # the matrix view made of it, "out has shape (2, 5, 1, 2) ... e.g. np.empty((2, 5, 1, 2), np.float32)", an array
        # matmul then refuses for its shape; said of the out given, and of an array of its shape
        if isinstance(out, np.ndarray) and isinstance(out2, np.ndarray) and out2.shape != out.shape:
            raise OutBatchUnwalkable(f"out has shape {out.shape} and strides {out.strides}: its batch (all but the last axis, "
                                f"the result's vectors) is not one that a single stride walks (e.g. batch axes swapped or "
                                f"Fortran-ordered, an outer batch axis reversed or stepped); polygemm writes out in place, "
                                f"never into a copy. Pass a C-ordered array, e.g. np.empty({out.shape}, "
                                f"{_np_name(out.dtype)}), or omit out to get a new result") from None
        raise
    if out is not None:
        return out
    shape = tuple(res.shape)
    lead, rows, cols = shape[:-2], shape[-2], shape[-1]
    want = lead + (() if va else (rows,)) + (() if vb else (cols,))  # the vectors' unit dimensions dropped
    if not hasattr(res, "reshape") and hasattr(res, "__array_namespace__"):  # an array-API library's: xp.reshape
        return res.__array_namespace__().reshape(res, want)
    if isinstance(res, np.ndarray):  # an array of its own, as numpy.matmul returns (a view had no .resize, and kept
        return res.reshape(want).copy()  # the whole buffer alive): one vector's copy, 1/K of the product's work
    return res.reshape(want)


def _dlpack_vector(x: Any, name: str) -> tuple[Any, int | None]:
    """``x`` and its number of dimensions, for matmul. An object that offers only an array
    interface (``__cuda_array_interface__``, no ``ndim``) has the interface's; one that offers
    only DLPack (no ``ndim``: NumPy reads either as a 0-D object) is read through DLPack: CPU
    data becomes the NumPy view of its memory (a vector gets its unit dimension through it, and
    ``out`` is written through it); other data is passed on as it is."""
    if isinstance(x, np.ndarray) or isinstance(getattr(x, "ndim", None), int):
        return x, _ndim(x)
    dev = device_interface(x, name)  # an object that offers only an array interface (no ndim, no shape of NumPy's)
    if dev is not None:
        return x, len(dev[1].get("shape", ()))
    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        return x, _ndim(x)
    where, data, iface = dlpack_interface(name, x)
    if iface is None:
        _check_dtype(name, data.dtype, x)  # said of the object given (gemm sees only the view)
        return data, int(data.ndim)
    return x, len(iface.get("shape", ()))


def _ndim(x: Any) -> int | None:
    """The number of dimensions of an array or array-like as NumPy reads it (None: unknown)."""
    nd = getattr(x, "ndim", None)
    if isinstance(nd, int):
        return nd
    try:
        return int(np.ndim(x))
    except Exception:  # e.g. a ragged list: gemm says what is wrong with it
        return None


def _shape_of(x: Any) -> tuple[int, ...] | None:
    """The shape of an array, or of an array-like as NumPy reads it (a list, a tuple, which
    have no ``.shape``); None when NumPy cannot read one (a ragged list: gemm says why)."""
    shape = getattr(x, "shape", None)
    if shape is not None:
        return tuple(int(n) for n in shape)
    try:
        return tuple(int(n) for n in np.shape(x))
    except Exception:
        return None


def _vector_result_shape(a2: Any, b2: Any, va: bool, vb: bool) -> tuple[int, ...] | None:
    """matmul's result shape for operands with the vectors' unit dimensions in (None: the
    shapes do not combine; gemm says why)."""
    sa, sb = _shape_of(a2), _shape_of(b2)
    if sa is None or sb is None or len(sa) < 2 or len(sb) < 2:
        return None
    try:
        lead = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        return None
    return lead + (() if va else (int(sa[-2]),)) + (() if vb else (int(sb[-1]),))


def _unit_axis(x: Any, name: str, where: int) -> Any:
    """``x`` with a dimension of 1 inserted second to last (``where=-2``: a row) or last (``-1``:
    a column), as a view of the same memory (``out`` is written through it): NumPy's
    ``expand_dims``, torch's ``unsqueeze``, else the array's ``reshape``, checked to keep the
    array's strides (pycuda's reshape of a Fortran-ordered array does not)."""
    if isinstance(x, (list, tuple)):  # stays a list: gemm reads it, and its messages speak of a list
        if where == -1 and not len(x):  # [[v] for v in []] is [], a 1-D list again: an empty column is NumPy's (0, 1)
            return np.expand_dims(np.asarray(x), -1)
        return [list(x)] if where == -2 else [[v] for v in x]
    if not hasattr(x, "reshape") and hasattr(x, "__array_namespace__") and hasattr(x, "shape"):
        # an array-API library's array: the standard's reshape is its namespace's function, not a method
        at = len(tuple(x.shape)) + 1 + where
        if name != "out":
            return x.__array_namespace__().expand_dims(x, axis=at)
        if hasattr(x, "__dlpack__"):  # out is written in place: expand_dims need not give a view; NumPy's view of CPU memory is one
            kind, data, _ = dlpack_interface(name, x)
            if kind == "host":
                return np.expand_dims(data, where)
    if not hasattr(x, "reshape"):
        if hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__"):  # device data offered only by an interface
            how = "DLPack" if hasattr(x, "__dlpack__") else "__cuda_array_interface__"
            raise ShapeError(f"{name} is a vector (1-D) {type(x).__name__} that polygemm cannot reshape (it offers only "
                             f"{how}); pass it as a matrix, e.g. {name}[None, :] or {name}[:, None] in its own library")
        if name == "out":  # NumPy's view of it may be a copy (a memoryview, an object's __array__): out would not get the result
            raise ArgumentTypeError(f"out must be a NumPy array (or a device array) that can receive the result; got {type(x).__name__}")
        x = np.asarray(x)
    if isinstance(x, np.ndarray):
        return np.expand_dims(x, where)
    shape = tuple(x.shape)
    at = len(shape) + 1 + where
    if callable(getattr(x, "unsqueeze", None)):  # torch: a view by construction
        return x.unsqueeze(at)
    try:
        y = x.reshape(shape[:at] + (1,) + shape[at:])
    except Exception as exc:
        raise ShapeError(f"{name} is a vector (1-D) of a kind polygemm cannot reshape ({type(x).__name__}: {exc}); "
                         f"pass it as a matrix, e.g. {name}[None, :] or {name}[:, None]") from exc
    strides = getattr(x, "strides", None)
    if strides is not None:
        kept = tuple(getattr(y, "strides", ()))
        if len(kept) != len(shape) + 1 or kept[:at] + kept[at + 1:] != tuple(strides):
            raise ArgumentError(f"{name} ({type(x).__name__} with strides {tuple(strides)}) cannot take the vector's unit "
                                f"dimension as a view of its memory; pass a C-ordered {name}")
    return y


def explain(
    a: ArrayInput,
    b: ArrayInput,
    c: ArrayInput | None = None,
    *extra: NoReturn,
    alpha: float = 1.0,
    beta: float = 0.0,
    device: DeviceLike | None = None,
    variant: str = "auto",
    out: ArrayInput | None = None,
    out_dtype: DTypeLike | None = None,
    **unexpected: NoReturn,
) -> Plan:
    """Return the :class:`Plan` ``gemm`` would run for these arguments, without running it.

    The plan names the backend, variant and device, why they were chosen, the layouts,
    any copies or padding, (for ``device="auto"``) the backends passed over and why, and
    whether it came from the plan cache (``plan.cached``). It is cached for the next call, unless
    ``plan.uncached`` says why not (an operand the cache does not key, such as a list or a memmap).
    """
    if extra or unexpected:
        raise _misused("explain", extra, unexpected)
    with planning_only():  # the host copies a call would make are described, not made
        entry, call, hit, made = _bind_whole(a, b, c, alpha, beta, device, variant, out, out_dtype)
    return _detached(entry.plan, hit, made, call.alpha, call.beta, "" if hit else _not_cached(a, b, c, out))


def _detached(plan: Plan, cached: bool, made: list[str] | None = None, alpha: float | None = None,
              beta: float | None = None, uncached: str = "") -> Plan:
    """A copy of a cached plan for the caller, with its own lists and dicts (layouts, copies,
    launch, candidates, notes): changing it changes neither the cache nor later calls. ``made``:
    the device inputs this call had made contiguous first (:func:`_bind_whole`); ``alpha``,
    ``beta``: the call's own (a plan reused from the cache had described the alpha and beta of
    the call that made it: gemm(alpha=3) after gemm(alpha=2) was reported as alpha=2)."""
    mine = copy.copy(plan)
    if alpha is not None and beta is not None and (alpha, beta) != (plan.problem.alpha, plan.problem.beta):
        mine.problem = dataclasses.replace(plan.problem, alpha=alpha, beta=beta)
    mine.layouts, mine.launch = dict(plan.layouts), dict(plan.launch)
    mine.copies, mine.candidates, mine.notes = _copies_note(made or []) + list(plan.copies), list(plan.candidates), list(plan.notes)
    mine.cached, mine.uncached = cached, uncached
    return mine


def last_plan() -> Plan | None:
    """The plan of the last ``gemm`` call completed in this thread (None before any).

    It describes the call (shapes, layouts, backend, variant) and holds none of its data;
    ``plan.cached`` says whether that call reused a cached plan (``plan.uncached``, why a plan made
    for it is not kept for the next one, if it is not). It is the caller's own copy:
    changing it changes nothing polygemm runs.
    """
    last = getattr(_local, "last", None)
    return None if last is None else _detached(*last)
