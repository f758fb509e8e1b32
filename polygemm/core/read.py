"""User objects into operands: NumPy arrays and array-likes, device arrays (by their array
interface), DLPack arrays; every refusal names the argument and what to pass instead."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from ..interop.cuda_array_interface import device_interface
from ..interop.dlpack import dlpack_interface
from ..interop.kinds import kind_of, type_name
from ..interop.torch import (torch_conjugate_memory, torch_copy_note, torch_detached, torch_dlpack_only, torch_refusal,
                             torch_resolved)
from .dtypes import DTYPE_HELP, bfloat16, np_name
from .hints import check_dtype
from .hostcopy import host_convert
from .layout import Layout, check_ndim, host_layout, layout_from_strides
from .operand import Operand

__all__ = ["read_operand", "check_dlpack_out", "NotWhole", "OutNotInPlace", "OutOverlaps", "OutBatchUnwalkable", "unsupported_strides"]


class OutNotInPlace(ArgumentError):
    """An ``out`` no kernel writes: matrices neither row- nor column-major, a batch one stride
    cannot walk, or another byte order than this machine's. ``gemm`` computes into a C-ordered array of ``out``'s shape,
    dtype and device made by ``out``'s own library (NumPy, CuPy, torch) and copies that into
    ``out``, as ``numpy.matmul`` writes any ``out``; other arrays, and an ``out`` whose elements
    overlap, get this error."""


class OutOverlaps(ArgumentError):
    """An ``out`` whose elements may share memory: no stand-in is made for it (one result would overwrite
    another). Its own class so that ``matmul`` can say it of the ``out`` it was given."""


class OutBatchUnwalkable(OutNotInPlace):
    """``out``'s batch is not one that a single stride walks. Its own class so that ``matmul``,
    which hands ``gemm`` a view of the ``out`` it was given, can say it of that ``out`` rather
    than of the view."""


class NotWhole(ArgumentError):
    """A device input (``a``, ``b`` or ``c``) that no kernel addresses as it is: matrices neither
    row- nor column-major, or a batch one stride cannot walk. ``gemm`` has a CuPy array or a
    torch tensor made whole by its own library (broadcast to ``shape`` first, when set) and
    calls again; other device arrays get this error."""

    def __init__(self, message: str, name: str = "", shape: tuple[int, ...] | None = None) -> None:
        # name's default: unpickling calls the class with the message alone (name and shape come back from __dict__)
        super().__init__(message)
        self.name, self.shape = name, shape


def unsupported_strides(name: str, residency: str, strides: Any) -> ArgumentError:
    """A device array whose matrices are neither row- nor column-major (no unit step along one
    of the last two axes, or a reversed one). A device ``out`` cannot be copied for the kernel."""
    msg = (f"{name} is a {residency} array with strides {strides} (bytes) that are neither row- nor column-major "
           f"(one of its last two axes must step by one element, forward)")
    if name == "out":
        return OutNotInPlace(f"{msg}; pass an out that is (e.g. a new contiguous array), or omit out to get a new result")
    return NotWhole(f"{msg}; polygemm copies CuPy arrays and torch tensors so (their own library makes them contiguous), "
                    f"not other device arrays: make it contiguous first", name)


def _unwritable_strides(name: str, arr: np.ndarray) -> OutNotInPlace:
    """The refusal of an ``out`` no kernel writes in place: what its strides do (most often the
    last axis's: a view like ``x[..., ::2]``), and what to pass instead."""
    size = arr.itemsize
    spelt = np_name(arr.dtype)
    if arr.ndim > 2:  # a Fortran-ordered stack interleaves its matrices: "pass a Fortran-ordered array" would not do
        what = (f"a C-ordered array, e.g. np.empty({arr.shape}, {spelt}), or one whose last two axes are a transposed "
                f"C order, e.g. np.empty(batch + (n, m)).swapaxes(-1, -2)")
    else:
        what = f"a C- or Fortran-ordered array, e.g. np.empty({arr.shape}, {spelt})"
    if host_layout(arr) is not None:  # the matrices are fine: a batch stride is not a whole number of elements
        return OutNotInPlace(f"{name} has strides {arr.strides}: its batch strides (all but the last two) are not whole "
                             f"numbers of its {size}-byte elements; pass {what}, or omit {name} to get a new result")

    def step(st: int) -> str:
        if st % size:
            return f"{st} bytes, not a whole number of its {size}-byte elements"
        n = st // size
        return f"{n} element{'' if abs(n) == 1 else 's'}" + (" (reversed)" if n < 0 else "")

    why = f"the last axis steps by {step(arr.strides[-1])}, the second-to-last by {step(arr.strides[-2])}"
    if arr.ndim > 2 and arr.flags.f_contiguous:
        why += " (an N-D Fortran-ordered array interleaves its matrices)"
    return OutNotInPlace(
        f"{name} has strides {arr.strides}: its matrices (the last two axes) are neither row- nor column-major: {why}. "
        f"polygemm writes a matrix in place only row-major (the last axis steps by 1 element, the second-to-last by at "
        f"least a row) or column-major (the second-to-last steps by 1, the last by at least a column). Pass {what}, or "
        f"omit {name} to get a new result")


def _check_ufunc_override(name: str, obj: np.ndarray) -> None:
    """ArgumentTypeError for an ndarray subclass that takes numpy.matmul over (``__array_ufunc__``: units, masks or
    other metadata it keeps itself) or opts out of it (``__array_ufunc__ = None``): numpy.matmul hands such an array
    to its class, or refuses it; polygemm would compute on its bare values and lose what the class keeps."""
    override = getattr(type(obj), "__array_ufunc__", np.ndarray.__array_ufunc__)
    if override is np.ndarray.__array_ufunc__:
        return
    cls = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if override is None:
        raise ArgumentTypeError(f"{name} is a {cls}, which opts out of NumPy's ufuncs (__array_ufunc__ = None), so "
                                f"numpy.matmul refuses it too; pass np.asarray({name}) for a product of its bare values")
    raise ArgumentTypeError(f"{name} is a {cls}, whose __array_ufunc__ takes numpy.matmul over (for the units or other "
                            f"metadata it keeps); polygemm computes on bare values and would lose them. Use numpy.matmul "
                            f"(or {type(obj).__qualname__}'s own product), or pass np.asarray({name}) for the product of "
                            f"its bare values")


def _check_raw_records(name: str, arr: np.ndarray) -> None:
    """DTypeError for data NumPy reads as raw records (``void16``: an ``__array_interface__`` of
    typestr ``'<V2'``, as bfloat16 and other types with no NumPy typestr are offered): no cast of
    records to a number type exists, so the hint is the view that reads them as numbers, bfloat16
    where the interface's descr names it."""
    dtype = arr.dtype
    if dtype.kind != "V" or getattr(dtype.type, "__module__", "").partition(".")[0] == "ml_dtypes":
        return
    size = dtype.itemsize
    descr = arr.__array_interface__.get("descr")  # (a field named bfloat16 is how NumPy reads a descr that names it)
    if size == 2 and "bfloat16" in str(descr):
        raise DTypeError(f"{name} offers bfloat16 as raw 2-byte records (typestr {dtype.str!r}, descr {descr}: NumPy has no "
                         f"typestr for bfloat16); view them as bfloat16 first, e.g. np.asarray({name}).view(ml_dtypes.bfloat16)")
    if dtype.names is not None or dtype.subdtype is not None:  # records of fields: check_dtype names the dtype
        return
    maybe = (f" If they are bfloat16 (which NumPy's typestr cannot name), view them as it: "
             f"np.asarray({name}).view(ml_dtypes.bfloat16).") if size == 2 else ""
    raise DTypeError(f"{name} holds raw {size}-byte records (typestr {dtype.str!r}), which NumPy reads as {dtype.name}: not "
                     f"a number type polygemm reads, and no cast makes them one; pass numbers of {DTYPE_HELP}.{maybe}")


def _host_operand(name: str, obj: Any, *, writable: bool, given: Any = None) -> Operand:
    """``obj`` (``given``: what the user passed, when ``obj`` is NumPy's view of it) as an operand."""
    if obj is None:
        raise ArgumentTypeError(f"{name} must be a matrix (a 2-D NumPy array, array-like or device array); got None")
    if isinstance(obj, (str, bytes, bytearray)):
        # NumPy reads a string as a 0-D array of text; a TypeError, as numpy.matmul raises (no loop for dtype '<U1')
        raise ArgumentTypeError(f"{name} must be a matrix (a 2-D NumPy array, array-like or device array); got "
                                f"{type(obj).__name__} {obj!r:.40}")
    if not writable and kind_of(obj) == "dask":
        # NumPy reads a dask array through its __array__, which computes the whole graph into one array in this
        # process (every task, A and B whole in memory) and would give a NumPy array where numpy.matmul gives a lazy
        # dask array: polygemm.dask.gemm is the way
        args = "A, B, c, beta=..." if name == "c" else "A, B"
        kind = f"{type(obj).__module__.partition('.')[0]}.{type(obj).__name__}"
        if getattr(obj, "ndim", 2) > 2:  # polygemm.dask.gemm multiplies matrices: a batch is computed, or mapped over
            raise ArgumentTypeError(f"{name} is a {obj.ndim}-D {kind}; polygemm multiplies arrays in memory and would compute it "
                                    f"whole here, and polygemm.dask.gemm multiplies 2-D ones. Pass {name}.compute() for an "
                                    f"in-memory batch, or stack polygemm.dask.gemm's products matrix by matrix")
        raise ArgumentTypeError(f"{name} is a {kind}; polygemm multiplies "
                                f"arrays in memory and would compute it whole here. Call polygemm.dask.gemm({args}) for a "
                                f"lazy dask array computed block by block, or pass {name}.compute() for an in-memory result")
    if isinstance(obj, np.ma.MaskedArray):
        if writable:  # out.filled(0) would be a copy: the result would not reach the user's array
            raise ArgumentError(f"{name} is a masked array; polygemm writes no mask. Pass its data, {name}.data (written in "
                                f"place; the mask stays as it is), or omit {name} to get a new result")
        raise ArgumentError(f"{name} is a masked array; polygemm ignores no mask. Fill it first, e.g. {name}.filled(0), or pass {name}.data")
    if isinstance(obj, np.ndarray) and type(obj) is not np.ndarray:
        _check_ufunc_override(name, obj)
    elif not isinstance(obj, np.ndarray) and getattr(type(obj), "__array_ufunc__", False) is None:
        # a class that opts out of NumPy's ufuncs, which numpy.matmul refuses whatever its __array__ gives
        raise ArgumentTypeError(f"{name} is a {type(obj).__module__}.{type(obj).__qualname__}, which opts out of NumPy's "
                                f"ufuncs (__array_ufunc__ = None), so numpy.matmul refuses it too; pass np.asarray({name}) "
                                f"for a product of its values")
    if writable:
        if not isinstance(obj, np.ndarray):
            # a TypeError too, as numpy.matmul's "return arrays must be of ArrayType"
            hint = (f" (numpy.matmul's tuple form: pass the array itself, {name}={name}[0], or use polygemm.matmul, which takes it)"
                    if isinstance(obj, tuple) and len(obj) == 1 and hasattr(obj[0], "shape") else "")
            got = type(obj).__name__
            if kind_of(obj) == "dask":  # a lazy array holds no memory to write: its result is a new array
                got = f"a dask.{got}, which cannot be written in place"
                hint = f"; omit {name} and use the result, or polygemm.dask.gemm(A, B) for a lazy product"
            raise ArgumentTypeError(f"{name} must be a NumPy array (or a device array) that can receive the result; got {got}{hint}")
        arr = obj
        if not arr.flags.writeable:
            raise ArgumentError(f"{name} is read-only; pass a writeable array (or omit {name} to get a new one)")
        if not arr.dtype.isnative:  # (gemm writes it through a native stand-in)
            raise OutNotInPlace(f"{name} has non-native byte order ({arr.dtype.str}); pass an array of the native {arr.dtype.name} (e.g. np.empty(shape, np.{arr.dtype.name}))")
    else:
        try:
            arr = np.asarray(obj)
        except ValueError as exc:
            # a ragged list ([[1., 2.], [3.]]) is a matter of shape, a ValueError to NumPy (numpy.matmul raises one), so
            # that `except ValueError` written for numpy.matmul catches it
            raise ShapeError(f"{name} could not be converted to an array: {str(exc).rstrip('.')}. Pass a matrix or a stack of matrices "
                             f"whose rows all have the same length") from exc
        except Exception as exc:
            t = type(obj)
            if t.__module__.partition(".")[0] == "jax" and "Tracer" in t.__name__:
                # inside jax.jit, vmap or grad: an abstract value, no array; its dtype is fine (no DTypeError)
                raise ArgumentTypeError(f"{name} is a JAX tracer ({t.__name__}): polygemm runs on concrete arrays, not inside "
                                        f"jax.jit, vmap or grad; call it outside the transformation (or through "
                                        f"jax.pure_callback)") from exc
            raise DTypeError(f"{name} could not be converted to an array: {exc}") from exc
        if arr.dtype == object and not isinstance(obj, np.ndarray):
            dense = f" ({name}.toarray() for a SciPy sparse matrix)" if hasattr(obj, "toarray") else ""
            raise DTypeError(f"{name} is a {type(obj).__name__} that NumPy reads as an object array; pass a numeric matrix "
                             f"of {DTYPE_HELP}{dense}")
        # an ndarray of dtype object goes on to check_dtype, which names its dtype, the supported ones and the cast
    check_ndim(name, arr.shape, matmul_hint=True, given=obj if given is None else given)
    if name != "out":  # (an out is told the dtype it must have)
        _check_raw_records(name, arr)
    check_dtype(name, arr.dtype, obj if given is None else given)
    copied = False
    desc = host_layout(arr)
    if desc is None or not arr.dtype.isnative or any(s % arr.itemsize for s in arr.strides):
        if writable:
            raise _unwritable_strides(name, arr)
        arr = host_convert(arr)
        copied = True
        desc = host_layout(arr)
        assert desc is not None
    layout, ld = desc
    ptr = arr.__array_interface__["data"][0]
    bdims = tuple((int(n), int(st) // arr.itemsize) for n, st in zip(arr.shape[:-2], arr.strides[:-2]))
    return Operand(name, arr, (int(arr.shape[-2]), int(arr.shape[-1])), arr.dtype, layout, int(ld), "host", ptr, copied,
                   not arr.flags.writeable, None, bdims)


def _device_operand(name: str, obj: Any, residency: str, iface: dict, *, writable: bool, given: Any = None) -> Operand:
    try:  # an interface of another library's making: its shape and data as the CUDA interface's keys hold them
        shape = tuple(int(s) for s in iface.get("shape", ()))
        ptr, readonly = iface["data"]
        ptr = int(ptr or 0)
    except (KeyError, TypeError, ValueError) as exc:
        raise ArgumentError(f"{name} ({type(obj).__name__}) offers an array interface polygemm cannot read ({type(exc).__name__}: "
                            f"{exc}): its 'shape' must be a tuple of sizes and its 'data' a (pointer, read-only) pair") from None
    if not 0 <= ptr < 2**64:  # (cut to its low bits, such a pointer would name another address, or NULL)
        raise ArgumentError(f"{name} ({type(obj).__name__}) offers a data pointer {ptr:#x} outside a 64-bit address space")
    check_ndim(name, shape, matmul_hint=True)
    dtype = _interface_dtype(name, obj, iface)
    check_dtype(name, dtype, obj if given is None else given)
    if ptr % dtype.itemsize:
        raise ArgumentError(
            f"{name} is a {residency} array whose data pointer {ptr:#x} is not a multiple of its "
            f"element size ({dtype.itemsize} bytes); pass an array aligned to its dtype (e.g. a fresh copy)"
        )
    if writable and readonly:
        raise ArgumentError(f"{name} is a read-only {residency} array; pass a writeable one")
    strides = iface.get("strides")
    if strides is None:  # C order
        estrides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            estrides[i] = estrides[i + 1] * max(shape[i + 1], 1)
    else:
        if any(int(s) % dtype.itemsize for s in strides):
            raise unsupported_strides(name, residency, strides)
        estrides = [int(s) // dtype.itemsize for s in strides]
    if 0 in shape:  # nothing is addressed
        desc: tuple[Layout, int] | None = ("row", max(shape[-1], 1))
    else:
        desc = layout_from_strides(shape[-2:], (estrides[-2], estrides[-1]))  # type: ignore[arg-type]
    if desc is None:
        raise unsupported_strides(name, residency, strides)
    layout, ld = desc
    bdims = tuple(zip(shape[:-2], estrides[:-2]))
    return Operand(name, obj, (shape[-2], shape[-1]), dtype, layout, int(ld), residency, ptr, False, bool(readonly), iface, bdims)


def _interface_dtype(name: str, obj: Any, iface: dict) -> np.dtype:
    """The dtype of a device array's interface. A typestr cannot say bfloat16 (NumPy writes
    ``<V2``, raw bytes): such an array's own ``dtype`` attribute (pycuda's ``GPUArray`` of
    ``ml_dtypes.bfloat16``) says it; the interfaces read from DLPack give ``"bfloat16"``."""
    typestr = iface.get("typestr")
    if typestr == "bfloat16":
        return bfloat16()
    try:
        dtype = np.dtype(typestr)
    except Exception as exc:
        raise DTypeError(f"{name} has an unreadable typestr {typestr!r}: {exc}") from exc
    if dtype.kind == "V":
        own = getattr(obj, "dtype", None)
        if isinstance(own, np.dtype) and own.name == "bfloat16" and own.itemsize == dtype.itemsize:
            return own
    if not dtype.isnative:  # device memory is read as it lies: a swapped order would be read as other numbers
        raise DTypeError(f"{name} is a device array of {dtype.name} in non-native byte order (typestr {typestr!r}); polygemm "
                         f"reads device data in the machine's own order: convert it on its device first (e.g. its "
                         f"library's astype to {dtype.newbyteorder('=').str!r})")
    return dtype


def read_operand(name: str, obj: Any, *, writable: bool = False, read: tuple[str, dict] | None = None) -> Operand:
    """``obj`` as the operand ``name``. ``read``: its device interface as the plan cache's key
    already read it (:func:`~polygemm.core.views.view_interface`), used rather than read again."""
    if read is not None:  # (a torch lazy negation or an unwritable out has no view: read below, resolved or refused)
        return _device_operand(name, obj, read[0], read[1], writable=writable)
    torch_refusal(name, obj)  # a sparse or meta tensor, or a dtype polygemm does not compute: said in torch's terms
    obj = torch_detached(name, obj)  # a tensor that requires grad: under no_grad, its detach(); else refused, saying why
    memory = torch_conjugate_memory(obj, writable=writable)
    if memory is not None:  # a CUDA complex tensor's lazy conjugate: its memory, read conjugated (no copy)
        return replace(read_operand(name, memory, writable=writable), conj=True)
    resolved = torch_resolved(name, obj, writable=writable)  # a torch lazy negation: materialized (an out with one refused)
    if resolved is not obj:  # a new tensor of its values, torch's copy: named among the plan's copies
        return replace(read_operand(name, resolved, writable=writable), copy_note=torch_copy_note(name, obj))
    # torch's __cuda_array_interface__ refuses bfloat16: those tensors come through DLPack
    via_dlpack = torch_dlpack_only(obj)
    dev = None if via_dlpack else device_interface(obj, name)
    if dev is None:
        if not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
            _check_dlpack_dtype(name, obj)
            where, data, iface = dlpack_interface(name, obj)
            # a torch tensor is writeable like its array-interface kin; other DLPack device data may not be
            torch_device = iface is not None and kind_of(obj) == "torch"
            if writable:
                check_dlpack_out(name, obj, data, iface)
            if iface is None:
                return _host_operand(name, data, writable=writable, given=obj)
            # a torch tensor stays the operand (its stream and memory are the tensor's)
            return _device_operand(name, obj if torch_device else data, where, iface, writable=writable and torch_device, given=obj)
        return _host_operand(name, obj, writable=writable)
    return _device_operand(name, obj, dev[0], dev[1], writable=writable)


def check_dlpack_out(name: str, obj: Any, data: Any, iface: dict | None) -> None:
    """ArgumentError unless ``obj``, an ``out`` read through DLPack (``data``, ``iface``: what
    :func:`~polygemm.interop.dlpack.dlpack_interface` made of it), may be written in place: a torch
    tensor on its device, or CPU memory whose export says it may be written (JAX arrays are immutable
    and say they are not)."""
    if iface is not None:
        if kind_of(obj) == "torch":  # a torch tensor is writeable like its array-interface kin
            return
    elif data.flags.writeable:
        return
    elif _legacy_dlpack(obj):
        # a writeable array of a producer that speaks only DLPack before 1.0: what makes it read-only here is the
        # old protocol, which has no read-only flag, so NumPy reads every such export read-only (and an immutable
        # array may hide behind one); said so, not "pass a writeable array"
        raise ArgumentError(f"{name} ({type(obj).__name__}) offers only DLPack's pre-1.0 export (its __dlpack__ takes no "
                            f"max_version), which cannot say that its memory may be written, so polygemm reads it "
                            f"read-only; pass a NumPy array (or a writeable CPU DLPack array of DLPack 1.0) as {name}, "
                            f"or omit {name} to get a new result")
    if kind_of(obj) == "jax":  # its export is read-only because the array is: no writeable one exists
        raise ArgumentError(f"{name} is a JAX array, which is immutable: nothing can write it in place. Omit {name} and use "
                            f"the new JAX array returned (or {name}.at[...].set(result) for an updated copy)")
    raise ArgumentError(f"{name} must be an array polygemm can write (NumPy, a writeable CPU DLPack array, or a "
                        f"__cuda_array_interface__ array such as CuPy's or torch's); got {type_name(obj)}"
                        f"{', exported read-only' if iface is None else ', device memory offered through DLPack alone'}. "
                        f"Omit {name} to get a new result")


def _check_dlpack_dtype(name: str, obj: Any) -> None:
    """DTypeError, as a NumPy array of the dtype gets it, for a DLPack array whose own ``dtype`` is
    a NumPy dtype polygemm does not read (JAX's float8 and int4, which DLPack carries as no type
    NumPy reads, or not at all): read before the export, whose failure would say nothing of the
    dtype. Other dtypes (torch's, or none) are left to the export."""
    dtype = getattr(obj, "dtype", None)
    if isinstance(dtype, np.dtype):
        check_dtype(name, dtype, obj)


def _legacy_dlpack(obj: Any) -> bool:
    """Whether ``obj.__dlpack__`` is of DLPack before 1.0: it takes no ``max_version`` (its CPU exports
    carry no read-only flag, and NumPy reads them read-only)."""
    try:
        obj.__dlpack__(max_version=(1, 0))
    except TypeError:
        return True
    except Exception:  # refused for another reason: not a question of the protocol's version
        return False
    return False
