"""The plan cache: a call's description -> the plan made for it, and the binding of a call's
operands to that plan.

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
import os
import sysconfig
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import registry
from .backend import Backend, Plan
from .core.dtypes import RoundedFraction
from .core.env import warn_bad_environment
from .core.hostcopy import host_convert
from .core import precision as _precision
from .core.normalize import normalize
from .core.problem import Call, GemmProblem, common_stream
from .core.read import NotWhole
from .core.scalars import fits_float32, parse_scalar
from .core.text import short_repr
from .core.views import operand_view
from .errors import ArgumentError, ArgumentTypeError, DeviceError, PolygemmError
from .interop.cupy import cupy_views
from .interop.numpy import result_like
from .interop.results import allocator, host_wrapper, made_whole
from .interop.torch import torch_unwritable, torch_views
from .registry.discover import on_change
from .registry.guard import is_plugin, plugin_check, plugin_plan

log = logging.getLogger("polygemm")

__all__ = ["PlanCache", "CacheEntry", "PLAN_CACHE_SIZE", "bind", "bind_whole", "not_cached", "detached", "plan_cache_info",
           "clear_plan_cache"]


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
        warn_bad_environment(f"POLYGEMM_PLAN_CACHE_SIZE={raw!r} {why}; keeping {default} plans")
        return default
    return size


#: how many plans the cache keeps ($POLYGEMM_PLAN_CACHE_SIZE; 0 turns the cache off)
PLAN_CACHE_SIZE = _cache_size(os.environ.get("POLYGEMM_PLAN_CACHE_SIZE"))


@dataclass(frozen=True)
class CacheEntry:
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
    #: a third party's backend, whose run() the core checks (:func:`plugin_execute`); decided
    #: once with the plan, not on every call
    plugin: bool = False
    #: the plan's operands are host data (``problem.residency == "host"``), read on every call
    host: bool = False
    #: ``f(a, b, out)`` that computes the plan's calls from the operands as given, without a :class:`Call`
    #: (:meth:`Backend.direct_host_call`: a host plan of alpha 1 and beta 0 copying nothing); None: execute
    direct: Callable[[Any, Any, Any], Any] | None = None


#: a free-threaded build (3.13t): there OrderedDict's methods are not atomic (move_to_end beside
#: another thread's clear or popitem can crash CPython 3.13t, gh-125996) and the counters' += lose
#: counts, so a lookup takes the lock as put and clear do
_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


class PlanCache:
    """A bounded, thread-safe map from a call's description to its plan (least recently used out
    first; a hit records its recency once the cache is half full, before which nothing is near
    eviction)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[tuple[Any, ...], CacheEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        #: (key, entry, epoch) of the last hit: a call repeated (a loop's) compares its key once, where the
        #: dict lookup hashes it and compares it too. Good while ``_epoch``, which every put, clear and forget
        #: advances, is the one read before the lookup that found it (a lookup racing a forget keeps nothing)
        self._last: tuple[tuple[Any, ...], CacheEntry, int] | None = None
        self._epoch = 0

    def _get_locked(self, key: tuple[Any, ...]) -> CacheEntry | None:
        with self._lock:
            return self._get(key)

    def _get(self, key: tuple[Any, ...]) -> CacheEntry | None:
        # without the lock (with the GIL): a call's hit is the host path's commonest step, and
        # each of OrderedDict's get and move_to_end is atomic on its own (put and clear hold the
        # lock for their several steps); the counters are statistics
        last, epoch = self._last, self._epoch
        if last is not None and last[2] == epoch and last[0] == key:
            self.hits += 1
            return last[1]
        data = self._data
        entry = data.get(key)
        if entry is None:
            self.misses += 1
            return None
        if len(data) * 2 >= self.maxsize:  # recency is recorded once eviction is near (half full): a hit costs less
            try:
                data.move_to_end(key)
            except KeyError:  # evicted by another thread's put since the get: the entry is still good for this call
                pass
        self.hits += 1
        self._last = (key, entry, epoch)
        return entry

    #: the plan for a call's key, or None (counted as a hit or a miss); chosen once, not per call
    get = _get_locked if _FREE_THREADED else _get

    def put(self, key: tuple[Any, ...], entry: CacheEntry) -> None:
        if self.maxsize <= 0:
            return
        with self._lock:
            self._last, self._epoch = None, self._epoch + 1
            self._data[key] = entry
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._last, self._epoch = None, self._epoch + 1
            self._data.clear()
            self.hits = self.misses = 0

    def forget(self) -> None:
        """Drop every plan, keeping the counts."""
        with self._lock:
            self._last, self._epoch = None, self._epoch + 1
            self._data.clear()

    def info(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize}


_cache = PlanCache(PLAN_CACHE_SIZE)
#: plans name backends: when the registry changes (refresh(), a late probe), the plans made before go
on_change(lambda: _cache.forget())
_NO_VIEW: tuple[tuple[Any, ...], int, None] = ((), 0, None)  # operand_view(None)
_ndarray = np.ndarray
#: the views of a NumPy user's call (its key holds the arrays' facts): no pointer a call passes, no stream
_HOST_VIEWS: tuple[tuple[tuple[str], int, None], ...] = ((("host",), 0, None),) * 4


if hasattr(os, "register_at_fork"):
    # a child of os.fork made while another thread held the lock (putting a plan) would have it held forever: the
    # child's cache takes a lock of its own (its plans, copied with it, stay good)
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


def _full_plan(a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: str | None, variant: Any, out: Any,
               out_dtype: Any, views: Any = None, precision: str = "highest") -> tuple[Backend, Plan, GemmProblem]:
    """Normalize and validate everything, select the backend and plan (the uncached path); ``views``: the operands
    as the cache key read them (None: not read), which normalization takes rather than reading them again."""
    if not isinstance(variant, str) or not variant:  # None, 3: a TypeError too; '' a ValueError only
        raise (ArgumentError if isinstance(variant, str) else ArgumentTypeError)(
            f"variant must be a variant name or 'auto'; got {short_repr(variant)}")
    problem: GemmProblem = normalize(a, b, c, alpha=alpha, beta=beta, out=out, out_dtype=out_dtype, broadcast_copies=False,
                                     views=views)
    if precision != problem.precision:
        problem = dataclasses.replace(problem, precision=precision)
    auto = registry.resolve_device(device) == "auto"
    refused: dict[str, str] = {}
    while True:
        backend, passed = registry.select(problem, device, variant, refused)
        chosen = problem.broadcasts_for(backend)  # a broadcast batch copied only for a backend that needs it
        if not auto:  # device="auto" took a backend whose supports() passed the problem
            if is_plugin(backend):
                plugin_check(backend, chosen)
            else:
                backend.check_problem(chosen)
        if not is_plugin(backend):
            plan = backend.plan(chosen, variant)
            break
        try:
            plan = plugin_plan(backend, chosen, variant)
            break
        except PolygemmError as exc:
            # under "auto", a plugin whose plan() refuses the problem (or fails) is passed over as one whose supports()
            # refused it: the next backend computes it, and Plan.candidates says why (a named device raises)
            if not auto:
                raise
            if isinstance(exc, DeviceError):
                log.warning("device='auto' passed backend %r over: %s", backend.name, exc)
            refused[backend.name] = f"plan() refused: {exc}".split("\n")[0]
    problem = chosen
    plan.candidates = passed + plan.candidates
    copies = [f"{op.name} broadcast over the batch {problem.batch} into a copy (one stride cannot walk its batch)" if op.broadcast
              else f"{op.name} copied once into C order (strided view or non-native byte order)"
              for op in (problem.a, problem.b, problem.c) if op is not None and op.copied]
    plan.copies = copies + plan.copies
    used = _precision.used_precision(backend.variants(), plan.variant, precision)
    plan.precision = _precision.describe(problem.dtype.name, problem.out_dtype.name, precision, used)
    plan.computed_precision = used
    plan.problem = problem.without_data()  # a cached plan keeps provenance, never the data
    return backend, plan, problem


def _key(a: Any, b: Any, c: Any, out: Any, alpha: float, beta: float, device: str | None, variant: Any,
         out_dtype: Any = None, precision: str = "highest") -> tuple[tuple[Any, ...] | None, Any]:
    """The cache key of a call (None when it takes the full normalization every time) and the operands' views
    (:func:`operand_view` of each, (key, pointer, stream); None for one that has none, or all four None when none
    was read)."""
    if type(variant) is not str or not (device is None or type(device) is str):
        if not isinstance(variant, str) or not (device is None or isinstance(device, str)):
            return None, None  # (a device object, a variant of no str: the full normalization's, every call)
        variant, device = str(variant), None if device is None else str(device)  # np.str_ names: keyed as the str
    if out_dtype is not None:
        try:
            hash(out_dtype)
        except TypeError:
            return None, None
    nd = _ndarray
    if type(a) is nd and type(b) is nd and (c is None or type(c) is nd) and (out is None or type(out) is nd):
        # a NumPy user's call, the commonest: each array's shape, strides and dtype in one flat tuple, no device
        # library asked; host data has no pointer a call passes, nor a stream. Of the read-only flags only out's
        # decides anything (a read-only out is refused): inputs are only read, whatever their flag
        if c is None:  # (one level: a nested tuple costs its own hash and comparison on every lookup)
            ops: Any = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, None, None, None) if out is None else \
                (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, out.shape, out.strides, out.dtype, out.flags.writeable)
        else:
            ops = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, c.shape, c.strides, c.dtype,
                   None if out is None else (out.shape, out.strides, out.dtype, out.flags.writeable))
        views: Any = _HOST_VIEWS
    else:
        views = cupy_views(a, b, c, out)  # a CuPy or torch user's call: one read of the current stream
        if views is None:  # (CuPy arrays all: no torch tensor, so no inference tensor, among them)
            views = torch_views(a, b, c, out)
        if views is None:
            if out is not None and torch_unwritable(out):  # an inference tensor outside inference mode: refused by the
                return None, None                          # full normalization, whatever plan the cache holds for its shapes
            views = operand_view(a), operand_view(b), operand_view(c), operand_view(out)
            if None in views:
                return None, views
        ops = (views[0][0], views[1][0], views[2][0], views[3][0])
    if device is None:  # $POLYGEMM_DEVICE as the key, in the environment's raw form
        device = _ENV_DATA.get(_ENV_KEY) if _ENV_DATA is not None else os.environ.get("POLYGEMM_DEVICE")
    # in place as the plan reads it (out's data is c's): for host arrays also another view of c's memory (c.view(),
    # c[...]), as for device data the pointers say; object identity alone would take a plan made for out=c.view()
    # for a later out distinct from c.
    in_place = out is not None and c is not None and (
        out is c or (views[3][1] != 0 and views[3][1] == views[2][1])
        or (type(out) is np.ndarray and type(c) is np.ndarray and np.may_share_memory(out, c)
            # may_share_memory compares bounds only: c = buf[::2] and out = buf[1::2] (or two column blocks of one
            # matrix) interleave without sharing an element. In place is normalize's test: the same data pointer.
            and out.__array_interface__["data"][0] == c.__array_interface__["data"][0]))
    # whether alpha and beta fit float32 (kernels with float32 scalars refuse them otherwise, and
    # auto goes elsewhere): a plan made for scalars that fit is not one for scalars that do not
    one, zero = alpha == 1.0, beta == 0.0
    if type(alpha) is RoundedFraction or type(beta) is RoundedFraction:
        # a non-whole Fraction whose float64 is whole scales a floating product by that float64, but an integer
        # product refuses it: not the plan of the whole number it rounds to
        return None, views
    # (in_place is key[5]: the overlap check of a hit takes it rather than reading the pointers again)
    # (the precision last: a plan made under one precision is never reused for another)
    # (out_dtype given is held in a tuple of its own: NumPy finds np.dtype("float64") == None true, and the last hit's
    # key, compared by ==, would then take a call asking float64 for one that asked nothing)
    asked = None if out_dtype is None else (out_dtype,)
    key = (device, variant, ops, one, zero, in_place, asked, one or fits_float32(alpha), zero or fits_float32(beta), precision)
    return key, views


