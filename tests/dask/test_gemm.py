"""polygemm.dask.gemm: chunkings, alpha/beta with c, dtypes, laziness, a distributed LocalCluster."""

from __future__ import annotations

import copy
import json
import os
import pickle
import re
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import polygemm
import polygemm as pg
import polygemm.dask as pgd
from polygemm.dask import DaskRechunkWarning
from polygemm.errors import (
    ArgumentError,
    ArgumentTypeError,
    BackendUnavailableError,
    DTypeError,
    PolygemmError,
    ShapeError,
    UnsupportedProblemError,
)
from polygemm.testing import assert_close, check_result, reference_for

from tests.helpers import CPUArrayAPI, poisoned, REPO_ROOT, torch_device, without_modules


da = pytest.importorskip("dask.array", reason="dask[array] not installed (pip install 'polygemm[dask]')")


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


ROOT = REPO_ROOT


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


pytestmark_dask = pytest.mark.skipif(da is None, reason="dask[array] not installed (pip install 'polygemm[dask]')")


needs_dask = pytest.mark.skipif(da is None, reason="dask[array] not installed (pip install 'polygemm[dask]')")


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


try:
    import dask
    import dask.array as da
except ImportError:  # pragma: no cover - the dask extra is part of the test install
    da = None


needs_dask_2 = pytest.mark.skipif(da is None, reason="dask not installed")


BF16 = np.dtype(ml_dtypes.bfloat16)


def within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    kw = {} if out_dtype is None else {"out_dtype": out_dtype}
    res = reference_for(np.asarray(a), np.asarray(b), c, alpha, beta, **kw).compare(np.asarray(got))
    assert res.ok, res.message


def _counted(x, calls):
    """``x`` (a dask array) with each block's computation counted in ``calls``."""
    def tick(block):
        calls.append(1)
        return block
    return x.map_blocks(tick, dtype=x.dtype)


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
    with pytest.raises(DTypeError, match="A has dtype timedelta64") as err:
        pgd.gemm(da.zeros((8, 6), dtype="timedelta64[s]"), B)
    assert "complex128" in str(err.value) and "A.astype" in str(err.value)
    with pytest.raises(DTypeError, match="share one dtype"):
        pgd.gemm(da.ones((8, 6), dtype=np.int64), B)
    with pytest.raises(ArgumentError, match="alpha=0.5 is no whole number"):
        pgd.gemm(da.ones((8, 6), dtype=np.int8), da.ones((6, 4), dtype=np.int8), alpha=0.5)
    with pytest.raises(ArgumentError, match="bool products are logical"):
        pgd.gemm(da.ones((8, 6), dtype=bool), da.ones((6, 4), dtype=bool), da.ones((8, 4), dtype=bool))
    with pytest.raises(ArgumentError, match="precision='low' is not a precision"):
        pgd.gemm(A, B, precision="low")
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
    with pytest.raises(ShapeError, match=r"A has unknown chunk sizes along K.*compute_chunk_sizes"):
        pgd.gemm(A[:, A[0] > 0], B)
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


def test_bench_dask_dry_run_threads(tmp_path):
    records = _run_bench(tmp_path, "--repeat", "1", "--warmup", "0")  # the default size and chunks, timed once
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
    """polygemm.dask.gemm answers out=, dtype=, a typo or a BLAS transpose flag as polygemm.gemm does, not with
    Python's bare "unexpected keyword argument", before dask is asked for anything."""
    a = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError, match=r"polygemm\.dask\.gemm\(\) got an unexpected keyword argument") as ei:
        pgd.gemm(a, a.T, **kw)
    assert says in str(ei.value) and "alpha=, beta=, device=, variant=, out_dtype=" in str(ei.value)


def test_alpha_by_position_is_refused_naming_the_keyword():
    a = np.ones((4, 3), np.float32)
    with pytest.raises(TypeError, match=r"takes from 2 to 3 positional arguments but 4 were given: alpha and beta are keywords"):
        pgd.gemm(a, a.T, None, 2.0)


def test_dask_gemm_with_c_adds_c_by_default(rng):
    da = pytest.importorskip("dask.array")
    a, b, c = rng.standard_normal((6, 4)), rng.standard_normal((4, 5)), rng.standard_normal((6, 5))
    A, B, C = da.from_array(a, chunks=(3, 2)), da.from_array(b, chunks=(2, 3)), da.from_array(c, chunks=(3, 3))
    import polygemm.dask as pgd

    np.testing.assert_allclose(pgd.gemm(A, B, C, device="cpu").compute(), a @ b + c, rtol=1e-12, atol=1e-13)  # (a sum near zero: K summed by blocks)
    np.testing.assert_allclose(pgd.gemm(A, B, C, beta=0.0, device="cpu").compute(), a @ b, rtol=1e-12, atol=1e-13)


@pytestmark_dask
def test_dask_gemm_computes_nothing_before_compute(rng):
    """Building the graph reads no block of A, B or c, also where it rechunks (K chunks that differ,
    a c chunked otherwise) and checks a named variant; compute() then gives the right product."""
    a, b, c = rng.standard_normal((12, 10)), rng.standard_normal((10, 8)), rng.standard_normal((12, 8))
    seen: list[tuple[int, ...]] = []

    def watched(x: np.ndarray, chunks) -> "da.Array":
        def note(block):
            seen.append(block.shape)
            return block
        return da.from_array(x, chunks=chunks).map_blocks(note, dtype=x.dtype, meta=np.empty((0, 0), x.dtype))

    A, B, C = watched(a, (4, (3, 7))), watched(b, ((5, 5), 4)), watched(c, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pgd.DaskRechunkWarning)
        R = pgd.gemm(A, B, C, alpha=0.5, beta=-2.0, device="cpu", variant="reference")
    assert seen == [] and R.shape == (12, 8) and R.dtype == np.float64
    assert_close(R.compute(), a, b, c, 0.5, -2.0)
    assert seen  # the blocks were read by compute(), not before


@pytestmark_dask
@pytest.mark.parametrize("case", ["zero-width K chunks", "zero-height M chunks", "K is 0", "M is 0", "N is 0"])
def test_dask_zero_size_chunks_and_dimensions(rng, case):
    m, k, n, ca, cb = {
        "zero-width K chunks": (6, 9, 4, ((6,), (0, 4, 0, 5)), ((0, 4, 0, 5), (2, 2))),
        "zero-height M chunks": (6, 9, 4, ((3, 0, 3), (9,)), ((9,), (0, 4))),
        "K is 0": (5, 0, 3, ((2, 3), (0,)), ((0,), (3,))),
        "M is 0": (0, 4, 3, ((0,), (2, 2)), ((2, 2), (3,))),
        "N is 0": (5, 4, 0, ((5,), (4,)), ((4,), (0,))),
    }[case]
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    A, B = da.from_array(a, chunks=ca), da.from_array(b, chunks=cb)
    r = pgd.gemm(A, B, device="cpu").compute()
    assert r.shape == (m, n) and r.dtype == np.float64
    assert_close(r, a, b)
    r = pgd.gemm(A, B, c, alpha=3.0, beta=0.5, device="cpu").compute()
    assert_close(r, a, b, c, 3.0, 0.5)
    if case == "K is 0":  # no product: beta * c exactly
        np.testing.assert_array_equal(r, 0.5 * c)


