"""``device=``: names, indices, the device objects of torch and CuPy, $POLYGEMM_DEVICE, what runs where."""

from __future__ import annotations

import array
import fractions
import itertools
import re

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm import registry
from polygemm.errors import ArgumentError, ArgumentTypeError, BackendUnavailableError, DTypeError, ShapeError
from polygemm.testing import assert_close, reference_for

from tests.helpers import _named, cuda_probe_without_pycuda, torch_device


def cupy_device(ordinal: int):
    return _named("cupy.cuda.device", "Device", id=ordinal)


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


VARIANTS = ["auto", "reference", "numpy"]


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


BF16 = np.dtype(ml_dtypes.bfloat16)


WIDE = [np.float32, "float32", np.dtype("float32"), "f4", "<f4" if np.little_endian else ">f4", "single", np.single]


FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]


@pytest.fixture
def rng():
    return np.random.default_rng(19)


HALVES = [np.dtype(np.float16), BF16]


@pytest.fixture
def rng_2():
    return np.random.default_rng(20)


class _CudaInterfaceOnly:
    """An object that offers only ``__cuda_array_interface__`` (no ndim, shape or reshape)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (256, False), "version": 2, "strides": None}


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("given, name", [(torch_device("cpu"), "cpu"), (torch_device("cuda"), "cuda"),
                                         (torch_device("cuda", 1), "cuda:1"), (cupy_device(0), "cuda:0"),
                                         (cupy_device(3), "cuda:3"), ("Cuda:1 ", "Cuda:1 ")])
def test_device_objects_are_named_as_their_library_names_them(given, name):
    assert registry.device_arg_name(given) == name
    assert registry.resolve_device(given) == name.strip().lower()


def test_a_torch_cpu_device_computes_on_the_cpu_backend_and_is_cached_by_name():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((7, 3)).astype(np.float32)
    got = pg.gemm(a, b, device=torch_device("cpu"))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert pg.last_plan().backend == "cpu"
    assert pg.explain(a, b, device=torch_device("cpu")).cached  # the same plan as device="cpu" ...
    assert pg.explain(a, b, device="cpu").cached
    np.testing.assert_allclose(pg.matmul(a, b, device=torch_device("cpu")), got, rtol=1e-6)


def test_a_device_object_of_a_missing_backend_fails_as_its_name_does():
    a = np.ones((2, 2), np.float32)
    if any(i.name == "cuda" and i.available for i in pg.backends()):
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(BackendUnavailableError) as by_object:
        pg.gemm(a, a, device=torch_device("cuda", 1))
    with pytest.raises(BackendUnavailableError) as by_name:
        pg.gemm(a, a, device="cuda:1")
    assert str(by_object.value) == str(by_name.value)


@pytest.mark.parametrize("bad", [3, 1.5, ["cpu"], b"cpu", _named("jax", "Device", id=0), torch_device(7)])
def test_other_devices_are_type_errors_that_say_what_is_accepted(bad):
    a = np.ones((2, 2), np.float32)
    out = np.full((2, 2), 7.0, np.float32)
    with pytest.raises(TypeError) as info:
        pg.gemm(a, a, device=bad, out=out)
    assert isinstance(info.value, ArgumentTypeError) and isinstance(info.value, ArgumentError)
    assert isinstance(info.value, ValueError)  # a ValueError too: except ValueError still catches it
    text = str(info.value)
    assert "device must be a backend name" in text and "torch.device" in text and "cupy.cuda.Device" in text
    assert (out == 7.0).all()  # nothing written


@pytest.mark.cuda
def test_real_torch_and_cupy_devices_on_a_gpu():
    """On a machine with a GPU: ``device=tensor.device`` and ``device=cupy.cuda.Device(0)`` run
    on that device and give that library's array, the same values as ``device="cuda:0"``."""
    from tests.helpers import cuda_or_skip

    cuda_or_skip()
    torch = pytest.importorskip("torch")
    cp = pytest.importorskip("cupy")
    ta = torch.randn(33, 17, device="cuda:0")
    tb = torch.randn(17, 9, device="cuda:0")
    got = pg.gemm(ta, tb, device=ta.device)
    assert isinstance(got, torch.Tensor) and got.device == ta.device
    assert pg.last_plan().backend == "cuda:0"  # the plan names the device it ran on
    want = pg.gemm(ta, tb, device="cuda:0")
    assert torch.equal(got, want)
    ca, cb = cp.asarray(ta.cpu().numpy()), cp.asarray(tb.cpu().numpy())
    got_cp = pg.gemm(ca, cb, device=cp.cuda.Device(0))
    assert isinstance(got_cp, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(got_cp), want.cpu().numpy())


