"""A demanding user's edges, ninth round (CPU): numpy.matmul's conventions side by side with
polygemm.matmul (empty list vectors, a NumPy scalar as ``out``), the variant a user misspells
(``"AUTO"``, ``"BLAS"``) with ``device="auto"`` and a named device, ``polygemm.testing``'s check
under a user's ``np.seterr(all="raise")``, refusals that leave ``out`` and ``c`` untouched, and
calls from many threads. The tests marked "defect" failed before the fix they name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import polygemm as pg
from conftest import run_concurrently
from polygemm.apps.cli import main
from polygemm.testing import assert_close, check_result

ml_dtypes = pytest.importorskip("ml_dtypes")


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _as_matrices(x: np.ndarray, a_vec: bool, b_vec: bool) -> np.ndarray:
    """A matmul result with its vectors' unit dimensions back (the bound takes matrices)."""
    if b_vec:
        x = x[..., None]
    if a_vec:
        x = x[..., None, :]
    return x


# -- defect 1: an empty list (or tuple) as the vector b ---------------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ([], []), ((), ()), (np.ones((3, 0)), []), ([[]], []), (np.ones(0), []), (np.ones((2, 4, 0)), ()),
], ids=["list@list", "tuple@tuple", "matrix@list", "nested@list", "array@list", "stack@tuple"])
def test_matmul_of_an_empty_list_vector_is_numpys_zero(a, b):
    # defect 1: an empty list as b became [] again (1-D) instead of a 0×1 column: IndexError from inside matmul
    want = np.matmul(a, b)
    got = pg.matmul(a, b)
    assert type(got) is np.ndarray and got.shape == np.shape(want) and got.dtype == np.float64
    assert np.array_equal(got, want)  # K = 0: zeros, exactly


def test_matmul_empty_list_column_of_the_wrong_length_is_a_shape_error():
    # defect 1: the mismatch had been an IndexError raised while the ShapeError's message was written
    with pytest.raises(pg.ShapeError, match=r"b, a vector of 0, taken as a column 0×1"):
        pg.matmul([1.0], [])
    with pytest.raises(pg.ShapeError, match=r"a\.shape\[-1\] \(K=2\) must equal b\.shape\[-2\] \(0\)"):
        pg.matmul(np.ones((3, 2)), [])


# -- defect 2: a NumPy scalar as matmul's out -------------------------------------------------------------------------


@pytest.mark.parametrize("scalar", [np.float32(0), np.float64(7), ml_dtypes.bfloat16(1)], ids=["f32", "f64", "bf16"])
def test_matmul_refuses_a_numpy_scalar_as_out(rng, scalar):
    # defect 2: vector @ vector with out=np.float32(0) returned that scalar unchanged (the result went into a
    # reshaped copy of it); numpy.matmul refuses it ("return arrays must be of ArrayType")
    dt = np.dtype(type(scalar))
    v, w = _f32(rng, 5).astype(dt), _f32(rng, 5).astype(dt)
    with pytest.raises(pg.ArgumentError, match=r"out must be a NumPy array .*got \w+ \(a NumPy scalar cannot be written; "
                                               r"pass np\.empty\(\(\), (np|ml_dtypes)\.\w+\)\)"):
        pg.matmul(v, w, out=scalar)
    with pytest.raises(TypeError):
        np.matmul(v, w, out=scalar)  # NumPy refuses it too
    out = np.empty((), dt)  # what the message says to pass: written, and returned
    assert pg.matmul(v, w, out=out) is out
    assert_close(out.reshape(1, 1), v[None, :], w[:, None])


# -- defect 3: variant names a user misspells --------------------------------------------------------------------------


@pytest.mark.parametrize("variant, means", [("AUTO", "auto"), ("auto ", "auto"), ("BLAS", "blas"), (" blas", "blas"),
                                            ("refrence", "reference")])
