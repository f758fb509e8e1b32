"""A prepared launch: what a plan decided, ready to queue with each call's pointers.

Made once per plan (:meth:`CudaBackend.plan`), it holds the rung, its build macros, the launch
geometry and the parameter packer; a call supplies only the user operands' device pointers,
alpha, beta and the stream. Nothing here re-plans: the operand swap, transposes, alignment
build and row split were decided by :func:`~.planning.plan_launch`, and the plan cache keys on
everything they depend on (shapes, strides, dtypes, 16-byte alignment classes).
"""

from __future__ import annotations

import threading
from math import copysign
from dataclasses import dataclass, field
from typing import Any

from ...errors import DeviceError
from .device import CudaRuntime
from .driver import Kernel
from .cost import copies_suffix
from .planning import LaunchPlan, Mat, strides, workspace_matrix
from .scratch import CallScratch, block_bytes, quiet_release, stream_scratch
from .variants import KernelSpec

__all__ = ["PreparedLaunch", "SplitGeometry", "SplitLaunch", "ComposedLaunch", "PanelLaunch", "PaddedLaunch"]


@dataclass(frozen=True)
class SplitGeometry:
    """A split-K plan's workspace and reduction, worked out once per plan (PG_SPLIT in
    common.cuh): the slices' fp32 partial sums, then two counters per threadblock tile. A
    stream-K plan's (PG_STREAMK) has the same shape: a partial-tile slot per block, then one
    flag per block (the counters)."""

    nbytes: int  # the whole workspace
    counters_at: int  # byte offset of the tile counters (a multiple of 16)
    counters: int  # 32-bit counters: per tile, slices arrived and bands reduced
    dest_strides: tuple[int, int]  # the destination's row and column strides, in elements
    dest_half: int  # 1: the destination's elements are 16-bit
    resident: int  # 1: the whole grid is resident at once, every threadblock reduces


@dataclass
class SplitLaunch:
    """A prepared split-K launch: the rung's packed parameters (partial sums into the
    workspace, reduced into the destination in the same launch) and the workspace, allocated
    on ``stream``."""

    main: bytes
    workspace: int
    stream: int
    owned: bool = False  # a workspace of this call alone (freed after it), not the plan's kept one


_STANDARD_ARGS = ("i", "i", "i", "f", "Q", "i", "Q", "i", "f", "Q", "i")  # M N K alpha A lda B ldb beta C ldc
_BATCH_ARGS = ("q", "q", "q")  # PG_BATCH: element strides of A, B, C from one matrix to the next
_TMA_BATCH_ARGS = ("i", "i", "i", "q")  # PG_BATCH (TMA rung): matrices, A batched?, B batched?, C's stride
_TMA_ARGS = ("128s", "128s", "i", "i", "i", "f", "f", "Q", "i")  # tmapA tmapB M N K alpha beta C ldc
_TMA_STORE_ARGS = ("128s", "128s", "128s", "i", "i", "i", "f", "f", "Q", "i")  # ... tmapC after B's (HG2_EPILOGUE=3)
_NO_MAP = bytes(128)  # tmapC of a build that never stores through it (a 32-bit C)
#: PG_SPLIT (common.cuh): tile counters, D, D's row and column strides, alpha, beta, D 16-bit?,
#: every threadblock resident at once?
_SPLIT_ARGS = ("Q", "Q", "q", "q", "f", "f", "i", "i")
#: PG_STREAMK (common.cuh): the blocks' partial-tile slots, their flags
_STREAMK_ARGS = ("Q", "Q")
_TMA_MAPS_KEPT = 8  # tensor maps kept per launch, keyed on (A, B) pointers (benchmarks rotate inputs)


