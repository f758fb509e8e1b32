"""Arrays of other libraries on the CPU: DLPack, the array API, the same kind out, mixed kinds refused."""

from __future__ import annotations

import array
import ctypes
import re
import types

import numpy as np
import pytest

import polygemm
import polygemm as pg
from polygemm.errors import ArgumentTypeError, DTypeError
from polygemm.testing import assert_close

from tests.helpers import assert_array_within, CPUArrayAPI, Dlpack1, DLPackOnly, DLPackProducer, fake_torch, OnlyArray, StreamOnly


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _fake_cupy(monkeypatch):
    """A stand-in ``cupy`` module: ndarray with CuPy's attributes (``data`` a MemoryPointer with
    ``ptr`` and ``device_id``), and the current stream's pointer in a dict the test sets."""
    import sys
    import types

    current = {"ptr": 0, "reads": 0}
    fake = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - CuPy's name
        def __init__(self, ptr, shape, strides, dtype, device=0):
            self.data = types.SimpleNamespace(ptr=ptr, device_id=device)
            self.shape, self.strides, self.dtype = shape, strides, np.dtype(dtype)
            self.size = int(np.prod(shape))

    def get_current_stream():
        current["reads"] += 1
        return types.SimpleNamespace(ptr=current["ptr"])

    fake.ndarray = ndarray
    fake.cuda = types.SimpleNamespace(get_current_stream=get_current_stream)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return ndarray, current


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


class NoArgs(DLPackProducer):
    def __dlpack__(self):
        self.log.append({})
        return self.x.__dlpack__()


