"""Discovery: the entry points of ``polygemm.backends`` (and the built-ins), each imported
lazily, once, and checked in a daemon thread for at most the probe timeout."""

from __future__ import annotations

import importlib
import os
import re
import threading
import time
from importlib import metadata
from typing import Any, Callable

from ..backend import Backend
from ..core.env import warn_bad_environment
from ..core.text import short_repr
from ..errors import ArgumentError, ArgumentTypeError
from .checks import DEFAULT_PLUGIN_PRIORITY, BackendInfo, Status, check_backend, make_info
from .names import entry_name, index_like
from .text import describe

__all__ = ["ENTRY_POINT_GROUP", "PROBE_TIMEOUT_ENV", "AUTO_PROBE_WAIT", "MAX_PROBE_TIMEOUT", "BUILTIN_PRIORITY", "probe_timeout", "generation", "all_entries", "refresh",
           "backends", "known_names", "backend_name", "Entry", "on_change"]

ENTRY_POINT_GROUP = "polygemm.backends"

#: seconds a backend's probe may take before it is listed unavailable
PROBE_TIMEOUT_ENV = "POLYGEMM_PROBE_TIMEOUT"


DEFAULT_PROBE_TIMEOUT = 30.0
#: seconds device="auto" waits, in all, for backends' probes still running before it passes them over
AUTO_PROBE_WAIT = 2.0


#: Built-ins, used when the package's own entry points are not installed (a source
#: checkout on PYTHONPATH); an installed polygemm registers the same names.
_BUILTINS = {
    "cpu": "polygemm.backends.cpu_ref:CpuReferenceBackend",
    "cuda": "polygemm.backends.cuda:CudaBackend",
    "musa": "polygemm.backends.musa:MusaBackend",
}


#: Priorities of the built-ins, also shown when one of them fails to import.
BUILTIN_PRIORITY = {"cuda": 500, "musa": 400, "cpu": 0}


_OWN_DISTRIBUTION = "polygemm"


#: the longest probe timeout taken: a day (threading's own limit is near 292 years, but
#: ``time.monotonic() + limit`` past the platform's time_t raises OverflowError, in every command)
MAX_PROBE_TIMEOUT = 86400.0