def _owner(x: np.ndarray) -> np.ndarray | None:
    """The array that owns ``x``'s memory (NumPy keeps a view's ``base`` at its owner), or None when
    that memory is not an array's own (a buffer, a memory map: then only may_share_memory can tell)."""
    while True:
        base = x.base
        if base is None:
            return x
        if type(base) is not np.ndarray:
            return None
        x = base


def _overlap_free(entry: CacheEntry, a: Any, b: Any, c: Any, out: Any, views: list[Any], in_place: bool | None = None) -> bool:
    """Whether ``out`` is clear of ``a``, ``b`` and (unless it is ``c`` itself) ``c`` for these
    pointers; False sends the call through the full check, which says what is wrong. ``in_place``: the
    key's (host out and c at one data pointer), when it was worked out; None: compared here."""
    if out is None:
        return True
    if entry.host:
        if out.base is None:  # out owns its memory: only arrays whose memory is out's own can overlap it
            oa = a if a.base is None else _owner(a)
            ob = b if b.base is None else _owner(b)
            if oa is not None and ob is not None:
                if oa is out or ob is out:
                    return False
                if c is None or c is out:
                    return True
                oc = _owner(c)
                if oc is not None and oc is not out:
                    return True
        may_share = np.may_share_memory
        if may_share(out, a) or may_share(out, b):
            return False
        if c is None or c is out or not may_share(out, c):
            return True
        # another view of c's very memory (out=c[...], or c[:4] for both in a blocked loop): in place, as the key says
        if in_place is None:
            in_place = out.__array_interface__["data"][0] == c.__array_interface__["data"][0]
        return bool(in_place and out.strides == c.strides)
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


