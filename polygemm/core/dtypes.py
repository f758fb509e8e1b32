"""The dtype catalogue: the dtypes polygemm knows, bfloat16 through ml_dtypes, dtype arguments
and the result dtype rules."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import DTypeError
from .text import short_repr

__all__ = ["SUPPORTED_DTYPES", "DTYPE_ALIASES", "dtype_alias", "HALF_DTYPES", "COMPLEX_DTYPES", "INTEGER_DTYPES", "KNOWN_DTYPES", "DTYPE_HELP", "keeps_values", "bfloat16", "dtype_named", "as_dtype", "finfo", "native_dtype",
           "np_name", "parse_dtype", "check_result_dtype",
           "integer_scalars_refusal"]

#: the floating dtypes: those every backend's error bound (polygemm.testing) is written for
SUPPORTED_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")


#: complex dtypes, computed as numpy.matmul computes them (by the backends that declare them)
COMPLEX_DTYPES: tuple[str, ...] = ("complex64", "complex128")


#: integer dtypes (and bool), computed exactly as numpy.matmul computes them: integers wrap modulo 2**bits on overflow,
#: bool is the logical product (any of a[i, k] and b[k, j])
INTEGER_DTYPES: tuple[str, ...] = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")


#: every dtype polygemm knows; each backend declares the subset it computes
KNOWN_DTYPES: tuple[str, ...] = SUPPORTED_DTYPES + COMPLEX_DTYPES + INTEGER_DTYPES


#: the 16-bit input dtypes: products accumulate in float32 and may be stored as float32
HALF_DTYPES: tuple[str, ...] = ("float16", "bfloat16")


DTYPE_HELP = ("float16, float32 or float64, and bfloat16 (ml_dtypes.bfloat16 for NumPy arrays); complex64, complex128; "
               "integers (int8 to int64, uint8 to uint64) and bool as numpy.matmul computes them "
               "(each backend computes a subset: see `polygemm variants`)")


#: how many significand bits each dtype holds every value of exactly (integers: their magnitude bits)
_EXACT_BITS = {"bool": 1, "int8": 7, "uint8": 8, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63, "uint64": 64,
               "float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
#: the exponent range of the floating dtypes (the largest finite power of two)
_EXP_MAX = {"float16": 15, "bfloat16": 127, "float32": 127, "float64": 1023}


def keeps_values(src: str, dst: str) -> bool:
    """Whether casting ``src`` to ``dst`` keeps every value exactly (no rounding, no overflow, no part dropped): what a
    hint may suggest. float16 to bfloat16, int64 to float64, complex to any real dtype do not."""
    if src == dst:
        return True
    if src in COMPLEX_DTYPES:
        return dst == "complex128"  # complex64 into complex128; no real dtype holds an imaginary part
    if dst in COMPLEX_DTYPES:
        return keeps_values(src, "float32" if dst == "complex64" else "float64")
    if src not in _EXACT_BITS or dst not in _EXACT_BITS:
        return False
    if dst in INTEGER_DTYPES:
        if src not in INTEGER_DTYPES:
            return False
        signed_ok = src == "bool" or src.startswith("u") or not dst.startswith("u")
        return signed_ok and _EXACT_BITS[src] <= _EXACT_BITS[dst]
    if src in INTEGER_DTYPES:  # an integer into a float: its magnitude bits within the significand
        return _EXACT_BITS[src] <= _EXACT_BITS[dst]
    return _EXACT_BITS[src] <= _EXACT_BITS[dst] and _EXP_MAX[src] <= _EXP_MAX[dst]


_BF16_MISSING = "bfloat16 needs the ml_dtypes package (pip install ml_dtypes), whose bfloat16 is NumPy's"


@functools.lru_cache(maxsize=None)
def _ml_dtypes() -> Any:
    """ml_dtypes, imported on first need (NumPy's bfloat16 comes from it; its import costs most of
    ``import polygemm``'s time, which a program that never meets bfloat16 need not pay); None when
    it is not installed (a dependency: a missing one only costs bfloat16)."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is installed with polygemm
        return None
    return ml_dtypes


def bfloat16() -> np.dtype:
    """NumPy's bfloat16 dtype (``ml_dtypes.bfloat16``); DTypeError when ml_dtypes is missing."""
    ml = _ml_dtypes()
    if ml is None:
        raise DTypeError(_BF16_MISSING)
    return np.dtype(ml.bfloat16)


def dtype_named(name: str) -> np.dtype:
    """The NumPy dtype of one of :data:`SUPPORTED_DTYPES` by name (``"bfloat16"`` too)."""
    return as_dtype(name)


def as_dtype(value: Any) -> np.dtype:
    """``numpy.dtype(value)``, where the name ``"bfloat16"`` is ml_dtypes' type even before ml_dtypes
    was imported (NumPy knows the name only after that import)."""
    return bfloat16() if isinstance(value, str) and value == "bfloat16" else np.dtype(value)


def finfo(dtype: Any) -> Any:
    """``numpy.finfo`` of a floating dtype, bfloat16 included (``ml_dtypes.finfo``: NumPy's
    own refuses it): ``eps``, ``tiny``, ``max`` as NumPy's."""
    d = as_dtype(dtype)
    if d.name == "bfloat16":
        return _ml_dtypes().finfo(d)  # a bfloat16 dtype exists only with ml_dtypes
    return np.finfo(d)


def native_dtype(dtype: Any) -> np.dtype[Any]:
    """``dtype`` in this machine's byte order: what polygemm computes and returns for operands of
    ``dtype`` (a '>f8' operand is read through a native copy, and compared as float64)."""
    dt = as_dtype(dtype)
    return dt if dt.isnative else dt.newbyteorder("=")


#: the short names users type for a dtype (as torch, JAX and the results tables write them)
DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "f16": "float16", "bf16": "bfloat16", "fp32": "float32",
                 "float": "float32", "single": "float32", "f32": "float32", "fp64": "float64", "double": "float64",
                 "f64": "float64", "c64": "complex64", "cfloat": "complex64", "c128": "complex128", "cdouble": "complex128"}