@pytestmark_dask
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dask_one_array_on_both_sides(rng, dtype):
    """A @ A.T and A.T @ A: one dask array (one graph layer) read as both operands."""
    a = rng.standard_normal((14, 9)).astype(dtype)
    A = da.from_array(a, chunks=(5, 4))
    assert_close(pgd.gemm(A, A.T, device="cpu").compute(), a, a.T)
    assert_close(pgd.gemm(A.T, A, device="cpu").compute(), a.T, a)


@pytestmark_dask
def test_dask_k_chunks_of_equal_count_but_other_sizes_and_a_numpy_c_left_untouched(rng):
    a = rng.standard_normal((9, 11)).astype(np.float32)
    b = rng.standard_normal((11, 7)).astype(np.float32)
    c = rng.standard_normal((9, 7)).astype(np.float32)
    before = c.copy()
    A = da.from_array(a, chunks=(3, (4, 7)))
    B = da.from_array(b, chunks=((7, 4), 3))  # as many K chunks as A: B follows A
    with pytest.warns(pgd.DaskRechunkWarning, match="rechunking B's rows to A's column chunks"):
        R = pgd.gemm(A, B, c, alpha=-1.5, beta=0.25, device="cpu")
    r = R.compute()
    assert r.dtype == np.float32 and R.chunks == ((3, 3, 3), (3, 3, 1))
    assert_close(r, a, b, c, -1.5, 0.25)
    np.testing.assert_array_equal(c, before)  # c's blocks are read, never written


@pytestmark_dask
def test_dask_bfloat16_in_float32_out_over_k_blocks(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    a = rng.standard_normal((10, 70)).astype(bf16)
    b = rng.standard_normal((70, 6)).astype(bf16)
    c = rng.standard_normal((10, 6)).astype(np.float32)
    A, B = da.from_array(a, chunks=(5, 20)), da.from_array(b, chunks=(20, 3))
    R = pgd.gemm(A, B, c, alpha=2.0, beta=1.0, device="cpu", out_dtype="float32")
    r = R.compute()
    assert R.dtype == np.float32 and r.dtype == np.float32
    assert_close(r, a, b, c, 2.0, 1.0, out_dtype=np.float32)


@pytestmark_dask
def test_dask_masked_operands_are_refused_when_the_graph_is_built_by_their_names(rng):
    # a dask array of masked chunks is refused when the graph is built, naming A, not "a" (the task's polygemm.gemm
    # argument) at compute(); a masked NumPy c the same (polygemm/dask.py)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    mask = np.zeros((6, 5), bool)
    Am = da.ma.masked_array(da.from_array(a, chunks=3), mask=da.from_array(mask, chunks=3))
    B = da.from_array(b, chunks=((3, 2), 2))
    with pytest.raises(ArgumentError, match=r"^A is a masked array.*dask\.array\.ma\.filled\(A, 0\)"):
        pgd.gemm(Am, B)
    with pytest.raises(ArgumentError, match=r"^B is a masked array"):
        pgd.gemm(da.from_array(a, chunks=3), da.ma.masked_array(B))
    with pytest.raises(ArgumentError, match=r"^c is a masked array.*c\.filled\(0\)"):
        pgd.gemm(da.from_array(a, chunks=3), B, np.ma.ones((6, 4)), beta=1.0)
    with pytest.raises(ArgumentError, match=r"^c is a masked array"):  # whatever beta, as polygemm.gemm refuses it
        pgd.gemm(da.from_array(a, chunks=3), B, np.ma.ones((6, 4)), beta=0.0)
    with pytest.raises(ArgumentError, match=r"^c is a masked array"):
        pg.gemm(a, b, np.ma.ones((6, 4)), beta=0.0)
    # the advice, followed literally, works
    assert_close(pgd.gemm(da.ma.filled(Am, 0), B, device="cpu").compute(), a, b)
    assert_close(pgd.gemm(da.ma.getdata(Am), B, np.ma.ones((6, 4)).filled(0), beta=0.0, device="cpu").compute(), a, b)


@pytestmark_dask
def test_dask_alpha_scales_the_sum_over_k_blocks_not_each_block():
    """alpha * (A @ B) over K blocks whose scaled products would overflow while their sum does not: the sum is scaled
    once, as polygemm.gemm and NumPy compute it (alpha per block gave inf - inf = nan)."""
    a = np.array([[3e38, -3e38, 1.0]], np.float32)
    b = np.ones((3, 2), np.float32)
    c = np.full((1, 2), 4.0, np.float32)
    for A in (da.from_array(a, chunks=1), da.from_array(np.array([[1.5e308, -1.5e308, 1.0]]), chunks=1)):
        B = da.from_array(b.astype(A.dtype), chunks=1)
        want = 2 * (np.asarray(A) @ np.asarray(B))
        assert np.isfinite(want).all()
        np.testing.assert_array_equal(pgd.gemm(A, B, alpha=2, device="cpu").compute(), want)
        got = pgd.gemm(A, B, c.astype(A.dtype), alpha=2, beta=-0.5, device="cpu").compute()
        np.testing.assert_array_equal(got, want - 2)
        assert got.dtype == A.dtype


@pytestmark_dask
@pytest.mark.parametrize("dtype,scale,alpha,beta", [
    (np.float32, 1e-19, 1e39, 1.0),  # alpha past float32's range, the product finite
    (np.float32, 1e-19, 2.0, 1e39),  # beta past it, c small enough that beta * c is finite
    (np.float32, 1e5, 1e-46, 0.0),  # alpha below float32's smallest number, the product nonzero
    (np.complex64, 1e5, 1e-46, 0.0),
    (np.float16, 1e-3, 1e39, 0.0),  # accumulated in float32 for the float32 result
])
def test_dask_alpha_and_beta_outside_float32_keep_their_value_over_k_blocks(dtype, scale, alpha, beta):
    """How A is chunked along K does not change the result: alpha and beta that float32 cannot hold scale the sum as
    polygemm.gemm scales one block."""
    a = np.full((2, 4), scale, dtype)
    b = a.T.copy()
    c = np.full((2, 2), 1e-30, np.float32) if beta else None
    out_dtype = np.float32 if dtype == np.float16 else None
    want = pg.gemm(a, b, c, alpha=alpha, beta=beta, out_dtype=out_dtype, device="cpu")
    assert np.isfinite(want).all() and (want != 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in a cast on the way
        got = pgd.gemm(da.from_array(a, chunks=(2, 2)), da.from_array(b, chunks=(2, 2)), c, alpha=alpha, beta=beta,
                       out_dtype=out_dtype, device="cpu").compute()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytestmark_dask
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.complex128])
def test_dask_alpha_and_beta_over_uneven_k_blocks_match_the_reference(rng, dtype):
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((9, 23), (23, 7), (9, 7)))
    got = pgd.gemm(da.from_array(a, chunks=(4, (5, 10, 8))), da.from_array(b, chunks=((5, 10, 8), 3)),
                   da.from_array(c, chunks=(4, 3)), alpha=-1.5, beta=0.25, device="cpu").compute()
    assert got.dtype == np.dtype(dtype)
    assert_close(got, a, b, c, alpha=-1.5, beta=0.25)


