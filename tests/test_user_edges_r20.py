"""A user at the edges of float arithmetic and of the machine, twentieth round (CPU): ``alpha`` and ``beta`` at the
ends of float32's range (subnormal, exactly representable or not, and the float32 kernels' scalars that must refuse
what they would round), BLAS's ``beta == 0`` convention (a NaN or Inf ``c`` never read, whatever zero is passed, on
the first and the cached call, with ``out`` separate, ``c`` itself, or another view of ``c``'s memory) and
``alpha == 0`` with finite operands; the plan cache for an in-place update written the way a blocked loop writes
it (``c=C[i:j], out=C[i:j]``: two view objects of one memory) and ``explain`` of a cached plan beside a fresh one
over dtypes, layouts, ``c`` and ``out``; and the command line at the machine's limits: ``polygemm bench`` asked for
a shape whose operands cannot be allocated, and output paths under a file rather than a folder. The tests marked
"defect" failed before the fix they name; the others check edges that were right."""

from __future__ import annotations

import fractions
import json
import random
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.apps import bench
from polygemm.backend import fits_float32
from polygemm.apps.cli import main
from polygemm.errors import ArgumentError, UnsupportedProblemError
from polygemm.testing import reference_for
from test_musa import musa, musa_library  # noqa: F401  (fixtures: the host flavor of libpolygemm_musa)

ROOT = Path(__file__).resolve().parents[1]
BF16 = np.dtype(ml_dtypes.bfloat16)
HALVES = [np.dtype(np.float16), BF16]
FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32
#: an impossible allocation on any machine: b is 10**14 float32 (400 TB, past a 47-bit address space), a one element
TOO_LARGE = "1x100000000000000x1"


@pytest.fixture
def rng():
    return np.random.default_rng(20)


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within polygemm.testing's bound of the float64 reference."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


# -- alpha and beta below float32's normal numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [1e-45, 3e-42, 1e-40, 1e-38], ids=lambda v: f"{v:g}")
@pytest.mark.parametrize("variant", ["auto", "blas", "numpy", "reference"])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_a_subnormal_alpha_scales_at_its_own_value(dtype, variant, value):
    """defect (polygemm/backends/cpu_ref/backend.py): the cpu backend scaled in the work type (float32) whenever alpha
    did not overflow it or flush to 0; a float32 subnormal keeps fewer bits, so alpha=1e-45 scaled by 1.4e-45 (every
    result 40% off) and 1e-40 by 0.99999e-40, outside polygemm.testing's own bound. It now scales in float64 then."""
    big = 1e19 if dtype != np.float16 else 60000.0
    a = np.full((3, 2), big, dtype)  # K = 2: 2e38, near float32's top, exact in the float32 accumulation
    b = np.full((2, 2), big, dtype)
    out_dtype = np.float32 if dtype in HALVES else None  # the product fits float32, not float16 or bfloat16's results
    got = pg.gemm(a, b, alpha=value, device="cpu", variant=variant, out_dtype=out_dtype)
    assert_within(got, a, b, None, value, 0.0, out_dtype=out_dtype)
    want = 2 * float(a[0, 0]) * float(b[0, 0]) * value
    assert abs(float(got[0, 0]) - want) <= 1e-6 * want  # within a float32 rounding or two of the value asked for


@pytest.mark.parametrize("variant", ["auto", "blas", "numpy"])
def test_a_subnormal_beta_scales_c_at_its_own_value(variant, rng):
    """defect (same fix): beta as alpha: beta=1e-40 beside a c of 1e30 had been 0.99999e-40 * c."""
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    c = np.full((3, 5), 1e30, np.float32)
    got = pg.gemm(a, b, c, beta=1e-40, device="cpu", variant=variant)
    assert_within(got, a, b, c, 1.0, 1e-40)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b + 1e-10, rtol=1e-6, atol=1e-6)