def dtype_alias(text: str) -> str:
    """A dtype's name as typed (``fp16``, ``half``, ``BF16``) as NumPy's (float16, bfloat16); other text stripped and
    lower-cased, for a list of names to accept or refuse."""
    name = text.strip().lower()
    return DTYPE_ALIASES.get(name, name)


def np_name(dtype: np.dtype) -> str:
    """How a user spells ``dtype`` in NumPy code (bfloat16 is ml_dtypes')."""
    return "ml_dtypes.bfloat16" if dtype.name == "bfloat16" else f"np.{dtype.name}"


def parse_dtype(name: str, value: Any) -> np.dtype:
    """``value`` as a NumPy dtype: anything ``numpy.dtype`` takes, or another library's dtype
    object (``torch.float32``) by its name; DTypeError naming ``name`` otherwise."""
    try:
        dt = as_dtype(value)
    except TypeError:  # another library's dtype object, e.g. torch.float32
        tail = str(value).rsplit(".", 1)[-1]
        if tail not in KNOWN_DTYPES:
            raise DTypeError(f"{name}={short_repr(value)} is not a dtype polygemm writes; pass float32 (or float16, bfloat16, "
                             f"float64; the inputs' own dtype for integer, complex and bool products)") from None
        return dtype_named(tail)
    if dt.kind in "OSUMm" or (dt.kind == "V" and dt.type.__module__.partition(".")[0] != "ml_dtypes"):  # ml_dtypes' are V too
        # a list, a structured or a text dtype: NumPy reads it as "void", no dtype to cast a result to
        raise DTypeError(f"{name}={short_repr(value)} is no numeric dtype (NumPy reads it as {dt.name}); pass float32 (or "
                         f"float16, bfloat16, float64; the inputs' own dtype for integer, complex and bool products)")
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
        # only (out is never a copy): the refusal says the way there, not only the dtype
        if given_by == "out":
            how = (f"pass an out of {inputs.name}{' (or float32, where the device writes it: cpu, cuda)' if half else ''}, "
                   f"or omit out and cast the result "
                   f"into yours (out[...] = result)")
        elif result.name in KNOWN_DTYPES and keeps_values(inputs.name, result.name):  # a wider float result asked for
            how = f"omit {given_by}, or cast a and b to {result.name} to compute in it"
        elif result.name in SUPPORTED_DTYPES and inputs.name in SUPPORTED_DTYPES:  # a narrower one: the result's cast
            how = (f"omit {given_by} and cast the result (result.astype({result.name!r})): a cast of {inputs.name} a and b "
                   f"to {result.name} would round them before the product")
        else:  # no dtype polygemm computes, or a cast of a and b that would change their values: the result's cast
            why = (f"{result.name} is no dtype polygemm computes" if result.name not in KNOWN_DTYPES
                   else f"a cast of {inputs.name} a and b to {result.name} would change their values")
            how = f"omit {given_by} ({why}), and cast the result if you need it so (result.astype({result.name!r}))"
        raise DTypeError(
            f"the result dtype must be {inputs.name}"
            + (f" (or float32: {inputs.name} products accumulate in float32 and may be stored so)" if half else "")
            + f"; got {given_by} {result.name}: {how}"
        )


