"""NVRTC through cffi (ABI mode): CUDA C++ to a cubin in-process, with no CUDA toolkit.

``libnvrtc`` comes from the ``nvidia-cuda-nvrtc`` wheel (``pip install 'polygemm[nvrtc]'``) or
a CUDA toolkit; the CUDA headers the kernels include (``cuda_fp16.h``, ``cuda.h``) from the
``nvidia-cuda-runtime`` wheel or the toolkit's ``include``. NVRTC needs no GPU, so the whole
catalog can be built on a machine with neither a GPU nor nvcc (``polygemm compile``).

Where things are looked for, first hit wins:

- the library: ``$POLYGEMM_NVRTC_LIBRARY``; the wheels (``site-packages/nvidia/cu13/lib``,
  ``nvidia/cuda_nvrtc/lib`` of the CUDA 12 wheels); ``$CUDA_HOME``, ``$CUDA_PATH``,
  ``/usr/local/cuda`` (``lib64``, ``lib``); the system's library path.
- the headers (a folder holding ``cuda_fp16.h``): ``$POLYGEMM_CUDA_INCLUDE``; the folder that
  came with the library (wheel or toolkit); the other wheel and toolkit folders.

NVRTC has no C library headers, and two kernels include ``<stdint.h>`` (directly, and through
``cuda.h``, which also includes ``<stdlib.h>``). :data:`SHIM_HEADERS` provides those two as
in-memory headers with exactly what device code can use, so the same sources build with nvcc
and NVRTC.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import Any

from ...errors import BackendUnavailableError, DeviceError

__all__ = ["Nvrtc", "load", "find_library", "find_include_dir", "SHIM_HEADERS", "NvrtcCompileError"]

_CDEF = """
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
const char *nvrtcGetErrorString(nvrtcResult result);
nvrtcResult nvrtcVersion(int *major, int *minor);
nvrtcResult nvrtcGetNumSupportedArchs(int *numArchs);
nvrtcResult nvrtcGetSupportedArchs(int *supportedArchs);
nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int numHeaders,
                               const char * const *headers, const char * const *includeNames);
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog);
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char * const *options);
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet);
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin);
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *logSizeRet);
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log);
"""

NVRTC_SUCCESS = 0
NVRTC_ERROR_COMPILATION = 6

#: C library headers NVRTC lacks, as device code may use them. ``size_t`` is built into NVRTC.
SHIM_HEADERS: dict[str, str] = {
    "stdint.h": (
        "#pragma once\n"
        "// polygemm's stand-in for the C library header (NVRTC has none)\n"
        "typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;\n"
        "typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;\n"
        "typedef unsigned long long uint64_t;\n"
        "typedef long long intptr_t; typedef unsigned long long uintptr_t;\n"
        "typedef long long intmax_t; typedef unsigned long long uintmax_t;\n"
    ),
    "stdlib.h": (
        "#pragma once\n"
        "// polygemm's stand-in for the C library header: cuda.h includes it for size_t only\n"
    ),
    "type_traits": (
        "#pragma once\n"
        "// polygemm's stand-in for the C++ library header (NVRTC has none): the traits kernels use\n"
        "namespace std {\n"
        "template <class T, T v> struct integral_constant {\n"
        "  static constexpr T value = v; using value_type = T; using type = integral_constant;\n"
        "  constexpr operator value_type() const noexcept { return value; }\n"
        "  constexpr value_type operator()() const noexcept { return value; }\n"
        "};\n"
        "template <bool B> using bool_constant = integral_constant<bool, B>;\n"
        "using true_type = bool_constant<true>; using false_type = bool_constant<false>;\n"
        "template <class T, class U> struct is_same : false_type {};\n"
        "template <class T> struct is_same<T, T> : true_type {};\n"
        "template <class T, class U> inline constexpr bool is_same_v = is_same<T, U>::value;\n"
        "template <bool B, class T = void> struct enable_if {};\n"
        "template <class T> struct enable_if<true, T> { using type = T; };\n"
        "template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;\n"
        "template <bool B, class T, class F> struct conditional { using type = T; };\n"
        "template <class T, class F> struct conditional<false, T, F> { using type = F; };\n"
        "template <bool B, class T, class F> using conditional_t = typename conditional<B, T, F>::type;\n"
        "}  // namespace std\n"
    ),
}
SHIM_DIGEST = hashlib.sha256(repr(sorted(SHIM_HEADERS.items())).encode()).hexdigest()

_WHEEL_LIB_DIRS = ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib")  # cu13: CUDA 13 wheels; cuda_nvrtc: CUDA 12's
_WHEEL_INCLUDE_DIRS = ("cu13/include", "cuda_runtime/include", "cu12/include")
_LIB_PATTERNS = ("libnvrtc.so.*[0-9]", "libnvrtc.so", "nvrtc64_*.dll") if sys.platform == "win32" else ("libnvrtc.so.*[0-9]", "libnvrtc.so")


class NvrtcCompileError(DeviceError):
    """NVRTC refused a source; the message ends with NVRTC's log."""