@pytestmark_dask
@pytest.mark.parametrize("c", [object(), "abc"])
def test_dask_a_c_that_is_no_array_is_a_type_error_as_in_polygemm_gemm(c):
    A, B = da.ones((6, 9)), da.ones((9, 5))
    with pytest.raises(ArgumentTypeError, match=r"^c must be a matrix .*result's shape \(6, 5\)"):
        pgd.gemm(A, B, c=c)
    assert_close(pgd.gemm(A, B, c=[[1.0] * 5] * 6, device="cpu").compute(), np.ones((6, 9)), np.ones((9, 5)), np.ones((6, 5)))


@pytestmark_dask
def test_dask_batches_are_told_how_to_multiply_them():
    """A 3-D dask array: polygemm.dask.gemm says how to stack its products matrix by matrix, polygemm.gemm says to
    compute it first, neither sends the user to the other alone."""
    with pytest.raises(ShapeError, match=r"3-D shape \(2, 3, 4\).*dask\.array\.stack\(\[polygemm\.dask\.gemm\(A\[i\], B\[i\]\).*"
                                         r"range\(2\)"):
        pgd.gemm(da.ones((2, 3, 4)), da.ones((2, 4, 5)))
    with pytest.raises(ArgumentTypeError, match=r"a is a 3-D dask\.Array.*a\.compute\(\) for an in-memory batch") as info:
        pg.matmul(da.ones((2, 4, 5)), np.ones((5, 3)))
    assert "Call polygemm.dask.gemm(A, B)" not in str(info.value)


@pytestmark_dask
def test_dask_c_of_another_dtype_is_told_the_cast(rng):
    # as polygemm.gemm, the error says the cast to make and, for float16 inputs, out_dtype (polygemm/dask.py)
    a, b = rng.standard_normal((4, 6)).astype(np.float16), rng.standard_normal((6, 3)).astype(np.float16)
    c32 = rng.standard_normal((4, 3)).astype(np.float32)
    A, B = da.from_array(a, chunks=2), da.from_array(b, chunks=2)
    with pytest.raises(DTypeError, match=r"Cast it, e\.g\. c\.astype\(numpy\.float16\) \(or out_dtype=numpy\.float32"):
        pgd.gemm(A, B, c32, beta=1.0)
    r = pgd.gemm(A, B, c32.astype(np.float16), beta=1.0, device="cpu").compute()  # the cast, as told
    assert_close(r, a, b, c32.astype(np.float16), 1.0, 1.0)
    r = pgd.gemm(A, B, c32, beta=1.0, device="cpu", out_dtype=np.float32).compute()  # or the wider result
    assert_close(r, a, b, c32, 1.0, 1.0, out_dtype=np.float32)
    with pytest.raises(DTypeError, match=r"Cast it, e\.g\. c\.astype\(numpy\.float64\)$"):
        pgd.gemm(A.astype(np.float64), B.astype(np.float64), c32, beta=1.0)


def test_dask_c_given_as_a_list_of_another_dtype_is_told_a_cast_a_list_has():
    # polygemm.dask.gemm takes c as a list (as polygemm.gemm does), and a float64 one is told np.asarray(c,
    # dtype=...), as polygemm.gemm says, not c.astype(numpy.float32), which a list lacks
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    A = da.from_array(np.ones((6, 5), np.float32), chunks=(3, 2))
    B = da.from_array(np.ones((5, 4), np.float32), chunks=(2, 3))
    with pytest.raises(pg.DTypeError, match=r"Cast it, e\.g\. numpy\.asarray\(c, dtype=numpy\.float32\)"):
        pgd.gemm(A, B, [[1.0] * 4] * 6, beta=1.0, device="cpu")
    with pytest.raises(pg.DTypeError, match=r"Cast it, e\.g\. c\.astype\(numpy\.float32\)"):
        pgd.gemm(A, B, np.ones((6, 4)), beta=1.0, device="cpu")
    c = [[np.float32(1)] * 4] * 6  # a list NumPy reads as float32 is taken
    assert np.array_equal(pgd.gemm(A, B, c, beta=2.0, device="cpu").compute(), np.full((6, 4), 7, np.float32))


@needs_dask
@pytest.mark.parametrize("given", [None, [[1.0, 2.0]], np.ones((2, 2)), "A"])
def test_dask_operand_that_is_no_dask_array_is_a_type_error(given):
    # "A must be a dask array; got numpy.ndarray" is a TypeError too (ArgumentTypeError), as polygemm.gemm's a=None
    # is, so "except TypeError" catches it (polygemm/dask.py)
    B = da.ones((2, 3), chunks=1)
    with pytest.raises(TypeError) as info:
        pgd.gemm(given, B)
    assert isinstance(info.value, ArgumentTypeError) and isinstance(info.value, ValueError)  # still an ArgumentError
    assert str(info.value).startswith("A must be a dask array") and "dask.array.from_array(A" in str(info.value)
    with pytest.raises(ArgumentTypeError, match="^B must be a dask array"):
        pgd.gemm(da.ones((3, 2), chunks=1), given)


@needs_dask
def test_dask_takes_the_device_objects_polygemm_gemm_takes(rng):
    # device=torch.device("cpu") (tensor.device), which polygemm.gemm takes, is passed to the tasks by its name
    # (polygemm/dask.py)
    a, b = rng.standard_normal((9, 6)), rng.standard_normal((6, 5))
    A, B = da.from_array(a, chunks=(4, 3)), da.from_array(b, chunks=(3, 2))
    R = pgd.gemm(A, B, device=torch_device("cpu"))
    assert R.name == pgd.gemm(A, B, device="cpu").name  # the same graph as the name gives
    assert_within(R.compute(), a, b)
    pgd.gemm(A, B, device=torch_device("cuda", 1))  # known backend: built lazily, whether it runs is the workers' to say
    with pytest.raises(TypeError, match=r"device must be a backend name .*torch\.device"):
        pgd.gemm(A, B, device=3)
    with pytest.raises(pg.BackendUnavailableError, match="unknown device 'jax'"):
        pgd.gemm(A, B, device=torch_device("jax"))


@needs_dask
def test_dask_operands_of_the_other_byte_order_are_the_same_dtype(rng):
    # '>f8' and '<f8' are one dtype, float64, for polygemm.gemm, which takes each and writes native float64: so for
    # polygemm.dask.gemm, an A '>f8' beside a B '<f8', a '>f8' c beside native operands, and two '>f8' operands, whose
    # graph's dtype is then that of its blocks (polygemm/dask.py)
    a, b, c = rng.standard_normal((7, 5)), rng.standard_normal((5, 4)), rng.standard_normal((7, 4))
    other = ">" if np.little_endian else "<"
    sa, sb, sc = (x.astype(x.dtype.newbyteorder(other)) for x in (a, b, c))
    for A, B in [(sa, b), (a, sb), (sa, sb)]:
        R = pgd.gemm(da.from_array(A, chunks=3), da.from_array(B, chunks=3), sc, alpha=2.0, beta=-1.0, device="cpu")
        assert R.dtype == np.dtype(np.float64) and R.dtype.isnative
        r = R.compute()
        assert r.dtype == R.dtype == pg.gemm(A, B, sc, alpha=2.0, beta=-1.0).dtype
        assert_within(r, a, b, c, 2.0, -1.0)
    with pytest.raises(DTypeError, match="share one dtype; got A float64 and B float32"):  # a real difference still is one
        pgd.gemm(da.from_array(sa, chunks=3), da.from_array(b.astype(np.float32), chunks=3))


