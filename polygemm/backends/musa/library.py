"""Loading ``libpolygemm_musa`` with cffi, declarations read from its shipped header.

Search order: ``$POLYGEMM_MUSA_LIBRARY``, this package's directory, the build tree
(``build*/`` under the source checkout), then the system loader. Every place tried and why
it failed is kept, so an unavailable backend can say exactly what happened. The header's
ABI version and the library's ``pgm_abi_version()`` must both equal :data:`ABI_VERSION`.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import DeviceError

__all__ = ["ABI_VERSION", "LIBRARY_NAME", "NativeLibrary", "load_library", "LibraryNotFound", "candidate_paths"]

# 2: handles and prepared-B objects are never-reused tokens (PGM_ERR_STALE_HANDLE added);
# must equal POLYGEMM_MUSA_ABI_VERSION / PGM_ABI_VERSION in polygemm_musa.h.
ABI_VERSION = 2
LIBRARY_NAME = "libpolygemm_musa.so"
HEADER_NAME = "polygemm_musa.h"
_PKG_DIR = Path(__file__).resolve().parent
_SRC_ROOT = _PKG_DIR.parents[2]  # the checkout, when running from source


class LibraryNotFound(Exception):
    """No usable library; ``str()`` lists every place tried and why it failed."""


@dataclass
class NativeLibrary:
    """The loaded library: cffi ``ffi``/``lib``, where it came from and what it was built as."""

    ffi: Any
    lib: Any
    path: str
    header: str
    build_info: dict[str, str]

    @property
    def flavor(self) -> str:
        return self.build_info.get("flavor", "unknown")

    def check(self, status: int, what: str) -> None:
        """Raise DeviceError (with the library's thread-local message) unless status is OK."""
        if status != 0:
            name = self.ffi.string(self.lib.pgm_status_name(status)).decode()
            msg = self.ffi.string(self.lib.pgm_last_error()).decode()
            raise DeviceError(f"{what} failed: {name}: {msg}")


def header_declarations(text: str) -> str:
    """The cffi-parsable block between the CDEF markers of the header."""
    m = re.search(r"/\* POLYGEMM_MUSA_CDEF_BEGIN \*/(.*?)/\* POLYGEMM_MUSA_CDEF_END \*/", text, re.S)
    if m is None:
        raise ValueError("header has no POLYGEMM_MUSA_CDEF_BEGIN/END block")
    return m.group(1)


def _header_for(lib_path: Path | None) -> Path:
    places = []
    if lib_path is not None:
        places += [lib_path.parent / HEADER_NAME, lib_path.parent / "include" / HEADER_NAME]
    places += [_PKG_DIR / HEADER_NAME, _SRC_ROOT / "native" / "musa" / "include" / HEADER_NAME]
    for p in places:
        if p.is_file():
            return p
    raise LibraryNotFound("header polygemm_musa.h not found; looked in " + ", ".join(map(str, places)))


def candidate_paths() -> list[tuple[str, str]]:
    """(label, path-or-name) in search order."""
    out: list[tuple[str, str]] = []
    env = os.environ.get("POLYGEMM_MUSA_LIBRARY")
    if env:
        out.append(("$POLYGEMM_MUSA_LIBRARY", env))
    out.append(("package directory", str(_PKG_DIR / LIBRARY_NAME)))
    builds = sorted(_SRC_ROOT.glob("build*/" + LIBRARY_NAME)) + sorted(_SRC_ROOT.glob("build*/*/" + LIBRARY_NAME))
    out.extend(("build tree", str(p)) for p in builds)
    if not builds:
        out.append(("build tree", str(_SRC_ROOT / "build" / LIBRARY_NAME)))
    out.append(("system loader", LIBRARY_NAME))
    return out


def _open(label: str, where: str) -> NativeLibrary:
    import cffi

    path = Path(where)
    if label != "system loader" and not path.is_file():
        raise LibraryNotFound("no such file")
    header = _header_for(path if label != "system loader" else None)
    ffi = cffi.FFI()
    ffi.cdef(header_declarations(header.read_text()))
    try:
        lib = ffi.dlopen(str(path) if label != "system loader" else where)
    except OSError as exc:
        raise LibraryNotFound(str(exc)) from exc
    got = int(lib.pgm_abi_version())
    declared = int(lib.PGM_ABI_VERSION)
    if got != ABI_VERSION or declared != ABI_VERSION:
        raise LibraryNotFound(f"ABI version mismatch: library {got}, header {declared}, this polygemm expects {ABI_VERSION}; rebuild the library")
    info_text = ffi.string(lib.pgm_build_info()).decode()
    info = dict(part.split("=", 1) for part in info_text.split(";") if "=" in part)
    return NativeLibrary(ffi, lib, str(path) if label != "system loader" else where, str(header), info)


_lock = threading.Lock()
_cache: dict[tuple, NativeLibrary] = {}


def load_library() -> NativeLibrary:
    """Load the first usable library in search order; LibraryNotFound lists all attempts."""
    cands = tuple(candidate_paths())
    with _lock:
        if cands in _cache:
            return _cache[cands]
        tried = []
        for label, where in cands:
            try:
                nl = _open(label, where)
            except LibraryNotFound as exc:
                tried.append(f"{label} {where}: {exc}")
                continue
            except Exception as exc:  # a broken file must not hide the others
                tried.append(f"{label} {where}: {type(exc).__name__}: {exc}")
                continue
            _cache[cands] = nl
            return nl
        raise LibraryNotFound("libpolygemm_musa not loaded; tried " + "; ".join(tried) + ". Build it with CMake (see docs/musa.md)")
