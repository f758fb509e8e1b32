"""``PreparedB`` and ``gemm_prepared``: the musa backend's explicit B preparation.

A ``PreparedB`` owns one library object (a token of the C ABI, see ``polygemm_musa.h``).
Every call that uses it holds it for the whole call; ``release()`` refuses new calls at
once, waits for the ones in flight and only then frees the object. Releasing in one thread
while another is inside ``gemm_prepared`` therefore never frees memory a kernel is reading
(the library does the same below, for callers of the C ABI, but a call that has not reached
the library yet would otherwise fail half-way with "released").
"""

from __future__ import annotations

import math
import numbers
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from ...core.scalars import fits_float32
from ...errors import ArgumentError, ShapeError, UnsupportedProblemError
from .arrays import MusaArray, host_f16
from .sessions import user_session

__all__ = ["PreparedB", "gemm_prepared"]

_INT_MAX = 2**31 - 1


class PreparedB:
    """B (K×N float16) transposed once into the library's layout, owned by the caller.

    Reuse it across ``MusaBackend.gemm_prepared`` calls; after B's data changes call
    ``update(new_b)``; ``release()`` (or a ``with`` block) frees it, after waiting for the
    calls that other threads are making with it. Nothing is keyed on a pointer: a prepared
    object only ever holds what it was given.
    """

    def __init__(self, b: Any) -> None:

        self._obj: Any = None
        self._cond = threading.Condition()
        self._users = 0  # calls in flight
        self._closing = False  # release() has begun: new calls are refused
        self._release_lock = threading.Lock()  # a second release() waits for the first
        self._s = user_session()
        arr = host_f16(b, "b")
        if arr.ndim != 2:
            raise ShapeError(f"b must be 2-D; got shape {arr.shape}")
        arr = np.asfortranarray(arr)
        self.shape = (int(arr.shape[0]), int(arr.shape[1]))
        if max(self.shape) > _INT_MAX:
            raise UnsupportedProblemError(f"b has shape {self.shape}; the musa library takes K and N up to 2**31-1")
        s = self._s
        with MusaArray(s, self.shape, "F") as tmp:
            tmp.set(arr)
            out = s.ffi.new("pgm_prepared_b **")
            s.nl.check(s.lib.pgm_prepare_b(s.handle(), self.shape[0], self.shape[1], s.ffi.cast("void *", tmp.ptr), max(self.shape[0], 1), out), "pgm_prepare_b")
            self._obj = out[0]

    @contextmanager
    def _use(self) -> Iterator[tuple[Any, Any]]:
        """(session, library object), held for one call: release() waits until it is back."""
        with self._cond:
            if self._obj is None or self._closing:
                raise ArgumentError("this PreparedB has been released; prepare B again with PreparedB(b)")
            self._users += 1
        try:
            yield self._s, self._obj
        finally:
            with self._cond:
                self._users -= 1
                if self._users == 0:
                    self._cond.notify_all()

    def update(self, b: Any) -> None:
        """Re-read B (same shape) into this object."""
        arr = host_f16(b, "b")
        if arr.shape != self.shape:
            raise ShapeError(f"update() needs b of shape {self.shape}; got {arr.shape}")
        arr = np.asfortranarray(arr)
        with self._use() as (s, obj), MusaArray(s, self.shape, "F") as tmp:
            tmp.set(arr)
            s.nl.check(s.lib.pgm_prepared_b_update(s.handle(), obj, s.ffi.cast("void *", tmp.ptr), max(self.shape[0], 1)), "pgm_prepared_b_update")

    @property
    def handle(self) -> Any:
        """The library object (for callers of the C ABI); ArgumentError once released."""
        if self._obj is None or self._closing:
            raise ArgumentError("this PreparedB has been released; prepare B again with PreparedB(b)")
        return self._obj

    def _not_copied(self, *args: Any) -> Any:
        # a copy sharing the library's object would release it under the original; B's values are not kept to make another
        raise TypeError("a PreparedB holds the library's own copy of B and is not copied or pickled: prepare B again, "
                        "PreparedB(b), for another")

    __copy__ = __deepcopy__ = __reduce__ = __reduce_ex__ = _not_copied

    @property
    def released(self) -> bool:
        return self._obj is None

    def release(self) -> None:
        """Free the prepared B now (idempotent): calls already using it finish first."""
        lock = getattr(self, "_release_lock", None)
        if lock is None:  # __init__ failed before there was anything to free
            return
        with lock:
            with self._cond:
                if self._obj is None:
                    return
                self._closing = True
                while self._users:
                    self._cond.wait()
                obj, self._obj = self._obj, None
            self._s.nl.check(self._s.lib.pgm_prepared_b_release(obj), "pgm_prepared_b_release")

    def __enter__(self) -> "PreparedB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "released" if getattr(self, "_obj", None) is None else "live"
        return f"PreparedB(shape={getattr(self, 'shape', None)}, {state})"


