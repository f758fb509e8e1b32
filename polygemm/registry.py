"""Backend discovery and dispatch.

Backends come from the entry-point group ``polygemm.backends`` (the built-ins ``cpu``,
``cuda`` and ``musa`` are registered there too) and are imported lazily, on first use. A
backend whose import or probe fails is kept, unavailable, with the original exception
text as its reason; it never breaks ``import polygemm``, ``device="auto"`` or
``polygemm.backends()``:

* anything a plugin raises while it is imported, instantiated or probed (``SystemExit``
  included; only ``KeyboardInterrupt`` goes through) makes it unavailable with the reason;
* the checks of a backend (its ``priority`` is an integer, ``variants()`` returns
  ``Variant`` objects, ``probe()`` returns an ``Availability``) run in a daemon thread that
  gets ``$POLYGEMM_PROBE_TIMEOUT`` seconds (default 30); a probe that does not return in
  time leaves its backend unavailable ("probe did not return within N s");
* a probe may itself call ``polygemm.backends()``: no lock is held while plugin code runs,
  and the probing backend is then listed as "probe still running";
* a plugin entry point named like a built-in (``cpu``, ``cuda``, ``musa``) or like another
  plugin's entry point does not replace it: it is listed, unavailable, under
  ``name@distribution`` with the clash as its reason.

Reasons are one line of at most 120 characters (``BackendInfo.reason``); the backend's
whole text is ``BackendInfo.detail`` (``polygemm info -v``, ``BackendUnavailableError.details``).
"""

from __future__ import annotations

import importlib
import numbers
import os
import re
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable

from .backend import Availability, Backend, Variant, variant_hint
from .errors import ArgumentError, ArgumentTypeError, BackendUnavailableError, DTypeError, PolygemmError, UnknownDeviceError, UnsupportedProblemError, did_you_mean
from .problem import GemmProblem, short_repr

__all__ = [
    "BackendInfo",
    "backends",
    "get_backend",
    "select",
    "refresh",
    "resolve_device",
    "device_arg_name",
    "generation",
    "one_line",
    "split_index",
    "lookup",
    "locate_device",
    "ENTRY_POINT_GROUP",
    "DEFAULT_PLUGIN_PRIORITY",
    "PROBE_TIMEOUT_ENV",
    "REASON_LIMIT",
    "env_flag",
]

ENTRY_POINT_GROUP = "polygemm.backends"
DEFAULT_PLUGIN_PRIORITY = 300
#: the longest reason ``BackendInfo.reason`` and the messages built from it carry
REASON_LIMIT = 120
#: seconds a backend's probe may take before it is listed unavailable
PROBE_TIMEOUT_ENV = "POLYGEMM_PROBE_TIMEOUT"
DEFAULT_PROBE_TIMEOUT = 30.0

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


_PATH = re.compile(r"(?<![\w.])(?:/[^\s/:;,'\"()]+){3,}")