def test_a_builtin_backends_device_handle_is_not_held_to_the_plugin_checks():
    """``cuda:1`` is the cuda backend on its device 1, not a plugin: the core's checks of
    third-party backends (a copy of ``out`` kept per call, their errors recast as the plugin's
    fault) must not apply to it."""
    from polygemm import api

    class Handle:  # what a built-in's for_device returns: the backend under an indexed name
        name = "cuda:1"

    class Plugin:
        name = "somevendor"

    assert not api.plan_cache.is_plugin(Handle())  # type: ignore[arg-type]
    assert api.plan_cache.is_plugin(Plugin())  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [">f4", ">f2", ">f8"])
def test_big_endian_inputs_are_read_as_values(rng, dtype):
    a = rand(rng, (9, 7)).astype(dtype)
    b = rand(rng, (7, 5)).astype(dtype)
    res = pg.gemm(a, b, device="cpu")
    native = np.dtype(dtype).newbyteorder("=")
    assert res.dtype == native
    assert_close(res, a.astype(native), b.astype(native))
    plan = pg.explain(a, b, device="cpu")
    assert any("a copied once" in c for c in plan.copies) and any("b copied once" in c for c in plan.copies)


def test_mixed_byte_order_message_does_not_contradict_itself(rng):
    a = rand(rng, (4, 3)).astype(">f4")
    b = rand(rng, (3, 2)).astype(np.float64)
    with pytest.raises(pg.DTypeError) as err:
        pg.gemm(a, b, device="cpu")
    assert "a float32 and b float64" in str(err.value)


def test_masked_arrays_are_refused_not_unmasked(rng):
    a = np.ma.masked_array(rand(rng, (4, 3)), mask=np.eye(4, 3, dtype=bool))
    with pytest.raises(pg.ArgumentError, match=r"a is a masked array.*filled"):
        pg.gemm(a, rand(rng, (3, 2)), device="cpu")


def test_huge_integer_alpha_is_an_argument_error(rng):
    a, b = rand(rng, (2, 2)), rand(rng, (2, 2))
    with pytest.raises(pg.ArgumentError, match="alpha is too large"):
        pg.gemm(a, b, alpha=10**400, device="cpu")


@pytest.mark.parametrize("sa, sb", [((2, 5, 4), (3, 4, 6)), ((0, 5, 4), (3, 4, 6)), ((2, 3, 5, 4), (4, 3, 4, 6))])
def test_batches_that_do_not_broadcast_are_refused_naming_both_shapes(rng, sa, sb):
    """numpy.matmul refuses them (a ValueError); so does polygemm, naming a's and b's whole shapes, not only their
    batch dimensions, through gemm and matmul alike."""
    a, b = rand(rng, sa), rand(rng, sb)
    with pytest.raises(ValueError):
        np.matmul(a, b)
    for call in (pg.gemm, pg.matmul):
        with pytest.raises(ShapeError, match=re.escape(f"do not broadcast (numpy.matmul rules): a is {sa}, b is {sb}")):
            call(a, b, device="cpu")


@pytest.mark.parametrize("variant", VARIANTS)
def test_c_batched_or_broadcast_over_the_batch(rng, variant):
    """c of the result's shape, or a view broadcast to it (np.broadcast_to: stride 0 over the
    batch), with beta != 0; c is never written unless it is out."""
    a, b = rand(rng, (2, 1, 5, 4)), rand(rng, (3, 4, 6))
    for c in (rand(rng, (2, 3, 5, 6)), np.broadcast_to(rand(rng, (5, 6)), (2, 3, 5, 6)),
              np.broadcast_to(rand(rng, (1, 3, 5, 6)), (2, 3, 5, 6)), rand(rng, (2, 3, 6, 5)).swapaxes(-1, -2)):
        c0 = c.copy()
        got = pg.gemm(a, b, c, alpha=-0.5, beta=1.5, device="cpu", variant=variant)
        assert_within(got, a, b, c0, -0.5, 1.5)
        assert np.array_equal(c, c0)


@pytest.mark.parametrize("spelling", WIDE, ids=repr)
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
def test_every_spelling_of_float32_widens_half_batches(rng, dtype, spelling):
    a, b = rand(rng, (2, 7, 33), dtype), rand(rng, (33, 5), dtype)
    for variant in VARIANTS:
        got = pg.gemm(a, b, out_dtype=spelling, device="cpu", variant=variant)
        assert got.dtype == np.float32 and got.shape == (2, 7, 5)
        assert_within(got, a, b, out_dtype=np.float32)
    assert pg.matmul(a, b[:, 0], out_dtype=spelling, device="cpu").dtype == np.float32
    assert f"{np.dtype(dtype).name} -> float32" in str(pg.explain(a, b, out_dtype=spelling, device="cpu"))


