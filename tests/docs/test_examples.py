"""What README.md, docs/ and examples/ show, run as written."""

from __future__ import annotations

import fractions
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polygemm
import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import ArgumentTypeError, ShapeError
from polygemm.testing import reference_for

from tests.helpers import assert_matmul_within, CPUArrayAPI, DLPackOnly, poisoned, REPO_ROOT


ROOT = REPO_ROOT


def _cuda_available() -> bool:
    return any(i.name == "cuda" and i.available for i in polygemm.backends())


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


SENTINEL = -12345.0


@pytest.fixture
def rng():
    return np.random.default_rng(19)


@pytest.fixture
def rng_2():
    return np.random.default_rng(20)


ZEROS = [0.0, -0.0, 0, np.float32(0), np.float16(-0.0), fractions.Fraction(0), np.array(0.0)]


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0):
    """``got`` (2-D) element-wise within the bound of the float64 reference, shape and dtype too."""
    res = reference_for(np.asarray(a), np.asarray(b), c, alpha, beta).compare(np.asarray(got))
    assert res.ok, res.message


SHAPES = [(4,), (0,), (1,), (3, 4), (4, 5), (1, 4), (4, 1), (2, 3, 4), (1, 3, 4), (0, 3, 4), (2, 4, 5), (1, 4, 5),
          (0, 4, 5), (2, 1, 3, 4), (3, 1, 4, 5), (4, 0), (0, 5), (3, 0), (2, 0, 4), (2, 4, 0), (1, 0, 4)]


