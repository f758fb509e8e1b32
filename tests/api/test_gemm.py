"""polygemm.gemm's rules on the cpu backends: operands, c, alpha/beta, variants, results."""

from __future__ import annotations

import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import polygemm
import polygemm as pg
from polygemm.errors import (
    ArgumentError,
    ArgumentTypeError,
    BackendUnavailableError,
    DTypeError,
    DeviceError,
    PolygemmError,
    ShapeError,
    UnsupportedProblemError,
)
from polygemm.testing import assert_close, check_result

from tests.helpers import cuda_probe_without_pycuda, documented_cli_options, REPO_ROOT, run_conformance_suites, subprocess_env


DTYPES = [np.float16, np.float32, np.float64]


def rand(rng, shape, dtype=np.float32, order="C"):
    return np.asarray(rng.standard_normal(shape).astype(dtype), order=order)


ROOT = REPO_ROOT


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


DOCUMENTED = documented_cli_options()


def _polygemm(args: list[str], timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polygemm", *args], capture_output=True, text=True, env=subprocess_env(**env),
                          cwd=str(ROOT), timeout=timeout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 13, 5), (127, 129, 131), (1000, 3, 7), (64, 48, 1)])
def test_matches_reference(rng, dtype, m, n, k):
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    got = pg.gemm(a, b, device="cpu")
    assert isinstance(got, np.ndarray) and got.dtype == dtype and got.shape == (m, n)
    assert_close(got, a, b)


@pytest.mark.parametrize("oa", ["C", "F", "T"])
@pytest.mark.parametrize("ob", ["C", "F", "T"])
def test_layouts_without_copy(rng, oa, ob):
    def make(r, c, order):
        return rand(rng, (c, r)).T if order == "T" else rand(rng, (r, c), order=order)

    a, b = make(9, 11, oa), make(11, 6, ob)
    plan = pg.explain(a, b, device="cpu")
    assert plan.copies == [] and not plan.notes
    assert_close(pg.gemm(a, b, device="cpu"), a, b)


def test_strided_view_copied_once_and_explained(rng):
    a = rand(rng, (8, 20))[:, ::2]
    b = rand(rng, (10, 3))
    plan = pg.explain(a, b, device="cpu")
    assert any("a copied once" in n for n in plan.copies)
    assert "copied once" in str(plan)
    assert "copies  : none" not in str(plan)  # the copies line and the copy agree
    assert_close(pg.gemm(a, b, device="cpu"), a, b)
    assert_close(pg.gemm(a, b, device="cpu"), a, b)  # the cached plan copies again


def test_alpha_beta_c(rng):
    a, b, c = rand(rng, (5, 4)), rand(rng, (4, 3)), rand(rng, (5, 3))
    assert_close(pg.gemm(a, b, c, alpha=-2.5, beta=0.25, device="cpu"), a, b, c, -2.5, 0.25)


def test_beta_zero_does_not_read_c(rng):
    a, b = rand(rng, (5, 4)), rand(rng, (4, 3))
    c = np.full((5, 3), np.nan, np.float32)
    assert not np.isnan(pg.gemm(a, b, c, beta=0.0, device="cpu")).any()


def test_out_and_in_place(rng):
    a, b, c = rand(rng, (6, 4)), rand(rng, (4, 5)), rand(rng, (6, 5))
    out = np.full((6, 5), np.nan, np.float32)
    assert pg.gemm(a, b, out=out, device="cpu") is out
    assert_close(out, a, b)
    c0 = c.copy()
    assert pg.gemm(a, b, c, beta=1.0, out=c, device="cpu") is c
    assert_close(c, a, b, c0, 1.0, 1.0)


def test_array_likes(rng):
    got = pg.gemm([[1.0, 2.0]], np.array([[3.0], [4.0]]), device="cpu")
    assert got.dtype == np.float64 and got[0, 0] == 11.0


@pytest.mark.parametrize("m,n,k", [(0, 4, 3), (4, 0, 3)])
def test_empty_m_or_n(rng, m, n, k):
    got = pg.gemm(rand(rng, (m, k)), rand(rng, (k, n)), device="cpu")
    assert got.shape == (m, n)


def test_k_zero_gives_beta_c_or_zeros(rng):
    a, b, c = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), rand(rng, (3, 4))
    np.testing.assert_array_equal(pg.gemm(a, b, device="cpu"), np.zeros((3, 4), np.float32))
    np.testing.assert_array_equal(pg.gemm(a, b, c, beta=2.0, device="cpu"), 2.0 * c)


