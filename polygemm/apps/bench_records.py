"""The records ``polygemm bench`` writes (one per timed shape and variant), and reading them
back from a ``--json`` file (``polygemm plot`` does)."""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from .bench_layout import LAYOUTS

__all__ = ["BenchRecord", "load_records", "record_json"]


@dataclass
class BenchRecord:
    backend: str
    variant: str
    dtype: str
    m: int
    n: int
    k: int
    tflops: float
    tflops_min: float
    tflops_max: float
    ms: float
    vendor_variant: str
    vendor_tflops: float
    ratio: float
    device: str
    date: str
    repeats: int
    calls_per_repeat: int
    method: str = "interleaved"  # or "settled <s> s": each kernel run alone that long first
    mode: str = "kernel"  # "kernel": raw launches, device events; "call": polygemm.gemm, wall clock
    us_per_call: float = 0.0
    vendor_us_per_call: float = 0.0
    inputs: str = "device"  # call mode: "device" arrays or "numpy" in and out
    vendor_call: str = ""  # call mode: how the vendor was called, e.g. "cupy.matmul(a, b, out=out)"
    copy_share: float | None = None  # call mode, numpy inputs: share of the call spent outside the device call
    requested: str = ""  # call mode: the variant asked for ("auto", or a name); ``variant`` is the one that ran
    batch: int = 0  # call mode: matrices of a strided batch (0: one product); flops count them all
    result: str = "out"  # call mode: "out" (both write into a given out=) or "new" (each call makes its result)
    # call mode on a GPU: each vendor library's matmul, timed where installed (None: not measured); the anchor
    # (vendor_us_per_call, vendor_tflops, ratio) is the faster of them, named in ``vendor``
    torch_us_per_call: float | None = None
    cupy_us_per_call: float | None = None
    vendor: str | None = None  # whose timing vendor_us_per_call is: "torch", "cupy", "numpy", or the vendor variant
    # the ratio's spread over the repeats: the lowest and highest of the per-repeat ratios (vendor's time over
    # polygemm's in the same repeat), and (highest - lowest) / ratio; nan (null) where the vendor was not timed
    ratio_min: float = float("nan")
    ratio_max: float = float("nan")
    ratio_spread: float = float("nan")
    # how A and B lay in memory, A's letter then B's: "n" as stored (row-major), "t" a transposed view of a
    # row-major array (an nn.Linear weight in x @ W.T is B of "nt"); files written before layouts were timed are "nn"
    layout: str = "nn"


def load_records(path: str) -> list[BenchRecord]:
    """The records of a ``--json`` file (``{"command": ..., "records": [...]}``) as BenchRecord
    objects; keys this version does not know are ignored, missing ones take their defaults."""
    with open(path) as fh:
        try:
            data = json.load(fh)
        except RecursionError:  # arrays nested past Python's recursion limit: no file bench writes
            raise ValueError("its JSON nests deeper than any benchmark file (polygemm bench --json writes "
                             "{\"command\": ..., \"records\": [...]})") from None
    if isinstance(data, dict) and "records" not in data:
        raise ValueError("no 'records' list in it (polygemm bench --json writes {\"command\": ..., \"records\": [...]})")
    rows = data["records"] if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ValueError("its records are not a list of objects (polygemm bench --json writes one object per timing)")
    known = {f.name for f in fields(BenchRecord)}
    required = [f.name for f in fields(BenchRecord) if f.default is MISSING and f.default_factory is MISSING]
    floats = {f.name for f in fields(BenchRecord) if f.type in ("float", float)}
    out = []
    for i, row in enumerate(rows, 1):
        lacks = [name for name in required if name not in row]
        if lacks:
            raise ValueError(f"record {i} lacks {', '.join(map(repr, lacks))} (polygemm bench --json writes these fields "
                             "in every record; this file comes from another tool?)")
        # a field of another type ("m": "8", "tflops": "fast", "variant": ["a"]) would fail later, inside plot's
        # sums and sorts: say which record and field here
        for f in fields(BenchRecord):
            if f.name in row and not _field_fits(f.type, row[f.name]):
                raise ValueError(f"record {i} has {f.name}={row[f.name]!r} ({type(row[f.name]).__name__}); polygemm bench "
                                 f"--json writes {_FIELD_KINDS.get(str(f.type), str(f.type))} there")
            # bench writes sizes and counts of 0 or more, below 2**63: anything else (m=-5, a dimension past any
            # float: 10**400) is no record of it
            if str(f.type) == "int" and f.name in row and not 0 <= row[f.name] < 2**63:
                said = repr(row[f.name]) if len(repr(row[f.name])) <= 24 else f"{str(row[f.name])[:12]}... ({len(str(row[f.name]))} digits)"
                raise ValueError(f"record {i} has {f.name}={said}; polygemm bench --json writes a whole number "
                                 "from 0 to 2**63 - 1 there")
        if "layout" in row and row["layout"] not in LAYOUTS:
            raise ValueError(f"record {i} has layout={row['layout']!r}; polygemm bench --json writes one of "
                             f"{', '.join(LAYOUTS)} there (A's letter, then B's: n as stored, t a transposed view)")
        # a figure nobody measured (no vendor timing) is written as null: it reads back as nan
        out.append(BenchRecord(**{k: (float("nan") if v is None and k in floats else v) for k, v in row.items() if k in known}))
    return out


#: how a record field's type is said in load_records' error
_FIELD_KINDS = {"int": "a whole number", "float": "a number (or null: not measured)", "str": "a string",
                "float | None": "a number or null", "str | None": "a string or null"}


def _field_fits(kind: Any, value: Any) -> bool:
    """Whether ``value`` read from JSON is what a BenchRecord field of type ``kind`` (its annotation,
    a string) holds: bools are no numbers, whole-number floats no counts; null only for figures."""
    kind = str(kind)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "float | None"):
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
    if kind == "str":
        return isinstance(value, str)
    if kind == "str | None":
        return value is None or isinstance(value, str)
    return True


def _json_safe(value: Any) -> Any:
    """A record's field for strict JSON: a figure that is not finite (nan: not measured) is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def record_json(record: BenchRecord) -> dict[str, Any]:
    """One record as ``--json`` writes it: every field, a figure not measured as null."""
    return {k: _json_safe(v) for k, v in asdict(record).items()}

