"""A NumPy user holding ``polygemm.matmul`` to ``numpy.matmul``'s every shape rule, and the array-likes NumPy takes,
twenty-second round (CPU): a grid of operand shapes (vectors on either or both sides, stacks broadcasting through
size-1 and size-0 batch dimensions, empty matrices, the mismatches NumPy refuses) compared for the result's shape,
dtype, kind and values and for the class of the error, with and without ``out``; ``np.matrix``, subclasses with
attributes, ``memmap`` in and out, objects offering only ``__array__`` or ``__array_interface__``, memoryviews,
``array.array``, tuples and lists of NumPy scalars, a read-only array through DLPack; operands NumPy reads otherwise
than as a numeric matrix (a ragged list, an object array); zero- and negative-stride views, a structured array's field
and unaligned memory, as operands and as ``out``; an ``out`` of vector results whose batch no stride walks; refusals
with ``c`` updated in place (``out=c``), which must leave it as it was; and the CLI's integer options given a fraction.
The tests marked "defect" failed before the fix they name; the others check edges that were right."""

from __future__ import annotations

import array
import itertools

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import reference_for


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0):
    """``got`` (2-D) element-wise within the bound of the float64 reference, shape and dtype too."""
    res = reference_for(np.asarray(a), np.asarray(b), c, alpha, beta).compare(np.asarray(got))
    assert res.ok, res.message


def assert_matmul_within(got, a, b):
    """``got``, matmul's result for ``a`` and ``b`` of any shape numpy.matmul takes, within the bound of the float64
    reference matrix by matrix (vectors taken as a row / a column, as numpy.matmul takes them)."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    count = int(np.prod(batch, dtype=np.int64))
    a3 = np.broadcast_to(a2, batch + a2.shape[-2:]).reshape((count,) + a2.shape[-2:])
    b3 = np.broadcast_to(b2, batch + b2.shape[-2:]).reshape((count,) + b2.shape[-2:])
    g3 = np.asarray(got).reshape((count, a2.shape[-2], b2.shape[-1]))
    for x, y, g in zip(a3, b3, g3):
        assert_within(g, x, y)


def usage_error(capsys, argv):
    from polygemm.apps.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


# -- numpy.matmul's shape rules, one grid ---------------------------------------------------------------------------------

SHAPES = [(4,), (0,), (1,), (3, 4), (4, 5), (1, 4), (4, 1), (2, 3, 4), (1, 3, 4), (0, 3, 4), (2, 4, 5), (1, 4, 5),
          (0, 4, 5), (2, 1, 3, 4), (3, 1, 4, 5), (4, 0), (0, 5), (3, 0), (2, 0, 4), (2, 4, 0), (1, 0, 4)]


@pytest.mark.parametrize("sa, sb", list(itertools.product(SHAPES, SHAPES)), ids=lambda s: "x".join(map(str, s)) or "0d")
def test_matmul_follows_numpy_on_every_shape_rule(rng, sa, sb):
    """Right: for 441 pairs of shapes polygemm.matmul gives numpy.matmul's result shape, dtype and kind (vector @ vector
    a 0-D array where NumPy gives a scalar, as the README says), values within the reference's bound, the same ``out``
    written and returned; and where NumPy raises a ValueError (K differs, batches that do not broadcast, 0 beside 2),
    polygemm raises one too (a ShapeError), leaving ``out`` as it was."""
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
    want = np.asarray(want)
    assert type(got) is np.ndarray and got.shape == want.shape and got.dtype == want.dtype == np.float32
    assert_matmul_within(got, a, b)
    out = np.full(want.shape, np.nan, np.float32)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    assert_matmul_within(out, a, b)


def test_matmul_refusals_beside_numpy_leave_out_alone(rng):
    """Right: an ``out`` of the shape NumPy would also broadcast into (an extra leading 1) or of a batch missing is a
    ShapeError naming the result's shape (the README: out has the result's shape), written nowhere."""
    a, b = f32(rng, 2, 1, 3, 4), f32(rng, 1, 5, 4, 2)
    for shape in [(1, 2, 5, 3, 2), (5, 3, 2), (2, 5, 2, 3)]:
        out = np.full(shape, 7, np.float32)
        with pytest.raises(pg.ShapeError, match=r"out must have the result's shape \(2, 5, 3, 2\)"):
            pg.matmul(a, b, out=out, device="cpu")
        assert (out == 7).all()


# -- array-likes and subclasses NumPy takes ---------------------------------------------------------------------------------

class Tagged(np.ndarray):
    """A subclass carrying an attribute through its views, as astropy's and xarray's wrappers do."""

    def __new__(cls, x, tag=None):
        obj = np.asarray(x).view(cls)
        obj.tag = tag
        return obj

    def __array_finalize__(self, obj):
        self.tag = getattr(obj, "tag", None)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrix_and_subclasses_give_numpys_result_type(rng):
    """Right: np.matrix in, np.matrix out, of numpy.matmul's shape (matrix @ vector is a 1×M matrix: a matrix stays
    2-D), a subclass keeps its type and its attribute; every value within the bound."""
    m = np.asmatrix(f32(rng, 3, 4))
    v, w = f32(rng, 4), f32(rng, 3)
    for x, y in [(m, m.T), (m, v), (w, m)]:
        want = np.matmul(x, y)
        got = pg.matmul(x, y, device="cpu")
        assert type(got) is type(want) is np.matrix and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    t = Tagged(f32(rng, 3, 4), tag="meters")
    b = f32(rng, 4, 2)
    got = pg.gemm(t, b, device="cpu")
    assert type(got) is Tagged and got.tag == np.matmul(t, b).tag == "meters"
    assert_within(got, np.asarray(t), b)
    out = np.asmatrix(np.zeros((3, 2), np.float32))
    assert pg.gemm(np.asarray(t), b, out=out, device="cpu") is out
    assert_within(out, np.asarray(t), b)


def test_memmap_in_and_out(rng, tmp_path):
    """Right: memmap operands (read-write or read-only) give a plain ndarray as numpy.matmul does; a memmap ``out`` is
    written in place and returned; a read-only memmap ``out`` is refused, as NumPy refuses it."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 5)
    mm = np.memmap(tmp_path / "a.bin", np.float32, "w+", shape=(3, 4))
    mm[:] = a
    mm.flush()
    ro = np.memmap(tmp_path / "a.bin", np.float32, "r", shape=(3, 4))
    for x in (mm, ro):
        got = pg.matmul(x, b, device="cpu")
        assert type(got) is type(np.matmul(x, b)) is np.ndarray
        assert_within(got, a, b)
    out = np.memmap(tmp_path / "o.bin", np.float32, "w+", shape=(3, 5))
    assert pg.gemm(a, b, out=out, device="cpu") is out
    assert_within(out, a, b)
    with pytest.raises(pg.ArgumentError, match="out is read-only"):
        pg.gemm(a, b[:, :4], out=ro, device="cpu")
    np.testing.assert_array_equal(np.asarray(ro), a)