def test_nan_and_inf_propagate(rng):
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    a[1, 2] = np.nan
    got = pg.gemm(a, b, device="cpu")
    assert np.isnan(got[1]).all() and not np.isnan(np.delete(got, 1, axis=0)).any()
    a2, b2 = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
    a2[0, 0], b2[0, 1] = np.inf, 0.0
    got = pg.gemm(a2, b2, device="cpu")
    assert np.isinf(got[0, 0]) and np.isnan(got[0, 1])


def test_float16_accumulates_in_float32(rng):
    # 4096 terms of ~1: float16 accumulation would be off by far more than the bound allows
    a = (1 + 0.01 * rng.random((2, 4096))).astype(np.float16)
    b = (1 + 0.01 * rng.random((4096, 2))).astype(np.float16)
    got = pg.gemm(a, b, device="cpu")
    assert check_result(got, a, b).ok


def test_explain_reports_and_last_plan(rng):
    """device='auto' takes the first backend, in priority order, that is available and computes
    the problem; the plan names it and each backend passed over, with the reason. On a machine
    with a GPU and on one without."""
    infos = pg.backends()
    order = [i.name for i in infos]
    # float64, which musa does not compute: cuda's FP64 tensor-core rungs where cuda is available, else the CPU's BLAS
    a, b = rand(rng, (3, 4), np.float64), rand(rng, (4, 2), np.float64)
    plan = pg.explain(a, b, device="auto")
    cuda_here = infos[order.index("cuda")].available
    assert plan.backend == ("cuda" if cuda_here else "cpu")
    if not cuda_here:
        assert plan.variant == "blas"  # the fast default; reference on request
    # the plan's candidates are the backends passed over, then the chosen backend's own variants
    # passed over (cuda's ranked rungs on a machine with a GPU): the backends are checked here
    passed = {name: why for name, why in plan.candidates if name in order}
    assert "musa" in passed and ("cuda" in passed) == (not cuda_here)  # unavailable, or no float64, each with its reason
    for name in [n for n in ("cuda", "musa") if n in passed]:
        info = infos[order.index(name)]
        why = passed[name]
        assert why.startswith("dtype float64 not supported") if info.available else why == f"unavailable: {info.reason}"
    text = str(plan)
    assert f"backend : {plan.backend}" in text and "passed over musa" in text and ("passed over cuda" in text) == (not cuda_here)
    # float32: the GPU's backend where cuda is available, else the CPU's BLAS, past each unavailable one
    a, b = rand(rng, (3, 4)), rand(rng, (4, 2))
    plan = pg.explain(a, b, device="auto")
    expected = "cuda" if infos[order.index("cuda")].available else "cpu"  # musa computes float16 only
    assert plan.backend == expected
    if expected == "cpu":
        assert plan.variant == "blas"
    passed = {name: why for name, why in plan.candidates if name in order}
    assert list(passed) == order[:order.index(expected)]  # each backend of higher priority, none of lower
    for info in infos[:order.index(expected)]:  # with cuda available, none; musa, when available, has no float32
        why = passed[info.name]
        assert why.startswith("dtype float32 not supported") if info.available else why == f"unavailable: {info.reason}"
    text = str(plan)
    assert f"backend : {expected}" in text
    assert all(f"passed over {name}: {why}" in text for name, why in passed.items())
    pg.gemm(a, b, device="cpu", variant="reference")
    assert pg.last_plan().backend == "cpu" and pg.last_plan().variant == "reference"


def test_explain_says_when_out_is_c(rng):
    """An in-place call (out is c) says so in the plan, and whether c is read (beta != 0);
    a call with another out does not."""
    a, b, c = rand(rng, (3, 4)), rand(rng, (4, 2)), rand(rng, (3, 2))
    assert "in place: out is c (read, then overwritten" in str(pg.explain(a, b, c, beta=0.5, out=c, device="cpu"))
    assert "never read" in str(pg.explain(a, b, c, out=c, beta=0.0, device="cpu"))
    assert "in place" not in str(pg.explain(a, b, c, beta=0.5, out=np.empty_like(c), device="cpu"))


def test_env_default_device(rng, monkeypatch):
    a, b = rand(rng, (3, 4)), rand(rng, (4, 2))
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu")
    assert pg.explain(a, b).backend == "cpu"
    monkeypatch.setenv("POLYGEMM_DEVICE", "nosuchdevice")
    with pytest.raises(pg.BackendUnavailableError, match="unknown device 'nosuchdevice'"):
        pg.gemm(a, b)


def test_vendor_variant_never_auto(rng):
    a, b = rand(rng, (3, 4)), rand(rng, (4, 2))
    assert pg.explain(a, b, device="cpu").variant == "blas"
    assert pg.explain(a, b, device="cpu", variant="reference").variant == "reference"
    plan = pg.explain(a, b, device="cpu", variant="numpy")
    assert plan.variant == "numpy"
    assert_close(pg.gemm(a, b, device="cpu", variant="numpy"), a, b)


