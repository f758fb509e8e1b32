"""Backend discovery and dispatch.

Backends come from the entry-point group ``polygemm.backends`` (the built-ins ``cpu``,
``cuda`` and ``musa`` are registered there too) and are imported lazily, on first use. A
backend whose import or probe fails is kept, unavailable, with the original exception
text as its reason; it never breaks ``import polygemm``.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from .backend import Availability, Backend
from .errors import BackendUnavailableError, UnsupportedProblemError
from .problem import GemmProblem

__all__ = ["BackendInfo", "backends", "get_backend", "select", "refresh", "ENTRY_POINT_GROUP", "DEFAULT_PLUGIN_PRIORITY"]

ENTRY_POINT_GROUP = "polygemm.backends"
DEFAULT_PLUGIN_PRIORITY = 300

#: Built-ins, used when the package's own entry points are not installed (a source
#: checkout on PYTHONPATH); an installed polygemm registers the same names.
_BUILTINS = {
    "cpu": "polygemm.backends.cpu_ref:CpuReferenceBackend",
    "cuda": "polygemm.backends.cuda:CudaBackend",
    "musa": "polygemm.backends.musa:MusaBackend",
}
#: Priorities of the built-ins, also shown when one of them fails to import.
BUILTIN_PRIORITY = {"cuda": 500, "musa": 400, "cpu": 0}


@dataclass(frozen=True)
class BackendInfo:
    """One discovered backend: ``available`` and ``reason`` come from its import and probe."""

    name: str
    available: bool
    reason: str
    priority: int
    source: str
    backend: Backend | None

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"{self.name} (priority {self.priority}): {state}"


class _Entry:
    def __init__(self, name: str, target: str, source: str, loader: Any) -> None:
        self.name = name
        self.target = target
        self.source = source
        self._loader = loader
        self._lock = threading.Lock()
        self._backend: Backend | None = None
        self._error: str | None = None
        self._availability: Availability | None = None

    def backend(self) -> Backend | None:
        """Import and instantiate once; on failure remember the original exception text."""
        with self._lock:
            if self._backend is None and self._error is None:
                try:
                    obj = self._loader()
                    inst = obj() if isinstance(obj, type) else obj
                    if not isinstance(inst, Backend):
                        raise TypeError(f"{self.target} is not a polygemm Backend (got {type(inst).__name__})")
                    # The entry-point name is what users type: it is the backend's name.
                    inst.name = self.name  # type: ignore[misc]
                    self._backend = inst
                except Exception as exc:  # a broken plugin must not break polygemm
                    self._error = f"import failed: {type(exc).__name__}: {exc}"
            return self._backend

    def info(self) -> BackendInfo:
        be = self.backend()
        if be is None:
            prio = BUILTIN_PRIORITY.get(self.name, DEFAULT_PLUGIN_PRIORITY)
            return BackendInfo(self.name, False, self._error or "", prio, self.source, None)
        with self._lock:
            if self._availability is None:
                try:
                    av = be.probe()
                    if not isinstance(av, Availability):
                        av = Availability(bool(av), "" if av else "probe returned a false value")
                except Exception as exc:
                    av = Availability(False, f"probe failed: {type(exc).__name__}: {exc}")
                self._availability = av
            av = self._availability
        return BackendInfo(self.name, av.ok, "" if av.ok else av.reason, int(getattr(be, "priority", DEFAULT_PLUGIN_PRIORITY)), self.source, be)


_lock = threading.Lock()
_entries: dict[str, _Entry] | None = None
_generation = 0  # bumped by refresh(): plans made before it name backends that may be gone


def generation() -> int:
    """A number that changes whenever the discovered backends are forgotten (``refresh``)."""
    return _generation


def _load_target(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _discover() -> dict[str, _Entry]:
    entries: dict[str, _Entry] = {}
    try:
        eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # broken metadata somewhere on sys.path
        eps = ()
    for ep in eps:
        if ep.name in entries:
            continue  # first distribution on sys.path wins, as for imports
        dist = getattr(ep, "dist", None)
        source = f"entry point {ep.value} ({dist.name if dist is not None else 'unknown distribution'})"
        entries[ep.name] = _Entry(ep.name, ep.value, source, ep.load)
    for name, target in _BUILTINS.items():
        if name not in entries:
            entries[name] = _Entry(name, target, f"built-in {target}", lambda t=target: _load_target(t))
    return entries


def _all() -> dict[str, _Entry]:
    global _entries
    with _lock:
        if _entries is None:
            _entries = _discover()
        return _entries


def refresh() -> None:
    """Forget discovered backends so the next call re-reads the entry points."""
    global _entries, _generation
    with _lock:
        _entries = None
        _generation += 1


def backends() -> list[BackendInfo]:
    """Every discovered backend, highest priority first, with availability and reason."""
    infos = [e.info() for e in _all().values()]
    return sorted(infos, key=lambda i: (-i.priority, i.name))


def known_names() -> list[str]:
    return sorted(_all())


def get_backend(name: str) -> Backend:
    """The backend instance called ``name`` (available or not; see ``.probe()``).

    Raises BackendUnavailableError for an unknown name or one whose import failed.
    """
    entries = _all()
    entry = entries.get(name)
    if entry is None:
        raise BackendUnavailableError(f"unknown device {name!r}; known devices: {', '.join(sorted(entries))} (or 'auto')")
    be = entry.backend()
    if be is None:
        raise BackendUnavailableError(f"backend {name!r} could not be loaded: {entry.info().reason}")
    return be


def _summary(infos: list[BackendInfo]) -> str:
    return "; ".join(f"{i.name}: {'available' if i.available else i.reason}" for i in infos)


def resolve_device(device: str | None) -> str:
    """``None`` means the ``POLYGEMM_DEVICE`` environment variable, else ``"auto"``."""
    if device is None:
        device = os.environ.get("POLYGEMM_DEVICE", "").strip() or "auto"
    if not isinstance(device, str):
        raise BackendUnavailableError(f"device must be a backend name or 'auto'; got {device!r}")
    return device.strip().lower()


def select(problem: GemmProblem, device: str | None, variant: str = "auto") -> tuple[Backend, list[tuple[str, str]]]:
    """Pick the backend for ``problem``; return it and the candidates passed over (name, why).

    An explicit device never falls back. ``"auto"`` takes the available backend of highest
    priority that supports the problem (and has ``variant`` when one is named).
    """
    name = resolve_device(device)
    if name != "auto":
        entries = _all()
        if name not in entries:
            raise BackendUnavailableError(f"unknown device {name!r}; known devices: {', '.join(sorted(entries))} (or 'auto')")
        info = entries[name].info()
        if not info.available or info.backend is None:
            raise BackendUnavailableError(
                f"device {name!r} is unavailable: {info.reason}. Backends here: {_summary(backends())}. "
                f"Pick an available one or device='auto'."
            )
        return info.backend, []
    passed: list[tuple[str, str]] = []
    for info in backends():
        if not info.available or info.backend is None:
            passed.append((info.name, f"unavailable: {info.reason}"))
            continue
        why = info.backend.supports(problem)
        if why is None and variant != "auto" and variant not in {v.name for v in info.backend.variants()}:
            why = f"has no variant {variant!r}"
        if why is None and variant == "auto" and not any(v.auto and problem.dtype.name in v.dtypes for v in info.backend.variants()):
            why = f"no auto-selectable variant for {problem.dtype.name}"
        if why is not None:
            passed.append((info.name, why))
            continue
        return info.backend, passed
    detail = "; ".join(f"{n}: {w}" for n, w in passed)
    if variant != "auto":
        raise UnsupportedProblemError(f"no available backend has variant {variant!r} for this problem ({detail})")
    raise BackendUnavailableError(f"no available backend can compute this {problem.dtype.name} problem on {problem.residency}: {detail}")


