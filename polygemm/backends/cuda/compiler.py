"""One compile path for every CUDA kernel: nvcc to a cubin for one exact target, cached on disk.

The backend, ``CudaRuntime.precompile`` and ``tools/check_kernels.py`` all build through
:func:`nvcc_command`, so a kernel is compiled one way everywhere. Cache entries are keyed on the
kernel source, every header of the kernel folder, the options, the target and nvcc's version;
each entry carries the SHA-256 of its cubin and is verified when read (a truncated or altered
entry is rebuilt), and entries are written atomically.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path

from ...errors import BackendUnavailableError, DeviceError
from .variants import KERNEL_DIR

__all__ = ["find_nvcc", "nvcc_version", "nvcc_command", "compile_cubin", "cache_dir", "BASE_OPTIONS"]

BASE_OPTIONS = ("-O3", "-std=c++17")
_MAGIC = b"PGCUBIN1"  # entry = magic + sha256(cubin) + cubin


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


def nvcc_command(nvcc: str, source: Path, target: str, macros: dict[str, int] | None, out: Path, *, verbose: bool = False) -> list[str]:
    """The one nvcc command line that builds ``source`` for ``target`` (e.g. ``sm_90a``)."""
    num = target[3:]
    return [
        nvcc, "-cubin", f"-gencode=arch=compute_{num},code={target}", *BASE_OPTIONS,
        *(["-Xptxas", "-v"] if verbose else []),
        *(f"-D{k}={v}" for k, v in sorted((macros or {}).items())),
        f"-I{KERNEL_DIR}", str(source), "-o", str(out),
    ]


def cache_dir() -> Path:
    """``$POLYGEMM_CACHE_DIR`` or ``$XDG_CACHE_HOME/polygemm`` (``~/.cache/polygemm``), ``cubin/`` below."""
    base = os.environ.get("POLYGEMM_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "polygemm")
    path = Path(base) / "cubin"
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileExistsError, NotADirectoryError) as exc:
        raise BackendUnavailableError(f"kernel cache {path} cannot be a directory ({exc}); point POLYGEMM_CACHE_DIR at a directory") from exc
    return path


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(KERNEL_DIR.rglob("*.cuh")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


_building: dict[str, threading.Lock] = {}
_building_lock = threading.Lock()


def compile_cubin(source: Path, target: str, macros: dict[str, int] | None = None) -> bytes:
    """Build ``source`` for ``target`` with ``macros`` (from the verified cache when present).

    Raises BackendUnavailableError without nvcc and DeviceError with nvcc's message when the
    build fails.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise BackendUnavailableError("nvcc not found on PATH or in $CUDA_HOME/bin: the kernels compile at run time (install the CUDA toolkit)")
    h = hashlib.sha256()
    for part in (source.read_text(), _headers_digest(), target, repr(sorted((macros or {}).items())), " ".join(BASE_OPTIONS), nvcc_version(nvcc)):
        h.update(part.encode())
    key = h.hexdigest()[:32]
    entry = cache_dir() / f"{source.stem}-{target}-{key}.cubin"
    with _building_lock:
        lock = _building.setdefault(key, threading.Lock())
    with lock:  # one thread builds; the others read what it wrote
        data = _read_entry(entry)
        if data is not None:
            return data
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "k.cubin"
            r = subprocess.run(nvcc_command(nvcc, source, target, macros, out), capture_output=True, text=True)
            if r.returncode != 0:
                raise DeviceError(f"compiling {source.name} for {target} failed: {r.stderr.strip()[-2000:]}")
            data = out.read_bytes()
        tmp_path = entry.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp_path.write_bytes(_MAGIC + hashlib.sha256(data).digest() + data)
        os.replace(tmp_path, entry)  # atomic: a reader never sees half a file
        return data


def _read_entry(path: Path) -> bytes | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    head = len(_MAGIC) + 32
    if raw[:len(_MAGIC)] == _MAGIC and len(raw) > head and hashlib.sha256(raw[head:]).digest() == raw[len(_MAGIC):head]:
        return raw[head:]
    warnings.warn(f"polygemm: kernel cache entry {path.name} is corrupt (checksum mismatch); rebuilding it", RuntimeWarning, stacklevel=3)
    return None
