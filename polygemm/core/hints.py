"""How to cast: the expression that gives a user's operand a supported dtype, in the terms of its
library, and the dtype checks that say it; how to make a ``c`` of another library one of ``a``'s and
``b``'s. A hint never suggests a cast that changes values (complex to real, int64 to float64, float16 to
bfloat16): where no dtype keeps them, it names the device that computes the dtype as it is, or says
under which condition the cast is exact (and where values overflow to inf)."""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from ..errors import ArgumentError, DTypeError
from ..interop.kinds import kind_of, type_name
from .dtypes import COMPLEX_DTYPES, DTYPE_HELP, HALF_DTYPES, INTEGER_DTYPES, KNOWN_DTYPES, as_dtype, keeps_values, np_name, parse_dtype
from .text import short_repr

__all__ = ["cast_hint", "promotion_hint", "check_dtype", "c_cast_hint", "c_library_refusal", "unsupported_dtype", "dtype_way_on"]

def cast_hint(name: str, given: Any, dtype: np.dtype) -> str:
    """An expression that gives the user's ``name`` (``given``: the object passed) the supported
    dtype ``dtype``, in the terms its kind has (a list has no ``astype``, a tensor has ``to``)."""
    spelt = np_name(dtype)
    if given is None or hasattr(given, "astype"):
        return f"{name}.astype({spelt})"
    if kind_of(given) == "torch":  # a tensor has no astype
        return f"{name}.to(torch.{dtype.name})"
    if hasattr(given, "__dlpack__"):  # an array of a library polygemm reads through DLPack only
        return f"np.from_dlpack({name}).astype({spelt}) for CPU data, or its own library's conversion"
    if dtype.kind in "iub":  # NumPy 2 refuses a Python int out of an integer dtype's range (OverflowError); astype wraps it
        return f"np.asarray({name}).astype({spelt})"
    return f"np.asarray({name}, dtype={spelt})"  # a list, tuple, memoryview ...


def broadcast_hint(name: str, given: Any, shape: tuple[int, ...], dtype: np.dtype | None = None) -> str:
    """An expression that broadcasts the user's ``name`` (``given``) to ``shape`` in its own library's terms (a
    tensor's expand, CuPy's broadcast_to; NumPy's for the rest): a NumPy view of a tensor would be refused as an
    operand of another library. With ``dtype`` (the result's), one of that dtype: a hint that led to a dtype refusal
    next (a Python float is NumPy's float64) would not do."""
    kind = kind_of(given)
    have = getattr(given, "dtype", None)
    other = dtype is not None and str(have).rpartition(".")[2] != dtype.name
    if kind == "torch":
        return f"{name}{f'.to(torch.{dtype.name})' if other and dtype is not None else ''}.expand({', '.join(str(d) for d in shape)})"
    if kind == "cupy":
        return f"cupy.broadcast_to({f'{name}.astype(cupy.{dtype.name})' if other and dtype is not None else name}, {shape})"
    if dtype is not None and have is None and np.ndim(given) == 0:  # a Python number
        return f"np.full({shape}, {name}, {np_name(dtype)})"
    return f"np.broadcast_to({f'np.asarray({name}, {np_name(dtype)})' if other and dtype is not None else name}, {shape})"


def c_library_refusal(a: Any, b: Any, c: Any, out: Any = None, out_dtype: Any = None) -> ArgumentError:
    """The one-library refusal of a ``c`` of another library than ``a`` and ``b`` (:func:`~polygemm.interop.kinds.foreign_c`),
    with the way to make it one of theirs: for tensors, ``torch.full`` of a number or ``torch.as_tensor`` of the rest
    (expanded to the result's shape where it only broadcasts to it), of the result's dtype on a's device."""
    kind = kind_of(a)
    if kind == "torch":
        way = f"make c a tensor too, e.g. {_torch_c(c, _result_shape(a, b), _torch_result_dtype(out, out_dtype))}"
    else:
        way = f"convert c, e.g. with {kind}'s asarray / from_dlpack"
    return ArgumentError(f"a is a {type_name(a)} and c a {type_name(c)}: pass operands of one library ({way})")


