"""A demanding user's edges, fourth round (a): matmul and DLPack-only arrays, the low-level
``Backend.execute`` path, messages for other libraries' arrays. Each test failed before the
fix it names."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, DTypeError, ShapeError
from polygemm.problem import Call, normalize
from conftest import DLPackOnly


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def test_matmul_takes_dlpack_only_arrays_as_gemm_does(rng):
    # matmul read a DLPack-only matrix as a scalar: "a is a scalar (0-D DLPackOnly) ...",
    # while gemm took the same object
    a, b = _operands(rng)
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a), DLPackOnly(b)), a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a), DLPackOnly(b[:, 0])), a @ b[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a[0]), b), a[0] @ b, rtol=1e-5, atol=1e-5)
    got = pg.matmul(DLPackOnly(a[0]), DLPackOnly(a[0]))
    assert np.shape(got) == () and np.isclose(got, a[0] @ a[0], rtol=1e-5)
    stack = np.stack([b, 2 * b])
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a[0]), DLPackOnly(stack)), np.matmul(a[0], stack), rtol=1e-5, atol=1e-5)


def test_matmul_writes_a_vector_result_into_a_dlpack_only_out(rng):
    # a vector result into a DLPack-only out was refused: "out must be a NumPy array ..."
    a, b = _operands(rng)
    target = np.full(4, np.nan, np.float32)
    out = DLPackOnly(target)
    assert pg.matmul(a, b[:, 0], out=out) is out
    np.testing.assert_allclose(target, a @ b[:, 0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match=r"out must have the result's shape \(4,\); got \(3,\)"):
        pg.matmul(a, b[:, 0], out=DLPackOnly(np.zeros(3, np.float32)))


def test_matmul_of_none_says_none_not_scalar(rng):
    # matmul(None, b) said "a is a scalar (0-D NoneType)"; gemm says what it takes, and got None
    a, b = _operands(rng)
    with pytest.raises(ArgumentError, match="a must be a vector, a matrix .*got None"):
        pg.matmul(None, b)
    with pytest.raises(ArgumentError, match="b must be a vector, a matrix .*got None"):
        pg.matmul(a[0], None)


def _call(a, b, c=None, out=None, alpha=1.0, beta=0.0):
    return Call(a, b, c, out, 0, 0, 0, 0, alpha, beta, None)


class _Plugin(pg.Backend):
    """A plugin as docs/plugins.md describes one: plan and run, the default execute."""

    name = "r4a_plugin"

    def probe(self):
        return pg.Availability(True)

    def variants(self):
        return (pg.Variant("ref", ("float32",), "numpy"),)

    def plan(self, problem, variant="auto"):
        return pg.Plan(self.name, "ref", "test", problem)

    def run(self, plan):
        p = plan.problem
        return np.matmul(p.a.array, p.b.array) * p.alpha


@pytest.mark.parametrize("backend", [pg.get_backend("cpu"), _Plugin()], ids=["cpu", "plugin"])
def test_execute_refuses_operands_that_are_not_those_of_the_plan(rng, backend):
    # Backend.execute(plan, Call(...)) computed whatever it was handed: a K of 4 under a plan
    # for K = 5 gave a 4x3 result, float64 operands under a float32 plan, a plan with c and
    # beta = 1 run without c dropped the term; all silently
    a, b = _operands(rng)
    plan = backend.plan(normalize(a, b))
    np.testing.assert_allclose(backend.execute(plan, _call(a, b)), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match=r"a .*\(4, 4\).*plan.*\(4, 5\)"):
        backend.execute(plan, _call(a[:, :4], b[:4]))
    with pytest.raises(ArgumentError, match="a .*float64.*plan.*float32"):
        backend.execute(plan, _call(a.astype(np.float64), b.astype(np.float64)))
    with pytest.raises(ArgumentError, match="b .*plan"):
        backend.execute(plan, _call(a, np.asfortranarray(b)[:, :2]))
    with pytest.raises(ArgumentError, match="b has strides .*plan"):  # the same shape, column-major
        backend.execute(plan, _call(a, np.asfortranarray(b)))
    with pytest.raises(ArgumentError, match="passes c, but its plan has no c"):
        backend.execute(plan, _call(a, b, c=a @ b, beta=1.0))
    with pytest.raises(ArgumentError, match="alpha"):
        backend.execute(backend.plan(normalize(a, b, out=np.empty((4, 3), np.float32))),
                        _call(a, b, out=np.empty((4, 3), np.float32), alpha=2.0))


def test_execute_refuses_a_call_missing_what_the_plan_has(rng):
    a, b = _operands(rng)
    cpu = pg.get_backend("cpu")
    c = rng.standard_normal((4, 3)).astype(np.float32)
    plan = cpu.plan(normalize(a, b, c, beta=1.0))
    with pytest.raises(ArgumentError, match="lacks c, but its plan has c"):
        cpu.execute(plan, _call(a, b, beta=1.0))
    out = np.full((4, 3), 7.0, np.float32)
    plan = cpu.plan(normalize(a, b, out=out))
    with pytest.raises(ArgumentError, match="out .*plan"):
        cpu.execute(plan, _call(a, b, out=np.full((4, 4), 7.0, np.float32)))
    with pytest.raises(ArgumentError, match="out .*plan"):
        cpu.execute(plan, _call(a, b, out=np.full((4, 3), 7.0, np.float32)[:, ::-1]))


@pytest.mark.parametrize("dtype", [np.int32, np.complex64, np.bool_])
def test_a_dlpack_array_of_another_dtype_is_told_a_conversion_it_has(rng, dtype):
    # the DTypeError said "Convert it, e.g. a.astype(np.float32)": a DLPack-only array (and a
    # torch tensor, read the same way on the CPU) has no astype
    a, b = _operands(rng)
    with pytest.raises(DTypeError, match=r"np\.from_dlpack\(a\)\.astype\(np\.float32\)") as info:
        pg.gemm(DLPackOnly(a.astype(dtype)), b)
    assert "a.astype" not in str(info.value)
    with pytest.raises(DTypeError, match=r"np\.from_dlpack\(b\)"):
        pg.matmul(a, DLPackOnly(b[:, 0].astype(dtype)))


def test_a_torch_tensor_of_another_dtype_is_told_to_use_to():
    torch = pytest.importorskip("torch")
    with pytest.raises(DTypeError, match=r"a\.to\(torch\.float32\)"):
        pg.gemm(torch.ones(2, 2, dtype=torch.int32), torch.ones(2, 2))


class _FakeDeviceArray:
    """Device memory as a CUDA array interface (nothing reads it: overlap checks use addresses)."""

    def __init__(self, ptr, shape, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "strides": strides, "typestr": "<f4", "data": (ptr, False), "version": 3}


def test_out_overlapping_a_reversed_device_batch_is_refused():
    # a device a with a negative batch stride (x[::-1]) addresses memory below its pointer; the
    # overlap check measured it as a negative span and let an out over its matrices through
    # (to the backend: here none takes cuda data, so the error was BackendUnavailableError)
    from polygemm import api

    base = 1 << 20
    a = _FakeDeviceArray(base + 128, (3, 4, 4), (-64, 16, 4))  # matrices at base + 128, + 64, + 0
    b = _FakeDeviceArray(base + 4096, (4, 4))
    clash = _FakeDeviceArray(base - 64, (3, 4, 4))  # [base - 64, base + 128): a's last two matrices
    with pytest.raises(ArgumentError, match="out overlaps a"):
        pg.gemm(a, b, out=clash, device="cuda")
    clear = _FakeDeviceArray(base + 8192, (3, 4, 4))
    problem = normalize(a, b, out=clear)
    entry = api.plan_cache._entry_for(pg.get_backend("cpu"), pg.Plan("cuda", "x", "test", problem.without_data()), problem, a)
    for out, free in ((clear, True), (clash, False)):
        key, views = api.plan_cache._key(a, b, None, out, 1.0, 0.0, "cuda", "auto")
        assert api.plan_cache._overlap_free(entry, a, b, None, out, views) is free


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_overflow_into_out_is_as_quiet_as_without_out(dtype):
    # with out= (numpy.matmul writing straight into it) an overflow warned "overflow encountered
    # in matmul", and under np.errstate(over="raise") raised FloatingPointError after writing
    # out; without out the same product was inf, silently (IEEE, as the reference)
    big = np.full((3, 3), np.finfo(dtype).max, dtype)
    want = pg.gemm(big, big)
    assert np.isinf(want).all()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = np.zeros((3, 3), dtype)
        assert pg.gemm(big, big, out=out) is out
        np.testing.assert_array_equal(out, want)
        with np.errstate(all="raise"):
            out = np.zeros((3, 3), dtype)
            pg.gemm(big, big, out=out)
            np.testing.assert_array_equal(out, want)
            np.testing.assert_array_equal(pg.matmul(big, big[:, 0], out=np.zeros(3, dtype)), want[:, 0])


@pytest.mark.parametrize("variant", ["blas", "reference"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_underflow_is_quiet_under_a_users_seterr(variant, dtype):
    # under np.errstate(all="raise") (a user's np.seterr) the reference raised FloatingPointError
    # "underflow encountered in cast" (or "in matmul"): it ignored only overflow and invalid
    from polygemm.problem import dtype_named, finfo

    dt = dtype_named(dtype)
    tiny = np.full((3, 3), finfo(dt).tiny, dt)
    with np.errstate(all="raise"):
        got = pg.gemm(tiny, tiny, variant=variant)
        scaled = pg.gemm(np.ones((3, 3), dt), np.ones((3, 3), dt), alpha=1e-300, variant=variant)
    assert got.dtype == dt and np.all(got.astype(np.float64) >= 0)
    assert np.all(scaled.astype(np.float64) == (3e-300 if dtype == "float64" else 0.0))


def test_alpha_and_beta_may_be_zero_dimensional_arrays(rng):
    # alpha=np.array(0.5) (a 0-D array, what np.asarray of a scalar or a reduction with out gives)
    # was "alpha must be a real number; got array(0.5) (ndarray)"; NumPy takes it as its value
    a, b = _operands(rng)
    c = rng.standard_normal((4, 3)).astype(np.float32)
    want = pg.gemm(a, b, c, alpha=0.5, beta=2.0)
    np.testing.assert_array_equal(pg.gemm(a, b, c, alpha=np.array(0.5), beta=np.array(2, np.int64)), want)
    np.testing.assert_array_equal(pg.gemm(a, b, c, alpha=np.array(0.5, np.float32), beta=np.float64(2.0)), want)
    for bad in (np.array([0.5]), np.array(True), np.array(1 + 1j), np.array(np.nan)):
        with pytest.raises(ArgumentError, match="alpha must be"):
            pg.gemm(a, b, alpha=bad)
