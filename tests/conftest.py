"""Shared fixtures: fresh random data (seed printed on failure), registry isolation, and the
cuda backend or a skip that says why."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
import polygemm.registry as registry


def cuda_or_skip(min_cc: tuple[int, int] = (0, 0), what: str = "") -> "pg.Backend":
    """The cuda backend; the test is skipped, naming the reason, when it is unavailable or its
    device is older than ``min_cc`` (``what`` says which kernels need that)."""
    info = {i.name: i for i in pg.backends()}["cuda"]
    if not info.available:
        pytest.skip(f"cuda backend unavailable: {info.reason}")
    be = info.backend
    cc = be.runtime.cc
    if cc < min_cc:
        pytest.skip(f"{what} needs sm_{min_cc[0]}{min_cc[1]}; device is sm_{cc[0]}{cc[1]}")
    return be


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    seed = secrets.randbits(32)
    request.node.user_properties.append(("seed", seed))
    print(f"random seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch):
    """Rediscover backends for the test and again afterwards (plugins on sys.path change)."""
    registry.refresh()
    yield registry
    registry.refresh()


@pytest.fixture
def without_gpu():
    """The registry as a machine without a GPU sees it (cuda unavailable), for a test of what such
    a machine's user gets that would otherwise run on a GPU machine's cuda backend; rediscovered
    afterwards."""
    from polygemm.backends.cuda import CudaBackend

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CudaBackend, "probe", lambda self: pg.Availability(False, "no GPU (hidden by the test)"))
        registry.refresh()
        yield registry
    registry.refresh()


def fake_torch(monkeypatch: pytest.MonkeyPatch) -> type:
    """A stand-in ``torch`` module in sys.modules for CPU tests of the views of CUDA tensors:
    ``Tensor(ptr, shape, stride, device="cuda", index=0, grad=False)`` with torch's attributes, and
    the current raw stream of device i as 0x9000 + i. Returns the Tensor class."""
    import sys
    import types

    fake = types.ModuleType("torch")

    class Tensor:
        def __init__(self, ptr, shape, stride, device="cuda", index=0, grad=False):
            self.ptr, self.shape, self._stride, self.requires_grad = ptr, shape, stride, grad
            self.dtype = "float16"
            self.is_cuda = device == "cuda"
            # torch's get_device() is the device's index whatever its type: -1 on the CPU, 0 for mps:0 or xpu:0
            self._index = -1 if device == "cpu" else index
            self.device = types.SimpleNamespace(type=device, index=None if device == "cpu" else index)

        def get_device(self):
            return self._index

        def element_size(self):
            return 2

        def data_ptr(self):
            return self.ptr

        def stride(self):
            return self._stride

        @property
        def __cuda_array_interface__(self):
            if not self.is_cuda:  # torch: "Can't get __cuda_array_interface__ on non-CUDA tensor type"
                raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor type")
            if self.requires_grad:
                raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
            return {"typestr": "<f2", "shape": self.shape, "strides": None, "data": (self.ptr, False), "version": 2}

    fake.Tensor = Tensor
    fake.bfloat16 = object()
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0x9000 + index)
    monkeypatch.setitem(sys.modules, "torch", fake)
    return Tensor


def run_concurrently(work, threads: int = 8) -> list[str]:
    """Run ``work(i)`` in ``threads`` threads at once; return each failure as text."""
    import threading

    errors: list[str] = []

    def wrap(i: int) -> None:
        try:
            work(i)
        except Exception as exc:  # report, do not hang the other threads
            errors.append(f"thread {i}: {type(exc).__name__}: {exc}")

    pool = [threading.Thread(target=wrap, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return errors


class DLPackOnly:
    """An array that offers nothing but the DLPack protocol (as a foreign library's might)."""

    def __init__(self, x):
        self._x = x

    def __dlpack__(self, **kwargs):
        return self._x.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._x.__dlpack_device__()


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the command line; it must end in a usage error (exit 2) of one line, no traceback.
    Returns that line."""
    from polygemm.apps.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def update_tuning():
    """tools/update_tuning.py as a module (a script, not part of the package)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "update_tuning.py"
    spec = importlib.util.spec_from_file_location("update_tuning", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["update_tuning"] = mod
    spec.loader.exec_module(mod)
    return mod
