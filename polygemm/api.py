"""The public calls: ``gemm``, ``matmul`` and ``explain`` (and ``last_plan``), thin wrappers over
the plan cache (:mod:`polygemm.plan_cache`): normalize -> dispatch -> plan -> run -> report.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any, NoReturn

import numpy as np

from . import plan_cache
from .backend import Plan
from .core.arguments import misused_arguments
from .core.hints import c_library_refusal
from .core.hostcopy import planning_only
from .core.inputs import ArrayInput, DeviceLike, DTypeLike, ScalarInput
from .core.normalize import torch_spelling
from .core.read import NotWhole, OutBatchUnwalkable, OutNotInPlace, OutOverlaps
from .core.vectors import matmul_operands, ndim_of, shape_of
from .core.dtypes import INTEGER_DTYPES, integer_scalars_refusal
from .errors import ArgumentError, ArgumentTypeError, BackendUnavailableError, DTypeError, ShapeError
from .interop.kinds import foreign_c, kind_of
from .interop.stand_in import stand_in
from .interop.torch import dynamo_tracing, eager, torch_from_host, torch_host_views, torch_refusal, torch_written
from .plan_cache import clear_plan_cache, detached, plan_cache_info
from .registry.guard import plugin_execute
from .verification.call import verified_gemm
from .verification.cost import describe_check
from .verification.modes import VerifyMode, parse_verify, process_default as _verify_default

__all__ = ["gemm", "matmul", "explain", "last_plan", "plan_cache_info", "clear_plan_cache", "ArrayInput", "DTypeLike", "DeviceLike",
           "ScalarInput"]

class _Required:
    """The default of ``a`` and ``b``, which every call passes: one called with torch's keywords
    (``gemm(input=c, mat1=a, mat2=b)``) is told polygemm's way rather than Python's bare "missing 2 required
    positional arguments"."""

    def __repr__(self) -> str:
        return "<required>"


_REQUIRED: Any = _Required()


def _operands_given(func: str, a: Any, b: Any, extra: tuple[Any, ...], unexpected: dict[str, Any]) -> None:
    """Refuse a call of ``func`` that names arguments it does not take (another library's spelling, said in its
    terms) or leaves out ``a`` or ``b``."""
    if extra or unexpected:
        refusal = misused_arguments(func, extra, unexpected)
        if "torch" in (kind_of(a), kind_of(b)):  # dtype=torch.float32: told out_dtype=torch.float32, as torch spells it
            raise ArgumentTypeError(torch_spelling(str(refusal)))
        raise refusal
    missing = [name for name, x in (("a", a), ("b", b)) if x is _REQUIRED]
    if missing:
        raise ArgumentTypeError(f"{func}() needs {' and '.join(missing)}: pass the operands first, by position, "
                                f"{func}(a, b{'' if func == 'matmul' else ', c'}, ...)")


log = logging.getLogger("polygemm")
_DEBUG = logging.DEBUG
#: no operand made contiguous first (the common call: shared, never changed)
_NONE_MADE: list[str] = []


_local = threading.local()
_modules = sys.modules  # (every call asks whether torch is imported: torch.compile's tracing runs polygemm as it is)