def one_line(text: Any, limit: int = REASON_LIMIT) -> str:
    """The first non-empty line of ``text``, whitespace collapsed, at most ``limit`` characters.

    A longer line is cut at a word boundary and ends in `` ...``.
    """
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    s = " ".join(lines[0].split()) if lines else ""
    if len(s) <= limit:
        return s
    whole = s
    for keep in (2, 1):  # too long: long absolute paths lose their leading folders first
        s = _PATH.sub(lambda m, k=keep: ".../" + "/".join(m.group(0).split("/")[-k:]), whole)
        if len(s) <= limit:
            return s
    cut = s[: limit - 4]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ;,:(") + " ..."


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: the longest probe timeout taken: a day (threading's own limit is near 292 years, but
#: ``time.monotonic() + limit`` past the platform's time_t raised OverflowError in every command)
MAX_PROBE_TIMEOUT = 86400.0


def probe_timeout() -> float:
    """Seconds one backend's checks (priority, variants, probe) may take: ``$POLYGEMM_PROBE_TIMEOUT`` or 30.

    A value that is not a number, or not a finite number of seconds in (0, 86400], warns
    (RuntimeWarning, naming the value) and keeps 30.
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
    import warnings

    warnings.warn(f"{PROBE_TIMEOUT_ENV}={raw!r} {why}; keeping {DEFAULT_PROBE_TIMEOUT:g} s", RuntimeWarning, stacklevel=2)
    return DEFAULT_PROBE_TIMEOUT


#: the spellings an on/off environment variable takes (any case, spaces around ignored)
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def env_flag(name: str, default: bool = False) -> bool:
    """An on/off environment variable: ``default`` when unset; 1, true, yes, on (any case) are
    True, and 0, false, no, off or empty are False. Anything else raises ArgumentError naming the
    variable, its value and the spellings taken (a typo must not quietly mean "off")."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ArgumentError(f"{name}={raw!r} is not an on/off value; set it to one of {', '.join(TRUE_WORDS)} (on) or "
                        f"{', '.join(w for w in FALSE_WORDS if w)} or empty (off), in any case")


@dataclass(frozen=True)
class BackendInfo:
    """One discovered backend: ``available`` and ``reason`` come from its import and probe.

    ``reason`` is one line (at most 120 characters, "" when available); ``detail`` is the
    backend's whole text (e.g. every place a library was looked for), shown by
    ``polygemm info -v``.

    ``backend`` is the live instance of this process (None where the import failed). A pickled
    info arrives with ``backend=None`` (``get_backend(name)`` gives the receiving process its
    own): an instance holds this process's locks, driver handles and kernels.
    """

    name: str
    available: bool
    reason: str
    priority: int
    source: str
    backend: Backend | None
    detail: str = ""

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"{self.name} (priority {self.priority}): {state}"

    def __reduce__(self) -> tuple[Any, ...]:
        # what a worker reports (dask's client.run(polygemm.backends), a process pool) had failed to pickle with "cannot
        # pickle '_thread.lock' object", the cuda backend's lock, available or not: sent without the instance
        return BackendInfo, (self.name, self.available, self.reason, self.priority, self.source, None, self.detail)

    def __copy__(self) -> BackendInfo:  # frozen: a copy in this process is this info (and its live backend)
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> BackendInfo:
        return self


#: (available, full reason, priority) of one backend's checks
_Status = tuple[bool, str, int]
_tls = threading.local()


def _probing() -> frozenset[str]:
    """Names of the backends whose checks run in this thread (and in the threads that started it)."""
    return getattr(_tls, "chain", frozenset())


class _PluginDefect(Exception):
    """A plugin entry's defect said as it is, not as "import failed": a backend whose ``name`` the registry cannot
    set, an entry point value that names no module."""


class _Entry:
    def __init__(self, name: str, target: str, source: str, loader: Callable[[], Any] | None, error: str | None = None) -> None:
        self.name = name
        self.target = target
        self.source = source
        self._loader = loader
        self._lock = threading.RLock()  # held only for bookkeeping and the import itself
        self._importing = False
        self._backend: Backend | None = None
        self._error: str | None = error
        self._status: _Status | None = None
        self._done: threading.Event | None = None
        self._deadline = 0.0
        self._limit = 0.0

    def _fallback_priority(self) -> int:
        return BUILTIN_PRIORITY.get(self.name, DEFAULT_PLUGIN_PRIORITY)

    def _after_fork(self) -> None:
        """In a child made by ``os.fork`` (multiprocessing's fork start method, a pre-forking server): the
        threads that held this entry's lock, imported its backend or ran its checks were not copied. A
        lock one of them held stayed held forever (the child hung at its first call), and checks still
        running at the fork never finished: the child waited out the whole probe timeout (30 s) and
        then called the backend unavailable ("probe did not return"), so device='auto' silently took
        another backend. The child starts its own lock, import and checks; finished ones it keeps."""
        self._lock = threading.RLock()
        if self._backend is None and self._error is None:
            self._importing = False
        if self._status is None:
            self._done = None

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
                            f"class attribute ({_describe(exc)})") from None
                    self._backend = inst
                except KeyboardInterrupt:
                    raise
                except _PluginDefect as exc:
                    self._error = str(exc)
                except BaseException as exc:  # a broken plugin (even sys.exit()) must not break polygemm
                    self._error = f"import failed: {_describe(exc)}"
                finally:
                    self._importing = False
            return self._backend

    def _claim(self, inst: Backend) -> None:
        """Take ``inst`` for this entry point. One Backend instance (an entry point's target that is an
        object, not a class) named by two entry points had been renamed by each as it loaded: device='one'
        ran and was reported as 'two'. The instance stays the first entry point's; the other is told."""
        with _lock:
            prior = _claims.get(id(inst))
            if prior is not None and prior[0] is inst and prior[1] != self.name:
                raise _PluginDefect(
                    f"same Backend instance as entry point {prior[1]!r} (an instance has one name): point both entry points "
                    f"at the class\n{self.target} is the object entry point {prior[1]!r} loaded first; polygemm names a backend "
                    f"after its entry point, so one instance cannot be both. A class gives each entry point an instance of its own")
            _claims[id(inst)] = (inst, self.name)

    def info(self) -> BackendInfo:
        be = self.backend()
        if be is None:
            text = self._error or "import still running (polygemm was asked for its backends while importing it)"
            return _make_info(self.name, False, text, self._fallback_priority(), self.source, None)
        ok, text, prio = self._checked(be)
        return _make_info(self.name, ok, text, prio, self.source, be)

    def _checked(self, be: Backend) -> _Status:
        """The checks' result; they run once, in a daemon thread, for at most the probe timeout."""
        chain = _probing()
        with self._lock:
            if self._status is not None:
                return self._status
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
            done, deadline, limit = self._done, self._deadline, self._limit
        if self.name in chain:  # asked from inside its own probe (directly or through another one)
            return (False, "probe still running (its probe asked polygemm for the backends)", self._fallback_priority())
        done.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            if self._status is None:
                self._status = (False, f"probe did not return within {limit:g} s (${PROBE_TIMEOUT_ENV} sets the limit)",
                                self._fallback_priority())
            return self._status

    def _run_checks(self, be: Backend, done: threading.Event, chain: frozenset[str]) -> None:
        _tls.chain = chain
        try:
            status = self._checks(be)
        except BaseException as exc:  # noqa: BLE001 - whatever the plugin does, the answer is "unavailable"
            status = (False, f"checks failed: {_describe(exc)}", self._fallback_priority())
        finally:
            _tls.chain = frozenset()
        with self._lock:
            if self._status is None:
                self._status = status
        done.set()

    def _checks(self, be: Backend) -> _Status:
        fallback = self._fallback_priority()
        try:
            prio = getattr(be, "priority", DEFAULT_PLUGIN_PRIORITY)
        except BaseException as exc:
            return (False, f"reading priority failed: {_describe(exc)}", fallback)
        if isinstance(prio, bool) or not isinstance(prio, numbers.Integral):
            return (False, f"priority must be an integer; got {type(prio).__name__} {short_repr(prio, 40)}", fallback)
        prio = int(prio)
        try:
            table = be.variants()
            items = [table] if isinstance(table, (str, bytes)) else list(table)
        except BaseException as exc:
            return (False, f"variants() failed: {_describe(exc)}", prio)
        malformed = variant_table_error(items)
        if malformed:
            return (False, malformed, prio)
        try:
            av = be.probe()
        except BaseException as exc:
            return (False, f"probe failed: {_describe(exc)}", prio)
        if not isinstance(av, Availability):
            return (False, f"probe() must return an Availability; it returned {type(av).__name__} {short_repr(av, 40)}", prio)
        if av.ok and not items:  # available, yet nothing could run on it ("it supports " and then nothing, in every refusal)
            return (False, _EMPTY_TABLE, prio)
        if av.ok:
            return (True, "", prio)
        reason = av.reason if isinstance(av.reason, str) else short_repr(av.reason, 200)
        extra = getattr(av, "detail", "")  # a longer text, should Availability grow one
        if isinstance(extra, str) and extra.strip() and extra.strip() != reason.strip():
            reason = f"{reason}\n{extra}"
        return (False, reason if reason.strip() else "probe said unavailable without a reason", prio)