@needs_dask
def test_dask_many_k_chunks_single_chunks_and_lazy_errors(rng):
    """K in 40 chunks of 1..2 columns (40 calls folded in one task) stays within one call's bound;
    one chunk everywhere is one task; errors about arguments come at graph build, those of the device at
    compute()."""
    a, b = rng.standard_normal((6, 60)).astype(np.float32), rng.standard_normal((60, 5)).astype(np.float32)
    k_chunks = (1, 2) * 20
    R = pgd.gemm(da.from_array(a, chunks=((3, 3), k_chunks)), da.from_array(b, chunks=(k_chunks, (5,))), device="cpu")
    assert R.chunks == ((3, 3), (5,)) and R.dtype == np.float32
    assert_within(R.compute(), a, b)
    one = pgd.gemm(da.from_array(a, chunks=-1), da.from_array(b, chunks=-1), device="cpu")
    assert one.numblocks == (1, 1) and len([k for k in dict(one.__dask_graph__()) if k[0] == one.name]) == 1
    assert_within(one.compute(), a, b)
    with pytest.raises(UnsupportedProblemError, match="variant='nope' is not a variant of backend 'cpu'"):
        pgd.gemm(da.from_array(a, chunks=3), da.from_array(b, chunks=3), device="cpu", variant="nope")
    with pytest.raises(DTypeError, match="backend 'musa' computes float16, not float32"):  # its table says so, GPU or not
        pgd.gemm(da.from_array(a, chunks=3), da.from_array(b, chunks=3), device="musa")
    lazy = pgd.gemm(*(da.from_array(x.astype(np.float16), chunks=3) for x in (a, b)), device="musa")  # built: musa is known
    with pytest.raises(pg.PolygemmError):  # no MUSA device here (or one that fails): said by compute()
        lazy.compute()


