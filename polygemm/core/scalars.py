"""alpha and beta: what a real scalar is, read from Python, NumPy, ml_dtypes or another library's
0-D array, and whether it survives as a float32 kernel scalar."""

from __future__ import annotations

import decimal
import fractions
import math
import numbers
from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from ..interop.dlpack import dlpack_interface
from ..interop.torch import torch_detached, torch_resolved
from .dtypes import RoundedFraction
from .text import short_repr

__all__ = ["parse_scalar", "fits_float32", "FLOAT32_MAX"]

FLOAT32_MAX = float(np.finfo(np.float32).max)
#: below half float32's smallest subnormal a nonzero value rounds to 0 as float32
_FLOAT32_TINY = float(np.finfo(np.float32).smallest_subnormal) / 2
#: float32's smallest normal number: below it a float32 keeps fewer significant bits (a subnormal)
_FLOAT32_NORMAL = float(np.finfo(np.float32).tiny)
#: every int of magnitude up to 2**53 is exactly a float64
_FLOAT64_EXACT = 2**53
#: NumPy's float scalars that a float64 holds exactly (not longdouble, which may be finer)
_NUMPY_FLOATS = frozenset({np.float16, np.float32, np.float64})
_LONGDOUBLE = np.longdouble

def _ml_real(value: Any) -> bool:
    """Whether ``value`` is a real scalar of ml_dtypes (bfloat16, float8_e4m3fn, int4, ...): NumPy
    counts none of them among its floating or integer scalars; each converts exactly to a float64.
    Its complex types (complex32, bcomplex32) are not real."""
    return (isinstance(value, np.generic) and type(value).__module__.partition(".")[0] == "ml_dtypes"
            and "complex" not in type(value).__name__)


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
            # a tensor that requires grad
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
    """How to pass a 0-D (or one-element) array of another library as ``alpha``/``beta``, which polygemm does not
    read itself (device or lazy data)."""
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