@pytest.fixture
def ops(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    return a, b


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def test_dlpack_only_objects_are_read_without_a_copy(rng):
    a, b = rand(rng, (7, 5)), rand(rng, (5, 3))
    got = pg.gemm(DLPackOnly(a), DLPackOnly(b), device="cpu")
    assert isinstance(got, np.ndarray)
    assert_close(got, a, b)
    assert pg.explain(DLPackOnly(a), DLPackOnly(b), device="cpu").copies == []


def test_none_and_unsupported_objects_are_named(rng):
    with pytest.raises(pg.ArgumentError, match="a must be a matrix .* got None"):
        pg.gemm(None, rand(rng, (2, 2)))
    with pytest.raises(pg.DTypeError, match="b is a dict"):
        pg.gemm(rand(rng, (2, 2)), {"x": 1})
    ro = np.zeros((2, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(pg.ArgumentError, match="out must be an array polygemm can write"):
        pg.gemm(rand(rng, (2, 2)), rand(rng, (2, 2)), out=DLPackOnly(ro))


def test_a_writeable_dlpack_out_receives_the_result(rng):
    a, b = rand(rng, (4, 3)), rand(rng, (3, 5))
    target = np.full((4, 5), np.nan, np.float32)
    out = DLPackOnly(target)
    assert pg.gemm(a, b, out=out, device="cpu") is out
    assert_close(target, a, b)


def test_torch_cpu_tensors_give_torch_tensors():
    torch = pytest.importorskip("torch")
    a, b, c = torch.randn(9, 6), torch.randn(6, 4), torch.randn(9, 4)
    got = pg.gemm(a, b, c, alpha=0.5, beta=2.0, device="cpu")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.shape == (9, 4)
    assert_close(got.numpy(), a.numpy(), b.numpy(), c.numpy(), 0.5, 2.0)
    batched = pg.matmul(torch.randn(3, 9, 6), b)
    assert isinstance(batched, torch.Tensor) and batched.shape == (3, 9, 4)
    half = pg.gemm(a.half(), b.half(), out_dtype=torch.float32)
    assert isinstance(half, torch.Tensor) and half.dtype == torch.float32
    out = torch.empty(9, 4)
    assert pg.gemm(a, b, out=out) is out
    assert_close(out.numpy(), a.numpy(), b.numpy())


def test_mixed_libraries_are_refused_naming_both(rng):
    torch = pytest.importorskip("torch")
    with pytest.raises(pg.ArgumentError, match=r"a is a torch.Tensor and b a ndarray"):
        pg.gemm(torch.randn(3, 3), rand(rng, (3, 3)))


def test_cupy_view_reads_attributes_and_names_the_legacy_stream(monkeypatch):
    """The repeated call's view of a CuPy array (no ``__cuda_array_interface__`` dict built):
    its key carries shape, strides, dtype, the pointer's 16-byte class and device; CuPy's null
    stream is named as the legacy default stream (1), as the interface itself names it."""
    from polygemm.interop import cupy_view

    ndarray, current = _fake_cupy(monkeypatch)
    a = ndarray(0x7F0000000008, (3, 4), (8, 2), "float16", device=1)
    key, ptr, stream = cupy_view(a)
    assert ptr == 0x7F0000000008 and stream == 1
    assert key == ("cuda", (3, 4), (8, 2), np.dtype("float16"), False, 8, ndarray, 1)
    current["ptr"] = 0xABC0
    assert cupy_view(a)[2] == 0xABC0
    assert cupy_view(np.ones(3)) is None
    empty = ndarray(0x7F0000000008, (0, 4), (8, 2), "float16")
    assert cupy_view(empty)[1] == 0  # no data: no pointer to overlap or align


def test_cupy_views_of_a_call_read_the_stream_once_and_match_each_operands_view(monkeypatch):
    """A CuPy user's call is keyed from its four operands' views at once: each the same as
    ``cupy_view`` gives for it alone (None's view for an absent c or out), CuPy's current stream
    read once; anything else in the call (a NumPy array, another library) leaves it to the
    per-operand views."""
    from polygemm.interop import cupy_view, cupy_views
    from polygemm.problem import operand_view

    ndarray, current = _fake_cupy(monkeypatch)
    current["ptr"] = 0x5000
    a = ndarray(0x7F0000000000, (8, 4), (8, 2), "float16")
    b = ndarray(0x7F0000001000, (4, 6), (12, 2), "float16")
    out = ndarray(0x7F0000002010, (8, 6), (12, 2), "float16")
    current["reads"] = 0
    views = cupy_views(a, b, None, out)
    assert current["reads"] == 1
    assert views == (cupy_view(a), cupy_view(b), operand_view(None), cupy_view(out))
    assert views[3][0][5] == 0 and views[3][2] == 0x5000  # 16-byte class of 0x...2010; the current stream
    assert cupy_views(a, b, out, out)[2] == cupy_view(out)
    assert cupy_views(a, np.ones((4, 6)), None, None) is None
    assert cupy_views(a, b, None, np.ones((8, 6))) is None
    assert cupy_views(np.ones((8, 4)), b, None, None) is None


def test_torch_views_of_a_call_read_the_stream_once_and_match_each_operands_view(monkeypatch):
    """The same for torch: CUDA tensors on one GPU give each its ``torch_view``, the device's
    current stream read once; a CPU tensor, one on another GPU, one that requires grad, or
    another library's array among them leaves it to the per-operand views."""
    import sys
    import types

    from polygemm.interop import torch_view, torch_views
    from polygemm.problem import operand_view

    Tensor = fake_torch(monkeypatch)
    reads = {"n": 0}

    def raw_stream(index):
        reads["n"] += 1
        return 0x9000 + index

    sys.modules["torch"]._C = types.SimpleNamespace(_cuda_getCurrentRawStream=raw_stream)
    a, b = Tensor(0x1000, (8, 4), (4, 1), index=1), Tensor(0x2008, (4, 6), (6, 1), index=1)
    out = Tensor(0x3000, (8, 6), (6, 1), index=1)
    views = torch_views(a, b, None, out)
    assert reads["n"] == 1
    assert views == (torch_view(a), torch_view(b), operand_view(None), torch_view(out))
    assert views[1][0] == ("cuda", (4, 6), (6, 1), "<f2", False, 8, Tensor, 1) and views[1][2] == 0x9001  # strides in elements
    assert torch_views(a, b, Tensor(0x4000, (8, 6), (6, 1), index=0), None) is None  # c on another GPU
    assert torch_views(a, Tensor(0x2000, (4, 6), (6, 1), index=1, grad=True), None, None) is None
    assert torch_views(Tensor(0, (8, 4), (4, 1), device="cpu"), Tensor(0, (4, 6), (6, 1), device="cpu"), None, None) is None
    assert torch_views(a, np.ones((4, 6)), None, None) is None


def test_torch_views_ask_each_bit_a_tensor_can_carry_once(monkeypatch):
    """With torch's negative and conjugate bits (torch >= 1.10) the views come from one pass over the tensors: the same
    views, the conjugate bit asked of complex tensors only (a real tensor's conj() is itself), and a lazy negation or
    conjugate, or an inference out outside inference mode, left to the full normalization."""
    import sys

    from polygemm.interop import torch as torch_module
    from polygemm.interop import torch_view, torch_views

    Tensor = fake_torch(monkeypatch)
    asked = []
    monkeypatch.setattr(Tensor, "is_neg", lambda self: getattr(self, "neg", False), raising=False)
    monkeypatch.setattr(Tensor, "is_conj", lambda self: asked.append(self) or getattr(self, "conj", False), raising=False)
    monkeypatch.setattr(Tensor, "is_inference", lambda self: getattr(self, "inference", False), raising=False)
    mode = {"on": False}
    sys.modules["torch"].is_inference_mode_enabled = lambda: mode["on"]
    a, b, out = Tensor(0x1000, (8, 4), (4, 1)), Tensor(0x2008, (4, 6), (6, 1)), Tensor(0x3000, (8, 6), (6, 1))
    views = torch_views(a, b, out, out)
    assert views == (torch_view(a), torch_view(b), torch_view(out), torch_view(out))
    asked.clear()
    torch_views(a, b, None, out)
    assert asked == []  # float16: no conjugate bit to ask
    neg = Tensor(0x2000, (4, 6), (6, 1))
    neg.neg = True
    assert torch_views(a, neg, None, None) is None
    z = Tensor(0x2000, (4, 6), (6, 1))
    z.dtype, z.conj = "complex64", True
    monkeypatch.setitem(torch_module._TORCH_TYPESTR, "complex64", "<c8")  # (the stand-in's interface says float16 always)
    assert torch_views(a, z, None, None) is None and asked == [z]
    out.inference = True
    assert torch_views(a, b, None, out) is None
    mode["on"] = True
    assert torch_views(a, b, None, out) is not None


def test_a_missing_array_api_compat_is_an_error_not_a_result_of_another_kind(monkeypatch):
    """Without array-api-compat a CuPy or torch operand's result could only come back as a
    pycuda array; the call says what is missing instead."""
    import sys

    from polygemm import interop

    class FakeDeviceArray:  # stands for a cupy.ndarray (its module decides the kind)
        pass

    FakeDeviceArray.__module__ = "cupy._core.core"
    monkeypatch.setitem(sys.modules, "array_api_compat", None)  # import array_api_compat -> ImportError
    with pytest.raises(ImportError, match=r"cupy results .*array-api-compat.*pip install array-api-compat"):
        interop.allocator("cupy", FakeDeviceArray())
    with pytest.raises(ImportError, match="array-api-compat"):
        interop.host_wrapper("torch", FakeDeviceArray())


def test_array_likes_numpy_takes(rng):
    """objects offering only ``__array__``, only ``__array_interface__``, memoryviews, ``array.array``, nested
    tuples, lists of NumPy float32 scalars and a read-only array through DLPack (NumPy 2 exports the flag) are read as
    numpy.matmul reads them: the same result dtype and shape, values assert_array_within the bound, vectors too."""
    a, b, v = rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), rng.standard_normal(4)
    ro = a.copy()
    ro.flags.writeable = False
    for x in (OnlyArray(a), OnlyInterface(a), memoryview(a), tuple(map(tuple, a)), OnlyDLPack(ro)):
        got = pg.matmul(x, b, device="cpu")
        assert got.dtype == np.float64 and got.shape == (3, 2)
        assert_array_within(got, a, b)
    for x in (OnlyArray(v), memoryview(v), array.array("d", v), tuple(v), OnlyDLPack(v)):
        got = pg.matmul(x, b, device="cpu")
        assert got.shape == (2,) and got.dtype == np.float64
        assert_array_within(got[None], v[None], b)
    scalars = [np.float32(x) for x in v]
    b32 = b.astype(np.float32)
    got = pg.matmul(scalars, b32, device="cpu")
    assert got.dtype == np.matmul(scalars, b32).dtype == np.float32
    assert_array_within(got[None], np.asarray(scalars)[None], b32)


@pytest.mark.parametrize("kind", [Dlpack1, StreamOnly, NoArgs])
def test_dlpack_producers_of_each_generation_are_read_and_never_given_a_stream(rng, kind):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    log: list[dict] = []
    got = pg.gemm(kind(a, log), kind(b, log), device="cpu")
    assert_array_within(got, a, b)
    got = pg.matmul(kind(a, log), kind(b[:, 0], log), device="cpu")
    assert got.shape == (3,)
    assert_array_within(got[:, None], a, b[:, :1])
    assert log and all(call.get("stream") is None for call in log), log


@pytest.mark.parametrize("value", [np.array(2 + 1j), np.array(True), np.array("2")], ids=["complex", "bool", "text"])
def test_a_cpu_0d_array_of_no_real_number_is_still_refused(ops, value):
    """A 0-D complex or bool array is no real factor, read through DLPack too."""
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"^alpha must be a real number") as info:
        pg.gemm(a, b, alpha=CPUArrayAPI(value))
    if value.dtype.kind in "bc":
        # read through DLPack, a bool or complex element is refused as NumPy's own 0-D array is, quoting the
        # element (advice to pass float(alpha) would turn True into 1.0)
        msg = str(info.value)
        assert "float(alpha)" not in msg and "DLPack" not in msg, msg
        with pytest.raises(ArgumentTypeError) as numpys:
            pg.gemm(a, b, alpha=value)
        assert msg == str(numpys.value)


def test_a_jax_tracer_is_refused_as_no_concrete_array():
    jax = pytest.importorskip("jax")
    from polygemm.errors import ArgumentTypeError

    x = jax.numpy.ones((3, 3), jax.numpy.float32)
    with pytest.raises(ArgumentTypeError, match="JAX tracer"):
        jax.jit(lambda p, q: polygemm.gemm(p, q))(x, x)


def test_matmul_takes_dlpack_only_arrays_as_gemm_does(rng):
    # matmul takes a DLPack-only matrix as gemm does, not as a scalar (0-D DLPackOnly)
    a, b = _operands(rng)
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a), DLPackOnly(b)), a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a), DLPackOnly(b[:, 0])), a @ b[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a[0]), b), a[0] @ b, rtol=1e-5, atol=1e-5)
    got = pg.matmul(DLPackOnly(a[0]), DLPackOnly(a[0]))
    assert np.shape(got) == () and np.isclose(got, a[0] @ a[0], rtol=1e-5)
    stack = np.stack([b, 2 * b])
    np.testing.assert_allclose(pg.matmul(DLPackOnly(a[0]), DLPackOnly(stack)), np.matmul(a[0], stack), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.complex64, np.bool_])
