"""matmul's vectors: a 1-D ``a`` is a row (1×K) and a 1-D ``b`` a column (K×1), as views of the
same memory (``out`` is written through them), in each library's own terms."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from ..interop.cuda_array_interface import device_interface
from ..interop.dlpack import dlpack_interface
from ..interop.kinds import Foreign, type_name
from .dtypes import np_name
from .hints import check_dtype
from .read import check_dlpack_out

__all__ = ["joint_lists", "dlpack_vector", "ndim_of", "shape_of", "vector_result_shape", "unit_axis", "matmul_operands"]

def dlpack_vector(x: Any, name: str) -> tuple[Any, int | None]:
    """``x`` and its number of dimensions, for matmul. An object that offers only an array
    interface (``__cuda_array_interface__``, no ``ndim``) has the interface's; one that offers
    only DLPack (no ``ndim``: NumPy reads either as a 0-D object) is read through DLPack: CPU
    data becomes the NumPy view of its memory (a vector gets its unit dimension through it, and
    ``out`` is written through it); other data is passed on as it is."""
    if isinstance(x, np.ndarray) or isinstance(getattr(x, "ndim", None), int):
        return x, ndim_of(x)
    dev = device_interface(x, name)  # an object that offers only an array interface (no ndim, no shape of NumPy's)
    if dev is not None:
        return x, len(dev[1].get("shape", ()))
    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        return x, ndim_of(x)
    where, data, iface = dlpack_interface(name, x)
    if name == "out":  # said of the object given, as gemm says it, not of the view ("out is read-only")
        check_dlpack_out(name, x, data, iface)
    if iface is None:
        check_dtype(name, data.dtype, x)  # said of the object given (gemm sees only the view)
        # through Foreign: gemm takes the view as x's own, which sides with no library (a tensor beside it decides)
        return np.asarray(Foreign(data.__array_interface__, x, data)).view(data.dtype), int(data.ndim)
    return x, len(iface.get("shape", ()))


def ndim_of(x: Any) -> int | None:
    """The number of dimensions of an array or array-like as NumPy reads it, of an object offering only DLPack as its
    export says (None: unknown)."""
    nd = getattr(x, "ndim", None)
    if isinstance(nd, int):
        return nd
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):  # (NumPy would read it as a 0-D object)
        try:
            return dlpack_vector(x, "a")[1]
        except Exception:  # gemm reads it and says what is wrong with it
            return None
    try:
        return int(np.ndim(x))
    except Exception:  # e.g. a ragged list: gemm says what is wrong with it
        return None


def shape_of(x: Any) -> tuple[int, ...] | None:
    """The shape of an array, or of an array-like as NumPy reads it (a list, a tuple, which
    have no ``.shape``); None when NumPy cannot read one (a ragged list: gemm says why)."""
    shape = getattr(x, "shape", None)
    if shape is not None:
        return tuple(int(n) for n in shape)
    try:
        return tuple(int(n) for n in np.shape(x))
    except Exception:
        return None


def vector_result_shape(a2: Any, b2: Any, va: bool, vb: bool) -> tuple[int, ...] | None:
    """matmul's result shape for operands with the vectors' unit dimensions in (None: the
    shapes do not combine; gemm says why)."""
    sa, sb = shape_of(a2), shape_of(b2)
    if sa is None or sb is None or len(sa) < 2 or len(sb) < 2:
        return None
    try:
        lead = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        return None
    return lead + (() if va else (int(sa[-2]),)) + (() if vb else (int(sb[-1]),))


def unit_axis(x: Any, name: str, where: int) -> Any:
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
            kind, data, iface = dlpack_interface(name, x)
            if kind == "host":
                check_dlpack_out(name, x, data, iface)  # refused as gemm refuses it, not as the view made of it
                return _out_view(x, data, where)
    if not hasattr(x, "reshape"):
        if hasattr(x, "__dlpack__") or hasattr(x, "__cuda_array_interface__"):  # device data offered only by an interface
            how = "DLPack" if hasattr(x, "__dlpack__") else "__cuda_array_interface__"
            raise ShapeError(f"{name} is a vector (1-D) {type(x).__name__} that polygemm cannot reshape (it offers only "
                             f"{how}); pass it as a matrix, e.g. {name}[None, :] or {name}[:, None] in its own library")
        if name == "out":  # NumPy's view of it may be a copy (a memoryview, an object's __array__): out would not get the result
            raise ArgumentTypeError(f"out must be a NumPy array (or a device array) that can receive the result; got {type(x).__name__}")
        x = np.expand_dims(np.asarray(x), where)
        # a range, an array.array, a memoryview: passed on as a memoryview of NumPy's view of it, so that a hint to cast it
        # says np.asarray(...), as it says for a matrix of that kind, not an astype it does not have
        return memoryview(x) if x.dtype.kind in "biufc" else x
    if isinstance(x, np.ndarray):
        return np.expand_dims(x, where)
    shape = tuple(x.shape)
    at = len(shape) + 1 + where
    if callable(getattr(x, "unsqueeze", None)):  # torch: a view by construction
        return x.unsqueeze(at)
    if name == "out" and getattr(x, "strides", None) is None:
        return _unstrided_out(x, where)
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


def _out_view(out: Any, data: np.ndarray, where: int) -> np.ndarray:
    """NumPy's view ``data`` of ``out``'s CPU memory with the vector's unit dimension at ``where``,
    made through :class:`~polygemm.interop.kinds.Foreign` so that gemm takes it as ``out``'s own (of
    ``out``'s library, beside ``a`` and ``b`` of that library), not as a NumPy array."""
    seen = np.asarray(Foreign(data.__array_interface__, out, data)).view(data.dtype)  # (bfloat16's typestr is raw bytes)
    return np.expand_dims(seen, where)


