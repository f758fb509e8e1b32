"""``gemm`` and ``explain``: normalize -> dispatch -> plan -> run -> report."""

from __future__ import annotations

import logging
import threading
from typing import Any

from . import registry
from .backend import Plan
from .problem import GemmProblem, normalize

__all__ = ["gemm", "explain", "last_plan"]

log = logging.getLogger("polygemm")
_local = threading.local()


def _plan(a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: str | None, variant: str, out: Any) -> Plan:
    if not isinstance(variant, str) or not variant:
        from .errors import ArgumentError

        raise ArgumentError(f"variant must be a variant name or 'auto'; got {variant!r}")
    problem: GemmProblem = normalize(a, b, c, alpha=alpha, beta=beta, out=out)
    backend, passed = registry.select(problem, device, variant)
    backend.check_problem(problem)
    plan = backend.plan(problem, variant)
    plan.candidates = passed + plan.candidates
    plan.notes = list(problem.notes) + plan.notes
    return plan


def gemm(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    device: str | None = None,
    variant: str = "auto",
    out: Any = None,
) -> Any:
    """Return ``alpha * (a @ b) + beta * c``, computed by the chosen backend.

    ``a`` (M×K) and ``b`` (K×N) are 2-D NumPy arrays (or array-likes), or device arrays
    (``__cuda_array_interface__`` objects, MUSA arrays). Any memory order is used as it
    is; other strided views are copied once. ``c`` (M×N) is read only when ``beta != 0``.
    ``out`` receives the result and is returned; it may be ``c`` itself (in place).
    ``device`` is a backend name or ``"auto"`` (default: ``$POLYGEMM_DEVICE`` or auto);
    an explicit device never falls back. ``variant`` picks a kernel of that backend.

    Host inputs give a NumPy array; device inputs give a device array of the same kind.
    Raises ShapeError / DTypeError / ArgumentError for bad inputs,
    BackendUnavailableError when the device cannot run, DeviceError on device failure.
    """
    plan = _plan(a, b, c, alpha, beta, device, variant, out)
    backend = registry.get_backend(plan.backend)
    result = backend.run(plan)
    _local.plan = plan
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", plan)
    return result


def explain(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    device: str | None = None,
    variant: str = "auto",
    out: Any = None,
) -> Plan:
    """Return the :class:`Plan` ``gemm`` would run for these arguments, without running it.

    The plan names the backend, variant and device, why they were chosen, the layouts,
    any copies or padding, and (for ``device="auto"``) the backends passed over and why.
    """
    return _plan(a, b, c, alpha, beta, device, variant, out)


def last_plan() -> Plan | None:
    """The plan of the last ``gemm`` call completed in this thread (None before any)."""
    return getattr(_local, "plan", None)