def test_an_exactly_representable_subnormal_keeps_the_float32_path_and_others_leave_it():
    """defect (polygemm/backend.py, fits_float32): the float32 kernels' test of their scalars took every value above
    half the smallest subnormal; now only normal numbers and subnormals float32 holds exactly. The cache key reads
    the same test, so a plan for one kind of value is never reused for the other."""
    assert fits_float32(2.0 ** -140) and fits_float32(-(2.0 ** -149)) and fits_float32(FLOAT32_TINY)
    assert fits_float32(0.0) and fits_float32(-0.0) and fits_float32(float(np.finfo(np.float32).max))
    for value in (1e-45, 3e-42, -1e-40, 1e-38, 2.0 ** -150, 1e39):
        assert not fits_float32(value), value
    a = np.full((2, 3), 1e19, np.float32)
    b = np.full((3, 2), 1e19, np.float32)
    pg.clear_plan_cache()
    exact = pg.gemm(a, b, alpha=2.0 ** -140, device="cpu")  # planned (a float32-exact scalar) ...
    inexact = pg.gemm(a, b, alpha=1e-40, device="cpu")  # ... and this one planned again, not bound to it
    assert pg.plan_cache_info()["misses"] == 2
    assert_within(exact, a, b, None, 2.0 ** -140)
    assert_within(inexact, a, b, None, 1e-40)


def test_the_float32_kernels_refuse_a_subnormal_they_would_round_and_auto_goes_to_cpu(musa):  # noqa: F811
    """defect (polygemm/backend.py): musa (float32 scalars) took alpha=1e-40 and would scale by its float32 rounding;
    now it refuses it saying why, device='auto' passes over it to the cpu, and a subnormal float32 holds exactly
    still runs on musa."""
    a = np.ones((4, 3), np.float16)
    b = np.ones((3, 5), np.float16)
    with pytest.raises(UnsupportedProblemError, match=r"alpha=1e-40 does not fit the float32 scalars of backend 'musa'.*"
                                                      r"below float32's normal range.*device='cpu'"):
        pg.gemm(a, b, alpha=1e-40, device="musa")
    with pytest.raises(UnsupportedProblemError, match=r"beta=1e-40 does not fit"):
        pg.gemm(a, b, np.ones((4, 5), np.float16), beta=1e-40, device="musa")
    got = pg.gemm(a, b, alpha=1e-40, out_dtype=np.float32)
    plan = pg.last_plan()
    assert plan is not None and plan.backend == "cpu"
    assert any(n == "musa" and "alpha=1e-40 does not fit the float32 scalars" in w for n, w in plan.candidates)
    assert_within(got, a, b, None, 1e-40, out_dtype=np.float32)
    got = pg.gemm(a, b, alpha=2.0 ** -140, device="musa")  # exact in float32: the kernel's own scalar
    assert pg.last_plan().backend == "musa" and got.dtype == np.float16 and not got.any()  # 3 * 2**-140 is 0 in float16


# -- beta == 0 never reads c; alpha == 0 -----------------------------------------------------------------------------


ZEROS = [0.0, -0.0, 0, np.float32(0), np.float16(-0.0), fractions.Fraction(0), np.array(0.0)]


@pytest.mark.parametrize("zero", ZEROS, ids=lambda z: f"{type(z).__name__}({z})")
@pytest.mark.parametrize("where", ["new", "out", "out=c", "out=c[...]"])
@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
def test_beta_zero_never_reads_a_nan_or_inf_c_on_any_path(zero, where, variant, rng):
    """Right: README says c is not read when beta == 0 (BLAS): a c of NaN and Inf leaves no trace, however zero is
    spelt, on the first call and on the cached one, into a new result, a separate out, c itself or a view of c.
    (The last, out=c[...], never came from the cache before the _overlap_free fix below: its final assert failed.)"""
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    want = a @ b
    for _ in range(2):  # planned, then from the cache
        c = np.full((4, 5), np.nan, np.float32)
        c[::2] = np.inf
        out = {"new": None, "out": np.full((4, 5), -np.inf, np.float32), "out=c": c, "out=c[...]": c[...]}[where]
        got = pg.gemm(a, b, c, beta=zero, out=out, device="cpu", variant=variant)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        if where.startswith("out=c"):
            assert np.array_equal(c, got)  # written in place
    assert pg.last_plan().cached