def _entry_for(backend: Backend, plan: Plan, problem: GemmProblem, like: Any) -> CacheEntry:
    ops = (problem.a, problem.b, problem.c, problem.out)
    def conversion(op: Any) -> tuple[int, ...] | None:
        if op is None or not op.copied:
            return None
        return problem.batch if op.broadcast else ()

    wrap = host_wrapper(problem.kind, like) if problem.residency == "host" and problem.out is None else None
    alloc = allocator(problem.kind, like) if problem.residency != "host" and problem.out is None else None
    convert = tuple(conversion(op) for op in ops[:3])
    plugin, host = is_plugin(backend), problem.residency == "host"
    # a third party's backend runs under the core's checks (plugin_execute), and host copies are made per call: those
    # calls go through execute
    direct = backend.direct_host_call(plan) if host and not plugin and convert == _NO_CONVERSION and wrap is None \
        and problem.alpha == 1.0 and problem.beta == 0.0 else None
    return CacheEntry(backend, plan,
                  _NO_CONVERSION if convert == _NO_CONVERSION else convert,  # type: ignore[arg-type]
                  tuple(0 if op is None else op.nbytes_span for op in ops),  # type: ignore[arg-type]
                  wrap, alloc,
                  tuple(0 if op is None else op.extent[0] for op in ops),  # type: ignore[arg-type]
                  plugin, host, direct)