def test_array_likes_compute_as_numpy_reads_them(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    ref = np.matmul(a, b)
    for x in (memoryview(a), memoryview(np.asfortranarray(a)), [list(map(np.float32, r)) for r in a], list(a)):
        got = pg.gemm(x, b, device="cpu")
        assert type(got) is np.ndarray and got.dtype == np.float32 and got.shape == (3, 2)
        assert_within(got, a, b)
    # array.array and a tuple as vectors, as numpy.matmul takes them
    v = array.array("f", b[:, 0])
    got = pg.matmul(a, v, device="cpu")
    assert got.shape == (3,) and got.dtype == np.float32 and np.allclose(got, ref[:, 0], rtol=1e-5)
    got = pg.matmul(tuple(float(t) for t in a[0].astype(np.float64)), b.astype(np.float64), device="cpu")
    assert got.shape == (2,) and got.dtype == np.float64


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_subclasses_come_back_as_numpy_matmul_gives_them(tmp_path):
    class Mine(np.ndarray):
        pass

    e = np.eye(3, dtype=np.float32)
    mm = np.memmap(tmp_path / "m.bin", dtype=np.float32, mode="w+", shape=(3, 3))
    mm[:] = e
    for x, y in ((np.matrix(e), e), (e, np.matrix(e)), (e.view(Mine), e), (mm, mm)):
        want = np.matmul(x, y)
        for got in (pg.gemm(x, y, device="cpu"), pg.matmul(x, y, device="cpu")):
            assert type(got) is type(want) and np.array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("alpha", [np.float16(0.5), np.int8(3), np.uint64(2), fractions.Fraction(1, 3), np.array(-2.0),
                                   ml_dtypes.bfloat16(1.5), 7])
def test_alpha_of_every_real_kind_scales_as_its_value(rng, alpha):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((5, 2)).astype(np.float32)
    c = rng.standard_normal((3, 2)).astype(np.float32)
    got = pg.gemm(a, b, c, alpha=alpha, beta=alpha, device="cpu")
    assert_within(got, a, b, c, float(alpha), float(alpha))
    assert pg.last_plan().problem.alpha == float(alpha)


def test_float16_overflow_over_a_long_k_is_inf_as_in_numpy_and_fits_in_float32():
    a, b = np.ones((2, 70000), np.float16), np.ones((70000, 2), np.float16)
    with np.errstate(over="ignore"):
        want = np.matmul(a, b)
    for variant in ("auto", "reference", "numpy"):
        got = pg.gemm(a, b, device="cpu", variant=variant)
        assert got.dtype == np.float16 and np.array_equal(got, want) and np.isposinf(got).all()
    got = pg.gemm(a, b, device="cpu", out_dtype=np.float32)
    assert got.dtype == np.float32 and (got == 70000).all()
    # partial sums past float16's range that cancel: exact, as float32 accumulation gives
    x, y = np.full((1, 4), 60000, np.float16), np.array([[1], [1], [-1], [-1]], np.float16)
    assert pg.gemm(x, y, device="cpu")[0, 0] == 0


def test_without_an_nvidia_driver_cuda_says_so_not_to_install_pycuda(monkeypatch):
    # on a laptop without an NVIDIA GPU, installing pycuda is no way on: it is a source build that needs cuda.h and
    # libcuda.so, after which the backend would still be unavailable. (PyCUDA installed without a driver fails its
    # import the same way.)
    av = cuda_probe_without_pycuda(monkeypatch, driver_loads=False)
    assert not av.ok
    first, *rest = av.reason.splitlines()
    assert first.startswith("no NVIDIA driver (libcuda.so.1 does not load") or first.startswith("no NVIDIA driver (nvcuda.dll")
    assert "needs an NVIDIA GPU and its driver" in first and "pip install" not in first and len(first) <= 120
    assert any("cannot open shared object file" in line for line in rest)  # the loader's words, for info -v
    assert any("pip install 'polygemm[cuda]'" in line for line in rest)  # what to do once there is a GPU


@pytest.mark.parametrize("da_, db_, cast", [
    (np.float16, np.float32, "a.astype(np.float32)"),
    (np.float32, np.float16, "b.astype(np.float32)"),
    (np.float32, np.float64, "a.astype(np.float64)"),
    (BF16, np.float32, "a.astype(np.float32)"),
])
def test_operands_of_two_dtypes_are_told_to_cast_the_narrower_up(da_, db_, cast):
    # numpy.matmul computes a float16 a beside a float32 b in float32; casting b down to float16 would turn values
    # past 65504 into inf, so the hint casts the narrower operand up
    # the wider operand holds 70000, which the narrower dtype (float16, bfloat16's 8 bits) cannot hold as it is
    wide = np.result_type(da_, db_)
    a = np.full((2, 3), 70000.0 if da_ == wide else 1.0).astype(da_)
    b = np.full((3, 2), 70000.0 if db_ == wide else 1.0).astype(db_)
    with pytest.raises(DTypeError, match="must share one dtype") as info:
        pg.gemm(a, b, device="cpu")
    assert cast in str(info.value) and "astype(a.dtype)" not in str(info.value)
    # followed as written, the product is numpy.matmul's, dtype and value
    fixed = {"a": a, "b": b}
    name = cast[0]
    fixed[name] = eval(cast, {"np": np}, {"a": a, "b": b})
    want = np.matmul(a, b)
    got = pg.gemm(fixed["a"], fixed["b"], device="cpu")
    assert got.dtype == want.dtype and np.array_equal(got, want) and (got == 210000.0).all()


def test_a_list_beside_an_array_of_another_dtype_keeps_the_arrays_dtype():
    a = np.ones((2, 3), np.float16)
    with pytest.raises(DTypeError, match=r"np\.asarray\(b, dtype=np\.float16\)"):  # the list is int64 to NumPy
        pg.gemm(a, [[1, 2], [3, 4], [5, 6]], device="cpu")
    with pytest.raises(DTypeError, match=r"np\.asarray\(a, dtype=np\.float32\)"):
        pg.gemm([[1.0, 2.0, 3.0]], np.ones((3, 2), np.float32), device="cpu")


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.complex128])
def test_int_bool_and_complex_inputs_compute_as_numpy_matmul_does(dtype):
    a = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    for call in (pg.gemm, pg.matmul):
        got = call(a, a.T, device="cpu")
        assert got.dtype == np.matmul(a, a.T).dtype and np.array_equal(got, np.matmul(a, a.T))