def test_a_dlpack_array_of_another_dtype_is_told_a_conversion_it_has(rng, dtype):
    # a DLPack-only array (and a torch tensor, read the same way on the CPU) has no astype: beside an array of another
    # dtype, the DTypeError names a conversion it has; alone, it is computed as numpy.matmul computes its dtype
    a, b = _operands(rng)
    with pytest.raises(DTypeError, match=r"np\.from_dlpack\(a\)\.astype\(np\.(float32|float64|complex64)\)") as info:
        pg.gemm(DLPackOnly(a.astype(dtype)), b)
    assert "a.astype" not in str(info.value)
    with pytest.raises(DTypeError, match=r"must share one dtype"):
        pg.matmul(a, DLPackOnly(b[:, 0].astype(dtype)))
    x = a.astype(dtype)
    assert np.array_equal(pg.gemm(DLPackOnly(x), x.T), np.matmul(x, x.T))


@pytest.mark.parametrize("data, says", [(("x", False), "cannot read"), (None, "cannot read"),
                                        ((2**70, False), "outside a 64-bit address space")])
def test_a_device_interface_of_unreadable_data_is_an_argument_error_naming_the_operand(data, says):
    """An array of another library whose interface holds no (pointer, read-only) pair, or a pointer past 64 bits (which
    cut to its low bits would name another address), is refused by name, not with Python's own ValueError or TypeError."""
    class Foreign:
        @property
        def __polygemm_array_interface__(self):
            return {"shape": (2, 2), "typestr": "<f2", "strides": None, "data": data, "version": 3, "device": "musa"}

    with pytest.raises(pg.ArgumentError, match=f"^a \\(Foreign\\) offers .*{says}"):
        pg.gemm(Foreign(), Foreign(), device="musa")