def probe_timeout() -> float:
    """Seconds one backend's checks (priority, variants, probe) may take: ``$POLYGEMM_PROBE_TIMEOUT`` or 30.

    A value that is not a number, or not a finite number of seconds in (0, 86400], warns
    (RuntimeWarning, naming the value; once a discovery, not once a backend) and keeps 30.
    """
    raw = os.environ.get(PROBE_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_PROBE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        why = "is not a number"
    else:
        if 0 < value <= MAX_PROBE_TIMEOUT:
            return value
        why = f"must be a finite number of seconds > 0 and at most {MAX_PROBE_TIMEOUT:g}"
    with _lock:  # once a discovery (refresh() starts another): each backend's first check reads it
        told = raw in _told_timeouts
        _told_timeouts.add(raw)
    if not told:
        warn_bad_environment(f"{PROBE_TIMEOUT_ENV}={raw!r} {why}; keeping {DEFAULT_PROBE_TIMEOUT:g} s")
    return DEFAULT_PROBE_TIMEOUT


#: the bad $POLYGEMM_PROBE_TIMEOUT values warned of in this discovery
_told_timeouts: set[str] = set()


_tls = threading.local()


def _probing() -> frozenset[str]:
    """Names of the backends whose checks run in this thread (and in the threads that started it)."""
    return getattr(_tls, "chain", frozenset())


class _PluginDefect(Exception):
    """A plugin entry's fault said as it is, not as "import failed": a backend whose ``name`` the registry cannot
    set, an entry point value that names no module."""


class Entry:
    def __init__(self, name: str, target: str, source: str, loader: Callable[[], Any] | None, error: str | None = None) -> None:
        self.name = name
        self.target = target
        self.source = source
        self._loader = loader
        self._lock = threading.RLock()  # held only for bookkeeping and the import itself
        self._importing = False
        self._backend: Backend | None = None
        self._error: str | None = error
        self._status: Status | None = None
        self._done: threading.Event | None = None
        self._deadline = 0.0
        self._limit = 0.0
        #: device="auto" went on without this backend while its checks ran
        self._passed_over = False

    def _fallback_priority(self) -> int:
        return BUILTIN_PRIORITY.get(self.name, DEFAULT_PLUGIN_PRIORITY)

    def _after_fork(self) -> None:
        """In a child made by ``os.fork`` (multiprocessing's fork start method, a pre-forking server): the
        threads that held this entry's lock, imported its backend or ran its checks are not copied. A
        lock one of them held would stay held forever, and checks still running at the fork would never
        finish (the child would wait out the probe timeout and call the backend unavailable). The child
        starts its own lock, import and checks; finished ones it keeps."""
        self._lock = threading.RLock()
        if self._backend is None and self._error is None:
            self._importing = False
        if self._status is None:
            self._done = None
            self._passed_over = False

    def backend(self) -> Backend | None:
        """Import and instantiate once; on failure remember the original exception text."""
        with self._lock:
            if self._backend is None and self._error is None and not self._importing and self._loader is not None:
                self._importing = True  # a plugin whose import asks for the backends sees None
                try:
                    if not _TARGET.fullmatch(self.target.strip()):
                        # importlib's own failure on it reads "'NoneType' object has no attribute 'group'"
                        raise _PluginDefect(f"entry point value {short_repr(self.target, 60)} is not 'module' or "
                                               f"'module:attribute' (dotted names, no spaces); fix it in the plugin's "
                                               f"entry_points")
                    obj = self._loader()
                    inst = obj() if isinstance(obj, type) else obj
                    if not isinstance(inst, Backend):
                        raise TypeError(f"{self.target} is not a polygemm Backend (got {type(inst).__name__})")
                    self._claim(inst)
                    # The entry-point name is what users type: it is the backend's name.
                    try:
                        inst.name = self.name  # type: ignore[misc]
                    except Exception as exc:  # a read-only name (a property): not the import that failed
                        raise _PluginDefect(
                            f"name is read-only, polygemm sets it to the entry point's {self.name!r}: make it a plain "
                            f"class attribute ({describe(exc)})") from None
                    self._backend = inst
                except KeyboardInterrupt:
                    raise
                except _PluginDefect as exc:
                    self._error = str(exc)
                except BaseException as exc:  # a broken plugin (even sys.exit()) must not break polygemm
                    self._error = f"import failed: {describe(exc)}"
                finally:
                    self._importing = False
            return self._backend

    def _claim(self, inst: Backend) -> None:
        """Take ``inst`` for this entry point. One Backend instance (an entry point's target that is an
        object, not a class) named by two entry points would be renamed by each as it loaded (device='one'
        reported as 'two'): the instance stays the first entry point's; the other is told."""
        with _lock:
            prior = _claims.get(id(inst))
            if prior is not None and prior[0] is inst and prior[1] != self.name:
                raise _PluginDefect(
                    f"same Backend instance as entry point {prior[1]!r} (an instance has one name): point both entry points "
                    f"at the class\n{self.target} is the object entry point {prior[1]!r} loaded first; polygemm names a backend "
                    f"after its entry point, so one instance cannot be both. A class gives each entry point an instance of its own")
            _claims[id(inst)] = (inst, self.name)

    def info(self, until: float | None = None) -> BackendInfo:
        """This backend's info; ``until`` (a ``time.monotonic()`` time): stop waiting for checks still
        running then, and report it passed over for now ("probe still running"), not unavailable."""
        be = self.backend()
        if be is None:
            text = self._error or "import still running (polygemm was asked for its backends while importing it)"
            return make_info(self.name, False, text, self._fallback_priority(), self.source, None)
        ok, text, prio = self._checked(be, until)
        return make_info(self.name, ok, text, prio, self.source, be)

    def start_checks(self) -> None:
        """Start this backend's checks (importing it first) without waiting for them."""
        be = self.backend()
        if be is not None:
            self._start(be, _probing())

    def _start(self, be: Backend, chain: frozenset[str]) -> tuple[threading.Event, float, float]:
        with self._lock:
            if self._done is None:
                self._limit = probe_timeout()
                self._deadline = time.monotonic() + self._limit
                self._done = threading.Event()
                worker = threading.Thread(target=self._run_checks, args=(be, self._done, chain | {self.name}),
                                          name=f"polygemm-probe-{self.name}", daemon=True)
                try:
                    worker.start()
                except RuntimeError:  # no more threads: check inline
                    self._run_checks(be, self._done, chain | {self.name})
            return self._done, self._deadline, self._limit

    def _checked(self, be: Backend, until: float | None = None) -> Status:
        """The checks' result; they run once, in a daemon thread, for at most the probe timeout."""
        chain = _probing()
        with self._lock:
            if self._status is not None:
                return self._status
        done, deadline, limit = self._start(be, chain)
        if self.name in chain:  # asked from inside its own probe (directly or through another one)
            return (False, "probe still running (its probe asked polygemm for the backends)", self._fallback_priority())
        now = time.monotonic()
        if until is not None and until < deadline:
            if self._passed_over:  # waited for once already: later calls go on at once while it runs
                until = now
            if not done.wait(max(0.0, until - now)):
                # device="auto" waits a few seconds, not the whole timeout: passed over for now, not called unavailable
                self._passed_over = True
                return (False, f"probe still running; device='auto' waits {AUTO_PROBE_WAIT:g} s for a backend's probe "
                               f"(`polygemm info` waits the {limit:g} s of ${PROBE_TIMEOUT_ENV})", self._fallback_priority())
        else:
            done.wait(max(0.0, deadline - now))
        with self._lock:
            if self._status is None:
                self._status = (False, f"probe did not return within {limit:g} s (${PROBE_TIMEOUT_ENV} sets the limit)",
                                self._fallback_priority())
            return self._status

    def _run_checks(self, be: Backend, done: threading.Event, chain: frozenset[str]) -> None:
        _tls.chain = chain
        try:
            status = check_backend(be, self._fallback_priority())
        except BaseException as exc:  # noqa: BLE001 - whatever the plugin does, the answer is "unavailable"
            status = (False, f"checks failed: {describe(exc)}", self._fallback_priority())
        finally:
            _tls.chain = frozenset()
        with self._lock:
            if self._status is None:
                self._status = status
            late = self._passed_over
        done.set()
        if late:  # plans made while device="auto" passed this backend over are made again, with it
            _next_generation()


_lock = threading.RLock()


_entries: dict[str, Entry] | None = None


#: id of each Backend instance loaded since the last refresh() -> (the instance, the entry point that has it)
_claims: dict[int, tuple[Backend, str]] = {}


_generation = 0  # bumped by refresh(): plans made before it name backends that may be gone


def _after_fork_in_child() -> None:
    """Each registry lock anew, and each entry's in-flight work given back to the child (:meth:`Entry._after_fork`)."""
    global _lock
    _lock = threading.RLock()
    for entry in list((_entries or {}).values()):
        entry._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


#: called with no arguments whenever the generation changes (the plan cache forgets its plans)
_on_change: list[Callable[[], None]] = []


def on_change(callback: Callable[[], None]) -> None:
    """Call ``callback`` whenever the discovered backends change: ``refresh()``, or a backend that
    ``device="auto"`` passed over while its probe ran answering later."""
    _on_change.append(callback)


def _changed() -> None:
    for callback in list(_on_change):
        callback()


def _next_generation() -> None:
    global _generation
    with _lock:
        _generation += 1
    _changed()


def generation() -> int:
    """A number that changes whenever the discovered backends are forgotten (``refresh``)."""
    return _generation


#: an entry point's value as importlib.metadata reads one: a dotted module, optionally ":" and a dotted attribute
#: (and an extras list in brackets)
_TARGET = re.compile(r"[\w.]+\s*(:\s*[\w.]+)?\s*(\[[^\]]*\])?")


def _load_target(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _norm_target(value: str) -> str:
    return re.sub(r"\s+", "", value or "")


def _dist_key(name: str | None) -> str:
    return re.sub(r"[-_.]+", "-", (name or "unknown").lower())


def _discover() -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    try:
        eps = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # broken metadata somewhere on sys.path
        eps = []

    def park(name: str, dist: str | None, value: str, source: str, why: str) -> None:
        """A plugin entry point that may not take ``name``: listed, unavailable, under name@dist."""
        key = base = f"{name}@{_dist_key(dist)}"
        n = 2
        while key in entries:
            key, n = f"{base}-{n}", n + 1
        entries[key] = Entry(key, value, source, None, error=why)

    for ep in eps:
        try:
            name, value = str(ep.name), str(ep.value)
            dist = getattr(ep, "dist", None)
            dname = getattr(dist, "name", None) if dist is not None else None
        except Exception:  # a malformed entry point
            continue
        source = f"entry point {value} ({dname or 'unknown distribution'})"
        if name.strip().lower() == "auto":  # device="auto" chooses; it could never name this plugin
            park(name, dname, value, source,
                 f"name {name!r} is reserved: device='auto' chooses a backend, so it never names this one; not loaded "
                 f"(rename the entry point of {dname or 'the plugin'})")
            continue
        if index_like(name):  # "dev:2" reads as device 2 of "dev"
            park(name, dname, value, source,
                 f"name {name!r} reads as a device index (':N' names device N of a backend, as in 'cuda:1'); not loaded "
                 f"(rename the entry point of {dname or 'the plugin'})")
            continue
        builtin = _BUILTINS.get(name.lower())  # device names are case-insensitive: "CPU" is the built-in's
        if builtin is not None and _norm_target(value) != _norm_target(builtin) and _dist_key(dname) != _OWN_DISTRIBUTION:
            park(name, dname, value, source,
                 f"name clashes with the built-in {name.lower()!r} backend: not loaded (rename the entry point of {dname or 'the plugin'})")
            continue
        taken = entry_name(name, entries)
        if taken is not None:
            if _norm_target(entries[taken].target) == _norm_target(value):
                continue  # the same target twice (two copies of one distribution on sys.path)
            park(name, dname, value, source,
                 f"name {name!r} is already taken by {entries[taken].source}"
                 + ("" if taken == name else f" (as {taken!r}; device names ignore case)") + ": not loaded (rename one entry point)")
            continue
        entries[name] = Entry(name, value, source, ep.load)
    for name, target in _BUILTINS.items():
        if name not in entries:
            entries[name] = Entry(name, target, f"built-in {target}", lambda t=target: _load_target(t))
    return entries


def all_entries() -> dict[str, Entry]:
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
        _claims.clear()
        _told_timeouts.clear()
        _generation += 1
    _changed()


def backends(wait: float | None = None) -> list[BackendInfo]:
    """Every discovered backend, highest priority first, with availability and reason. ``wait``:
    seconds to wait, in all, for checks still running (their backends are reported "probe still
    running" after it); None waits for each up to the probe timeout."""
    if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0):
        kind = ArgumentError if isinstance(wait, (int, float)) and not isinstance(wait, bool) else ArgumentTypeError
        raise kind(f"wait must be a number of seconds >= 0, or None to wait for each check up to its timeout; "
                   f"got {short_repr(wait)}")
    entries = list(all_entries().values())
    until = None
    if wait is not None:
        for e in entries:  # all checks run at once: the wait is for all of them, not for each in turn
            e.start_checks()
        until = time.monotonic() + wait
    infos = [e.info(until) for e in entries]
    return sorted(infos, key=lambda i: (-i.priority, i.name.lower(), i.name))  # names are one device whatever their case


def known_names() -> list[str]:
    return sorted(all_entries())


def backend_name(name: str) -> str | None:
    """The discovered backend's own name that ``name`` designates (names ignore case and
    surrounding spaces, as ``device=`` takes them: ``"CPU"`` is ``"cpu"``); None when none."""
    return entry_name(name.strip(), all_entries())
