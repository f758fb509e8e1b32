"""The per-GPU tuning cache: for a product ``auto`` planned on this GPU, the variant measured
fastest there (``polygemm tune``, or ``POLYGEMM_AUTOTUNE=1`` on first sight) and what it was
measured against.

An entry is keyed on everything ``auto``'s choice reads (:class:`TuneKey`): the GPU (name,
compute capability, SMs: a cache of one GPU model never applies to another), the dtype and the
result's, M, N, K, the batch count, each operand's layout and its alignment class (16-byte base,
its rows' byte pitch up to 32). One JSON file a GPU under the kernel cache's folder
(``$POLYGEMM_CACHE_DIR`` or ``~/.cache/polygemm``, ``tune/`` below), read once per process and
kept in memory; written whole (a temporary file, then ``os.replace``), never more than
``$POLYGEMM_TUNE_CACHE_SIZE`` entries (the oldest measurements dropped first). A file that is
not valid JSON, or another program's, is passed over with a warning naming it, never raised.

Beneath it, the measurements polygemm ships for some GPU models (``tuning/measured/``, one file of
the same format a model, as ``polygemm tune`` wrote it on one): an entry of this GPU's own file
overrules them, and ``polygemm tune`` measures a product again whatever they hold.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import re
import threading
import warnings
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from .compiler import write_entry

__all__ = ["GpuId", "TuneKey", "Measurement", "TuneCache", "cache_for", "tune_dir", "align_class", "FORMAT", "DEFAULT_SIZE",
           "package_version", "forget_caches", "now_text", "shipped_dir"]

#: the ``format`` field of a tuning file; a file with another is another program's (or version's)
FORMAT = "polygemm-tune/1"
#: entries a GPU's file keeps when $POLYGEMM_TUNE_CACHE_SIZE does not say
DEFAULT_SIZE = 4096


@dataclass(frozen=True)
class GpuId:
    """What makes two GPUs the same for tuning: the model, its compute capability, its SMs (an
    MPS share of them counts as another GPU: grids are sized to it)."""

    name: str
    cc: tuple[int, int]
    sms: int

    @property
    def slug(self) -> str:
        """The file name's stem: the name in letters, digits and dashes, ``sm90``, the SMs."""
        name = re.sub(r"[^A-Za-z0-9]+", "-", self.name).strip("-").lower() or "gpu"
        return f"{name}-sm{self.cc[0]}{self.cc[1]}-{self.sms}sms"

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "cc": list(self.cc), "sms": self.sms}


def align_class(ptr: int, ld: int, itemsize: int, lines: int) -> str:
    """An operand's alignment as the plan reads it: ``p<bytes>`` the largest power of two up to 32
    dividing its rows' (columns') byte pitch (TMA reads 16-byte multiples, at full speed 32), ``b``
    and the base's up to 16 where the base is not 16-byte aligned; a single row or column has no
    pitch (``p32``)."""
    pitch = 32 if lines <= 1 else math.gcd(ld * itemsize, 32) or 32
    base = math.gcd(ptr, 16) or 16
    return f"p{pitch}" + ("" if base == 16 else f"b{base}")


@dataclass(frozen=True)
class TuneKey:
    """A product as ``auto`` weighs it on one GPU."""

    gpu: GpuId
    dtype: str
    out_dtype: str
    m: int
    n: int
    k: int
    count: int
    layouts: str  # a's, b's and the result's: "row,col,row"
    align: str  # a's, b's and the result's alignment classes: "p32,p16,p32"

    def text(self) -> str:
        """The key within its GPU's file."""
        return f"{self.dtype}->{self.out_dtype} {self.count}x{self.m}x{self.n}x{self.k} {self.layouts} {self.align}"

    def shape_text(self) -> str:
        return (f"{self.count} x " if self.count > 1 else "") + f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True)