def test_public_api_is_typed_and_documented():
    for name in ("gemm", "explain", "backends", "get_backend", "last_plan"):
        fn = getattr(pg, name)
        assert fn.__doc__, name


def test_float16_inputs_may_write_float32_out(rng):
    a, b = rand(rng, (9, 7), np.float16), rand(rng, (7, 5), np.float16)
    out = np.full((9, 5), np.nan, np.float32)
    assert pg.gemm(a, b, out=out, device="cpu") is out
    assert check_result(out, a, b, out_dtype=np.float32).ok
    c = rand(rng, (9, 5), np.float32)
    pg.gemm(a, b, c, beta=0.5, out=out, device="cpu")
    assert check_result(out, a, b, c, 1.0, 0.5, out_dtype=np.float32).ok
    with pytest.raises(pg.DTypeError, match="c must have the dtype of the result"):
        pg.gemm(a, b, c.astype(np.float16), beta=0.5, out=out, device="cpu")
    with pytest.raises(pg.DTypeError, match="or float32"):
        pg.gemm(a, b, out=np.zeros((9, 5), np.float64), device="cpu")


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


_SUITE_RUNS = {
    "cpu": {"POLYGEMM_TEST_BACKEND": "cpu", "POLYGEMM_TEST_QUICK": "1"},
    "unset": {"POLYGEMM_TEST_QUICK": "1", "POLYGEMM_TEST_DTYPES": "float32"},  # no backend named: cpu
    **{name: {"POLYGEMM_TEST_BACKEND": name} for name in ("nosuch", "numpy-blas", "auto")},
}


@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """``pytest --pyargs polygemm.testing`` under each environment of _SUITE_RUNS (one child process for all)."""
    runs = run_conformance_suites(tmp_path_factory.mktemp("suite"), list(_SUITE_RUNS.values()))
    return dict(zip(_SUITE_RUNS, runs))


def test_pyargs_suite_runs_the_cpu_backend(suite_runs):
    r = suite_runs["cpu"]
    assert r.returncode == 0 and " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    default = suite_runs["unset"]
    assert default.returncode == 0 and " passed" in default.stdout, default.stdout[-2000:]


@pytest.mark.parametrize("name", ["nosuch", "numpy-blas", "auto"])
def test_pyargs_suite_fails_for_a_backend_that_does_not_exist(suite_runs, name):
    r = suite_runs[name]
    assert r.returncode == 1, r.stdout[-2000:]
    assert f"{name}-not-loadable" in r.stdout and f"POLYGEMM_TEST_BACKEND={name!r}" in r.stdout, r.stdout[-2000:]
    assert "1 failed" in r.stdout and "passed" not in r.stdout and "skipped" not in r.stdout


def test_with_a_driver_but_no_pycuda_cuda_still_says_to_install_it(monkeypatch):
    av = cuda_probe_without_pycuda(monkeypatch, driver_loads=True)
    assert not av.ok
    assert av.reason.startswith("pycuda is not importable") and "pip install 'polygemm[cuda]'" in av.reason


@pytest.mark.parametrize("call, cls, said", [
    (lambda a: pg.gemm(a, a.T, alpha=None, device="cpu"), ArgumentTypeError, "alpha must be a real number"),
    (lambda a: pg.gemm(a, a.T, beta=float("nan"), device="cpu"), ArgumentError, "beta must be finite"),
    (lambda a: pg.gemm(a, a.T, variant="", device="cpu"), ArgumentError, "variant must be a variant name or 'auto'"),
    (lambda a: pg.gemm(a, a.T, variant="nosuch", device="cpu"), UnsupportedProblemError,
     "variant='nosuch' is not a variant of backend 'cpu'; known: blas, reference, numpy (or 'auto')"),
    (lambda a: pg.gemm(a, a.T, out_dtype="f32", device="cpu"), DTypeError,
     "out_dtype='f32' is not a dtype polygemm writes; pass float32"),
    (lambda a: pg.gemm(a, a.T, out=[[0.0] * 2] * 2, device="cpu"), ArgumentTypeError,
     "out must be a NumPy array (or a device array)"),
    (lambda a: pg.gemm(a.astype(np.float16), a.T.astype(np.float16), out=np.empty((2, 2), np.float16),
                       out_dtype=np.float32, device="cpu"), DTypeError, "out is float16 but out_dtype=float32"),
    (lambda a: pg.gemm(a, a, device="cpu"), ShapeError, "a.shape[-1] (K=3) must equal b.shape[-2] (2)"),
    (lambda a: pg.gemm(a.astype(ml_dtypes.float8_e4m3fn), a.T, device="cpu"), DTypeError,
     "a has dtype float8_e4m3fn; polygemm supports float16, float32 or float64, and bfloat16"),
])
def test_a_refusal_names_the_argument_and_what_is_accepted(call, cls, said):
    """each refusal is the documented class (so also ValueError or TypeError) and its message names the
    argument and what it takes."""
    with pytest.raises(cls) as info:
        call(_ones(2, 3))
    assert said in str(info.value)
    assert isinstance(info.value, ValueError if cls in (ArgumentError, ShapeError, UnsupportedProblemError) else TypeError)
    assert not isinstance(info.value, (BackendUnavailableError, DeviceError))


