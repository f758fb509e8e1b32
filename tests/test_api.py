"""The API rules of polygemm.gemm / explain, on the cpu reference backend."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import assert_close, check_result

DTYPES = [np.float16, np.float32, np.float64]


def rand(rng, shape, dtype=np.float32, order="C"):
    return np.asarray(rng.standard_normal(shape).astype(dtype), order=order)


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
    # float64, which neither GPU backend computes: the CPU's BLAS on every machine
    a, b = rand(rng, (3, 4), np.float64), rand(rng, (4, 2), np.float64)
    plan = pg.explain(a, b, device="auto")
    assert plan.backend == "cpu" and plan.variant == "blas"  # the fast default; reference on request
    # the plan's candidates are the backends passed over, then the chosen backend's own variants
    # passed over (cuda's ranked rungs on a machine with a GPU): the backends are checked here
    passed = {name: why for name, why in plan.candidates if name in order}
    assert "cuda" in passed and "musa" in passed  # unavailable, or no float64, each with its reason
    for name in ("cuda", "musa"):
        info = infos[order.index(name)]
        why = passed[name]
        assert why.startswith("dtype float64 not supported") if info.available else why == f"unavailable: {info.reason}"
    text = str(plan)
    assert "backend : cpu" in text and "passed over cuda" in text and "passed over musa" in text
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
