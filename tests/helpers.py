"""What test files share: the repository root, the cuda backend or a skip, a stand-in torch, threads, DLPack-only arrays, usage errors, the MUSA library, fake plugins."""

from __future__ import annotations

import ctypes
import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Any
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
import polygemm.registry as registry

from tests.plugin_sources import BROKEN_BASE, DOUBLE_PLUGIN


# the repository's root: the files the tests read (README, docs/, examples/, tools/)
REPO_ROOT = Path(__file__).resolve().parents[1]


def tool_module(name: str) -> Any:
    """``tools/<name>.py`` (a script, not part of the package) as a module, registered under ``name``
    in ``sys.modules`` (dataclasses and pickling look a module up there)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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

        def is_neg(self):  # torch's lazy-negation, conjugate and inference bits (torch >= 1.10): none set here
            return False

        def is_conj(self):
            return False

        def is_inference(self):
            return False

        @property
        def __cuda_array_interface__(self):
            if not self.is_cuda:  # torch: "Can't get __cuda_array_interface__ on non-CUDA tensor type"
                raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor type")
            if self.requires_grad:
                raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
            return {"typestr": "<f2", "shape": self.shape, "strides": None, "data": (self.ptr, False), "version": 2}

    fake.Tensor = Tensor
    fake.bfloat16 = object()
    fake.is_grad_enabled = lambda: True  # (torch's default grad mode)
    fake.is_inference_mode_enabled = lambda: False
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


#: the C source of a library that claims to be polygemm's MUSA library at an ABI version of none of its builds
WRONG_ABI = "int pgm_abi_version(void){return 99;}\nconst char* pgm_build_info(void){return \"flavor=host\";}\n"


def c_library(path: Path, source: str) -> Path:
    """A shared library at ``path`` built from C ``source`` by the C compiler here (the test skips without one)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a library")
    src = path.with_suffix(".c")
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", str(src), "-o", str(path)], check=True)
    return path


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


FORK_PRELUDE = """
import os, signal, sys, threading, time
import numpy as np
import polygemm as pg

def in_child(work, limit=20):
    pid = os.fork()
    if pid == 0:
        signal.alarm(limit)
        code = 1
        try:
            work()
            code = 0
        except BaseException as exc:
            print(f"child: {type(exc).__name__}: {exc}", flush=True)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    print("child exit", code, flush=True)
    return code
"""


def cli(capsys, argv):
    """(exit status, stdout, stderr) of ``polygemm argv``: a usage error's SystemExit or main's return. What the
    test printed before (a fixture's seed line) is not the command's output."""
    from polygemm.apps.cli import main

    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


class CPUArrayAPI(DLPackOnly):
    """A CPU array of another library (JAX on the CPU, torch CPU, an array-API array): a shape, and DLPack."""

    @property
    def shape(self):
        return self._x.shape

    @property
    def ndim(self):
        return self._x.ndim


def cli_error_line(capsys, argv: list[str], status: int = 2) -> str:
    """Run the command line; it must return ``status`` with one error line on stderr, no traceback."""
    from polygemm.apps.cli import main

    assert main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("polygemm: error: "), err
    return lines[0]


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
        assert_array_within(g, x, y)