class OnlyArray:
    def __init__(self, x):
        self.x = x

    def __array__(self, dtype=None, copy=None):
        return self.x


class OnlyInterface:
    def __init__(self, x):
        self.x = x
        self.__array_interface__ = x.__array_interface__


class OnlyDLPack:
    def __init__(self, x):
        self.x = x

    def __dlpack__(self, *args, **kwargs):
        return self.x.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_array_likes_numpy_takes(rng):
    """Right: objects offering only ``__array__``, only ``__array_interface__``, memoryviews, ``array.array``, nested
    tuples, lists of NumPy float32 scalars and a read-only array through DLPack (NumPy 2 exports the flag) are read as
    numpy.matmul reads them: the same result dtype and shape, values within the bound, vectors too."""
    a, b, v = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(4)
    ro = a.copy()
    ro.flags.writeable = False
    for x in (OnlyArray(a), OnlyInterface(a), memoryview(a), tuple(map(tuple, a)), OnlyDLPack(ro)):
        got = pg.matmul(x, b, device="cpu")
        assert got.dtype == np.float64 and got.shape == (3, 2)
        assert_within(got, a, b)
    for x in (OnlyArray(v), memoryview(v), array.array("d", v), tuple(v), OnlyDLPack(v)):
        got = pg.matmul(x, b, device="cpu")
        assert got.shape == (2,) and got.dtype == np.float64
        assert_within(got[None], v[None], b)
    scalars = [np.float32(x) for x in v]
    b32 = b.astype(np.float32)
    got = pg.matmul(scalars, b32, device="cpu")
    assert got.dtype == np.matmul(scalars, b32).dtype == np.float32
    assert_within(got[None], np.asarray(scalars)[None], b32)