@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
def test_beta_zero_with_k_zero_is_zeros_even_beside_a_nan_c(variant):
    """Right: K = 0 gives beta * c; beta == 0 gives zeros without reading a NaN c (numpy.matmul gives the zeros)."""
    a, b = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    c = np.full((3, 4), np.nan, np.float32)
    for out in (None, c):
        got = pg.gemm(a, b, c, alpha=5.0, beta=0.0, out=out, device="cpu", variant=variant)
        assert np.array_equal(got, np.matmul(a, b)) and not np.signbit(got).any()


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
def test_alpha_zero_with_finite_operands_gives_beta_c_to_the_bit(dtype, variant, rng):
    """Right: alpha = 0 with finite a and b is beta * c rounded once: c itself for beta = 1, 2c exactly for beta = 2."""
    a = rng.standard_normal((5, 6)).astype(dtype)
    b = rng.standard_normal((6, 7)).astype(dtype)
    c = rng.standard_normal((5, 7)).astype(dtype)
    assert np.array_equal(pg.gemm(a, b, c, alpha=0.0, beta=1.0, device="cpu", variant=variant), c)
    assert np.array_equal(pg.gemm(a, b, c, alpha=0, beta=2, device="cpu", variant=variant), (c.astype(np.float64) * 2).astype(dtype))


# -- the plan cache: in place through views, and explain beside a fresh plan -------------------------------------------


def test_an_in_place_update_through_views_of_one_block_reuses_its_plan(rng):
    """defect (polygemm/api.py, _overlap_free): a blocked loop's ``gemm(a, b, C[i:j], beta=1, out=C[i:j])`` passes two
    view objects of one memory. The key said "in place" and found the plan, but the host overlap check accepted c
    only as the very object out, so every such call was planned anew (last_plan().cached False) while
    plan_cache_info() counted a hit. Now the view of c's own memory binds to the cached plan; one that only overlaps
    c is still refused, and one at c's pointer with other strides is not bound to it."""
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    C = rng.standard_normal((12, 6)).astype(np.float32)
    want = C.astype(np.float64)
    pg.clear_plan_cache()
    for i in range(0, 12, 4):
        for _ in range(2):
            res = pg.gemm(a, b, C[i:i + 4], beta=1.0, out=C[i:i + 4], device="cpu")
            want[i:i + 4] += a.astype(np.float64) @ b
            plan = pg.last_plan()
            assert plan is not None and plan.problem.in_place and "in place: out is c" in str(plan)
            assert plan.cached == (i > 0 or _ > 0)
            assert np.shares_memory(res, C)
    info = pg.plan_cache_info()
    assert (info["hits"], info["misses"], info["size"]) == (5, 1, 1)
    np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match="out partly overlaps c"):
        pg.gemm(a, b, C[0:4], beta=1.0, out=C[1:5], device="cpu")
    sq = rng.standard_normal((6, 6)).astype(np.float32)
    a6 = rng.standard_normal((6, 5)).astype(np.float32)
    with pytest.raises(ArgumentError, match="out partly overlaps c"):
        pg.gemm(a6, b, sq, beta=1.0, out=sq.T, device="cpu")  # same pointer, the other memory order: not in place
    assert pg.plan_cache_info()["hits"] == 5


def _layout(x, how):
    if how == "F":
        return np.asfortranarray(x)
    if how == "T":
        return np.ascontiguousarray(x.T).T
    if how == "step":
        big = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
        big[:, ::2] = x
        return big[:, ::2]
    if how == "neg":
        return np.ascontiguousarray(x[::-1])[::-1]
    if how == "ro":
        y = x.copy()
        y.flags.writeable = False
        return y
    return np.ascontiguousarray(x)


