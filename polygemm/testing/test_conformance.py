"""The conformance suite under pytest: ``pytest --pyargs polygemm.testing``.

Environment variables choose what runs (a plugin's CI needs one line):

* ``POLYGEMM_TEST_BACKEND`` — backend name (default ``cpu``);
* ``POLYGEMM_TEST_VARIANTS`` / ``POLYGEMM_TEST_DTYPES`` — comma-separated filters;
* ``POLYGEMM_TEST_QUICK=1`` — the quick grid.

An unavailable backend is one skipped test whose reason is the backend's.
"""

from __future__ import annotations

import os

import pytest

from polygemm.errors import PolygemmError
from polygemm.registry import get_backend
from polygemm.testing.conformance import _availability, iter_cases, run_case


def _split(name: str) -> list[str] | None:
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] or None


BACKEND = os.environ.get("POLYGEMM_TEST_BACKEND", "cpu").strip() or "cpu"


def _params() -> list:
    try:
        be = get_backend(BACKEND)
    except PolygemmError as exc:  # unknown or unloadable: a failure, so a typo cannot pass CI
        return [pytest.param(exc, id=f"{BACKEND}-not-loadable")]
    ok, reason = _availability(be)
    if not ok:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"backend {BACKEND!r} unavailable: {reason}"), id=f"{BACKEND}-unavailable")]
    cases = iter_cases(be, dtypes=_split("POLYGEMM_TEST_DTYPES"), variants=_split("POLYGEMM_TEST_VARIANTS"), quick=os.environ.get("POLYGEMM_TEST_QUICK") == "1")
    return [pytest.param((be, *c), id=f"{be.name}-{c[0]}-{c[1]}-{c[2]}-{c[3]}") for c in cases]


@pytest.mark.parametrize("target", _params())
def test_conformance_case(target):
    if isinstance(target, Exception):
        pytest.fail(f"POLYGEMM_TEST_BACKEND={BACKEND!r}: {target}")
    be, dtype, variant, group, name, case = target
    result = run_case(be, dtype, variant, group, name, case)
    if result.status == "skip":
        pytest.skip(result.detail)
    assert result.status == "pass", result.detail