def _wheel_roots() -> list[Path]:
    """The ``nvidia`` namespace package's folders (where the NVIDIA wheels install)."""
    roots: list[Path] = []
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        roots += [Path(p) for p in spec.submodule_search_locations]
    return roots


def _toolkit_roots() -> list[Path]:
    return [Path(p) for p in dict.fromkeys(filter(None, (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")))]


def _version_key(path: str) -> tuple[int, ...]:
    tail = path.rsplit(".so", 1)[-1]
    return tuple(int(x) for x in tail.strip(".").split(".") if x.isdigit())


def _first_lib(folder: Path) -> str | None:
    for pattern in _LIB_PATTERNS:
        # the highest soname first (a toolkit folder may hold libnvrtc.so.12 and .so.13 side by side);
        # libnvrtc-builtins is loaded by libnvrtc itself
        hits = sorted((h for h in glob.glob(str(folder / pattern)) if "builtins" not in h), key=_version_key, reverse=True)
        if hits:
            return hits[0]
    return None


def find_library() -> tuple[str, str] | None:
    """``(path or soname, where it came from)`` of the libnvrtc to load, or None."""
    forced = os.environ.get("POLYGEMM_NVRTC_LIBRARY")
    if forced:
        return forced, "$POLYGEMM_NVRTC_LIBRARY"
    for root in _wheel_roots():
        for sub in _WHEEL_LIB_DIRS:
            hit = _first_lib(root / sub)
            if hit:
                return hit, "nvidia-cuda-nvrtc wheel"
    for root in _toolkit_roots():
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            hit = _first_lib(root / sub)
            if hit:
                return hit, f"CUDA toolkit {root}"
    import ctypes.util

    name = ctypes.util.find_library("nvrtc")
    if name:
        return name, "system library path"
    return None


def find_include_dir(lib_path: str | None = None) -> tuple[Path, str] | None:
    """``(folder holding cuda_fp16.h and cuda.h, where it came from)``, preferring the one that came
    with ``lib_path`` (headers of another CUDA version may use builtins that NVRTC lacks)."""
    forced = os.environ.get("POLYGEMM_CUDA_INCLUDE")
    if forced:
        return Path(forced), "$POLYGEMM_CUDA_INCLUDE"
    cands: list[tuple[Path, str]] = []
    for root in _wheel_roots():
        cands += [(root / sub, "nvidia-cuda-runtime wheel") for sub in _WHEEL_INCLUDE_DIRS]
    for root in _toolkit_roots():
        cands += [(root / "include", f"CUDA toolkit {root}"), (root / "targets/x86_64-linux/include", f"CUDA toolkit {root}")]
    if lib_path:
        lib_root = Path(lib_path).resolve().parent.parent
        cands.sort(key=lambda c: not str(c[0].resolve()).startswith(str(lib_root)))  # stable: same install first
    for folder, origin in cands:
        if (folder / "cuda_fp16.h").is_file() and (folder / "cuda.h").is_file():
            return folder, origin
    return None


@functools.lru_cache(maxsize=None)
def include_digest(folder: str) -> str:
    """SHA-256 over every header at the top of ``folder`` (names and contents), once per process:
    a kernel includes some of them (and they include others), so any change rebuilds."""
    h = hashlib.sha256()
    for p in sorted(Path(folder).glob("*.h*")):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


class Nvrtc:
    """One loaded libnvrtc and the CUDA header folder that goes with it."""

    def __init__(self, lib_path: str, origin: str, include: Path, include_origin: str) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(_CDEF)
        # libnvrtc dlopens libnvrtc-builtins.so.X.Y by name when it compiles, and some wheels'
        # libnvrtc (13.0) cannot find the one beside it: load that one first, so the name resolves
        self._builtins = []
        for b in sorted(glob.glob(os.path.join(os.path.dirname(lib_path), "libnvrtc-builtins.so.*"))):
            if ".alt." not in b:
                with contextlib.suppress(OSError):
                    self._builtins.append(ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL))
        try:
            self.lib: Any = self.ffi.dlopen(lib_path)
        except OSError as exc:
            raise BackendUnavailableError(
                f"cannot load NVRTC from {lib_path} ({origin}): {exc}; pip install 'polygemm[nvrtc]' or set POLYGEMM_NVRTC_LIBRARY to a libnvrtc"
            ) from exc
        self.path = lib_path
        self.origin = origin
        self.include = include
        self.include_origin = include_origin
        major, minor = self.ffi.new("int *"), self.ffi.new("int *")
        self._check(self.lib.nvrtcVersion(major, minor), "nvrtcVersion")
        self.version = (int(major[0]), int(minor[0]))
        n = self.ffi.new("int *")
        self._check(self.lib.nvrtcGetNumSupportedArchs(n), "nvrtcGetNumSupportedArchs")
        archs = self.ffi.new("int[]", max(int(n[0]), 1))
        self._check(self.lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        self.archs = tuple(int(archs[i]) for i in range(int(n[0])))
        self._headers = [self.ffi.new("char[]", v.encode()) for v in SHIM_HEADERS.values()]
        self._names = [self.ffi.new("char[]", k.encode()) for k in SHIM_HEADERS]
        self._header_ptrs = self.ffi.new("const char *[]", self._headers)
        self._name_ptrs = self.ffi.new("const char *[]", self._names)
        self.lock = threading.Lock()

    def _error(self, code: int) -> str:
        return self.ffi.string(self.lib.nvrtcGetErrorString(code)).decode(errors="replace")

    def _check(self, code: int, what: str) -> None:
        if code != NVRTC_SUCCESS:
            raise DeviceError(f"{what} failed: {self._error(code)} ({code})")

    def describe(self) -> str:
        return f"NVRTC {self.version[0]}.{self.version[1]} ({self.origin})"

    def supports(self, target: str) -> bool:
        """Whether this NVRTC can build for ``target`` (``sm_90a`` counts as 90)."""
        return int(target[3:].rstrip("af")) in self.archs

    def _run(self, source: str, name: str, options: list[str], keep: Any) -> Any:
        """Compile ``source`` with ``options`` and return ``keep(program, log)``; raises
        NvrtcCompileError with the log when NVRTC refuses it."""
        ffi, lib = self.ffi, self.lib
        prog = ffi.new("nvrtcProgram *")
        self._check(lib.nvrtcCreateProgram(prog, source.encode(), name.encode(), len(self._headers), self._header_ptrs, self._name_ptrs), "nvrtcCreateProgram")
        try:
            opts = [ffi.new("char[]", o.encode()) for o in options]
            code = lib.nvrtcCompileProgram(prog[0], len(opts), ffi.new("const char *[]", opts))
            size = ffi.new("size_t *")
            self._check(lib.nvrtcGetProgramLogSize(prog[0], size), "nvrtcGetProgramLogSize")
            buf = ffi.new("char[]", max(int(size[0]), 1))
            self._check(lib.nvrtcGetProgramLog(prog[0], buf), "nvrtcGetProgramLog")
            log = ffi.string(buf).decode(errors="replace")
            if code != NVRTC_SUCCESS:
                raise NvrtcCompileError(f"NVRTC: {self._error(code)}\n{log.strip()[-4000:]}")
            return keep(prog[0], log)
        finally:
            lib.nvrtcDestroyProgram(prog)

    def check(self, source: str, name: str, options: list[str]) -> str:
        """NVRTC's front end only (``-fdevice-syntax-only``: parsing, templates instantiated,
        ``static_assert``s evaluated; no optimizer, no PTX, no ptxas): its log. A twentieth of a
        build's time, for checking that every macro set of a source compiles. Raises
        NvrtcCompileError with the log."""
        return self._run(source, name, [*options, "-fdevice-syntax-only"], lambda prog, log: log)

    def compile(self, source: str, name: str, options: list[str]) -> tuple[bytes, str]:
        """``(cubin, log)`` of ``source``; ``options`` must hold ``-arch=sm_XX`` (a real
        architecture, so that NVRTC assembles a cubin). Raises NvrtcCompileError with the log."""
        ffi, lib = self.ffi, self.lib

        def cubin(prog: Any, log: str) -> tuple[bytes, str]:
            size = ffi.new("size_t *")
            self._check(lib.nvrtcGetCUBINSize(prog, size), "nvrtcGetCUBINSize")
            if not size[0]:
                raise DeviceError(f"NVRTC produced no cubin for {name}: options {options} name no real architecture (-arch=sm_XX)")
            out = ffi.new("char[]", int(size[0]))
            self._check(lib.nvrtcGetCUBIN(prog, out), "nvrtcGetCUBIN")
            return bytes(ffi.buffer(out, int(size[0]))), log

        return self._run(source, name, options, cubin)


_loaded: dict[tuple[str, str], Nvrtc] = {}
_load_lock = threading.Lock()


def load() -> Nvrtc:
    """The NVRTC to build with (loaded once per library and header folder).

    Raises BackendUnavailableError naming what is missing and how to install it.
    """
    found = find_library()
    if found is None:
        raise BackendUnavailableError(
            "NVRTC (libnvrtc) not found in the nvidia-cuda-nvrtc wheel, $CUDA_HOME, /usr/local/cuda or the library path: "
            "pip install 'polygemm[nvrtc]' (or set POLYGEMM_NVRTC_LIBRARY)"
        )
    lib_path, origin = found
    inc = find_include_dir(lib_path)
    if inc is None:
        raise BackendUnavailableError(
            "CUDA headers (cuda_fp16.h, cuda.h) not found in the nvidia-cuda-runtime wheel, $CUDA_HOME/include or /usr/local/cuda/include: "
            "pip install 'polygemm[nvrtc]' (or set POLYGEMM_CUDA_INCLUDE)"
        )
    key = (lib_path, str(inc[0]))
    with _load_lock:
        nv = _loaded.get(key)
        if nv is None:
            nv = _loaded[key] = Nvrtc(lib_path, origin, inc[0], inc[1])
        return nv
