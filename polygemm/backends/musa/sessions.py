"""The process-wide session of ``libpolygemm_musa``: the library, loaded once, and one handle per
thread. Arrays, prepared operands and the backend all take it from here."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ...core.env import env_flag
from ...errors import ArgumentError, BackendUnavailableError
from .library import LibraryNotFound, NativeLibrary, load_library

__all__ = ["Session", "session", "user_session"]


class Session:
    """The loaded library plus one handle per thread (handles serialize their calls)."""

    def __init__(self, nl: NativeLibrary, device: int = 0) -> None:
        self.nl = nl
        self.ffi, self.lib = nl.ffi, nl.lib
        self.device = device
        self._local = threading.local()

    def handle(self) -> Any:
        h = getattr(self._local, "handle", None)
        if h is None:
            out = self.ffi.new("pgm_handle **")
            self.nl.check(self.lib.pgm_handle_create(self.device, self.ffi.NULL, out), "pgm_handle_create")
            h = self.ffi.gc(out[0], self.lib.pgm_handle_destroy)
            self._local.handle = h
        return h

    def malloc(self, nbytes: int) -> int:
        out = self.ffi.new("void **")
        self.nl.check(self.lib.pgm_malloc(self.handle(), max(int(nbytes), 2), out), f"pgm_malloc({nbytes} bytes)")
        return int(self.ffi.cast("uintptr_t", out[0]))

    def free(self, ptr: int) -> None:
        self.nl.check(self.lib.pgm_free(self.handle(), self.ffi.cast("void *", ptr)), "pgm_free")

    def _buffer(self, host: np.ndarray, writable: bool = False) -> Any:
        # cffi wants C-contiguous memory; a Fortran-ordered array's transpose is exactly that
        flat = host if host.flags.c_contiguous else host.T
        if not flat.flags.c_contiguous:
            raise ArgumentError("host buffer must be C- or Fortran-contiguous")
        return self.ffi.from_buffer(flat, require_writable=writable)

    def h2d(self, ptr: int, host: np.ndarray) -> None:
        self.nl.check(self.lib.pgm_memcpy_h2d(self.handle(), self.ffi.cast("void *", ptr), self._buffer(host), host.nbytes), "pgm_memcpy_h2d")

    def d2h(self, host: np.ndarray, ptr: int) -> None:
        self.nl.check(self.lib.pgm_memcpy_d2h(self.handle(), self._buffer(host, True), self.ffi.cast("void *", ptr), host.nbytes), "pgm_memcpy_d2h")

    def d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.nl.check(self.lib.pgm_memcpy_d2d(self.handle(), self.ffi.cast("void *", dst), self.ffi.cast("void *", src), nbytes), "pgm_memcpy_d2d")

    def device_name(self) -> str:
        buf = self.ffi.new("char[256]")
        self.nl.check(self.lib.pgm_device_name(self.device, buf, 256), "pgm_device_name")
        return self.ffi.string(buf).decode(errors="replace")

    def gemm(self, variant: str, m: int, n: int, k: int, alpha: float, a: int, lda: int, b: int, ldb: int, beta: float, c: int, ldc: int) -> None:
        fn = self.lib.pgm_mublas_gemm_f16 if variant == "mublas" else self.lib.pgm_gemm_f16
        cast = self.ffi.cast
        self.nl.check(fn(self.handle(), m, n, k, alpha, cast("void *", a), lda, cast("void *", b), ldb, beta, cast("void *", c), ldc),
                      "pgm_mublas_gemm_f16" if variant == "mublas" else "pgm_gemm_f16")


_session_lock = threading.Lock()
_session: Session | None = None


def session() -> Session:
    """The process-wide session (library loaded once); BackendUnavailableError if none."""
    global _session
    with _session_lock:
        if _session is None:
            try:
                _session = Session(load_library())
            except LibraryNotFound as exc:
                raise BackendUnavailableError(str(exc)) from exc
        return _session


def user_session() -> Session:
    """The session for the objects a user makes (``MusaArray``, ``PreparedB``): an emulation's
    library serves them only with POLYGEMM_MUSA_EMULATION on, as it serves ``device="musa"``, so
    that nothing runs on the CPU (or an NVIDIA GPU) while looking like the S4000's."""
    s = session()
    if s.nl.flavor != "musa" and not env_flag("POLYGEMM_MUSA_EMULATION"):
        raise BackendUnavailableError(f"libpolygemm_musa is the {s.nl.flavor!r} flavor (an emulation): set POLYGEMM_MUSA_EMULATION=1 to use it")
    return s