def _unstrided_out(x: Any, where: int) -> Any:
    """A vector ``out`` of no strides (JAX's) with its unit dimension, as a view of its memory: its
    reshape may be a new array, which would receive the result while ``out`` stayed as it was. CPU
    DLPack data becomes NumPy's view of it, refused as gemm refuses an ``out`` it cannot write (an
    immutable JAX array); anything else is refused."""
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        _, data, iface = dlpack_interface("out", x)
        check_dlpack_out("out", x, data, iface)
        if iface is None:
            return _out_view(x, data, where)
    # a TypeError too, as gemm's refusal of an out that is no array it can write
    raise ArgumentTypeError(f"out ({type_name(x)}, a vector without strides) cannot take the vector's unit dimension as a "
                            f"view of its memory (its reshape may be a copy, which would receive the result instead of out); "
                            f"pass an out whose memory polygemm can address (a NumPy array, a CuPy array, a torch tensor), "
                            f"or omit out to get a new result")


def joint_lists(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` and ``b`` as they are, unless both are Python lists or tuples: then as NumPy arrays of the one dtype
    numpy.matmul would compute them in (``[[1, 2.5]]`` and ``[[1], [2]]``: float64), since no dtype of theirs was
    chosen to keep. A list beside an array keeps the rule that a and b share a dtype (its refusal names the cast)."""
    if type(a) not in (list, tuple) or type(b) not in (list, tuple):
        return a, b
    try:
        na, nb = np.asarray(a), np.asarray(b)
    except Exception:  # (a ragged list, objects: read_operand names the argument and what it takes)
        return a, b
    if na.dtype == nb.dtype or na.dtype.kind not in "biufc" or nb.dtype.kind not in "biufc":
        return a, b
    joint = np.result_type(na, nb)
    return na.astype(joint), nb.astype(joint)


def matmul_operands(a: Any, b: Any, out: Any) -> tuple[Any, Any, Any, bool, bool]:
    """``matmul``'s operands as ``gemm`` takes them: ``(a2, b2, out2, va, vb)``, a 1-D ``a`` as a row
    (``va``), a 1-D ``b`` as a column (``vb``), ``out`` as a view with those unit dimensions back
    (written in place); matrices and stacks as they are. Refuses what numpy.matmul refuses
    (scalars) and an ``out`` that cannot receive the vector result as a view."""
    for name, x in (("a", a), ("b", b)):
        if x is None or isinstance(x, (str, bytes, bytearray)):  # a string is no scalar to scale by (NumPy: 0-D text)
            raise ArgumentTypeError(f"{name} must be a vector, a matrix or a stack of matrices (a NumPy array, array-like or "
                                f"device array); got {'None' if x is None else f'{type(x).__name__} {x!r:.40}'}")
    a, b = joint_lists(a, b)
    a, nda = dlpack_vector(a, "a")
    b, ndb = dlpack_vector(b, "b")
    for name, nd, x in (("a", nda, a), ("b", ndb, b)):
        if nd == 0 and not isinstance(x, (numbers.Number, np.generic, np.ndarray)) and not hasattr(x, "__array_interface__") \
                and not hasattr(x, "__cuda_array_interface__") and not hasattr(x, "__dlpack__"):
            # a dict, a set, a generator, any object NumPy reads as one element of dtype object: not a scalar to scale by
            raise DTypeError(f"{name} is a {type(x).__name__}, which NumPy reads as a 0-D object array; pass a vector, a "
                             f"matrix or a stack of matrices of numbers (a NumPy array, a list of lists, a device array)")
        if nd == 0:
            raise ShapeError(f"{name} is a scalar (0-D {type(x).__name__}); matmul takes vectors (1-D) and matrices or stacks "
                             f"of matrices (at least 2-D), and refuses scalars as numpy.matmul does: scale with a * b instead")
    va, vb = nda == 1, ndb == 1
    if not (va or vb):
        got = getattr(out, "shape", None)  # (an out of no shape of its own, a DLPack-only one: gemm reads it)
        want = None if got is None else vector_result_shape(a, b, False, False)
        sa, sb = shape_of(a), shape_of(b)
        if want is not None and len(tuple(got)) < len(want) and sa and sb and sa[-1] == sb[-2]:  # type: ignore[arg-type]
            # fewer dimensions than the result (a 1-D out of a matrix product): no reshape of it would do, its shape would
            raise ShapeError(f"out must have the result's shape {want}; got {tuple(got)}")  # type: ignore[arg-type]
        return a, b, out, False, False
    a2: Any = unit_axis(a, "a", -2) if va else a  # (K,) -> (1, K)
    b2: Any = unit_axis(b, "b", -1) if vb else b  # (K,) -> (K, 1)
    out2 = dlpack_vector(out, "out")[0] if out is not None else None
    if out is not None:  # a view of out with the unit dimensions back, written in place
        # a NumPy scalar (np.float32(0)) has a shape and a reshape, but it is immutable: its reshape is a new
        # array, which would receive the result while out came back unchanged (numpy.matmul refuses it too)
        if isinstance(out2, (list, tuple, np.generic)) or not hasattr(out2, "shape"):
            raise ArgumentTypeError(f"out must be a NumPy array (or a device array) that can receive the result; got {type(out).__name__}"
                                + (f" (a NumPy scalar cannot be written; pass np.empty((), {np_name(out.dtype)}))"
                                   if isinstance(out, np.generic) else ""))
        want, got = vector_result_shape(a2, b2, va, vb), tuple(getattr(out2, "shape"))
        if want is not None and got != want:
            raise ShapeError(f"out must have the result's shape {want}; got {got}")
        if vb:
            out2 = unit_axis(out2, "out", -1)
        if va:
            out2 = unit_axis(out2, "out", -2)
    return a2, b2, out2, va, vb