@pytest.mark.parametrize("sa, sb", [((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 3), (3, 0)), ((0,), (0,)), ((3,), (3, 0)),
                                    ((5, 0, 3), (3, 2)), ((0, 2, 3), (1, 3, 4))])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_zero_size_products_match_numpy_matmul(sa, sb, dtype):
    a, b = np.ones(sa, dtype), np.ones(sb, dtype)
    want, got = np.matmul(a, b), pg.matmul(a, b, device="cpu")
    assert type(got) is type(want) and got.shape == np.shape(want) and got.dtype == want.dtype
    assert np.array_equal(got, want)


@pytest.mark.parametrize("sa, sb", [((3,), (4,)), ((2, 3), (4,)), ((2, 3, 4), (3, 4, 5)), ((4,), (3, 4)), ((2, 3, 4), (3, 3, 5))])
def test_matmul_refuses_what_numpy_matmul_refuses_with_a_value_error(sa, sb):
    """Where numpy.matmul raises ValueError (inner dimensions, batches that do not broadcast), polygemm.matmul raises
    ShapeError, a ValueError, and an out given is left as it was."""
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(ShapeError) as info:
        pg.matmul(a, b, device="cpu")
    assert isinstance(info.value, ValueError)
    assert "inner dimensions differ" in str(info.value) or "do not broadcast" in str(info.value)


@pytest.mark.parametrize("da_, db_", list(itertools.product(FLOATS, FLOATS)), ids=str)
def test_every_float_pair_gives_its_dtype_or_names_the_dtype_numpy_matmul_computes_in(da_, db_):
    a = (np.arange(12).reshape(3, 4) % 5).astype(da_)
    b = (np.arange(20).reshape(4, 5) % 3).astype(db_)
    want = np.matmul(a, b)
    if da_ == db_:
        got = pg.gemm(a, b, device="cpu")
        # one dtype in, that dtype out (NumPy's matmul widens bfloat16 to float32; polygemm keeps it)
        assert got.dtype == da_
        assert want.dtype == (np.float32 if da_ == BF16 else da_)
        assert np.array_equal(got.astype(np.float64), want.astype(np.float64))  # small integers: exact in all four
        return
    with pytest.raises(DTypeError, match="must share one dtype") as info:
        pg.gemm(a, b, device="cpu")
    casts = set(re.findall(r"\.astype\(np\.(\w+)\)", str(info.value)))
    # the first cast the message offers is to the dtype numpy.matmul computes the pair in
    first = re.search(r"\.astype\(np\.(\w+)\)", str(info.value))
    assert first is not None and first.group(1) == want.dtype.name, (str(info.value), want.dtype)
    assert want.dtype.name in casts


