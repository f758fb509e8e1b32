"""A vendor engineer and a demanding NumPy / Dask user, seventeenth round (CPU): docs/plugins.md followed
literally (a plugin written from its snippets, installed as pip installs it, then ``polygemm info``, ``polygemm
variants``, ``polygemm matrix --backends`` and ``POLYGEMM_TEST_BACKEND=... pytest --pyargs polygemm.testing``), a
plugin that overrides ``execute`` for speed as section 3 invites, a plugin whose import fails named in a CI's
``polygemm matrix``, docs/musa.md's host flavor followed as written (``polygemm info``, ``polygemm gemm --check``,
``polygemm bench --device musa``), polygemm.dask on empty and half-precision chunked products, and
``polygemm.matmul`` beside ``numpy.matmul`` on vectors, broadcasting batches and empty dimensions with ``out=``.
The tests marked "defect" failed before the fix they name; the others check edges that were right."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import ShapeError
from polygemm.testing import check_result, run_conformance
from plugin_sources import install_fake_distribution, install_fake_plugins, one_variant_backend
from test_musa import _reset as _musa_reset, musa_library  # noqa: F401  (musa_library: the host flavor, built once)

try:
    import dask
    import dask.array as da
except ImportError:  # pragma: no cover - the dask extra is part of the test install
    da = None

import polygemm.dask as pgd  # noqa: E402  (imports no dask)

ROOT = Path(__file__).resolve().parent.parent
BF16 = np.dtype(ml_dtypes.bfloat16)

# -- a plugin written from docs/plugins.md's snippets ------------------------------------------------------------------

#: sections 3 and 4 as written: a Backend subclass (polygemm.Backend), a Variant with every keyword the doc lists, a
#: vendor comparator (auto=False, vendor=True), float16 computed in float32 and rounded once, plan() mapping "auto"
#: to the auto variant and checking the problem, run() writing out and returning it
DOC_PLUGIN = '''
import numpy as np
import polygemm
from polygemm.backend import Availability, Plan, Variant, host_layouts
from polygemm.errors import DeviceError


class MyDevBackend(polygemm.Backend):
    name = "mydev"
    priority = 300
    residencies = ("host",)

    def probe(self):
        return Availability(True)

    def variants(self):
        return (
            Variant(name="matmul", dtypes=("float16", "float32", "float64"), description="numpy.matmul, float16 in float32",
                    layout="any", tile="BLAS heuristics", requirements="none", auto=True, vendor=False,
                    out_dtypes=("float32",), extra={}),
            Variant(name="vendorlib", dtypes=("float32",), description="the vendor library's GEMM", auto=False, vendor=True),
        )

    def device_name(self):
        return "MyDev 9000 (emulated)"

    def plan(self, problem, variant="auto"):
        chosen = self.get_variant("matmul" if variant == "auto" else variant)
        self.check_problem(problem, chosen)
        return Plan(self.name, chosen.name, "the doc's plugin", problem, device=self.device_name(),
                    layouts=host_layouts(problem))

    def run(self, plan):
        p = plan.problem
        work = np.dtype(np.float32 if p.dtype == np.float16 else p.dtype)
        try:
            with np.errstate(all="ignore"):
                res = np.zeros((p.m, p.n), work)
                if not p.empty:  # scaled in float64: alpha and beta may lie beyond float32's range (1e39, 1e-45)
                    res = np.matmul(p.a.array.astype(work), p.b.array.astype(work)).astype(np.float64) * p.alpha
                if p.beta != 0.0:
                    res = res + p.beta * p.c.array.astype(np.float64)
            res = res.astype(p.out_dtype)
        except MemoryError as exc:
            raise DeviceError(f"mydev: {exc}") from exc
        if p.out is not None:
            np.copyto(p.out.array, res)
            return p.out.array
        return res
'''

#: section 3's invitation: "If you override [execute] for speed, start it with if not call.matched: check_call(...)";
#: this one does, then forgets alpha and beta, while its run() is right
FAST_PLUGIN = one_variant_backend("FastBackend", priority=300, variant="mm", reason="its one variant") + """\
    def execute(self, plan, call):  # "for speed": the product only, alpha and beta forgotten
        from polygemm.backend import check_call

        if not call.matched:
            check_call(plan, call)
        with np.errstate(all="ignore"):
            r = (np.asarray(call.a) @ np.asarray(call.b)).astype(np.float32)
        if call.out is not None:
            call.out[...] = r
            return call.out
        return r
