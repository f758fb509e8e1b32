"""float32 products on the bfloat16 tensor cores: the split of the operands and the one bfloat16 product of a call.

Each float32 operand is split (``kernels/util/split_bf16.cu``) into bfloat16 parts, ``hi + mid + lo``, written
as the segments of one operand of inner size ``S·Ks`` (``Ks``: K rounded up to 8, the segments' padding zeros):
A's parts side by side along K, B's stacked along K, paired so that their product sums the S largest products
of parts, smallest first. One bfloat16 rung (auto's choice for that product, accumulating in float32) then
computes ``alpha·A'·B' + beta·C`` straight into the destination: C is read and written once, as by any rung.

Six segments keep every product of parts down to ``2^-18`` of ``|a||b|`` (the three dropped, ``mid·lo``,
``lo·mid``, ``lo·lo``, and the split's own remainder stay under ``2^-25`` of it): the float32 bound holds.
Three keep one pass's class (``2^-16``), for ``precision="medium"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .device import SPLIT_SOURCE, CudaRuntime
from .driver import Kernel
from .launch import ComposedLaunch, PaddedLaunch, PanelLaunch, PreparedLaunch
from .planning import LaunchPlan, Mat, round_up
from .scratch import CallScratch, block_bytes
from .variants import KernelSpec

__all__ = ["SEGMENT_PARTS", "SplitOperand", "split_operand", "EmulatedLaunch", "padded_k", "HI", "MID", "LO"]

HI, MID, LO = 0, 1, 2
#: each segment's (part of A, part of B), smallest products first, for 6 and 3 segments
SEGMENT_PARTS: dict[int, tuple[tuple[int, int], ...]] = {
    6: ((LO, HI), (HI, LO), (MID, MID), (HI, MID), (MID, HI), (HI, HI)),
    3: ((MID, HI), (HI, MID), (HI, HI)),
}
_ALIGN = 8  # bfloat16 elements in 16 bytes: every segment and line of the split operands starts on such a boundary


def padded_k(k: int) -> int:
    """One segment's inner size: ``k`` rounded up to 8 (its last elements zeros)."""
    return round_up(max(k, 1), _ALIGN)


@dataclass(frozen=True)
class SplitOperand:
    """How one float32 operand (``user``, as planned: rows, columns, layout, ld) is split into ``segments``
    bfloat16 segments, and the bfloat16 matrix (``mat``, no pointer) the rung reads. ``is_a``: A (segments
    side by side along K) or B (stacked along K)."""

    user: Mat
    is_a: bool
    segments: int
    #: (lines, width, real_lines, real_width, src_pitch, dst_pitch, seg): the split kernel's geometry
    geometry: tuple[int, int, int, int, int, int, int]
    mat: Mat
    nbytes: int

    @property
    def codes(self) -> int:
        """The part (2 bits) each segment holds, segment 0 in the low bits."""
        side = 0 if self.is_a else 1
        return sum(pair[side] << (2 * s) for s, pair in enumerate(SEGMENT_PARTS[self.segments]))

    @property
    def read_bytes(self) -> int:
        """What the split reads (the user's values) plus what it writes (the segments)."""
        lines, width, real_lines, real_width, *_ = self.geometry
        return real_lines * real_width * 4 + self.segments * lines * width * 2


def split_operand(user: Mat, is_a: bool, segments: int) -> SplitOperand:
    """The split of float32 matrix ``user`` (A: M x K, or B: K x N) into ``segments`` segments of ``padded_k(K)``.
    Lines keep the user's orientation, so the split reads and writes along the same contiguous lines."""
    k = user.cols if is_a else user.rows
    other = user.rows if is_a else user.cols
    ks = padded_k(k)
    kk = segments * ks
    along_k = (user.layout == "row") == is_a  # A row-major or B column-major: each line runs along K
    if along_k:
        geometry = (other, ks, other, k, user.ld, kk, ks)
        nbytes = other * kk * 2
        ld = kk
    else:
        pitch = round_up(other, _ALIGN)
        geometry = (ks, pitch, k, other, user.ld, pitch, ks * pitch)
        nbytes = kk * pitch * 2
        ld = pitch
    rows, cols = (user.rows, kk) if is_a else (kk, user.cols)
    mat = Mat("a" if is_a else "b", rows, cols, user.layout, ld, 0, 2)
    return SplitOperand(user, is_a, segments, geometry, mat, nbytes)


@dataclass
class EmulatedLaunch(ComposedLaunch):
    """A float32 product as one bfloat16 product on split operands (see the module): the splits of A and B into
    one scratch block, then ``inner`` (the bfloat16 rung's launch, writing the destination). The block is kept
    per default stream up to :data:`~.scratch.KEPT_SCRATCH_BYTES` (:class:`~.scratch.CallScratch`), so the
    rung's tensor maps stay the same call after call; a larger one is taken and freed by each call."""

    inner: PreparedLaunch | PaddedLaunch | PanelLaunch
    rt: CudaRuntime
    a: SplitOperand
    b: SplitOperand
    _scratch: CallScratch = field(default_factory=CallScratch, repr=False)
    b_offset: int = field(init=False)
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.b_offset = block_bytes(self.a.nbytes)
        self.nbytes = self.b_offset + block_bytes(self.b.nbytes)

    def pieces(self) -> list[PreparedLaunch]:
        inner = self.inner
        return [inner] if isinstance(inner, PreparedLaunch) else inner.pieces()

    @property
    def lp(self) -> LaunchPlan:
        return self.inner.lp

    @property
    def spec(self) -> KernelSpec | None:
        return self.inner.spec

    def kernel(self) -> Kernel:
        """The split kernel and the rung built and loaded (before any scratch is taken)."""
        self.rt.function(SPLIT_SOURCE, "pg_split_bf16")
        return self.inner.kernel()

    def prepare(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> Any:
        rt = self.rt
        held = self._scratch.take(rt, self.nbytes, stream)  # the splits and the rung of one call share one block
        try:
            inner = self.inner.prepare(held.base, held.base + self.b_offset, c, alpha, beta, stream)
        except BaseException:
            self._scratch.give_back(rt, held)
            raise
        return (inner, a, b, held)

    def launch(self, prepared: Any, stream: int = 0) -> None:
        inner, a, b, held = prepared
        rt = self.rt
        try:
            for op, src, dst in ((self.a, a, held.base), (self.b, b, held.base + self.b_offset)):
                rt.split_bf16(op.geometry, src, dst, op.segments, op.codes, stream)
            self.inner.launch(inner, stream)
        except BaseException:
            self._scratch.give_back(rt, held, quiet=True)
            raise
        self._scratch.give_back(rt, held)

    def discard(self, prepared: Any) -> None:
        inner, _, _, held = prepared
        try:
            self.inner.discard(inner)
        finally:
            self._scratch.give_back(self.rt, held)