def parse_scalar(name: str, value: Any) -> float:
    """``alpha`` or ``beta`` as a finite float64 (a whole number float64 would round stays an exact int, for integer
    products): an int, a float, a ``Fraction``, a NumPy integer or
    floating scalar, a real ml_dtypes scalar (bfloat16, float8_*, int4 ...: each is exactly a
    float64) or a 0-D array of one; ArgumentError naming ``name`` otherwise (bools, and
    ``numpy.timedelta64``, which NumPy counts among its integers, are no factor)."""
    t = type(value)
    # the common scalars first, at the cost of a type test: a finite float (x - x is 0.0 for finite x only) and an int
    # a float64 holds exactly are the float64 they are
    if t is float and value - value == 0.0:
        return value
    if t is int and -_FLOAT64_EXACT <= value <= _FLOAT64_EXACT:
        return float(value)
    if t in _NUMPY_FLOATS:  # NumPy's float16/32/64 scalars (a computed norm, a dtype's eps): their float64, if finite
        v = float(value)
        if v - v == 0.0:
            return v
    if t is RoundedFraction:  # parsed already (the plan cache parses before normalize does)
        return value
    given = value  # a torch tensor is quoted as the caller wrote it (tensor(inf), not np.float32(inf))
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-D array is its value to NumPy
        value = value[()]
    elif not isinstance(value, (numbers.Real, np.generic, np.ndarray)) and (_foreign_0d(value) or hasattr(value, "__dlpack__")):
        value = _host_0d(name, torch_detached(name, value))  # (a tensor that requires grad: refused as an operand is)  # another library's 0-D array: its element when it is CPU data
    if isinstance(value, (bool, np.bool_, np.timedelta64)) or not (_ml_real(value) or isinstance(value, (numbers.Real, np.floating, np.integer))):
        how = f"; convert it, e.g. float({name})" if isinstance(value, decimal.Decimal) else ""
        if isinstance(value, (complex, np.complexfloating)):  # complex operands are taken; their scale goes into a
            how = (f"; alpha and beta are real numbers for every dtype: for a complex factor, scale an operand by it "
                   f"({'gemm(alpha * a, b)' if name == 'alpha' else 'gemm(a, b, beta * c)'})")
        if isinstance(value, np.ndarray) and value.size == 1 and _real_element(value.reshape(-1)[0]):
            # a one-element array (x.sum(keepdims=True), a norm over an axis): told the way to its scalar
            how = f"; a one-element array of {value.ndim} dimension{'s' if value.ndim > 1 else ''} is no scalar: pass {name}.item()"
        elif _foreign_0d(value) or _foreign_size1(value):
            how = _foreign_scalar_hint(name, value)
        # a TypeError too (a string, a complex, a Decimal is no value of the wrong size but of the wrong kind: NumPy's
        # arithmetic raises TypeError for each); nan, inf and a float64 overflow below stay ValueErrors
        shown = _quoted(given, value)
        raise ArgumentTypeError(f"{name} must be a real number (an int, a float, a Fraction or a NumPy real scalar, "
                            f"ml_dtypes' real scalars too, or a 0-D array of one); got {short_repr(shown)} ({type(shown).__name__}){how}")
    if isinstance(value, fractions.Fraction):
        if value.denominator == 1:  # a whole number: as the int it is (exact for integer products)
            value = value.numerator
        else:
            try:
                rounded = float(value)
            except OverflowError:
                rounded = math.inf  # (refused below, as too large)
            if rounded.is_integer():  # no whole number, whatever its float64: integer products refuse it
                return RoundedFraction(rounded, f"a Fraction within {abs(rounded) * 2**-52 or 2**-1074:g} of {rounded:g}")
    try:
        v = float(value)
        if isinstance(value, (int, np.integer)) and v != int(value):
            return int(value)  # type: ignore[return-value]  # a whole number float64 would round: integer products scale by it exactly
    except OverflowError:
        raise ArgumentError(f"{name} is too large for a float64 ({str(value)[:20]}...) and for every integer dtype; pass a "
                            f"finite real number (an integer product's within its dtype's range)") from None
    if not math.isfinite(v):
        if isinstance(value, np.floating) and np.isfinite(value):  # a longdouble beyond float64's range
            raise ArgumentError(f"{name} is too large for a float64 ({value!r}); pass a finite real number within float64's range")
        raise ArgumentError(f"{name} must be finite; got {_quoted(given, value)!r}")
    if type(value) is _LONGDOUBLE and v != value:  # (compared as longdoubles: exactly)
        return _finer_longdouble(value, v)
    return v


def _finer_longdouble(value: np.longdouble, rounded: float) -> float:
    """A finite longdouble that a float64 does not hold (x86's 80-bit longdouble keeps 64 significant bits), ``rounded``
    its float64: the int it is when whole, for an integer product to scale by it exactly; else ``rounded``, marked as
    no whole number where ``rounded`` is whole, for an integer product to refuse it as the value it is. A floating
    product scales by ``rounded`` either way (rounded again to its own scalar type)."""
    if value == np.floor(value):  # whole, tested in longdouble arithmetic (its float64 may be whole when it is not)
        return int(value)
    if rounded.is_integer():
        return RoundedFraction(rounded, str(value))
    return rounded


def _quoted(given: Any, value: Any) -> Any:
    """What a refusal quotes of ``alpha``/``beta``: a torch tensor as the caller wrote it (``tensor(inf)``, whose repr
    says what it is), anything else as the element polygemm read from it (another library's repr may say nothing)."""
    return given if type(given).__module__.partition(".")[0] == "torch" else value


def fits_float32(value: float) -> bool:
    """Whether ``value`` (alpha, beta) survives as a float32 kernel scalar: neither past
    float32's range nor below its normal numbers, where a float32 holds fewer bits (alpha=1e-45
    became 1.4e-45, every result 40% off, and 1e-40 0.99999e-40), unless it is exactly such a
    subnormal (2.0**-140). Plain float arithmetic in the common case: the plan cache asks on
    every call."""
    mag = abs(value)
    if _FLOAT32_NORMAL <= mag <= FLOAT32_MAX or value == 0.0:
        return True
    return _FLOAT32_TINY < mag < _FLOAT32_NORMAL and float(np.float32(value)) == value