@pytest.mark.parametrize("shape", [("2", 2), None, (2.9, 2), (-1, 2), (1, 2, 3)])
def test_a_musa_array_of_no_shape_is_a_shape_error(musa, shape):
    from polygemm.backends.musa.arrays import MusaArray

    with pytest.raises(pg.ShapeError, match="MusaArray shape must be \\(rows, cols\\) of whole numbers >= 0"):
        MusaArray.empty(shape)


def test_a_musa_device_array_where_host_data_is_needed_is_told_get(musa):
    from polygemm.backends.musa import PreparedB
    from polygemm.backends.musa.arrays import MusaArray

    dev = MusaArray.from_numpy(np.ones((4, 4), np.float16))
    with pytest.raises(pg.ArgumentError, match=r"b must be a NumPy \(host\) float16 array .*got a device array \(MusaArray\): "
                                               r"pass b\.get\(\)"):
        PreparedB(dev)
    PreparedB(dev.get()).release()  # following it works


def test_device_data_in_swapped_byte_order_is_refused_saying_so():
    class Foreign:
        def __init__(self, typestr):
            self.typestr = typestr

        @property
        def __polygemm_array_interface__(self):
            return {"shape": (2, 2), "typestr": self.typestr, "strides": None, "data": (4096, False), "version": 3,
                    "device": "musa"}

    with pytest.raises(pg.DTypeError, match=r"b is a device array of float16 in non-native byte order \(typestr '>f2'\)"):
        pg.gemm(Foreign("<f2"), Foreign(">f2"), device="musa")