def _scalar(name: str, value: Any) -> float:
    """alpha/beta as a float the kernel's float32 scalar holds, or ArgumentError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ArgumentError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    try:
        v = float(value)
    except OverflowError:  # an int beyond float64, e.g. 10**400
        raise ArgumentError(f"{name} is too large for a float ({name}={value!r:.40}...); use |{name}| <= 3.4e38") from None
    if not math.isfinite(v):
        raise ArgumentError(f"{name} must be finite; got {value!r}")
    if not fits_float32(v):
        # float32(alpha) would be inf (inf * 0 = NaN), 0, or a subnormal that rounds (1e-45 to
        # 1.4e-45): a wrong answer, not an error; the gemm path refuses the same (fits_float32)
        raise ArgumentError(
            f"{name}={value!r} does not fit the musa kernel's float32 scalars (1.2e-38 <= |{name}| <= 3.4e38, 0, or a subnormal float32 holds exactly); "
            f"scale a or c instead, or use polygemm.gemm(..., device='cpu')"
        )
    return v


def gemm_prepared(a: Any, prepared: PreparedB, c: Any = None, *, alpha: Any = 1.0, beta: Any = 0.0) -> np.ndarray:
    """``alpha * a @ B + beta * c`` with a prepared B (NumPy float16 in and out).

    ``c`` is read only when ``beta != 0``, and ``beta != 0`` needs ``c`` (as ``gemm``).
    """
    if not isinstance(prepared, PreparedB):
        raise ArgumentError(f"prepared must be a PreparedB (PreparedB(b)); got {type(prepared).__name__}")
    alpha_f = _scalar("alpha", alpha)
    beta_f = _scalar("beta", beta)
    A = host_f16(a, "a")
    if A.ndim != 2 or A.shape[1] != prepared.shape[0]:
        raise ShapeError(f"a has shape {A.shape}; the prepared B is {prepared.shape}, so a must be (M, {prepared.shape[0]})")
    m, k, n = A.shape[0], A.shape[1], prepared.shape[1]
    C = None
    if c is not None:
        C = host_f16(c, "c")
        if C.shape != (m, n):
            raise ShapeError(f"c must have shape ({m}, {n}); got {C.shape}")
    elif beta_f != 0.0:
        # without c the kernel would read whatever the output buffer held
        raise ArgumentError(f"beta={beta!r} needs c: pass c (shape ({m}, {n})) or set beta=0")
    with prepared._use() as (s, obj):
        if m == 0 or n == 0:
            return np.zeros((m, n), np.float16)
        if k == 0:
            # alpha * a @ B is exactly 0: the result is beta * c, computed as the kernel's
            # epilogue does (float32, rounded once) with no launch -- and no int limit on M
            if C is None or beta_f == 0.0:
                return np.zeros((m, n), np.float16)
            return (np.float32(beta_f) * C.astype(np.float32)).astype(np.float16)
        if m > _INT_MAX:
            raise UnsupportedProblemError(f"a has M={m} rows; the musa library takes M up to 2**31-1 (32-bit int). Split a into row blocks")
        with MusaArray(s, (m, k), "F") as da, MusaArray(s, (m, n), "F") as dc:
            da.set(np.asfortranarray(A))
            if C is not None and beta_f != 0.0:
                dc.set(C)
            cast = s.ffi.cast
            s.nl.check(
                s.lib.pgm_gemm_f16_prepared(s.handle(), m, n, k, alpha_f, cast("void *", da.ptr), max(m, 1), obj, beta_f, cast("void *", dc.ptr), max(m, 1)),
                "pgm_gemm_f16_prepared",
            )
            return np.ascontiguousarray(dc.get())
