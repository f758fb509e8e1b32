"""The cuda backend's device check (kernels/verify/freivalds.cu) as pure data: its kernels' entries, the record the
host reads back, the walk and grid of each matrix-vector pass (:func:`strided`, :func:`matvec_geometry`), and the
check's estimated cost (:func:`check_cost_us`, which ``explain`` prints). Nothing here needs a GPU; :mod:`.verify`
runs the check.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.dtypes import finfo
from .variants import KERNEL_DIR

__all__ = ["VERIFY_SOURCE", "VERIFY_ENTRIES", "VERIFY_KINDS", "WALKS", "SHOWN_DEVICE", "RECORD", "MATVEC_BLOCK", "Strided",
           "strided", "matvec_geometry", "PASS_BYTES_PER_US", "ROW_US", "COPY_BYTES_PER_US", "CHECK_FIXED_US",
           "check_cost_us", "checks_on_device", "dtype_name", "largest"]

VERIFY_SOURCE = KERNEL_DIR / "verify" / "freivalds.cu"
#: input dtypes the device check reads (others are checked on the host)
VERIFY_KINDS = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
#: the matrix-vector kernel's walks (matvec_geometry's modes): one entry each, with the registers of its own walk
WALKS = (0, 1, 2, 3)
VERIFY_ENTRIES = [(VERIFY_SOURCE, f"pg_verify_matvec{judged}_{k}_m{m}") for k in VERIFY_KINDS.values() for judged in ("", "_judge")
                  for m in WALKS] + \
    [(VERIFY_SOURCE, "pg_verify_compare"), (VERIFY_SOURCE, "pg_verify_prepare"), (VERIFY_SOURCE, "pg_verify_norms")]
SHOWN_DEVICE = 8  # kPgvShown
#: the kernel's PgvRecord, as NumPy reads it back
RECORD = np.dtype([("failed", "<u4"), ("unchecked", "<u4"), ("worst_bits", "<u4"), ("shown", "<u4"),
                   ("index", "<i8", (SHOWN_DEVICE,)), ("diff", "<f8", (SHOWN_DEVICE,)), ("thr", "<f8", (SHOWN_DEVICE,)),
                   ("arrived", "<u4"), ("pad", "<u4")])
MATVEC_BLOCK = (32, 8, 1)


@dataclass(frozen=True)
class Strided:
    """A (batch of) matrix X as the matrix-vector kernel walks it: X(b, i, j) at ``ptr`` + (b·bs + i·rs + j·cs)
    elements; ``batch``: how many matrices it holds (1 with ``bs`` 0: one matrix for the whole batch)."""

    ptr: int
    rows: int
    cols: int
    rs: int
    cs: int
    bs: int
    kind: str
    batch: int = 1

    @property
    def t(self) -> "Strided":
        """The transpose: the same memory, rows and columns swapped."""
        return Strided(self.ptr, self.cols, self.rows, self.cs, self.rs, self.bs, self.kind, self.batch)

    def at(self, ptr: int) -> "Strided":
        """The same walk from ``ptr`` (a call's operand of a layout read before; cheaper than ``replace``)."""
        return Strided(ptr, self.rows, self.cols, self.rs, self.cs, self.bs, self.kind, self.batch)

    def batched(self, count: int) -> "Strided":
        """The same walk over ``count`` matrices."""
        return Strided(self.ptr, self.rows, self.cols, self.rs, self.cs, self.bs, self.kind, count)


def strided(ptr: int, rows: int, cols: int, layout: str, ld: int, batch_stride: int, count: int, dtype: str) -> Strided:
    """A matrix of ``layout`` ("row" or "col") and leading dimension ``ld`` (elements), ``batch_stride``
    elements from one matrix of a batch of ``count`` to the next (0: broadcast, one matrix)."""
    rs, cs = (ld, 1) if layout == "row" else (1, ld)
    return Strided(ptr, rows, cols, rs, cs, batch_stride, VERIFY_KINDS[dtype], count if batch_stride else 1)


_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2}


def matvec_geometry(x: Strided, sms: int = 132) -> tuple[int, tuple[int, int, int]]:
    """:func:`_geometry` of ``x`` (kept per walk: a loop of checked calls asks the same every call)."""
    return _geometry(x.rows, x.cols, x.rs, x.cs, x.bs, x.kind, x.batch, x.ptr % 16 == 0, sms)


