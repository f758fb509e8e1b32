"""A small cffi binding to cuBLAS: the vendor comparator (``variant="cublas"``).

SGEMM for float32; ``cublasGemmEx`` with fp32 compute for float16 (``CUDA_R_16F``) and
bfloat16 (``CUDA_R_16BF``) inputs, the C of the inputs' type or fp32. bfloat16 runs with
``CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION``: by default cuBLAS may sum split-K
partial products in the output type, and with bfloat16's 8 bits that put 22% of a
65x1000x17 product more than one ulp off (H200, cuBLAS 13.1): outside the bound polygemm
holds every variant to (fp32 accumulation, one final rounding).

The library is found in the CUDA toolkit, on the loader path, or in the ``nvidia-cublas``
wheel. TF32 stays off (``CUBLAS_DEFAULT_MATH``) so float32 results are true float32.
"""

from __future__ import annotations

import glob
import os
import sys
import threading
from typing import Any

from ...errors import BackendUnavailableError, DeviceError

__all__ = ["CuBlas", "load_cublas"]

_CDEF = """
typedef struct cublasContext *cublasHandle_t;
int cublasCreate_v2(cublasHandle_t *handle);
int cublasDestroy_v2(cublasHandle_t handle);
int cublasSetStream_v2(cublasHandle_t handle, void *stream);
int cublasSetMathMode(cublasHandle_t handle, int mode);
const char *cublasGetStatusString(int status);
int cublasSgemm_v2(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                   const float *alpha, const void *A, int lda, const void *B, int ldb,
                   const float *beta, void *C, int ldc);
int cublasDgemm_v2(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                   const double *alpha, const void *A, int lda, const void *B, int ldb,
                   const double *beta, void *C, int ldc);
int cublasGemmEx(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                 const void *alpha, const void *A, int Atype, int lda, const void *B, int Btype, int ldb,
                 const void *beta, void *C, int Ctype, int ldc, int computeType, int algo);
"""

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_DEFAULT_MATH = 0
CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1