def test_readme_first_snippet_runs_as_written(capsys) -> None:
    """The README's opening example, verbatim: auto, explain, the reference, matmul; auto's result within the
    reference's rounding, and explain naming the backend auto runs here."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    snippet: dict[str, object] = {}
    exec(compile(block.group(1), "README.md", "exec"), snippet)
    out = capsys.readouterr().out
    assert "polygemm plan:" in out and "backend :" in out
    auto = "cuda" if {i.name: i for i in pg.backends()}["cuda"].available else "cpu"
    assert f"backend : {auto}" in out and (auto == "cuda" or "passed over cuda" in out), out
    a, b, c = (np.asarray(snippet[name]) for name in "abc")
    assert c.shape == (1000, 2000) and c.dtype == np.float32
    rows = a[:: 97].astype(np.float64)  # eleven rows of the product, in float64
    np.testing.assert_allclose(c[:: 97], rows @ b.astype(np.float64), rtol=1e-4)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_tests_sh_without_cuda_says_what_is_missing(tmp_path: Path) -> None:
    """README: 'GPU test run: tools/gpu_tests.sh'. Where cuda is unavailable it says in one line that the script needs
    the cuda backend and why it is unavailable, exit 2: no BackendUnavailableError traceback from the precompile
    step, and no pytest usage error for --timeout (pytest-timeout is not in the [test] extra)."""
    if _cuda_available():
        pytest.skip("cuda is available here: the script would run the GPU tests")
    proc = subprocess.run(["bash", "tools/gpu_tests.sh", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT),  # the script runs python3: this interpreter
                               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    both = proc.stdout + proc.stderr
    assert proc.returncode == 2, both
    assert "needs the cuda backend" in proc.stderr
    assert "Traceback" not in both and "unrecognized arguments" not in both


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_musa_flavor_without_toolkit_names_the_toolkit(tmp_path: Path) -> None:
    """docs/musa.md: 'cmake -S . -B build/musa -DPOLYGEMM_MUSA_FLAVOR=musa' on a machine without the MUSA toolkit
    names the toolkit, where it looked, -DPOLYGEMM_MUSA_ROOT and the host flavor, not only that no FindMUSA.cmake /
    MUSAConfig.cmake was found."""
    if Path("/usr/local/musa/cmake/FindMUSA.cmake").exists():
        pytest.skip("the MUSA toolkit is installed here")
    proc = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tmp_path / "b"), "-DPOLYGEMM_MUSA_FLAVOR=musa"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert "needs the MUSA toolkit" in err
    assert "POLYGEMM_MUSA_ROOT" in err and "-DPOLYGEMM_MUSA_FLAVOR=host" in err


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("target", ["ncu", "ceiling"])
def test_gpu_results_sh_without_cuda_writes_nothing(tmp_path: Path, target: str) -> None:
    """docs/benchmarking.md: 'tools/gpu_results.sh TARGET [OUT]'. Where cuda is unavailable every
    target refuses before it writes: exit 2, naming the reason, no file written (an all-skip
    matrix or an empty profile would look like a result). Run on a copy of the script, so a
    regression cannot clobber this checkout."""
    if _cuda_available():
        pytest.skip("cuda is available here: the script would measure")
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "gpu_results.sh", tmp_path / "tools")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "tools/gpu_results.sh", target], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs the cuda backend" in proc.stderr and "nothing was written" in proc.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != tmp_path / "tools" / "gpu_results.sh"]
    assert written == []


def test_a_c_that_only_broadcasts_is_refused_saying_how_to_pass_it(rng):
    """README: c has the result's shape. A c that broadcasts to it ((M, N) for a batch, as
    a @ b + c would take it) is refused, told to pass it broadcast; one that does not is not told so."""
    a, b = rand(rng, (3, 5, 4)), rand(rng, (3, 4, 6))
    for c in (rand(rng, (5, 6)), rand(rng, (1, 5, 6))):
        with pytest.raises(ShapeError, match=re.escape(r"pass it broadcast, e.g. np.broadcast_to(c, (3, 5, 6))")):
            pg.gemm(a, b, c, beta=1.0, device="cpu")
        np.testing.assert_array_equal(pg.gemm(a, b, np.broadcast_to(c, (3, 5, 6)), beta=1.0, device="cpu"),
                                      pg.gemm(a, b, np.broadcast_to(c, (3, 5, 6)).copy(), beta=1.0, device="cpu"))
    with pytest.raises(ShapeError, match=r"got \(2, 5, 6\)$"):
        pg.gemm(a, b, rand(rng, (2, 5, 6)), beta=1.0, device="cpu")


@pytest.mark.parametrize("variant", ["auto", "blas", "reference", "numpy"])
def test_alpha_zero_still_propagates_nan_and_inf_as_numpy_does(variant):
    """alpha = 0 does not skip the product (NaN and Inf in a or b give NaN, as 0 * (a @ b) in NumPy); beta = 0
    still does not read c (README: c is not read when beta == 0)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 4), np.float32)
    a[0, 1], b[2, 3] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        want = np.float32(0) * np.matmul(a, b)
    c = np.full((2, 4), np.nan, np.float32)
    got = pg.gemm(a, b, c, alpha=0.0, beta=0.0, device="cpu", variant=variant)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).any()
    assert (got[~np.isnan(want)] == 0).all()
    c = np.ones((2, 4), np.float32)
    got = pg.gemm(a, b, c, alpha=0, beta=2, device="cpu", variant=variant)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and (got[~np.isnan(want)] == 2.0).all()


@pytest.mark.parametrize("sa, sb", [((2, 3, 4), (4,)), ((4,), (2, 4, 5)), ((1, 4), (4,)), ((0, 4), (4,)),
                                    ((2, 0, 4), (4,)), ((4,), (4, 0)), ((4,), (4,))], ids=str)
