"""The problem a backend is given: :class:`GemmProblem` (sizes, dtypes, layouts, residency),
its :class:`Operand` objects and the :class:`Call` of one call's operands.

This module is part of the plugin contract (with :mod:`polygemm.backend`): plugins import these
names from here. They are defined in :mod:`polygemm.core`, by purpose; ``normalize`` turns
``gemm``'s arguments into a problem.
"""

from __future__ import annotations

from .core.dtypes import HALF_DTYPES, SUPPORTED_DTYPES, as_dtype, bfloat16, check_result_dtype, dtype_named, finfo, native_dtype, parse_dtype
from .core.hints import promotion_hint
from .core.hostcopy import host_convert, planning_only
from .core.layout import Layout, check_c_shape, check_ndim
from .core.normalize import normalize
from .core.operand import Operand, Residency
from .core.problem import Call, GemmProblem, common_stream
from .core.read import NotWhole, OutBatchUnwalkable
from .core.text import short_repr
from .core.views import operand_view
from .interop.cuda_array_interface import device_interface

__all__ = [
    "Operand",
    "GemmProblem",
    "normalize",
    "native_dtype",
    "as_dtype",
    "NotWhole",
    "OutBatchUnwalkable",
    "SUPPORTED_DTYPES",
    "device_interface",
    "Call",
    "common_stream",
    "operand_view",
    "host_convert",
    "planning_only",
    "bfloat16",
    "dtype_named",
    "finfo",
    "check_ndim",
    "check_c_shape",
    "check_result_dtype",
    "parse_dtype",
    "promotion_hint",
    "short_repr",
    "HALF_DTYPES",
    "Layout",
    "Residency",
]
