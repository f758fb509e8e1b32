"""``polygemm tune`` and POLYGEMM_AUTOTUNE=1 on a real GPU (marked ``cuda``): the winners land in
the tuning cache, auto runs them (explain says "measured on this GPU"), and the products stay
correct, in place too, after tuning on first sight."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda import autotune, tune_cache
from polygemm.testing import assert_close

from tests.helpers import cli, cuda_or_skip


@pytest.fixture
def cuda(tmp_path, monkeypatch):
    be = cuda_or_skip()
    monkeypatch.setattr(tune_cache, "tune_dir", lambda: tmp_path)  # the user's own tuning cache stays as it is
    monkeypatch.delenv("POLYGEMM_TUNE_CACHE", raising=False)
    monkeypatch.setattr(autotune, "AUTOTUNE_BUDGET", [])
    tune_cache.forget_caches()
    pg.clear_plan_cache()
    yield be
    tune_cache.forget_caches()
    pg.clear_plan_cache()


@pytest.mark.cuda
def test_tune_measures_real_shapes_and_auto_runs_the_winners(cuda, capsys, tmp_path, rng):
    shapes = ["512x1500x2816", "1024x1024x1024:nt", "4096x16x4096"]
    argv = ["tune", "--dtype", "float16", "--top", "3", "--splits", "2", "--json"]
    for s in shapes:
        argv += ["--shape", s]
    rc, out, err = cli(capsys, argv)
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    assert len(rows) == 3 and all(r["winner"] and r["us"] > 0 and r["estimate_pick"] for r in rows), rows
    assert all(r["estimate_pick_us"] >= r["us"] for r in rows)  # the winner is the fastest timed
    gpu = autotune.gpu_of(cuda.runtime, cuda.runtime.sms)
    assert len(tune_cache.cache_for(gpu)) == 3
    assert [p.name for p in tmp_path.iterdir()] == [f"{gpu.slug}.json"]
    for r in rows:
        m, n, k = r["m"], r["n"], r["k"]
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((n, k)).astype(np.float16).T if r["layout"] == "nt" else rng.standard_normal((k, n)).astype(np.float16)
        plan = pg.explain(a, b, device="cuda")
        assert plan.variant == r["winner"].removesuffix(" on aligned copies") and "measured on this GPU" in plan.reason, str(plan)
        assert_close(pg.gemm(a, b, device="cuda"), a, b)
    time.sleep(1.0)  # measurements record their time to the second: the next run starts after this one's
    rc, out, _ = cli(capsys, ["tune", "--shape", shapes[0]])
    assert rc == 0 and "(cached)" in out


@pytest.mark.cuda
def test_autotune_tunes_on_first_sight_and_writes_out_once(cuda, monkeypatch, rng):
    monkeypatch.setenv("POLYGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("POLYGEMM_AUTOTUNE_SECONDS", "1")
    m, n, k = 1000, 700, 1500
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float16)
    da, db, dc = cuda.to_device(a), cuda.to_device(b), cuda.to_device(c)
    res = pg.gemm(da, db, dc, alpha=0.5, beta=-1.5, out=dc, device="cuda")  # in place: c read once, then written once
    assert_close(cuda.to_host(res), a, b, c, 0.5, -1.5)
    plan = pg.last_plan()
    assert "measured on this GPU" in plan.reason, str(plan)
    gpu = autotune.gpu_of(cuda.runtime, cuda.runtime.sms)
    assert len(tune_cache.cache_for(gpu)) == 1
    assert autotune.safe_to_time(cuda.runtime)  # asked from a NumPy caller's thread too (the device's context pushed)