@pytest.mark.parametrize("other", [np.int8, np.uint8, np.int32, np.int64, np.bool_, np.complex64, np.complex128],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("side", ["a", "b"])
def test_dtypes_numpy_computes_and_polygemm_refuses_name_the_operand(other, side):
    f = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    a = f[0].astype(other) if side == "a" else f[0]
    b = f[1].astype(other) if side == "b" else f[1]
    want = np.matmul(a, b).dtype  # NumPy computes every pair, promoted
    for call in (pg.gemm, pg.matmul):
        with pytest.raises(DTypeError, match=rf"a float32 and b {np.dtype(other).name}|a {np.dtype(other).name} and b float32") as info:
            call(a, b, device="cpu")
        msg = str(info.value)
        assert f"astype(np.{want.name})" in msg  # the cast to the dtype numpy.matmul computes the pair in
        assert "astype(np.float32)" not in msg or want == np.float32  # never a complex or wide integer cast down
        if np.dtype(other).name in ("int32", "int64") and want == np.float64 and np.dtype(other).name == "int64":
            assert "2**53" in msg  # int64 to float64 is exact only below 2**53, and said so


@pytest.mark.parametrize("c_shape", [(), (5,), (1, 5), (3, 1), (1, 1)], ids=str)
def test_c_in_each_form_numpy_broadcasts_is_refused_with_the_hint_that_then_matches_a_full_c(rng, c_shape):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    c = rng.standard_normal(c_shape)
    want = 0.5 * np.matmul(a, b) + 0.25 * c  # NumPy's broadcasting
    with pytest.raises(ShapeError, match=re.escape("pass it broadcast, e.g. np.broadcast_to(c, (3, 5))")):
        pg.gemm(a, b, c, alpha=0.5, beta=0.25, device="cpu")
    c0 = c.copy()
    view = np.broadcast_to(c, (3, 5))
    got = pg.gemm(a, b, view, alpha=0.5, beta=0.25, device="cpu")
    full = pg.gemm(a, b, np.ascontiguousarray(view), alpha=0.5, beta=0.25, device="cpu")
    assert np.array_equal(got, full) and np.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(c, c0) and not np.shares_memory(got, c)


@pytest.mark.parametrize("c", [1.5, [1.0, 2.0, 3.0, 4.0, 5.0], np.arange(5.0)], ids=["number", "list", "float64 row"])
def test_a_c_that_broadcasts_is_told_a_broadcast_of_the_results_dtype_and_the_hint_computes(rng, c):
    """Beside float32 operands, the hint for a number or a float64 row gives c the result's dtype: following it computes
    (np.broadcast_to(c, ...) alone would be refused next for its float64)."""
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    with pytest.raises(ShapeError) as info:
        pg.gemm(a, b, c, device="cpu")
    hint = str(info.value).split("e.g. ")[1]
    assert "np.float32" in hint
    got = pg.gemm(a, b, eval(hint, {"np": np, "c": c}), device="cpu")
    assert got.dtype == np.float32 and np.allclose(got, a @ b + np.asarray(c, np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("scalar", [np.True_, np.complex64(2), np.array([2.0]), np.float32("nan"),
                                    np.float16("inf")], ids=repr)
def test_scalars_numpy_would_broadcast_or_propagate_are_refused(rng, scalar):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    err = ArgumentTypeError if isinstance(scalar, (np.bool_, np.complexfloating, np.ndarray)) else ArgumentError
    for kw in ({"alpha": scalar}, {"beta": scalar}):
        with pytest.raises(err):
            pg.gemm(a, b, np.zeros((3, 5)), device="cpu", **kw)


@pytest.mark.parametrize("sa, sb", [((2, 3, 4), (3, 4, 6)), ((0, 3, 4), (2, 4, 6)), ((2, 1, 3, 4), (3, 1, 4, 6))],
                         ids=str)
def test_batches_numpy_cannot_broadcast_are_a_shape_error(sa, sb):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(ShapeError, match=r"do not broadcast \(numpy.matmul rules\)"):
        pg.gemm(a, b, device="cpu")
    with pytest.raises(ShapeError, match=r"do not broadcast"):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("a, b, name", [
    (np.array(2.0, np.float32), np.ones(3, np.float32), "a"),  # a 0-D array beside a vector
    (np.ones(3, np.float32), np.float32(2.0), "b"),  # a NumPy scalar beside a vector
    (2.0, np.ones(3, np.float32), "a"),  # a Python float
    (np.float32(2.0), np.float32(3.0), "a"),
    (np.ones((2, 3), np.float32), np.array(1.0, np.float32), "b"),
])
def test_matmul_refuses_scalars_as_numpy_does(a, b, name):
    """numpy.matmul raises ValueError for a 0-D operand; so does polygemm.matmul (a ShapeError
    naming it), not an IndexError or AttributeError from inside."""
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(pg.ShapeError, match=rf"^{name} is a scalar \(0-D"):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("a, b, named", [
    (np.ones(3, np.float32), [[1.0, 2.0], [3.0, 4.0]], "a, a vector of 3"),
    ([[1.0, 2.0, 3.0]], np.ones(2), "b, a vector of 2"),
])
def test_matmul_vector_mismatch_beside_a_list(a, b, named):
    """A vector beside a list matrix of the wrong size is a ShapeError naming the vector (the message reads no .shape
    off the list)."""
    with pytest.raises(pg.ShapeError, match=named):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("given, kind", [([[1, 2], [3, 4]], "list"), (((1, 0), (0, 1)), "tuple")])
def test_an_integer_list_is_told_how_a_list_converts(given, kind):
    """A list of Python ints reads as int64; a list has no astype, so the DTypeError says np.asarray(a, dtype=...) and
    how NumPy read the list."""
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(a, dtype=np\.float64\)"):  # beside a float64 array: its dtype
        pg.gemm(given, np.eye(2), device="cpu")
    with pytest.raises(pg.DTypeError, match=r"a\.astype\(np\.float64\) \(exact only for values below 2\*\*53"):  # an array: its astype
        pg.gemm(np.ones((2, 2), np.int64), np.eye(2), device="cpu")
    assert np.array_equal(pg.gemm(given, given, device="cpu"), np.matmul(given, given))  # alone: int64, as NumPy reads it


@pytest.mark.parametrize("a, b, says", [
    (np.ones((1, 2), np.int8), [[300], [2]], r"a\.astype\(np\.int64\)"),              # not b to int8: 300 overflows
    (np.ones((1, 2), np.float16), [[1e6], [2]], r"a\.astype\(np\.float64\)"),         # not b to float16: 1e6 is inf
    (np.ones((1, 2), np.float32), [[1 + 1j], [2]], r"a\.astype\(np\.complex128\)"),   # not b to float32: 1j is lost
    (np.ones((1, 2), np.float32), [[1.5], [2]], r"np\.asarray\(b, dtype=np\.float32\)"),  # exact: the array's dtype
    (np.ones((1, 2), np.float32), [[2**60 + 1], [1]], r"b\.astype|dtype=np\.float64"),   # not b to float32: off by 1
], ids=["int8, 300", "float16, 1e6", "float32, complex", "float32, exact", "float32, 2**60 + 1"])
def test_a_list_is_told_a_cast_that_keeps_its_values(a, b, says):
    """A list beside an array is told to take the array's dtype only where every value of it survives that cast; else
    both go to the dtype numpy.matmul computes them in."""
    with pytest.raises(pg.DTypeError, match=says):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("make", [range, lambda n: array.array("l", range(n)), lambda n: memoryview(np.arange(n))],
                         ids=["range", "array.array", "memoryview"])
def test_a_vector_of_a_sequence_kind_is_told_a_cast_it_can_make(make):
    """A 1-D range, array.array or memoryview has no astype: its hint says np.asarray(...), and following it works."""
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(a, dtype=np\.float64\)") as info:
        pg.matmul(make(3), np.ones((3, 2)), device="cpu")
    assert "a.astype" not in str(info.value)
    assert np.array_equal(pg.matmul(np.asarray(make(3), dtype=np.float64), np.ones((3, 2)), device="cpu"), [3.0, 3.0])
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(b, dtype=np\.float64\)"):
        pg.matmul(np.ones((2, 3)), make(3), device="cpu")
    assert np.array_equal(pg.matmul(np.ones((2, 3), np.int64), make(3), device="cpu"), [3, 3])  # one dtype: computed


def test_matmul_of_int_lists_is_told_how_to_convert_a_list():
    """A list vector keeps the list's conversion hint (np.asarray(..., dtype=...)), as gemm
    gives it, not ``a.astype`` (a list has none); float lists still run as vectors."""
    import polygemm as pg
    from polygemm.errors import DTypeError

    assert pg.matmul([1, 2], [3, 4], device="cpu") == 11  # int64 vectors, as numpy.matmul computes them
    with pytest.raises(DTypeError, match=r"np\.asarray\(b, dtype=np\.float32\)"):
        pg.matmul(np.ones((2, 2), np.float32), (3, 4), device="cpu")
    got = pg.matmul([1.0, 2.0], [[3.0], [4.0]], device="cpu")
    assert got.shape == (1,) and got[0] == 11.0
    got = pg.matmul(np.ones((3, 2), np.float64), [1.0, 2.0], device="cpu")
    assert got.shape == (3,) and np.allclose(got, 3.0)


@pytest.mark.parametrize("value", [1e-45, 3e-42, 1e-40, 1e-38], ids=lambda v: f"{v:g}")
@pytest.mark.parametrize("variant", ["auto", "blas", "numpy", "reference"])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float16), BF16], ids=lambda d: d.name)
def test_a_subnormal_alpha_scales_at_its_own_value(dtype, variant, value):
    """A float32 subnormal keeps fewer bits: scaled in float32, alpha=1e-45 would scale by 1.4e-45 (every result 40%
    off) and 1e-40 by 0.99999e-40, outside polygemm.testing's own bound, so the cpu backend scales in float64
    there, and in the work type (float32) only where alpha neither overflows it nor is a subnormal it would round."""
    big = 1e19 if dtype != np.float16 else 60000.0
    a = np.full((3, 2), big, dtype)  # K = 2: 2e38, near float32's top, exact in the float32 accumulation
    b = np.full((2, 2), big, dtype)
    out_dtype = np.float32 if dtype in HALVES else None  # the product fits float32, not float16 or bfloat16's results
    got = pg.gemm(a, b, alpha=value, device="cpu", variant=variant, out_dtype=out_dtype)
    assert_within(got, a, b, None, value, 0.0, out_dtype=out_dtype)
    want = 2 * float(a[0, 0]) * float(b[0, 0]) * value
    assert abs(float(got[0, 0]) - want) <= 1e-6 * want  # within a float32 rounding or two of the value asked for


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
def test_alpha_zero_with_finite_operands_gives_beta_c_to_the_bit(dtype, variant, rng_2):
    """alpha = 0 with finite a and b is beta * c rounded once: c itself for beta = 1, 2c exactly for beta = 2."""
    a = rng_2.standard_normal((5, 6)).astype(dtype)
    b = rng_2.standard_normal((6, 7)).astype(dtype)
    c = rng_2.standard_normal((5, 7)).astype(dtype)
    assert np.array_equal(pg.gemm(a, b, c, alpha=0.0, beta=1.0, device="cpu", variant=variant), c)
    assert np.array_equal(pg.gemm(a, b, c, alpha=0, beta=2, device="cpu", variant=variant), (c.astype(np.float64) * 2).astype(dtype))


