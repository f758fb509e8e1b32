"""The result dtype of each pair of operand dtypes, and ``out_dtype``."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.catalog import auto_candidates
from polygemm.testing import case_groups, check_result

from tests.helpers import REPO_ROOT


COL32 = "hgemm_v2_wgmma_tma_64x32_col"


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


ROOT = REPO_ROOT


@pytest.mark.parametrize("count", [1, 2])
def test_auto_offers_the_col_row_only_for_a_thin_kernel_n(count):
    """The col row swaps a row-major result: its own N is the result's M. 8192x8x8192 puts the
    long side on its 32-wide tile (0.41x of cuBLAS): never offered, split or batched; 8x8192x8192
    and 32x8192x8192 are, 33x8192x8192 is not."""
    for m, n, ok in [(8192, 8, False), (8, 8192, True), (32, 8192, True), (33, 8192, False)]:
        offered = [c.label for c in auto_candidates(m, n, 8192, "float16", count=count) if c.variant == COL32]
        assert bool(offered) == ok, (m, n, count, offered)
    # a column-major result: no swap, its own N is the result's N
    assert not [c for c in auto_candidates(8, 8192, 8192, "float16", result_layout="col") if c.variant == COL32]


def test_a_result_of_the_wrong_shape_or_dtype_fails_saying_so(rng):
    # a float16 result of float32 inputs fails saying what is wrong, not only "15 of 15 elements outside the bound",
    # and a float64 one fails too (gemm promises the inputs' dtype)
    a, b = _rand(rng, np.float32, 5, 4), _rand(rng, np.float32, 4, 3)
    good = pg.gemm(a, b)
    for bad, said in ((good.astype(np.float16), "dtype float16, expected float32"),
                      (good.astype(np.float64), "dtype float64, expected float32"),
                      (good.T, "shape (3, 5), expected (5, 3)")):
        res = check_result(bad, a, b)
        assert not res.ok and res.violations == -1 and res.worst_ratio == float("inf") and said in res.message
    assert check_result(good.astype(">f4"), a, b).ok  # byte order is no dtype difference
    assert check_result(good, a.astype(">f4"), b.astype(">f4")).ok  # nor of the inputs
    assert check_result(good.tolist(), a, b).ok  # a list has no dtype of its own: its values are compared
    h = pg.gemm(a.astype(np.float16), b.astype(np.float16), out_dtype=np.float32)
    assert "expected float16" in check_result(h, a.astype(np.float16), b.astype(np.float16)).message
    assert check_result(h, a.astype(np.float16), b.astype(np.float16), out_dtype="float32").ok


@pytest.mark.parametrize("doc", ["docs/plugins.md", "examples/polygemm-numpy-blas/README.md"])
def test_the_suite_counts_the_docs_give_for_the_example_are_the_suites(doc):
    # the counts the docs give follow the suite's size (34 cases per dtype made 99 passed; it grows with every case)
    text = (ROOT / doc).read_text()
    found = re.search(r"(\d+) (?:cases )?pass(?:ed)? and (\d+) (?:are )?skipped", text)
    assert found, doc
    per_dtype = sum(len(cases) for cases in case_groups().values()) - 1  # the example takes no batches: no batch case
    assert (int(found.group(1)), int(found.group(2))) == (3 * (per_dtype - 1), 3), found.group(0)


def test_the_signatures_keep_their_keywords_and_defaults():
    """The documented keywords are keyword-only with their defaults; the catch-alls come only after them, so a correct
    call binds to them exactly."""
    for func in (pg.gemm, pg.explain):
        params = inspect.signature(func).parameters
        assert list(params)[:3] == ["a", "b", "c"] and params["c"].default is None
        kw = {n: p.default for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert kw == {"alpha": 1.0, "beta": None, "device": None, "variant": "auto", "out": None, "out_dtype": None,
                      "precision": None, "verify": None}
    kw = {n: p.default for n, p in inspect.signature(pg.matmul).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert kw == {"out": None, "out_dtype": None, "precision": None, "device": None, "verify": None}


@pytest.mark.parametrize("variant", ["blas", "reference"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_underflow_is_quiet_under_a_users_seterr(variant, dtype):
    # under np.errstate(all="raise") (a user's np.seterr) the reference ignores underflow as it ignores overflow and
    # invalid, not FloatingPointError "underflow encountered in cast" (or "in matmul")
    from polygemm.problem import dtype_named, finfo

    dt = dtype_named(dtype)
    tiny = np.full((3, 3), finfo(dt).tiny, dt)
    with np.errstate(all="raise"):
        got = pg.gemm(tiny, tiny, variant=variant)
        scaled = pg.gemm(np.ones((3, 3), dt), np.ones((3, 3), dt), alpha=1e-300, variant=variant)
    assert got.dtype == dt and np.all(got.astype(np.float64) >= 0)
    assert np.all(scaled.astype(np.float64) == (3e-300 if dtype == "float64" else 0.0))


@pytest.mark.parametrize("a, b", [
    ([], []), ((), ()), (np.ones((3, 0)), []), ([[]], []), (np.ones(0), []), (np.ones((2, 4, 0)), ()),
], ids=["list@list", "tuple@tuple", "matrix@list", "nested@list", "array@list", "stack@tuple"])
def test_matmul_of_an_empty_list_vector_is_numpys_zero(a, b):
    # an empty list as b is a 0×1 column, as numpy.matmul reads it
    want = np.matmul(a, b)
    got = pg.matmul(a, b)
    assert type(got) is type(want) and got.shape == np.shape(want) and got.dtype == np.float64  # a NumPy scalar for vector @ vector
    assert np.array_equal(got, want)  # K = 0: zeros, exactly

