"""One compile path for every CUDA kernel: nvcc (else NVRTC) to a cubin for one exact target,
kept in one verified on-disk cache.

The backend, ``CudaRuntime.precompile``, ``polygemm compile`` and ``tools/check_kernels.py`` all
build through :func:`build`, so a kernel is compiled one way everywhere.

Which compiler: ``$POLYGEMM_COMPILER`` (``nvrtc`` or ``nvcc``) forces one; otherwise nvcc where
it is installed (``COMPILERS``: its build of the cp.async SGEMM rungs is the faster one), else NVRTC
(:mod:`.nvrtc`: the ``nvidia-cuda-nvrtc`` wheel or a toolkit's libnvrtc, no nvcc needed) when it
is there and knows the target. With ``$POLYGEMM_KERNEL_DIR`` set, prebuilt cubins
there (written by ``polygemm compile --out DIR``) are loaded first and nothing is compiled for
them.

The cache (``$POLYGEMM_CACHE_DIR`` or ``~/.cache/polygemm``, ``cubin/`` below) is created owner-only
and refused when another user owns it or it is not a directory. An entry is keyed on the kernel
source and every file it includes from the kernel folder (plus every ``.cuh`` there), the macros,
the target, the compiler's name, version and options, and for NVRTC the CUDA header folder's
contents and polygemm's stand-in headers. Each entry carries a SHA-256 of its content and is
verified when read (a truncated or altered entry is rebuilt with a warning), entries are written
atomically, and processes building the same kernel at once wait for each other through a lock
file (where the platform has ``fcntl``), so it is built once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ...errors import BackendUnavailableError, DeviceError
from .variants import KERNEL_DIR

__all__ = [
    "Built", "build", "compile_cubin", "cache_path", "pack", "unpack", "write_entry", "meta_for", "available", "describe", "built_by", "select", "prebuilt_name",
    "find_nvcc", "nvcc_version", "nvcc_archs", "nvcc_command", "unbuildable", "check_front_end", "cache_dir", "kernel_dir", "BASE_OPTIONS", "NVRTC_OPTIONS", "COMPILERS",
]

# nvcc first where it is installed: NVRTC 13 addresses dynamic shared memory with 64-bit
# registers in the cp.async SGEMM rungs (cm_v12/cm_v13 measured 7% slower at 4096^3 on the
# H200), so the toolkit's build is the faster one there; NVRTC serves every machine without it.
COMPILERS = ("nvcc", "nvrtc")
BASE_OPTIONS = ("-O3", "-std=c++17")  # nvcc's
# NVRTC optimizes device code by default (nvcc's -O3 is a host-code option). -default-device:
# cuda.h (CUtensorMap for the TMA rung) declares host functions, which NVRTC refuses unless
# unannotated functions are taken as device functions; every kernel function is annotated.
NVRTC_OPTIONS = ("-std=c++17", "-default-device")
_FORMAT = "2"  # bumped when the key or the entry layout changes
_MAGIC = b"PGCUBIN2"  # entry = magic + sha256(rest) + u32 meta length + meta (JSON) + cubin
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


# -- nvcc ---------------------------------------------------------------------------------
def find_nvcc() -> str | None:
    """nvcc on PATH, else under $CUDA_HOME, $CUDA_PATH or /usr/local/cuda (None if nowhere)."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in filter(None, (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")):
        cand = os.path.join(root, "bin", "nvcc")
        if os.path.exists(cand):
            return cand
    return None


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    """``nvcc --version`` (asked once per process and compiler)."""
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout


@functools.lru_cache(maxsize=None)
def nvcc_archs(nvcc: str) -> tuple[int, ...] | None:
    """The compute capabilities ``nvcc`` builds for, from ``nvcc --list-gpu-arch`` (asked once per process and
    compiler), oldest first; None when it cannot say (the query fails, or an nvcc older than the option)."""
    try:
        r = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    archs = sorted({int(n) for n in re.findall(r"^compute_(\d+)\s*$", r.stdout, re.M)})
    return tuple(archs) if r.returncode == 0 and archs else None