@dataclass
class PreparedLaunch:
    """One planned GEMM launch; ``queue(a, b, c, alpha, beta, stream)`` runs it on pointers.

    ``a``, ``b``, ``c`` are the device pointers of the *user's* operands (M×K, K×N and the
    M×N destination, already holding ``c``'s values when ``beta != 0``); the operand swap is
    applied here, as planned.
    """

    rt: CudaRuntime
    spec: KernelSpec | None  # None: the cuBLAS comparator
    lp: LaunchPlan
    _kernel: Kernel | None = field(default=None, repr=False)
    _pack: Any = field(default=None, repr=False)
    _split: SplitGeometry | None = field(default=None, repr=False)  # split-K, worked out once
    #: split-K workspaces kept per default stream (reused call after call: the stream orders
    #: each use after the previous call's reduction); freed when the plan is dropped
    _workspaces: dict[int, int] = field(default_factory=dict, repr=False)
    _split_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _maps: dict[tuple[int, int], tuple[bytes, bytes]] = field(default_factory=dict, repr=False)
    _c_maps: dict[int, bytes] = field(default_factory=dict, repr=False)  # TMA-store rows: C's map per C pointer
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _go: Any = field(default=None, repr=False)  # the kernel's launcher with the plan's geometry
    #: built, and one launch of the kernel on the caller's pointers (no split workspace, no
    #: packing into scratch): :meth:`prepare` only packs the parameters
    _plain: bool = field(default=False, repr=False)
    _tma_store: bool = field(default=False, repr=False)  # spec.tma_store (a property that reads the defines), read once
    #: :meth:`Kernel.kept_launcher` of a built launch on the call's pointers (:meth:`queue`); None: not built, or packs
    _kept: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._tma_store = self.spec is not None and self.spec.tma_store

    @property
    def variant(self) -> str:
        """The rung that runs (after any routing the planner did)."""
        return self.lp.variant

    def kernel(self) -> Kernel:
        """The built and loaded kernel (compiled on first use, then kept)."""
        k = self._kernel
        if k is None:
            assert self.spec is not None
            k = self.rt.function(self.spec.source, self.spec.entry, self.lp.macros() if self.spec.predicated else None)
            tma_args = _TMA_STORE_ARGS if self.spec.tma_store else _TMA_ARGS
            args = tma_args + (_TMA_BATCH_ARGS if self.lp.batch_count else ()) if self.lp.tma \
                else _STANDARD_ARGS + (_BATCH_ARGS if self.lp.batch_count else ())
            if (self.lp.batch_count or self.spec.persistent) and self.lp.cluster != (1, 1):
                self._fit_clusters(k)
            streamk = self.spec.streamk and not self.lp.splits
            args += _SPLIT_ARGS if self.lp.splits else _STREAMK_ARGS if streamk else ()
            if self.lp.dtype == "float64":  # the float64 rungs take double alpha and beta (their split's too)
                args = tuple("d" if code == "f" else code for code in args)
            layout = k.struct_for(args)
            self._pack = layout.pack
            if self.lp.splits:
                self._split = self._split_geometry(k)
            elif streamk:
                self._split = self._streamk_geometry()
            # threadblocks that wait on one another (the resident grid's split reduction,
            # stream-K's shared tiles) launch cooperatively: all resident at once, or an error
            coresident = self._split is not None and bool(self._split.resident)
            self._go = k.launcher(self.lp.grid, self.lp.block, self.lp.smem_bytes, cooperative=coresident)
            self._plain = self._split is None and not self.lp.packs and self.lp.unpack is None
            if not self.lp.packs and self.lp.unpack is None:  # one launch on the call's pointers (and a kept workspace)
                self._kept = k.kept_launcher(layout, self.lp.grid, self.lp.block, self.lp.smem_bytes, cooperative=coresident)
            self._kernel = k
        return k

    def _fit_clusters(self, k: Kernel) -> None:
        """A cluster row's batch (or K-slices), or a persistent cluster row's units, runs on as many
        clusters as the device holds at once, each walking units: the in-launch split reduction
        waits on other threadblocks' slices, so every one of them must be resident, and a
        persistent grid is meant to be (the planner's first guess, one cluster per ``cluster``
        SMs, can be more than the GPCs hold)."""
        lp = self.lp
        size = lp.cluster[0] * lp.cluster[1]
        pushed = self.rt.enter()  # the occupancy query needs the device's context current
        try:
            held = k.resident_clusters(size, lp.block[0] * lp.block[1] * lp.block[2], lp.smem_bytes)
        finally:
            if pushed:
                self.rt.leave()
        if held < 1:
            raise DeviceError(f"{self.lp.variant}: the device holds no {lp.cluster[0]}x{lp.cluster[1]} cluster of this kernel")
        if lp.grid[0] > held * size:
            lp.grid = (held * size, 1, 1)
            lp.notes.append(f"{held} clusters of {size} CTAs, as many as the device holds at once")

    def _tensor_maps(self, a: int, b: int, c: int, beta: float) -> tuple[bytes, ...]:
        """A's and B's tensor maps (kept per (A, B) pointers), and C's for a TMA-store row (kept
        per C pointer: a call with a new result encodes only C's). The kernel stores through C's
        map only for a 16-bit C with beta == 0; otherwise it gets 128 zero bytes."""
        maps = self._maps.get((a, b))
        if maps is None:
            from .tma import HgemmV2Config, hgemm_v2_tensor_maps  # (imported when first encoding)

            assert self.spec is not None
            lp = self.lp
            sa, sb, _ = lp.batch_strides
            batch = (lp.batch_count, sa, sb) if lp.batch_count else None
            bm, bn, _ = self.spec.tile  # the boxes follow the rung's threadblock tile
            cm, cn = lp.cluster  # the plan's cluster: the boxes are each CTA's share of a multicast tile
            cfg = HgemmV2Config(bn=bn, consumers=bm // 64, cluster_m=cm, cluster_n=cn)
            ta, tb = hgemm_v2_tensor_maps(a, b, lp.m, lp.n, lp.k, lp.a.ld, lp.b.ld, lp.trans_a, lp.trans_b, cfg, batch=batch,
                                          dtype=lp.dtype or "float16")
            maps = (ta.tobytes(), tb.tobytes())
            with self._lock:
                if len(self._maps) >= _TMA_MAPS_KEPT:
                    self._maps.clear()
                self._maps[(a, b)] = maps
        if not self._tma_store:
            return maps
        lp = self.lp
        if beta != 0.0 or lp.c.itemsize != 2 or lp.batch_count:  # the lanes store C (the staged epilogue)
            return maps + (_NO_MAP,)
        cmap = self._c_maps.get(c)
        if cmap is None:  # the kernel's 16 x 64 store boxes of C
            from .tma import hgemm_v2_c_map

            cmap = hgemm_v2_c_map(c, lp.m, lp.n, lp.c.ld, dtype=lp.dtype or "float16").tobytes()
            with self._lock:
                if len(self._c_maps) >= _TMA_MAPS_KEPT:
                    self._c_maps.clear()
                self._c_maps[c] = cmap
        return maps + (cmap,)

    def queue(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> None:
        """Queue the product on ``stream`` without waiting for it. A built plain launch goes through its kept
        parameters: a call with the pointers and scalars of its thread's last one packs nothing. (A signed zero
        alpha or beta, equal to 0.0 yet packed as other bits, is packed every time.)"""
        kept = self._kept
        if kept is not None and (alpha or copysign(1.0, alpha) > 0.0) and (beta or copysign(1.0, beta) > 0.0):
            if self._split is None:
                kept((a, b, c, alpha, beta), stream, self._main_args)
                return
            ws = self._workspaces.get(stream)  # a split's workspace kept for this stream (none yet: prepare keeps one)
            if ws is not None:
                kept((a, b, c, alpha, beta, ws), stream, self._split_args)
                return
        self.launch(self.prepare(a, b, c, alpha, beta, stream), stream)

    def _main_args(self, key: tuple[Any, ...]) -> tuple[Any, ...]:  # key: the user's a, b, c, alpha, beta
        return self._main_tuple(*((key[1], key[0]) if self.lp.swap else key[:2]), *key[2:])

    def _split_args(self, key: tuple[Any, ...]) -> tuple[Any, ...]:  # key: the user's a, b, c, alpha, beta, workspace
        return self._split_tuple(*((key[1], key[0]) if self.lp.swap else key[:2]), *key[2:])

    def _split_tuple(self, ka: int, kb: int, c: int, alpha: float, beta: float, ws: int) -> tuple[Any, ...]:
        g = self._split
        assert g is not None
        if self.lp.splits:  # partial sums with alpha 1, beta 0; the reduction applies the call's alpha and beta
            return self._main_tuple(ka, kb, ws, 1.0, 0.0, (ws + g.counters_at, c, *g.dest_strides, alpha, beta, g.dest_half, g.resident))
        return self._main_tuple(ka, kb, c, alpha, beta, (ws, ws + g.counters_at))  # stream-K: C as given, slots and flags after

    def prepare(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> Any:
        """Everything of one launch that can fail before the device is touched: the kernel
        built and loaded, tensor maps encoded, parameters packed, a split-K workspace
        allocated (on ``stream``). :meth:`launch` queues it on the same stream; a prepared
        launch that will not be launched goes to :meth:`discard`."""
        lp = self.lp
        ka, kb = (b, a) if lp.swap else (a, b)
        if self._plain:  # the call after call case: built, nothing but the parameters to pack
            return self._pack_main(ka, kb, c, alpha, beta)
        if self.spec is None or lp.packs or lp.unpack is not None:
            if self.spec is not None:
                self.kernel()
            return (ka, kb, c, alpha, beta)
        self.kernel()
        if self._split is not None:  # split-K, or stream-K: a workspace with zeroed counters
            return self._prepare_split(ka, kb, c, alpha, beta, stream)
        return self._pack_main(ka, kb, c, alpha, beta)

    def _streamk_geometry(self) -> SplitGeometry:
        """This plan's stream-K workspace (PG_STREAMK in common.cuh): one partial-tile slot of
        fp32 per block of the grid, then one flag per block."""
        assert self.spec is not None
        bm, bn, _ = self.spec.tile
        blocks = self.lp.grid[0] * self.lp.grid[1] * self.lp.grid[2]
        flags_at = blocks * bm * bn * 4
        return SplitGeometry(flags_at + 4 * blocks, flags_at, blocks, (0, 0), 0, 1)

    def _split_geometry(self, k: Kernel) -> SplitGeometry:
        """This plan's split workspace, and whether the whole grid is resident at once (the
        TMA rung's persistent grid, one threadblock per SM, always is)."""
        lp = self.lp
        assert lp.dest is not None and self.spec is not None
        bm, bn, _ = self.spec.tile
        tiles = max(-(-lp.m // bm) * -(-lp.n // bn), 1)  # the kernels count tiles of spec.tile (row-major)
        counters_at = lp.splits * workspace_matrix(lp.c) * lp.c.itemsize  # a multiple of 16: rows are padded to 16 bytes
        counters = 2 * tiles  # per tile: slices arrived, bands reduced (common.cuh, PG_SPLIT)
        blocks = lp.grid[0] * lp.grid[1] * lp.grid[2]
        resident = lp.tma
        if not resident:
            pushed = self.rt.enter()  # the occupancy query needs the device's context current
            try:
                resident = blocks <= k.resident_blocks(lp.block[0] * lp.block[1] * lp.block[2], lp.smem_bytes) * self.rt.sms
            finally:
                if pushed:
                    self.rt.leave()
        return SplitGeometry(counters_at + 4 * counters, counters_at, counters, strides(lp.dest), int(lp.dest.itemsize == 2), int(resident))

    def _new_workspace(self, stream: int) -> int:
        """A split workspace on ``stream`` with its tile counters zeroed (the kernel leaves
        them zero again, so a kept workspace is zeroed once)."""
        g = self._split
        assert g is not None
        ws = self.rt.scratch(g.nbytes, stream)
        try:
            self.rt.cu.memset_d32_async(ws + g.counters_at, 0, g.counters, stream)
        except BaseException:
            self.rt.release(ws, stream)
            raise
        return ws

    def _prepare_split(self, ka: int, kb: int, c: int, alpha: float, beta: float, stream: int) -> SplitLaunch:
        g = self._split
        assert g is not None
        ws, owned = stream_scratch(self, self._workspaces, self._split_lock, self.rt, stream,
                                   lambda: self._new_workspace(stream), g.nbytes)
        try:
            main = self._pack(*self._split_tuple(ka, kb, c, alpha, beta, ws))
        except BaseException:
            if owned:
                self.rt.release(ws, stream)
            raise
        return SplitLaunch(main, ws, stream, owned)

    def discard(self, prepared: Any) -> None:
        """Give back what :meth:`prepare` took (a split-K workspace of its own) without launching."""
        if isinstance(prepared, SplitLaunch) and prepared.owned:
            self.rt.release(prepared.workspace, prepared.stream)

    def _pack_main(self, ka: int, kb: int, c: int, alpha: float, beta: float, split: tuple[Any, ...] = ()) -> bytes:
        return self._pack(*self._main_tuple(ka, kb, c, alpha, beta, split))  # type: ignore[no-any-return]

    def _main_tuple(self, ka: int, kb: int, c: int, alpha: float, beta: float, split: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        """The rung's parameters in order (A and B as the kernel reads them), the split's after."""
        lp = self.lp
        if lp.tma:
            maps = self._tensor_maps(ka, kb, c, beta)
            if lp.batch_count:  # the maps carry A's and B's strides: 1/0 says batched or shared
                sa, sb, sc = lp.batch_strides
                return (*maps, lp.m, lp.n, lp.k, alpha, beta, c, lp.c.ld, lp.batch_count, int(sa != 0), int(sb != 0), sc, *split)
            return (*maps, lp.m, lp.n, lp.k, alpha, beta, c, lp.c.ld, *split)
        if lp.batch_count:
            return (lp.m, lp.n, lp.k, alpha, ka, lp.a.ld, kb, lp.b.ld, beta, c, lp.c.ld, *lp.batch_strides, *split)
        return (lp.m, lp.n, lp.k, alpha, ka, lp.a.ld, kb, lp.b.ld, beta, c, lp.c.ld)

    def launch(self, prepared: Any, stream: int = 0) -> None:
        """Queue what :meth:`prepare` returned on ``stream``."""
        if type(prepared) is bytes:
            self._go(prepared, stream)
        elif type(prepared) is SplitLaunch:
            self._launch_split(prepared, stream)
        else:  # the operands as prepare() left them: cuBLAS, or a teaching rung's padded run
            ka, kb, c, alpha, beta = prepared
            if self.spec is None:
                self._cublas(ka, kb, c, alpha, beta, stream)
            else:
                self._queue_padded(ka, kb, c, alpha, beta, stream)

    def _launch_split(self, prepared: SplitLaunch, stream: int) -> None:
        assert self._go is not None and stream == prepared.stream
        try:
            self._go(prepared.main, stream)
        except BaseException:
            if prepared.owned:
                quiet_release(self.rt, prepared.workspace, stream)
            raise
        if prepared.owned:
            self.rt.release(prepared.workspace, stream)  # stream-ordered: after the launch

    def _cublas(self, ka: int, kb: int, c: int, alpha: float, beta: float, stream: int) -> None:
        lp = self.lp
        blas = self.rt.cublas()
        if lp.a.itemsize == 8:
            blas.dgemm(lp.trans_a, lp.trans_b, lp.m, lp.n, lp.k, alpha, ka, lp.a.ld, kb, lp.b.ld, beta, c, lp.c.ld, stream=stream)
        elif lp.a.itemsize == 2:
            blas.hgemm(lp.trans_a, lp.trans_b, lp.m, lp.n, lp.k, alpha, ka, lp.a.ld, kb, lp.b.ld, beta, c, lp.c.ld,
                       c_f32=lp.c.itemsize == 4, stream=stream, bf16=lp.dtype == "bfloat16")
        else:
            blas.sgemm(lp.trans_a, lp.trans_b, lp.m, lp.n, lp.k, alpha, ka, lp.a.ld, kb, lp.b.ld, beta, c, lp.c.ld, stream=stream)

    def _queue_padded(self, ka: int, kb: int, c: int, alpha: float, beta: float, stream: int) -> None:
        """Teaching rungs: pack into zero-padded scratch, launch, unpack (scratch freed after a
        stream synchronize; these rungs are never auto-selected)."""
        lp, rt = self.lp, self.rt
        ptr = {"a": ka, "b": kb, "c": c}
        k = self.kernel()
        assert self._pack is not None
        with rt.active():
            bufs = []
            try:
                scratch: dict[str, Mat] = {}
                for pack in lp.packs:  # teaching rungs are float32: one 32-bit word per element
                    buf = rt.drv.mem_alloc(max(pack.scratch_elems, 1) * 4)
                    bufs.append(buf)
                    dst = pack.dst.at(int(buf))
                    scratch[pack.slot] = dst
                    rt.drv.memset_d32(dst.ptr, 0, pack.scratch_elems)
                    if pack.slot != "c" or beta != 0.0:
                        rt.copy_scale(pack.src.rows, pack.src.cols, 1.0, pack.src.at(ptr[pack.slot]), dst, stream)
                a, b, cc = (scratch[s].ptr if s in scratch else ptr[s] for s in ("a", "b", "c"))
                buf_args = self._pack(lp.m, lp.n, lp.k, alpha, a, lp.a.ld, b, lp.b.ld, beta, cc, lp.c.ld)
                k.launch(buf_args, lp.grid, lp.block, lp.smem_bytes, stream)
                if lp.unpack is not None:
                    rt.copy_scale(lp.unpack.dst.rows, lp.unpack.dst.cols, 1.0, lp.unpack.src.at(cc), lp.unpack.dst.at(c), stream)
                if stream in (0, 1):
                    rt.ctx.synchronize()
                else:
                    rt.cu.synchronize_stream(stream)
            finally:
                for buf in bufs:
                    buf.free()


class ComposedLaunch:
    """A launch made of :class:`PreparedLaunch` pieces with one's interface: the plan it
    reports (``lp``, ``spec``, ``variant``) is its first piece's; subclasses say how the pieces
    are prepared, launched and discarded."""

    def pieces(self) -> list[PreparedLaunch]:
        raise NotImplementedError

    @property
    def lp(self) -> LaunchPlan:
        return self.pieces()[0].lp

    @property
    def spec(self) -> KernelSpec | None:
        return self.pieces()[0].spec

    @property
    def variant(self) -> str:
        return self.pieces()[0].variant

    def kernel(self) -> Kernel:
        """Every piece built and loaded; the first one's kernel."""
        for piece in self.pieces():
            piece.kernel()
        return self.pieces()[0].kernel()

    def queue(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> None:
        self.launch(self.prepare(a, b, c, alpha, beta, stream), stream)

    def prepare(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> Any:
        raise NotImplementedError

    def launch(self, prepared: Any, stream: int = 0) -> None:
        raise NotImplementedError


@dataclass
class PanelLaunch(ComposedLaunch):
    """A product whose operands span past the kernels' 32-bit offsets, run as panels of the
    result (rows of A and C, columns of B and C), each a :class:`PreparedLaunch` at byte
    offsets from the user's pointers."""

    parts: list[tuple[PreparedLaunch, tuple[int, int, int]]]

    def pieces(self) -> list[PreparedLaunch]:
        return [launch for launch, _ in self.parts]

    def prepare(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> list[tuple[PreparedLaunch, Any]]:
        """Every panel prepared (so nothing is queued unless all can be)."""
        done: list[tuple[PreparedLaunch, Any]] = []
        try:
            for launch, (oa, ob, oc) in self.parts:
                done.append((launch, launch.prepare(a + oa, b + ob, c + oc, alpha, beta, stream)))
        except BaseException:
            self.discard(done)
            raise
        return done

    def launch(self, prepared: list[tuple[PreparedLaunch, Any]], stream: int = 0) -> None:
        for i, (launch, one) in enumerate(prepared):
            try:
                launch.launch(one, stream)
            except BaseException:
                self.discard(prepared[i + 1:])
                raise

    def discard(self, prepared: Any) -> None:
        for launch, one in prepared:
            launch.discard(one)


def _pitched(m: Mat) -> tuple[int, int, int]:
    """(elements per contiguous line, lines, pitch in elements) of a matrix as a pitched 2-D block."""
    line, lines = (m.cols, m.rows) if m.layout == "row" else (m.rows, m.cols)
    return line, lines, m.ld


@dataclass
class PaddedLaunch(ComposedLaunch):
    """A TMA rung on operands whose pointers or leading dimensions are not 16-byte aligned:
    each such operand is copied into aligned scratch (the repitch kernel), the rung runs
    there, and a result in scratch is copied out; everything on the call's stream. The scratch
    is one block for all the copies, kept per default stream up to :data:`~.scratch.KEPT_SCRATCH_BYTES`
    (:func:`stream_scratch`): its pointers stay the same call after call, so the rung's tensor
    maps are encoded once, and no call allocates. ``users`` are the caller's operands (a, b, c) as planned, ``pads`` the
    scratch versions (None: used in place)."""

    inner: PreparedLaunch
    users: tuple[Mat, Mat, Mat]
    pads: tuple[Mat | None, Mat | None, Mat | None]
    _scratch: CallScratch = field(default_factory=CallScratch, repr=False)
    _layout: tuple[list[int | None], int] = field(init=False, repr=False)
    _copies: tuple[tuple[int, bool, int, int, int, int, int], ...] = field(init=False, repr=False)
    _paired: bool = field(init=False, repr=False)
    _pair: tuple[Any, Any] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._layout = self._offsets()
        self._copies = copies = self._recipe()
        # A's and B's copies in one launch (CudaRuntime.pair_launcher, kept here once made) where both are plain copies
        # of one element size with something to copy
        self._paired = len(copies) >= 2 and copies[1][0] == 1 and not copies[0][1] and not copies[1][1] \
            and copies[0][6] == copies[1][6] and min(copies[0][4:6] + copies[1][4:6]) > 0
        self._pair = None

    def pieces(self) -> list[PreparedLaunch]:
        return [self.inner]

    def _recipe(self) -> tuple[tuple[int, bool, int, int, int, int, int], ...]:
        """The copies into scratch, worked out once (every call makes the same ones at other pointers): for each
        padded operand, ``(index, transposed, pad's ld, user's pitch, width, lines, itemsize)``."""
        copies = []
        for i, (user_mat, pad) in enumerate(zip(self.users, self.pads)):
            if pad is not None:
                width, lines, pitch = _pitched(user_mat)
                copies.append((i, pad.layout != user_mat.layout, pad.ld, pitch, width, lines, pad.itemsize))
        return tuple(copies)

    @property
    def copies_label(self) -> str:
        """What a candidate's label says of these copies (" on aligned copies", " on a transposed copy of A")."""
        moved = next((which for which, user, pad in zip("ab", self.users, self.pads) if pad is not None and pad.layout != user.layout), "")
        return copies_suffix(True, moved)

    def _offsets(self) -> tuple[list[int | None], int]:
        """Each pad's byte offset in the scratch block (256-byte aligned) and the block's size."""
        offsets: list[int | None] = []
        total = 0
        for pad in self.pads:
            if pad is None:
                offsets.append(None)
                continue
            offsets.append(total)
            total += block_bytes((pad.max_offset + 1) * pad.itemsize)
        return offsets, total

    def prepare(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> Any:
        rt = self.inner.rt
        held = self._scratch.take(rt, self._layout[1], stream)  # one block for the copies in, the rung and the copy out
        try:
            ptrs = self._pointers(held.base, a, b, c)
            inner = self.inner.prepare(ptrs[0], ptrs[1], ptrs[2], alpha, beta, stream)
        except BaseException:
            self._scratch.give_back(rt, held)
            raise
        return (inner, (a, b, c), ptrs, beta != 0.0, held)

    def queue(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> None:
        """Queue the copies, the rung and the copy out. Once the rung is built (its launcher kept), nothing of it can fail
        before the device is touched: its launch goes through the kept parameters, which on the kept scratch are the
        same call after call (a small product's call is paid for on the host)."""
        inner = self.inner
        if inner._kept is None:
            self.launch(self.prepare(a, b, c, alpha, beta, stream), stream)
            return
        rt = inner.rt
        held = self._scratch.take(rt, self._layout[1], stream)
        try:
            ptrs = self._pointers(held.base, a, b, c)
            self._copy_in(rt, (a, b, c), ptrs, beta != 0.0, stream)
            inner.queue(ptrs[0], ptrs[1], ptrs[2], alpha, beta, stream)
            self._copy_out(rt, c, ptrs[2], stream)
        except BaseException:
            self._scratch.give_back(rt, held, quiet=True)
            raise
        self._scratch.give_back(rt, held)

    def launch(self, prepared: Any, stream: int = 0) -> None:
        inner, users, ptrs, reads_c, held = prepared
        rt = self.inner.rt
        try:
            self._copy_in(rt, users, ptrs, reads_c, stream)
            self.inner.launch(inner, stream)
            self._copy_out(rt, users[2], ptrs[2], stream)
        except BaseException:
            self._scratch.give_back(rt, held, quiet=True)
            raise
        self._scratch.give_back(rt, held)

    def _pointers(self, base: int, a: int, b: int, c: int) -> tuple[int, int, int]:
        """Where the rung reads A and B and writes C: each padded operand's place in the scratch block at ``base``."""
        offsets = self._layout[0]
        return (a if offsets[0] is None else base + offsets[0], b if offsets[1] is None else base + offsets[1],
                c if offsets[2] is None else base + offsets[2])

    def _copy_in(self, rt: Any, users: tuple[int, int, int], ptrs: tuple[int, ...], reads_c: bool, stream: int) -> None:
        """Queue the copies of the padded operands into scratch (c's only when beta reads it); A's and B's in one
        launch where both are plain copies of one element size (the host pays per launch)."""
        copies = self._copies
        if self._paired:
            (_, _, ld0, pitch0, w0, l0, size), (_, _, ld1, pitch1, w1, l1, _) = copies[0], copies[1]
            pair = self._pair
            if pair is None:
                pair = self._pair = rt.pair_launcher(w0, l0, w1, l1, size)
            go, pack = pair
            go(pack(users[0], pitch0, ptrs[0], ld0, w0, l0, users[1], pitch1, ptrs[1], ld1, w1, l1), stream)
            copies = copies[2:]
        for i, transposed, ld, pitch, width, lines, size in copies:
            if i == 2 and not reads_c:
                continue
            if transposed:  # an operand moved into the other layout (A or B, not C)
                rt.transpose(ptrs[i], ld, users[i], pitch, width, lines, size, stream)
            else:
                rt.repitch(ptrs[i], ld, users[i], pitch, width, lines, size, stream)

    def _copy_out(self, rt: Any, c: int, padded: int, stream: int) -> None:
        """Queue the copy of a result computed in scratch into the caller's C."""
        last = self._copies[-1] if self._copies else None
        if last is not None and last[0] == 2:
            _, _, ld, pitch, width, lines, size = last
            rt.repitch(c, pitch, padded, ld, width, lines, size, stream)

    def discard(self, prepared: Any) -> None:
        inner, _, _, _, held = prepared
        try:
            self.inner.discard(inner)
        finally:
            self._scratch.give_back(self.inner.rt, held)