def gemm(
    a: ArrayInput = _REQUIRED,
    b: ArrayInput = _REQUIRED,
    c: ArrayInput | None = None,
    *extra: NoReturn,
    alpha: ScalarInput = 1.0,
    beta: ScalarInput | None = None,
    device: DeviceLike | None = None,
    variant: str = "auto",
    out: ArrayInput | None = None,
    out_dtype: DTypeLike | None = None,
    precision: str | None = None,
    verify: VerifyMode = None,
    **unexpected: NoReturn,
) -> Any:
    """Return ``alpha * (a @ b) + beta * c``, computed by the chosen backend.

    ``a`` (M×K) and ``b`` (K×N) are NumPy arrays (or array-likes), or device arrays
    (``__cuda_array_interface__`` objects, MUSA arrays). Stacks of matrices (N-D) are a batch
    of products whose leading dimensions broadcast as in ``numpy.matmul``. Any memory order
    of the matrices is used as it is; other strided views are copied once. ``c`` has the
    result's shape; ``beta`` defaults to 1.0 when ``c`` is given (``gemm(a, b, c)`` is
    ``a @ b + c``, as in BLAS and ``torch.addmm``) and to 0.0 otherwise; ``c`` is read only when
    ``beta != 0``. ``out`` receives the result and is
    returned; it may be ``c`` itself (in place); an ``out`` of strides no kernel writes is written through a C-ordered
    array of its shape made by its own library (NumPy, CuPy, torch), as ``numpy.matmul`` writes any ``out``. ``out_dtype`` asks for a wider result
    (float32 for float16 inputs) when no ``out`` says it. ``precision`` ("highest", "high", "medium", as
    torch's ``set_float32_matmul_precision`` names them; default: :func:`get_float32_matmul_precision`) is the
    accuracy float32 and complex64 products must keep: a path at least that accurate runs, and a device that has
    none refuses (other dtypes compute as they are).
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

    ``verify`` checks the product where it was computed (a Freivalds test, ``C·r`` against
    ``alpha·A·(B·r) + beta·c·r`` for a fresh random ``r``, its threshold from the dtypes' error bound):
    None (default: ``polygemm.set_verify``'s, from ``$POLYGEMM_VERIFY``, else "off"), "off" (or False), "raise"
    (or True: VerificationError on a failed check), "warn" (VerificationWarning, the result returned all the
    same) or "retry" (recompute once, with another variant where the backend has one; raise if that
    fails too). A verified product is computed into a result of its own and copied into ``out`` once
    checked, so a failed check leaves ``out`` and ``c`` untouched; device calls wait for the check.
    """
    if "torch" in _modules and dynamo_tracing():  # torch.compile: a graph break around the call, run on the real tensors
        return eager(gemm)(a, b, c, *extra, alpha=alpha, beta=beta, device=device, variant=variant, out=out,
                           out_dtype=out_dtype, precision=precision, verify=verify, **unexpected)
    if extra or unexpected or a is _REQUIRED or b is _REQUIRED:
        _operands_given("gemm", a, b, extra, unexpected)
    if beta is None:
        beta = 0.0 if c is None else 1.0
    if type(a) is not np.ndarray and (device is None or type(device) is str):  # (NumPy's calls pay one test)
        host = torch_host_views(a, b, c, out)
        if host is not None and not getattr(_local, "viewless", False):
            return _on_host_views(host, a, b, c, alpha, beta, device, variant, out, out_dtype, precision, verify)
    if verify is not None or _verify_default.mode is not None:  # a branch of its own: an unverified call pays one test
        mode = _verify_default.mode if verify is None else parse_verify(verify)
        if mode is not None:
            # (an out no kernel writes: its validation, _plan_with_out, describes it; the checked result is copied in)
            before = getattr(_local, "last", None)
            if c is not None and type(c) is not type(a):
                _c_of_theirs(a, b, c, out, out_dtype)  # (before the checked paths, some of which bind the call directly)
            try:
                return verified_gemm(gemm, _last_product, _plan_with_out, mode, a, b, c, alpha, beta, device, variant, out,
                                     out_dtype, precision, note=_note_last, bind=_bound_for_check, adopt=_adopt_last)
            except BaseException:  # a call that failed its check (or raised a warning made an error, or an injected fault
                _local.last = before  # that missed) is no completed call: last_plan() keeps the one before
                raise
    if c is not None and type(c) is not type(a):  # (the common call: no c, or one of a's type, pays one test)
        _c_of_theirs(a, b, c, out, out_dtype)
    first: NotWhole | None = None
    strided: OutNotInPlace | None = None
    try:
        entry, call, hit, uncached = plan_cache.bind(a, b, c, alpha, beta, device, variant, out, out_dtype, precision)
        made: list[str] = _NONE_MADE
    except NotWhole as exc:  # a device operand its own library must make contiguous first
        first = exc
    except OutNotInPlace as exc:
        strided = exc
    if first is not None:  # (outside the except: what the retry raises is not chained to this NotWhole)
        try:
            entry, call, hit, uncached, made = plan_cache.bind_whole(a, b, c, alpha, beta, device, variant, out, out_dtype,
                                                                      first, precision)
        except OutNotInPlace as exc:
            strided = exc
    if strided is not None:
        return _through_stand_in(strided, a, b, c, alpha, beta, device, variant, out, out_dtype, precision, verify)
    if call is None:  # a cached host plan its backend computes from a, b and out alone (alpha 1, beta 0)
        result = entry.direct(a, b, out)  # type: ignore[misc]
        alpha, beta = 1.0, 0.0
    else:
        if out is None and not entry.host:
            call.alloc = entry.alloc  # a new device result of the operands' library
        backend = entry.backend
        result = plugin_execute(backend, entry.plan, call) if entry.plugin else backend.execute(entry.plan, call)
        alpha, beta = call.alpha, call.beta
    if out is not None:
        result = out  # the user's own object (a DLPack out was written through a NumPy view)
        if type(out) is not np.ndarray:
            torch_written(out)  # a torch out: autograd learns of the in-place write, as from torch's own out=
    elif entry.wrap is not None:
        result = entry.wrap(result)
    # last_plan() copies it: the cached plan stays out of the caller's hands; with this call's alpha and beta, and why
    # its plan is not cached
    _local.last = (entry.plan, hit, made, alpha, beta, uncached)
    if log.isEnabledFor(_DEBUG):
        log.debug("%s", entry.plan)
    return result