def nvcc_command(nvcc: str, source: Path, target: str, macros: dict[str, int] | None, out: Path, *, verbose: bool = False) -> list[str]:
    """The one nvcc command line that builds ``source`` for ``target`` (e.g. ``sm_90a``)."""
    num = target[3:]
    return [
        nvcc, "-cubin", f"-gencode=arch=compute_{num},code={target}", *BASE_OPTIONS,
        *(["-Xptxas", "-v"] if verbose else []),
        *(f"-D{k}={v}" for k, v in sorted((macros or {}).items())),
        f"-I{KERNEL_DIR}", str(source), "-o", str(out),
    ]


# -- the two compilers ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Compiler:
    name: str  # "nvrtc" or "nvcc"
    version: str  # "13.0"
    where: str  # what describe() puts in parentheses
    identity: str  # everything about the compiler that goes into the cache key

    def describe(self) -> str:
        return f"{'NVRTC' if self.name == 'nvrtc' else 'nvcc'} {self.version} ({self.where})"


def _nvrtc_compiler() -> tuple[_Compiler | None, str]:
    from . import nvrtc

    try:
        nv = nvrtc.load()
    except BackendUnavailableError as exc:
        return None, str(exc)
    except DeviceError as exc:  # the library loaded but answers errors
        return None, f"NVRTC from {nvrtc.find_library()}: {exc}"
    inc = str(nv.include)
    ident = "|".join((nv.path, f"{nv.version}", inc, nvrtc.include_digest(inc), nvrtc.SHIM_DIGEST, " ".join(NVRTC_OPTIONS)))
    return _Compiler("nvrtc", f"{nv.version[0]}.{nv.version[1]}", nv.origin, ident), ""


def _nvcc_compiler() -> tuple[_Compiler | None, str]:
    nvcc = find_nvcc()
    if nvcc is None:
        return None, "nvcc not found on PATH or in $CUDA_HOME/bin"
    text = nvcc_version(nvcc)
    m = re.search(r"release (\d+\.\d+)", text)
    if m is None:
        return None, f"{nvcc} --version printed no release number: {text.strip()[-200:]!r}"
    return _Compiler("nvcc", m.group(1), nvcc, "|".join((nvcc, text, " ".join(BASE_OPTIONS)))), ""


def _archs(c: _Compiler) -> tuple[int, ...] | None:
    """The compute capabilities ``c`` builds for; None when it cannot say."""
    if c.name == "nvcc":
        return nvcc_archs(c.where)
    from . import nvrtc

    return nvrtc.load().archs


def _supports(c: _Compiler, target: str) -> bool:
    archs = _archs(c)
    # an nvcc that cannot list its targets names one it lacks in its own error, once per build
    return archs is None or int(target[3:].rstrip("af")) in archs


def unbuildable(target: str, compiler: str | None = None) -> str | None:
    """Why no compiler here builds for ``target`` (``sm_99``) although one is usable: what each usable compiler
    (``compiler`` or ``$POLYGEMM_COMPILER`` when given, else each of ``COMPILERS``) builds for, e.g. ``nvcc 13.0
    (/usr/local/cuda/bin/nvcc) builds for sm_75, ..., sm_121``; None when one builds for it, one cannot say what it
    builds for, or none is usable (:func:`select` says why)."""
    forced = compiler or _forced()
    if forced is not None and forced not in COMPILERS:
        return None
    said = []
    for name in (forced,) if forced else COMPILERS:
        c, _ = (_nvrtc_compiler if name == "nvrtc" else _nvcc_compiler)()
        if c is None:
            continue
        if _supports(c, target):
            return None
        said.append(f"{c.describe()} builds for {', '.join(f'sm_{a}' for a in _archs(c) or ())}")
    return "; ".join(said) or None


def _forced() -> str | None:
    v = os.environ.get("POLYGEMM_COMPILER", "").strip().lower()
    if v in ("", "auto"):
        return None
    if v not in COMPILERS:
        raise BackendUnavailableError(f"POLYGEMM_COMPILER={v!r}: expected nvrtc, nvcc or auto (unset)")
    return v