@pytest.mark.parametrize("value", [np.array([1j]), np.array([True]), np.array([1.0, 2.0])])
def test_arrays_whose_item_is_no_scalar_get_no_item_hint(value):
    """A one-element complex or bool array, or two elements: .item() would be refused too, so it is not offered."""
    m = np.ones((2, 2), np.float32)
    with pytest.raises(ArgumentTypeError, match=r"^alpha must be a real number") as info:
        pg.gemm(m, m, alpha=value, device="cpu")
    assert ".item()" not in str(info.value)


def test_integer_lists_compute_as_numpy_reads_them():
    """numpy.matmul computes int64 lists in int64; so does polygemm."""
    got = pg.matmul([[1, 2], [3, 4]], [[1, 0], [0, 1]], device="cpu")
    assert got.dtype == np.int64 and np.array_equal(got, [[1, 2], [3, 4]])


@pytest.mark.parametrize("a, b, named", [
    ([1.0, 2.0, 3.0], np.ones((2, 2)), "a, a vector of 3"),
    (np.ones((2, 2)), [1.0, 2.0, 3.0], "b, a vector of 3"),
    ((1.0, 2.0, 3.0), (1.0, 2.0), "a, a vector of 3, taken as a row 1×3; b, a vector of 2"),
])
def test_matmul_list_vector_of_the_wrong_length_is_a_shape_error(a, b, named):
    # a list (or tuple) vector of the wrong length is a ShapeError (a ValueError, as numpy.matmul raises), its message
    # written without the .shape a list lacks
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(pg.ShapeError, match=named):
        pg.matmul(a, b, device="cpu")


