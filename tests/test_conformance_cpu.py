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