def test_vectors_through_matmul_as_numpy_matmul(rng, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    want = np.matmul(a, b)
    got = pg.matmul(a, b, device="cpu")
    # vector @ vector: a NumPy scalar of the same value and dtype, as NumPy gives
    assert type(got) is type(want) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    out = np.full(want.shape, SENTINEL)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("zero", ZEROS, ids=lambda z: f"{type(z).__name__}({z})")
@pytest.mark.parametrize("where", ["new", "out", "out=c", "out=c[...]"])
@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
def test_beta_zero_never_reads_a_nan_or_inf_c_on_any_path(zero, where, variant, rng_2):
    """README says c is not read when beta == 0 (BLAS): a c of NaN and Inf leaves no trace, however zero is spelt, on
    the first call and on the cached one, into a new result, a separate out, c itself or a view of c (out=c[...],
    which the cache binds through _overlap_free)."""
    a = rng_2.standard_normal((4, 3)).astype(np.float32)
    b = rng_2.standard_normal((3, 5)).astype(np.float32)
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


@pytest.mark.parametrize("sa, sb", list(itertools.product(SHAPES, SHAPES)), ids=lambda s: "x".join(map(str, s)) or "0d")
def test_matmul_follows_numpy_on_every_shape_rule(rng, sa, sb):
    """For 441 pairs of shapes polygemm.matmul gives numpy.matmul's result shape, dtype and kind (vector @ vector a
    0-D array where NumPy gives a scalar, as the README says), values within the reference's bound, the same
    ``out`` written and returned; and where NumPy raises a ValueError (K differs, batches that do not broadcast, 0
    beside 2), polygemm raises one too (a ShapeError), leaving ``out`` as it was."""
    a, b = f32(rng, *sa), f32(rng, *sb)
    try:
        want = np.matmul(a, b)
    except ValueError:
        want = None
    if want is None:
        with pytest.raises(ValueError) as info:
            pg.matmul(a, b, device="cpu")
        assert isinstance(info.value, pg.ShapeError)
        return
    got = pg.matmul(a, b, device="cpu")
    assert type(got) is type(want) and got.shape == want.shape and got.dtype == want.dtype == np.float32
    assert_matmul_within(got, a, b)
    out = np.full(want.shape, np.nan, np.float32)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    assert_matmul_within(out, a, b)


@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize("value", [np.array([0.5]), np.array([[0.5]], np.float32), np.linalg.norm(np.ones((1, 4)), axis=1)])
def test_one_element_array_scalar_is_told_item(rng, name, value):
    # alpha=np.array([0.5]) (a norm over an axis, x.sum(keepdims=True)) is told the way on, and the accepted kinds
    # named include the 0-D array the README lists
    a = rng.standard_normal((3, 4)).astype(np.float32)
    c = np.full((3, 3), 1.0, np.float32)
    out = np.full((3, 3), 9.0, np.float32)
    with pytest.raises(ArgumentTypeError, match=re.escape(f"or a 0-D array of one); got {value!r} (ndarray); a one-element "
                                                          f"array of {value.ndim} dimension")) as info:
        pg.gemm(a, a.T, c, device="cpu", out=out, **{name: value})
    assert str(info.value).endswith(f"is no scalar: pass {name}.item()")
    assert (out == 9.0).all() and (c == 1.0).all()
    # what it names is taken, as is the 0-D array
    for ok in (value.item(), value.reshape(())):
        got = pg.gemm(a, a.T, c, device="cpu", **{"alpha": 1.0, "beta": 1.0, name: ok})
        np.testing.assert_allclose(got, (float(value.item()) if name == "alpha" else 1.0) * (a @ a.T)
                                   + (float(value.item()) if name == "beta" else 1.0) * c, rtol=1e-5, atol=1e-5)


def test_readme_info_json_jq_line_finds_cpu(capsys):
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)  # the README pipes it into jq: nothing but JSON on stdout
    assert "cpu" in [b["name"] for b in data["backends"] if b["available"]]


@pytest.mark.parametrize("make", [CPUArrayAPI, DLPackOnly], ids=["array-api", "dlpack-only"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
def test_a_cpu_0d_array_of_another_library_is_its_value(ops, make, dtype):
    # README says alpha and beta may be 0-D arrays: jnp.float32(2) (a 0-D JAX array), torch.tensor(2.0) or an
    # array-API array on the CPU is taken as its value
    a, b = ops
    c = poisoned()
    alpha, beta = make(np.array(2, dtype)), make(np.array(3, dtype))
    got = pg.gemm(a, b, c, alpha=alpha, beta=beta)
    want = pg.gemm(a, b, c, alpha=2.0, beta=3.0)
    np.testing.assert_array_equal(got, want)
    assert (pg.last_plan().problem.alpha, pg.last_plan().problem.beta) == (2.0, 3.0)
    assert pg.explain(a, b, c, alpha=alpha, beta=beta).problem.alpha == 2.0
