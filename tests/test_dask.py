"""polygemm.dask.gemm on the CPU: the threaded scheduler and a 2-worker distributed LocalCluster.

Awkward chunkings (uneven, one chunk, K split in 3, mismatched K chunks), alpha/beta with c,
float16 in with float32 out, the graph's shape (one task per output block, no sum tasks) and
tools/bench_dask.py --dry-run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import polygemm
from polygemm.errors import ArgumentError, DTypeError, ShapeError
from polygemm.testing import assert_close

da = pytest.importorskip("dask.array", reason="dask[array] not installed (pip install 'polygemm[dask]')")
import polygemm.dask as pgd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# (m, k, n, A's chunks, B's chunks): every case's K chunks agree (mismatches have their own test)
CASES = {
    "uneven": (37, 50, 29, ((10, 20, 7), (17, 17, 16)), ((17, 17, 16), (5, 24))),
    "single-chunk": (33, 21, 18, ((33,), (21,)), ((21,), (18,))),
    "k-split-3": (24, 90, 16, ((12, 12), (30, 30, 30)), ((30, 30, 30), (8, 8))),
    "k-split-3-uneven": (20, 61, 13, ((7, 7, 6), (1, 40, 20)), ((1, 40, 20), (13,))),
}


def _operands(rng, m, k, n, dtype=np.float64):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    return a, b, c


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed", reason="distributed not installed (pip install 'polygemm[dask]')")
    cluster = distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None)
    cl = distributed.Client(cluster, set_as_default=False)  # .compute() elsewhere stays on the threaded scheduler
    try:
        yield cl
    finally:
        cl.close()
        cluster.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_threaded_scheduler(rng, case):
    m, k, n, ca, cb = CASES[case]
    a, b, c = _operands(rng, m, k, n)
    A, B = da.from_array(a, chunks=ca), da.from_array(b, chunks=cb)
    R = pgd.gemm(A, B, device="cpu")
    assert R.shape == (m, n) and R.chunks == (ca[0], cb[1]) and R.dtype == np.float64
    r = R.compute(scheduler="threads")
    assert isinstance(r, np.ndarray)
    assert_close(r, a, b)
    r = pgd.gemm(A, B, c, alpha=-0.75, beta=1.5, device="cpu").compute(scheduler="threads")
    assert_close(r, a, b, c, -0.75, 1.5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_local_cluster_two_workers(rng, client, case):
    m, k, n, ca, cb = CASES[case]
    a, b, c = _operands(rng, m, k, n)
    A, B = da.from_array(a, chunks=ca), da.from_array(b, chunks=cb)
    Cd = da.from_array(c, chunks=(ca[0], cb[1]))
    R = pgd.gemm(A, B, Cd, alpha=2.0, beta=-0.5, device="cpu")
    r = client.compute(R).result()
    assert_close(r, a, b, c, 2.0, -0.5)
    assert_close(client.compute(pgd.gemm(A, B, device="cpu")).result(), a, b)


def test_local_cluster_runs_on_both_workers(rng, client):
    a, b, _ = _operands(rng, 64, 48, 64)
    A, B = da.from_array(a, chunks=(16, 16)), da.from_array(b, chunks=(16, 16))
    R = pgd.gemm(A, B, device="cpu")
    with __import__("distributed").get_task_stream(client) as ts:
        r = client.compute(R).result()
    assert_close(r, a, b)
    workers = {t["worker"] for t in ts.data if t["key"][0].startswith("polygemm-gemm-") if isinstance(t["key"], tuple)}
    assert len(workers) == 2, workers


def test_mismatched_k_chunks_rechunk_with_warning(rng, client):
    a, b, c = _operands(rng, 30, 48, 20)
    A = da.from_array(a, chunks=(10, (16, 16, 16)))
    B = da.from_array(b, chunks=((20, 28), 10))  # fewer K chunks: A follows B
    with pytest.warns(pgd.DaskRechunkWarning, match="chunks over K differ"):
        R = pgd.gemm(A, B, c, beta=1.0, device="cpu")
    assert issubclass(pgd.DaskRechunkWarning, UserWarning)
    assert_close(R.compute(scheduler="threads"), a, b, c, 1.0, 1.0)
    assert_close(client.compute(R).result(), a, b, c, 1.0, 1.0)
    A2 = da.from_array(a, chunks=(10, (24, 24)))
    B2 = da.from_array(b, chunks=((10, 10, 28), 10))  # A has fewer: B follows A
    with pytest.warns(pgd.DaskRechunkWarning, match="rechunking B's rows"):
        R2 = pgd.gemm(A2, B2, device="cpu")
    assert_close(R2.compute(), a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # aligned chunks: no warning
        pgd.gemm(A2, B2.rechunk({0: (24, 24)}), device="cpu")


def test_c_rechunked_and_numpy_c(rng):
    a, b, c = _operands(rng, 30, 20, 24)
    A, B = da.from_array(a, chunks=(10, 20)), da.from_array(b, chunks=(20, 8))
    with pytest.warns(pgd.DaskRechunkWarning, match="c's chunks"):
        R = pgd.gemm(A, B, da.from_array(c, chunks=(15, 12)), alpha=0.5, beta=2.0, device="cpu")
    assert_close(R.compute(), a, b, c, 0.5, 2.0)
    R = pgd.gemm(A, B, c, alpha=0.5, beta=2.0, device="cpu")  # a NumPy c is chunked like the result
    assert_close(R.compute(), a, b, c, 0.5, 2.0)


def test_c_not_read_when_beta_zero(rng):
    a, b, c = _operands(rng, 12, 9, 10)
    A, B = da.from_array(a, chunks=(6, 3)), da.from_array(b, chunks=(3, 5))
    Cnan = da.from_array(np.full_like(c, np.nan), chunks=(4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # c's chunks do not matter: it is not part of the graph
        R = pgd.gemm(A, B, Cnan, beta=0.0, device="cpu")
    assert Cnan.name not in R.dask.layers
    assert_close(R.compute(), a, b)


@pytest.mark.parametrize("scheduler", ["threads", "cluster"])
def test_float16_in_float32_out(rng, request, scheduler):
    a, b, c = _operands(rng, 40, 96, 24, np.float16)
    c32 = c.astype(np.float32)
    A, B = da.from_array(a, chunks=(16, 32)), da.from_array(b, chunks=(32, 12))
    R = pgd.gemm(A, B, c32, alpha=1.0, beta=-1.0, device="cpu", out_dtype=np.float32)
    assert R.dtype == np.float32
    r = R.compute(scheduler="threads") if scheduler == "threads" else request.getfixturevalue("client").compute(R).result()
    assert r.dtype == np.float32
    assert_close(r, a, b, c32, 1.0, -1.0, out_dtype=np.float32)


def test_float16_out_over_k_blocks_is_one_rounding(rng):
    # several K blocks, float16 result: accumulated in float32 inside the task, rounded once
    a, b, c = _operands(rng, 32, 300, 16, np.float16)
    A, B = da.from_array(a, chunks=(16, 100)), da.from_array(b, chunks=(100, 16))
    r = pgd.gemm(A, B, device="cpu").compute()
    assert r.dtype == np.float16
    assert_close(r, a, b)
    r = pgd.gemm(A, B, c, alpha=0.5, beta=0.25, device="cpu").compute()
    assert_close(r, a, b, c, 0.5, 0.25)


def test_bfloat16_out_over_k_blocks_is_one_rounding(rng):
    """bfloat16 blocks (ml_dtypes) over several K blocks: accumulated in float32 inside the task
    and rounded to bfloat16 once, as float16 is (bf16's 8-bit significand would lose a rounding
    per K block otherwise)."""
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    a, b, c = _operands(rng, 32, 600, 16, bf16)
    A, B = da.from_array(a, chunks=(16, 100)), da.from_array(b, chunks=(100, 16))
    r = pgd.gemm(A, B, device="cpu").compute()
    assert r.dtype == np.dtype(bf16)
    assert_close(r, a, b)
    r = pgd.gemm(A, B, c, alpha=0.5, beta=0.25, device="cpu").compute()
    assert_close(r, a, b, c, 0.5, 0.25)


def test_graph_has_one_task_per_output_block_and_no_sums(rng):
    a, b, c = _operands(rng, 30, 45, 20)
    A = da.from_array(a, chunks=(10, 15))  # 3 x 3 blocks
    B = da.from_array(b, chunks=(15, 10))  # 3 x 2 blocks
    Cd = da.from_array(c, chunks=(10, 10))  # 3 x 2 blocks
    R = pgd.gemm(A, B, Cd, beta=1.0, device="cpu")
    graph = dict(R.__dask_graph__())
    out_keys = [key for key in graph if isinstance(key, tuple) and key[0] == R.name]
    assert len(out_keys) == R.numblocks[0] * R.numblocks[1] == 6
    assert set(R.dask.layers) == {R.name, A.name, B.name, Cd.name}
    assert len(graph) == 6 + A.npartitions + B.npartitions + Cd.npartitions
    # each output task depends on its row panel of A, its column panel of B and its c block
    deps = R.dask.dependencies if hasattr(R.dask, "dependencies") else {}
    assert set(deps.get(R.name, ())) == {A.name, B.name, Cd.name}
    # dask.array.matmul makes partial products and sums them: more tasks than polygemm's graph
    assert len(dict(da.matmul(A, B).__dask_graph__())) > len(dict(pgd.gemm(A, B, device="cpu").__dask_graph__()))
    # the threaded scheduler runs exactly one polygemm-gemm task per output block
    assert_close(R.compute(), a, b, c, 1.0, 1.0)


def test_validation_errors(rng):
    a, b, c = _operands(rng, 8, 6, 4)
    A, B = da.from_array(a, chunks=(4, 3)), da.from_array(b, chunks=3)
    with pytest.raises(ArgumentError, match="A must be a dask array"):
        pgd.gemm(a, B)
    with pytest.raises(ArgumentError, match="B must be a dask array"):
        pgd.gemm(A, b)
    with pytest.raises(ShapeError, match="inner dimensions"):
        pgd.gemm(A, da.from_array(np.ones((5, 4))))
    with pytest.raises(ShapeError, match="A must be a 2-D"):
        pgd.gemm(da.ones((2, 8, 6)), B)
    with pytest.raises(DTypeError, match="share one dtype"):
        pgd.gemm(A, B.astype(np.float32))
    with pytest.raises(DTypeError, match="A has dtype int64"):
        pgd.gemm(da.ones((8, 6), dtype=np.int64), B)
    with pytest.raises(DTypeError, match="result dtype must be float64"):
        pgd.gemm(A, B, out_dtype=np.float32)
    with pytest.raises(DTypeError, match="out_dtype"):
        pgd.gemm(A, B, out_dtype="torch.int8")
    with pytest.raises(ShapeError, match="c must have the result's shape"):
        pgd.gemm(A, B, da.from_array(np.ones((8, 5))), beta=1.0)
    with pytest.raises(DTypeError, match="c must have the dtype"):
        pgd.gemm(A, B, c.astype(np.float32), beta=1.0)
    with pytest.raises(ArgumentError, match="beta=2.0 needs c"):
        pgd.gemm(A, B, beta=2.0)
    with pytest.raises(ArgumentError, match="alpha must be a real number"):
        pgd.gemm(A, B, alpha="2")
    with pytest.raises(ArgumentError, match="beta must be finite"):
        pgd.gemm(A, B, c, beta=float("nan"))
    with pytest.raises(ShapeError, match="unknown chunk sizes"):
        pgd.gemm(A[A[:, 0] > 0], B)
    with pytest.raises(ShapeError, match="c must have the result's shape"):
        pgd.gemm(A, B, np.ones(4), beta=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # errors come before any rechunk warning
        with pytest.raises(DTypeError, match="c must have the dtype"):
            pgd.gemm(A, B.rechunk({0: 2}), c.astype(np.float32), beta=1.0)


def test_backend_errors_surface_from_compute(rng):
    """A known device that cannot run (no GPU here; no eighth GPU anywhere) fails in the
    tasks, as polygemm.gemm raises it (an unknown name fails at graph build)."""
    a, b, _ = _operands(rng, 8, 6, 4)
    R = pgd.gemm(da.from_array(a, chunks=(4, 3)), da.from_array(b, chunks=3), device="cuda:7")
    with pytest.raises(polygemm.PolygemmError):
        R.compute()


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.array", None)  # import dask.array -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'polygemm\[dask\]'"):
        pgd.gemm(None, None)


def _run_bench(tmp_path, *extra):
    out_json, out_md = tmp_path / "cpu_dask.json", tmp_path / "cpu_dask.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_dask.py"), "--dry-run", "--json", str(out_json), *extra],
        capture_output=True, text=True, timeout=300, env=env, cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = json.loads(out_json.read_text())["records"]
    assert {r["impl"] for r in records} == {"polygemm.dask", "dask.array.matmul"}
    for r in records:
        for field in ("impl", "gpus", "m", "n", "k", "dtype", "seconds", "tflops"):
            assert field in r, (field, r)
        assert r["seconds"] > 0 and r["tflops"] > 0 and r["dtype"] == "float16"
        if r["impl"] == "polygemm.dask":
            assert r["check"] == "ok", r
    assert "| polygemm.dask |" in out_md.read_text()  # the table lands beside the JSON
    return records


def test_bench_dask_dry_run_threads(tmp_path):
    records = _run_bench(tmp_path)
    assert {r["scheduler"] for r in records} == {"threads"}
    pg = [r for r in records if r["impl"] == "polygemm.dask"]
    mm = [r for r in records if r["impl"] == "dask.array.matmul"]
    assert pg[0]["graph_tasks"] == 9  # 384 in chunks of 160: 3 x 3 output blocks, one task each
    assert mm[0]["graph_tasks"] > pg[0]["graph_tasks"]


@pytest.mark.parametrize("cluster", ["cpu-cluster", "nanny-per-gpu"])
def test_bench_dask_dry_run_cluster(tmp_path, cluster):
    # the distributed path of the GPU run (clusters of 1 and 2 workers, task stream, replicate) on CPU workers:
    # a LocalCluster(processes=False), or the fallback of one Nanny process per "GPU" with its CUDA_VISIBLE_DEVICES
    pytest.importorskip("distributed")
    how = ["--cpu-cluster"] if cluster == "cpu-cluster" else ["--cluster", "distributed"]
    records = _run_bench(tmp_path, *how, "--size", "192", "--chunk", "96", "--repeat", "1", "--warmup", "0")
    assert sorted({(r["gpus"], r["inputs"]) for r in records}) == [(1, "persist"), (2, "persist"), (2, "replicate")]
    for r in records:
        assert r["scheduler"] == "distributed" and r["tasks"] >= 1 and r["speedup_vs_1gpu"] is not None
        assert r["cluster"].startswith("distributed.LocalCluster" if cluster == "cpu-cluster" else "distributed.SpecCluster")
        assert 0.0 <= r["transfer_share"] <= 1.0 and 0.0 <= r["other_share"] <= 1.0


def test_dask_scalars_and_c_as_polygemm_gemm_takes_them():
    """alpha past float64 is the ArgumentError polygemm.gemm gives (not an OverflowError), and
    c may be a list, as gemm takes it."""
    import polygemm.dask as pgd

    A, B = da.ones((37, 20), chunks=10), da.ones((20, 19), chunks=10)  # float64, as a list of floats reads
    with pytest.raises(ArgumentError, match="alpha is too large"):
        pgd.gemm(A, B, alpha=10**400)
    got = pgd.gemm(A, B, [[1.0] * 19] * 37, beta=1.0).compute()
    np.testing.assert_allclose(got, np.full((37, 19), 21.0))


def test_dask_unknown_device_is_refused_when_the_graph_is_built():
    """A misspelt device fails at graph build, naming the nearest backend; a known one that
    cannot run here (cuda without a GPU) is the workers' to say, so it builds."""
    import polygemm as pg

    A, B = da.ones((8, 4), chunks=4), da.ones((4, 6), chunks=3)
    with pytest.raises(pg.BackendUnavailableError, match="unknown device 'cdua' \\(did you mean 'cuda'\\?\\)"):
        pgd.gemm(A, B, device="cdua")
    pgd.gemm(A, B, device="cuda:1")  # built lazily; not computed here
    np.testing.assert_allclose(pgd.gemm(A, B, device="CPU").compute(), np.full((8, 6), 4.0))


@pytest.mark.parametrize("kw, says", [
    ({"out": None}, "lazy dask array"),
    ({"dtype": np.float32}, "out_dtype="),
    ({"aplha": 2.0}, "did you mean 'alpha'"),
    ({"trans_b": True}, "b.T"),
])
def test_another_librarys_keyword_is_refused_naming_polygemms_way(kw, says):
    """polygemm.dask.gemm answers out=, dtype=, a typo or a BLAS transpose flag as polygemm.gemm does (it had been
    Python's bare "unexpected keyword argument"), before dask is asked for anything."""
    a = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError, match=r"polygemm\.dask\.gemm\(\) got an unexpected keyword argument") as ei:
        pgd.gemm(a, a.T, **kw)
    assert says in str(ei.value) and "alpha=, beta=, device=, variant=, out_dtype=" in str(ei.value)


def test_alpha_by_position_is_refused_naming_the_keyword():
    a = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError, match=r"takes from 2 to 3 positional arguments but 4 were given: alpha and beta are keywords"):
        pgd.gemm(a, a.T, None, 2.0)