def test_a_timedelta_is_no_scale_factor():
    # alpha=np.timedelta64(1) is refused, not taken as 1.0: NumPy counts timedelta64 among its signed integers, and
    # its product with one is a timedelta64 array, a result no GEMM gives
    a = np.ones((2, 2), np.float32)
    assert (np.ones(2) * np.timedelta64(1)).dtype.kind == "m"
    for bad in (np.timedelta64(1), np.array(np.timedelta64(2, "s"))):
        with pytest.raises(pg.ArgumentError, match=r"alpha must be a real number .*timedelta64"):
            pg.gemm(a, a, alpha=bad, device="cpu")
        with pytest.raises(pg.ArgumentError, match=r"beta must be a real number .*timedelta64"):
            pg.gemm(a, a, a, beta=bad, device="cpu")


def test_a_longdouble_beyond_float64_is_too_large_not_infinite():
    # alpha=np.longdouble("1e4000") is finite: the error says it is too large, not that it must be finite
    if not np.isfinite(np.longdouble("1e4000")):
        pytest.skip("longdouble is float64 here")
    a = np.ones((2, 2), np.float32)
    with pytest.raises(pg.ArgumentError, match=r"alpha is too large for a float64") as info:
        pg.gemm(a, a, alpha=np.longdouble("1e4000"), device="cpu")
    assert "must be finite" not in str(info.value)
    with pytest.raises(pg.ArgumentError, match="alpha must be finite"):
        pg.gemm(a, a, alpha=np.longdouble("inf"), device="cpu")


