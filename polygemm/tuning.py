"""The products a run plans, written down for ``polygemm tune --from FILE``.

Each product ``variant="auto"`` plans for the first time in this process (a plan cache miss) is
appended to a file as one JSON line: ``m``, ``n``, ``k``, ``layout`` (two letters, A's and B's:
``n`` row-major, ``t`` a transposed view, as ``polygemm bench --shape MxNxK:LAYOUT`` takes
them), ``dtype``, ``out_dtype``, ``batch`` and, for a column-major ``out``, ``out_layout``.
Recording is on inside ``with polygemm.tuning.record(path):`` or for the whole process with
``$POLYGEMM_RECORD_SHAPES=path``::

    with polygemm.tuning.record("shapes.jsonl"):
        model(x)           # every new product's problem lands in shapes.jsonl
    # then, on the same GPU: polygemm tune --from shapes.jsonl
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Iterator

from .core.problem import GemmProblem

__all__ = ["record", "record_problem", "recording_path", "problem_record", "read_records", "ENV_RECORD"]

#: the environment variable naming a file every process appends its new products to
ENV_RECORD = "POLYGEMM_RECORD_SHAPES"

_lock = threading.Lock()
_paths: list[Path] = []  # the record() blocks open, innermost last
_seen: set[tuple[str, str]] = set()  # (file, line) written by this process: each product once a file


def recording_path() -> Path | None:
    """Where a new product is recorded now: the innermost ``record()`` block's file, else
    ``$POLYGEMM_RECORD_SHAPES``; None when recording is off."""
    if _paths:
        return _paths[-1]
    env = os.environ.get(ENV_RECORD, "").strip()
    return Path(os.path.expanduser(env)) if env else None


@contextlib.contextmanager
def record(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Record each product planned inside the block (in any thread) to ``path``, appended."""
    p = Path(os.fspath(path))
    with _lock:
        _paths.append(p)
    try:
        yield p
    finally:
        with _lock:
            _paths.remove(p)


def problem_record(p: GemmProblem) -> dict[str, Any]:
    """One line of a recording: the product as ``polygemm tune`` reads it back."""
    letter = {"row": "n", "col": "t"}
    rec: dict[str, Any] = {"m": p.m, "n": p.n, "k": p.k, "layout": letter[p.a.layout] + letter[p.b.layout],
                           "dtype": p.dtype.name, "out_dtype": p.out_dtype.name, "batch": p.count if p.batch else 0}
    if p.result_layout == "col" and p.out is not None:
        rec["out_layout"] = "col"
    return rec


def record_problem(p: GemmProblem) -> None:
    """Append ``p`` to the recording file when recording is on (each product once a file and
    process). A file that cannot be written is said once as a warning, never raised: recording
    must not break the run it watches."""
    path = recording_path()
    if path is None or p.empty:
        return
    line = json.dumps(problem_record(p), sort_keys=True)
    mark = (str(path), line)
    with _lock:
        if mark in _seen:
            return
        try:
            with open(path, "a+b") as f:
                f.seek(0, os.SEEK_END)
                lead = b""
                if f.tell():  # a file cut off mid-line (a killed run): this record starts a line of its own
                    f.seek(-1, os.SEEK_END)
                    lead = b"" if f.read(1) == b"\n" else b"\n"
                f.write(lead + line.encode() + b"\n")
        except OSError as exc:
            if str(path) not in _unwritable:  # once a file: every product after would say it again
                _unwritable.add(str(path))
                warnings.warn(f"cannot record shapes to {path} ({exc}); recording goes on without this file", RuntimeWarning,
                              stacklevel=2)
            return  # not marked as recorded: recorded once the file can be written
        _unwritable.discard(str(path))
        _seen.add(mark)


#: recording files a write to failed (warned of once, until one succeeds)
_unwritable: set[str] = set()


def _whole(x: Any) -> int:
    """A recorded size: a JSON integer (1e400, Infinity, 1.5 and true are not; a record writes its sizes as integers)."""
    if isinstance(x, bool) or not isinstance(x, int):
        raise ValueError(x)
    return x


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The products recorded in ``path``, each once, in order (a last line cut off mid-write passed over with a
    warning). Raises ValueError naming the line
    that is not a recorded product."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        try:
            lines = list(f)
        except UnicodeDecodeError as exc:  # a binary file, or another encoding: said with the file's name
            raise ValueError(f"{path}: not a recording (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    for i, raw in enumerate(lines, 1):
        # a last line without its end after whole ones: a run killed mid-write (a file of one such line is no recording)
        cut = i == len(lines) > 1 and not raw.endswith("\n")
        raw = raw.strip()
        if not raw or raw in seen:
            continue
        seen.add(raw)
        if cut:
            try:
                json.loads(raw)
            except (ValueError, RecursionError):
                warnings.warn(f"{path}, line {i}: a record cut off (the recording run ended mid-write); read without it",
                              RuntimeWarning, stacklevel=2)
                continue
        try:
            rec = json.loads(raw)
            m, n, k = (_whole(rec[key]) for key in ("m", "n", "k"))
            layout, dtype = str(rec.get("layout", "nn")), str(rec["dtype"])
            batch = _whole(rec.get("batch") or 0)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):  # (JSON nested past the recursion limit)
            raise ValueError(f"{path}, line {i}: not a recorded product (a JSON object with m, n, k, layout, dtype, and "
                             f"an integer batch if any): {raw[:80]!r}") from None
        if min(m, n, k, batch) < 0 or len(layout) != 2 or set(layout) - {"n", "t"}:
            raise ValueError(f"{path}, line {i}: m, n, k and batch must be >= 0 and layout two letters of n and t; got "
                             f"{raw[:80]!r}")
        out.append({**rec, "m": m, "n": n, "k": k, "layout": layout, "dtype": dtype,
                    "out_dtype": str(rec.get("out_dtype") or dtype), "batch": batch})
    return out
