"""Other libraries' spellings: what a user of numpy.matmul, SciPy's BLAS, torch or JAX meant by an
argument polygemm's functions do not take.

gemm, matmul and explain take ``*extra`` and ``**unexpected`` (typed NoReturn: a type checker still
refuses anything passed there) only to say what was meant; Python's own refusal names the word and
no way on."""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentTypeError, did_you_mean
from .text import short_repr

__all__ = ["misused_arguments"]

_ACCEPTED = {
    "gemm": ("c", "alpha", "beta", "device", "variant", "out", "out_dtype", "precision", "verify"),
    "explain": ("c", "alpha", "beta", "device", "variant", "out", "out_dtype", "precision", "verify"),
    "matmul": ("out", "out_dtype", "precision", "device", "verify"),
    "polygemm.dask.gemm": ("c", "alpha", "beta", "device", "variant", "out_dtype", "precision", "verify"),
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
    **{k: " (a numpy.matmul ufunc keyword polygemm has no counterpart for: nothing is cast, and the result is a new array "
          "or out itself)" for k in ("casting", "order", "subok", "signature", "where", "axes", "axis", "extobj")},
}


def misused_arguments(func: str, extra: tuple[Any, ...], unexpected: dict[str, Any]) -> ArgumentTypeError:
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
