"""What test files share: the repository root, the cuda backend or a skip, a stand-in torch, threads, DLPack-only arrays, usage errors, the MUSA library, fake plugins."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
import polygemm.registry as registry

from tests.plugin_sources import BROKEN_BASE, DOUBLE_PLUGIN


# the repository's root: the files the tests read (README, docs/, examples/, tools/)
REPO_ROOT = Path(__file__).resolve().parents[1]


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


def _named(module: str, cls: str, **attrs):  # an object whose type lives in ``module``, as torch.device does
    kind = type(cls, (), {"__module__": module, "__repr__": lambda self: f"{cls}({attrs!r})"})
    obj = kind()
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


def torch_device(kind: str, index: int | None = None):
    return _named("torch", "device", type=kind, index=index)


ROOT = REPO_ROOT


FLAVOR = os.environ.get("POLYGEMM_MUSA_TEST_FLAVOR", "host")


def _cmake() -> str:
    exe = shutil.which("cmake")
    if exe is None:
        pytest.skip("cmake not found (pip install '.[test]' provides it)")
    return exe


@pytest.fixture(scope="session")
def musa_library() -> Path:
    """Build libpolygemm_musa in the requested flavor once per session (or use the given one)."""
    given = os.environ.get("POLYGEMM_MUSA_LIBRARY")
    if given:
        return Path(given)
    build = ROOT / "build" / f"musa-{FLAVOR}"
    cmake = _cmake()
    build.parent.mkdir(exist_ok=True)
    # one build at a time: pytest -n N runs this fixture in every worker, and two CMake runs in
    # one build directory break each other's compiler checks
    with open(build.parent / f"musa-{FLAVOR}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cfg = subprocess.run([cmake, "-S", str(ROOT), "-B", str(build), f"-DPOLYGEMM_MUSA_FLAVOR={FLAVOR}", "-DCMAKE_BUILD_TYPE=Release"], capture_output=True, text=True)
        assert cfg.returncode == 0, cfg.stdout + cfg.stderr
        bld = subprocess.run([cmake, "--build", str(build), "-j", "2"], capture_output=True, text=True)
        assert bld.returncode == 0, bld.stdout + bld.stderr
    lib = next(build.rglob("libpolygemm_musa.so"))
    return lib


def _reset() -> None:
    import polygemm.backends.musa.backend as mb

    mb.sessions._session = None
    registry.refresh()


@pytest.fixture
def musa(musa_library, monkeypatch):
    monkeypatch.setenv("POLYGEMM_MUSA_LIBRARY", str(musa_library))
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "1")
    _reset()
    info = {i.name: i for i in pg.backends()}["musa"]
    if not info.available and FLAVOR != "host":  # the cuda and musa flavors need their GPU; the host flavor runs anywhere
        pytest.skip(f"the {FLAVOR} flavor of libpolygemm_musa cannot run here: {info.reason}")
    assert info.available, info.reason
    yield info.backend
    _reset()


def rand16(rng, shape, order="C"):
    return np.asarray(rng.standard_normal(shape).astype(np.float16), order=order)


BASE = BROKEN_BASE  # class Base: one float32 variant "v", priority 450, a run() that must never be reached


PLUGIN = DOUBLE_PLUGIN  # class DoubleBackend, name "double", variant matmul64


BROKEN = """
raise ImportError("vendor runtime libfoo.so.3 not found")
"""