def _candidates() -> list[str]:
    names = [f"libcublas.so.{v}" for v in (13, 12, 11)] + ["libcublas.so"]
    out = list(names)
    for root in filter(None, (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            out += [os.path.join(root, sub, n) for n in names]
    for site in sys.path:
        out += sorted(glob.glob(os.path.join(site, "nvidia", "cublas", "lib", "libcublas.so*")), reverse=True)
        out += sorted(glob.glob(os.path.join(site, "nvidia", "cu13", "lib", "libcublas.so*")), reverse=True)
    return out


_lib_lock = threading.Lock()
_lib: tuple[Any, Any] | None = None


def load_cublas() -> tuple[Any, Any]:
    """(ffi, lib) for cuBLAS; BackendUnavailableError lists every place tried."""
    global _lib
    with _lib_lock:
        if _lib is None:
            import cffi

            ffi = cffi.FFI()
            ffi.cdef(_CDEF)
            tried = []
            for cand in _candidates():
                try:
                    lib = ffi.dlopen(cand)
                    _lib = (ffi, lib)
                    break
                except OSError as exc:
                    tried.append(f"{cand}: {exc}")
            else:
                raise BackendUnavailableError("cuBLAS not found; tried " + "; ".join(tried[:8]))
        return _lib


class CuBlas:
    """cuBLAS handles, one per thread (handles are not shared across threads)."""

    def __init__(self) -> None:
        self.ffi, self.lib = load_cublas()
        self._local = threading.local()
        self._handles: list[Any] = []
        self._lock = threading.Lock()

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            msg = self.ffi.string(self.lib.cublasGetStatusString(status)).decode()
            raise DeviceError(f"cuBLAS {what} failed: {msg} (status {status})")

    def handle(self) -> Any:
        h = getattr(self._local, "handle", None)
        if h is None:
            hp = self.ffi.new("cublasHandle_t *")
            self._check(self.lib.cublasCreate_v2(hp), "cublasCreate")
            h = hp[0]
            self._check(self.lib.cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")
            self._local.math = CUBLAS_DEFAULT_MATH
            self._local.handle = h
            with self._lock:
                self._handles.append(h)
        return h

    def on(self, stream: int) -> Any:
        """This thread's handle, bound to ``stream`` (a CUstream handle; 0 the default stream)."""
        h = self.handle()
        if getattr(self._local, "stream", 0) != stream:
            self._check(self.lib.cublasSetStream_v2(h, self.ffi.cast("void *", stream)), "cublasSetStream")
            self._local.stream = stream
        return h

    def _math(self, h: Any, mode: int) -> None:
        """This thread's handle in math ``mode`` (set only when it changes)."""
        if self._local.math != mode:
            self._check(self.lib.cublasSetMathMode(h, mode), "cublasSetMathMode")
            self._local.math = mode

    def _real_gemm(self, name: str, scalar: str, trans_a: bool, trans_b: bool, m: int, n: int, k: int, alpha: float,
                   a: int, lda: int, b: int, ldb: int, beta: float, c: int, ldc: int, stream: int) -> None:
        """cuBLAS's ``<name>_v2`` (Sgemm, Dgemm): alpha and beta as ``scalar`` (float, double)."""
        ffi = self.ffi
        h = self.on(stream)
        self._math(h, CUBLAS_DEFAULT_MATH)
        st = getattr(self.lib, f"{name}_v2")(
            h, CUBLAS_OP_T if trans_a else CUBLAS_OP_N, CUBLAS_OP_T if trans_b else CUBLAS_OP_N,
            m, n, k, ffi.new(f"{scalar} *", alpha), ffi.cast("void *", a), lda, ffi.cast("void *", b), ldb,
            ffi.new(f"{scalar} *", beta), ffi.cast("void *", c), ldc,
        )
        self._check(st, name)

    def sgemm(self, trans_a: bool, trans_b: bool, m: int, n: int, k: int, alpha: float,
              a: int, lda: int, b: int, ldb: int, beta: float, c: int, ldc: int, stream: int = 0) -> None:
        """Column-major ``C = alpha·op(A)·op(B) + beta·C`` on device pointers, queued on ``stream``."""
        self._real_gemm("cublasSgemm", "float", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream)

    def dgemm(self, trans_a: bool, trans_b: bool, m: int, n: int, k: int, alpha: float,
              a: int, lda: int, b: int, ldb: int, beta: float, c: int, ldc: int, stream: int = 0) -> None:
        """Column-major float64 ``C = alpha·op(A)·op(B) + beta·C`` (``cublasDgemm``), queued on ``stream``."""
        self._real_gemm("cublasDgemm", "double", trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream)

    def hgemm(self, trans_a: bool, trans_b: bool, m: int, n: int, k: int, alpha: float,
              a: int, lda: int, b: int, ldb: int, beta: float, c: int, ldc: int, c_f32: bool = False, stream: int = 0,
              bf16: bool = False) -> None:
        """Column-major fp16 (``bf16``: bfloat16) inputs, fp32 compute, a C of the inputs' type (or
        fp32) (``cublasGemmEx``), queued on ``stream``."""
        ffi = self.ffi
        half = CUDA_R_16BF if bf16 else CUDA_R_16F
        h = self.on(stream)
        self._math(h, CUBLAS_DEFAULT_MATH | (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION if bf16 else 0))
        st = self.lib.cublasGemmEx(
            h, CUBLAS_OP_T if trans_a else CUBLAS_OP_N, CUBLAS_OP_T if trans_b else CUBLAS_OP_N,
            m, n, k, ffi.new("float *", alpha), ffi.cast("void *", a), half, lda,
            ffi.cast("void *", b), half, ldb, ffi.new("float *", beta), ffi.cast("void *", c), CUDA_R_32F if c_f32 else half, ldc,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT,
        )
        self._check(st, "cublasGemmEx")
