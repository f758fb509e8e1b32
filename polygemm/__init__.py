"""polygemm: one call, ``polygemm.gemm(a, b, device=...)``, in front of several vendors'
hand-written GEMM kernels (NVIDIA through PyCUDA, Moore Threads MUSA through cffi, and a
float64 NumPy reference on the CPU).

Importing polygemm imports no vendor runtime: backends load on first use.
"""

from __future__ import annotations

from . import errors
from .api import clear_plan_cache, explain, gemm, last_plan, matmul, plan_cache_info
from .backend import Availability, Backend, Capabilities, Plan, Variant
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    BackendUnavailableError,
    DeviceError,
    DTypeError,
    PolygemmError,
    ShapeError,
    UnsupportedProblemError,
)
from . import backends  # callable: polygemm.backends() lists the backends
from .registry import BackendInfo, get_backend

__version__ = "0.1.0"

__all__ = [
    "gemm",
    "matmul",
    "explain",
    "plan_cache_info",
    "clear_plan_cache",
    "last_plan",
    "backends",
    "get_backend",
    "errors",
    "Backend",
    "BackendInfo",
    "Availability",
    "Capabilities",
    "Plan",
    "Variant",
    "PolygemmError",
    "ShapeError",
    "DTypeError",
    "ArgumentError",
    "ArgumentTypeError",
    "BackendUnavailableError",
    "UnsupportedProblemError",
    "DeviceError",
    "__version__",
]
