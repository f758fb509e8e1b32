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
from typing import Callable

from ...errors import UnsupportedProblemError
from .variants import KernelSpec

__all__ = ["Mat", "LaunchPlan", "plan_launch", "TmaUnsuitable", "tma_refusal", "split_refusal", "workspace_matrix", "IndexRangeError", "panels", "panel_mats", "aligned_copy", "pitch_copy", "transposed_copy", "pitch_off", "FULL_SPEED_PITCH", "INT32_MAX", "flip", "strides", "round_up"]

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
    #: elements from one entry of a line to the next (1: contiguous lines); 2 reads one part of a complex
    #: matrix as a real one (its real or imaginary plane, every other element); only copies take other than 1
    step: int = 1

    def at(self, ptr: int) -> "Mat":
        """The same matrix description at another address."""
        return Mat(self.name, self.rows, self.cols, self.layout, self.ld, ptr, self.itemsize, self.step)

    @property
    def t(self) -> "Mat":
        """The transpose: same memory, other layout."""
        return Mat(self.name + "ᵀ", self.cols, self.rows, flip(self.layout), self.ld, self.ptr, self.itemsize, self.step)

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
    return (m.ld, m.step) if m.layout == "row" else (m.step, m.ld)


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
    cluster: tuple[int, int] = (1, 1)  # KernelSpec.cluster_mn: CTAs of a cluster along M (sharing B) and N (sharing A)
    notes: list[str] = field(default_factory=list)
    defines: tuple[tuple[str, int], ...] = ()  # the rung's constant macros (KernelSpec.defines)
    #: split-K: the K-slices the rung's batched build computes side by side into the fp32 (a
    #: float64 rung's: fp64) workspace ``c`` (``splits`` compact matrices), reduced in slice order into ``dest``
    #: (the caller's destination in kernel terms) by the last threadblock of each tile to
    #: finish, in the same launch (PG_SPLIT=1); 0: no split
    splits: int = 0
    dest: Mat | None = None
    slice_k: int = 0  # split-K: K of a slice (the last may be shorter where the rung cuts K itself)
    #: the input dtype (float32, float16, bfloat16, float64): a 16-bit rung's bfloat16 build is PG_BF16=1
    dtype: str = ""

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
        if self.splits:
            m["PG_SPLIT"] = 1
        if self.dtype == "bfloat16":
            m["PG_BF16"] = 1
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
        if self.splits:
            d["split-K"] = (f"{self.splits} K-slices of {self.slice_k} in one launch (the rung's PG_BATCH build) into a "
                            f"{self.splits}x{self.m}x{self.n} {'fp64' if self.c.itemsize == 8 else 'fp32'} workspace, added in slice order in the same launch "
                            f"(deterministic; PG_SPLIT)")
        elif self.batch_count:
            d["batch"] = f"{self.batch_count} products in one launch (blockIdx.z; PG_BATCH=1)"
        cm, cn = self.cluster
        if cm * cn > 1:
            shared = [f"B shared by {cm} tiles down" if cm > 1 else "", f"A shared by {cn} tiles across" if cn > 1 else ""]
            d["cluster"] = f"{cm}x{cn} CTAs on adjacent tiles ({', '.join(x for x in shared if x)}: TMA multicast)"
        if self.grid != (1, 1, 1):
            d["grid"] = self.grid
            d["block"] = self.block
        return d


class IndexRangeError(UnsupportedProblemError):
    """An operand spans more elements than a kernel's 32-bit offsets reach (the backend then
    runs the product in panels: :func:`panels`)."""


def _check_index_range(mats: list[Mat], what: str) -> None:
    for mat in mats:
        if mat.max_offset > INT32_MAX:
            raise IndexRangeError(
                f"{what}: operand {mat.name} ({mat.rows}x{mat.cols}, ld={mat.ld}) spans {mat.max_offset + 1} elements, "
                f"beyond the kernels' 32-bit indexing (max {INT32_MAX}); split the product into smaller blocks"
            )