def test_out_offering_only_array_is_refused(rng):
    """Right: an ``out`` that NumPy could only copy (``__array__`` alone) is a TypeError, as numpy.matmul's, and the
    memory behind it is not written."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    held = np.zeros((3, 2), np.float32)
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        pg.gemm(a, b, out=OnlyArray(held), device="cpu")
    assert not held.any()


# -- what NumPy reads otherwise than as a numeric matrix ----------------------------------------------------------------------

def test_ragged_list_is_a_value_error_as_numpy_raises(rng):
    # defect: a ragged list ([[1., 2.], [3.]]) was a DTypeError (a TypeError): numpy.matmul raises ValueError, and
    # `except ValueError` written for it let polygemm's through; now a ShapeError (a ValueError) naming the argument.
    # As c it had escaped as NumPy's bare ValueError from np.shape, naming no argument and no PolygemmError
    ragged = [[1.0, 2.0], [3.0]]
    with pytest.raises(ValueError):
        np.matmul(ragged, np.ones((2, 2)))
    b = np.ones((2, 2))
    for call, name in [(lambda: pg.matmul(ragged, b, device="cpu"), "a"), (lambda: pg.gemm(b, ragged, device="cpu"), "b"),
                       (lambda: pg.explain(ragged, b, device="cpu"), "a"),
                       (lambda: pg.matmul([1.0, [2.0, 3.0]], b, device="cpu"), "a")]:
        with pytest.raises(ValueError) as info:
            call()
        assert isinstance(info.value, pg.ShapeError)
        assert str(info.value).startswith(f"{name} could not be converted to an array")
        assert "rows all have the same length" in str(info.value) and ".." not in str(info.value)
    c = rng.standard_normal((2, 2))
    kept = c.copy()
    with pytest.raises(pg.ShapeError, match="^c could not be converted"):
        pg.gemm(b, b, [[1.0, 2.0], [3.0]], beta=1.0, device="cpu")
    with pytest.raises(pg.ShapeError, match="^a could not be converted"):
        pg.gemm(ragged, b, c, beta=1.0, out=c, device="cpu")
    np.testing.assert_array_equal(c, kept)


def test_object_array_is_told_its_dtype_and_the_cast(rng):
    # defect: an ndarray of dtype object (floats in it, as pandas' .values gives them) was "a is a ndarray that NumPy
    # reads as an object array; pass a numeric matrix", naming neither its dtype nor the dtypes or the cast that would do;
    # now "a has dtype object; polygemm supports float16, float32 or float64 ... Convert it, e.g. a.astype(np.float32)."
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    obj = a.astype(object)
    assert np.matmul(obj, b).dtype == object  # NumPy computes it; polygemm refuses it with a TypeError
    for call, name in [(lambda: pg.gemm(obj, b, device="cpu"), "a"), (lambda: pg.matmul(a, b.astype(object), device="cpu"), "b"),
                       (lambda: pg.matmul(obj[0], b, device="cpu"), "a")]:
        with pytest.raises(TypeError) as info:
            call()
        msg = str(info.value)
        assert isinstance(info.value, pg.DTypeError)
        assert msg.startswith(f"{name} has dtype object; polygemm supports float16, float32 or float64")
        assert f"{name}.astype(np.float32)" in msg
    got = pg.gemm(obj.astype(np.float32), b.astype(np.float32), device="cpu")  # the advice, followed literally
    assert_within(got, a.astype(np.float32), b.astype(np.float32))
    c = np.zeros((3, 2))
    with pytest.raises(pg.DTypeError, match="^c has dtype object"):
        pg.gemm(a, b, c.astype(object), beta=1.0, device="cpu")
    # a list NumPy reads as objects (a None in it) is named as the list it is, with the dtypes polygemm takes
    with pytest.raises(pg.DTypeError, match=r"a is a list that NumPy reads as an object array; pass a numeric matrix of "
                                            r"float16, float32 or float64"):
        pg.gemm([[1.0, None]], np.ones((2, 2)), device="cpu")
    out = np.full((3, 2), 5.0)
    with pytest.raises(pg.DTypeError, match="^out has dtype object"):
        pg.gemm(a, b, out=np.zeros((3, 2), object), device="cpu")
    with pytest.raises(pg.DTypeError):
        pg.gemm(obj, b, c=out, beta=1.0, out=out, device="cpu")
    assert (out == 5.0).all()


# -- views of every stride ---------------------------------------------------------------------------------------------------

def test_zero_and_negative_stride_operands(rng):
    """Right: broadcast_to views (a row or a column repeated: zero strides), reversed rows and columns (negative
    strides) and a batch broadcast from one matrix are read as the arrays they show, inputs unchanged."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 5)
    views_a = [np.broadcast_to(a[:1], (3, 4)), np.broadcast_to(a[:, :1], (3, 4)), a[::-1, ::-1], a[::-1], a.T.T[:, ::-1]]
    for x in views_a:
        kept = x.copy()
        got = pg.gemm(x, b[::-1], device="cpu")
        assert_within(got, np.ascontiguousarray(x), np.ascontiguousarray(b[::-1]))
        np.testing.assert_array_equal(x, kept)
    stack = np.broadcast_to(a, (2, 3, 3, 4))
    got = pg.matmul(stack, b, device="cpu")
    assert got.shape == (2, 3, 3, 5)
    assert_matmul_within(got, np.ascontiguousarray(stack), b)


