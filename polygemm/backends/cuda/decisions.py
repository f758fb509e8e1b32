"""The cuda backend's plan-time pieces: what it decided for one plan (:class:`CudaPlan`), the
operands as device matrices (:class:`~.planning.Mat`), the batch's byte strides, and the TMA
candidates re-ranked for rows off sector boundaries; and a planned launch bound to fixed device
operands (:class:`KernelLauncher`, for benchmarks)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ...core.operand import Operand
from ...core.problem import GemmProblem
from ...errors import UnsupportedProblemError
from .cost import Candidate, copy_bytes, copy_us, pitch_penalty_us
from .complex_launch import ComplexLaunch
from .emulated_launch import EmulatedLaunch
from .launch import PaddedLaunch, PanelLaunch, PreparedLaunch
from .planning import Mat, pitch_off, transposed_copy
from .variants import kernel_specs

__all__ = ["device_sm", "CudaPlan", "KernelLauncher", "mat_of", "at_offset", "split_suffix", "compact_ld", "pitch_ranked", "layout_ranked", "device_memory", "transposed_operand", "TRANSPOSE_SHARE", "TRANSPOSE_PACE", "batch_bytes", "witness", "plan_mats"]


@dataclass(frozen=True)
class CudaPlan:
    """The cuda backend's decisions for one plan (``Plan.private``)."""

    #: None: an empty product, no kernel; a complex product's: its four real products (and the empty case's fill)
    launch: PreparedLaunch | PanelLaunch | PaddedLaunch | ComplexLaunch | EmulatedLaunch | None
    result_layout: str  # "row" or "col": the layout of a result the backend allocates
    #: bytes from one matrix of the batch to the next, for a, b, c and the destination (device
    #: operands: theirs; host operands: the compact uploads'; 0: one matrix for the whole batch)
    batch_bytes: tuple[int, int, int, int] = (0, 0, 0, 0)
    rt: Any = None  # the device's runtime the plan was made for (None: the backend's default)
    #: the whole call is one launch of ``launch`` when no c values move first (a non-empty
    #: product, K > 0, one matrix or a batched build): the per-call path checks only that
    one_launch: bool = False
    #: the estimated µs of the launch that runs (0.0: not estimated, e.g. a variant named by the caller)
    estimate_us: float = 0.0
    #: the launch reads and writes through its aligned build (False: its unaligned one, PG_VEC=0)
    vec: bool = True


def device_sm(rt: Any) -> int:
    """The compute capability of ``rt``'s device as one number (90 for sm_90); 0 for a plan made without a device."""
    return rt.cc[0] * 10 + rt.cc[1] if rt is not None else 0


def mat_of(op: Operand, ptr: int | None = None, ld: int | None = None) -> Mat:
    return Mat(op.name, op.rows, op.cols, op.layout, op.ld if ld is None else ld, op.ptr if ptr is None else ptr, op.itemsize)


def at_offset(mat: Mat | None, offset: int) -> Mat | None:
    """``mat`` moved ``offset`` bytes (the next matrix of a batch)."""
    return mat if mat is None or offset == 0 else mat.at(mat.ptr + offset)


def split_suffix(name: str) -> tuple[str, int]:
    """``"rung:split_k=4"`` -> ("rung", 4); a plain name -> (name, 0)."""
    base, sep, rest = name.partition(":split_k=")
    if not sep:
        return name, 0
    try:
        splits = int(rest)
    except ValueError:
        splits = 0
    if splits < 2:
        raise UnsupportedProblemError(f"variant={name!r}: split_k must be an integer of at least 2, e.g. {base}:split_k=4")
    return base, splits


def compact_ld(layout: str, rows: int, cols: int) -> int:
    return max(cols if layout == "row" else rows, 1)


def pitch_ranked(ranked: list[Candidate], a: Mat, b: Mat, copies: tuple[Mat | None, ...], layout: str,
                  count: int) -> list[Candidate]:
    """``ranked`` with what A's or B's rows starting off 32-byte sector boundaries cost each TMA
    candidate, and beside it (one product) the same rung on pitch-aligned copies of those
    operands at the copies' cost; fastest estimate first."""
    a_off, b_off = pitch_off(a), pitch_off(b)
    moved = [sum(copy_bytes(x, pad) for x, pad in zip((a, b), copies[:2]) if pad is not None)]  # one launch (repitch_pair)
    out = []
    for cand in ranked:
        extra = pitch_penalty_us(kernel_specs()[cand.variant], *cand.shape, a_off, b_off, count=cand.count, result_layout=layout)
        if not extra:
            out.append(cand)
            continue
        out.append(replace(cand, estimate_us=cand.estimate_us + extra))
        if count <= 1:
            out.append(replace(cand, estimate_us=cand.estimate_us + copy_us(moved), padded=True))
    out.sort(key=lambda c: c.estimate_us)
    return out


def device_memory(rt: Any) -> int:
    """The device's memory in bytes (0: unknown, a plan made without a device)."""
    device = getattr(rt, "device", None)
    try:
        return int(device.total_memory()) if device is not None else 0
    except Exception:  # noqa: BLE001 - a device that cannot say: no cap
        return 0


