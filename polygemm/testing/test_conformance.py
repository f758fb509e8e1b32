"""The conformance suite under pytest: ``pytest --pyargs polygemm.testing``.

Environment variables choose what runs (a plugin's CI needs one line):

* ``POLYGEMM_TEST_BACKEND`` — backend name (default ``cpu``);
* ``POLYGEMM_TEST_VARIANTS`` / ``POLYGEMM_TEST_DTYPES`` — comma-separated filters;
* ``POLYGEMM_TEST_QUICK`` — the quick grid when ``1``, ``true``, ``yes`` or ``on`` (any case);
  ``0``, ``false``, ``no``, ``off``, empty or unset: the full grid;
* ``POLYGEMM_TEST_SEED`` — the seed a failure named: every case runs on that seed's inputs (with ``-k`` picking
  the case, the failure again); unset, fresh inputs each case.

A backend its machine cannot run (its probe said no) is one skipped test whose reason is the backend's.
An unknown backend, one unavailable for a fault of its own code (a variant table, priority or residencies of
the wrong kinds, a probe() that raised), filters that match no case of it, or a ``POLYGEMM_TEST_QUICK`` of
another spelling, is one failing test that says so (a broken plugin or a typo cannot pass CI).
"""

from __future__ import annotations

import os

import pytest

from polygemm.core.dtypes import dtype_alias
from polygemm.errors import PolygemmError
from polygemm.registry import env_flag, get_backend
from polygemm.registry.checks import contract_fault
from polygemm.testing.conformance import CHECKED_DTYPES, availability, iter_cases, modified_variants, run_case, unchecked_dtypes


def _split(name: str) -> list[str] | None:
    value = os.environ.get(name, "").strip()
    names = [v.strip() for v in value.split(",") if v.strip()]
    return ([dtype_alias(v) for v in names] if name.endswith("DTYPES") else names) or None  # (fp32, as matrix takes it)


BACKEND = os.environ.get("POLYGEMM_TEST_BACKEND", "cpu").strip() or "cpu"


def _params() -> list:
    try:  # before the backend: a misspelt value fails even where the backend is unavailable (skipped)
        quick = env_flag("POLYGEMM_TEST_QUICK")
    except PolygemmError as exc:
        return [pytest.param(exc, id="POLYGEMM_TEST_QUICK-not-on-or-off")]
    try:
        be = get_backend(BACKEND)
    except PolygemmError as exc:  # unknown or unloadable: a failure, so a typo cannot pass CI
        return [pytest.param(exc, id=f"{BACKEND}-not-loadable")]
    ok, reason = availability(be)
    if not ok:
        fault = contract_fault(be, reason)
        if fault is not None:  # unavailable for a fault of its own code, not of this machine: a failure, as a typo is
            return [pytest.param(PolygemmError(f"backend {BACKEND!r} breaks the backend contract: {fault}"),
                                 id=f"{BACKEND}-breaks-the-contract")]
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"backend {BACKEND!r} unavailable: {reason}"), id=f"{BACKEND}-unavailable")]
    dtypes, variants = _split("POLYGEMM_TEST_DTYPES"), _split("POLYGEMM_TEST_VARIANTS")
    table = be.variants()
    names, kinds = {v.name for v in table}, {d for v in table for d in v.dtypes}
    known = f"(its variants: {', '.join(sorted(names)) or 'none'}; its dtypes: {', '.join(sorted(kinds)) or 'none'})"
    # a filter naming what the backend lacks (a typo) fails, rather than quietly testing less
    # "rung:split_k=4" names its rung (cuda's split over K): run by that name, or refused in the backend's words
    unchecked = [d for d in dtypes or () if d in kinds and d not in CHECKED_DTYPES]
    if unchecked:  # a dtype the backend computes but the suite does not check: said so, not "no case"
        return [pytest.param(PolygemmError(unchecked_dtypes("POLYGEMM_TEST_DTYPES", unchecked)), id=f"{be.name}-unchecked-dtype")]
    unknown = [f"POLYGEMM_TEST_VARIANTS names {v!r}" for v in variants or () if v.partition(":")[0] not in names] + \
              [f"POLYGEMM_TEST_DTYPES names {d!r}" for d in dtypes or () if d not in kinds]
    if unknown:
        return [pytest.param(PolygemmError(f"{'; '.join(unknown)}, which backend {be.name!r} does not have {known}"),
                             id=f"{be.name}-unknown-filter")]
    try:
        modified_variants(be, variants)
    except PolygemmError as exc:
        return [pytest.param(PolygemmError(f"POLYGEMM_TEST_VARIANTS: {exc}"), id=f"{be.name}-refused-variant")]
    cases = list(iter_cases(be, dtypes=dtypes, variants=variants, quick=quick))
    if not cases:  # e.g. a dtype that none of the named variants computes
        why = (f"POLYGEMM_TEST_VARIANTS={','.join(variants or ['(all)'])} and POLYGEMM_TEST_DTYPES={','.join(dtypes or ['(all)'])} "
               f"match no case of backend {be.name!r} {known}")
        return [pytest.param(PolygemmError(why), id=f"{be.name}-no-case")]
    return [pytest.param((be, *c), id=f"{be.name}-{c[0]}-{c[1]}-{c[2]}-{c[3]}") for c in cases]


@pytest.mark.parametrize("target", _params())
def test_conformance_case(target):
    if isinstance(target, Exception):
        pytest.fail(f"POLYGEMM_TEST_BACKEND={BACKEND!r}: {target}")
    be, dtype, variant, group, name, case = target
    seed = os.environ.get("POLYGEMM_TEST_SEED", "").strip()
    if seed and not (seed.isascii() and seed.isdigit() and int(seed) < 2**32):
        pytest.fail(f"POLYGEMM_TEST_SEED={seed!r}: pass the seed a failure named (an integer from 0 to 2**32 - 1)")
    result = run_case(be, dtype, variant, group, name, case, seed=int(seed) if seed else None)
    if result.status == "skip":
        pytest.skip(result.detail)
    assert result.status == "pass", result.detail