def cannot_create_in(folder):
    try:
        fd = os.open(os.path.join(folder, ".polygemm-write-probe"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    except OSError:
        return True
    os.close(fd)
    os.unlink(os.path.join(folder, ".polygemm-write-probe"))
    return False


def cuda_probe_without_pycuda(monkeypatch, driver_loads: bool) -> pg.Availability:
    """A fresh cuda backend's probe with pycuda unimportable and libcuda loading or not."""
    from polygemm.backends.cuda import CudaBackend

    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    real = ctypes.CDLL

    def cdll(name, *args, **kwargs):
        if name in ("libcuda.so.1", "nvcuda.dll"):
            if driver_loads:
                return object()
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    return CudaBackend().probe()


#: runs ``pytest.main`` once for each (env, path, args) of argv[1] and prints each run's exit status and output as
#: JSON; before each run polygemm, the modules under the runs' paths and the POLYGEMM_* variables are dropped, so each
#: run imports polygemm and its plugins afresh and reads its own variables, as a new process would
_SUITES_DRIVER = """
import contextlib, importlib, io, json, os, sys
import numpy, pytest  # ml_dtypes is left to polygemm to import when bfloat16 needs it
runs, base_path, base_pythonpath = json.loads(sys.argv[1]), list(sys.path), os.environ.get("PYTHONPATH", "")
every_path = {p for _, path, _ in runs for p in path}
out = []
for env, path, args in runs:
    for name, mod in list(sys.modules.items()):
        where = getattr(mod, "__file__", None) or ""
        if name == "polygemm" or name.startswith("polygemm.") or any(where.startswith(p + os.sep) for p in every_path):
            del sys.modules[name]
    for key in [k for k in os.environ if k.startswith("POLYGEMM_")]:
        del os.environ[key]
    os.environ.update(env)
    sys.path[:] = path + base_path
    os.environ["PYTHONPATH"] = os.pathsep.join(path + [base_pythonpath])
    importlib.invalidate_caches()
    text, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
        code = pytest.main(args)
    out.append([int(code), text.getvalue(), err.getvalue()])
sys.stdout.write("\\n@@runs@@" + json.dumps(out))
"""


def run_conformance_suites(tmp_path: Path, envs: list[dict[str, str]], extra_path: list[str] | tuple[str, ...] = (),
                           paths: list[list[str]] | None = None,
                           args: tuple[str, ...] = ("-q", "-p", "no:cacheprovider", "-rs", "--pyargs", "polygemm.testing"),
                           ) -> list[subprocess.CompletedProcess]:
    """``pytest --pyargs polygemm.testing`` under each of ``envs`` (the caller's POLYGEMM_* left out), with
    ``extra_path`` (or ``paths[i]`` for run i) ahead of the repository on the import path: all in one child process
    (_SUITES_DRIVER), each run on a fresh import of polygemm, so the interpreter starts once."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("POLYGEMM_")}
    path = os.pathsep.join([str(ROOT), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
    full = {**base, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    runs = [[env, [str(p) for p in (paths[i] if paths is not None else extra_path)], list(args)] for i, env in enumerate(envs)]
    r = subprocess.run([sys.executable, "-c", _SUITES_DRIVER, json.dumps(runs)], capture_output=True, text=True, env=full,
                       cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    done = json.loads(r.stdout.rsplit("@@runs@@", 1)[1])
    return [subprocess.CompletedProcess(args, code, stdout, stderr) for code, stdout, stderr in done]


DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def documented_cli_options():
    """(command, option) for every ``polygemm <command> ... --option`` written in README.md and docs/*.md."""
    commands = {"info", "variants", "gemm", "bench", "plot", "matrix", "ceiling", "compile"}
    found = set()
    for doc in DOCS:
        for span in re.findall(r"`([^`\n]*polygemm [a-z]+[^`\n]*)`|^(.*polygemm [a-z]+.*)$", doc.read_text(), re.M):
            text = span[0] or span[1]
            for m in re.finditer(r"\bpolygemm ([a-z]+)((?: +[^|;`#(]*)?)", text):
                if m.group(1) in commands:
                    for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2)):
                        found.add((m.group(1), opt))
    return sorted(found)


def subprocess_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in [extra.pop("PYTHONPATH", ""), str(ROOT), os.environ.get("PYTHONPATH", "")] if p)
    env = {**os.environ, "PYTHONPATH": path, **extra}
    if "POLYGEMM_DEVICE" not in extra:
        env.pop("POLYGEMM_DEVICE", None)
    return env


class OnlyArray:
    def __init__(self, x):
        self.x = x

    def __array__(self, dtype=None, copy=None):
        return self.x


class DLPackProducer:
    def __init__(self, x, log):
        self.x, self.log = x, log

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class Dlpack1(DLPackProducer):
    """DLPack 1.0: keyword-only stream, max_version, dl_device, copy; CPU data refuses a stream, as the spec says."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.log.append({"stream": stream, "max_version": max_version})
        if stream is not None:
            raise BufferError("a CPU array takes no stream")
        if max_version is None:
            return self.x.__dlpack__()
        return self.x.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)


class StreamOnly(DLPackProducer):
    """Before DLPack 1.0 (older torch and JAX): ``__dlpack__(stream=None)``."""

    def __dlpack__(self, stream=None):
        self.log.append({"stream": stream})
        if stream is not None:
            raise BufferError("a CPU array takes no stream")
        return self.x.__dlpack__()


def bench_record(**kw):
    rec = dict(backend="cpu", variant="blas", dtype="float32", m=64, n=64, k=64, tflops=0.01, tflops_min=0.009,
               tflops_max=0.011, ms=0.05, vendor_variant="numpy", vendor_tflops=0.012, ratio=0.8, device="CPU",
               date="2026-01-01", repeats=5, calls_per_repeat=1)
    rec.update(kw)
    return rec


def kernel_bench_record(**over) -> dict:
    base = dict(backend="cpu", variant="blas", dtype="float32", m=64, n=64, k=64, tflops=0.1, tflops_min=0.09, tflops_max=0.11,
                ms=0.005, vendor_variant="numpy", vendor_tflops=0.1, ratio=1.0, device="CPU", date="2026-01-01", repeats=5,
                calls_per_repeat=10, mode="kernel")
    base.update(over)
    return base


def without_modules(monkeypatch, *modules):
    """Make ``import <module>`` fail as it does where the package is not installed."""
    for name in list(sys.modules):
        if any(name == m or name.startswith(m + ".") for m in modules):
            monkeypatch.delitem(sys.modules, name)
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


class OnPluginDevice:
    """An array on a plugin's device ("fakedev"), by ``__polygemm_array_interface__``."""

    def __init__(self, shape: tuple[int, ...], typestr: str) -> None:
        self.__polygemm_array_interface__ = {"shape": shape, "typestr": typestr, "strides": None, "data": (4096, False),
                                            "device": "fakedev", "version": 1}


def poisoned(shape=(3, 5)):
    return np.full(shape, 7.0, np.float32)


def assert_array_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got``, and the operands, of any array type NumPy reads: element-wise within the bound of the float64
    reference, shape and dtype too."""
    from polygemm.testing import reference_for

    kw = {} if out_dtype is None else {"out_dtype": out_dtype}
    res = reference_for(np.asarray(a), np.asarray(b), c, alpha, beta, **kw).compare(np.asarray(got))
    assert res.ok, res.message


@functools.lru_cache(maxsize=None)
def nvrtc_missing() -> str | None:
    """Why NVRTC cannot be loaded here (None where it can): the reason the NVRTC-only tests skip with."""
    from polygemm.backends.cuda import nvrtc
    from polygemm.errors import BackendUnavailableError, DeviceError

    try:
        nvrtc.load()
    except (BackendUnavailableError, DeviceError) as exc:
        return str(exc)
    return None