def select(target: str | None = None, compiler: str | None = None, when: str = "the kernels compile at run time") -> _Compiler:
    """The compiler that builds for ``target``: ``compiler`` or ``$POLYGEMM_COMPILER`` when given,
    else nvcc when it is installed, else NVRTC when it is there and knows ``target``.

    Raises BackendUnavailableError naming why each one is unusable (led by the argument or the
    variable that forced one, whichever did), ``when`` the kernels compile, and what to install.
    """
    forced = compiler or _forced()
    if compiler is not None and compiler not in COMPILERS:
        raise BackendUnavailableError(f"compiler {compiler!r}: expected nvrtc or nvcc")
    reasons: list[str] = []
    for name in (forced,) if forced else COMPILERS:
        c, why = (_nvrtc_compiler if name == "nvrtc" else _nvcc_compiler)()
        if c is not None and (target is None or _supports(c, target)):
            return c
        reasons.append(why if c is None else f"{c.describe()} cannot build for {target}")
    how = "pip install 'polygemm[nvrtc]' (NVRTC from PyPI) or install the CUDA toolkit (nvcc)"
    lead = (f"compiler {compiler!r}: " if compiler else f"POLYGEMM_COMPILER={forced}: " if forced else "no CUDA compiler: ")
    said = "; ".join(reasons)
    if forced and "pip install" in said:  # the one compiler asked for says what to install already: not twice
        raise BackendUnavailableError(f"{lead}{said}")
    raise BackendUnavailableError(f"{lead}{said}; {when}: {how}")


def available(target: str | None = None) -> str | None:
    """None when kernels for ``target`` (e.g. ``"sm_90"``; any target when None) can be had:
    a compiler is usable or ``$POLYGEMM_KERNEL_DIR`` holds prebuilt cubins; else why not, in one
    line that says what to install."""
    try:
        kdir = kernel_dir()
        if kdir is not None and any(kdir.glob("*.cubin")):
            return None
        select(target)
    except BackendUnavailableError as exc:
        return str(exc)
    return None


def describe(target: str | None = None) -> str:
    """Which compiler builds kernels (for ``target``), e.g. ``NVRTC 13.0 (nvidia-cuda-nvrtc wheel)``
    or ``nvcc 13.0 (/usr/local/cuda/bin/nvcc)``; prebuilt cubins first when $POLYGEMM_KERNEL_DIR is set."""
    try:
        kdir = kernel_dir()
    except BackendUnavailableError as exc:
        return str(exc)
    try:
        text = select(target).describe()
    except BackendUnavailableError as exc:
        text = str(exc)
    return f"prebuilt cubins from {kdir}, else {text}" if kdir is not None else text


