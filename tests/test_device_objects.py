"""``device=`` takes the device object of the operands' library, as a PyTorch or CuPy user holds
it (``tensor.device``, ``cupy.cuda.Device(1)``), named as that library names it; anything that is
neither such an object nor a string is a TypeError (and ValueError) that says what is accepted.
Stand-ins with the libraries' module names keep these tests to the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm import registry
from polygemm.errors import ArgumentError, ArgumentTypeError, BackendUnavailableError


def _named(module: str, cls: str, **attrs):  # an object whose type lives in ``module``, as torch.device does
    kind = type(cls, (), {"__module__": module, "__repr__": lambda self: f"{cls}({attrs!r})"})
    obj = kind()
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


def torch_device(kind: str, index: int | None = None):
    return _named("torch", "device", type=kind, index=index)


def cupy_device(ordinal: int):
    return _named("cupy.cuda.device", "Device", id=ordinal)


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
    assert isinstance(info.value, ValueError)  # as before: except ValueError still catches it
    text = str(info.value)
    assert "device must be a backend name" in text and "torch.device" in text and "cupy.cuda.Device" in text
    assert (out == 7.0).all()  # nothing written


@pytest.mark.cuda
def test_real_torch_and_cupy_devices_on_a_gpu():
    """On a machine with a GPU: ``device=tensor.device`` and ``device=cupy.cuda.Device(0)`` run
    on that device and give that library's array, the same values as ``device="cuda:0"``."""
    from conftest import cuda_or_skip

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