def _torch_c(c: Any, shape: tuple[int, ...] | None, dtype: str) -> str:
    """The torch expression that makes ``c`` a tensor of ``shape`` (None: unknown) and ``dtype`` on a's device."""
    where = f"dtype={dtype}, device=a.device"
    if shape is not None and isinstance(c, (bool, int, float, complex)):
        return f"torch.full({shape}, {short_repr(c)}, {where})"
    made = f"torch.as_tensor(c, {where})"
    try:
        given = tuple(np.shape(c))
    except Exception:  # noqa: BLE001 - an array-like NumPy cannot measure: its shape is left for the user to know
        given = None
    if shape is None or given == shape:
        return made
    try:  # expand takes c only where it broadcasts to the result; else c's shape is what to fix, and the hint says so
        fits = given is not None and np.broadcast_shapes(given, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        return f"{made} (c has shape {given}; it must broadcast to the result's {shape})"
    return f"{made}.expand({', '.join(str(n) for n in shape)})"


def _result_shape(a: Any, b: Any) -> tuple[int, ...] | None:
    """The shape of ``a @ b`` as their declared shapes give it (None where they do not: c's hint then names no shape)."""
    try:
        sa, sb = tuple(int(n) for n in a.shape), tuple(int(n) for n in b.shape)
        return tuple(int(n) for n in np.broadcast_shapes(sa[:-2], sb[:-2])) + (sa[-2], sb[-1])
    except Exception:  # noqa: BLE001 - no shape, fewer than two dimensions, batches that do not broadcast
        return None


def _torch_result_dtype(out: Any, out_dtype: Any) -> str:
    """The result's dtype as a torch user writes it: out's, out_dtype's, else a's."""
    if out is not None:
        return "out.dtype"
    if out_dtype is not None:
        try:
            return f"torch.{parse_dtype('out_dtype', out_dtype).name}"
        except DTypeError:  # (refused as such once c is of their library)
            pass
    return "a.dtype"


def promotion_hint(x: tuple[str, Any, np.dtype], y: tuple[str, Any, np.dtype]) -> str:
    """How to give two arrays of different dtypes (each ``(name, given, dtype)``) one: the narrower
    cast up to the dtype numpy.matmul computes them in (float16 with float32: float32), never
    ``b.astype(a.dtype)`` whatever the two are, which for a float16 ``a`` and a float32 ``b`` would
    round ``b`` to float16 (inf beyond 65504), unlike the product NumPy gives. Where NumPy promotes
    them to no dtype (bfloat16 with float16), both go to float32, as torch and JAX promote them, which
    holds either exactly; the cast of the second to the first's (bfloat16 past 65504 to float16's inf, or
    float16 to bfloat16's 8 bits) follows as the other way."""
    if kind_of(x[1]) == "torch" and kind_of(y[1]) == "torch":  # two tensors: the dtype torch promotes them to
        torch: Any = sys.modules["torch"]
        try:
            named = str(torch.promote_types(x[1].dtype, y[1].dtype)).removeprefix("torch.")
        except RuntimeError:  # torch promotes uint16, uint32 and uint64 with no other dtype: NumPy's promotion says it
            named = ""
        if named in KNOWN_DTYPES:
            wide_t = as_dtype(named)
            casts = " and ".join(cast_hint(name, given, wide_t) + _exactness(dt.name, wide_t.name)
                                 for name, given, dt in (x, y) if dt != wide_t)
            keep = _keeping(x[2], y[2], wide_t)
            if keep is None:
                return f"{casts} ({wide_t.name}: what torch promotes {x[2].name} with {y[2].name} to)"
            # torch's promotion changes values (int64 with float16 is float16: inf above 65504): the cast that keeps
            # them first, torch's after it, saying what it loses
            kept = " and ".join(cast_hint(name, given, keep) + _exactness(dt.name, keep.name) for name, given, dt in (x, y))
            return (f"{kept} ({keep.name}: the product then runs in {keep.name}), or {casts} to compute in "
                    f"{wide_t.name}, what torch promotes {x[2].name} with {y[2].name} to")
    try:
        wide: np.dtype | None = np.result_type(x[2], y[2])
    except TypeError:  # numpy.exceptions.DTypePromotionError (bfloat16 with float16)
        wide = None
    if wide is None and x[2].name in HALF_DTYPES and y[2].name in HALF_DTYPES:
        f32 = np.dtype(np.float32)
        return (f"{cast_hint(x[0], x[1], f32)} and {cast_hint(y[0], y[1], f32)} (float32: what torch and JAX compute "
                f"{x[2].name} with {y[2].name} in, holding both exactly; NumPy promotes them to no dtype), or "
                f"{cast_hint(y[0], y[1], x[2])} to compute in {x[2].name}")
    if wide is None or wide.name not in KNOWN_DTYPES:
        return cast_hint(y[0], y[1], x[2]) + _exactness(y[2].name, x[2].name)
    casts = " and ".join(cast_hint(name, given, wide) + _exactness(dt.name, wide.name) for name, given, dt in (x, y) if dt != wide)
    return f"{casts} ({wide.name}: what NumPy promotes {x[2].name} with {y[2].name} to)"


def _keeping(x: np.dtype, y: np.dtype, promoted: np.dtype) -> np.dtype | None:
    """Where ``promoted`` does not hold every value of ``x`` and ``y``: the narrowest of float32 and float64 (complex64
    and complex128 for a complex pair) that does, else the widest (float64, complex128: exact below 2**53), unless
    that is ``promoted`` itself; None where ``promoted`` holds them all."""
    if keeps_values(x.name, promoted.name) and keeps_values(y.name, promoted.name):
        return None
    complex_ = x.kind == "c" or y.kind == "c"
    order = ("complex64", "complex128") if complex_ else ("float32", "float64")
    keep = next((d for d in order if keeps_values(x.name, d) and keeps_values(y.name, d)), order[-1])
    return None if keep == promoted.name else np.dtype(keep)


#: the largest finite float16, past which a cast to float16 gives inf
_FLOAT16_MAX = 65504


def _exactness(src: str, dst: str) -> str:
    """What a cast of ``src`` values to ``dst`` keeps, where it does not keep every one ("" where it does): said plainly
    where values overflow (float16's from 65520 on are inf), not as a rounding."""
    if keeps_values(src, dst):
        return ""
    if src in COMPLEX_DTYPES and dst not in COMPLEX_DTYPES:
        return " (which drops the imaginary parts)"
    real = {"complex64": "float32", "complex128": "float64"}.get(dst, dst)
    # (float16's largest is 65504; rounding to nearest takes values below 65520 to it, 65520 and above to inf)
    overflows = "those of 65520 or more overflow to inf" if real == "float16" else ""
    if src in INTEGER_DTYPES and dst not in INTEGER_DTYPES:
        bits = {"float16": 11, "bfloat16": 8, "float32": 24}.get(real, 53)
        wide = src != "bool" and np.iinfo(src).max > _FLOAT16_MAX  # (int16's 32767 fits float16's range)
        return f" (exact only for values below 2**{bits} in magnitude{'; ' + overflows if overflows and wide else ''})"
    if dst in INTEGER_DTYPES and src not in INTEGER_DTYPES:
        return f" (which truncates {src} values to whole numbers; those past {dst}'s range do not survive)"
    if dst in INTEGER_DTYPES:
        return f" (which wraps {src} values that {dst} cannot hold)"
    return f" (which rounds {src} values that {dst} cannot hold{'; ' + overflows if overflows else ''})"


def _lossless_target(dtype: str, dtypes: tuple[str, ...]) -> str | None:
    """The first of ``dtypes`` (float32 first, then the others in order) that holds every ``dtype`` value exactly."""
    order = sorted(dtypes, key=lambda d: (d != "float32", d != "float64"))
    return next((d for d in order if d != dtype and keeps_values(dtype, d)), None)


def unsupported_dtype(backend: str, dtype: str, dtypes: tuple[str, ...], residency: str = "host",
                      widens: Callable[[str], bool] | None = None) -> str:
    """Why backend ``backend`` (computing ``dtypes``) refuses ``dtype`` inputs, and the way on (:func:`dtype_way_on`)."""
    return (f"backend {backend!r} does not support dtype {dtype}; it supports {', '.join(dtypes)}: "
            f"{dtype_way_on(dtype, dtypes, residency, widens)}")


def dtype_way_on(dtype: str, dtypes: tuple[str, ...], residency: str = "host",
                 widens: Callable[[str], bool] | None = None) -> str:
    """The way on for ``dtype`` inputs where only ``dtypes`` are computed: a cast to one of them that keeps every value,
    where one exists; device='cpu', which computes every dtype polygemm knows as numpy.matmul does; never a cast that
    changes values unless it says when it is exact. ``widens(target)``: whether the device writes float32 results of
    ``target`` inputs (None: taken as it does, where several devices are weighed)."""
    cpu = ("device='cpu'" if residency == "host" else
           "device='cpu' on host copies of the operands (e.g. cupy.asnumpy(a), tensor.cpu())")
    target = _lossless_target(dtype, dtypes)
    if dtype in COMPLEX_DTYPES:
        how = (f"cast a and b to {target} (a.astype(np.{target})), or use {cpu}" if target is not None
               else f"use {cpu}, which computes {dtype} as numpy.matmul does (no real dtype holds complex values)")
    elif dtype == "bool":
        how = f"use {cpu}, which computes bool as numpy.matmul does (the logical product)"
        if target is not None:
            how += (f"; or cast a and b to {target} (a.astype(np.{target})) and take result > 0, that logical product "
                    f"(exact while K < 2**{24 if target in ('float32', 'float16', 'bfloat16') else 53})")
    elif dtype in INTEGER_DTYPES:
        exact = f"use {cpu}, which computes {dtype} exactly as numpy.matmul does (wrapping on overflow)"
        if target is not None:
            # a result stored in the target dtype holds whole numbers exactly up to 2**(its significand's bits)
            bits = {"float16": 11, "bfloat16": 8, "float32": 24}.get(target, 53)
            wider = (" (2**24 with out_dtype=np.float32, where the device writes float32 results)"
                     if target in ("float16", "bfloat16") and (widens is None or widens(target)) else "")
            how = (f"{exact}; or cast a and b to {target} (a.astype(np.{target}): every {dtype} value is exact in it, and "
                   f"the product is exact while its sums stay below 2**{bits}{wider})")
        elif "float64" in dtypes and dtype in ("int64", "uint64"):
            how = f"{exact}; a cast to float64 (a.astype(np.float64)) is exact only for values and sums below 2**53"
        else:
            how = exact
    else:
        how = (f"cast a and b to {target} (a.astype(np.{target}), which holds every {dtype} value), or use {cpu}"
               if target is not None else f"use {cpu}")
    return how


def c_cast_hint(c: Any, c_dtype: np.dtype, result: np.dtype) -> str:
    """How to give ``c`` (of ``c_dtype``) the result's dtype: its cast where that keeps its values (or rounds a float to
    the float result asked for), else the cast of a and b to the dtype numpy.matmul would compute ``a @ b + c`` in (a
    complex c beside real a and b: complex)."""
    if keeps_values(c_dtype.name, result.name):
        return cast_hint("c", c, result)
    if (c_dtype.kind == "f" or c_dtype.name == "bfloat16") and result.kind in "fV":  # a float c to the float result
        return cast_hint("c", c, result) + _exactness(c_dtype.name, result.name)
    try:
        wide: np.dtype | None = np.result_type(c_dtype, result)
    except TypeError:
        wide = None
    if wide is not None and wide.name in KNOWN_DTYPES and wide != result:
        lossy = _exactness(result.name, wide.name)[2:-1]  # (int64 a and b to float64: exact below 2**53 only)
        how = (f"a.astype({np_name(wide)}) and b.astype({np_name(wide)}) ({wide.name}: what numpy computes a @ b + c in"
               f"{'; ' + lossy if lossy else ''})")
        if c_dtype.kind == "c" and result.kind != "c":  # no real dtype holds an imaginary part: no cast of c is offered
            return how
        return f"{how}, or {cast_hint('c', c, result)}{_exactness(c_dtype.name, result.name)}"
    return cast_hint("c", c, result) + _exactness(c_dtype.name, result.name)


def check_dtype(name: str, dtype: np.dtype, given: Any = None) -> np.dtype:
    """``dtype`` if polygemm knows it, else DTypeError saying how to convert ``name`` (``given``:
    what the user passed, when it is not an array: a list has no ``astype``). ``out`` is told
    to be an array of the result's dtype instead: a converted copy of it would receive the
    result, and ``out`` itself would not."""
    if dtype.name not in KNOWN_DTYPES:
        if name == "out":
            raise DTypeError(f"out has dtype {dtype.name}; the result is written in the dtype of a and b (or float32 for "
                             f"float16 and bfloat16 inputs), one of {DTYPE_HELP}. Pass an out of that dtype, e.g. "
                             f"np.empty(out.shape, a.dtype), or omit out (a converted copy of out would receive the result, "
                             f"not out)")
        raise DTypeError(f"{name} has dtype {dtype.name}; polygemm supports {DTYPE_HELP}. {_convert_unknown(name, given, dtype)}")
    return dtype


def _convert_unknown(name: str, given: Any, dtype: np.dtype) -> str:
    """The way from a dtype polygemm does not know to one it does, keeping the values: float8 and other narrow ml_dtypes
    floats fit float32; a longdouble has no dtype here that holds it; an object array is told the dtypes of its elements."""
    if dtype.kind == "O":
        return (f"Convert it to the dtype of its elements, e.g. {cast_hint(name, given, np.dtype(np.float64))} for real "
                f"numbers, {cast_hint(name, given, np.dtype(np.complex128))} for complex ones.")
    if dtype.kind in "fc" and dtype.itemsize > (8 if dtype.kind == "f" else 16):  # longdouble, clongdouble
        return (f"No dtype polygemm computes holds every {dtype.name} value (float64 keeps 53 bits); numpy.matmul computes "
                f"{dtype.name} as it is.")
    if getattr(dtype.type, "__module__", "").partition(".")[0] == "ml_dtypes":  # float8_*, float4, int4 ...
        return f"Convert it, e.g. {cast_hint(name, given, np.dtype(np.float32))}, which holds every {dtype.name} value."
    how = cast_hint(name, given, np.dtype(np.float64))
    if given is not None and not hasattr(given, "astype") and not hasattr(given, "__dlpack__"):  # a list, tuple, memoryview ...
        how += f" (NumPy reads this {type(given).__name__} as {dtype.name})"
    return f"Convert it to one of them where its values allow, e.g. {how}."