# -- what goes into a build's identity ------------------------------------------------------
def _local_includes(source: Path) -> list[Path]:
    """``source`` and every file it includes with ``#include "..."`` from the kernel folder,
    transitively (e.g. ``v13`` includes ``sgemm_cm/v12_cp_async.cu``), each once."""
    seen: dict[Path, None] = {}
    todo = [source.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        for name in _INCLUDE.findall(path.read_text(errors="replace")):
            for base in (path.parent, KERNEL_DIR):
                cand = (base / name).resolve()
                if cand.is_file():
                    todo.append(cand)
                    break
    return list(seen)


def _rel(path: Path) -> str:
    try:
        return path.resolve().relative_to(KERNEL_DIR.resolve()).as_posix()
    except ValueError:
        return path.name


def source_key(source: Path, target: str, macros: dict[str, int] | None) -> str:
    """The compiler-independent part of a build's identity: the source, every file it includes
    from the kernel folder, every ``.cuh`` there, the target and the macros."""
    h = hashlib.sha256(f"polygemm-cubin-{_FORMAT}\0{_rel(source)}\0{target}\0{sorted((macros or {}).items())!r}\0".encode())
    files = dict.fromkeys(_local_includes(source) + sorted(KERNEL_DIR.rglob("*.cuh")))
    for p in files:
        h.update(_rel(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def prebuilt_name(source: Path, target: str, macros: dict[str, int] | None) -> str:
    """The file name of a prebuilt cubin in $POLYGEMM_KERNEL_DIR (what ``polygemm compile --out`` writes).
    It names no compiler: the machine that loads it may have none."""
    return f"{_rel(source).removesuffix('.cu').replace('/', '_')}-{target}-{source_key(source, target, macros)[:32]}.cubin"


def _cache_name(source: Path, target: str, macros: dict[str, int] | None, c: _Compiler) -> str:
    key = hashlib.sha256(f"{source_key(source, target, macros)}\0{c.name}\0{c.identity}".encode()).hexdigest()[:32]
    return f"{_rel(source).removesuffix('.cu').replace('/', '_')}-{target}-{c.name}-{key}.cubin"


def cache_path(source: Path, target: str, macros: dict[str, int] | None, compiler: str | None = None) -> Path:
    """Where the cache keeps that build by ``compiler`` (or the one :func:`select` picks)."""
    return cache_dir() / _cache_name(source, target, macros, select(target, compiler))


# -- directories ----------------------------------------------------------------------------
def _own_dir(path: Path, what: str, fix: str) -> None:
    """Refuse ``path`` unless it is a directory this user owns; make it owner-only."""
    try:
        st = path.stat()
    except OSError as exc:
        raise BackendUnavailableError(f"{what} {path} cannot be used ({exc}); {fix}") from exc
    if not path.is_dir():
        raise BackendUnavailableError(f"{what} {path} is not a directory; {fix}")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise BackendUnavailableError(
            f"{what} {path} is owned by another user (uid {st.st_uid}, not {os.getuid()}): its kernels could be anyone's; {fix}"
        )
    if hasattr(os, "getuid") and st.st_mode & 0o077:
        os.chmod(path, 0o700)  # ours, so ours to close: nobody else may plant entries


def cache_dir() -> Path:
    """``$POLYGEMM_CACHE_DIR`` or ``$XDG_CACHE_HOME/polygemm`` (``~/.cache/polygemm``), ``cubin/`` below,
    created owner-only (0700). Raises BackendUnavailableError when it is not a directory or
    another user owns it."""
    # "~/cache" as a .env file or a Dockerfile's ENV writes it (no shell expands it there): the home folder's, not a
    # folder named "~" in the current one
    base = os.path.expanduser(os.environ.get("POLYGEMM_CACHE_DIR") or "") or \
        os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME") or "~/.cache"), "polygemm")
    path = Path(base) / "cubin"
    fix = "point POLYGEMM_CACHE_DIR at a directory of your own"
    try:
        Path(base).mkdir(parents=True, exist_ok=True, mode=0o700)
        path.mkdir(exist_ok=True, mode=0o700)
    except (FileExistsError, NotADirectoryError) as exc:
        there = path  # the file in the way: the nearest part of the path that exists (not the missing folder below it)
        while not there.exists() and there.parent != there:
            there = there.parent
        raise BackendUnavailableError(f"kernel cache {path} cannot be a directory: {there} is a file; {fix}") from exc
    except OSError as exc:
        raise BackendUnavailableError(f"kernel cache {path} cannot be created ({exc}); {fix}") from exc
    _own_dir(path, "kernel cache", fix)
    return path


def kernel_dir() -> Path | None:
    """``$POLYGEMM_KERNEL_DIR`` (prebuilt cubins), None when unset; BackendUnavailableError when it
    is set but not a directory."""
    d = os.environ.get("POLYGEMM_KERNEL_DIR")
    if not d:
        return None
    path = Path(os.path.expanduser(d))
    if not path.is_dir():
        raise BackendUnavailableError(f"POLYGEMM_KERNEL_DIR={d} is not a directory: point it at the --out folder of polygemm compile, or unset it")
    return path


# -- entries --------------------------------------------------------------------------------
def pack(meta: dict, cubin: bytes) -> bytes:
    """An entry: magic, SHA-256 of the rest, the meta (JSON: compiler, source, target, macros), the cubin."""
    m = json.dumps(meta, sort_keys=True).encode()
    rest = struct.pack("<I", len(m)) + m + cubin
    return _MAGIC + hashlib.sha256(rest).digest() + rest


def unpack(raw: bytes) -> tuple[dict, bytes] | None:
    """``(meta, cubin)`` of a verified entry; None when it is not one (foreign, altered or truncated)."""
    head = len(_MAGIC) + 32
    if raw[: len(_MAGIC)] != _MAGIC or len(raw) < head + 4 or hashlib.sha256(raw[head:]).digest() != raw[len(_MAGIC) : head]:
        return None
    (n,) = struct.unpack_from("<I", raw, head)
    try:
        meta = json.loads(raw[head + 4 : head + 4 + n])
    except ValueError:
        return None
    cubin = raw[head + 4 + n :]
    return (meta, cubin) if cubin[:4] == b"\x7fELF" else None


def _read_entry(path: Path, *, warn: bool = True) -> tuple[dict, bytes] | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    got = unpack(raw)
    if got is None and warn:
        warnings.warn(f"polygemm: kernel cache entry {path} is corrupt (checksum mismatch or truncated); rebuilding it", RuntimeWarning, stacklevel=4)
    return got


def write_entry(path: Path, data: bytes) -> None:
    """Write atomically: a reader sees the old file or the whole new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) where the platform has fcntl: another
    process building the same entry waits, then reads it instead of building it again."""
    try:
        import fcntl
    except ImportError:  # Windows: both build; os.replace keeps the entry whole either way
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


# -- building -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Built:
    """One build: the cubin, the compiler that made it, and the compiler's log (ptxas ``-v`` lines
    when built with ``verbose``; empty when the cubin came from the cache or a prebuilt file)."""

    cubin: bytes
    compiler: str  # describe() of the compiler that built it
    log: str = ""
    origin: str = "built"  # "built", "cache" or "prebuilt"


def _nvrtc_options(nv: Any, target: str, macros: dict[str, int] | None) -> list[str]:
    """NVRTC's options for a build of ``target`` with ``macros`` (the kernel folder and ``nv``'s CUDA headers on the path)."""
    return [f"-arch={target}", *NVRTC_OPTIONS, f"-I{KERNEL_DIR}", f"-I{nv.include}", *(f"-D{k}={v}" for k, v in sorted((macros or {}).items()))]


def _label(source: Path, target: str, macros: dict[str, int] | None) -> str:
    return f"{_rel(source)} for {target}" + (f" ({' '.join(f'{k}={v}' for k, v in sorted(macros.items()))})" if macros else "")


def build(source: Path, target: str, macros: dict[str, int] | None = None, *, compiler: str | None = None, verbose: bool = False) -> Built:
    """Compile ``source`` for ``target`` with ``macros`` now (no cache), with ``compiler`` or the
    one :func:`select` picks. Raises DeviceError with the compiler's message when the build fails."""
    c = select(target, compiler)
    label = _label(source, target, macros)
    if c.name == "nvrtc":
        from . import nvrtc

        nv = nvrtc.load()
        opts = _nvrtc_options(nv, target, macros)
        if verbose:
            opts.append("-Xptxas=-v")
        try:
            cubin, log = nv.compile(source.read_text(), str(source), opts)
        except nvrtc.NvrtcCompileError as exc:
            raise DeviceError(f"compiling {label} with {c.describe()} failed: {exc}") from exc
        return Built(cubin, c.describe(), log)
    nvcc = find_nvcc() or "nvcc"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.cubin"
        r = subprocess.run(nvcc_command(nvcc, source, target, macros, out, verbose=verbose), capture_output=True, text=True)
        if r.returncode != 0:
            raise DeviceError(f"compiling {label} with {c.describe()} failed: {r.stderr.strip()[-4000:]}")
        return Built(out.read_bytes(), c.describe(), r.stderr)


def check_front_end(source: Path, target: str, macros: dict[str, int] | None = None) -> str:
    """Run NVRTC's front end on ``source`` for ``target`` with ``macros`` (the options of
    :func:`build`, stopped before the optimizer): its log. Catches what a macro set breaks in the
    C++ (a template, a ``static_assert``, a constant out of range) at a twentieth of a build's
    cost; inline PTX and register use are ptxas's, which only :func:`build` reaches. Raises
    DeviceError with NVRTC's message; BackendUnavailableError where NVRTC is missing."""
    from . import nvrtc

    c = select(target, "nvrtc")
    nv = nvrtc.load()
    opts = _nvrtc_options(nv, target, macros)
    try:
        return nv.check(source.read_text(), str(source), opts)
    except nvrtc.NvrtcCompileError as exc:
        label = _label(source, target, macros)
        raise DeviceError(f"checking {label} with {c.describe()}'s front end failed: {exc}") from exc


def meta_for(source: Path, target: str, macros: dict[str, int] | None, compiler: str) -> dict:
    return {"source": _rel(source), "target": target, "macros": dict(sorted((macros or {}).items())), "compiler": compiler}


_building: dict[str, threading.Lock] = {}
_building_lock = threading.Lock()
_origins: dict[tuple[str, str, tuple], str] = {}


def _record(source: Path, target: str, macros: dict[str, int] | None, text: str) -> None:
    _origins[(_rel(source), target, tuple(sorted((macros or {}).items())))] = text


def built_by(source: Path, target: str, macros: dict[str, int] | None = None) -> str | None:
    """What this process's :func:`compile_cubin` got that build from, e.g. ``NVRTC 13.0
    (nvidia-cuda-nvrtc wheel)``, ``... (from the cache)`` or ``prebuilt in DIR (NVRTC ...)``;
    None when it has not been asked for it."""
    return _origins.get((_rel(source), target, tuple(sorted((macros or {}).items()))))


def _prebuilt(source: Path, target: str, macros: dict[str, int] | None) -> bytes | None:
    kdir = kernel_dir()
    if kdir is None:
        return None
    path = kdir / prebuilt_name(source, target, macros)
    if not path.exists():
        return None
    got = _read_entry(path)
    if got is None:
        return None  # warned; compiled below if a compiler is there
    meta, cubin = got
    if meta.get("source") != _rel(source) or meta.get("target") != target or meta.get("macros") != dict(sorted((macros or {}).items())):
        warnings.warn(f"polygemm: prebuilt cubin {path} holds {meta.get('source')} for {meta.get('target')}, not {_rel(source)} for {target}; ignoring it", RuntimeWarning, stacklevel=3)
        return None
    _record(source, target, macros, f"prebuilt in {kdir} ({meta.get('compiler', 'unknown compiler')})")
    return cubin


def compile_cubin(source: Path, target: str, macros: dict[str, int] | None = None) -> bytes:
    """The cubin of ``source`` for ``target`` with ``macros``: a prebuilt one from
    $POLYGEMM_KERNEL_DIR, else from the verified cache, else built now and cached.

    Raises BackendUnavailableError without a usable compiler or cache directory, and
    DeviceError with the compiler's message when the build fails.
    """
    cubin = _prebuilt(source, target, macros)
    if cubin is not None:
        return cubin
    c = select(target)
    entry = cache_dir() / _cache_name(source, target, macros, c)
    # (a lock per entry name: the name holds the whole key)
    with _building_lock:
        lock = _building.setdefault(entry.name, threading.Lock())
    with lock:  # one thread of this process builds; the others read what it wrote
        got = _read_entry(entry)
        if got is None:
            locks = entry.parent / "locks"
            locks.mkdir(exist_ok=True, mode=0o700)
            with _file_lock(locks / (entry.stem + ".lock")):  # ... and one process
                got = _read_entry(entry, warn=False)  # another process may have built it meanwhile
                if got is None:
                    b = build(source, target, macros, compiler=c.name)
                    try:
                        write_entry(entry, pack(meta_for(source, target, macros, b.compiler), b.cubin))
                    except OSError as exc:  # a full or read-only disk costs the next process a build, no more
                        warnings.warn(f"polygemm: could not write kernel cache entry {entry}: {exc}", RuntimeWarning, stacklevel=2)
                    _record(source, target, macros, b.compiler)
                    return b.cubin
        meta, cubin = got
        _record(source, target, macros, f"{meta.get('compiler', c.describe())} (from the cache)")
        return cubin