class Measurement:
    """What tuning measured for one key: the winner (a variant name, ``rung:split_k=N`` for a
    split), its µs a launch, every candidate's µs (the winner's among them), the cost model's
    pick and its estimate, when and by which polygemm."""

    winner: str
    us: float
    timings: dict[str, float] = field(default_factory=dict)
    estimate_pick: str = ""
    estimate_us: float = 0.0
    measured_at: str = ""
    version: str = ""
    #: one of the measurements polygemm ships for this GPU model (:func:`shipped_dir`), not one made on this GPU
    shipped: bool = False

    @property
    def pick_us(self) -> float | None:
        """The estimate's pick as measured (None: it was not timed)."""
        return self.timings.get(self.estimate_pick)

    @property
    def gain(self) -> float | None:
        """How much faster the winner ran than the estimate's pick (1.0: the same variant)."""
        p = self.pick_us
        return p / self.us if p and self.us > 0 else None

    @property
    def date(self) -> str:
        return self.measured_at[:10]

    def record(self) -> dict[str, Any]:
        rec = asdict(self)
        del rec["shipped"]  # where it came from is the file it is in
        return rec

    @staticmethod
    def from_record(r: Any) -> "Measurement | None":
        """An entry as read from a file; None when it is not one."""
        try:
            timings = {str(k): float(v) for k, v in dict(r.get("timings") or {}).items()}
            m = Measurement(str(r["winner"]), float(r["us"]), timings, str(r.get("estimate_pick") or ""),
                            float(r.get("estimate_us") or 0.0), str(r.get("measured_at") or ""), str(r.get("version") or ""))
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError):  # (a JSON integer past any float: 10**400)
            return None
        return m if m.winner and m.us > 0 and math.isfinite(m.us) else None


def package_version() -> str:
    """polygemm's version as installed (what a measurement records)."""
    try:
        from importlib.metadata import version

        return version("polygemm")
    except Exception:  # noqa: BLE001 - a source tree without metadata
        return "unknown"


def now_text() -> str:
    """Now, as a measurement records its time (UTC, to the second)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _size_from_env() -> int:
    raw = os.environ.get("POLYGEMM_TUNE_CACHE_SIZE", "").strip()
    if not raw:
        return DEFAULT_SIZE
    try:
        size = int(raw)
        if size < 1:
            raise ValueError
    except ValueError:
        warnings.warn(f"POLYGEMM_TUNE_CACHE_SIZE={raw!r} is not a whole number >= 1; keeping {DEFAULT_SIZE} entries a GPU",
                      RuntimeWarning, stacklevel=3)
        return DEFAULT_SIZE
    return size


def shipped_dir() -> Path:
    """The measurements polygemm ships, one file a GPU model in the cache's own format (``polygemm tune``'s
    file of that GPU, as measured on one): read beneath this GPU's own cache, which overrules them."""
    return Path(__file__).resolve().parent / "tuning" / "measured"