def _names_tuple(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(isinstance(x, str) and x for x in value)


_EMPTY_TABLE = "variants() returned no Variant; a backend lists at least one kernel it runs"


def variant_table_error(items: list[Any]) -> str | None:
    """What is wrong with a backend's variant table (entries that are no Variants, or fields not of
    their kind), else None; an empty table is no error here (see _EMPTY_TABLE). The registry's probe
    and ``polygemm variants`` ask it. Such a table had been taken as it was: ``dtypes="float32"``
    read as the dtypes 'f', 'l', 'o', ... ("does not support dtype float32; it supports 2, 3, a, f,
    l, o, t"), a name given twice made the second variant unreachable, a variant named by no string
    could not be selected at all, and tile=None crashed ``polygemm variants``."""
    bad = [v for v in items if not isinstance(v, Variant)]
    if bad:
        return f"variants() must return Variant objects; got {type(bad[0]).__name__} {short_repr(bad[0], 40)}"
    seen: set[str] = set()
    for v in items:
        if not isinstance(v.name, str) or not v.name.strip():
            return f"variants(): a Variant's name must be a non-empty string; got {short_repr(v.name, 40)}"
        for field_name in ("dtypes", "out_dtypes"):
            value = getattr(v, field_name)
            if not _names_tuple(value):
                return (f"variants(): variant {v.name!r} has {field_name}={short_repr(value, 40)}; it must be a tuple of "
                        f"dtype names, e.g. ('float32',)")
        if not v.dtypes:
            return f"variants(): variant {v.name!r} has dtypes=(); name the dtypes it computes, e.g. ('float32',)"
        # the text fields are printed by `polygemm variants` (tile=None had crashed it for every backend)
        for field_name in ("description", "layout", "tile", "requirements"):
            value = getattr(v, field_name)
            if not isinstance(value, str):
                return f"variants(): variant {v.name!r} has {field_name}={short_repr(value, 40)}; it must be a string"
        for field_name in ("auto", "vendor"):
            value = getattr(v, field_name)
            if isinstance(value, str) or value not in (True, False):
                return f"variants(): variant {v.name!r} has {field_name}={short_repr(value, 40)}; it must be True or False"
        if v.name in seen:
            return f"variants(): variant {v.name!r} is listed twice; give each variant its own name"
        seen.add(v.name)
    return None


def _make_info(name: str, ok: bool, text: str, priority: int, source: str, be: Backend | None) -> BackendInfo:
    if ok:
        return BackendInfo(name, True, "", priority, source, be)
    return BackendInfo(name, False, one_line(text) or "unavailable", priority, source, be, text.strip())


_lock = threading.RLock()
_entries: dict[str, _Entry] | None = None
#: id of each Backend instance loaded since the last refresh() -> (the instance, the entry point that has it)
_claims: dict[int, tuple[Backend, str]] = {}
_generation = 0  # bumped by refresh(): plans made before it name backends that may be gone


def _after_fork_in_child() -> None:
    """Each registry lock anew, and each entry's in-flight work given back to the child (:meth:`_Entry._after_fork`)."""
    global _lock
    _lock = threading.RLock()
    for entry in list((_entries or {}).values()):
        entry._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


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


def _discover() -> dict[str, _Entry]:
    entries: dict[str, _Entry] = {}
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
        entries[key] = _Entry(key, value, source, None, error=why)

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
        if _index_like(name):  # "dev:2" reads as device 2 of "dev"
            park(name, dname, value, source,
                 f"name {name!r} reads as a device index (':N' names device N of a backend, as in 'cuda:1'); not loaded "
                 f"(rename the entry point of {dname or 'the plugin'})")
            continue
        builtin = _BUILTINS.get(name.lower())  # device names are case-insensitive: "CPU" is the built-in's
        if builtin is not None and _norm_target(value) != _norm_target(builtin) and _dist_key(dname) != _OWN_DISTRIBUTION:
            park(name, dname, value, source,
                 f"name clashes with the built-in {name.lower()!r} backend: not loaded (rename the entry point of {dname or 'the plugin'})")
            continue
        taken = _entry_name(name, entries)
        if taken is not None:
            if _norm_target(entries[taken].target) == _norm_target(value):
                continue  # the same target twice (two copies of one distribution on sys.path)
            park(name, dname, value, source,
                 f"name {name!r} is already taken by {entries[taken].source}"
                 + ("" if taken == name else f" (as {taken!r}; device names ignore case)") + ": not loaded (rename one entry point)")
            continue
        entries[name] = _Entry(name, value, source, ep.load)
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
        _claims.clear()
        _generation += 1


def backends() -> list[BackendInfo]:
    """Every discovered backend, highest priority first, with availability and reason."""
    infos = [e.info() for e in list(_all().values())]
    return sorted(infos, key=lambda i: (-i.priority, i.name))


def known_names() -> list[str]:
    return sorted(_all())


def backend_name(name: str) -> str | None:
    """The discovered backend's own name that ``name`` designates (names ignore case and
    surrounding spaces, as ``device=`` takes them: ``"CPU"`` is ``"cpu"``); None when none."""
    return _entry_name(name.strip(), _all())


#: the GPU backends a device="gpu" may mean, with whose GPUs they run on
_GPU_BACKENDS = {"cuda": "NVIDIA", "musa": "Moore Threads"}


def name_hint(name: str, known: list[str]) -> str:
    """What an unknown device or backend ``name`` probably meant, as " (...)", or "".

    "gpu" is no typo of "cpu" (the nearest name by spelling), which it had been told it meant
    ("did you mean 'cpu'?"): a user asking for a GPU is told the GPU backends instead."""
    if name.strip().lower() in ("gpu", "gpus"):
        gpus = [f"{g!r} ({_GPU_BACKENDS[g]})" for g in _GPU_BACKENDS if g in known]
        if gpus:
            return f" (a GPU is {' or '.join(gpus)}; `polygemm info` says which is available here)"
    return did_you_mean([name.strip()], known)


def _unknown(name: str, entries: dict[str, _Entry]) -> UnknownDeviceError:
    known = sorted(entries)
    return UnknownDeviceError(f"unknown device {short_repr(name)}{name_hint(name, known + ['auto'])}; known devices: {', '.join(known)} (or 'auto')")


#: a device index as torch.device writes one: ASCII digits, no sign, no spaces, no leading zeros
_INDEX = re.compile(r"0|[1-9][0-9]*")
#: what reads as a try at one (" 1", "01", "+1", "-1", a non-ASCII digit): refused, saying how to write it
_INDEX_LIKE = re.compile(r"\s*[+-]?\d+\s*")


def split_index(name: str) -> tuple[str, int | None]:
    """``name`` split into (base, device index): ``"cuda:1"`` -> ``("cuda", 1)``.

    The split is at the first ``:``, and only where what follows it is an index written as
    torch.device writes one (ASCII digits, no sign, no spaces, no leading zeros); any other
    name, ``"cuda"``, ``"cuda:01"`` or ``"cuda: 1"`` among them, comes back whole with None.
    Text only: it neither strips nor case-folds ``name``, nor asks whether ``base`` names a
    backend (:func:`lookup` does, and refuses a backend's index written otherwise).
    """
    base, sep, index = name.partition(":")
    if sep and base and _INDEX.fullmatch(index):
        return base, int(index)
    return name, None


def _index_like(name: str) -> bool:
    """Whether ``name`` reads as ``backend:N``, the index written well or not (``"dev:01"``, ``"dev: 2"``)."""
    base, sep, index = name.partition(":")
    return bool(sep and base and _INDEX_LIKE.fullmatch(index))


def _bad_index(name: str, base: str, index: str, note: str = "") -> ArgumentError:
    """The refusal of ``base:index`` whose index is not written as :data:`_INDEX` writes one."""
    try:
        value: int | None = int(index)
    except ValueError:  # a digit int() does not read ("²")
        value = None
    like = f"{base}:{value}" if value is not None and value >= 0 else f"{base}:0"
    return ArgumentError(f"device={short_repr(name)}: a device index is a whole number >= 0 written in ASCII digits without a sign, "
                         f"spaces or leading zeros (as torch.device writes it), e.g. {like!r}; got {index!r}{note}")


def _entry_name(name: str, entries: dict[str, _Entry]) -> str | None:
    """The discovered backend ``name`` designates: the entry of that exact name, else the one
    entry equal to it up to case (device names are case-insensitive, as ``"CPU"`` is ``cpu``;
    a plugin's entry point may be named ``MyDev``); None when there is none."""
    if name in entries:
        return name
    folded = [n for n in entries if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _lookup(name: str, entries: dict[str, _Entry], note: str = "") -> tuple[str | None, int | None]:
    """``name`` (``"cuda:1"`` included) as (entry name, device index); (None, None) when no
    discovered backend has that name. A backend's name with an index written otherwise
    (``"cpu:01"``, ``"cuda: 1"``) is an ArgumentError saying how to write it (``note`` appended)."""
    found = _entry_name(name, entries)
    if found is not None:
        return found, None
    base, index = split_index(name)
    if index is None:
        base, _, text = name.partition(":")
        if _index_like(name) and _entry_name(base, entries) is not None:
            raise _bad_index(name, base, text, note)
        return None, None
    found = _entry_name(base, entries)
    return (found, index) if found is not None else (None, None)


def lookup(name: str, note: str = "") -> tuple[str | None, int | None]:
    """The discovered backend ``name`` designates, as (its own name, device index or None):
    ``"CUDA:1"`` -> ``("cuda", 1)``, a plugin's entry point as spelt. (None, None) when no
    discovered backend has that name. Neither imports nor probes any backend. ``name`` is taken
    as given (:func:`resolve_device` strips and lower-cases ``device=``). A backend's name with
    an index written otherwise (``"cpu:01"``, ``"cuda: 1"``) raises ArgumentError saying how
    to write it, ``note`` appended."""
    return _lookup(name, _all(), note)


def _from_env(device: str | None) -> str:
    """A note for errors about the device when it came from ``$POLYGEMM_DEVICE`` (``device`` is
    None and the variable names one), else ""."""
    if device is not None:
        return ""
    raw = os.environ.get("POLYGEMM_DEVICE", "").strip()
    if not raw or raw.lower() == "auto":
        return ""
    return f" (the device comes from $POLYGEMM_DEVICE={raw!r}: unset it, or {ENV_DEVICE_WAY}, to choose another)"


#: how the note of :func:`_from_env` tells a caller to name a device: the API's keyword (the CLI says --device)
ENV_DEVICE_WAY = "pass device="


def check_known(device: str) -> None:
    """Raise BackendUnavailableError (suggesting the nearest name) unless ``device`` names a
    discovered backend (``"cuda:1"`` its device 1) or ``"auto"``, and ArgumentError for an index
    written otherwise (``"cuda:01"``); whether it can run here is not asked (a dask worker may
    have the GPU this machine lacks)."""
    name = resolve_device(device)
    entries = _all()
    if name != "auto" and _lookup(name, entries)[0] is None:
        raise _unknown(name, entries)


def _for_device(be: Backend, index: int) -> Backend:
    """``be.for_device(index)``. A plugin's for_device that raises anything but a polygemm error
    (its contract: BackendUnavailableError) is that device being unavailable, with the reason:
    its RuntimeError had reached ``device="plug:1"`` callers, and the CLI, as a traceback."""
    try:
        return be.for_device(index)
    except (KeyboardInterrupt, PolygemmError):
        raise
    except BaseException as exc:  # noqa: BLE001 - a broken plugin is unavailable, never fatal
        text = f"for_device({index}) failed: {_describe(exc)}"
        raise BackendUnavailableError(f"device {short_repr(f'{be.name}:{index}')} is unavailable: {one_line(text)}", details=text) from None


def get_backend(name: str) -> Backend:
    """The backend instance called ``name`` (available or not; see ``.probe()``).

    ``"cuda:0"`` names the ``cuda`` backend. Raises BackendUnavailableError for an
    unknown name (suggesting the nearest known one) or one whose import failed, and
    ArgumentError for ``"auto"`` (not a backend) and ArgumentTypeError (an ArgumentError and a
    TypeError, as ``device=3`` raises) for a name that is not a string.
    """
    if not isinstance(name, str):
        raise ArgumentTypeError(f"get_backend takes a backend name (e.g. 'cpu', 'cuda', 'cuda:1'); got {short_repr(name)} ({type(name).__name__})")
    entries = _all()
    found, index = _lookup(name if name in entries else name.strip(), entries)  # as device= takes it ("CPU", " cuda ")
    if found is None and name.strip().lower() == "auto":
        raise ArgumentError("'auto' is not a backend: device='auto' chooses one per problem (polygemm.explain(a, b).backend "
                            f"says which); get_backend takes a backend name: {', '.join(sorted(entries))}")
    if found is None:
        raise _unknown(name.strip().lower(), entries)
    entry = entries[found]
    be = entry.backend()
    if be is None:
        info = entry.info()
        raise BackendUnavailableError(f"backend {entry.name!r} could not be loaded: {info.reason}", details=info.detail)
    return be if index is None else _for_device(be, index)


def _details(infos: list[BackendInfo]) -> str:
    """Every backend's whole text, one block each (the ``details`` of an exception)."""
    return "\n".join(f"{i.name}: available" if i.available else f"{i.name}: unavailable: {i.detail or i.reason}" for i in infos)


def resolve_device(device: str | None) -> str:
    """``None`` means the ``POLYGEMM_DEVICE`` environment variable, else ``"auto"``.

    Returns the lower-cased name; ``"name:N"`` (as CuPy and PyTorch spell devices) names the
    backend's device N (``select`` and ``get_backend`` resolve it).
    """
    if device is None:
        device = os.environ.get("POLYGEMM_DEVICE", "").strip() or "auto"
    return device_arg_name(device).strip().lower()


def device_arg_name(device: object) -> str:
    """``device`` as polygemm names it: a string as given; the device object of an array library
    as its name says it (``torch.device("cuda", 1)`` -> ``"cuda:1"``, ``torch.device("cpu")`` ->
    ``"cpu"``, ``cupy.cuda.Device(1)`` -> ``"cuda:1"``), so ``device=tensor.device`` works.
    Anything else is an ArgumentTypeError that says what is accepted."""
    if isinstance(device, str):
        return device
    library = type(device).__module__.partition(".")[0]
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if library == "torch" and isinstance(kind, str) and (index is None or isinstance(index, int)):
        return kind if index is None else f"{kind}:{index}"
    ordinal = getattr(device, "id", None)
    if library == "cupy" and isinstance(ordinal, int):
        return f"cuda:{ordinal}"
    raise ArgumentTypeError(f"device must be a backend name (e.g. 'cpu', 'cuda', 'cuda:1'), 'auto', a torch.device or "
                            f"a cupy.cuda.Device; got {short_repr(device)} ({type(device).__name__})")


def locate_device(device: str | None) -> tuple[BackendInfo, int | None, str]:
    """The backend an explicit ``device`` (a name, not ``"auto"``; None reads
    ``$POLYGEMM_DEVICE``, as :func:`resolve_device` does) designates, probed: its
    :class:`BackendInfo` (``available`` and ``reason`` say whether it can run here), the device
    index the name gives (None when none; not yet asked of the backend) and the note to append
    to errors about that device ("" unless the name came from ``$POLYGEMM_DEVICE``).

    Raises BackendUnavailableError for a name no discovered backend has (suggesting the nearest
    one, the note appended), ArgumentError for an index written otherwise (``"cuda:01"``) and
    for ``"auto"``, which names no backend.
    """
    name = resolve_device(device)
    entries = _all()
    if name == "auto":
        raise ArgumentError(f"'auto' is not a backend: it chooses one per problem; name one of {', '.join(sorted(entries))}")
    env = _from_env(device)
    found, index = _lookup(name, entries, env)
    if found is None:
        exc = _unknown(name, entries)
        raise UnknownDeviceError(f"{exc}{env}") if env else exc
    return entries[found].info(), index, env


def _rule_out(be: Backend, problem: GemmProblem, variant: str) -> str | None:
    """Why ``device="auto"`` passes ``be`` over for ``problem`` (None: it takes it)."""
    try:
        why = be.supports(problem)
        if why is not None and not isinstance(why, str):
            # True read as the reason "True" (a plugin meaning "yes, supported" was passed over saying True), False
            # as "False": neither is an answer of the contract, which is None or the reason
            return (f"supports() returned {type(why).__name__} {short_repr(why, 40)}; it must return None when the backend "
                    f"can compute the problem, else the reason (a string)")
        if why is not None:
            return one_line(why) or "supports() gave an empty reason"
        names = [v.name for v in be.variants()]
        if variant != "auto" and variant not in names:
            try:  # a spelling the backend parses itself (cuda's "rung:split_k=8"), which device='cuda' runs
                be.get_variant(variant)
            except PolygemmError:
                return f"has no variant {short_repr(variant)}{variant_hint(variant, names)}"
        if variant == "auto" and not any(v.auto and problem.dtype.name in v.dtypes for v in be.variants()):
            return f"no auto-selectable variant for {problem.dtype.name}"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a broken plugin is passed over, never fatal
        return one_line(f"supports()/variants()/get_variant() failed: {_describe(exc)}")
    return None


def _dtypes_on(infos: list[BackendInfo], residency: str) -> tuple[str, ...]:
    """The dtypes the available backends that take ``residency`` data compute (a broken plugin counts none)."""
    found: set[str] = set()
    for info in infos:
        be = info.backend
        if info.available and be is not None and residency in getattr(be, "residencies", ()):
            try:
                found.update(be.dtypes())
            except Exception:  # passed over, as _rule_out passes it over
                pass
    return tuple(sorted(found))


def select(problem: GemmProblem, device: str | None, variant: str = "auto") -> tuple[Backend, list[tuple[str, str]]]:
    """Pick the backend for ``problem``; return it and the candidates passed over (name, why).

    An explicit device never falls back. ``"auto"`` takes the available backend of highest
    priority that supports the problem (and has ``variant`` when one is named). Each reason
    is one line; the exceptions' ``details`` carry every backend's whole text.
    """
    name = resolve_device(device)
    if name != "auto":
        info, index, env = locate_device(device)
        name = info.name
        if not info.available or info.backend is None:
            everyone = backends()
            others = "; ".join(f"{i.name}: {'available' if i.available else 'unavailable'}" for i in everyone if i.name != name)
            raise BackendUnavailableError(
                f"device {short_repr(name)} is unavailable: {info.reason}. Backends here: {others}. Pick an available one or device='auto'.{env}",
                details=_details([info] + [i for i in everyone if i.name != name]),
            )
        if index is None:
            return info.backend, []
        try:
            return _for_device(info.backend, index), []
        except BackendUnavailableError as exc:
            if not env:
                raise
            raise BackendUnavailableError(f"{exc}{env}", details=exc.details) from None
    passed: list[tuple[str, str]] = []
    infos = backends()
    for info in infos:
        if not info.available or info.backend is None:
            passed.append((info.name, f"unavailable: {info.reason}"))
            continue
        why = _rule_out(info.backend, problem, variant)
        if why is not None:
            passed.append((info.name, why))
            continue
        return info.backend, passed
    summary = "; ".join(f"{n}: {w}" for n, w in passed)
    takes = _dtypes_on(infos, problem.residency)
    if variant == "auto" and problem.residency != "host" and takes and problem.dtype.name not in takes:
        # the data's device is there and only its dtype is refused: a dtype error, as device='cuda' gives
        raise DTypeError(f"no available backend computes {problem.dtype.name} on {problem.residency} data; it takes "
                         f"{', '.join(takes)}: convert the operands (e.g. a.astype('float32')) ({summary})", details=_details(infos))
    if variant != "auto":
        # what the available backends have, as device=<name> lists it (device='auto' had said only what they lack)
        known = "; ".join(f"{info.name}: {', '.join(v.name for v in info.backend.variants())}" for info in infos
                          if info.available and info.backend is not None and any(n == info.name and w.startswith("has no variant")
                                                                                 for n, w in passed))
        raise UnsupportedProblemError(f"no available backend has variant {short_repr(variant)} for this problem ({summary})"
                                      + (f"; their variants: {known}" if known else ""), details=_details(infos))
    raise BackendUnavailableError(f"no available backend can compute this {problem.dtype.name} problem on {problem.residency}: {summary}",
                                  details=_details(infos))
