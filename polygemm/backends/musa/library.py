"""Loading ``libpolygemm_musa`` with cffi, declarations read from its shipped header.

``$POLYGEMM_MUSA_LIBRARY``, when set, is the only place tried: an explicit path that is
missing or unusable makes the backend unavailable with that path in the reason (falling
back to another library would run code the user did not ask for). Otherwise the search
order is this package's directory, the build tree (``build*/`` under the source checkout),
then the system loader. The reason (``str()`` of :class:`LibraryNotFound`) is one line of
at most :data:`REASON_MAX` characters; every place tried and why it failed is kept in its
``attempts`` for a verbose listing. The header's ABI version and the library's
``pgm_abi_version()`` must both equal :data:`ABI_VERSION`.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ...errors import DeviceError

__all__ = ["ABI_VERSION", "LIBRARY_NAME", "NativeLibrary", "load_library", "LibraryNotFound", "Attempt", "candidate_paths"]

# 2: handles and prepared-B objects are never-reused tokens (PGM_ERR_STALE_HANDLE added);
# must equal POLYGEMM_MUSA_ABI_VERSION / PGM_ABI_VERSION in polygemm_musa.h.
ABI_VERSION = 2
ENV_VAR = "POLYGEMM_MUSA_LIBRARY"
REASON_MAX = 120  # a backend's reason is shown on one line of `polygemm info`
LIBRARY_NAME = "libpolygemm_musa.so"
HEADER_NAME = "polygemm_musa.h"
_PKG_DIR = Path(__file__).resolve().parent
_SRC_ROOT = _PKG_DIR.parents[2]  # the checkout, when running from source


@dataclass(frozen=True)
class Attempt:
    """One place tried: its label ("build tree", ...), the path or name, and why it failed."""

    label: str
    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.label} {self.where}: {self.why}"


class LibraryNotFound(Exception):
    """No usable library. ``str()`` is a one-line reason (at most REASON_MAX characters);
    ``attempts`` holds every place tried and why it failed, ``details()`` lists them."""

    def __init__(self, reason: str, attempts: Sequence[Attempt] = ()) -> None:
        super().__init__(reason)
        self.attempts: tuple[Attempt, ...] = tuple(attempts)

    def details(self) -> str:
        """The reason, then one line per place tried (for a verbose listing)."""
        return "\n".join([str(self)] + [f"  tried {a}" for a in self.attempts])


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shorten_path(path: str, limit: int) -> str:
    """``path`` cut in the middle to at most ``limit`` characters, keeping its file name."""
    if len(path) <= limit:
        return path
    tail = "/" + Path(path).name
    head = path[: max(limit - len(tail) - 1, 0)]
    return head + "…" + tail


def _path_reason(prefix: str, where: str, why: str) -> str:
    """``prefix+where: why`` in REASON_MAX characters: the path gives way before the why."""
    why = " ".join(why.split())
    floor = len("…/" + Path(where).name)  # the shortest the path gets
    why = _one_line(why, max(REASON_MAX - len(prefix) - 2 - floor, 20))
    where = _shorten_path(where, REASON_MAX - len(prefix) - 2 - len(why))
    return _one_line(f"{prefix}{where}: {why}", REASON_MAX)


def _dlopen_why(exc: OSError, where: str) -> str:
    """The loader's own words, without the path it repeats twice or cffi's find_library note."""
    text = re.split(r"\.\s+Additionally,", str(exc))[0]
    text = re.sub(r"^cannot load library '[^']*':\s*", "", text)
    return text.replace(f"{where}: ", "").strip() or "the loader refused it"


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
    raise LibraryNotFound(f"header {HEADER_NAME} not found; looked in " + ", ".join(map(str, places)))


def candidate_paths() -> list[tuple[str, str]]:
    """(label, path-or-name) in search order."""
    out: list[tuple[str, str]] = []
    env = os.environ.get(ENV_VAR)
    if env:  # explicit: the only place tried
        return [("$" + ENV_VAR, env)]
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
    if label != "system loader":
        if path.is_dir():
            raise LibraryNotFound(f"a directory; name the library file in it ({LIBRARY_NAME})")
        if not path.is_file():
            raise LibraryNotFound("no such file")
        # dlopen looks a name without a slash up on the loader's path, not here (and
        # Path("./x.so") prints as "x.so"): the file found here is the one to open
        path = path.absolute()
    header = _header_for(path if label != "system loader" else None)
    ffi = cffi.FFI()
    ffi.cdef(header_declarations(header.read_text()))
    try:
        lib = ffi.dlopen(str(path) if label != "system loader" else where)
    except OSError as exc:
        raise LibraryNotFound(_dlopen_why(exc, str(path) if label != "system loader" else where)) from exc
    try:
        got = int(lib.pgm_abi_version())
    except AttributeError:  # cffi resolves a symbol when it is first used
        raise LibraryNotFound(f"not {LIBRARY_NAME}: it has no pgm_abi_version function") from None
    declared = int(lib.PGM_ABI_VERSION)
    if got != ABI_VERSION or declared != ABI_VERSION:
        raise LibraryNotFound(f"ABI version mismatch: library {got}, header {declared}, polygemm needs {ABI_VERSION} (rebuild it)")
    info_text = ffi.string(lib.pgm_build_info()).decode()
    info = dict(part.split("=", 1) for part in info_text.split(";") if "=" in part)
    return NativeLibrary(ffi, lib, str(path) if label != "system loader" else where, str(header), info)


_lock = threading.Lock()
_cache: dict[tuple, NativeLibrary] = {}


def _reason(attempts: Sequence[Attempt]) -> str:
    """One line: the explicit path and its failure, else the first library found but not
    usable, else "not found" (the full list stays in LibraryNotFound.attempts)."""
    if attempts and attempts[0].label == "$" + ENV_VAR:
        a = attempts[0]
        why = a.why + (" (an explicit path: nothing else is tried)" if a.why == "no such file" else "")
        return _path_reason(f"{ENV_VAR}=", a.where, why)
    for a in attempts:
        if a.why != "no such file" and a.label != "system loader":
            more = len(attempts) - 1
            return _one_line(f"{LIBRARY_NAME} in the {a.label}: {a.why}" + (f" (+{more} more places tried)" if more else ""), REASON_MAX)
    return _one_line(f"{LIBRARY_NAME} not found in the package, build*/ or by the system loader; build it with CMake", REASON_MAX)


def load_library() -> NativeLibrary:
    """Load the first usable library in search order (only ``$POLYGEMM_MUSA_LIBRARY`` when it
    is set); LibraryNotFound has a one-line reason and every attempt in ``attempts``."""
    cands = tuple(candidate_paths())
    with _lock:
        if cands in _cache:
            return _cache[cands]
        tried: list[Attempt] = []
        for label, where in cands:
            try:
                nl = _open(label, where)
            except LibraryNotFound as exc:
                tried.append(Attempt(label, where, str(exc)))
                continue
            except Exception as exc:  # a broken file must not hide the others
                tried.append(Attempt(label, where, f"{type(exc).__name__}: {exc}"))
                continue
            _cache[cands] = nl
            return nl
        raise LibraryNotFound(_reason(tried), tried)