#: whether a ``c`` of its type is of another library than ``a`` and ``b`` of theirs (:func:`.interop.kinds.foreign_c`, which
#: their types decide), per (type(a), type(b), type(c))
_FOREIGN_C: dict[tuple[type, type, type], bool] = {}


def _on_host_views(host: tuple[Any, Any, Any, Any], a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: Any,
                   variant: str, out: Any, out_dtype: Any, precision: str | None, verify: VerifyMode) -> Any:
    """``gemm`` of CPU tensors through NumPy views of their memory (``host``: :func:`.interop.torch.torch_host_views`), a
    call the plan cache keys, handed back as a tensor (``out`` itself, its version bumped as torch's out= bumps it). A
    refusal of the arguments is said of the tensors themselves, in torch's terms: the call is made again on them, which
    raises it (nothing was written: a refused call writes nothing). A failed check or a device's error is raised as it is."""
    na, nb, nc, no = host
    try:
        res = gemm(na, nb, nc, alpha=alpha, beta=beta, device=device, variant=variant, out=no, out_dtype=out_dtype,
                   precision=precision, verify=verify)
    except (ArgumentError, ShapeError, DTypeError, BackendUnavailableError):  # (what is refused of the arguments)
        _local.viewless = True
        try:
            return gemm(a, b, c, alpha=alpha, beta=beta, device=device, variant=variant, out=out, out_dtype=out_dtype,
                        precision=precision, verify=verify)
        finally:
            _local.viewless = False
    if out is not None:
        torch_written(out)
        return out
    return torch_from_host(res)


def _c_of_theirs(a: Any, b: Any, c: Any, out: Any, out_dtype: Any) -> None:
    """ArgumentError, before anything is read, for a ``c`` of another library than ``a`` and ``b`` (a Python float or
    a list beside tensors): c's shape and dtype refusals would name its own library's ways (np.broadcast_to, a NumPy
    cast), and the one-library refusal would follow them all the same. Said first, as a list ``b`` beside a tensor
    ``a`` is told it before its dtype. Whether c is of another library is kept per operand types, which decide it (a
    Parameter bias beside Tensor operands asks every call)."""
    types = (type(a), type(b), type(c))
    foreign = _FOREIGN_C.get(types)
    if foreign is None:
        if len(_FOREIGN_C) >= 64:  # (classes made on the fly must not grow it for ever)
            _FOREIGN_C.clear()
        foreign = _FOREIGN_C[types] = foreign_c(a, b, c)
    if foreign and not _on_device(a):  # (a host c beside device operands: told the places, which is what holds)
        raise c_library_refusal(a, b, c, out, out_dtype)


def _on_device(x: Any) -> bool:
    """Whether ``x`` is device data: a torch tensor off the CPU, a CUDA array or a backend's own. (A torch tensor is asked
    its device: its CUDA interface raises RuntimeError for one that requires grad, KeyError for dtypes it cannot name.)"""
    device = getattr(x, "device", None)
    if kind_of(x) == "torch" and device is not None:
        return getattr(device, "type", "cpu") != "cpu"
    try:
        return hasattr(x, "__cuda_array_interface__") or hasattr(x, "__polygemm_array_interface__")
    except Exception:  # an interface that fails for another reason than its absence: whatever it is, not read here
        return False