def test_the_docs_name_options_at_all():
    assert ("gemm", "--check") in DOCUMENTED and ("bench", "--markdown") in DOCUMENTED and len(DOCUMENTED) >= 15


@pytest.mark.parametrize("kw", [
    {"device": "x" * 300},
    {"variant": "y" * 300},
    {"device": "cpu", "variant": "z" * 300},
    {"device": "cpu:" + "9" * 300},
])
def test_a_long_name_is_quoted_short(kw):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(PolygemmError) as ei:
        polygemm.gemm(a, a, **kw)
    text = str(ei.value)
    assert "..." in text  # cut, not dropped: the message still shows what was passed
    assert "9" * 100 not in text and "x" * 100 not in text and "y" * 100 not in text and "z" * 100 not in text


def test_a_failed_split_launch_reports_the_launchs_error_not_the_release():
    """A split-K launch refused in a CUDA graph capture is reported by its own error, not by the scratch's release in
    a finally ("cuMemFreeAsync failed: ... invalidated"). The workspace is still given back."""
    from polygemm.backends.cuda.launch import PreparedLaunch, SplitLaunch
    from polygemm.errors import DeviceError

    released = []

    def go(buf, stream):
        raise DeviceError("launching k cooperatively failed: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    class Runtime:
        def release(self, ptr, stream):
            released.append(ptr)
            raise DeviceError("cuMemFreeAsync failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")

    launch = PreparedLaunch.__new__(PreparedLaunch)
    launch._go, launch.rt = go, Runtime()
    with pytest.raises(DeviceError, match="launching k cooperatively failed"):
        launch._launch_split(SplitLaunch(b"", 1234, 7, True), 7)
    assert released == [1234]


@pytest.mark.parametrize("value, says", [("inf", "must be a finite number of seconds > 0 and at most 86400"),
                                         ("1e12", "must be a finite number of seconds > 0 and at most 86400"),
                                         ("soon", "is not a number"), ("-1", "must be a finite number of seconds > 0 and at most 86400")])
def test_a_bad_probe_timeout_warns_and_keeps_30_seconds(monkeypatch, fresh_registry, value, says):
    # POLYGEMM_PROBE_TIMEOUT=inf (or 1e12) cannot be a timer's timeout, and no bad value is ignored silently: each
    # warns and keeps 30 s, and the probes it bounds run
    monkeypatch.setenv("POLYGEMM_PROBE_TIMEOUT", value)
    fresh_registry.refresh()
    with pytest.warns(RuntimeWarning, match=re.escape(f"POLYGEMM_PROBE_TIMEOUT={value!r} {says}; keeping 30 s")):
        infos = {i.name: i for i in pg.backends()}
    assert infos["cpu"].available


def test_a_bad_probe_timeout_is_a_warning_on_the_command_line_not_a_traceback():
    r = _polygemm(["info"], POLYGEMM_PROBE_TIMEOUT="inf")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "POLYGEMM_PROBE_TIMEOUT='inf' must be a finite number of seconds > 0 and at most 86400; keeping 30 s" in r.stderr


@pytest.mark.parametrize("which", ["a", "b", "c"])
def test_a_one_row_view_of_a_packed_records_field_is_read_as_numpy_reads_it(rng, which):
    # NumPy calls rec["x"][1:2] C-contiguous, though its row stride (33 bytes) is no whole number of elements: the
    # stride of a length-1 axis is one NumPy ignores and a kernel would read
    rec = np.zeros(3, dtype=[("x", "f8", (4,)), ("flag", "u1")])
    rec["x"] = rng.standard_normal((3, 4))
    row = rec["x"][1:2]
    assert row.strides[0] % 8 and row.flags.c_contiguous
    if which == "a":
        b = rng.standard_normal((4, 2))
        np.testing.assert_allclose(pg.matmul(row, b, device="cpu"), np.matmul(row, b))
    elif which == "b":
        a = rng.standard_normal((2, 1))
        np.testing.assert_allclose(pg.gemm(a, row.T.T.reshape(1, 4), device="cpu"), a @ row)
    else:
        a, b = rng.standard_normal((1, 4)), rng.standard_normal((4, 4))
        np.testing.assert_allclose(pg.gemm(a, b, row, device="cpu"), a @ b + row)
