"""Testing tools for polygemm and its plugins.

* :func:`error_bound` / :func:`check_result` / :func:`assert_close`: the one error bound
  every correctness check uses (ARCHITECTURE.md "Numerics").
* :func:`inject_fault`: corrupt one element of verified products (``verify=``) before their check.
* :func:`run_conformance`: the conformance suite any backend runs.
* ``pytest --pyargs polygemm.testing`` runs the suite under pytest for the backend named
  by ``POLYGEMM_TEST_BACKEND`` (default ``cpu``).
"""

from .bounds import Reference, accumulation_dtype, assert_close, check_result, error_bound, reference_for, unit_roundoff
from .conformance import CaseResult, case_groups, run_conformance
from .faults import inject_fault

__all__ = [
    "error_bound",
    "check_result",
    "reference_for",
    "Reference",
    "assert_close",
    "unit_roundoff",
    "accumulation_dtype",
    "run_conformance",
    "case_groups",
    "CaseResult",
    "inject_fault",
]