#: the share of copy_us's pace the transpose keeps (kernels/util/transpose.cu: 2.3-2.6 TB/s read and written on an
#: H100, 109 µs for a 4096 x 4096 float64 matrix, where copy_us assumes 4 TB/s)
TRANSPOSE_PACE = 0.62
#: the most of the device's memory a transposed copy of an operand may take (past it the rung reads the operands as
#: they are)
TRANSPOSE_SHARE = 0.125


def transposed_operand(a: Mat, b: Mat) -> tuple[str, Mat] | None:
    """Which of A and B (stored one row-major, the other column-major) a rung of matched layouts reads from a copy in
    the other layout, and that copy: the smaller of the two (None: matched layouts, or a vector, which has none)."""
    if a.layout == b.layout or min(a.rows, a.cols, b.rows, b.cols) <= 1:
        return None
    which, x = ("a", a) if a.rows * a.cols <= b.rows * b.cols else ("b", b)
    return which, transposed_copy(x)


def layout_ranked(ranked: list[Candidate], a: Mat, b: Mat, count: int, memory: int = 0) -> list[Candidate]:
    """``ranked`` with, beside each candidate whose rung loses pace on operands of mixed layouts (its
    ``mixed_pace``), the same rung on a copy of the smaller operand in the other layout, at the matched layouts'
    pace plus the copy's cost; fastest estimate first. One product only (the copy is one matrix), a copy within
    :data:`TRANSPOSE_SHARE` of the device's ``memory`` (0: unknown, no cap)."""
    moved = transposed_operand(a, b)
    if moved is None or count > 1:
        return ranked
    which, pad = moved
    src = a if which == "a" else b
    if memory and (pad.max_offset + 1) * pad.itemsize > TRANSPOSE_SHARE * memory:
        return ranked
    cost = copy_us([int(copy_bytes(src, pad) / TRANSPOSE_PACE)])
    specs = kernel_specs()
    side = 0 if a.layout == "row" else 1  # A row-major and B column-major (nt), or the other way round (tn)
    extra = [replace(c, estimate_us=c.estimate_us * specs[c.variant].mixed_pace[side] + cost, padded=True, transposed=which)
             for c in ranked if specs[c.variant].mixed_pace[side] < 1.0 and not c.padded]
    return sorted(ranked + extra, key=lambda c: c.estimate_us) if extra else ranked


def batch_bytes(p: GemmProblem) -> tuple[int, int, int, int]:
    """Per-matrix byte strides of a, b, c and the destination over the flattened batch."""
    if not p.batch:
        return (0, 0, 0, 0)
    dest = p.m * p.n * p.out_dtype.itemsize
    if p.residency == "host":  # compact uploads; a broadcast operand is uploaded once
        one = lambda op: 0 if op is None or op.batch_stride == 0 else op.rows * op.cols * op.itemsize  # noqa: E731
        return (one(p.a), one(p.b), one(p.c), dest)
    by = lambda op: 0 if op is None else op.batch_stride * op.itemsize  # noqa: E731
    return (by(p.a), by(p.b), by(p.c), by(p.out) if p.out is not None else dest)


def witness(ptr: int, stride: int) -> int:
    """A pointer whose alignment is that of every matrix of the batch (plans read alignment
    off pointers: the base's and the stride's common divisor is what every matrix has)."""
    return math.gcd(ptr, stride) if stride else ptr


def plan_mats(p: GemmProblem) -> tuple[Mat, Mat, Mat]:
    """The operands as the device will hold them (host ones as fresh compact buffers);
    pointers stand for the alignment every matrix of a batch has."""
    layout = p.result_layout
    osize = p.out_dtype.itemsize
    sa, sb, _, sd = batch_bytes(p)
    if p.residency == "host":
        a = mat_of(p.a, witness(0, sa), compact_ld(p.a.layout, p.a.rows, p.a.cols))
        b = mat_of(p.b, witness(0, sb), compact_ld(p.b.layout, p.b.rows, p.b.cols))
        c = Mat("c", p.m, p.n, layout, compact_ld(layout, p.m, p.n), witness(0, sd), osize)
    else:
        a, b = mat_of(p.a, witness(p.a.ptr, sa)), mat_of(p.b, witness(p.b.ptr, sb))
        c = mat_of(p.out, witness(p.out.ptr, sd)) if p.out is not None else \
            Mat("c", p.m, p.n, layout, compact_ld(layout, p.m, p.n), witness(0, sd), osize)
    return a, b, c


class KernelLauncher:
    """One prepared launch bound to fixed device operands (see :meth:`CudaBackend.launcher`)."""

    def __init__(self, launch: PreparedLaunch | PanelLaunch | PaddedLaunch | ComplexLaunch | EmulatedLaunch, a: int, b: int, c: int, alpha: float, beta: float, variant: str = "") -> None:
        self.launch, self.args = launch, (a, b, c, alpha, beta, 0)
        self.variant = variant or launch.variant  # what runs, as the plan names it (a TMA rung may hand a problem on; split-K)
        if launch.spec is not None:
            launch.kernel()

    def __call__(self) -> None:
        self.launch.queue(*self.args)

    def close(self) -> None:
        """Nothing to free (kept for callers that release launchers)."""