def matmul(a: ArrayInput = _REQUIRED, b: ArrayInput = _REQUIRED, *extra: NoReturn, out: ArrayInput | None = None, out_dtype: DTypeLike | None = None,
           precision: str | None = None, device: DeviceLike | None = None, verify: VerifyMode = None,
           **unexpected: NoReturn) -> Any:
    """``a @ b`` with ``numpy.matmul``'s semantics, computed by polygemm's ``variant="auto"`` on
    ``device``: matrices and stacks of matrices (leading dimensions broadcast), and vectors: a
    1-D ``a`` is a row (1×K) and a 1-D ``b`` a column (K×1), that dimension dropped from the
    result (matrix @ vector is a vector; vector @ vector a NumPy scalar for NumPy vectors, else a 0-D array of their
    library, as their own matmul gives). ``out`` has the result's
    shape (or is a tuple of that one array, numpy.matmul's ufunc form). Scalars (0-D operands)
    are refused, as NumPy refuses them. ``a`` and ``b`` share one dtype: where they differ, a DTypeError names the cast
    NumPy's promotion would make (polygemm casts nothing behind the caller's back; two Python lists take the dtype
    numpy.matmul computes them in). ``precision``: as :func:`gemm` takes it; ``verify`` checks the
    product as :func:`gemm`'s does.
    """
    if "torch" in _modules and dynamo_tracing():
        return eager(matmul)(a, b, *extra, out=out, out_dtype=out_dtype, precision=precision, device=device, verify=verify,
                             **unexpected)
    if extra or unexpected or a is _REQUIRED or b is _REQUIRED:
        _operands_given("matmul", a, b, extra, unexpected)
    # matrices or stacks (an ndim that is an int: an object answering attributes its own way is read in full): gemm's call
    if out is None and type(na := getattr(a, "ndim", 0)) is int and na >= 2 and type(nb := getattr(b, "ndim", 0)) is int \
            and nb >= 2:
        return gemm(a, b, out_dtype=out_dtype, precision=precision, device=device, verify=verify)
    if isinstance(out, (tuple, list)) and _outputs(out):  # numpy.matmul is a ufunc: out=(arr,) names the one output
        out = _one_out(out, a, b)
    try:
        a2, b2, out2, va, vb = matmul_operands(a, b, out)
    except Exception:  # a tensor whose shape cannot be read (a nested one): refused in torch's terms, not torch's error
        torch_refusal("a", a)  # (only here: the refusal's queries cost a few µs, which a cached call does not pay)
        torch_refusal("b", b)
        raise
    if not (va or vb):
        return gemm(a2, b2, out=out2, out_dtype=out_dtype, precision=precision, device=device, verify=verify)
    try:
        res = gemm(a2, b2, out=out2, out_dtype=out_dtype, precision=precision, device=device, verify=verify)
    except ShapeError as exc:  # the message names the matrices the vectors became
        # only the vectors' lengths are read, through shape_of: a vector or the other operand may be a list (no .shape)
        ka, kb = (shape_of(a2) or (0,))[-1], (shape_of(b2) or (0, 0))[-2]
        taken = ([f"a, a vector of {ka}, taken as a row 1×{ka}"] if va else []) \
            + ([f"b, a vector of {kb}, taken as a column {kb}×1"] if vb else [])
        raise ShapeError(f"{exc} ({'; '.join(taken)})") from None
    except (OutBatchUnwalkable, OutOverlaps):
        # an out gemm refused (for a NumPy out: elements that may share memory) said of the matrix view made of it,
        # "out has shape (2, 5, 1) ... e.g. np.empty((2, 5, 1), np.float32)", an array matmul then refuses for its
        # shape: said of the out given, and of an array of its shape
        if out is not None and out2 is not out and tuple(getattr(out2, "shape", ())) != tuple(getattr(out, "shape", ())):
            try:  # the out given, in its own library's terms (np.empty, cupy.empty, torch.empty of its shape)
                stand_in(out)
            except OutOverlaps as exc:
                raise exc from None
        raise
    for note in _vector_notes(va, vb):  # last_plan() says what explain() says of them
        _note_last(note)
    if out is not None:
        return out
    shape = tuple(res.shape)
    lead, rows, cols = shape[:-2], shape[-2], shape[-1]
    want = lead + (() if va else (rows,)) + (() if vb else (cols,))  # the vectors' unit dimensions dropped
    if not hasattr(res, "reshape") and hasattr(res, "__array_namespace__"):  # an array-API library's: xp.reshape
        return res.__array_namespace__().reshape(res, want)
    if type(res) is np.ndarray and not want:  # vector @ vector: a NumPy scalar, as numpy.matmul returns (hashable,
        return res.reshape(())[()]           # np.isscalar); a subclass keeps its 0-D array, as it does there
    if isinstance(res, np.ndarray):  # an array of its own, as numpy.matmul returns (a view has no .resize, and keeps
        return res.reshape(want).copy()  # the whole buffer alive): one vector's copy, 1/K of the product's work
    return res.reshape(want)