@functools.lru_cache(maxsize=1024)
def _geometry(rows: int, cols: int, rs: int, cs: int, bs: int, kind: str, batch: int, based: bool,
              sms: int) -> tuple[int, tuple[int, int, int]]:
    """(mode, grid) of one matrix-vector launch. Threads walk X along its rows (a warp a row, or several rows a warp
    where they are short: mode 2 with 16-byte loads where every row starts on a 16-byte boundary, else 1) when its
    columns are adjacent in memory
    (or nearer than its rows), else across its rows (mode 3: a thread 16 bytes of adjacent rows, where every
    column starts on a 16-byte boundary; else 0: a thread a row). The grid's y takes slices of the columns until
    about four blocks an SM are running (a matrix of few long rows fills the device too), each slice at least
    512 (along) or 256 (across) columns, and each at most 2^30 columns; its z the batch."""
    size = _ITEMSIZE[kind]
    along = cs == 1 or (rs != 1 and abs(cs) <= abs(rs))
    aligned = based and (bs * size) % 16 == 0
    if along:
        mode = 2 if cs == 1 and aligned and (rs * size) % 16 == 0 else 1
        per = 16 // size if mode == 2 else 1  # elements a lane takes at once
        lanes = 32  # a row's lanes, as the kernel's pgv_lanes chooses them (short rows: several rows a warp)
        while lanes > 1 and (lanes // 2) * per >= cols:
            lanes //= 2
        per_block = 8 * (32 // lanes)
    else:
        mode = 3 if rs == 1 and aligned and (cs * size) % 16 == 0 else 0
        per_block = 32 * (16 // size) if mode == 3 else 32
    gx = max(1, min(-(-rows // per_block), 2**31 - 1))
    gz = max(1, min(batch, 65535))
    least = 512 if along else 256
    splits = max(1, min(-(-4 * sms // (gx * gz)), -(-cols // least), 64))
    # the pass along rows indexes a slice in 32 bits: slices of at most 2^30 elements
    splits = max(splits, -(-cols // 2**30))
    return mode, (gx, splits, gz)



#: what the device check costs, as measured on an H100 80GB HBM3 through the call (docs/verify.md): its matrix-vector
#: passes' pace (bytes a µs, by the operands' kind: the float16 and bfloat16 passes reach 1.7 to 2.3 TB/s, the float32
#: ones 2.0 to 2.8, larger matrices faster) and, for matrices of many short rows, their pace in rows (a warp a row: a
#: threadblock a few hundred bytes, paced by its latency), the copy of a checked result into ``out`` (read and written,
#: 3.4 TB/s), and what a check costs whatever its size (its launches, its wait and its read-back). The row's cost was
#: fitted to the real preset's 99 products (the log of estimate over measured: 0.19 root mean square, from 0.30 with no
#: row term); the fixed cost to the same products checked by a call bound once, into scratch of out's strides (0.16)
PASS_BYTES_PER_US = {"f16": 2.0e6, "bf16": 2.0e6, "f32": 2.4e6}
ROW_US = 1.0e-3
COPY_BYTES_PER_US = 3.4e6
CHECK_FIXED_US = 90.0


def check_cost_us(p: Any, given_out: bool) -> float | None:
    """The device check's estimated µs for a product of problem ``p`` (None where the host checks it): a fixed cost a
    check, each pass over A, B and C (and c) at the passes' measured pace or at :data:`ROW_US` a row, whichever is
    longer (a matrix of many short rows is paced by its rows, not its bytes), and the copy into ``out`` when one is
    given."""
    if not checks_on_device(p):
        return None
    count, m, n, k = p.count, p.m, p.n, p.k
    pace = PASS_BYTES_PER_US[VERIFY_KINDS[dtype_name(p.dtype)]]
    size, out_size = p.dtype.itemsize, p.out_dtype.itemsize
    c_pass = max(count * m * n * out_size / pace, count * m * ROW_US)
    passes = [c_pass, max(count * k * n * size / pace, count * k * ROW_US), max(count * m * k * size / pace, count * m * ROW_US)]
    if p.c is not None and p.beta != 0.0:
        passes.append(c_pass)
    copy = 2 * count * m * n * out_size / COPY_BYTES_PER_US if given_out else 0.0
    return float(CHECK_FIXED_US + sum(passes) + copy)


_names: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """``dtype.name``, kept (NumPy computes it in Python each time it is asked)."""
    name = _names.get(dtype)
    if name is None:
        name = _names[dtype] = str(dtype.name)
    return name


@functools.lru_cache(maxsize=16)
def largest(dtype: Any) -> float:
    """The largest finite value of ``dtype``."""
    return float(finfo(dtype).max)


def checks_on_device(p: Any) -> bool:
    """Whether a product of problem ``p`` is checked on the device (device operands of the dtypes the kernels
    read, a non-empty product); else the host checks it."""
    return bool(p.residency == "cuda" and dtype_name(p.dtype) in VERIFY_KINDS and dtype_name(p.out_dtype) in VERIFY_KINDS and not p.empty)