def test_explain_from_the_cache_says_what_a_fresh_plan_says_and_results_stay_right(rng):
    """Right: over dtypes, operand layouts (C, Fortran, transposed, stepped, reversed, read-only), beta = 0 beside a
    NaN c, beta != 0, out separate, in place as c and as a view of c, out_dtype and alpha, called in shuffled order so
    that each finds the cache holding the others: explain and last_plan describe each call as a fresh plan does
    (but for the cache line), and each result is within the bound."""
    m, n, k = 5, 7, 6
    configs = []
    for dt in (np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)):
        for la, lb in (("C", "C"), ("F", "T"), ("step", "neg"), ("ro", "F")):
            for cmode in ("none", "beta0-nan", "beta", "out", "in-place", "in-place-view"):
                for wide in ((False, True) if dt in HALVES else (False,)):
                    configs.append((dt, la, lb, cmode, wide, 2.5 if cmode == "beta" else 1.0))

    def make(cfg):
        dt, la, lb, cmode, wide, alpha = cfg
        a = _layout(rng.standard_normal((m, k)).astype(dt), la)
        b = _layout(rng.standard_normal((k, n)).astype(dt), lb)
        rdt = np.dtype(np.float32) if wide else dt
        kw = {"alpha": alpha, "device": "cpu", "out_dtype": np.float32 if wide else None}
        c = None if cmode in ("none", "out") else rng.standard_normal((m, n)).astype(rdt)
        if cmode == "beta0-nan":
            c[...] = np.nan
        kw["beta"] = 0.0 if cmode in ("none", "out", "beta0-nan") else -0.5
        kw["out"] = {"out": np.full((m, n), np.nan, rdt), "in-place": c,
                     "in-place-view": None if c is None else c[...]}.get(cmode)
        return a, b, c, kw

    def text(plan):
        return "\n".join(line for line in str(plan).splitlines() if not line.startswith("  cache"))

    fresh = {}
    for i, cfg in enumerate(configs):
        pg.clear_plan_cache()
        a, b, c, kw = make(cfg)
        fresh[i] = text(pg.explain(a, b, c, **kw))
    pg.clear_plan_cache()
    order = list(range(len(configs))) * 2
    random.Random(20).shuffle(order)
    for i in order:
        a, b, c, kw = make(configs[i])
        c0 = None if c is None else c.copy()
        assert text(pg.explain(a, b, c, **kw)) == fresh[i], configs[i]
        got = pg.gemm(a, b, c, **kw)
        assert text(pg.last_plan()) == fresh[i], configs[i]
        assert_within(got, a, b, c0, kw["alpha"], kw["beta"], out_dtype=kw["out_dtype"])
    assert pg.plan_cache_info()["hits"] > len(configs)


# -- the command line at the machine's limits ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["call", "kernel"])
def test_bench_leaves_out_a_shape_too_large_for_memory_and_keeps_the_others(tmp_path, capsys, mode):
    """defect (polygemm/apps/bench.py): a shape whose operands cannot be allocated ended ``polygemm bench`` in a NumPy
    _ArrayMemoryError traceback (exit 1), and the shapes timed before it were lost (no --json written), where
    ``polygemm gemm --shape`` says the size in one line. Now the shape is left out with that line, the others are
    timed and written, and the run ends in an error naming it (exit 2)."""
    path = tmp_path / "r.json"
    argv = ["bench", "--device", "cpu", "--mode", mode, "--shapes", "8x8x8", TOO_LARGE, "9x7x5", "--repeats", "1",
            "--json", str(path), "--no-progress"] + (["--variants", "reference"] if mode == "kernel" else [])
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "MemoryError" not in err
    assert f"{TOO_LARGE} not timed: operands and a result of that size need about" in out
    assert err.strip().splitlines()[-1].startswith(f"polygemm: error: 1 shape not timed, too large for this machine: {TOO_LARGE}")
    assert "pick smaller --shapes (or --max-dim N)" in err
    records = json.loads(path.read_text())["records"]
    assert [(r["m"], r["n"], r["k"]) for r in records] == [(8, 8, 8), (9, 7, 5)]
    assert f"wrote {path}" in out