def test_structured_field_and_unaligned_memory(rng):
    """Right: a structured array's field (12-byte steps between 4-byte floats) is read through one copy; as ``out`` it is refused naming its steps, untouched; unaligned float32 memory (an offset of
    one byte) is read and written as it is, in place (``c=out``) too."""
    a, b, c = f32(rng, 3, 4), f32(rng, 4, 5), f32(rng, 3, 5)
    rec = np.zeros((3, 4), dtype=[("x", np.float32), ("y", np.float64)])
    rec["x"] = a
    assert_within(pg.gemm(rec["x"], b, device="cpu"), a, b)
    orec = np.zeros((3, 5), dtype=[("x", np.float32), ("y", np.float64)])
    orec["y"] = 9.0
    with pytest.raises(pg.ArgumentError, match=r"out has strides \(60, 12\).*the last axis steps by 3 elements"):
        pg.gemm(a, b, out=orec["x"], device="cpu")
    assert not orec["x"].any() and (orec["y"] == 9.0).all()

    def unaligned(shape):
        buf = np.zeros(int(np.prod(shape)) * 4 + 1, np.uint8)
        x = buf[1:].view(np.float32).reshape(shape)
        assert not x.flags.aligned
        return x

    ua = unaligned((3, 4))
    ua[:] = a
    assert_within(pg.gemm(ua, b, device="cpu"), a, b)
    uo = unaligned((3, 5))
    assert pg.gemm(a, b, out=uo, device="cpu") is uo
    assert_within(uo, a, b)
    uo[:] = c
    assert pg.gemm(a, b, uo, beta=1.0, out=uo, device="cpu") is uo
    assert_within(uo, a, b, c, 1.0, 1.0)


def test_vector_results_out_whose_batch_no_stride_walks(rng):
    # defect: vector @ stack into a Fortran-ordered out of numpy.matmul's shape (2, 5, 2) was refused as "out has shape
    # (2, 5, 1, 2) and strides (4, 8, 80, 40) ... Pass a C-ordered array, e.g. np.empty((2, 5, 1, 2), np.float32)":
    # the matrix view matmul made of it, and an array of a shape matmul then refuses; now said of the out given
    v, b = f32(rng, 4), f32(rng, 2, 5, 4, 2)
    out = np.full((2, 5, 2), 3.0, np.float32, order="F")
    np.matmul(v, b, out=out)  # NumPy writes it (polygemm writes out in place only where one stride walks its batch)
    out[...] = 3.0
    with pytest.raises(pg.ArgumentError) as info:
        pg.matmul(v, b, out=out, device="cpu")
    msg = str(info.value)
    assert msg.startswith(f"out has shape (2, 5, 2) and strides {out.strides}: its batch")
    assert "np.empty((2, 5, 2), np.float32)" in msg and "(2, 5, 1, 2)" not in msg
    assert (out == 3.0).all()
    fixed = np.empty((2, 5, 2), np.float32)  # the advice, followed literally
    assert pg.matmul(v, b, out=fixed, device="cpu") is fixed
    assert_matmul_within(fixed, v, b)
    # the other side (stack @ vector) into a Fortran-ordered out: one stride walks it, written as it is
    a = f32(rng, 2, 5, 4)
    fo = np.empty((2, 5), np.float32, order="F")
    assert pg.matmul(a, v, out=fo, device="cpu") is fo
    assert_matmul_within(fo, a, v)
    # an out a matrix product's batch cannot be walked in: named as given (that path had been right)
    a3 = f32(rng, 2, 3, 4)
    o3 = np.asfortranarray(np.full((2, 3, 5), 1.0, np.float32))
    with pytest.raises(pg.ArgumentError, match=r"^out has strides \(4, 8, 24\)"):
        pg.matmul(a3, f32(rng, 4, 5), out=o3, device="cpu")
    assert (o3 == 1.0).all()