def _outputs(out: tuple[Any, ...] | list[Any]) -> bool:
    """Whether a tuple or list given as ``out`` is one of outputs, as numpy.matmul's ufunc form takes it (a tuple of
    one, an empty one, or one of arrays), rather than values (a list of numbers, refused by gemm as the array-like it
    is)."""
    return (isinstance(out, tuple) and len(out) == 1) or not out or getattr(out[0], "ndim", 0) > 0  # (a NumPy scalar: a value)


def _one_out(out: tuple[Any, ...] | list[Any], a: Any, b: Any) -> Any:
    """The array of matmul's ``out=(arr,)`` (numpy.matmul's ufunc form: a one-element tuple names its one output);
    ArgumentTypeError for any other tuple or a list, saying what ``out`` takes in a's and b's library's terms."""
    if isinstance(out, tuple) and len(out) == 1:
        return out[0]
    kind = kind_of(a) if kind_of(a) == kind_of(b) else ""
    array = {"torch": "a torch tensor", "cupy": "a CuPy array"}.get(kind, "a NumPy array (or a device array)")
    got = (f"an empty {type(out).__name__}" if not out else f"a {type(out).__name__} of {len(out)} arrays" if len(out) > 1
           else f"a {type(out).__name__} of one array (pass out[0] itself, or the tuple (out[0],))")
    raise ArgumentTypeError(f"out must be {array} that can receive the result, or a one-element tuple of it "
                            f"(numpy.matmul's form, out=(arr,), which matmul takes for its one result); got {got}")


#: what a call whose out no kernel writes says of it (the plan's layouts and copies are those of the stand-in)
STAND_IN_NOTE = ("out is not an array a kernel writes in place (its strides, or its byte order): the product went into a "
                 "C-ordered array of out's shape and dtype on its device (the layout shown for out is that array's), "
                 "copied into out after it: one more pass over the result, which an out of row- or column-major "
                 "matrices, its batch one stride apart, in this machine's byte order saves")


def _through_stand_in(refusal: OutNotInPlace, a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: Any,
                      variant: str, out: Any, out_dtype: Any, precision: str | None, verify: VerifyMode) -> Any:
    """``gemm`` into a C-ordered stand-in of ``out`` (:func:`.interop.stand_in.stand_in`), copied into ``out`` once
    the call succeeded; ``refusal`` raised where ``out``'s library makes no stand-in (or its elements overlap)."""
    made = stand_in(out)
    if made is None:
        raise refusal
    tmp, copy = made
    gemm(a, b, c, alpha=alpha, beta=beta, device=device, variant=variant, out=tmp, out_dtype=out_dtype, precision=precision,
         verify=verify)
    copy()
    _note_last(STAND_IN_NOTE)
    return out


