"""Arrays of other libraries on the CPU: DLPack in, the same kind out, mixed kinds refused
(torch CPU tensors when torch is installed; a DLPack-only object always)."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import assert_close
from conftest import DLPackOnly, fake_torch


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


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