def test_no_rechunk_warning_where_k_chunks_agree(rng):
    """aligned K chunks, c chunked like the result: no DaskRechunkWarning at all."""
    if da is None:
        pytest.skip("dask[array] not installed")
    a, b, c = rng.standard_normal((6, 8)), rng.standard_normal((8, 4)), rng.standard_normal((6, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        R = pgd.gemm(da.from_array(a, chunks=(3, 4)), da.from_array(b, chunks=(4, 2)), da.from_array(c, chunks=(3, 2)),
                     beta=1.0, device="cpu")
    assert_within(R.compute(), a, b, c, 1.0, 1.0)


def test_dask_operands_of_two_dtypes_are_told_to_cast_the_narrower_up():
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    A, B = da.ones((4, 4), dtype=np.float16, chunks=2), da.ones((4, 4), dtype=np.float32, chunks=2)
    with pytest.raises(DTypeError, match=r"A and B must share one dtype.*A\.astype\(np\.float32\)") as info:
        pgd.gemm(A, B)
    assert "B.astype(A.dtype)" not in str(info.value)


def test_testing_and_dask_are_attributes_after_import_polygemm():
    # docs/api.md names polygemm.testing (error_bound, check_result): after "import polygemm" it is an
    # attribute, as polygemm.dask is, and as numpy.testing is after "import numpy".
    # Reaching them imports neither pycuda nor dask.
    # (The gemm call runs on cpu: on a machine with a GPU, auto would import pycuda for the cuda backend.)
    code = ("import sys, numpy as np, polygemm\n"
            "assert callable(polygemm.testing.check_result) and callable(polygemm.dask.gemm)\n"
            "assert 'dask' not in sys.modules and 'pycuda' not in sys.modules\n"
            "a = np.ones((3, 4), np.float32)\n"
            "assert polygemm.testing.check_result(polygemm.gemm(a, a.T, device='cpu'), a, a.T).ok\n"
            "assert {'testing', 'dask'} <= set(dir(polygemm))\n"
            "try:\n    polygemm.nosuch\nexcept AttributeError as e:\n    assert 'nosuch' in str(e)\n"
            "else:\n    raise SystemExit('no AttributeError')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_errors_of_a_refused_call_survive_pickling_with_their_classes_and_details():
    """multiprocessing, concurrent.futures' process pools and dask.distributed pickle an exception raised in a worker;
    polygemm's arrive as the same classes (still ValueError / TypeError / RuntimeError), with their messages and,
    for BackendUnavailableError, the whole text in ``details``."""
    a = np.ones((2, 3), np.float32)
    calls = [
        (lambda: pg.gemm(a, a, device="cpu"), ShapeError, ValueError),
        (lambda: pg.gemm(a, a.T.astype(np.float64), device="cpu"), DTypeError, TypeError),
        (lambda: pg.gemm(a, a.T, alpha="2", device="cpu"), ArgumentTypeError, TypeError),
        (lambda: pg.gemm(a, a.T, beta=1.0, device="cpu"), ArgumentError, ValueError),
        # an unknown name arrives as BackendUnavailableError's subclass UnknownDeviceError (also a ValueError)
        (lambda: pg.gemm(a, a.T, device="nosuch"), pg.UnknownDeviceError, RuntimeError),
        (lambda: pg.gemm(a, a.T, device="nosuch"), pg.UnknownDeviceError, ValueError),
    ]
    for call, cls, builtin in calls:
        with pytest.raises(cls) as info:
            call()
        back = pickle.loads(pickle.dumps(info.value))
        assert type(back) is cls and isinstance(back, (PolygemmError, builtin)) and isinstance(back, builtin)
        assert str(back) == str(info.value) and back.details == info.value.details
    down = [i.name for i in pg.backends() if not i.available]  # cuda on a machine without a GPU, musa beside an NVIDIA one
    assert down, "every backend is available here: no unavailable one to ask for"
    with pytest.raises(BackendUnavailableError) as info:
        pg.gemm(a, a.T, device=down[0])  # the reason, and every backend's whole text in details
    if info.value.details:
        assert pickle.loads(pickle.dumps(info.value)).details == info.value.details


def test_the_error_for_a_device_array_no_kernel_addresses_survives_pickling():
    # an array with __cuda_array_interface__ whose matrices are neither row- nor column-major (or whose batch
    # one stride cannot walk), other than CuPy's and torch's, raises problem.NotWhole (an ArgumentError). Its
    # __init__(message, name, shape) needs `name`, which BaseException's pickling does not pass (args is (message,)):
    # pickle.loads and copy.copy raise "TypeError: NotWhole.__init__() missing 1 required positional argument: 'name'",
    # so a dask.distributed worker or a process pool reports a pickling failure instead of the error.
    class Interface:
        def __init__(self, shape, strides):
            self.__cuda_array_interface__ = dict(shape=shape, typestr="<f4", strides=strides, data=(1 << 20, False),
                                                 version=3)

    with pytest.raises(ArgumentError) as info:
        pg.gemm(Interface((4, 4), (32, 8)), Interface((4, 4), None), device="cpu")
    for back in (pickle.loads(pickle.dumps(info.value)), copy.copy(info.value)):
        assert type(back) is type(info.value) and str(back) == str(info.value)
        assert isinstance(back, ArgumentError) and getattr(back, "name", None) == "a"


@needs_dask_2
@pytest.mark.parametrize("m, n, k", [(4, 5, 0), (0, 5, 3), (4, 0, 3)])
def test_dask_empty_products_match_polygemm_gemm(m, n, k):
    """K = 0 gives beta * c (zeros without c), M or N = 0 an empty result, as polygemm.gemm does."""
    A = da.ones((m, k), chunks=2, dtype=np.float32)
    B = da.ones((k, n), chunks=2, dtype=np.float32)
    c = np.full((m, n), 3.0, np.float32)
    with dask.config.set(scheduler="sync"):
        got = pgd.gemm(A, B, c, beta=2.0).compute()
        plain = pgd.gemm(A, B).compute()
    assert got.shape == plain.shape == (m, n) and got.dtype == np.float32
    assert np.array_equal(got, pg.gemm(np.ones((m, k), np.float32), np.ones((k, n), np.float32), c, beta=2.0, device="cpu"))
    assert (got == 6.0).all() and (plain == 0.0).all()


@needs_dask_2
@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_dask_half_products_over_many_k_chunks_are_within_one_calls_bound(dtype):
    """Seven K chunks of a 16-bit product accumulate in float32 and round once (the bound of one call), and
    out_dtype=float32 gives the float32 result; mismatched K chunks are rechunked with the warning."""
    rng = np.random.default_rng(17)
    a = rng.standard_normal((9, 14)).astype(dtype)
    b = rng.standard_normal((14, 6)).astype(dtype)
    A, B = da.from_array(a, chunks=(4, 2)), da.from_array(b, chunks=((7, 7), 3))
    with warnings.catch_warnings(record=True) as caught, dask.config.set(scheduler="sync"):
        warnings.simplefilter("always")
        got = pgd.gemm(A, B).compute()
        wide = pgd.gemm(A, B, out_dtype=np.float32).compute()
    assert any(issubclass(w.category, pgd.DaskRechunkWarning) for w in caught)
    assert got.dtype == np.dtype(dtype) and wide.dtype == np.float32
    assert check_result(got, a, b).ok and check_result(wide, a, b, out_dtype=np.float32).ok


@pytest.mark.parametrize("chunks_a, chunks_b", [
    (((3, 4), (2, 7)), ((2, 7), (1, 4))),              # ragged everywhere, K chunks alike
    (((3, 0, 4), (2, 0, 7)), ((2, 0, 7), (0, 5))),     # a 0-size chunk in M, K and N
    (((7,), (9,)), ((9,), (5,))),                        # one block
    (((1,) * 7, (1,) * 9), ((1,) * 9, (1,) * 5)),        # 1x1 blocks: nine gemm calls a block
])
def test_dask_ragged_and_empty_chunks_match_the_reference(rng, chunks_a, chunks_b):
    a = rng.standard_normal((7, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    A, B = da.from_array(a, chunks=chunks_a), da.from_array(b, chunks=chunks_b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DaskRechunkWarning)  # chunks alike over K: no rechunk
        C = pgd.gemm(A, B, device="cpu")
    assert C.chunks == (chunks_a[0], chunks_b[1]) and C.dtype == np.float32
    within(C.compute(), a, b)


def test_dask_mismatched_k_chunks_rechunk_the_operand_with_more_and_warn_at_the_callers_line(rng):
    a = rng.standard_normal((7, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    A, B = da.from_array(a, chunks=((3, 4), (2, 3, 4))), da.from_array(b, chunks=((5, 4), (5,)))
    with pytest.warns(DaskRechunkWarning) as rec:
        C = pgd.gemm(A, B, device="cpu")
    msg = str(rec[0].message)
    assert "(2, 3, 4)" in msg and "(5, 4)" in msg and "rechunking A's columns to B's row chunks" in msg
    assert rec[0].filename == __file__  # the user's line, not polygemm's
    assert C.chunks == ((3, 4), (5,))
    within(C.compute(), a, b)
    # the same number of K chunks, of other sizes: B follows A
    A, B = da.from_array(a, chunks=(7, (4, 5))), da.from_array(b, chunks=((5, 4), 5))
    with pytest.warns(DaskRechunkWarning, match="rechunking B's rows to A's column chunks"):
        C = pgd.gemm(A, B, device="cpu")
    within(C.compute(), a, b)


def test_dask_k_zero_gives_beta_c_and_zeros(rng):
    A = da.zeros((3, 0), chunks=(2, 1), dtype=np.float32)
    B = da.zeros((0, 4), chunks=(1, 2), dtype=np.float32)
    assert np.array_equal(pgd.gemm(A, B, device="cpu").compute(), np.zeros((3, 4), np.float32))
    c = rng.standard_normal((3, 4)).astype(np.float32)
    got = pgd.gemm(A, B, c, beta=2.0, device="cpu").compute()
    assert got.dtype == np.float32 and np.array_equal(got, 2 * c)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("out_dtype", [None, np.float32])
def test_dask_half_precision_over_several_k_chunks_with_a_zero_one(rng, dtype, out_dtype):
    a = rng.standard_normal((6, 8)).astype(dtype)
    b = rng.standard_normal((8, 5)).astype(dtype)
    A, B = da.from_array(a, chunks=((3, 3), (3, 0, 5))), da.from_array(b, chunks=((3, 0, 5), (2, 3)))
    C = pgd.gemm(A, B, device="cpu", out_dtype=out_dtype)
    got = C.compute()
    want = np.dtype(out_dtype or dtype)
    assert C.dtype == want and got.dtype == want
    within(got, a, b, out_dtype=out_dtype)


def test_dask_refusals_name_the_argument_and_the_way_out(rng):
    ab = da.from_array(rng.standard_normal((6, 8)).astype(BF16), chunks=3)
    bb = da.from_array(rng.standard_normal((8, 5)).astype(BF16), chunks=4)
    with pytest.raises(DTypeError, match=r"got out_dtype float64: omit out_dtype"):
        pgd.gemm(ab, bb, out_dtype=np.float64)
    with pytest.raises(DTypeError, match=r"A bfloat16 and B float16.*astype"):
        pgd.gemm(ab, bb.astype(np.float16))
    with pytest.raises(DTypeError, match=r"c must have the dtype of the result \(bfloat16\); got float32"):
        pgd.gemm(ab, bb, np.zeros((6, 5), np.float32), beta=1.0)
    with pytest.raises(ShapeError, match=r"A\.shape\[1\] \(K=8\) must equal B\.shape\[0\] \(5\)"):
        pgd.gemm(ab, bb.T)
    with pytest.raises(ArgumentError, match=r"beta=1\.0 needs c: pass c \(shape \(6, 5\)\)"):
        pgd.gemm(ab, bb, beta=1.0)
    f8 = da.from_array(np.zeros((4, 4), ml_dtypes.float8_e4m3fn), chunks=2)
    with pytest.raises(DTypeError, match="A has dtype float8_e4m3fn"):
        pgd.gemm(f8, f8)


@pytest.mark.parametrize("call", ["gemm", "matmul", "explain"])
def test_dask_operands_are_refused_without_computing_them(rng, call):
    # NumPy reads a dask array through __array__: polygemm.gemm(A, B) would run every task of both graphs, hold them
    # whole in memory and return a NumPy array, where numpy.matmul returns a lazy dask array; it refuses them,
    # computing nothing, and names the way
    calls: list[int] = []
    A = _counted(da.from_array(rng.standard_normal((6, 8)).astype(np.float32), chunks=(3, 4)), calls)
    B = _counted(da.from_array(rng.standard_normal((8, 5)).astype(np.float32), chunks=4), calls)
    assert type(np.matmul(A, B)).__module__.startswith("dask")  # what numpy.matmul gives: lazy, no task run
    calls.clear()
    fn = getattr(pg, call)
    with pytest.raises(ArgumentTypeError) as info:
        fn(A, B, device="cpu")
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert msg.startswith("a is a dask.Array; polygemm multiplies arrays in memory"), msg
    assert "polygemm.dask.gemm(A, B)" in msg and "a.compute()" in msg
    assert calls == []  # nothing was computed
    # the way the message names works on the same arrays
    want = A.compute() @ B.compute()
    np.testing.assert_allclose(pgd.gemm(A, B, device="cpu").compute(), want, rtol=1e-5, atol=1e-5)


def test_dask_b_beside_numpy_a_and_dask_c_name_the_dask_operand(rng):
    # a NumPy a with a dask b is told of the dask operand, not to convert one "with numpy's asarray / from_dlpack"
    # (np.asarray computes the dask array whole); a dask c beside NumPy a and b likewise
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    calls: list[int] = []
    B = _counted(da.from_array(b, chunks=3), calls)
    C = _counted(da.zeros((4, 5), chunks=2, dtype=np.float32), calls)
    calls.clear()  # (map_blocks may call the function on an empty block to learn its meta)
    out = np.full((4, 5), 7.0, np.float32)
    with pytest.raises(ArgumentTypeError, match=r"^b is a dask\.Array; .*polygemm\.dask\.gemm\(A, B\).*b\.compute\(\)"):
        pg.gemm(a, B, device="cpu", out=out)
    with pytest.raises(ArgumentTypeError, match=r"^c is a dask\.Array; .*polygemm\.dask\.gemm\(A, B, c, beta=\.\.\.\).*c\.compute\(\)"):
        pg.gemm(a, b, C, beta=1.0, device="cpu", out=out)
    assert calls == [] and (out == 7.0).all()
    # the in-memory arrays the message points to give the product
    np.testing.assert_allclose(pg.gemm(a, B.compute(), C.compute(), beta=1.0, device="cpu"), a @ b, rtol=1e-5, atol=1e-5)


def test_dask_out_is_still_told_it_must_be_writable_in_place(rng):
    """A dask ``out`` cannot receive the result (no memory to write into): the refusal is out's own, not the
    operands'."""
    a = rng.standard_normal((4, 6)).astype(np.float32)
    with pytest.raises(ArgumentTypeError, match=r"\bout\b.*NumPy array.*got a dask\.Array.*omit out.*polygemm\.dask\.gemm"):
        pg.gemm(a, a.T, device="cpu", out=da.zeros((4, 4), chunks=2, dtype=np.float32))
    with pytest.raises(ArgumentTypeError, match=r"got a dask\.Array"):
        pg.matmul(a, a.T, out=da.zeros((4, 4), chunks=2, dtype=np.float32))


def test_backends_pickles_as_itself():
    # polygemm.backends (a callable module) pickles as itself, so ProcessPoolExecutor.submit(polygemm.backends) and
    # dask's client.run(polygemm.backends) work
    assert pickle.loads(pickle.dumps(pg.backends)) is pg.backends
    assert copy.copy(pg.backends) is pg.backends and copy.deepcopy(pg.backends) is pg.backends
    assert callable(pickle.loads(pickle.dumps(pg.backends)))


def test_backends_through_dask_client_run():
    distributed = pytest.importorskip("distributed")  # in the [test] extra
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        (reply,) = client.run(pg.backends).values()
    assert [(i.name, i.available) for i in reply] == [(i.name, i.available) for i in pg.backends()]


def test_polygemm_dask_without_dask_says_what_to_install(monkeypatch):
    without_modules(monkeypatch, "dask", "distributed")
    monkeypatch.delitem(sys.modules, "polygemm.dask", raising=False)
    import polygemm.dask as pgd  # importing the module needs no dask; using it does

    with pytest.raises(ImportError, match=re.escape("pip install 'polygemm[dask]'")):
        pgd.gemm(np.ones((2, 2)), np.ones((2, 2)))


def test_a_dask_0d_array_is_told_compute_and_nothing_is_computed(ops):
    # alpha=da.linalg.norm(x) (a 0-D dask array) is told the way on, alpha.compute(), and nothing is computed
    # (as for dask operands)
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    a, b = ops
    calls: list[int] = []

    def value():
        calls.append(1)
        return np.float64(2.0)

    lazy = da.from_delayed(dask.delayed(value)(), shape=(), dtype=np.float64)
    out = poisoned()
    with pytest.raises(ArgumentTypeError, match=r"alpha is a 0-D dask array \(lazy\), which polygemm does not compute: "
                                                r"pass alpha\.compute\(\)$"):
        pg.gemm(a, b, alpha=lazy, out=out)
    with pytest.raises(ArgumentTypeError, match=r"beta is a one-element dask array \(lazy\), which polygemm does not compute: "
                                                r"pass beta\.compute\(\)\.item\(\)$"):
        pg.gemm(a, b, out, beta=lazy.reshape(1), out=out)
    assert calls == [] and (out == 7.0).all()
    np.testing.assert_array_equal(pg.gemm(a, b, alpha=lazy.compute()), pg.gemm(a, b, alpha=2.0))  # the advice, followed


def test_polygemm_dask_refuses_a_dask_0d_alpha_the_same_way(ops):
    # polygemm.dask.gemm reads alpha as gemm does: a lazy 0-D alpha is told .compute(), a CPU 0-D array is taken
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    a, b = ops
    A, B = da.from_array(a, chunks=2), da.from_array(b, chunks=2)
    with pytest.raises(ArgumentTypeError, match=r"pass alpha\.compute\(\)$"):
        pgd.gemm(A, B, alpha=da.from_array(np.array(2.0)), device="cpu")
    got = pgd.gemm(A, B, alpha=CPUArrayAPI(np.array(2.0)), device="cpu").compute()
    np.testing.assert_allclose(got, 2.0 * (a @ b), rtol=1e-5, atol=1e-5)


def test_dask_c_of_unknown_chunk_sizes_says_so():
    # not "c must have the result's shape (4, 4) ...; got (nan, 4)"
    da = pytest.importorskip("dask.array")
    import polygemm.dask

    A = da.ones((4, 4), chunks=2)
    c = da.ones((4, 4), chunks=2)
    with pytest.raises(pg.ShapeError, match=r"c has unknown chunk sizes.*compute_chunk_sizes"):
        polygemm.dask.gemm(A, A, c[c[:, 0] > 0], beta=1.0)


def test_rows_of_a_and_columns_of_b_picked_by_a_boolean_index_are_taken_as_they_are(rng):
    """Unknown M and N (A's rows, B's columns chosen by a boolean index, as dask.array.matmul takes them): the product's
    chunks are unknown there too, each block computed at its size; K must be known (the blocks are matched over it),
    and a c cannot be matched to a result of unknown shape."""
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    x = rng.standard_normal((20, 8)).astype(np.float32)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    X, W = da.from_array(x, chunks=(5, 4)), da.from_array(w, chunks=(4, 3))
    rows, cols = x[:, 0] > 0, w[0] > 0
    got = pgd.gemm(X[X[:, 0] > 0], W[:, W[0] > 0], alpha=2.0, device="cpu")
    assert np.isnan(got.shape[0]) and np.isnan(got.shape[1])
    np.testing.assert_allclose(got.compute(), 2.0 * (x[rows] @ w[:, cols]), rtol=1e-5, atol=1e-5)
    with pytest.raises(pg.ShapeError, match=r"c needs the result's shape.*compute_chunk_sizes"):
        pgd.gemm(X[X[:, 0] > 0], W, da.ones((20, 6), chunks=(5, 3), dtype=np.float32), beta=1.0)
    with pytest.raises(pg.ShapeError, match=r"B has unknown chunk sizes along K"):
        pgd.gemm(X, W[W[:, 0] > 0])


def test_dask_unknown_variant_is_refused_when_the_graph_is_built():
    # variant="nosuch" is refused when the graph is built, not in the workers' tasks at compute()
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    A, B = da.ones((8, 4), chunks=(4, 2)), da.ones((4, 6), chunks=(2, 3))
    with pytest.raises(pg.UnsupportedProblemError, match=r"variant='nosuch' is not a variant of backend 'cpu'"):
        pgd.gemm(A, B, device="cpu", variant="nosuch")
    with pytest.raises(pg.UnsupportedProblemError, match="no backend has variant 'nosuch'"):
        pgd.gemm(A, B, variant="nosuch")
    with pytest.raises(pg.UnsupportedProblemError, match="variant='AUTO' is not a variant"):  # polygemm.gemm refuses it too
        pgd.gemm(A, B, device="cpu", variant="AUTO")
    np.testing.assert_allclose(pgd.gemm(A, B, device="cpu", variant="reference").compute(), np.full((8, 6), 4.0))
    with pytest.raises(pg.DTypeError, match="variant 'dgemm_v1_dmma' of backend 'cuda' computes float64(, complex128)?, not float32"):
        pgd.gemm(A.astype(np.float32), B.astype(np.float32), device="cuda", variant="dgemm_v1_dmma")
    pgd.gemm(A, B, device="cuda", variant="dgemm_v1_dmma")  # builds, whether or not it runs here


@pytest.mark.parametrize("device", [None, "auto"])
def test_a_variant_that_computes_no_operand_dtype_is_refused_when_the_graph_is_built_whatever_the_device(device):
    """variant='cm_v01_naive' (float32 and complex64 only) on float64 operands: every worker would refuse it, so
    device=None (each worker's choice) refuses it when the graph is built, as device='cuda' does."""
    A = da.ones((8, 4), chunks=(4, 2))
    with pytest.raises(DTypeError, match="variant 'cm_v01_naive' computes no float64.*'cuda' computes float32") as info:
        pgd.gemm(A, A.T, variant="cm_v01_naive", device=device)
    assert "variant='auto'" in str(info.value)
    pgd.gemm(A.astype(np.float32), A.T.astype(np.float32), variant="cm_v01_naive", device=device)  # builds: it computes float32
    np.testing.assert_array_equal(pgd.gemm(A, A.T, variant="blas", device=device).compute(), np.full((8, 8), 4.0))


@pytest.mark.parametrize("variant", [3, None, ["blas"]])
def test_variant_that_is_no_string_is_a_type_error_naming_it(variant):
    a = da.from_array(np.ones((4, 4), np.float32), chunks=2)
    with pytest.raises(ArgumentTypeError) as info:
        pgd.gemm(a, a, device="cpu", variant=variant)
    says = str(info.value)
    assert "variant must be a string" in says and "'auto'" in says and repr(variant) in says


def test_a_block_given_alone_rather_than_in_a_list_is_one_product():
    # dask hands the blocks of a contraction over one K chunk as a list, or (as its graphs may) the block itself
    from polygemm.dask import _block_gemm

    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal((3, 3)).astype(np.float32) for _ in range(3))
    got = _block_gemm(a, b, c, alpha=2.0, beta=0.5, device="cpu", variant="auto", result_dtype="float32")
    assert_close(got, a, b, c, alpha=2.0, beta=0.5)
    assert np.array_equal(_block_gemm(a, b, alpha=1.0, beta=0.0, device="cpu", variant="auto", result_dtype="float32"),
                          _block_gemm([a], [b], alpha=1.0, beta=0.0, device="cpu", variant="auto", result_dtype="float32"))


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "int8", "uint8", "int32", "int64", "bool"])
def test_dask_gemm_computes_every_dtype_polygemm_gemm_does(rng, dtype):
    """Complex, integer and bool operands over several K blocks: the blocks' products add (or, for bool, or) to what
    numpy.matmul computes, in the operands' dtype (integers wrap as NumPy's do); with c, alpha and beta as gemm
    takes them."""
    a = rng.standard_normal((13, 17)) * 60
    b = rng.standard_normal((17, 9)) * 60
    if dtype.startswith("complex"):
        a, b = a + 1j * a[::-1], b - 2j * b
    a, b = a.astype(dtype), b.astype(dtype)
    A, B = da.from_array(a, chunks=(5, 6)), da.from_array(b, chunks=(6, 4))
    got = pgd.gemm(A, B, device="cpu").compute()
    want = a @ b
    assert got.dtype == want.dtype == np.dtype(dtype)
    tol = {"complex64": 1e-5, "complex128": 1e-12}.get(dtype)
    if tol is not None:  # within complex rounding of |a|·|b| (the sums run to 17·60·60·2)
        np.testing.assert_allclose(got, want, rtol=0, atol=tol * float((np.abs(a) @ np.abs(b)).max()))
    else:
        np.testing.assert_array_equal(got, want)
    if dtype != "bool":
        c = (rng.standard_normal((13, 9)) * 9).astype(dtype)
        alpha, beta = (0.5, -1.5) if tol is not None else (3, 2 if dtype.startswith("u") else -2)
        got = pgd.gemm(A, B, da.from_array(c, chunks=(5, 4)), alpha=alpha, beta=beta, device="cpu").compute()
        want = pg.gemm(a, b, c, alpha=alpha, beta=beta, device="cpu")  # one call over the whole K
        if tol is not None:
            np.testing.assert_allclose(got, want, rtol=0, atol=4 * tol * float((np.abs(a) @ np.abs(b)).max()))
        else:
            np.testing.assert_array_equal(got, want)


def test_dask_gemm_passes_precision_to_every_block(rng, monkeypatch):
    """precision= reaches each block's polygemm.gemm (None: each worker's default)."""
    seen = []
    real = pg.gemm

    def spy(*args, **kw):
        seen.append(kw.get("precision"))
        return real(*args, **kw)

    monkeypatch.setattr(pg, "gemm", spy)
    a, b = rng.standard_normal((8, 12)).astype(np.float32), rng.standard_normal((12, 6)).astype(np.float32)
    got = pgd.gemm(da.from_array(a, chunks=(4, 6)), da.from_array(b, chunks=(6, 3)), device="cpu", precision="medium").compute(scheduler="sync")
    assert seen and set(seen) == {"medium"}
    assert_close(got, a, b)


def test_a_dtype_the_named_backend_does_not_compute_is_refused_when_the_graph_is_built():
    """device='cuda' with int8 operands: no cuda variant computes integers, said now rather than at compute()."""
    A, B = da.ones((8, 6), dtype=np.int8), da.ones((6, 4), dtype=np.int8)
    with pytest.raises(DTypeError, match="backend 'cuda' computes .*float32.*, not int8"):
        pgd.gemm(A, B, device="cuda")
    assert pgd.gemm(A, B, device="cpu").compute()[0, 0] == 6
    assert pgd.gemm(A, B).dtype == np.int8  # each worker's choice: not refused here


def test_an_in_memory_c_of_another_library_is_refused_naming_c_and_the_conversion():
    """dask chunks NumPy and CuPy arrays: a c whose dtype is another library's (a torch tensor) is refused by name,
    before dask's own error ("Cannot interpret ... as a data type") could surface."""
    class Foreign:  # what dask's from_array cannot read: a dtype that is no NumPy dtype
        shape, dtype = (4, 4), object()

    A = da.ones((4, 4), chunks=2)
    with pytest.raises(ArgumentTypeError, match=r"c is a .*Foreign; polygemm\.dask\.gemm takes c as a dask array or a NumPy"):
        pgd.gemm(A, A, Foreign())


def test_chunks_of_torch_tensors_are_refused_naming_the_operand_and_the_conversion():
    torch = pytest.importorskip("torch")
    A = da.ones((4, 4), chunks=2).map_blocks(torch.from_numpy)
    with pytest.raises(ArgumentTypeError, match=r"A is a dask array of Tensor chunks .*A\.map_blocks\(lambda t: t\.numpy\(\)\)"):
        pgd.gemm(A, da.ones((4, 4), chunks=2))
    with pytest.raises(ArgumentTypeError, match=r"c is a torch\.Tensor"):
        pgd.gemm(da.ones((4, 4), chunks=2), da.ones((4, 4), chunks=2), torch.ones(4, 4, dtype=torch.float64))


def test_a_misspelt_precision_is_told_its_spelling():
    A = da.ones((4, 4), chunks=2)
    with pytest.raises(ArgumentTypeError, match=r"'precison' \(did you mean 'precision'\?\).*precision="):
        pgd.gemm(A, A, precison="high")
    assert float(pgd.gemm(A, A, precision="high").compute()[0, 0]) == 4.0


@pytest.mark.parametrize("c, how", [("row", r"np\.broadcast_to\(c, \(6, 5\)\)"), ("scalar", r"np\.broadcast_to\(c, \(6, 5\)\)"),
                                    ("dask_row", r"dask\.array\.broadcast_to\(c, \(6, 5\)\)")])
def test_a_c_that_broadcasts_to_the_result_is_told_how_to_pass_it(rng, c, how):
    ab = da.from_array(rng.standard_normal((6, 8)), chunks=3)
    bb = da.from_array(rng.standard_normal((8, 5)), chunks=4)
    given = {"row": np.ones(5), "scalar": 1.0, "dask_row": da.ones(5, chunks=5)}[c]
    with pytest.raises(ShapeError, match=r"got \((5,)?\)\. It broadcasts to that shape: pass it broadcast, e\.g\. " + how):
        pgd.gemm(ab, bb, given)
    with pytest.raises(ShapeError) as info:
        pgd.gemm(ab, bb, np.ones((3, 5)))
    assert "broadcast" not in str(info.value)


def test_a_and_b_by_polygemm_gemms_keywords_and_one_missing_is_said(rng):
    ab = da.from_array(rng.standard_normal((6, 8)), chunks=3)
    bb = da.from_array(rng.standard_normal((8, 5)), chunks=4)
    np.testing.assert_allclose(pgd.gemm(a=ab, b=bb).compute(), pgd.gemm(ab, bb).compute())
    with pytest.raises(ArgumentTypeError, match=r"^polygemm\.dask\.gemm needs B: pass the two dask arrays first"):
        pgd.gemm(ab)


@pytest.mark.parametrize("key", ["a", "b"])
def test_an_operand_given_by_position_and_by_keyword_is_told_so(rng, key):
    """gemm(A, B, a=A) is Python's "multiple values", as polygemm.gemm says it, not an unknown keyword."""
    ab = da.from_array(rng.standard_normal((6, 6)), chunks=3)
    with pytest.raises(ArgumentTypeError, match=f"multiple values for argument '{key}'"):
        pgd.gemm(ab, ab, **{key: ab})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_a_float32_c_beside_half_operands_is_told_the_float32_result_too(dtype):
    """A float32 bias beside float16 or bfloat16 operands: the refusal names out_dtype=float32 (a result both take)
    beside the cast, and that result takes the c as it is."""
    A = da.ones((4, 6), chunks=2, dtype=dtype)
    c = np.ones((4, 4), np.float32)
    with pytest.raises(DTypeError, match=r"astype\(.*\).*out_dtype=numpy\.float32"):
        pgd.gemm(A, A.T, c)
    np.testing.assert_array_equal(pgd.gemm(A, A.T, c, out_dtype=np.float32).compute(), np.full((4, 4), 7.0, np.float32))


def test_a_failed_check_of_a_block_says_where_the_block_lies_in_the_result():
    from polygemm.testing import inject_fault

    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((40, 30)).astype(np.float32), rng.standard_normal((30, 30)).astype(np.float32)
    A, B = da.from_array(a, chunks=(20, 15)), da.from_array(b, chunks=(15, 15))
    C = pgd.gemm(A, B, verify="raise")
    np.testing.assert_allclose(C.compute(), a @ b, rtol=1e-4, atol=1e-4)  # a clean product: no alarm
    with inject_fault(3, 4, value=1e3, times=1):
        with pytest.raises(pg.VerificationError, match=r"rows 3 .*this block holds the result's rows (0 to 19|20 to 39) and "
                                                      r"columns (0 to 14|15 to 29)") as info:
            C.compute(scheduler="sync")
    assert info.value.report is not None and not info.value.report.ok


def test_chunks_of_a_kind_polygemm_gemm_refuses_are_refused_when_the_graph_is_built():
    sp = pytest.importorskip("scipy.sparse")
    A = da.from_array(np.random.default_rng(0).standard_normal((6, 6)), chunks=3)
    sparse = A.map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0)))
    with pytest.raises(ArgumentTypeError, match=r"A is a dask array of scipy\.csr_matrix chunks.*toarray"):
        pgd.gemm(sparse, A)