def tune_dir() -> Path | None:
    """``tune/`` beside the kernel cache's ``cubin/`` (the same folder, created and checked the
    same way: :func:`.compiler.cache_dir`), created owner-only; None, with a warning, when that
    folder cannot be used (measurements are then kept for this process only)."""
    from ...errors import BackendUnavailableError
    from .compiler import cache_dir

    try:
        path = cache_dir().parent / "tune"
        path.mkdir(exist_ok=True, mode=0o700)
    except (BackendUnavailableError, OSError) as exc:
        warnings.warn(f"polygemm's tuning cache is kept in memory only: {exc}", RuntimeWarning, stacklevel=3)
        return None
    return path


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` itself where the platform has fcntl (a lock on the cache file would not hold:
    each write replaces it), leaving no file behind; none where the folder cannot be opened (the write then says why)
    or on Windows."""
    try:
        import fcntl
        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class TuneCache:
    """One GPU's measurements: in memory, loaded from ``path`` once and written back whole on
    each change (``path`` None: this process only). Thread-safe; ``measure_once`` runs one
    measurement per key however many threads ask at once."""

    def __init__(self, gpu: GpuId, path: Path | None, max_entries: int = DEFAULT_SIZE) -> None:
        self.gpu, self.path, self.max_entries = gpu, path, max(1, int(max_entries))
        self._entries: OrderedDict[str, Measurement] = OrderedDict()  # oldest measurement first
        self._lock = threading.Lock()
        self._pending: dict[str, threading.Event] = {}
        self._writable = True  # False: the file is another program's, left as it is
        self._load()
        self._shipped = self._read_shipped()

    # -- the file --------------------------------------------------------------------------
    def _read_file(self) -> dict[str, Measurement] | None:
        """The file's entries; None (with a warning) when it is corrupt or foreign; {} when absent."""
        if self.path is None:
            return {}
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:  # (bytes of no UTF-8 text: another file there)
            warnings.warn(f"tuning cache {self.path} cannot be read ({exc}); it is ignored", RuntimeWarning, stacklevel=4)
            return None
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):  # (RecursionError: arrays nested past Python's recursion limit)
            warnings.warn(f"tuning cache {self.path} is not valid JSON; it is ignored and rewritten by the next measurement",
                          RuntimeWarning, stacklevel=4)
            return None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), dict):
            self._writable = False
            warnings.warn(f"tuning cache {self.path} is not a {FORMAT} file (another program's or another polygemm's); "
                          f"it is ignored and left as it is", RuntimeWarning, stacklevel=4)
            return None
        if doc.get("gpu") != self.gpu.record():
            self._writable = False
            warnings.warn(f"tuning cache {self.path} holds measurements of another GPU ({doc.get('gpu')}); it is ignored "
                          f"and left as it is", RuntimeWarning, stacklevel=4)
            return None
        out: dict[str, Measurement] = {}
        for key, rec in doc["entries"].items():
            m = Measurement.from_record(rec)
            if m is not None:
                out[str(key)] = m
        return out

    def _read_shipped(self) -> dict[str, Measurement]:
        """The measurements polygemm ships for this GPU model (none for most: an empty dict)."""
        path = shipped_dir() / f"{self.gpu.slug}.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("gpu") != self.gpu.record() or \
                not isinstance(doc.get("entries"), dict):
            return {}
        out = {}
        for key, rec in doc["entries"].items():
            m = Measurement.from_record(rec)
            if m is not None:
                out[str(key)] = replace(m, shipped=True)
        return out

    def _load(self) -> None:
        got = self._read_file() or {}
        for key, m in sorted(got.items(), key=lambda kv: kv[1].measured_at):
            self._entries[key] = m
        self._trim()

    def _trim(self) -> None:
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def _write(self) -> None:
        """The file, whole: another process's entries written since this one loaded are merged
        in (a key measured here wins), then bounded; written to a temporary file and moved over."""
        if self.path is None or not self._writable:
            return
        with _folder_lock(self.path.parent):  # other processes' writers wait: each merges what the one before it wrote
            self._write_locked()

    def _write_locked(self) -> None:
        on_disk = self._read_file() or {}
        if not self._writable:
            return
        merged = OrderedDict(sorted(((k, m) for k, m in on_disk.items() if k not in self._entries), key=lambda kv: kv[1].measured_at))
        merged.update(self._entries)
        merged = OrderedDict(sorted(merged.items(), key=lambda kv: kv[1].measured_at))
        self._entries = merged
        self._trim()
        doc = {"format": FORMAT, "gpu": self.gpu.record(), "entries": {k: m.record() for k, m in self._entries.items()}}
        try:
            write_entry(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())
        except OSError as exc:
            warnings.warn(f"tuning cache {self.path} cannot be written ({exc}); the measurements stay in memory",
                          RuntimeWarning, stacklevel=4)

    # -- entries ---------------------------------------------------------------------------
    def get(self, key: TuneKey) -> Measurement | None:
        if key.gpu != self.gpu:
            return None
        text = key.text()
        with self._lock:
            mine = self._entries.get(text)
        return mine if mine is not None else self._shipped.get(text)

    def put(self, key: TuneKey, m: Measurement) -> None:
        if key.gpu != self.gpu:
            raise ValueError(f"a measurement of {key.gpu.name} cannot go into the cache of {self.gpu.name}")
        with self._lock:
            self._entries.pop(key.text(), None)
            self._entries[key.text()] = m
            self._trim()
            self._write()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def entries(self) -> dict[str, Measurement]:
        with self._lock:
            return dict(self._entries)

    def measure_once(self, key: TuneKey, measure: Callable[[], Measurement | None], force: bool = False) -> Measurement | None:
        """The entry for ``key``, measured by ``measure()`` when there is none (or ``force``):
        threads asking for the same key at once wait for the one measuring (one measurement a
        key); a measurement that fails or returns None leaves the cache as it was."""
        text = key.text()
        while True:
            with self._lock:
                if not force and text in self._entries:
                    return self._entries[text]
                busy = self._pending.get(text)
                if busy is None:
                    mine = self._pending[text] = threading.Event()
                    break
            busy.wait()
            force = False  # another thread just measured it
        try:
            m = measure()
            if m is not None:
                self.put(key, m)
            return m
        finally:
            with self._lock:
                self._pending.pop(text, None)
            mine.set()


_caches: dict[GpuId, TuneCache] = {}
_caches_lock = threading.Lock()


def cache_for(gpu: GpuId) -> TuneCache:
    """The GPU's cache, loaded on first use and kept for the process."""
    c = _caches.get(gpu)
    if c is not None:
        return c
    with _caches_lock:
        c = _caches.get(gpu)
        if c is None:
            folder = tune_dir()
            c = _caches[gpu] = TuneCache(gpu, folder / f"{gpu.slug}.json" if folder is not None else None, _size_from_env())
        return c


def forget_caches() -> None:
    """Drop the loaded caches (the next use reads the files again): tests, and a changed $POLYGEMM_CACHE_DIR."""
    with _caches_lock:
        _caches.clear()
