"""Pure planning of one CUDA GEMM launch (no device, no pycuda: unit-tested on the CPU).

Given the operands as the device will hold them (pointer, layout, leading dimension),
decide:

* the **operand swap**: a rung computes in one layout (``col`` or ``row``); when the
  result is stored the other way, compute ``Cᵀ = Bᵀ·Aᵀ`` instead (swap A and B, swap M
  and N), which reads the same memory without a copy;
* the **transposes** left after that (``PG_TRANS_A``/``PG_TRANS_B`` for predicated rungs,
  ``CUBLAS_OP_T`` for cuBLAS);
* **alignment routing**: float4 paths (``PG_VEC=1``) only when every pointer and leading
  dimension is 16-byte aligned; for a rung with ``row_split``, an unaligned problem whose
  row-major A has enough rows splits them into sets of one 16-byte phase
  (``PG_ROW_SPLIT=1``, ``gridDim.z`` sets; see :func:`row_split_sets`);
* **padding** for teaching rungs that need tile multiples, their own layout or alignment:
  zero-padded scratch buffers, packed and unpacked by the ``pg_copy_scale_f32`` kernel;
* the **launch geometry** from the variant table, and the 32-bit index limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...errors import UnsupportedProblemError
from .variants import KernelSpec

__all__ = ["Mat", "LaunchPlan", "plan_launch", "TmaUnsuitable", "tma_refusal", "INT32_MAX", "flip", "strides", "round_up"]

INT32_MAX = 2**31 - 1


def flip(layout: str) -> str:
    return "row" if layout == "col" else "col"


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


@dataclass(frozen=True)
class Mat:
    """A device matrix as a kernel sees it; ``ptr`` may be 0 at plan time (fresh buffer)."""

    name: str
    rows: int
    cols: int
    layout: str
    ld: int
    ptr: int = 0
    itemsize: int = 4

    def at(self, ptr: int) -> "Mat":
        """The same matrix description at another address."""
        return Mat(self.name, self.rows, self.cols, self.layout, self.ld, ptr, self.itemsize)

    @property
    def t(self) -> "Mat":
        """The transpose: same memory, other layout."""
        return Mat(self.name + "ᵀ", self.cols, self.rows, flip(self.layout), self.ld, self.ptr, self.itemsize)

    def aligned(self, elems: int) -> bool:
        """Pointer and leading dimension allow accesses of ``elems`` elements at once."""
        return elems <= 1 or (self.ptr % (self.itemsize * elems) == 0 and self.ld % elems == 0)

    @property
    def max_offset(self) -> int:
        if self.rows == 0 or self.cols == 0:
            return 0
        if self.layout == "row":
            return (self.rows - 1) * self.ld + self.cols - 1
        return (self.rows - 1) + (self.cols - 1) * self.ld


def strides(m: Mat) -> tuple[int, int]:
    """(row stride, column stride) in elements."""
    return (m.ld, 1) if m.layout == "row" else (1, m.ld)


@dataclass(frozen=True)
class Pack:
    """Copy ``src`` into a zero-padded scratch matrix ``dst`` (or back, for the result)."""

    src: Mat
    dst: Mat
    scratch_elems: int
    slot: str = ""  # the kernel operand ("a", "b" or "c") whose data the pack moves


@dataclass
class LaunchPlan:
    """Everything ``run`` needs: kernel-space operands, flags, scratch and geometry."""

    variant: str
    swap: bool
    m: int
    n: int
    k: int
    a: Mat  # kernel's A (m x k), possibly a scratch buffer
    b: Mat  # kernel's B (k x n)
    c: Mat  # kernel's C (m x n)
    trans_a: bool = False
    trans_b: bool = False
    vec: bool = True
    out_f32: bool | None = None  # float16 rungs: PG_OUT_F32 (None: not a float16 rung)
    smem_bytes: int = 0
    tma: bool = False  # tensor maps describe A and B (the "tma" kernel ABI)
    row_split: int = 0  # PG_ROW_SPLIT: the number of row sets (gridDim.z); 0: not split
    batch_count: int = 0  # PG_BATCH: matrices of a strided batch on gridDim.z; 0: one product a launch
    batch_strides: tuple[int, int, int] = (0, 0, 0)  # PG_BATCH: element strides of the kernel's A, B, C
    packs: list[Pack] = field(default_factory=list)  # before the launch
    unpack: Pack | None = None  # after the launch
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    notes: list[str] = field(default_factory=list)
    defines: tuple[tuple[str, int], ...] = ()  # the rung's constant macros (KernelSpec.defines)

    def macros(self) -> dict[str, int]:
        m = {**dict(self.defines), "PG_TRANS_A": int(self.trans_a), "PG_TRANS_B": int(self.trans_b)}
        if not self.tma:
            m["PG_VEC"] = int(self.vec)
        if self.out_f32 is not None:
            m["PG_OUT_F32"] = int(self.out_f32)
        if self.row_split:
            m["PG_ROW_SPLIT"] = 1
        if self.batch_count:
            m["PG_BATCH"] = 1
        return m

    def describe(self) -> dict[str, object]:
        d: dict[str, object] = {
            "kernel problem": f"{self.m}x{self.n}x{self.k}",
            "operand swap": "yes (C^T = B^T A^T)" if self.swap else "no",
            "transposes": f"A{'ᵀ' if self.trans_a else ''} B{'ᵀ' if self.trans_b else ''}",
            "float4": "yes" if self.vec else "no (unaligned pointer or leading dimension)",
        }
        if self.row_split:
            d["row split"] = f"{self.row_split} sets of A's rows, one 16-byte phase each"
        if self.batch_count:
            d["batch"] = f"{self.batch_count} products in one launch (blockIdx.z; PG_BATCH=1)"
        if self.grid != (1, 1, 1):
            d["grid"] = self.grid
            d["block"] = self.block
        return d


def _check_index_range(mats: list[Mat], what: str) -> None:
    for mat in mats:
        if mat.max_offset > INT32_MAX:
            raise UnsupportedProblemError(
                f"{what}: operand {mat.name} ({mat.rows}x{mat.cols}, ld={mat.ld}) spans {mat.max_offset + 1} elements, "
                f"beyond the kernels' 32-bit indexing (max {INT32_MAX}); split the product into smaller blocks"
            )


def orient(kernel_layout: str, a: Mat, b: Mat, c: Mat) -> tuple[bool, Mat, Mat, Mat, bool, bool]:
    """Operand swap and transposes for a kernel computing in ``kernel_layout``.

    Returns (swap, A', B', C', trans_a, trans_b) with C' in ``kernel_layout``.
    """
    swap = c.layout != kernel_layout
    if swap:
        a2, b2, c2 = b.t, a.t, c.t
    else:
        a2, b2, c2 = a, b, c
    return swap, a2, b2, c2, a2.layout != kernel_layout, b2.layout != kernel_layout


class TmaUnsuitable(UnsupportedProblemError):
    """The operands cannot be described by TMA tensor maps (the planner routes elsewhere)."""


def tma_refusal(a: Mat, b: Mat, c: Mat) -> str | None:
    """Why TMA cannot serve these operands (None if it can): tensor maps need 16-byte
    aligned base addresses and leading dimensions; the epilogue's paired stores need the
    same of C."""
    bad = [x.name for x in (a, b, c) if not x.aligned(16 // x.itemsize)]
    if bad:
        return f"{', '.join(bad)}: TMA needs 16-byte aligned pointers and leading dimensions"
    return None


def row_split_sets(a: Mat, m: int, bm: int) -> int:
    """How many interleaved row sets make row-major ``a``'s rows share one 16-byte phase
    (set r: rows r, r + p, ...; p * lda a multiple of 16 bytes), or 0 when splitting would
    cost more than a quarter more threadblock tiles along M than not splitting."""
    per_line = 16 // a.itemsize
    p = per_line // math.gcd(a.ld, per_line)
    set_rows = -(-m // p)
    plain, split = -(-m // bm), p * -(-set_rows // bm)  # threadblock tiles along M
    return p if 4 * split <= 5 * plain else 0


#: most matrices one batched launch takes (gridDim.z); larger batches launch once per matrix
MAX_GRID_BATCH = 65535


def plan_launch(spec: KernelSpec | None, a: Mat, b: Mat, c: Mat, *, kernel_layout: str = "col",
                batch: tuple[int, int, int, int] = (0, 0, 0, 0), sms: int = 132) -> LaunchPlan:
    """Plan ``C = alpha·A·B + beta·C`` for rung ``spec`` (None: the cuBLAS comparator).

    ``a`` is M×K, ``b`` K×N, ``c`` M×N as stored on the device (``c`` is the buffer the
    result lands in). ``batch`` = (count, element strides of a, b, c) for a strided batch:
    a rung with ``PG_BATCH`` takes it on the grid (``sms``: the device's SM count, for the
    persistent grid of the TMA rung's batches). Raises UnsupportedProblemError beyond
    32-bit indexing.
    """
    k = a.cols
    _check_index_range([a, b, c], "problem too large")
    layout = spec.layout if spec is not None else kernel_layout
    swap, a2, b2, c2, ta, tb = orient(layout, a, b, c)
    km, kn = c2.rows, c2.cols
    lp = LaunchPlan(spec.name if spec else "cublas", swap, km, kn, k, a2, b2, c2, ta, tb)
    if spec is None:
        return lp
    lp.defines = spec.defines
    if spec.dtype == "float16":
        lp.out_f32 = c.itemsize == 4
    lp.smem_bytes = spec.smem_bytes
    lp.tma = spec.abi == "tma"
    if lp.tma:
        why = tma_refusal(a2, b2, c2)
        if why is None and batch[0] > 1 and any((st * a2.itemsize) % 16 for st in batch[1:]):
            why = "a batch stride is not a multiple of 16 bytes (TMA's rule for every stride)"
        if why is not None:
            raise TmaUnsuitable(why)
    count = batch[0]
    if spec.batch and spec.predicated and 1 < count <= MAX_GRID_BATCH:
        sa, sb, sc = batch[1:]
        lp.batch_count = count
        lp.batch_strides = (sb, sa, sc) if swap else (sa, sb, sc)
    if spec.predicated:
        lp.vec = spec.align > 1 and all(x.aligned(spec.align) for x in (a2, b2, c2))
        if spec.align > 1 and not lp.vec:
            lp.notes.append("a pointer or leading dimension is not 16-byte aligned: the rung's unaligned build (PG_VEC=0)")
        lp.smem_bytes = spec.smem_for(lp.vec)
        if spec.row_split and not lp.vec and not ta and not tb and not lp.batch_count:
            lp.row_split = row_split_sets(a2, km, spec.tile[0])
            if lp.row_split:
                lp.notes.append(
                    f"A's rows split into {lp.row_split} sets of one 16-byte phase (PG_ROW_SPLIT=1): A is copied aligned, only B is realigned"
                )
    else:
        lp.vec = False
        bm, bn, bk = spec.multiple
        fits = km % bm == 0 and kn % bn == 0 and k % bk == 0
        mp, np_, kp = round_up(km, bm), round_up(kn, bn), round_up(k, bk)

        def padded(name: str, rows: int, cols: int) -> Mat:
            ld = round_up(cols if layout == "row" else rows, 4)
            return Mat(name + " (padded scratch)", rows, cols, layout, ld, 0, a2.itemsize)

        def needs(x: Mat, transposed: bool) -> bool:
            return not fits or transposed or not x.aligned(spec.align)

        reasons = []
        if not fits:
            reasons.append(f"{km}x{kn}x{k} is not a multiple of the {bm}x{bn}x{bk} threadblock tile")
        if ta or tb:
            reasons.append(f"the rung reads {layout}-major operands only")
        if not all(x.aligned(spec.align) for x in (a2, b2, c2)):
            reasons.append(f"the rung needs {4 * spec.align}-byte alignment")
        if needs(a2, ta):
            pa = padded(a2.name, mp, kp)
            lp.packs.append(Pack(a2, pa, pa.max_offset + 1, "a"))
            lp.a, lp.trans_a = pa, False
        if needs(b2, tb):
            pb = padded(b2.name, kp, np_)
            lp.packs.append(Pack(b2, pb, pb.max_offset + 1, "b"))
            lp.b, lp.trans_b = pb, False
        if needs(c2, False):
            pc = padded(c2.name, mp, np_)
            lp.packs.append(Pack(c2, pc, pc.max_offset + 1, "c"))  # read only when beta != 0
            lp.unpack = Pack(pc, c2, 0, "c")
            lp.c = pc
        lp.m, lp.n, lp.k = mp, np_, kp  # equal to the real sizes when the tile fits
        if reasons:
            lp.notes.append("teaching rung: packed into zero-padded scratch because " + "; ".join(reasons))
        _check_index_range([lp.a, lp.b, lp.c], "padded problem too large")
    bm, bn, _ = spec.tile
    rows = -(-lp.m // lp.row_split) if lp.row_split else lp.m  # the M axis tiles one row set
    dims = {"m": -(-rows // bm), "n": -(-lp.n // bn)}
    gx, gy = (dims.get(axis, 1) for axis in spec.grid)
    if gx > 2**31 - 1 or gy > 65535:
        raise UnsupportedProblemError(
            f"{spec.name} would need a {gx}x{gy} grid for this problem; CUDA allows at most 65535 blocks along y. "
            f"Split the product or pick another variant"
        )
    lp.grid = (gx, gy, max(lp.row_split, lp.batch_count, 1))
    if lp.tma and lp.batch_count:
        # the TMA rung walks the tiles of every matrix itself: a persistent grid of one
        # threadblock per SM, each producer prefetching its next tile while its consumers store
        lp.grid = (min(gx * gy * lp.batch_count, max(sms, 1)), 1, 1)
    lp.block = (spec.block[0], spec.block[1], 1)
    return lp
