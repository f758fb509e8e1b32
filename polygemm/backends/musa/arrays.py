"""``MusaArray``: a 2-D float16 matrix in MUSA device memory, owned and freed explicitly.

It exposes ``__polygemm_array_interface__`` (the CUDA array interface's keys plus
``device="musa"``), so ``polygemm.gemm`` takes it like any device array and returns one.
Memory is freed by ``free()``, by leaving a ``with`` block, or when the object is
collected, whichever comes first; a freed array refuses further use.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from typing import Any, Iterator

import numpy as np

from ...core.text import short_repr
from ...errors import ArgumentError, DTypeError, ShapeError
from .sessions import user_session

__all__ = ["MusaArray", "host_f16"]


def host_f16(x: Any, name: str, what: str = "the musa backend") -> np.ndarray:
    """``x`` as a NumPy float16 array in native byte order, or a clear error.

    A big-endian ``'>f2'`` array is float16 too: it is converted (exactly) rather than
    refused with "needs float16; got float16", and never uploaded as raw swapped bytes. A
    masked array is refused: ``np.asarray`` would silently drop its mask.
    """
    if isinstance(x, np.ma.MaskedArray):
        raise ArgumentError(f"{name} is a masked array; {what} would ignore its mask. Pass {name}.filled(value) (or np.asarray({name}) to drop the mask knowingly)")
    if hasattr(x, "__polygemm_array_interface__") or hasattr(x, "__cuda_array_interface__"):  # device data: no astype helps
        raise ArgumentError(f"{name} must be a NumPy (host) float16 array for {what}; got a device array "
                            f"({type(x).__name__}): pass {name}.get(), or NumPy data")
    arr = np.asarray(x)
    if arr.dtype.kind != "f" or arr.dtype.itemsize != 2:
        raise DTypeError(f"{name} must be float16 for {what}; got {arr.dtype.name}. Convert with .astype(np.float16)")
    if not arr.dtype.isnative:
        arr = arr.astype(np.float16)  # same values, native byte order
    return arr


class MusaArray:
    """A C- or Fortran-ordered 2-D float16 device matrix."""

    def __init__(self, session: Any, shape: tuple[int, int], order: str = "C") -> None:
        try:  # two whole numbers >= 0 (NumPy integers too; 2.9 or "2" is no size)
            whole = len(shape) == 2 and all(operator.index(d) >= 0 for d in shape)
        except TypeError:
            whole = False
        if not whole:
            raise ShapeError(f"MusaArray shape must be (rows, cols) of whole numbers >= 0; got {short_repr(shape)}")
        if order not in ("C", "F"):
            raise ArgumentError(f"order must be 'C' or 'F'; got {order!r}")
        if int(shape[0]) * int(shape[1]) * 2 >= 2**63:  # (no device allocation is asked of a size no size_t holds)
            raise ShapeError(f"MusaArray shape {tuple(int(d) for d in shape)} holds more bytes than any device memory can")
        self._session = session
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(np.float16)
        self.order = order
        self._cond = threading.Condition()
        self._users = 0  # calls computing with this memory now: free() waits for them
        self._ptr: int | None = session.malloc(self.nbytes)

    # -- construction ------------------------------------------------------------------
    @classmethod
    def empty(cls, shape: tuple[int, int], order: str = "C") -> "MusaArray":

        return cls(user_session(), shape, order)

    @classmethod
    def from_numpy(cls, array: Any) -> "MusaArray":
        """Copy a 2-D float16 array to the device (keeping Fortran order when it has it)."""
        arr = host_f16(array, "array", "MusaArray (it holds float16 only)")
        if arr.ndim != 2:
            raise ShapeError(f"MusaArray must be 2-D; got shape {arr.shape}")
        order = "F" if (arr.flags.f_contiguous and not arr.flags.c_contiguous) else "C"
        out = cls.empty(arr.shape, order)
        out.set(arr)
        return out

    # -- properties --------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * 2

    @property
    def strides(self) -> tuple[int, int]:
        r, c = self.shape
        return (2 * c, 2) if self.order == "C" else (2, 2 * r)

    @property
    def ptr(self) -> int:
        if self._ptr is None:
            raise ArgumentError("this MusaArray has been freed")
        return self._ptr

    @property
    def __polygemm_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": "<f2", "strides": self.strides, "data": (self.ptr, False), "device": "musa", "version": 1}

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        # as CuPy's arrays refuse it: NumPy would make a 0-D object array holding this one, silently
        raise TypeError("a MusaArray is device memory: NumPy cannot read it in place; call .get() for a NumPy copy")

    # -- data movement -------------------------------------------------------------------
    def get(self) -> np.ndarray:
        """Copy to a new NumPy array (same memory order)."""
        ptr = self.ptr  # (a freed array refuses, whatever its size)
        out = np.empty(self.shape, np.float16, order=self.order)
        if self.nbytes:
            self._session.d2h(out, ptr)
        return out

    def set(self, array: Any) -> None:
        """Overwrite the contents in place from a host array of the same shape."""
        arr = host_f16(array, "array", "set()")
        ptr = self.ptr  # (a freed array refuses, whatever its size)
        if arr.shape != self.shape:
            raise ShapeError(f"set() needs shape {self.shape}; got {arr.shape}")
        arr = np.ascontiguousarray(arr) if self.order == "C" else np.asfortranarray(arr)
        if self.nbytes:
            self._session.h2d(ptr, arr)

    # -- copies ------------------------------------------------------------------------
    # a copy is new device memory holding the same values: one sharing the pointer would free it under the other
    def __copy__(self) -> "MusaArray":
        return MusaArray.from_numpy(self.get())

    def __deepcopy__(self, memo: dict[int, Any]) -> "MusaArray":
        return self.__copy__()

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray]]:
        # pickled by its values (as CuPy pickles its arrays): unpickled into new device memory where musa runs
        return (MusaArray.from_numpy, (self.get(),))

    # -- lifetime ------------------------------------------------------------------------
    @contextlib.contextmanager
    def in_use(self) -> Iterator[int]:
        """This array's pointer, held for one call: free() from another thread waits until the call is done (else the
        call would write memory given to another array since). ArgumentError if it has been freed."""
        with self._cond:
            if self._ptr is None:
                raise ArgumentError("this MusaArray has been freed")
            self._users += 1
            ptr = self._ptr
        try:
            yield ptr
        finally:
            with self._cond:
                self._users -= 1
                if not self._users:
                    self._cond.notify_all()

    def free(self) -> None:
        """Release the device memory now (idempotent), once the calls using it are done."""
        cond = getattr(self, "_cond", None)
        if cond is None:  # __init__ refused the shape: nothing was allocated
            return
        with cond:
            while self._users:
                cond.wait()
            ptr, self._ptr = self._ptr, None
        if ptr is not None:
            self._session.free(ptr)

    def __enter__(self) -> "MusaArray":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "freed" if self._ptr is None else f"0x{self._ptr:x}"
        return f"MusaArray(shape={self.shape}, dtype=float16, order={self.order!r}, at {state})"