def test_torch_views_read_no_array_interface(monkeypatch):
    """The typestr comes from the dtype's name, not the tensor's __cuda_array_interface__, which torch refuses for a
    tensor that requires grad (read under no_grad, as an inference call reads layer.weight) and has none for
    complex32 or float8: those dtypes get no view (the full normalization refuses them, naming a cast)."""
    import sys

    from polygemm.interop import torch as torch_module
    from polygemm.interop import torch_view, torch_views

    Tensor = fake_torch(monkeypatch)
    monkeypatch.setattr(torch_module, "_TORCH_TYPESTR", {})
    sys.modules["torch"].is_grad_enabled = lambda: False  # torch.no_grad()
    weight = Tensor(0x2000, (4, 6), (6, 1), grad=True)
    x = Tensor(0x1000, (8, 4), (4, 1))
    views = torch_views(x, weight, None, None)
    assert views is not None and views[1][0][3] == "<f2" and torch_view(weight) == views[1]
    chalf = Tensor(0x3000, (4, 6), (6, 1))
    chalf.dtype = "complex32"
    assert torch_views(x, chalf, None, None) is None and torch_view(chalf) is None


@pytest.mark.parametrize("takes", ["a tuple", "one tensor"])
def test_a_torch_out_bumps_its_version_whichever_form_torch_takes(monkeypatch, takes):
    """torch 2.5 and later bump a tuple of tensors, earlier ones one tensor (raising RuntimeError for anything else)."""
    import sys
    import types

    from polygemm.interop import torch as torch_module
    from polygemm.interop import torch_written

    Tensor = fake_torch(monkeypatch)
    bumped = []

    def increment_version(arg):
        if takes == "a tuple":
            bumped.extend(arg)
        elif isinstance(arg, Tensor):
            bumped.append(arg)
        else:
            raise RuntimeError("increment_version expect a Tensor as input")

    sys.modules["torch"]._C = types.SimpleNamespace(_increment_version=increment_version)
    monkeypatch.setattr(torch_module, "_bumps", {})
    out = Tensor(0x3000, (8, 6), (6, 1))
    for _ in range(3):
        torch_written(out)
    assert bumped == [out, out, out]