def test_a_misspelt_variant_of_a_named_device_is_told_the_name_meant(rng, variant, means):
    # defect 3: device names ignore case and spaces, variant names do not; the refusal listed the variants
    # without 'auto' and gave no hint at all (variant="AUTO" was told "known: blas, reference, numpy")
    a, b = _f32(rng, 3, 4), _f32(rng, 4, 5)
    with pytest.raises(pg.UnsupportedProblemError) as exc:
        pg.gemm(a, b, device="cpu", variant=variant)
    assert str(exc.value) == (f"variant={variant!r} is not a variant of backend 'cpu' (did you mean {means!r}?); "
                              f"known: blas, reference, numpy (or 'auto')")


def test_a_variant_far_from_every_name_gets_no_guess(rng):
    a, b = _f32(rng, 3, 4), _f32(rng, 4, 5)
    for variant in ("cublas", "nope"):  # cuda's vendor variant is no misspelling of cpu's blas
        with pytest.raises(pg.UnsupportedProblemError) as exc:
            pg.gemm(a, b, device="cpu", variant=variant)
        assert "did you mean" not in str(exc.value) and str(exc.value).endswith("known: blas, reference, numpy (or 'auto')")


@pytest.mark.parametrize("variant, hint", [("nope", ""), ("BLAS", " (did you mean 'blas'?)")])
def test_an_unknown_variant_with_device_auto_lists_what_the_backends_have(rng, monkeypatch, variant, hint, without_gpu):
    # defect 3: with device="auto" the message said only "cpu: has no variant 'nope'", never what cpu has
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    a, b = _f32(rng, 3, 4), _f32(rng, 4, 5)
    for device in (None, "auto"):
        with pytest.raises(pg.UnsupportedProblemError) as exc:
            pg.explain(a, b, device=device, variant=variant)
        msg = str(exc.value)
        assert f"cpu: has no variant {variant!r}{hint})" in msg
        assert msg.endswith("; their variants: cpu: blas, reference, numpy")
        assert "\n" not in msg


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The command line's one-line refusal (status 2, no traceback, nothing on stdout)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    return captured.err.strip()


def test_the_cli_tells_a_misspelt_variant_the_name_meant(capsys, monkeypatch):
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    last = _refused(capsys, ["gemm", "--shape", "8x8x8", "--device", "cpu", "--variant", "BLAS"])
    assert last == ("polygemm: error: variant='BLAS' is not a variant of backend 'cpu' (did you mean 'blas'?); "
                    "known: blas, reference, numpy (or 'auto')")
    last = _refused(capsys, ["gemm", "--shape", "8x8x8", "--variant", "refrence"])
    assert last.startswith("polygemm: error: no available backend has variant 'refrence'")
    assert "cpu: has no variant 'refrence' (did you mean 'reference'?)" in last


# -- defect 4: polygemm.testing under the user's np.seterr -----------------------------------------------------------


@pytest.mark.parametrize("dtype, value", [
    (np.float16, 300.0), (np.float16, 1e-5), ("bfloat16", 3e19), ("bfloat16", 1e-30),
    (np.float32, 3e19), (np.float32, 1e-30), (np.float64, 1e-200),
], ids=["f16-over", "f16-under", "bf16-over", "bf16-under", "f32-over", "f32-under", "f64-under"])
@pytest.mark.parametrize("variant", ["auto", "reference"])
def test_checking_a_result_that_overflows_or_underflows_is_quiet_under_seterr_raise(dtype, value, variant):
    # defect 4: check_result rounded the reference to the output type (to compare what overflows it) and
    # formed the bound's products with FloatingPointError on under np.seterr(all="raise"), a RuntimeWarning
    # (an error under -W error) otherwise: for exactly the results the bound is written to judge
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    a = np.full((3, 4), value, dt)
    b = np.full((4, 2), value, dt)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        r = pg.gemm(a, b, device="cpu", variant=variant)
        res = check_result(r, a, b)
        assert res.ok, res.message
        bad = r.astype(np.float64)
        bad[0, 0] = 1.0 if not np.isfinite(bad[0, 0]) else bad[0, 0] * 0.5 + 1.0  # still judged: a wrong result fails
        assert not check_result(bad.astype(dt), a, b).ok


# -- refusals leave out and c as they were -----------------------------------------------------------------------------