"""

BROKEN_IMPORT = 'raise ImportError("vendor runtime libfoo.so.3 not found")\n'


#: distributions as pip writes them: the .dist-info folder carries the normalized name (polygemm_mydev-0.1.dist-info);
#: importlib.metadata reads "polygemm-mydev-0.1" as the distribution "polygemm" and lists one such folder only


@pytest.fixture
def doc_plugin(tmp_path, monkeypatch, fresh_registry):
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("polygemm_mydev", "polygemm_mydev", DOC_PLUGIN, {"mydev": "polygemm_mydev:MyDevBackend"}),
                         ("polygemm_fast", "polygemm_fast", FAST_PLUGIN, {"fast": "polygemm_fast:FastBackend"}),
                         ("polygemm_broke", "polygemm_broke", BROKEN_IMPORT, {"broke": "polygemm_broke:Broke"}))
    yield tmp_path
    for mod in ("polygemm_mydev", "polygemm_fast", "polygemm_broke"):
        sys.modules.pop(mod, None)


def test_the_plugin_written_from_the_doc_is_listed_and_passes_the_suite(doc_plugin, capsys):
    """Right: section 1 promises info lists it, variants prints its table (vendor in the auto column), explicit
    device= and auto run it, and the suite (run_conformance and polygemm matrix --backends) passes it."""
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("mydev"))
    assert "priority 300" in line and "available" in line and "MyDev 9000 (emulated)" in line
    assert "from entry point polygemm_mydev:MyDevBackend (polygemm_mydev)" in text
    assert "broke" in text and "import failed: ImportError: vendor runtime libfoo.so.3 not found" in text
    assert main(["variants", "--device", "mydev"]) == 0
    rows = {ln.split()[0]: ln.split()[1] for ln in capsys.readouterr().out.splitlines()[2:4]}
    assert rows == {"matmul": "yes", "vendorlib": "vendor"}
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    out = np.empty((3, 3), np.float32)  # float16 in, float32 out: the variant's out_dtypes
    assert pg.gemm(a, a.T.copy(), out=out, device="mydev") is out and check_result(out, a, a.T, out_dtype=np.float32).ok
    assert pg.last_plan().backend == "mydev"
    plan = pg.explain(a.astype(np.float64), a.T.astype(np.float64))  # auto: 300 beats cpu's 0 ("fast" has no float64)
    assert plan.backend == "mydev" and any(name == "fast" for name, _ in plan.candidates)
    rows = run_conformance("mydev", quick=True)
    assert rows and not [r for r in rows if r.status == "fail"]
    assert {r.variant for r in rows} == {"matmul", "vendorlib"}
    assert main(["matrix", "--backends", "mydev", "--quick", "--no-progress"]) == 0


def test_the_suite_checks_the_execute_that_polygemm_gemm_calls(doc_plugin):
    # defect: the suite called the backend's plan() and run() only, while polygemm.gemm calls execute(): a plugin
    # whose execute (overridden for speed, as section 3 invites) dropped alpha and beta passed every case of
    # run_conformance and polygemm matrix, and gemm(a, b, alpha=3) gave a @ b (docs/plugins.md section 7 says the
    # suite "drives polygemm.gemm(..., device=name, variant=v)")
    a = np.ones((2, 2), np.float32)
    assert (pg.gemm(a, a, alpha=3.0, device="fast") == 2.0).all()  # the bug the suite must see
    rows = run_conformance("fast", quick=True)
    fails = {r.group for r in rows if r.status == "fail"}
    assert {"scaling", "layouts"} <= fails, [(r.group, r.case, r.status) for r in rows]
    assert main(["matrix", "--backends", "fast", "--quick", "--no-progress"]) == 1


def test_an_unregistered_backend_object_is_run_through_its_execute_too(doc_plugin):
    # defect: the same for a Backend object passed to run_conformance (not installed): its run() alone was tested
    import polygemm_fast

    rows = run_conformance(polygemm_fast.FastBackend(), groups="scaling", quick=True)
    assert rows and all(r.status == "fail" for r in rows if r.case in ("alpha_beta_c", "alpha_no_c")), rows


def test_a_named_plugin_whose_import_fails_fails_the_matrix(doc_plugin, capsys):
    # defect: "polygemm matrix --backends broke" (a plugin's CI, as section 7 shows it) printed one skip row and
    # exited 0 when the plugin's module raised at import, where POLYGEMM_TEST_BACKEND=broke under pytest is a failing
    # test ("a typo cannot pass CI")
    assert main(["matrix", "--backends", "broke", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "0 passed, 1 failed, 0 skipped" in out
    assert out.count("FAIL broke: backend 'broke' could not be loaded: import failed: ImportError: vendor runtime "
                     "libfoo.so.3 not found") == 1  # once, not once per group column
    # every discovered backend: still a skip, and never fatal to the others (the doc's promise)
    path = doc_plugin / "m.json"
    assert main(["matrix", "--dtypes", "float64", "--quick", "--no-progress", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    broke = [r for r in rows if r["backend"] == "broke"]
    assert len(broke) == 1 and broke[0]["status"] == "skip" and "libfoo.so.3" in broke[0]["detail"]
    assert any(r["backend"] == "mydev" and r["status"] == "pass" for r in rows)
    assert any(r["backend"] == "cpu" and r["status"] == "pass" for r in rows)
    a = np.ones((2, 3), np.float32)
    with pytest.raises(pg.BackendUnavailableError, match="libfoo.so.3 not found"):
        pg.gemm(a, a.T, device="broke")


def _pyargs(tmp_path: Path, site: Path, backend: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYGEMM_")}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), PYTHONDONTWRITEBYTECODE="1",
               POLYGEMM_TEST_BACKEND=backend, POLYGEMM_TEST_QUICK="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "--pyargs", "polygemm.testing"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_the_doc_plugin_under_pytest_pyargs_passes_and_the_broken_ones_do_not(tmp_path):
    """Right (and, for "fast", the defect above): section 7's CI line on the plugin passes with its cases counted;
    on the plugin whose execute is wrong it fails; on the one whose import fails it is one failing test."""
    site = tmp_path / "site"
    site.mkdir()
    install_fake_distribution(site, "polygemm_mydev", "polygemm_mydev", DOC_PLUGIN, {"mydev": "polygemm_mydev:MyDevBackend"})
    install_fake_distribution(site, "polygemm_fast", "polygemm_fast", FAST_PLUGIN, {"fast": "polygemm_fast:FastBackend"})
    install_fake_distribution(site, "polygemm_broke", "polygemm_broke", BROKEN_IMPORT, {"broke": "polygemm_broke:Broke"})
    good = _pyargs(tmp_path, site, "mydev")
    assert good.returncode == 0 and "failed" not in good.stdout, good.stdout[-2000:]
    assert int(good.stdout.split(" passed")[0].split()[-1]) >= 80, good.stdout[-2000:]  # 4 (dtype, variant) x the quick grid
    fast = _pyargs(tmp_path, site, "fast")
    assert fast.returncode == 1 and "scaling" in fast.stdout, fast.stdout[-2000:]
    broke = _pyargs(tmp_path, site, "broke")
    assert broke.returncode == 1 and "1 failed" in broke.stdout and "libfoo.so.3" in broke.stdout, broke.stdout[-2000:]


# -- docs/musa.md's host flavor, as written ----------------------------------------------------------------------------


@pytest.fixture
def musa_host(musa_library, monkeypatch):  # noqa: F811 - the fixture imported above
    monkeypatch.setenv("POLYGEMM_MUSA_LIBRARY", str(musa_library))
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "1")
    _musa_reset()
    yield musa_library
    monkeypatch.delenv("POLYGEMM_MUSA_EMULATION")
    _musa_reset()


def test_musa_doc_commands_on_the_host_flavor(musa_host, capsys):
    """Right: ``POLYGEMM_MUSA_EMULATION=1 POLYGEMM_MUSA_LIBRARY=... polygemm info`` lists musa available as the host
    flavor, and ``polygemm gemm --dtype float16 --device musa --check`` passes, saying EMULATION."""
    assert main(["info"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("musa"))
    assert "available" in line and "unavailable" not in line and "host flavor" in line
    assert main(["gemm", "--shape", "96x80x72", "--dtype", "float16", "--device", "musa", "--check", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "variant : wmma_s4000" in out and "EMULATION" in out and "check: PASS" in out


@pytest.mark.parametrize("inputs", ["device", "numpy"])
def test_musa_bench_call_mode_times_polygemm_where_mublas_is_absent(musa_host, capsys, tmp_path, inputs):
    # defect: "polygemm bench --device musa" (call mode, the default) on the host or cuda flavor, which have no
    # muBLAS, stopped with "error: variant 'mublas' needs the musa flavor" and exit status 2 before timing anything;
    # kernel mode times the kernel and says "vendor mublas not timed" (README: a figure not measured is null)
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    argv = ["bench", "--device", "musa", "--dtype", "float16", "--shapes", "64x64x64", "--repeats", "1", "--no-progress",
            "--inputs", inputs, "--json", str(js), "--markdown", str(md)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "vendor polygemm.gemm(a, b, out=out, variant='mublas') not timed: variant 'mublas' needs the musa flavor" in out
    assert "gemm(auto) -> wmma_s4000" in out
    rec = json.loads(js.read_text())["records"][0]
    assert rec["tflops"] > 0 and rec["vendor_tflops"] is None and rec["vendor_us_per_call"] is None and rec["ratio"] is None
    row = next(ln for ln in md.read_text().splitlines() if ln.startswith("| 64×64×64"))
    assert "nan" not in row and row.count("–") >= 3


# -- polygemm.dask: empty and half-precision chunked products ----------------------------------------------------------

needs_dask = pytest.mark.skipif(da is None, reason="dask not installed")


@needs_dask
@pytest.mark.parametrize("m, n, k", [(4, 5, 0), (0, 5, 3), (4, 0, 3)])
def test_dask_empty_products_match_polygemm_gemm(m, n, k):
    """Right: K = 0 gives beta * c (zeros without c), M or N = 0 an empty result, as polygemm.gemm does."""
    A = da.ones((m, k), chunks=2, dtype=np.float32)
    B = da.ones((k, n), chunks=2, dtype=np.float32)
    c = np.full((m, n), 3.0, np.float32)
    with dask.config.set(scheduler="sync"):
        got = pgd.gemm(A, B, c, beta=2.0).compute()
        plain = pgd.gemm(A, B).compute()
    assert got.shape == plain.shape == (m, n) and got.dtype == np.float32
    assert np.array_equal(got, pg.gemm(np.ones((m, k), np.float32), np.ones((k, n), np.float32), c, beta=2.0, device="cpu"))
    assert (got == 6.0).all() and (plain == 0.0).all()


@needs_dask
@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_dask_half_products_over_many_k_chunks_are_within_one_calls_bound(dtype):
    """Right: seven K chunks of a 16-bit product accumulate in float32 and round once (the bound of one call), and
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