class _Freed:
    """Another device's array whose memory was freed: its interface cannot be read."""

    @property
    def __polygemm_array_interface__(self) -> dict:
        raise pg.ArgumentError("this array has been freed")


@pytest.mark.parametrize("which", ["a", "b", "out"])
def test_an_unreadable_device_interface_of_another_device_is_named_by_its_argument(which):
    ok = np.ones((2, 2), np.float32)
    args = {"a": ok, "b": ok, "out": None}
    args[which] = _Freed()
    with pytest.raises(pg.ArgumentError, match=rf"^{which} \(_Freed\): could not read its __polygemm_array_interface__: "
                                               r"this array has been freed"):
        pg.gemm(args["a"], args["b"], out=args["out"])


def _as_bfloat16(capsule, versioned: bool):
    """``capsule`` (NumPy's DLPack export of uint16 bits) relabelled kDLBfloat: NumPy exports no bfloat16 itself."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    tensor = get(capsule, b"dltensor_versioned" if versioned else b"dltensor")
    if versioned:  # DLManagedTensorVersioned: version, manager_ctx, deleter and flags before the DLTensor
        tensor += 32
    ctypes.c_uint8.from_address(tensor + 20).value = 4  # DLTensor: data, device, ndim, then the dtype's code (its bits stay 16)
    return capsule


class BFloat16Export:
    """A CPU bfloat16 array offered by DLPack alone (the export of NumPy's uint16 ``bits``, relabelled): DLPack 1.0's,
    whose read-only flag says whether its memory may be written, or (``legacy``) the older one, which has no flag."""

    def __init__(self, bits: np.ndarray, legacy: bool = False):
        self.bits, self.legacy = bits, legacy

    def __dlpack_device__(self):
        return self.bits.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if max_version is None or self.legacy:
            if max_version is not None:
                raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
            return _as_bfloat16(self.bits.__dlpack__(), versioned=False)
        return _as_bfloat16(self.bits.__dlpack__(max_version=max_version), versioned=True)


def test_a_bfloat16_dlpack_out_is_written_only_where_its_export_says_it_may_be(rng):
    """NumPy's view of a CPU bfloat16 DLPack export is writeable only where DLPack 1.0 says the memory may be
    written: a writeable array receives the result in place (gemm, and matmul's vector out); a read-only one, and one
    of the older export (no flag: JAX's, whose arrays are immutable), are refused and left as they were."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    a, b = rng.integers(-3, 4, (3, 5)).astype(bf16), rng.integers(-3, 4, (5, 4)).astype(bf16)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(bf16)
    bits = np.zeros((3, 4), np.uint16)
    out = BFloat16Export(bits)
    assert pg.gemm(a, b, out=out, device="cpu") is out
    assert np.array_equal(bits.view(bf16), want)
    column = np.zeros(3, np.uint16)
    vector = BFloat16Export(column)
    assert pg.matmul(a, b[:, 0], out=vector, device="cpu") is vector
    assert np.array_equal(column.view(bf16), want[:, 0])
    frozen = np.zeros((3, 4), np.uint16)
    frozen.flags.writeable = False
    for refused, says in ((BFloat16Export(frozen), "out must be an array polygemm can write"),
                          (BFloat16Export(np.zeros((3, 4), np.uint16), legacy=True), "pre-1.0 export")):
        for call in (lambda: pg.gemm(a, b, out=refused, device="cpu"), lambda: pg.explain(a, b, out=refused, device="cpu")):
            with pytest.raises(pg.ArgumentError, match=says):
                call()
        assert not refused.bits.any()
    legacy_vector = BFloat16Export(np.zeros(3, np.uint16), legacy=True)
    with pytest.raises(pg.ArgumentError, match="pre-1.0 export"):
        pg.matmul(a, b[:, 0], out=legacy_vector, device="cpu")
    assert not legacy_vector.bits.any()


class NoStrides(CPUArrayAPI):
    """A vector of a library whose arrays have no strides (as JAX's have none): its reshape is a new array."""

    dtype = property(lambda self: self._x.dtype)

    def reshape(self, shape):
        return NoStrides(np.reshape(self._x, shape).copy())


class NoStridesNoDLPack:
    """As NoStrides, with no DLPack either: polygemm has no way to its memory."""

    def __init__(self, x):
        self._x = x
        self.shape, self.ndim, self.dtype = x.shape, x.ndim, x.dtype

    def reshape(self, shape):
        return NoStridesNoDLPack(np.reshape(self._x, shape).copy())


def test_a_vector_out_without_strides_is_written_through_its_memory_or_refused(rng):
    """matmul gives a vector out its unit dimension as a view of its memory: an out of no strides, whose reshape may
    be a copy (which would receive the result while out stayed as it was), is written through NumPy's view of its
    DLPack export where that may be written, and refused otherwise."""
    a, v = rand(rng, (3, 5)), rand(rng, (5,))
    target = np.full(3, np.nan, np.float32)
    out = NoStrides(target)
    assert pg.matmul(a, v, out=out, device="cpu") is out
    np.testing.assert_allclose(target, a @ v, rtol=1e-5, atol=1e-5)
    frozen = np.zeros(3, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(pg.ArgumentError, match="out must be an array polygemm can write"):
        pg.matmul(a, v, out=NoStrides(frozen), device="cpu")
    hidden = NoStridesNoDLPack(np.zeros(3, np.float32))
    with pytest.raises(ArgumentTypeError, match=r"out \(.*NoStridesNoDLPack.*\) cannot take the vector's unit dimension as "
                                               r"a view of its memory.*omit out"):
        pg.matmul(a, v, out=hidden, device="cpu")
    assert not hidden._x.any()


XP = types.SimpleNamespace(__name__="xplib")


class XpArray(CPUArrayAPI):
    """An array of an array-API library polygemm does not know by name: DLPack, a shape and a namespace of its own."""

    __module__ = "xplib"
    dtype = property(lambda self: self._x.dtype)

    def __array_namespace__(self, api_version=None):
        return XP


XP.from_dlpack = lambda x, device=None: XpArray(np.from_dlpack(x))
XP.asarray = lambda x, device=None: XpArray(np.asarray(x))
XP.expand_dims = lambda x, /, *, axis=0: XpArray(np.expand_dims(x._x, axis))
XP.reshape = lambda x, /, shape: XpArray(np.reshape(x._x, shape))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_an_array_api_array_beside_numpy_or_a_list_is_refused_naming_its_library(rng):
    """An array of an array-API library polygemm does not know by name gives results of its own kind, so beside a
    NumPy array, a list or a Python number it is refused as two libraries are, naming its module; objects offering only
    an interface take no side, and NumPy's subclasses and array-likes stay NumPy."""
    a, b = rand(rng, (3, 5)), rand(rng, (5, 4))
    c = np.ones((3, 4), np.float32)
    refused = {"a is a xplib.XpArray and b a ndarray": lambda: pg.gemm(XpArray(a), b),
               "a is a ndarray and b a xplib.XpArray": lambda: pg.gemm(a, XpArray(b)),
               "a is a xplib.XpArray and b a list": lambda: pg.matmul(XpArray(a), b.tolist()),
               "a is a xplib.XpArray and c a ndarray": lambda: pg.gemm(XpArray(a), XpArray(b), c, beta=1.0),
               "a is a xplib.XpArray and c a float": lambda: pg.gemm(XpArray(a), XpArray(b), 2.0, beta=1.0),
               "a is a xplib.XpArray and out a ndarray": lambda: pg.gemm(XpArray(a), XpArray(b), out=np.empty((3, 4), np.float32))}
    for says, call in refused.items():
        with pytest.raises(pg.ArgumentError, match=rf"^{re.escape(says)}: pass operands of one library"):
            call()
    got = pg.gemm(XpArray(a), XpArray(b), device="cpu")
    assert type(got) is XpArray and np.allclose(got._x, a @ b, rtol=1e-5, atol=1e-5)
    vector = XpArray(np.zeros(3, np.float32))  # matmul's view of it stands for it, as an XpArray
    assert pg.matmul(XpArray(a), XpArray(b[:, 0]), out=vector, device="cpu") is vector
    np.testing.assert_allclose(vector._x, a @ b[:, 0], rtol=1e-5, atol=1e-5)
    for other in (OnlyArray(b), OnlyInterface(b), DLPackOnly(b)):  # no library of their own to side with
        assert pg.gemm(XpArray(a), other, device="cpu") is not None
    assert isinstance(pg.gemm(np.asmatrix(a), b, device="cpu"), np.matrix)
    wide = a.astype(np.float64)
    got = pg.gemm(wide.view(np.memmap), b.astype(np.float64).tolist(), device="cpu")
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, wide @ b.astype(np.float64), rtol=1e-12)


def test_array_api_strict_arrays_give_results_on_their_device_and_refuse_numpy_beside_them():
    """array_api_strict (an array-API library polygemm knows by no name): a result lands on the inputs' device
    (gemm, matmul's vector), and a NumPy array or a list beside it is refused, naming array_api_strict."""
    xs = pytest.importorskip("array_api_strict")
    second = xs.Device("device1")
    a = xs.asarray(np.arange(15, dtype=np.float32).reshape(3, 5), device=second)
    b = xs.ones((5, 4), dtype=xs.float32, device=second)
    for got in (pg.gemm(a, b, device="cpu"), pg.matmul(a, b[:, 0], device="cpu")):
        assert type(got) is type(a) and got.device == second
    np.testing.assert_allclose(np.from_dlpack(pg.gemm(a, b, device="cpu")), np.from_dlpack(a) @ np.ones((5, 4)), rtol=1e-6)
    for other, named in ((np.ones((5, 4), np.float32), "ndarray"), ([[1.0] * 4] * 5, "list")):
        with pytest.raises(pg.ArgumentError, match=rf"a is a array_api_strict\.Array and b a {named}: pass operands of one"):
            pg.gemm(xs.ones((3, 5), dtype=xs.float32), other)


class Interface:
    """Data offered by ``__array_interface__`` alone, its descr replaced where one is given."""

    def __init__(self, x, descr=None):
        self.x = x
        self.__array_interface__ = dict(x.__array_interface__, **({} if descr is None else {"descr": descr}))


def test_raw_records_are_told_a_view_that_reads_them_not_a_cast(rng):
    """bfloat16 offered through __array_interface__ (typestr '<V2': NumPy has no typestr for it) reads as raw records,
    which no cast turns into numbers: the hint is the view as ml_dtypes.bfloat16 (said outright where the descr names
    bfloat16), and the view it names is taken; records of another size are told they are no number type."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = rand(rng, (3, 5)).astype(ml_dtypes.bfloat16)
    b = rand(rng, (5, 4)).astype(ml_dtypes.bfloat16)
    with pytest.raises(DTypeError, match=r"a holds raw 2-byte records .*not a number type polygemm reads.*"
                                         r"np\.asarray\(a\)\.view\(ml_dtypes\.bfloat16\)") as info:
        pg.gemm(Interface(a), b, device="cpu")
    assert "dtype=np.float64" not in str(info.value)
    with pytest.raises(DTypeError, match=r"a offers bfloat16 as raw 2-byte records.*np\.asarray\(a\)\.view\(ml_dtypes\.bfloat16\)"):
        pg.gemm(Interface(a, descr=[("bfloat16", "<V2")]), b, device="cpu")
    viewed = np.asarray(Interface(a)).view(ml_dtypes.bfloat16)  # the hint's view
    assert pg.gemm(viewed, b, device="cpu").dtype == ml_dtypes.bfloat16
    with pytest.raises(DTypeError, match=r"b holds raw 4-byte records .*not a number type") as info:
        pg.gemm(rand(rng, (3, 5)), Interface(np.zeros((5, 4), "V4")), device="cpu")
    assert "view(ml_dtypes.bfloat16)" not in str(info.value)
