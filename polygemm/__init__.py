"""polygemm: one call, ``polygemm.gemm(a, b, device=...)``, in front of several vendors'
hand-written GEMM kernels (NVIDIA through PyCUDA, Moore Threads MUSA through cffi, and a
float64 NumPy reference on the CPU).

Importing polygemm imports no vendor runtime: backends load on first use.
"""

from __future__ import annotations

from typing import Any as _Any

from . import errors
from .api import clear_plan_cache, explain, gemm, last_plan, matmul, plan_cache_info
from .backend import Availability, Backend, Capabilities, Plan, Variant
from .core.precision import PRECISIONS, get_float32_matmul_precision, set_float32_matmul_precision
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    BackendUnavailableError,
    DeviceError,
    DTypeError,
    PolygemmError,
    ShapeError,
    UnknownDeviceError,
    UnsupportedProblemError,
    VerificationError,
    VerificationWarning,
)
from .verification import get_verify, set_verify
from . import backends  # callable: polygemm.backends() lists the backends
from .registry import BackendInfo, get_backend

__version__ = "0.1.0"

# Submodules of the public API that "import polygemm" does not import (polygemm.dask's dask is imported
# only when its gemm is called; polygemm.testing is the suite; polygemm.tuning records a run's products): reached as attributes on first use, as
# numpy.testing is after "import numpy": "import polygemm; polygemm.testing.check_result(...)" works, as the
# documentation names it (docs/api.md).
_LAZY_SUBMODULES = ("testing", "dask", "tuning")


def __getattr__(name: str) -> _Any:
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))

__all__ = [
    "gemm",
    "matmul",
    "explain",
    "plan_cache_info",
    "clear_plan_cache",
    "last_plan",
    "set_float32_matmul_precision",
    "get_float32_matmul_precision",
    "PRECISIONS",
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
    "UnknownDeviceError",
    "UnsupportedProblemError",
    "DeviceError",
    "VerificationError",
    "VerificationWarning",
    "set_verify",
    "get_verify",
    "__version__",
]