_NO_CONVERSION = (None, None, None)  # CacheEntry.convert of a plan that copied nothing (compared by identity per call)


def _convert(x: Any, how: tuple[int, ...] | None) -> Any:
    if how is None:
        return x
    return host_convert(x, how or None)


def bind(a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: Any, variant: Any, out: Any,
          out_dtype: Any = None, precision: Any = None) -> tuple[CacheEntry, Call | None, bool, str]:
    """The plan for this call (cached or made now), the call's operands bound to it, whether the plan came from
    the cache, and why a plan made now is not kept for the next call ("" when it is: :func:`not_cached`). The call
    is None for a cached plan computed by ``entry.direct(a, b, out)`` (its alpha is 1 and its beta 0)."""
    # a finite float as it is (x - x is 0.0 for finite x only: NaN for inf and NaN), anything else parsed and checked
    al = alpha if type(alpha) is float and alpha - alpha == 0.0 else parse_scalar("alpha", alpha)
    be = beta if type(beta) is float and beta - beta == 0.0 else parse_scalar("beta", beta)
    if device is not None and type(device) is not str:  # torch.device, cupy.cuda.Device: keyed by name
        device = registry.device_arg_name(device)
    # the process default is a module global its setter updates: read, never recomputed, per call
    precision = _precision.DEFAULT if precision is None else _precision.parse_precision(precision)
    key, views = _key(a, b, c, out, al, be, device, variant, out_dtype, precision)
    if key is not None:
        entry = _cache.get(key)
        if entry is not None and out is not None and not entry.host and entry.convert is _NO_CONVERSION:
            # a device call with out (the commonest of CuPy and torch users): _overlap_free's interval test written out
            # (spans and lows of a, b, c, out fixed by the plan, the pointers this call's), then the call bound
            spans, lows = entry.spans, entry.lows
            va, vb, vc, vo = views
            o_ptr, o_span = vo[1], spans[3]
            o_lo, o_hi = o_ptr + lows[3], o_ptr + o_span
            ptr, span = va[1], spans[0]
            clear = not o_span or not (span and ptr + lows[0] < o_hi and o_lo < ptr + span)
            if clear and o_span:
                ptr, span = vb[1], spans[1]
                clear = not (span and ptr + lows[1] < o_hi and o_lo < ptr + span)
                if clear and c is not None:
                    ptr, span = vc[1], spans[2]  # c at out's pointer: in place
                    clear = not (span and ptr != o_ptr and ptr + lows[2] < o_hi and o_lo < ptr + span)
            if clear:
                sa, sb, sc, so = va[2], vb[2], vc[2], vo[2]
                if sb == sa and (sc is None or sc == sa) and (so is None or so == sa):
                    stream = sa  # the common case: every operand names one stream, or none names any
                else:
                    stream = common_stream([sa, sb, sc, so])
                return entry, Call(a, b, c, out, va[1], vb[1], vc[1], o_ptr, al, be, stream, None, True), True, ""
            entry = None  # (overlapping: the full check says what is wrong)
        # out clear of a and b at a glance (else the full check): out owns its memory, and a and b are neither out nor
        # views of it: each owns its memory or views an array that owns its own (NumPy keeps a view's base at the
        # owner: a reshape or slice of an operand is one), out none of them
        if entry is not None and (out is None or (entry.host and out.base is None and out is not a and out is not b
                                                   and (c is None or c is out)
                                                   and ((ab := a.base) is None or (type(ab) is _ndarray and ab is not out and ab.base is None))
                                                   and ((bb := b.base) is None or (type(bb) is _ndarray and bb is not out and bb.base is None)))
                                  or _overlap_free(entry, a, b, c, out, views, key[5])):
            conv = entry.convert
            if conv is not _NO_CONVERSION:  # host operands the plan copied: copied again, the same way
                a, b, c = _convert(a, conv[0]), _convert(b, conv[1]), _convert(c, conv[2])
            if views is _HOST_VIEWS:  # matched: the key fixes them
                if entry.direct is not None:  # no Call: gemm hands a, b and out to entry.direct
                    return entry, None, True, ""
                return entry, Call(a, b, c, out, 0, 0, 0, 0, al, be, None, None, True), True, ""
            va, vb, vc, vo = views
            sa, sb, sc, so = va[2], vb[2], vc[2], vo[2]
            if sb == sa and (sc is None or sc == sa) and (so is None or so == sa):
                stream = sa  # the common case: every operand names one stream, or none names any
            else:
                stream = common_stream([sa, sb, sc, so])
            call = Call(a, b, c, out, va[1], vb[1], vc[1], vo[1], al, be, stream, None, True)
            return entry, call, True, ""
    backend, plan, problem = _full_plan(a, b, c, al, be, device, variant, out, out_dtype, views, precision)
    entry = _entry_for(backend, plan, problem, result_like(a, b, c))
    if key is not None:
        _cache.put(key, entry)
    uncached = "" if key is not None and _cache.maxsize > 0 else not_cached(a, b, c, out, views)
    return entry, Call.from_problem(problem), False, uncached