def test_bench_functions_say_which_shape_did_not_fit():
    """defect (same fix): bench.run_call_bench and run_bench, called from a script, raised NumPy's MemoryError naming
    an array shape; now a MemoryError naming the product and the memory it needs."""
    for fn, kw in ((bench.run_call_bench, {}), (bench.run_bench, {"variants": ["reference"]})):
        with pytest.raises(MemoryError, match=rf"^{TOO_LARGE}: operands and a result of that size need about [\d.]+ GiB"):
            fn("cpu", "float32", shapes=[tuple(int(x) for x in TOO_LARGE.split("x"))], repeats=1, **kw)


def test_bench_too_large_from_a_shell_has_no_traceback(tmp_path):
    """defect (same fix), as a first-time user runs it: one line on stderr, exit 2."""
    r = subprocess.run([sys.executable, "-m", "polygemm", "bench", "--device", "cpu", "--shapes", TOO_LARGE, "--repeats", "1"],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1 and "too large for this machine" in r.stderr


@pytest.mark.parametrize("argv, option", [
    (["info", "--json", "{f}/x.json"], "--json"),
    (["variants", "--device", "cpu", "--json", "{f}/x.json"], "--json"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--markdown", "{f}/sub/x.md"], "--markdown"),
    (["matrix", "--backends", "cpu", "--quick", "--json", "{f}/x.json"], "--json"),
    (["plot", "{f}", "-o", "{f}/x.png"], "--output"),
])
def test_an_output_path_under_a_file_says_that_it_is_a_file(tmp_path, capsys, argv, option):
    """defect (polygemm/apps/cli.py, unwritable): ``--json results.json/x.json`` (a file where a folder was meant) said
    "the folder .../results.json does not exist", though it does; now it says that path is a file."""
    f = tmp_path / "results.json"
    f.write_text(json.dumps({"records": []}))
    assert main([x.replace("{f}", str(f)) for x in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"polygemm: error: {option} {f}/") and err.endswith(f"{f} is a file, not a folder; name a file in a folder")
    assert "does not exist" not in err
    assert json.loads(f.read_text()) == {"records": []}  # untouched
    missing = tmp_path / "nowhere" / "x.json"
    assert main(["info", "--json", str(missing)]) == 2  # a folder that is missing still says so
    assert capsys.readouterr().err.strip().endswith(f"the folder {missing.parent} does not exist")


def test_bench_out_of_memory_while_timing_keeps_the_records_timed_before(tmp_path, capsys, monkeypatch):
    """defect (same fix): memory that runs out past the operands (a call's work arrays) ends the run in one line,
    exit 2, with the records timed before it written (it had been a traceback and no file)."""
    real = bench.run_call_bench

    def runs_out(device, dtype, shapes, **kw):  # 9x7x5 runs out of memory after 8x8x8 was timed
        records = real(device, dtype, [s for s in shapes if s != (9, 7, 5)], **kw)
        if (9, 7, 5) in shapes:
            raise MemoryError("Unable to allocate 3.6 TiB")
        return records

    monkeypatch.setattr(bench, "run_call_bench", runs_out)
    path = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "9x7x5", "--repeats", "1", "--json", str(path),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("polygemm: error: out of host memory while timing (Unable to allocate 3.6 TiB)")
    assert err.endswith(f"the 1 record(s) timed before it written to {path}") and "Traceback" not in err
    assert [(r["m"], r["n"], r["k"]) for r in json.loads(path.read_text())["records"]] == [(8, 8, 8)]