def _bound_for_check(a: Any, b: Any, c: Any, alpha: float, beta: float, device: Any, variant: str, out: Any, out_dtype: Any,
                     precision: str | None) -> tuple[plan_cache.CacheEntry, Any, Any] | None:
    """For a verified call with ``out``: the plan gemm runs and the call bound to it, as gemm binds them (refusing what
    gemm refuses), and ``record(delivered)``, which makes it this thread's last product and, once ``out`` was written,
    tells torch's autograd; None where the call is not one device launch of polygemm's own backends on the operands as
    given (host data, a plugin's backend, an operand made whole first, an out no kernel writes)."""
    if isinstance(out, np.ndarray):  # host data: computed into a result of its own (its copies are made once, there)
        return None
    try:
        entry, call, hit, uncached = plan_cache.bind(a, b, c, alpha, beta, device, variant, out, out_dtype, precision)
    except (NotWhole, OutNotInPlace):
        return None
    if call is None or entry.host or entry.plugin:
        return None

    def record(delivered: bool) -> None:
        _local.last = (entry.plan, hit, _NONE_MADE, call.alpha, call.beta, uncached)
        if delivered:
            torch_written(out)

    return entry, call, record


def _plan_with_out(a: Any, b: Any, c: Any, *, alpha: float, beta: float, device: Any, variant: str, out: Any,
                   out_dtype: Any, precision: str | None) -> Plan:
    """The plan ``gemm`` would run with this ``out``, refusing what it would refuse: the plan cache's (a repeated
    verified call pays a lookup, not an :func:`explain`), else :func:`explain`'s for operands made whole first."""
    try:
        with planning_only():  # host operands a call would copy are described, not copied (the product copies them)
            return plan_cache.bind(a, b, c, alpha, beta, device, variant, out, out_dtype, precision)[0].plan
    except (NotWhole, OutNotInPlace):  # (an out no kernel writes: the checked result is copied into it as it is)
        return explain(a, b, c, alpha=alpha, beta=beta, device=device, variant=variant, out=out, out_dtype=out_dtype,
                       precision=precision)


def explain(
    a: ArrayInput = _REQUIRED,
    b: ArrayInput = _REQUIRED,
    c: ArrayInput | None = None,
    *extra: NoReturn,
    alpha: ScalarInput = 1.0,
    beta: ScalarInput | None = None,
    device: DeviceLike | None = None,
    variant: str = "auto",
    out: ArrayInput | None = None,
    out_dtype: DTypeLike | None = None,
    precision: str | None = None,
    verify: VerifyMode = None,
    **unexpected: NoReturn,
) -> Plan:
    """Return the :class:`Plan` ``gemm`` would run for these arguments, without running it.

    The plan names the backend, variant and device, why they were chosen, the layouts,
    any copies or padding, (for ``device="auto"``) the backends passed over and why, and
    whether it came from the plan cache (``plan.cached``). It is cached for the next call, unless
    ``plan.uncached`` says why not (an operand the cache does not key, such as a list or a memmap).

    It takes what ``matmul`` takes too: with no ``c``, a 1-D ``a`` is a row (1×K) and a 1-D ``b`` a
    column (K×1), so ``explain(a, b)`` describes ``matmul(a, b)`` (a note says so).
    With ``verify`` (or a process default), a note describes the check and its estimated cost. An ``out`` no kernel
    writes in place is described as ``gemm`` writes it, through a stand-in of its own library (a device ``out``'s
    takes its size of device memory while ``explain`` runs).
    """
    if "torch" in _modules and dynamo_tracing():
        return eager(explain)(a, b, c, *extra, alpha=alpha, beta=beta, device=device, variant=variant,  # type: ignore[no-any-return]
                              out=out, out_dtype=out_dtype, precision=precision, verify=verify, **unexpected)
    if extra or unexpected or a is _REQUIRED or b is _REQUIRED:
        _operands_given("explain", a, b, extra, unexpected)
    # verify read first, as gemm reads it: a bad mode is refused in gemm's words whatever else is wrong
    mode = _verify_default.mode if verify is None else parse_verify(verify)
    if c is not None and type(c) is not type(a):
        _c_of_theirs(a, b, c, out, out_dtype)
    taken: list[str] = []
    if c is None and isinstance(out, (tuple, list)) and _outputs(out):  # matmul's ufunc form, out=(arr,), as matmul reads it
        out = _one_out(out, a, b)
    if c is None and 1 in (ndim_of(a), ndim_of(b)):  # matmul's vectors, as matmul hands them to gemm
        a, b, out, va, vb = matmul_operands(a, b, out)
        taken = _vector_notes(va, vb)
    if beta is None:
        beta = 0.0 if c is None else 1.0
    through, refusal, bound = None, None, None
    host = torch_host_views(a, b, c, out) if type(a) is not np.ndarray and (device is None or type(device) is str) else None
    if host is not None:  # CPU tensors: planned (and cached) as gemm plans them, through NumPy views of their memory
        try:
            with planning_only():
                bound = plan_cache.bind_whole(host[0], host[1], host[2], alpha, beta, device, variant, host[3], out_dtype,
                                              precision=precision)
        except (ArgumentError, ShapeError, DTypeError, BackendUnavailableError):  # said of the tensors themselves, below
            pass
    try:
        if bound is None:
            with planning_only():  # the host copies a call would make are described, not made
                bound = plan_cache.bind_whole(a, b, c, alpha, beta, device, variant, out, out_dtype, precision=precision)
    except OutNotInPlace as exc:  # described as gemm runs it: into a stand-in of out's library, copied into out
        refusal = exc
    if bound is not None:
        entry, call, hit, uncached, made = bound
        kind = entry.plan.problem.dtype.name
        if hit and call is not None and kind in INTEGER_DTYPES:  # a cached integer plan keys no scalar's value: its
            why = integer_scalars_refusal(kind, call.alpha, call.beta)  # refusal said as gemm says it
            if why is not None:
                raise ArgumentError(why)
    if refusal is not None:  # (outside the except: what follows is not chained to the refusal)
        through = stand_in(out)  # (a device out's stand-in takes its size of memory while this runs)
        if through is None:
            raise refusal
        with planning_only():
            entry, call, hit, uncached, made = plan_cache.bind_whole(a, b, c, alpha, beta, device, variant, through[0],
                                                                      out_dtype, precision=precision)
    plan = _read_copies(detached(entry.plan, hit, made, *((1.0, 0.0) if call is None else (call.alpha, call.beta)),
                                 uncached, (STAND_IN_NOTE,) if through is not None else ()))
    plan.notes = taken + plan.notes
    if mode is not None:
        plan.notes.append(describe_check(plan, mode, out is not None))
    return plan


