"""The ``numpy_blas`` backend: ``numpy.matmul`` on the CPU BLAS (float16 computed in float32).

A complete, minimal polygemm backend. polygemm has already validated every argument
(shapes, dtypes, alpha/beta, overlaps of ``out``) before ``plan`` is called, so a backend
only decides what to run (``plan``) and computes it (``run``).
"""

from __future__ import annotations

import platform
from typing import Any, Sequence

import numpy as np

from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts
from polygemm.errors import DeviceError
from polygemm.problem import GemmProblem

__all__ = ["NumpyBlasBackend"]

_VARIANTS: tuple[Variant, ...] = (
    Variant(
        "matmul",
        ("float16", "float32", "float64"),
        "numpy.matmul on the CPU BLAS; float32/float64 in their own precision, float16 in float32, rounded once",
        layout="any",
        tile="BLAS heuristics",
        requirements="none (NumPy takes any row/column-major operand without a copy)",
    ),
)


def _fits(work: np.dtype, value: float) -> bool:
    """Whether ``value`` keeps its magnitude and precision in ``work``: finite there, and zero, a
    normal number or exactly representable (a subnormal keeps fewer bits)."""
    with np.errstate(over="ignore", under="ignore"):
        w = work.type(value)
    if not np.isfinite(w):
        return False
    return value == 0.0 or abs(float(w)) >= float(np.finfo(work).tiny) or float(w) == value


class NumpyBlasBackend(Backend):
    """GEMM through ``numpy.matmul`` on host (NumPy) arrays.

    ``priority`` is 300, the default polygemm gives plugins (``Backend.priority``):
    ``device="auto"`` prefers it to the ``cpu`` reference (0) and prefers the GPU
    backends (cuda 500, musa 400) to it, wherever they are available and support the
    problem.
    """

    name = "numpy_blas"
    priority = 300
    residencies = ("host",)  # NumPy arrays only: the conformance suite skips device cases

    def probe(self) -> Availability:
        """Always available: NumPy is a dependency of polygemm itself. Never raises."""
        return Availability(True)

    def variants(self) -> Sequence[Variant]:
        """The static variant table: one auto-selectable variant, ``matmul``."""
        return _VARIANTS

    def device_name(self) -> str:
        """The CPU architecture and NumPy version (shown by ``polygemm info`` and plans)."""
        return f"CPU BLAS ({platform.machine() or 'unknown'}), NumPy {np.__version__}"

    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        """Choose the variant for ``problem`` without computing anything.

        Raises UnsupportedProblemError for an unknown variant name and DTypeError for a
        dtype the variant does not compute (through ``get_variant`` / ``check_problem``),
        so a bad request fails before any work is done.
        """
        chosen = self.get_variant("matmul" if variant == "auto" else variant)
        self.check_problem(problem, chosen)
        reason = "the numpy_blas backend's one variant" if variant == "auto" else f"variant={variant!r} requested"
        copies: list[str] = []
        if problem.dtype == np.float16:
            # BLAS has no half-precision GEMM; polygemm promises float32 accumulation for float16.
            copies.append("a and b converted to float32 for numpy.matmul; the result rounded once to float16")
        if problem.empty:
            reason += "; empty product (M, N or K is 0): no multiplication, the result is beta*c or zeros"
        return Plan(self.name, chosen.name, reason, problem, device=self.device_name(), layouts=host_layouts(problem), copies=copies)

    def run(self, plan: Plan) -> Any:
        """Compute ``alpha * a @ b + beta * c`` as planned.

        Returns a new NumPy array, or ``out`` itself (filled) when one was given. ``c`` is
        not read when ``beta == 0`` (BLAS semantics: a NaN there does not propagate). NaN
        and Inf in ``a`` and ``b`` propagate as IEEE arithmetic says. On failure raises
        DeviceError and leaves ``out`` untouched.
        """
        p = plan.problem
        work = np.dtype(np.float32) if p.dtype == np.float16 else p.dtype
        try:
            # errstate: NaN/Inf in the inputs are data to propagate, not warnings to print.
            with np.errstate(all="ignore"):
                if p.empty:
                    # Nothing to multiply (K = 0 gives a zero product; M or N = 0 has no elements).
                    res = np.zeros((p.m, p.n), dtype=work)
                else:
                    res = np.matmul(p.a.array.astype(work, copy=False), p.b.array.astype(work, copy=False))
                if not (_fits(work, p.alpha) and _fits(work, p.beta)):
                    # alpha and beta are any finite float64: 1e39 overflows float32 (an Inf result where the
                    # product is finite) and 1e-45 keeps one bit there, so such scalars scale in float64
                    work = np.dtype(np.float64)
                    res = res.astype(work)
                if p.alpha != 1.0:
                    res *= work.type(p.alpha)
                if p.beta != 0.0 and p.c is not None:  # beta == 0: c is never read
                    res += work.type(p.beta) * p.c.array.astype(work, copy=False)
                res = res.astype(p.out_dtype, copy=False)
        except MemoryError as exc:
            raise DeviceError(f"numpy_blas: numpy.matmul could not allocate its result for a {p.shape_str()} {p.dtype.name} product: {exc}") from exc
        if p.out is not None:
            # Only now is out written: res is complete, and out may be c itself (in place),
            # which the computation above has finished reading.
            np.copyto(p.out.array, res)
            return p.out.array
        return res
