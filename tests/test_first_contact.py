"""What a new user meets first: ``c`` counts in ``gemm(a, b, c)`` (beta defaults to 1 with c, as
BLAS and torch.addmm have it), ``explain`` takes what ``matmul`` takes, and ``device="auto"``
does not wait out a plugin whose probe is slow."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from plugin_sources import BROKEN_BASE, install_fake_distribution

ROOT = Path(__file__).resolve().parents[1]


def test_gemm_with_c_adds_c_by_default(rng):
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))
    c = rng.standard_normal((5, 3))
    np.testing.assert_allclose(pg.gemm(a, b, c, device="cpu"), a @ b + c, rtol=1e-12)
    np.testing.assert_allclose(pg.gemm(a, b, c, alpha=2.0, device="cpu"), 2 * (a @ b) + c, rtol=1e-12)
    # beta=0 given: c is not read (NaN there does not propagate)
    nan = np.full((5, 3), np.nan)
    assert not np.isnan(pg.gemm(a, b, nan, beta=0.0, device="cpu")).any()
    # without c, beta defaults to 0: no c needed
    np.testing.assert_allclose(pg.gemm(a, b, device="cpu"), a @ b, rtol=1e-12)
    # in place: out is c, updated as BLAS updates C
    out = c.copy()
    pg.gemm(a, b, out, out=out, device="cpu")
    np.testing.assert_allclose(out, a @ b + c, rtol=1e-12)


def test_explain_of_gemm_with_c_says_beta_one(rng):
    a, b, c = np.ones((2, 3)), np.ones((3, 4)), np.ones((2, 4))
    assert pg.explain(a, b, c, device="cpu").problem.beta == 1.0
    assert pg.explain(a, b, device="cpu").problem.beta == 0.0
    assert pg.explain(a, b, c, beta=0.5, device="cpu").problem.beta == 0.5


def test_dask_gemm_with_c_adds_c_by_default(rng):
    da = pytest.importorskip("dask.array")
    a, b, c = rng.standard_normal((6, 4)), rng.standard_normal((4, 5)), rng.standard_normal((6, 5))
    A, B, C = da.from_array(a, chunks=(3, 2)), da.from_array(b, chunks=(2, 3)), da.from_array(c, chunks=(3, 3))
    import polygemm.dask as pgd

    np.testing.assert_allclose(pgd.gemm(A, B, C, device="cpu").compute(), a @ b + c, rtol=1e-12)
    np.testing.assert_allclose(pgd.gemm(A, B, C, beta=0.0, device="cpu").compute(), a @ b, rtol=1e-12)


@pytest.mark.parametrize("sa, sb", [((4,), (4, 3)), ((2, 4), (4,)), ((4,), (4,)), ((5, 2, 4), (4,))])
def test_explain_takes_what_matmul_takes(sa, sb):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    plan = pg.explain(a, b, device="cpu")
    assert plan.backend == "cpu"
    assert any("vector" in note and "matmul" in note for note in plan.notes)
    assert pg.matmul(a, b, device="cpu").shape == np.matmul(a, b).shape


def test_explain_of_a_scalar_is_still_refused():
    with pytest.raises(pg.ShapeError, match="scalar"):
        pg.explain(np.float32(2.0), np.ones((2, 2), np.float32))


SLOW = BROKEN_BASE + """
import time
class B(Base):
    priority = 600  # above every built-in: device="auto" would take it once it answers
    def probe(self):
        time.sleep(8)
        return Availability(True)
"""

DRIVER = """
import time, numpy as np, polygemm as pg
a = np.ones((2, 3), np.float32)
t0 = time.monotonic()
r = pg.gemm(a, a.T)
print("ELAPSED", time.monotonic() - t0)
plan = pg.last_plan()
t1 = time.monotonic()
pg.gemm(np.ones((3, 4), np.float32), np.ones((4, 5), np.float32))  # a new shape plans again: no second wait
print("AGAIN", time.monotonic() - t1)
print("BACKEND", plan.backend)
print("PASSED", dict(plan.candidates).get("slowprobe", "-"))
infos = {i.name: i for i in pg.backends()}  # waits for the probe, as `polygemm info` does
print("INFO", infos["slowprobe"].available)
"""


def test_auto_does_not_wait_for_a_slow_probe(tmp_path):
    install_fake_distribution(tmp_path, "pg_slowprobe", "pg_slowprobe_plugin", SLOW, {"slowprobe": "pg_slowprobe_plugin:B"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("POLYGEMM_DEVICE", None)
    env.pop("POLYGEMM_PROBE_TIMEOUT", None)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert float(out["ELAPSED"]) < 6, r.stdout  # a few seconds at most, not the probe's 8 (nor the 30 s timeout)
    assert float(out["AGAIN"]) < 1.5, r.stdout  # waited for once, not at every new plan
    assert out["BACKEND"] != "slowprobe"
    assert "probe still running" in out["PASSED"], r.stdout
    assert out["INFO"] == "True", r.stdout  # the probe went on and answered
    assert time.monotonic() - t0 < 60