def _refusals(a, b, c, out):
    yield "alpha", dict(alpha=float("nan")), pg.ArgumentError
    yield "beta", dict(beta=1j), pg.ArgumentError
    yield "variant", dict(variant="BLAS"), pg.UnsupportedProblemError
    yield "device", dict(device="cuda"), pg.BackendUnavailableError
    yield "device index", dict(device="cpu:1"), pg.BackendUnavailableError
    yield "device type", dict(device=0), pg.ArgumentError
    yield "out_dtype", dict(out_dtype=np.float64), pg.DTypeError
    yield "out_dtype unreadable", dict(out_dtype="bogus"), pg.DTypeError
    yield "mixed dtypes", dict(b=b.astype(np.float64)), pg.DTypeError
    yield "int a", dict(a=a.astype(np.int32)), pg.DTypeError
    yield "inner dimension", dict(b=b[:-1]), pg.ShapeError
    yield "c shape", dict(c=c[:, :-1]), pg.ShapeError
    yield "c dtype", dict(c=c.astype(np.float64)), pg.DTypeError
    yield "out overlaps a", dict(a=out[:, :a.shape[1]]), pg.ArgumentError


@pytest.mark.parametrize("case", [name for name, _, _ in _refusals(*(np.ones((2, 2)),) * 4)])
@pytest.mark.parametrize("in_place", [False, True], ids=["out", "out-is-c"])
def test_a_refused_call_leaves_out_and_c_untouched(rng, monkeypatch, case, in_place, without_gpu):  # device="cuda" is a refusal there
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    a, b = _f32(rng, 4, 3), _f32(rng, 3, 6)
    c = _f32(rng, 4, 6)
    out = c if in_place else _f32(rng, 4, 6)
    kept_c, kept_out = c.copy(), out.copy()
    kw, err = {name: (k, e) for name, k, e in _refusals(a, b, c, out)}[case]
    for _ in range(2):  # again after a good call of the same operands (its plan cached)
        call = dict(a=a, b=b, c=c, out=out, beta=0.5) | kw
        with pytest.raises(err):
            pg.gemm(call.pop("a"), call.pop("b"), **call)
        assert np.array_equal(c, kept_c) and np.array_equal(out, kept_out), case
        good = pg.gemm(a, b, kept_c.copy(), beta=0.5, out=np.empty_like(out))
        assert_close(good, a, b, kept_c, 1.0, 0.5)


@pytest.mark.parametrize("out", ["scalar", "wrong shape", "read-only", "list"])
def test_a_refused_vector_out_is_left_untouched(rng, out):
    m, v = _f32(rng, 3, 4), _f32(rng, 4)
    given = {"scalar": np.float32(5), "wrong shape": np.full(4, 5, np.float32),
             "read-only": np.full(3, 5, np.float32), "list": [5.0, 5.0, 5.0]}[out]
    if out == "read-only":
        given.setflags(write=False)
    with pytest.raises(ValueError):
        pg.matmul(m, v, out=given)
    assert np.all(np.asarray(given) == 5)


# -- numpy.matmul's conventions, numerically ---------------------------------------------------------------------------