# -- polygemm.matmul beside numpy.matmul -------------------------------------------------------------------------------


@pytest.mark.parametrize("sa, sb", [
    ((3,), (3, 4)), ((2, 3), (3,)), ((5, 2, 3), (3,)), ((3,), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
    ((1, 2, 3), (7, 3, 4)), ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((0,), (0, 4)), ((2, 0), (0,)),
    ((0, 2, 3), (3, 4)), ((2, 3), (0, 3, 4)), ((5, 0, 3), (3,)), ((3,), (0, 3, 4)), ((3,), (2, 3, 0)), ((0,), (2, 0, 3)),
])
def test_matmul_edge_shapes_match_numpy_with_and_without_out(sa, sb):
    """Right: shapes, dtype and values of numpy.matmul on vectors, broadcasting batches and empty dimensions; with
    out= of that shape (C-order, or a strided view for a vector result) the result is written into it and out is returned."""
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    want = np.matmul(a, b)
    got = pg.matmul(a, b, device="cpu")
    assert type(got) is np.ndarray and got.shape == want.shape and got.dtype == want.dtype
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    out = np.full(want.shape, np.nan, np.float32)
    assert pg.matmul(a, b, out=out, device="cpu") is out and np.allclose(out, want, rtol=1e-5, atol=1e-5)
    if want.ndim == 1:  # a vector result (a matrix out must be row- or column-major: README, "out is never a copy")
        big = np.full(want.shape[:-1] + (2 * want.shape[-1],), np.nan, np.float32)
        view = big[..., ::2]  # a strided out, as numpy.matmul writes it
        assert pg.matmul(a, b, out=view, device="cpu") is view and np.allclose(view, want, rtol=1e-5, atol=1e-5)
        assert np.isnan(big[..., 1::2]).all()  # nothing written between its elements


@pytest.mark.parametrize("sa, sb", [((3,), (4,)), ((2, 3), (4,)), ((2, 3, 4), (3, 4, 5)), ((4,), (3, 4)), ((2, 3, 4), (3, 3, 5))])
def test_matmul_refuses_what_numpy_matmul_refuses_with_a_value_error(sa, sb):
    """Right: where numpy.matmul raises ValueError (inner dimensions, batches that do not broadcast), polygemm.matmul
    raises ShapeError, a ValueError, and an out given is left as it was."""
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(ShapeError) as info:
        pg.matmul(a, b, device="cpu")
    assert isinstance(info.value, ValueError)
    assert "inner dimensions differ" in str(info.value) or "do not broadcast" in str(info.value)


def test_compile_with_compiler_nvrtc_and_no_nvrtc_names_the_option_not_the_variable(monkeypatch, capsys):
    # defect: "polygemm compile --compiler nvrtc" where NVRTC is absent says "POLYGEMM_COMPILER=nvrtc: NVRTC (libnvrtc)
    # not found ...; the kernels compile at run time: pip install ..." -- the user set no POLYGEMM_COMPILER, and
    # compile builds ahead of time (compiler.select's lead names the variable whenever a compiler is forced)
    monkeypatch.delenv("POLYGEMM_COMPILER", raising=False)
    monkeypatch.setenv("POLYGEMM_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so")
    assert main(["compile", "--compiler", "nvrtc", "--only", "cm_v01_naive", "--arch", "sm_90", "-q"]) == 2
    err = capsys.readouterr().err
    assert "POLYGEMM_COMPILER=" not in err and "compile at run time" not in err and "nvrtc" in err
