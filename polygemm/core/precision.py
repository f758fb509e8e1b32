"""``precision=``: how accurate a float32 product must be, in the words users know from
``torch.set_float32_matmul_precision`` and JAX's ``Precision``, and the process default.

A precision is a floor on accuracy and a permission to go faster, as torch's is:

* ``"highest"`` (the default): float32-level error, that of SGEMM (or of an emulation proven
  within the same bound);
* ``"high"``: the error of the three-pass class (e.g. 3xTF32, bf16x3);
* ``"medium"``: the error of one pass on the tensor cores (TF32 or bfloat16 inputs).

A backend runs a problem under a precision when one of its paths is at least that accurate: a
result within the float32 bound is within every looser one, so a backend whose float32 path is
SGEMM meets all three, and explain says what ran. Only a backend whose most accurate path is
looser than the one asked refuses, naming what it offers.

The precision governs float32 inputs and complex64 (whose products are float32 products of the
real and imaginary planes), as torch's governs float32 only: float16 and bfloat16 products are
exact in float32 and accumulated in it, float64 and complex128 are computed in double, integers
exactly; for those the precision is taken and changes nothing.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ArgumentError, ArgumentTypeError, UnsupportedProblemError, did_you_mean
from .env import warn_bad_environment
from .text import short_repr

__all__ = ["PRECISIONS", "GOVERNED_DTYPES", "MEDIUM_INPUT_ERROR", "parse_precision", "set_float32_matmul_precision", "get_float32_matmul_precision",
           "precision_from_env", "meets", "governed", "looser_or_equal", "error_bound", "describe", "precision_refusal", "used_precision"]

#: the precisions, most accurate first
PRECISIONS: tuple[str, ...] = ("highest", "high", "medium")
_RANK = {name: i for i, name in enumerate(PRECISIONS)}

#: the input dtypes whose products a precision governs
GOVERNED_DTYPES: tuple[str, ...] = ("float32", "complex64")

_ACCEPTED = "'highest' (float32-level error, the default), 'high' (the 3-pass class) or 'medium' (one pass, e.g. TF32)"


def parse_precision(value: Any, source: str = "precision") -> str:
    """``value`` as one of :data:`PRECISIONS`; ArgumentError naming ``source`` (``precision``,
    ``POLYGEMM_PRECISION``) and the accepted values otherwise (ArgumentTypeError for no string)."""
    if type(value) is str and value in _RANK:
        return value
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{source} must be a string, one of {_ACCEPTED}; got {short_repr(value)} ({type(value).__name__})")
    near = str(value).strip().lower()  # any case, around spaces, a NumPy string: as verify= reads its modes
    if near in _RANK:
        return PRECISIONS[_RANK[near]]
    hint = did_you_mean([value], PRECISIONS)
    raise ArgumentError(f"{source}={short_repr(value)} is not a precision{hint}; pass {_ACCEPTED}")


def precision_from_env(raw: str | None) -> str:
    """``$POLYGEMM_PRECISION`` as a precision: unset or empty, ``"highest"``; a value that is none,
    ``"highest"`` with a warning saying so (the most accurate, rather than a failed import)."""
    if raw is None or not raw.strip():
        return "highest"
    try:
        return parse_precision(raw.strip(), "POLYGEMM_PRECISION")
    except ArgumentError as exc:
        warn_bad_environment(f"{exc}; keeping 'highest'")
        return "highest"


#: the process default (read by the plan cache on every call that names no precision: a module
#: global, set by :func:`set_float32_matmul_precision`, never recomputed per call)
DEFAULT: str = precision_from_env(os.environ.get("POLYGEMM_PRECISION"))


def set_float32_matmul_precision(precision: str) -> None:
    """Set the precision of every later call that passes no ``precision=`` (the process default,
    as ``torch.set_float32_matmul_precision`` sets torch's): ``"highest"``, ``"high"`` or
    ``"medium"``. ``$POLYGEMM_PRECISION`` gives the default at import."""
    global DEFAULT
    DEFAULT = parse_precision(precision)


def get_float32_matmul_precision() -> str:
    """The process default precision (``"highest"`` unless set or given by ``$POLYGEMM_PRECISION``)."""
    return DEFAULT


def governed(dtype: str) -> bool:
    """Whether a precision governs products of ``dtype`` inputs (float32 and complex64)."""
    return dtype in GOVERNED_DTYPES


def meets(offered: str, asked: str) -> bool:
    """Whether a path of precision ``offered`` meets a call asking ``asked`` (it is at least as accurate)."""
    return _RANK[offered] <= _RANK[asked]


def looser_or_equal(best: str) -> tuple[str, ...]:
    """The precisions a path of precision ``best`` meets: itself and every looser one."""
    return PRECISIONS[_RANK[best]:]


#: what "medium" adds to the float32 bound, as a multiple of |A|@|B|: both inputs of each product rounded once, to
#: bfloat16 (8 significant bits, the loosest one-pass format; TF32 keeps 11)
MEDIUM_INPUT_ERROR = 2.0 * 2.0 ** -8

_FLOAT32_BOUND = "|C - C_ref| <= c*K*2^-24*(|A|@|B|) + 2^-24*|C_ref| (float32 accumulation)"
_BOUNDS = {
    "highest": _FLOAT32_BOUND,
    "high": "within c*K*2^-24*(|A|@|B|) + 2^-24*|C_ref| up to the split's small constant (3-pass: high and low parts)",
    "medium": "|C - C_ref| <= (2*2^-8 + c*K*2^-24)*(|A|@|B|) + 2^-24*|C_ref| (inputs rounded to bfloat16's 8 bits, or TF32's 11)",
}


def error_bound(dtype: str, out_dtype: str, used: str) -> str:
    """The elementwise error bound that holds for a product of ``dtype`` inputs written as
    ``out_dtype``, computed under precision ``used`` (C_ref: the product in exact arithmetic)."""
    if dtype in ("float32", "complex64"):
        return _BOUNDS[used] + (" on each real product" if dtype == "complex64" else "")
    if dtype in ("float64", "complex128"):
        return "|C - C_ref| <= c*K*2^-53*(|A|@|B|) + 2^-53*|C_ref| (float64 accumulation)"
    if dtype in ("float16", "bfloat16"):
        unit = "2^-11" if out_dtype == "float16" else "2^-8" if out_dtype == "bfloat16" else "2^-24"
        return f"|C - C_ref| <= c*K*2^-24*(|A|@|B|) + {unit}*|C_ref| (products exact in float32, accumulated in it)"
    if dtype == "bool":
        return "exact (logical: any of a[i, k] and b[k, j], as numpy.matmul computes bool)"
    return f"exact (integer arithmetic, wrapping modulo 2^{8 * _INT_BYTES.get(dtype, 8)} on overflow as numpy.matmul's {dtype})"


_INT_BYTES = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}


def describe(dtype: str, out_dtype: str, asked: str, used: str) -> str:
    """What explain says of a plan's precision: the one used, the one asked when it differs, the bound that holds."""
    if not governed(dtype):
        return (f"{dtype} inputs are computed as they are (precision={asked!r} governs float32 and complex64 only); "
                f"bound: {error_bound(dtype, out_dtype, used)}")
    asked_note = "" if asked == used else f" (asked {asked!r}: this path is more accurate, and meets it)"
    return f"{used}{asked_note}; bound: {error_bound(dtype, out_dtype, used)}"


def precision_refusal(where: str, dtype: str, asked: str, offered: tuple[str, ...]) -> UnsupportedProblemError:
    """The refusal of a precision a backend (or variant) ``where`` cannot meet for ``dtype``, naming
    what it offers and the way to the one asked."""
    if offered:
        alternatives = f"pass precision={offered[0]!r}{' (or ' + ', '.join(repr(p) for p in offered[1:]) + ')' if offered[1:] else ''}, or "
        has = f"its {dtype} paths meet {', '.join(repr(p) for p in offered)}"
    else:
        alternatives, has = "", f"it has no {dtype} path"
    return UnsupportedProblemError(f"precision={asked!r} is not met by {where} for {dtype} ({has}); {alternatives}use a "
                                   f"device that computes {dtype} at {asked!r} (device='cpu' does; device='auto' picks one)")


def used_precision(variants: Any, name: str, asked: str) -> str:
    """The precision the variant ``name`` of ``variants`` (a backend's table) computes float32 in; ``asked`` for a
    variant the table does not hold (a plugin's plan naming another): the backend took the call as asked."""
    for v in variants:
        if v.name == name:
            own = getattr(v, "precision", "highest")
            return own if own in _RANK else asked
    return asked