# -- refusals with c updated in place ---------------------------------------------------------------------------------------

def test_refusals_leave_c_updated_in_place_as_it_was(rng, tmp_path):
    """Right: each refusal of a call that would update ``c`` in place (``out=c``) leaves ``c`` as it was: a masked, int,
    ragged or object operand, a ``c`` of another byte order beside ``out``, an alpha that is no number, a K mismatch, an
    out_dtype that disagrees with ``out``."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 5)
    c = f32(rng, 3, 5)
    kept = c.copy()
    bad = [
        (dict(a=np.ma.array(a, mask=a > 0)), pg.ArgumentError),
        (dict(a=a.astype(np.int32)), pg.DTypeError),
        (dict(b=[[1.0] * 5] * 3 + [[1.0]]), pg.PolygemmError),  # a ShapeError since this round's fix, a DTypeError before
        (dict(b=b.astype(object)), pg.DTypeError),
        (dict(b=f32(rng, 3, 5)), pg.ShapeError),
        (dict(alpha="2"), pg.ArgumentTypeError),
        (dict(out_dtype=np.float64), pg.DTypeError),
        (dict(device="nope"), pg.BackendUnavailableError),
        (dict(variant="BLAS"), pg.PolygemmError),
    ]
    for change, error in bad:
        kw = dict(a=a, b=b, alpha=1.0, device="cpu")
        kw.update(change)
        with pytest.raises(error):
            pg.gemm(kw.pop("a"), kw.pop("b"), c, beta=1.0, out=c, **kw)
        np.testing.assert_array_equal(c, kept)
    # and the same call, right, afterwards
    assert pg.gemm(a, b, c, beta=1.0, out=c, device="cpu") is c
    assert_within(c, a, b, kept, 1.0, 1.0)


# -- the CLI's integer options given a fraction --------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["gemm", "--shape", "2x2x2", "--seed", "1.5"], "--seed: must be an integer, 0 or more; got '1.5'"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--batch", "1.5"], "--batch: must be an integer, 0 or more; got '1.5'"),
    (["gemm", "--shape", "2x2x2", "--seed", "x"], "--seed: must be an integer, 0 or more; got 'x'"),
])
def test_cli_integer_options_given_a_fraction_say_so(capsys, argv, says):
    # defect: "--seed 1.5" (and bench's "--batch 1.5") were told "must be 0 or more; got '1.5'", which 1.5 is; what is
    # wrong is that it is no integer
    assert says in usage_error(capsys, argv)


@pytest.mark.parametrize("argv, says", [
    (["gemm", "--shape", "2x2x2", "--seed", "-1"], "--seed: must be 0 or more; got '-1'"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--batch", "-2"], "--batch: must be 0 or more; got '-2'"),
    (["gemm", "--shape", "2x2x2", "--repeat", "2.0"], "--repeat/--repeats: must be an integer >= 1; got '2.0'"),
    (["gemm", "--shape", "1e3x4x4"], "--shape: shape must be MxNxK with three non-negative integers"),
])
def test_cli_integer_options_negative_or_written_otherwise(capsys, argv, says):
    """Right: negative values are told the bound; a float-looking repeat or shape is told an integer is needed."""
    assert says in usage_error(capsys, argv)


def test_cli_seed_of_any_size_runs(capsys):
    """Right: a seed beyond 64 bits (NumPy's generators take any non-negative int) runs and checks."""
    from polygemm.apps.cli import main

    assert main(["gemm", "--shape", "3x4x5", "--device", "cpu", "--seed", str(2**80 + 1), "--repeat", "1", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out
