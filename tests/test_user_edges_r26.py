"""A user arriving from another library's GEMM, twenty-sixth round (CPU): what numpy.matmul, torch.matmul/addmm,
cupy.cublas.gemm, scipy.linalg.blas.sgemm, tf.matmul and jax.numpy.matmul users write, handed to ``polygemm.gemm``,
``polygemm.matmul`` and ``polygemm.explain``: their keywords (``dtype=``, ``trans_a=``, ``transpose_b=``, ``input=``,
``overwrite_c=``, ``precision=``, ufunc keywords, a capital ``C=``, typos of polygemm's own), their positional forms
(``numpy.matmul(a, b, out)``, BLAS's ``gemm(a, b, c, alpha, beta)``), ``out=`` with ``beta`` as cuBLAS's C, and alpha
or beta given as a 0-D array of their library (a dask reduction, a CPU DLPack array as JAX's ``jnp.float32(2)`` is, a
device array, a one-element one); and what an error quotes of a large or hostile value (a 10,000-element list as
alpha, variant, out_dtype or device). Each refusal must be a TypeError or ValueError naming the argument and the
way polygemm takes it, leave ``out`` and ``c`` as they were, and compute nothing lazy. (torch, CuPy and JAX are not
installed on the CPU machine: their 0-D arrays are stood in for by DLPack objects.) The tests marked "defect" failed
before the fix they name; the others check edges that were right."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, ArgumentTypeError, DTypeError
from conftest import DLPackOnly


@pytest.fixture
def ops(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    return a, b


def _poisoned(shape=(3, 5)):
    return np.full(shape, 7.0, np.float32)


# -- defect 1: another library's keywords got Python's bare "unexpected keyword argument" ---------------------------
# Python's "gemm() got an unexpected keyword argument 'dtype'" named the word and no way on: numpy.matmul's dtype= is
# polygemm's out_dtype=, scipy's trans_a= and tf's transpose_b= are a.T / b.T (no copy), torch's input=/other= are the
# operands by position, a capital C= is c. Fix: gemm, matmul and explain take **unexpected (typed NoReturn, so a type
# checker still refuses it) only to say so, as an ArgumentTypeError (a TypeError, as Python's refusal is).

_KEYWORDS = [
    ("dtype", r"out_dtype=, e\.g\. out_dtype=np\.float32"),
    ("preferred_element_type", r"out_dtype="),
    ("trans_a", r"a\.T"),
    ("transa", r"a\.T"),
    ("transpose_b", r"b\.T"),
    ("adjoint_b", r"b\.T"),
    ("input", r"by position"),
    ("other", r"by position"),
    ("x1", r"by position"),
    ("overwrite_c", r"out=c"),
    ("casting", r"numpy\.matmul ufunc keyword"),
    ("axes", r"numpy\.matmul ufunc keyword"),
    ("precision", r"accumulate in float32"),
    ("stream", r"stream the operands name"),
    ("Out", r"did you mean 'out'\?"),
    ("out_type", r"did you mean 'out_dtype'\?"),
]


@pytest.mark.parametrize("func", [pg.gemm, pg.matmul, pg.explain], ids=["gemm", "matmul", "explain"])
@pytest.mark.parametrize("word, hint", _KEYWORDS, ids=[w for w, _ in _KEYWORDS])
def test_another_librarys_keyword_is_told_polygemms_way(ops, func, word, hint):
    # defect: each was Python's TypeError "<func>() got an unexpected keyword argument '<word>'" and nothing more
    a, b = ops
    out = _poisoned()
    with pytest.raises(TypeError) as info:
        func(a, b, out=out, **{word: 1})
    err = info.value
    assert isinstance(err, ArgumentTypeError) and isinstance(err, ValueError)
    msg = str(err)
    name = func.__name__
    assert msg.startswith(f"{name}() got an unexpected keyword argument '{word}'"), msg  # Python's words, kept
    assert re.search(hint, msg), msg
    assert "out_dtype=" in msg and "device=" in msg  # and what it takes
    assert (out == 7.0).all()


@pytest.mark.parametrize("word", ["c", "C", "alpha", "beta", "variant"])
def test_gemm_keywords_given_to_matmul_name_gemm(ops, word):
    # defect (same fix): matmul(a, b, c=c) or alpha= had no word of polygemm.gemm, which takes them
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=rf"unexpected keyword argument '{word}' \(matmul is numpy\.matmul's a @ b; "
                                                rf"polygemm\.gemm\(a, b, c, alpha=, beta=, variant=\) takes {word.lower()}\)"):
        pg.matmul(a, b, **{word: 1.0})


def test_a_capital_c_is_told_c_and_following_it_works(ops):
    # defect (same fix): gemm(a, b, C=c, beta=1) (BLAS's capital names) said only "unexpected keyword argument 'C'"
    a, b = ops
    c = _poisoned()
    with pytest.raises(ArgumentTypeError, match=r"'C' \(did you mean 'c'\?\)"):
        pg.gemm(a, b, C=c, beta=1.0)
    assert (c == 7.0).all()
    np.testing.assert_allclose(pg.gemm(a, b, c=c, beta=1.0), a @ b + 7.0, rtol=1e-5, atol=1e-5)


def test_an_unknown_keyword_with_no_likely_meaning_lists_what_is_taken(ops):
    # defect (same fix): Python's message stopped at the word; it now lists what gemm and matmul take
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"^gemm\(\) got an unexpected keyword argument 'zzz'; it takes a, b and c by "
                                                r"position and the keywords alpha=, beta=, device=, variant=, out=, out_dtype=$"):
        pg.gemm(a, b, zzz=1)
    with pytest.raises(ArgumentTypeError, match=r"^matmul\(\) got an unexpected keyword argument 'zzz'; it takes a and b by "
                                                r"position and the keywords out=, out_dtype=, device=$"):
        pg.matmul(a, b, zzz=1)


# -- defect 2: positional forms of numpy.matmul and BLAS --------------------------------------------------------------

def test_numpy_matmuls_positional_out_is_told_the_keyword(ops):
    # defect: numpy.matmul(a, b, out) is legal; polygemm.matmul(a, b, out) said "matmul() takes 2 positional arguments
    # but 3 were given" and not that out is a keyword
    a, b = ops
    out = _poisoned()
    with pytest.raises(ArgumentTypeError, match=r"^matmul\(\) takes 2 positional arguments but 3 were given: out is a keyword: "
                                                r"matmul\(a, b, out=out\)"):
        pg.matmul(a, b, out)
    assert (out == 7.0).all()
    assert pg.matmul(a, b, out=out) is out


def test_blas_order_alpha_beta_by_position_is_told_the_keywords(ops):
    # defect: gemm(a, b, c, 2.0, 1.0), BLAS's order, said "gemm() takes from 2 to 3 positional arguments but 5 were given"
    a, b = ops
    c = _poisoned()
    for func in (pg.gemm, pg.explain):
        with pytest.raises(ArgumentTypeError, match=r"takes from 2 to 3 positional arguments but 5 were given: alpha and beta "
                                                    r"are keywords: \w+\(a, b, c, alpha=\.\.\., beta=\.\.\.\)"):
            func(a, b, c, 2.0, 1.0)
    assert (c == 7.0).all()


def test_the_signatures_keep_their_keywords_and_defaults():
    """Edge that was right (and must stay so): the documented keywords are keyword-only with their defaults; the
    catch-alls come only after them, so a correct call binds exactly as before."""
    for func in (pg.gemm, pg.explain):
        params = inspect.signature(func).parameters
        assert list(params)[:3] == ["a", "b", "c"] and params["c"].default is None
        kw = {n: p.default for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert kw == {"alpha": 1.0, "beta": None, "device": None, "variant": "auto", "out": None, "out_dtype": None}
    kw = {n: p.default for n, p in inspect.signature(pg.matmul).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert kw == {"out": None, "out_dtype": None, "device": None}


def test_a_type_checker_still_refuses_the_misspelt_keywords(tmp_path):
    """Edge that was right: mypy refuses gemm(a, b, dtype=...) and matmul(a, b, out) statically (the catch-alls are
    typed NoReturn), and accepts a correct call."""
    pytest.importorskip("mypy")
    src = tmp_path / "user.py"
    src.write_text(textwrap.dedent("""\
        import numpy as np
        import polygemm as pg
        a = np.ones((2, 2), np.float32)
        pg.gemm(a, a, dtype=np.float32)
        pg.matmul(a, a, a)
        pg.gemm(a, a, None, alpha=2.0, out=np.empty((2, 2), np.float32))
        """))
    run = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
                          str(src)], capture_output=True, text=True, timeout=300)
    lines = [ln for ln in run.stdout.splitlines() if ": error:" in ln]
    assert [ln.split(":")[1] for ln in lines] == ["4", "5"], run.stdout + run.stderr


# -- defect 3: out= with beta, as cuBLAS's C ------------------------------------------------------------------------

def test_beta_with_out_and_no_c_says_out_may_be_c(ops):
    # defect: cupy.cublas.gemm(..., out=C, beta=1) adds into out; polygemm.gemm(a, b, out=o, beta=1.0) said only
    # "beta=1.0 needs c: pass c (shape (3, 5)) or set beta=0" to a user who had passed that very array
    a, b = ops
    out = _poisoned()
    with pytest.raises(ArgumentError, match=r"^beta=1\.0 needs c: pass c \(shape \(3, 5\)\) or set beta=0; to add into out's "
                                            r"values as cuBLAS's C does, pass out as c too: gemm\(a, b, out, beta=1\.0, out=out\)$"):
        pg.gemm(a, b, beta=1.0, out=out)
    assert (out == 7.0).all()
    assert pg.gemm(a, b, out, beta=1.0, out=out) is out  # the advice, followed
    np.testing.assert_allclose(out, a @ b + 7.0, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match=r"^beta=1\.0 needs c: pass c \(shape \(3, 5\)\) or set beta=0$"):
        pg.gemm(a, b, beta=1.0)  # without out: no word of it


# -- defect 4: alpha and beta as another library's 0-D array -------------------------------------------------------

class _ArrayAPI(DLPackOnly):
    """A CPU array of another library (JAX on the CPU, torch CPU, an array-API array): a shape, and DLPack."""

    @property
    def shape(self):
        return self._x.shape

    @property
    def ndim(self):
        return self._x.ndim


class _DeviceScalar(_ArrayAPI):
    """A 0-D array in device memory (a CuPy reduction, a CUDA tensor): exporting it would touch the device."""

    exported = 0

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, **kwargs):
        type(self).exported += 1
        raise AssertionError("a device scalar was exported")


@pytest.mark.parametrize("make", [_ArrayAPI, DLPackOnly], ids=["array-api", "dlpack-only"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
def test_a_cpu_0d_array_of_another_library_is_its_value(ops, make, dtype):
    # defect: README says alpha and beta may be 0-D arrays; jnp.float32(2) (a 0-D JAX array), torch.tensor(2.0) or an
    # array-API array on the CPU was refused "must be a real number (... or a 0-D array of one); got <...>"
    a, b = ops
    c = _poisoned()
    alpha, beta = make(np.array(2, dtype)), make(np.array(3, dtype))
    got = pg.gemm(a, b, c, alpha=alpha, beta=beta)
    want = pg.gemm(a, b, c, alpha=2.0, beta=3.0)
    np.testing.assert_array_equal(got, want)
    assert (pg.last_plan().problem.alpha, pg.last_plan().problem.beta) == (2.0, 3.0)
    assert pg.explain(a, b, c, alpha=alpha, beta=beta).problem.alpha == 2.0


def test_a_dask_0d_array_is_told_compute_and_nothing_is_computed(ops):
    # defect: alpha=da.linalg.norm(x) (a 0-D dask array) was told "... or a 0-D array of one" with no way on; it now
    # names alpha.compute() and computes nothing (as dask operands, round 24)
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    a, b = ops
    calls: list[int] = []

    def value():
        calls.append(1)
        return np.float64(2.0)

    lazy = da.from_delayed(dask.delayed(value)(), shape=(), dtype=np.float64)
    out = _poisoned()
    with pytest.raises(ArgumentTypeError, match=r"alpha is a 0-D dask array \(lazy\), which polygemm does not compute: "
                                                r"pass alpha\.compute\(\)$"):
        pg.gemm(a, b, alpha=lazy, out=out)
    with pytest.raises(ArgumentTypeError, match=r"beta is a one-element dask array \(lazy\), which polygemm does not compute: "
                                                r"pass beta\.compute\(\)\.item\(\)$"):
        pg.gemm(a, b, out, beta=lazy.reshape(1), out=out)
    assert calls == [] and (out == 7.0).all()
    np.testing.assert_array_equal(pg.gemm(a, b, alpha=lazy.compute()), pg.gemm(a, b, alpha=2.0))  # the advice, followed


def test_a_device_0d_array_is_told_float_and_never_exported(ops):
    # defect: a 0-D device array (cupy.linalg.norm(x), a CUDA tensor) got the same no-way-on refusal; it now names
    # float(alpha), and polygemm exports nothing of it (reading it would wait on the device behind the caller's back)
    a, b = ops
    out = _poisoned()
    _DeviceScalar.exported = 0
    with pytest.raises(ArgumentTypeError, match=r"alpha is a 0-D \w+\._DeviceScalar whose value polygemm does not read .*"
                                                r"pass float\(alpha\)"):
        pg.gemm(a, b, alpha=_DeviceScalar(np.array(2.0)), out=out)
    assert _DeviceScalar.exported == 0 and (out == 7.0).all()


def test_a_one_element_array_of_another_library_is_told_item(ops):
    # defect: as a one-element NumPy array is told alpha.item() (round 24), another library's one-element array now is
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"a one-element \w+\._ArrayAPI is no scalar: pass beta\.item\(\)$"):
        pg.gemm(a, b, _poisoned(), beta=_ArrayAPI(np.array([2.0])))


@pytest.mark.parametrize("value", [np.array(2 + 1j), np.array(True), np.array("2")], ids=["complex", "bool", "text"])
def test_a_cpu_0d_array_of_no_real_number_is_still_refused(ops, value):
    """Edge that was right (and stays so read through DLPack): a 0-D complex or bool array is no real factor."""
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"^alpha must be a real number") as info:
        pg.gemm(a, b, alpha=_ArrayAPI(value))
    if value.dtype.kind in "bc":
        # defect (review of session 37): read through DLPack, its element was then refused as another library's array
        # "whose value polygemm does not read (not CPU memory ...): pass float(alpha)", advice that turns True into 1.0;
        # it is refused as NumPy's own 0-D array is, quoting the element
        msg = str(info.value)
        assert "float(alpha)" not in msg and "DLPack" not in msg, msg
        with pytest.raises(ArgumentTypeError) as numpys:
            pg.gemm(a, b, alpha=value)
        assert msg == str(numpys.value)


def test_numpys_own_0d_and_one_element_arrays_are_as_before(ops):
    """Edge that was right: a 0-D NumPy array is its value; a one-element one is told .item()."""
    a, b = ops
    np.testing.assert_array_equal(pg.gemm(a, b, alpha=np.array(2.0)), pg.gemm(a, b, alpha=2.0))
    with pytest.raises(ArgumentTypeError, match=r"a one-element array of 1 dimension is no scalar: pass alpha\.item\(\)$"):
        pg.gemm(a, b, alpha=np.array([2.0]))


# -- defect 5: an error quoted a large value whole ---------------------------------------------------------------------
# PolygemmError's docstring: "The message is kept short (each reason one line)". alpha=[1.0] * 10000 gave a 50,000-
# character message, variant=[...] and out_dtype=[...] as long, device=[...] likewise. Fix: problem.short_repr.

@pytest.mark.parametrize("kw, start, err", [
    ({"alpha": [1.0] * 10000}, "alpha must be a real number", ArgumentTypeError),
    ({"beta": [1.0] * 10000}, "beta must be a real number", ArgumentTypeError),
    ({"variant": ["blas"] * 10000}, "variant must be a variant name or 'auto'; got ['blas', ", ArgumentTypeError),
    ({"out_dtype": [np.float32] * 10000}, "out_dtype=[", DTypeError),
    ({"device": ["cpu"] * 10000}, "device must be a backend name", ArgumentTypeError),
], ids=["alpha", "beta", "variant", "out_dtype", "device"])
def test_an_error_quotes_a_large_value_cut_short(ops, kw, start, err):
    # defect: each message held the value's whole repr (tens of thousands of characters)
    a, b = ops
    out = _poisoned()
    for func in (pg.gemm, pg.explain):
        with pytest.raises(err) as info:
            func(a, b, out=out, **kw)
        msg = str(info.value)
        assert msg.startswith(start) and len(msg) < 400, (len(msg), msg[:200])
        assert "..." in msg
    assert (out == 7.0).all()


def test_get_backend_quotes_a_large_value_cut_short():
    # defect (same fix): get_backend([...]) quoted the list whole
    with pytest.raises(ArgumentTypeError, match=r"^get_backend takes a backend name .*; got \[.*\.\.\. \(list\)$") as info:
        pg.get_backend(["cpu"] * 10000)
    assert len(str(info.value)) < 300


def test_a_value_whose_repr_raises_is_still_told_what_is_wrong(ops):
    # defect (same fix): an alpha whose __repr__ raises replaced polygemm's refusal with that error
    class Hostile:
        def __repr__(self):
            raise RuntimeError("repr exploded")

    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"^alpha must be a real number .*; got <Hostile> \(Hostile\)$"):
        pg.gemm(a, b, alpha=Hostile())


def test_polygemm_dask_refuses_a_dask_0d_alpha_the_same_way(ops):
    # defect (fix 4): polygemm.dask.gemm reads alpha as gemm does: a lazy 0-D alpha had the same no-way-on refusal, a
    # CPU 0-D array was refused; now told .compute(), and taken
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    a, b = ops
    A, B = da.from_array(a, chunks=2), da.from_array(b, chunks=2)
    with pytest.raises(ArgumentTypeError, match=r"pass alpha\.compute\(\)$"):
        pgd.gemm(A, B, alpha=da.from_array(np.array(2.0)), device="cpu")
    got = pgd.gemm(A, B, alpha=_ArrayAPI(np.array(2.0)), device="cpu").compute()
    np.testing.assert_allclose(got, 2.0 * (a @ b), rtol=1e-5, atol=1e-5)
