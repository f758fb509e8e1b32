"""Complex products on the real rungs (4M): the planar copies and the four real products of one call.

A complex64 (complex128) matrix is a float32 (float64) matrix of its real parts at the same address with
its element strides doubled, and one of its imaginary parts 4 (8) bytes on. A call copies A, B (and C0,
when beta reads it) into compact row-major real planes in stream-ordered scratch, runs

    Cr = alpha·Ar·Br + beta·C0r,  Cr -= alpha·Ai·Bi,  Ci = alpha·Ar·Bi + beta·C0i,  Ci += alpha·Ai·Br

as four products of one real launch plan (the second of each pair accumulates with beta = 1), then
writes the two result planes into the destination's real and imaginary parts. Everything is queued on
the call's stream; the destination is written last, so a failure before then leaves ``out`` and ``c``
as they were, and the scratch goes back on every path. A conjugated operand (its memory holds the
unconjugated values) is read with its imaginary plane scaled by -1.

No kernel of its own: the copies are the strided, scaled copy (``CudaRuntime.copy_scale``), the
products the real plan's launches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .device import CudaRuntime
from .emulated_launch import EmulatedLaunch
from .launch import PaddedLaunch, PanelLaunch, PreparedLaunch
from .planning import LaunchPlan, Mat
from .scratch import BLOCK_ALIGN, block_bytes, quiet_release
from .variants import KernelSpec

__all__ = ["ComplexLaunch", "REAL_OF", "plane_ld", "PLANE_ALIGN"]

#: the real dtype of each complex dtype's parts: the rung that computes its products
REAL_OF = {"complex64": "float32", "complex128": "float64"}

#: bytes each plane of the scratch starts on
PLANE_ALIGN = BLOCK_ALIGN


def plane_ld(cols: int, itemsize: int) -> int:
    """A plane's row pitch in elements: ``cols`` rounded up to 16 bytes, so every row starts where the
    rungs' 16-byte aligned builds (and TMA) can read it."""
    per = 16 // itemsize
    return max(-(-cols // per) * per, per)


def part(m: Mat, imag: bool, itemsize: int) -> Mat:
    """The real (or imaginary) parts of complex matrix ``m`` as a real matrix of ``itemsize``-byte elements:
    the same lines, every other element (``ptr`` 0 stays 0: a plan-time description)."""
    return Mat(m.name + (".imag" if imag else ".real"), m.rows, m.cols, m.layout, 2 * m.ld,
               m.ptr + (itemsize if imag and m.ptr else 0), itemsize, 2)


@dataclass
class ComplexLaunch:
    """One complex product planned as four real ones (see the module). ``a``, ``b``, ``c`` and ``dest`` describe
    the user's complex matrices (layout and leading dimension in complex elements; pointers come with each call),
    ``strides`` their bytes from one matrix of the batch to the next (0: one matrix for the whole batch).
    ``real`` is the real plan's launch (None: an empty product, or a plan made without a device)."""

    real: PreparedLaunch | PanelLaunch | PaddedLaunch | EmulatedLaunch | None
    rt: CudaRuntime | None
    m: int
    n: int
    k: int
    count: int
    itemsize: int  # of one real part: 4 (complex64) or 8 (complex128)
    a: Mat
    b: Mat
    c: Mat | None
    dest: Mat
    strides: tuple[int, int, int, int]
    #: the real plan runs the whole batch in one launch per product (else one launch per matrix)
    batched: bool = False
    #: A, B, C0 hold their values' conjugates (torch's lazy conjugates): each is read with its imaginary plane negated
    conj: tuple[bool, bool, bool] = (False, False, False)
    #: the planes' pitches (A's, B's, C's) in real elements, and where each plane starts in the scratch
    lds: tuple[int, int, int] = field(init=False)
    offsets: tuple[int, int, int, int, int, int] = field(init=False)  # Ar, Ai, Br, Bi, Cr, Ci
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        size = self.itemsize
        self.lds = (plane_ld(self.k, size), plane_ld(self.n, size), plane_ld(self.n, size))
        sa, sb, _, _ = self.strides
        lda, ldb, ldc = self.lds
        spans = [block_bytes(self.mats(sa) * self.m * lda * size)] * 2 + [block_bytes(self.mats(sb) * self.k * ldb * size)] * 2 \
            + [block_bytes(self.count * self.m * ldc * size)] * 2
        at, offsets = 0, []
        for span in spans:
            offsets.append(at)
            at += span
        self.offsets = tuple(offsets)  # type: ignore[assignment]
        self.nbytes = max(at, PLANE_ALIGN)

    def mats(self, stride: int) -> int:
        """How many matrices an operand with batch stride ``stride`` holds (1: one for the whole batch)."""
        return self.count if stride else 1

    @property
    def plane_strides(self) -> tuple[int, int, int]:
        """Bytes from one matrix of the batch to the next in the A, B and C planes (0: one matrix for all)."""
        sa, sb, _, _ = self.strides
        lda, ldb, ldc = self.lds
        size = self.itemsize
        return (self.m * lda * size if sa else 0, self.k * ldb * size if sb else 0, self.m * ldc * size if self.count > 1 else 0)

    # -- what a launcher and the plan report (the real plan's) ------------------------------
    @property
    def lp(self) -> LaunchPlan:
        assert self.real is not None
        return self.real.lp

    @property
    def spec(self) -> KernelSpec | None:
        assert self.real is not None
        return self.real.spec

    @property
    def variant(self) -> str:
        assert self.real is not None
        return self.real.variant

    def build(self) -> None:
        """The real rung built and loaded, before any scratch is taken (cuBLAS, the comparator, has nothing to build)."""
        if self.real is not None and self.real.spec is not None:
            self.real.kernel()

    def queue(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> None:
        """In place, as a launcher queues a real product: ``c`` holds C0 (read when beta != 0) and gets the result."""
        self.run(a, b, c if beta != 0.0 else 0, c, alpha, beta, stream)

    # -- one call ------------------------------------------------------------------------------
    def run(self, a: int, b: int, c: int, dest: int, alpha: float, beta: float, stream: int = 0,
            conj: tuple[bool, bool, bool] = (False, False, False)) -> None:
        """Queue ``dest = alpha·A·B + beta·C0`` on ``stream`` (``c`` 0: no C0 read; ``conj``: A, B or C0 is
        read conjugated). The real kernel is built before any scratch is taken."""
        rt = self.rt
        if self.m == 0 or self.n == 0 or self.count == 0:
            return
        assert rt is not None
        reads_c = bool(c) and beta != 0.0
        if self.k == 0 or self.real is None:  # no product: dest = beta·C0, or zeros
            assert self.k == 0, "a complex plan made without a device cannot run"
            self._join(rt, (c if reads_c else 0, c if reads_c else 0), self.c, self.strides[2], beta, dest, stream, conj[2], planes=False)
            return
        real = self.real
        self.build()
        base = rt.scratch(self.nbytes, stream)
        try:
            ar, ai, br, bi, cr, ci = (base + off for off in self.offsets)
            sa, sb, sc, _ = self.strides
            lda, ldb, ldc = self.lds
            self._split(rt, a, self.a, sa, self.mats(sa), self.m, self.k, lda, (ar, ai), conj[0], stream)
            self._split(rt, b, self.b, sb, self.mats(sb), self.k, self.n, ldb, (br, bi), conj[1], stream)
            if reads_c:  # every matrix of the result gets its C0 (one c for all: copied to each)
                assert self.c is not None
                self._split(rt, c, self.c, sc, self.count, self.m, self.n, ldc, (cr, ci), conj[2], stream)
            first = beta if reads_c else 0.0
            pa, pb, pc = self.plane_strides
            for x, y, z, scale, accumulate in ((ar, br, cr, alpha, first), (ai, bi, cr, -alpha, 1.0),
                                               (ar, bi, ci, alpha, first), (ai, br, ci, alpha, 1.0)):
                for i in range(1 if self.batched else self.count):
                    real.launch(real.prepare(x + i * pa, y + i * pb, z + i * pc, scale, accumulate, stream), stream)
            self._join(rt, (cr, ci), None, pc, 1.0, dest, stream, False, planes=True)
        except BaseException:
            quiet_release(rt, base, stream)
            raise
        rt.release(base, stream)

    def _split(self, rt: CudaRuntime, ptr: int, user: Mat, stride: int, count: int, rows: int, cols: int, ld: int,
               planes: tuple[int, int], conj: bool, stream: int) -> None:
        """Copy ``count`` complex matrices ``user`` at ``ptr``, ``stride`` bytes apart, into real and imaginary planes
        of pitch ``ld``."""
        size = self.itemsize
        plane_stride = rows * ld * size
        for imag, dst in zip((False, True), planes):
            src = part(user.at(ptr), imag, size)
            scale = -1.0 if imag and conj else 1.0
            if count > 1 and stride and _stacked(user, stride, size):  # one copy of the whole batch
                rt.copy_scale(rows * count, cols, scale, _rows(src, rows * count), Mat("plane", rows * count, cols, "row", ld, dst, size), stream)
                continue
            for i in range(count):
                rt.copy_scale(rows, cols, scale, src.at(src.ptr + i * stride),
                              Mat("plane", rows, cols, "row", ld, dst + i * plane_stride, size), stream)

    def _join(self, rt: CudaRuntime, srcs: tuple[int, int], user: Mat | None, src_stride: int, scale: float, dest: int,
              stream: int, conj: bool, *, planes: bool) -> None:
        """Write the destination's real and imaginary parts: from the result planes (``planes``), or from complex
        matrix ``user`` at ``srcs`` scaled by ``scale`` (0 pointers: zeros)."""
        size, m, n = self.itemsize, self.m, self.n
        sd = self.strides[3]
        ldc = self.lds[2]
        dst_user = self.dest.at(dest)
        for imag, src_ptr in zip((False, True), srcs):
            dst = part(dst_user, imag, size)
            if planes:
                src: Mat | None = Mat("plane", m, n, "row", ldc, src_ptr, size)
            else:
                src = part(user.at(src_ptr), imag, size) if src_ptr and user is not None else None
            sign = -1.0 if imag and conj else 1.0
            stacked = self.count > 1 and _stacked(dst_user, sd, size) and \
                (src is None or (src_stride == m * ldc * size if planes else user is not None and _stacked(user, src_stride, size)))
            if stacked:
                rt.copy_scale(m * self.count, n, scale * sign, _rows(src, m * self.count) if src is not None else None,
                              _rows(dst, m * self.count), stream)
                continue
            for i in range(self.count):
                rt.copy_scale(m, n, scale * sign, src.at(src.ptr + i * src_stride) if src is not None else None,
                              dst.at(dst.ptr + i * sd), stream)


def _rows(mat: Mat, rows: int) -> Mat:
    """``mat`` with ``rows`` rows (a stacked batch read as one tall matrix)."""
    return Mat(mat.name, rows, mat.cols, mat.layout, mat.ld, mat.ptr, mat.itemsize, mat.step)


def _stacked(user: Mat, stride: int, itemsize: int) -> bool:
    """Whether a row-major complex batch of ``user`` matrices ``stride`` bytes apart is one tall matrix (each
    matrix's rows follow the previous one's at the same pitch)."""
    return user.layout == "row" and stride == user.rows * user.ld * 2 * itemsize
