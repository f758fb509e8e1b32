"""The cpu reference backend passes the whole conformance suite."""

from __future__ import annotations

import collections

from polygemm.testing import run_conformance


def test_cpu_passes_conformance():
    results = run_conformance("cpu")
    counts = collections.Counter(r.status for r in results)
    fails = [r for r in results if r.status == "fail"]
    assert not fails, fails
    assert counts["pass"] > 150
    # the only skips are device-array cases, which a host backend cannot have
    assert {r.group for r in results if r.status == "skip"} == {"device"}


def test_suite_detects_a_wrong_backend(monkeypatch):
    from polygemm.backends.cpu_ref import backend as cpu

    real = cpu.reference

    def off_by_a_bit(a, b, c=None, alpha=1.0, beta=0.0, dtype=None):
        r = real(a, b, c, alpha, beta, dtype)
        if r.size:
            r.flat[-1] += 0.1 * (abs(r.flat[-1]) + 1)
        return r

    monkeypatch.setattr(cpu, "reference", off_by_a_bit)
    results = run_conformance("cpu", dtypes=["float32"], variants=["reference"], quick=True)
    assert any(r.status == "fail" and r.group == "shapes" for r in results)


def test_the_pytest_suite_fails_on_filters_that_name_nothing(tmp_path):
    """``pytest --pyargs polygemm.testing`` with a variant or dtype filter the backend lacks (a
    typo in a plugin's CI) fails with a message naming it and what exists; it had passed as
    '1 skipped (empty parameter set)'. A valid filter still runs its cases."""
    import os
    import subprocess
    import sys

    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])

    def run(**env):
        base = {k: v for k, v in os.environ.items() if not k.startswith("POLYGEMM_TEST_")}  # a CI's own filters
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)  # the tree under test
        full = {**base, "POLYGEMM_TEST_BACKEND": "cpu", "PYTHONPATH": path, **env, "PYTHONDONTWRITEBYTECODE": "1"}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "polygemm.testing"],
                              capture_output=True, text=True, env=full, cwd=tmp_path)

    for env, named in (({"POLYGEMM_TEST_VARIANTS": "nosuch"}, "'nosuch'"),
                       ({"POLYGEMM_TEST_VARIANTS": "blas,nosuch"}, "'nosuch'"),
                       ({"POLYGEMM_TEST_DTYPES": "float128"}, "'float128'")):
        r = run(**env)
        assert r.returncode != 0 and named in r.stdout and "its variants: blas" in r.stdout, r.stdout[-2000:]
    ok = run(POLYGEMM_TEST_VARIANTS="reference", POLYGEMM_TEST_DTYPES="float32", POLYGEMM_TEST_QUICK="1")
    assert ok.returncode == 0 and " passed" in ok.stdout, ok.stdout[-2000:]