def _vector_notes(va: bool, vb: bool) -> list[str]:
    """What a plan says of matmul's vectors (a 1-D ``a``, ``b``)."""
    return [f"{name} is a vector (1-D), taken as a {how} as polygemm.matmul takes it"
            for name, how, vec in (("a", "row (1xK)", va), ("b", "column (Kx1)", vb)) if vec]


def _note_last(text: str) -> None:
    """Add ``text`` to the notes of this thread's last plan (a verified call says what its check did)."""
    last = getattr(_local, "last", None)
    if last is not None:
        _local.last = last[:6] + ((last[6] if len(last) > 6 else ()) + (text,),)


def _adopt_last(plan: Plan) -> None:
    """Make ``plan`` (the call's own, with its ``out``) this thread's last plan, in place of the plan of the product a
    verified call computed into a result of its own; the rest (cached or not, alpha, beta, notes) as that call left it."""
    last = getattr(_local, "last", None)
    if last is not None:
        _local.last = (plan,) + tuple(last[1:])


def _last_product() -> tuple[Plan, float, float]:
    """The plan of this thread's last product (the cached plan itself, not a copy: read it, never change it) and that
    call's alpha and beta."""
    last = _local.last
    return last[0], last[3], last[4]


def last_plan() -> Plan | None:
    """The plan of the last ``gemm`` call completed in this thread (None before any).

    It describes the call (shapes, layouts, backend, variant) and holds none of its data;
    ``plan.cached`` says whether that call reused a cached plan (``plan.uncached``, why a plan made
    for it is not kept for the next one, if it is not). It is the caller's own copy:
    changing it changes nothing polygemm runs.
    """
    last = getattr(_local, "last", None)
    return None if last is None else _read_copies(detached(*last))


def _read_copies(plan: Plan) -> Plan:
    """``plan`` (the caller's copy) with the copies made of its operands as they were read (torch's of a lazy
    conjugate or negation: the whole tensor) named first among its copies, as the copies a plan makes are."""
    problem = plan.problem
    made = [op.copy_note for op in (problem.a, problem.b, problem.c) if op is not None and op.copy_note]
    if made:
        plan.copies = made + plan.copies
    return plan