def test_a_device_index_with_a_leading_zero_from_the_environment_says_so(monkeypatch):
    # $POLYGEMM_DEVICE=cpu:01 is refused for its leading zero, not read as cpu:1, and the refusal names the variable
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu:01")
    with pytest.raises(pg.ArgumentError, match=r"e\.g\. 'cpu:1'; got '01' \(the device comes from \$POLYGEMM_DEVICE='cpu:01'"):
        pg.gemm(np.ones((2, 2)), np.ones((2, 2)))


def test_matmul_reads_the_dimensions_of_an_interface_only_device_array():
    # an object offering only __cuda_array_interface__ is no scalar to matmul, as to gemm: its dimensions
    # are the interface's
    with pytest.raises(pg.PolygemmError) as exc:
        pg.matmul(_CudaInterfaceOnly((4, 3)), _CudaInterfaceOnly((3, 5)), device="cpu")
    assert "scalar" not in str(exc.value), str(exc.value)
    with pytest.raises(pg.ShapeError, match=r"a is a vector \(1-D\) _CudaInterfaceOnly that polygemm cannot reshape"):
        pg.matmul(_CudaInterfaceOnly((3,)), _CudaInterfaceOnly((3, 5)), device="cpu")


@pytest.mark.parametrize("variant, means", [("AUTO", "auto"), ("auto ", "auto"), ("BLAS", "blas"), (" blas", "blas"),
                                            ("refrence", "reference")])
def test_a_misspelt_variant_of_a_named_device_is_told_the_name_meant(rng, variant, means):
    # device names ignore case and spaces, variant names do not; the refusal lists the variants with 'auto' and names
    # the one meant (variant="AUTO" -> 'auto')
    a, b = _f32(rng, 3, 4), _f32(rng, 4, 5)
    with pytest.raises(pg.UnsupportedProblemError) as exc:
        pg.gemm(a, b, device="cpu", variant=variant)
    msg = str(exc.value)
    assert f"variant={variant!r}" in msg and f"did you mean {means!r}" in msg, msg
    assert all(name in msg for name in ("blas", "reference", "numpy", "'auto'")), msg


def test_a_variant_far_from_every_name_gets_no_guess(rng):
    a, b = _f32(rng, 3, 4), _f32(rng, 4, 5)
    for variant in ("cublas", "nope"):  # cuda's vendor variant is no misspelling of cpu's blas
        with pytest.raises(pg.UnsupportedProblemError) as exc:
            pg.gemm(a, b, device="cpu", variant=variant)
        assert "did you mean" not in str(exc.value) and str(exc.value).endswith("known: blas, reference, numpy (or 'auto')")


@pytest.mark.parametrize("variant, hint", [("nope", ""), ("BLAS", " (did you mean 'blas'?)")])
def test_an_unknown_variant_with_device_auto_lists_what_the_backends_have(rng, monkeypatch, variant, hint, without_gpu):
    # with device="auto" the message lists what each backend has, not only that cpu has no variant 'nope'
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    a, b = _f32(rng, 3, 4), _f32(rng, 4, 5)
    for device in (None, "auto"):
        with pytest.raises(pg.UnsupportedProblemError) as exc:
            pg.explain(a, b, device=device, variant=variant)
        msg = str(exc.value)
        assert f"cpu: has no variant {variant!r}{hint})" in msg
        assert msg.endswith("; their variants: cpu: blas, reference, numpy")
        assert "\n" not in msg


@pytest.mark.parametrize("given", [{1: 2}, {1, 2}, (x for x in range(3)), object()], ids=["dict", "set", "generator", "object"])
def test_matmul_of_a_non_numeric_object_is_a_dtype_error_not_a_scalar(given):
    """NumPy reads a dict, a set or a generator as one element of dtype object: matmul says so (a TypeError, as
    numpy.matmul raises for object operands), not "a is a scalar: scale with a * b"."""
    with pytest.raises(pg.DTypeError, match=rf"a is a {type(given).__name__}, which NumPy reads as a 0-D object array"):
        pg.matmul(given, np.ones((2, 2)), device="cpu")
    with pytest.raises(pg.ShapeError, match="a is a scalar"):
        pg.matmul(3.0, np.ones((2, 2)), device="cpu")
