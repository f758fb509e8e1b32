"""How to cast: the expression that gives a user's operand a supported dtype, in the terms of its
library, and the dtype check that says it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError
from ..interop.kinds import kind_of
from .dtypes import DTYPE_HELP, HALF_DTYPES, SUPPORTED_DTYPES, np_name

__all__ = ["cast_hint", "promotion_hint", "check_dtype"]

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
    return f"np.asarray({name}, dtype={spelt})"  # a list, tuple, memoryview ...


def promotion_hint(x: tuple[str, Any, np.dtype], y: tuple[str, Any, np.dtype]) -> str:
    """How to give two arrays of different dtypes (each ``(name, given, dtype)``) one: the narrower
    cast up to the dtype numpy.matmul computes them in (float16 with float32: float32), never
    ``b.astype(a.dtype)`` whatever the two are, which for a float16 ``a`` and a float32 ``b`` would
    round ``b`` to float16 (inf beyond 65504), unlike the product NumPy gives. Where NumPy promotes
    them to no dtype (bfloat16 with float16), both go to float32, as torch and JAX promote them, which
    holds either exactly; the cast of the second to the first's (bfloat16 past 65504 to float16's inf, or
    float16 to bfloat16's 8 bits) follows as the other way."""
    try:
        wide: np.dtype | None = np.result_type(x[2], y[2])
    except TypeError:  # numpy.exceptions.DTypePromotionError (bfloat16 with float16)
        wide = None
    if wide is None and x[2].name in HALF_DTYPES and y[2].name in HALF_DTYPES:
        f32 = np.dtype(np.float32)
        return (f"{cast_hint(x[0], x[1], f32)} and {cast_hint(y[0], y[1], f32)} (float32: what torch and JAX compute "
                f"{x[2].name} with {y[2].name} in, holding both exactly; NumPy promotes them to no dtype), or "
                f"{cast_hint(y[0], y[1], x[2])} to compute in {x[2].name}")
    if wide is None or wide.name not in SUPPORTED_DTYPES:
        return cast_hint(y[0], y[1], x[2])
    casts = " and ".join(cast_hint(name, given, wide) for name, given, dt in (x, y) if dt != wide)
    return f"{casts} ({wide.name}: what numpy.matmul computes {x[2].name} with {y[2].name} in)"


def check_dtype(name: str, dtype: np.dtype, given: Any = None) -> np.dtype:
    """``dtype`` if polygemm knows it, else DTypeError saying how to convert ``name`` (``given``:
    what the user passed, when it is not an array: a list has no ``astype``). ``out`` is told
    to be an array of the result's dtype instead: a converted copy of it would receive the
    result, and ``out`` itself would not."""
    if dtype.name not in SUPPORTED_DTYPES:
        if name == "out":
            raise DTypeError(f"out has dtype {dtype.name}; the result is written in the dtype of a and b (or float32 for "
                             f"float16 and bfloat16 inputs), one of {DTYPE_HELP}. Pass an out of that dtype, e.g. "
                             f"np.empty(out.shape, a.dtype), or omit out (a converted copy of out would receive the result, "
                             f"not out)")
        how = cast_hint(name, given, np.dtype(np.float32))
        if given is not None and not hasattr(given, "astype") and not hasattr(given, "__dlpack__"):  # a list, tuple, memoryview ...
            how += f" (NumPy reads this {type(given).__name__} as {dtype.name})"
        raise DTypeError(f"{name} has dtype {dtype.name}; polygemm supports {DTYPE_HELP}. Convert it, e.g. {how}.")
    return dtype