def orient(kernel_layout: str, a: Mat, b: Mat, c: Mat, operand_layout: str | None = None) -> tuple[bool, Mat, Mat, Mat, bool, bool]:
    """Operand swap and transposes for a kernel computing in ``kernel_layout``.

    Returns (swap, A', B', C', trans_a, trans_b) with C' in ``kernel_layout``; the transposes
    are relative to ``operand_layout`` (default: ``kernel_layout``), the layout the kernel's
    PG_TRANS_A/B = 0 builds read (a TMA row stores a column-major C but reads row-major
    operands untransposed: ``KernelSpec.operand_layout``).
    """
    swap = c.layout != kernel_layout
    if swap:
        a2, b2, c2 = b.t, a.t, c.t
    else:
        a2, b2, c2 = a, b, c
    native = operand_layout or kernel_layout
    return swap, a2, b2, c2, a2.layout != native, b2.layout != native


class TmaUnsuitable(UnsupportedProblemError):
    """The operands cannot be described by TMA tensor maps (the planner routes elsewhere)."""


def tma_refusal(a: Mat, b: Mat, c: Mat | None = None) -> str | None:
    """Why TMA cannot serve these operands (None if it can): tensor maps need 16-byte
    aligned base addresses and leading dimensions. ``c``: the result, where a tensor map
    stores it too (a rung whose epilogue stores C from the threads writes any C in place,
    16 bytes at a time where its rows allow, else element by element)."""
    bad = [x.name for x in (a, b, c) if x is not None and not x.aligned(16 // x.itemsize)]
    if bad:
        return f"{', '.join(bad)}: TMA needs 16-byte aligned pointers and leading dimensions"
    return None


def _span(rows: int, cols: int, row_stride: int, col_stride: int) -> int:
    return (rows - 1) * row_stride + (cols - 1) * col_stride if rows and cols else 0


def panels(a: Mat, b: Mat, c: Mat, limit: int = INT32_MAX) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Row panels of A and C times column panels of B and C, each operand's piece within
    ``limit`` elements of its first: [((row0, rows), (col0, cols)), ...] of the M×N result.
    Raises IndexRangeError when a single row of A or column of B is already too long (K past
    the limit: a K-split would be needed)."""
    (ars, acs), (brs, bcs), (crs, ccs) = strides(a), strides(b), strides(c)
    k = a.cols
    if _span(1, k, ars, acs) > limit or _span(k, 1, brs, bcs) > limit:
        raise IndexRangeError(f"problem too large: one row of A or column of B spans past {limit} elements (K = {k}); "
                              "the kernels' offsets are 32-bit. Split K into blocks and accumulate with beta=1")

    def fit(count: int, span_of: "Callable[[int], int]") -> int:  # most rows (or columns) whose pieces fit
        lo, hi = 1, count
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if span_of(mid) <= limit:
                lo = mid
            else:
                hi = mid - 1
        return lo

    n_step = fit(c.cols, lambda w: max(_span(k, w, brs, bcs), _span(1, w, crs, ccs)))
    m_step = fit(c.rows, lambda h: max(_span(h, k, ars, acs), _span(h, min(n_step, c.cols), crs, ccs)))
    return [((r, min(m_step, c.rows - r)), (q, min(n_step, c.cols - q)))
            for r in range(0, c.rows, m_step) for q in range(0, c.cols, n_step)]


def panel_mats(a: Mat, b: Mat, c: Mat, rows: tuple[int, int], cols: tuple[int, int]) -> tuple[Mat, Mat, Mat, tuple[int, int, int]]:
    """The operands of one panel and their byte offsets from the full operands' pointers."""
    (r0, nr), (q0, nq) = rows, cols
    oa = r0 * strides(a)[0] * a.itemsize
    ob = q0 * strides(b)[1] * b.itemsize
    oc = (r0 * strides(c)[0] + q0 * strides(c)[1]) * c.itemsize
    pa = Mat(a.name, nr, a.cols, a.layout, a.ld, a.ptr + oa, a.itemsize)
    pb = Mat(b.name, b.rows, nq, b.layout, b.ld, b.ptr + ob, b.itemsize)
    pc = Mat(c.name, nr, nq, c.layout, c.ld, c.ptr + oc, c.itemsize)
    return pa, pb, pc, (oa, ob, oc)


def aligned_copy(m: Mat) -> Mat | None:
    """The 16-byte aligned scratch matrix a TMA rung would read ``m`` from (same layout, the
    leading dimension rounded up to 16 bytes), or None when ``m`` is aligned already."""
    per = 16 // m.itemsize
    if m.aligned(per):
        return None
    inner = m.cols if m.layout == "row" else m.rows
    return Mat(m.name + " (aligned copy)", m.rows, m.cols, m.layout, round_up(max(inner, 1), per), 0, m.itemsize)


def transposed_copy(m: Mat, pitch: int = 128) -> Mat:
    """The scratch matrix holding ``m``'s values in the other layout (each line starting on a ``pitch``-byte
    boundary), where a rung reads operands of matched layouts at full speed."""
    per = max(pitch // m.itemsize, 1)
    layout = flip(m.layout)
    inner = m.cols if layout == "row" else m.rows
    return Mat(m.name + " (transposed copy)", m.rows, m.cols, layout, round_up(max(inner, 1), per), 0, m.itemsize)


#: the row pitch TMA reads at full speed: a whole number of 32-byte L2 sectors, so that every
#: 128-byte box row covers four sectors, not five. Measured on the H100 through the call, each
#: rung read as it is beside the same rung on pitch-aligned copies (h100_call_pitch_copies2_fp16.md):
#: rows of 4000 and 8000 bytes ran at 0.98-1.03x of cuBLAS as they were (their copies cost up to
#: 26%), 800-byte rows lost nothing a copy won back, and 2000-byte rows (16 bytes off a sector)
#: lost a third (4096x1000x16384: 0.67x as they were, 0.99x on a cluster row)
FULL_SPEED_PITCH = 32


def pitch_copy(m: Mat, pitch: int = 128) -> Mat | None:
    """The scratch matrix a TMA rung reads ``m`` from at full speed (same layout, each row or
    column starting on a ``pitch``-byte boundary), or None when ``m``'s rows already start on
    :data:`FULL_SPEED_PITCH` boundaries. A copy of it is also 16-byte aligned, so it serves
    where :func:`aligned_copy` would."""
    per = max(pitch // m.itemsize, 1)
    if m.aligned(16 // m.itemsize) and not pitch_off(m):
        return None
    inner = m.cols if m.layout == "row" else m.rows
    return Mat(m.name + " (aligned copy)", m.rows, m.cols, m.layout, round_up(max(inner, 1), per), 0, m.itemsize)


def pitch_off(m: Mat, pitch: int = FULL_SPEED_PITCH) -> bool:
    """Whether ``m``'s rows (columns, column-major) start off ``pitch``-byte boundaries: its
    leading dimension is not a multiple of them (a single row or column has no such rows)."""
    lines = m.rows if m.layout == "row" else m.cols
    return lines > 1 and (m.ld * m.itemsize) % pitch != 0


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


def workspace_matrix(ws: Mat) -> int:
    """Elements from one K-slice's partial sums to the next in a split-K workspace."""
    return ws.ld * (ws.rows if ws.layout == "row" else ws.cols)


def split_refusal(spec: KernelSpec, a: Mat, b: Mat, splits: int) -> str | None:
    """Why ``spec`` cannot split this product's K into ``splits`` slices (None: it can).
    Slices are equal (K a multiple of ``splits``), or, for a rung that cuts K itself, whole
    steps with none left empty; each starts 16 bytes after a multiple, so the aligned builds and
    TMA's strides hold for every slice."""
    k = a.cols
    if not (spec.batch and spec.predicated):
        return f"{spec.name} has no batched build to run the K-slices side by side"
    ks = spec.split_slice(k, splits)
    if spec.split_step:
        if not spec.cuts_k(k, splits):
            return f"K = {k} in slices of whole {spec.split_step}-deep steps leaves no K for slice {splits}"
    elif splits < 2 or k % splits:
        return f"K = {k} is not a multiple of {splits} slices"
    sa, sb = strides(a)[1] * ks * a.itemsize, strides(b)[0] * ks * b.itemsize  # bytes from one slice to the next
    if sa % 16 or sb % 16:
        return f"a K-slice of {ks} does not start on a 16-byte boundary"
    return None


def plan_launch(spec: KernelSpec | None, a: Mat, b: Mat, c: Mat, *, kernel_layout: str = "col",
                batch: tuple[int, int, int, int] = (0, 0, 0, 0), sms: int = 132, splits: int = 0,
                dtype: str | None = None) -> LaunchPlan:
    """Plan ``C = alpha·A·B + beta·C`` for rung ``spec`` (None: the cuBLAS comparator).

    ``a`` is M×K, ``b`` K×N, ``c`` M×N as stored on the device (``c`` is the buffer the
    result lands in). ``batch`` = (count, element strides of a, b, c) for a strided batch:
    a rung with ``PG_BATCH`` takes it on the grid (``sms``: the device's SM count, for the
    persistent grid of the TMA rung's batches). ``splits`` > 1 splits K into that many
    slices computed side by side by the rung's batched build (one product, not a batch; see
    :func:`split_refusal`). ``dtype`` is the inputs' (default: float16 for 2-byte ``a``, float64 for 8-byte, else
    float32); bfloat16 plans the rung's PG_BF16 build. Raises UnsupportedProblemError beyond
    32-bit indexing.
    """
    k = a.cols
    if splits > 1:
        assert spec is not None and batch[0] <= 1, "split-K takes one product of a batch-capable rung"
        why = split_refusal(spec, a, b, splits)
        if why is not None:
            raise UnsupportedProblemError(f"cannot split K: {why}")
        # the rung addresses one K-slice from a 64-bit base (and the reduction writes C with
        # 64-bit offsets): a slice and the workspace are what must fit 32-bit offsets
        ks = spec.split_slice(k, splits)
        sliced = [Mat(a.name, a.rows, ks, a.layout, a.ld, a.ptr, a.itemsize), Mat(b.name, ks, b.cols, b.layout, b.ld, b.ptr, b.itemsize)]
        _check_index_range((sliced if spec.abi != "tma" else []) + [Mat("workspace", c.rows, c.cols, "row", round_up(c.cols, 4))],
                           "problem too large")
    elif spec is None:
        pass  # cuBLAS takes its own offsets (its limits are int dimensions and leading dimensions)
    elif spec.abi == "tma":  # A and B through tensor maps (64-bit strides): only C's offsets are 32-bit
        _check_index_range([c], "problem too large")
    else:
        _check_index_range([a, b, c], "problem too large")
    layout = spec.layout if spec is not None else kernel_layout
    swap, a2, b2, c2, ta, tb = orient(layout, a, b, c, spec.operand_layout if spec is not None else None)
    km, kn = c2.rows, c2.cols
    lp = LaunchPlan(spec.name if spec else "cublas", swap, km, kn, k, a2, b2, c2, ta, tb)
    lp.dtype = dtype or {2: "float16", 8: "float64"}.get(a.itemsize, "float32")
    if spec is None:
        return lp
    lp.defines = spec.defines
    if spec.dtype == "float16":
        lp.out_f32 = c.itemsize == 4
    lp.smem_bytes = spec.smem_bytes
    lp.tma = spec.abi == "tma"
    count = batch[0]
    if spec.batch and spec.predicated and 1 < count <= MAX_GRID_BATCH:
        sa, sb, sc = batch[1:]
        lp.batch_count = count
        lp.batch_strides = (sb, sa, sc) if swap else (sa, sb, sc)
    if splits > 1:
        ks = spec.split_slice(k, splits)
        # rows padded to 16 bytes: the rungs' aligned (and TMA) epilogues store 16-byte pieces; float32 partial sums,
        # float64 for a float64 rung
        size = spec.partial_bytes  # the rung's element type decides its split's (split_k.cuh)
        ws = Mat("split-K workspace", km, kn, layout, round_up(max(kn if layout == "row" else km, 1), 16 // size), 0, size)
        # (a rung that cuts K itself is passed the whole K: its slices are not all ks long)
        lp.splits, lp.dest, lp.c, lp.k, lp.slice_k = splits, c2, ws, k if spec.split_step else ks, ks
        lp.batch_count = splits
        lp.batch_strides = (strides(a2)[1] * ks, strides(b2)[0] * ks, workspace_matrix(ws))
        if lp.out_f32 is not None:
            lp.out_f32 = True  # partial sums stay fp32 until the reduction rounds once
        c2 = ws  # the kernel writes the workspace; only the reduction sees the destination
    if lp.tma:
        why = tma_refusal(a2, b2, c2 if spec.tma_store else None)
        if why is None and batch[0] > 1 and any((st * a2.itemsize) % 16 for st in batch[1:]):
            why = "a batch stride is not a multiple of 16 bytes (TMA's rule for every stride)"
        if why is None and spec.k_major_b and not tb:
            why = (f"{spec.name}'s {spec.tile[1]}-wide B tile is read K-major only (an N-major box is 64 wide); "
                   f"here its B ({b2.name}) is N-contiguous")
        if why is None and batch[0] > 1 and min(batch[1:3]) < 0:  # C's is a plain signed offset
            why = "A's or B's batch runs backwards in memory (a negative batch stride: tensor map strides are positive)"
        if why is not None:
            raise TmaUnsuitable(why)
    if spec.predicated:
        # (a TMA rung's builds differ only in how they read A and B: it writes C as its rows allow)
        lp.vec = spec.align > 1 and all(x.aligned(spec.align) for x in ((a2, b2) if lp.tma else (a2, b2, c2)))
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
    # a TMA rung walks its tiles from one block index on any grid (a grid past y's limit runs
    # as the persistent grid below): a column-major row's long side is its M, tiled along y
    if gx > 2**31 - 1 or (gy > 65535 and not lp.tma):
        raise UnsupportedProblemError(
            f"{spec.name} would need a {gx}x{gy} grid for this problem; CUDA allows at most 65535 blocks along y. "
            f"Split the product or pick another variant"
        )
    lp.grid = (gx, gy, max(lp.row_split, lp.batch_count, 1))
    if spec.cluster > 1:
        # a cluster's CTAs are consecutive along x and take a unit of cm x cn adjacent tiles:
        # a 1-D grid of whole clusters, one unit each; a batch (or K-slices) on a grid of at
        # most one cluster per `cluster` SMs, each walking units (the launch lowers it to the
        # clusters the device holds at once: PreparedLaunch.kernel)
        assert spec.grid == ("n", "m"), f"{spec.name}: a cluster row runs on an (n, m) grid"
        cm, cn = lp.cluster = spec.cluster_mn
        units = -(-gy // cm) * -(-gx // cn) * max(lp.batch_count, 1)
        if lp.batch_count or spec.persistent:  # a persistent cluster row walks its units too
            units = min(units, max(sms // (cm * cn), 1))
        lp.grid = (units * cm * cn, 1, 1)
    elif lp.tma and (lp.batch_count or spec.persistent or gy > 65535):
        # the TMA rung walks the tiles of every matrix itself: a persistent grid of one
        # threadblock per SM, each producer prefetching its next tile while its consumers store
        # (also a product whose tile rows are more than a grid's y holds)
        lp.grid = (min(gx * gy * max(lp.batch_count, 1), max(sms, 1)), 1, 1)
        if spec.streamk:  # every SM takes a share of the last waves' k-tiles, however few the tiles
            lp.grid = (max(sms, 1), 1, 1)
    elif spec.walks_strips:
        # one threadblock per SM walks the x tiles, its copies running on from one tile into the
        # next, rather than a block per tile starting cold (KernelSpec.strip_blocks, which the cost
        # model's share of the GPU reads too)
        lp.grid = (spec.strip_blocks(gx, gy, lp.grid[2], sms), gy, lp.grid[2])
    lp.block = (spec.block[0], spec.block[1], 1)
    return lp