def bind_whole(a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: Any, variant: Any, out: Any,
                out_dtype: Any = None, first: NotWhole | None = None,
                precision: Any = None) -> tuple[CacheEntry, Call | None, bool, str, list[str]]:
    """:func:`bind`, after a CuPy or torch input that no kernel addresses as it is (matrices
    neither row- nor column-major, a batch one stride cannot walk) is made whole by its own
    library, as host views are copied once; also what was copied so, for the plan. ``first``:
    what :func:`bind` of these operands raised already (not bound, nor counted, again)."""
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
            return (*bind(a, b, c, alpha, beta, device, variant, out, out_dtype, precision), made)
        except NotWhole as exc:
            failed = exc


def not_cached(a: Any, b: Any, c: Any, out: Any, views: Any = None) -> str:
    """Why the plan made for a call with these operands is not kept for the next one ("" when it is): last_plan(),
    explain() and polygemm gemm say it, since each such call plans again and plan_cache_info() counts none of them.
    ``views``: the operands' views as the cache key read them (None: read here)."""
    if _cache.maxsize <= 0:
        return "$POLYGEMM_PLAN_CACHE_SIZE=0 turns the plan cache off"
    for i, (name, x) in enumerate((("a", a), ("b", b), ("c", c), ("out", out))):
        if (operand_view(x) if views is None else views[i]) is not None:
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


def detached(plan: Plan, cached: bool, made: list[str] | None = None, alpha: float | None = None,
              beta: float | None = None, uncached: str = "", notes: tuple[str, ...] = ()) -> Plan:
    """A copy of a cached plan for the caller, with its own lists and dicts (layouts, copies,
    launch, candidates, notes): changing it changes neither the cache nor later calls. ``made``:
    the device inputs this call had made contiguous first (:func:`bind_whole`); ``alpha``,
    ``beta``: the call's own (a plan reused from the cache was made with the alpha and beta of an
    earlier call); ``notes``: lines the call adds to the plan's notes."""
    mine = copy.copy(plan)
    if alpha is not None and beta is not None and (alpha, beta) != (plan.problem.alpha, plan.problem.beta):
        mine.problem = dataclasses.replace(plan.problem, alpha=alpha, beta=beta)
    mine.layouts, mine.launch = dict(plan.layouts), dict(plan.launch)
    mine.copies, mine.candidates, mine.notes = _copies_note(made or []) + list(plan.copies), list(plan.candidates), list(plan.notes)
    mine.notes.extend(notes)  # what the call did beyond the plan (a verified call's retry, out written through a stand-in)
    mine.cached, mine.uncached = cached, uncached
    return mine