def _cases(rng):
    f = np.asfortranarray
    yield "broadcast (2,1,M,K)@(3,K,N)", _f32(rng, 2, 1, 3, 4), _f32(rng, 3, 4, 5)
    yield "vector @ 4-D stack", _f32(rng, 4), _f32(rng, 2, 1, 4, 5)
    yield "4-D stack @ vector", _f32(rng, 2, 3, 5, 4), _f32(rng, 4)
    yield "reversed rows and columns", _f32(rng, 5, 6)[::-1, ::-1], _f32(rng, 6, 3)[::-1]
    yield "reversed batch", _f32(rng, 3, 2, 4)[::-1], _f32(rng, 4, 5)
    yield "every other column", _f32(rng, 3, 8)[:, ::2], _f32(rng, 4, 2)
    yield "Fortran order", f(_f32(rng, 3, 4)), f(_f32(rng, 4, 5))
    yield "transposed stack", _f32(rng, 2, 4, 3).transpose(0, 2, 1), _f32(rng, 2, 4, 5)
    yield "reversed vectors", _f32(rng, 6)[::-2], _f32(rng, 6, 3)[::2]
    yield "big-endian", _f32(rng, 3, 4).astype(">f4"), _f32(rng, 4, 2).astype(">f4")
    yield "M = 0", _f32(rng, 0, 4), _f32(rng, 4, 5)
    yield "N = 0 in a batch", _f32(rng, 2, 3, 4), _f32(rng, 4, 0)
    yield "batch of 0", _f32(rng, 0, 3, 4), _f32(rng, 4, 5)
    yield "K = 0", _f32(rng, 3, 0), _f32(rng, 0, 5)
    yield "float64 lists", _f32(rng, 2, 3).astype(np.float64).tolist(), _f32(rng, 3).astype(np.float64).tolist()
    yield "float16", _f32(rng, 3, 7).astype(np.float16), _f32(rng, 7, 2).astype(np.float16)
    yield "bfloat16", _f32(rng, 3, 7).astype(ml_dtypes.bfloat16), _f32(rng, 7).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("index", range(17))
def test_matmul_agrees_with_numpy_matmul_in_shape_dtype_and_value(rng, index):
    name, a, b = list(_cases(rng))[index]
    readonly = [np.array(x) if not isinstance(x, np.ndarray) else x for x in (a, b)]
    for x in readonly:
        x.flags.writeable = False  # read-only inputs are read as they are
    want = np.matmul(a, b)
    got = pg.matmul(a, b)
    # bfloat16 stays bfloat16 (as torch.matmul keeps it; ml_dtypes' numpy.matmul loop widens it to float32)
    dtype = np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else want.dtype
    assert got.shape == want.shape and got.dtype == dtype, name
    a2, b2 = (np.asarray(x) for x in (a, b))
    va, vb = a2.ndim == 1, b2.ndim == 1
    A = a2[None, :] if va else a2
    B = b2[:, None] if vb else b2
    # the bound takes matrices: each product of the broadcast batch against the float64 reference
    bshape = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    As, Bs = np.broadcast_to(A, bshape + A.shape[-2:]), np.broadcast_to(B, bshape + B.shape[-2:])
    G = _as_matrices(got, va, vb)
    for i in np.ndindex(*bshape):
        assert_close(G[i], As[i], Bs[i])


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matmul_returns_the_subclass_numpy_returns(rng):
    m = np.matrix(_f32(rng, 3, 4))
    v, u = _f32(rng, 4), _f32(rng, 3)
    for a, b, A, B in ((m, v, np.asarray(m), v[:, None]), (u, m, u[None, :], np.asarray(m)), (m, m.T, np.asarray(m), np.asarray(m).T)):
        want, got = np.matmul(a, b), pg.matmul(a, b)
        assert type(got) is type(want) is np.matrix and got.shape == want.shape
        assert_close(np.asarray(got).reshape(A.shape[0], B.shape[1]), A, B)


# -- many threads ------------------------------------------------------------------------------------------------------


def test_calls_from_many_threads_each_get_their_own_result_and_plan():
    def work(i: int) -> None:
        rng = np.random.default_rng(1000 + i)
        for j in range(40):
            m, n, k = (int(x) for x in rng.integers(0, 9, 3))
            dt = (np.float32, np.float64, np.float16, ml_dtypes.bfloat16)[(i + j) % 4]
            a = rng.standard_normal((m, k)).astype(dt)
            b = rng.standard_normal((k, n)).astype(dt)
            if j % 3 == 0:
                a = np.asfortranarray(a)
            c = rng.standard_normal((m, n)).astype(dt)
            out = np.empty((m, n), dt) if j % 2 else None
            r = pg.gemm(a, b, c, alpha=1.5, beta=-0.5, out=out, variant=("auto", "reference")[j % 5 == 0])
            assert out is None or r is out
            assert_close(r, a, b, c, 1.5, -0.5)
            p = pg.last_plan()
            assert p is not None and (p.problem.m, p.problem.n, p.problem.k) == (m, n, k), (i, j)

    assert run_concurrently(work, threads=8) == []
