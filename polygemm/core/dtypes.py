"""The dtype catalogue: the dtypes polygemm knows, bfloat16 through ml_dtypes, dtype arguments
and the result dtype rules."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import DTypeError
from .text import short_repr

__all__ = ["SUPPORTED_DTYPES", "HALF_DTYPES", "DTYPE_HELP", "bfloat16", "dtype_named", "as_dtype", "finfo", "native_dtype",
           "np_name", "parse_dtype", "check_result_dtype"]

#: dtypes polygemm knows at all; each backend declares the subset it computes.
SUPPORTED_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")


#: the 16-bit input dtypes: products accumulate in float32 and may be stored as float32
HALF_DTYPES: tuple[str, ...] = ("float16", "bfloat16")


DTYPE_HELP = ("float16, float32 or float64, and bfloat16 (ml_dtypes.bfloat16 for NumPy arrays) "
               "(each backend computes a subset: see `polygemm variants`)")


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
        if tail not in SUPPORTED_DTYPES:
            raise DTypeError(f"{name}={short_repr(value)} is not a dtype polygemm writes; pass float32 (or float16, bfloat16, float64)") from None
        return dtype_named(tail)
    if dt.kind in "OSUMm" or (dt.kind == "V" and dt.type.__module__.partition(".")[0] != "ml_dtypes"):  # ml_dtypes' are V too
        # a list, a structured or a text dtype: NumPy reads it as "void", no dtype to cast a result to
        raise DTypeError(f"{name}={short_repr(value)} is no numeric dtype (NumPy reads it as {dt.name}); pass float32 (or "
                         f"float16, bfloat16, float64)")
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
            how = (f"pass an out of {inputs.name}{' or float32' if half else ''}, or omit out and cast the result "
                   f"into yours (out[...] = result)")
        elif result.name in SUPPORTED_DTYPES:
            how = f"omit {given_by}, or cast a and b to {result.name} to compute in it"
        else:  # no dtype polygemm computes (int64, complex64): casting a and b to it is no way
            how = (f"omit {given_by} ({result.name} is no dtype polygemm computes: {', '.join(SUPPORTED_DTYPES)}), and "
                   f"cast the result if you need it so (result.astype({result.name!r}))")
        raise DTypeError(
            f"the result dtype must be {inputs.name}"
            + (f" (or float32: {inputs.name} products accumulate in float32 and may be stored so)" if half else "")
            + f"; got {given_by} {result.name}: {how}"
        )