class RoundedFraction(float):
    """The float64 of a non-whole alpha or beta that rounds to a whole number: a ``Fraction`` (``Fraction(10**30 + 1,
    10**30)`` is 1.0 as a float64, ``Fraction(1, 10**400)`` 0.0) or a longdouble finer than a float64
    (``np.longdouble(2**62) + 0.5`` is 2.0**62). A floating product scales by it; an integer product, which takes whole
    numbers only, refuses it as the value it is, quoted as ``shown``."""

    shown: str = ""

    def __new__(cls, rounded: float, shown: str = "") -> "RoundedFraction":
        self = super().__new__(cls, rounded)
        self.shown = shown  # (a default: a copy or pickle rebuilds it from the float alone, then sets its __dict__)
        return self


def integer_scalars_refusal(dtype: str, alpha: float, beta: float) -> str | None:
    """Why ``alpha`` and ``beta`` cannot scale an integer (or bool) product of ``dtype``, or None: integer
    arithmetic takes whole numbers; a bool product is logical, which no factor scales."""
    if dtype == "bool":
        if alpha != 1.0 or beta != 0.0:
            return (f"bool products are logical (numpy.matmul's any of a[i, k] and b[k, j]): alpha and beta do not scale "
                    f"them; pass alpha=1 and beta=0 (got alpha={alpha:g}, beta={beta:g}), or cast a and b to an integer "
                    f"dtype (a.astype(np.int64)) to count")
        return None
    info = np.iinfo(dtype)
    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, RoundedFraction) or not float(value).is_integer():
            shown = (value.shown if isinstance(value, RoundedFraction) else "") or repr(float(value))  # (every digit: 3.0000000000000004 is no 3)
            return (f"{name}={shown} is no whole number: {dtype} products are computed in integer arithmetic, as "
                    f"numpy.matmul computes them; pass a whole {name}, or cast a and b to a floating dtype that holds "
                    f"their values (e.g. a.astype(np.float64), exact below 2**53)")
        if not info.min <= int(value) <= info.max:  # as NumPy 2 refuses a Python int its dtype cannot hold (OverflowError)
            wider = ("cast a and b to a wider integer dtype (e.g. a.astype(np.int64))" if info.bits < 64 else
                     "scale the result yourself (no integer dtype is wider than 64 bits)")
            digits = str(int(value))
            shown = digits if len(digits) <= 24 else f"{digits[:2 + (digits[0] == '-')]}...({len(digits.lstrip('-'))} digits)"
            return (f"{name}={shown} is out of bounds for {dtype} ({info.min} to {info.max}): {dtype} products scale in "
                    f"{dtype} arithmetic; pass {name} in that range, or {wider}")
    return None
