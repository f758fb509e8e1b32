"""The CUDA backend's variant table, read from the ladders' ``variants.json`` (data only).

No device and no pycuda are needed here: ``polygemm variants`` and the planning unit
tests read the same table the backend launches from.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from ...backend import Variant
from ...core.dtypes import HALF_DTYPES, as_dtype

__all__ = ["KernelSpec", "KERNEL_DIR", "kernel_specs", "variant_table", "measurement_build", "VENDOR_VARIANT"]

KERNEL_DIR = Path(__file__).with_name("kernels")
LADDERS = ("sgemm_cm", "sgemm_rm", "hgemm", "skinny", "dgemm")
VENDOR_VARIANT = "cublas"


@dataclass(frozen=True)
class KernelSpec:
    """One ladder rung: its source, entry point, layout, tile shapes and requirements."""

    name: str
    ladder: str
    source: Path
    entry: str
    dtype: str
    layout: str  # "col" or "row": the layout of A, B and C the rung computes in
    tile: tuple[int, int, int]  # threadblock tile BM, BN, BK
    block: tuple[int, int]
    grid: tuple[str, str]  # which problem dimension ("m"/"n") each grid axis tiles
    predicated: bool
    multiple: tuple[int, int, int]
    align: int  # floats: pointers and leading dimensions must be multiples (padded rungs)
    description: str
    seed: str
    warp_tile: tuple[int, ...] | None = None
    thread_tile: tuple[int, ...] | None = None
    instruction: tuple[int, ...] | None = None
    smem_bytes: int = 0  # dynamic shared memory per threadblock
    smem_bytes_unaligned: int = 0  # ... of the PG_VEC=0 build, where it differs
    min_sm: int = 0  # lowest compute capability (major*10+minor) the rung builds for
    arch: str = ""  # an architecture-specific target such as "sm_90a" (built for exactly that target)
    abi: str = "standard"  # "standard" (the contract's signature) or "tma" (tensor maps first)
    row_split: bool = False  # has the PG_ROW_SPLIT=1 unaligned build (row sets of one phase)
    batch: bool = False  # has the PG_BATCH=1 build (a strided batch on blockIdx.z)
    #: a batched rung whose split build (PG_SPLIT) takes the whole K and cuts it into slices of
    #: whole steps of this many (split_k.cuh's pg_split_slice_k; K need not divide evenly); 0: the
    #: launch passes each slice's K, and K must be a multiple of the slice count
    split_step: int = 0
    #: macros every build of this row is compiled with (one source, several rungs: a tile
    #: shape or a C layout chosen at compile time), e.g. {"PG_BN": 192}
    defines: tuple[tuple[str, int], ...] = ()
    #: the largest kernel M (after the operand swap) the rung is meant for (0: any); a rung
    #: for skinny products is offered to ``auto`` only below it
    max_m: int = 0
    #: the largest kernel N (after the operand swap) ``auto`` offers the rung for (0: any): a
    #: thin-tile row whose tile is meant for the thin side of a product, not its long side
    max_n: int = 0
    #: a TMA rung run on a persistent grid (one threadblock per SM walking the tiles; the
    #: producer loads a threadblock's next tile while its consumers store the last one)
    persistent: bool = False
    #: a predicated rung whose threadblocks walk the grid's x tiles themselves (blockIdx.x,
    #: + gridDim.x, ...): launched on at most one threadblock per SM, the pipeline running on
    #: from one tile into the next
    walks_strips: bool = False
    #: the share of its aligned pace the rung's unaligned build (PG_VEC=0) keeps where that is
    #: far below what its measurements at aligned shapes say (1.0: no such gap known): auto
    #: divides an estimate anchored on an aligned measurement by it when the operands force that
    #: build (skinny_v1 stages B by 2-byte loads there)
    unaligned_pace: float = 1.0
    #: the share of its pace the rung keeps where A and B are stored in different layouts, (A row-major and B
    #: column-major, A column-major and B row-major), as measured beside the same product of matched layouts (1.0: no
    #: gap known): auto weighs it beside the same rung on a copy of the smaller operand in the other layout (dgemm_v3
    #: reads one operand of mixed layouts by 8-byte loads, A row-major with bank conflicts besides)
    mixed_pace: tuple[float, float] = (1.0, 1.0)
    #: a persistent TMA row whose last one or two waves share their k-tiles out evenly over the
    #: grid (PG_STREAMK=1: stream-K; partial tiles through a workspace, fixed up in block order)
    streamk: bool = False
    #: every input dtype the rung computes, ``dtype`` first (() means just ``dtype``): a 16-bit
    #: rung that lists "bfloat16" has PG_BF16=1 builds (one source, the element type a macro)
    dtypes: tuple[str, ...] = ()
    #: the batched build also takes K-slices reduced in the same launch (PG_SPLIT; float32 partial
    #: sums, float64 ones in a float64 source that defines PG_SPLIT_F64: the DMMA rungs have none)
    split_k: bool = True
    #: the whole device's rate (TFLOP/s) auto assumes for the rung until it has measurements of
    #: its own (0: a rung without measurements is not weighed): a new dtype's only rungs
    prior_tflops: float = 0.0

    def __post_init__(self) -> None:
        if not self.dtypes:
            object.__setattr__(self, "dtypes", (self.dtype,))

    @property
    def cluster_mn(self) -> tuple[int, int]:
        """A TMA row's thread-block cluster as (CTAs along M, CTAs along N): ``PG_CLUSTER_M``
        vertically adjacent threadblock tiles share their B tile, ``PG_CLUSTER_N``
        horizontally adjacent ones their A tile, each CTA loading a share of it for all."""
        d = dict(self.defines)
        return d.get("PG_CLUSTER_M", 1), d.get("PG_CLUSTER_N", 1)

    @property
    def tma_store(self) -> bool:
        """A TMA row built with ``HG2_EPILOGUE=3``: C leaves through a third tensor map (the
        kernel's ``tmap_c``, after A's and B's)."""
        return dict(self.defines).get("HG2_EPILOGUE") == 3

    @property
    def cluster(self) -> int:
        """CTAs per thread-block cluster (1: no cluster)."""
        cm, cn = self.cluster_mn
        return cm * cn

    def runs_on(self, sm: int) -> bool:
        """Whether the rung can run on a device of compute capability ``sm`` (e.g. 90)."""
        if self.arch.endswith("a"):  # arch-specific code runs on exactly that architecture
            return sm == int(self.arch[3:-1])
        return sm >= self.min_sm

    def split_slice(self, k: int, splits: int) -> int:
        """K of each of ``splits`` K-slices (the last may be shorter): a rung that cuts K itself
        (``split_step``) takes whole steps, ceil(ceil(K / splits) / step) of them, as its kernel
        works out (split_k.cuh, pg_split_slice_k); the others take K / splits."""
        if self.split_step:
            return -(-(-(-k // max(splits, 1))) // self.split_step) * self.split_step
        return k // max(splits, 1)

    def cuts_k(self, k: int, splits: int) -> bool:
        """Whether a rung that cuts K itself (``split_step``) leaves K for every one of ``splits`` slices."""
        return splits >= 2 and (splits - 1) * self.split_slice(k, splits) < k

    def strip_blocks(self, gx: int, gy: int, z: int, sms: int) -> int:
        """Threadblocks along x of a grid of ``gx`` x ``gy`` tiles (``z`` matrices or K-slices): a rung that
        walks its strips runs at most one per SM, ``sms // (gy z)``, while that is 2 or more (each holds an
        SM's shared memory; past that a cap would idle SMs or walk every strip in one block); others one a tile."""
        per = sms // max(gy * z, 1)
        return min(gx, per) if self.walks_strips and per >= 2 else gx

    def smem_for(self, vec: bool) -> int:
        """Dynamic shared memory of the build with ``PG_VEC`` = ``vec``."""
        return self.smem_bytes if vec or not self.smem_bytes_unaligned else self.smem_bytes_unaligned

    def macro_names(self) -> tuple[str, ...]:
        """The macros the backend passes to a predicated build of this rung."""
        names = ("PG_TRANS_A", "PG_TRANS_B") + (() if self.abi == "tma" else ("PG_VEC",))
        return names + (("PG_OUT_F32",) if self.dtype in HALF_DTYPES else ())

    def builds(self) -> list[dict[str, int]]:
        """Every macro set the backend may compile this rung with ([{}] for a padded rung):
        each 0/1 combination of ``macro_names()``, plus the ``PG_ROW_SPLIT=1`` builds (only
        with ``PG_VEC=0`` and no transposes) of a rung that has them, plus the ``PG_BATCH=1``
        builds (every combination, never with a row split) of a rung that has those, and its
        split-K builds where it has ``split_k`` (``PG_BATCH=1, PG_SPLIT=1``, fp32 partial sums: ``PG_OUT_F32=1`` where the
        rung has that macro); a rung that computes bfloat16 has each of these again with
        ``PG_BF16=1``."""
        fixed = dict(self.defines)
        if not self.predicated:
            return [fixed]
        names = self.macro_names()
        base = [{**fixed, **dict(zip(names, values))} for values in itertools.product((0, 1), repeat=len(names))]
        if self.k_major_b:  # the planner never asks for an N-major B of this row (planning.plan_launch)
            base = [m for m in base if m["PG_TRANS_B"]]
        out = list(base)
        if self.row_split:
            out += [{**m, "PG_ROW_SPLIT": 1} for m in base if m["PG_VEC"] == 0 and not m["PG_TRANS_A"] and not m["PG_TRANS_B"]]
        if self.batch:
            out += [{**m, "PG_BATCH": 1} for m in base]
            if self.split_k:
                out += [{**m, "PG_BATCH": 1, "PG_SPLIT": 1} for m in base if m.get("PG_OUT_F32", 1)]
        if "bfloat16" in self.dtypes:
            out += [{**m, "PG_BF16": 1} for m in out]
        return out

    @property
    def operand_layout(self) -> str:
        """The layout of A and B the rung's untransposed build reads (``PG_TRANS_A/B = 0``):
        ``layout`` for the register-tiled rungs, row-major for the TMA rows, whose tensor maps
        and wgmma descriptors are written for row-major operands whatever layout C is stored in
        (``HG2_COL_C``)."""
        return "row" if self.abi == "tma" else self.layout

    @property
    def k_major_b(self) -> bool:
        """A TMA row whose B tile is narrower than 64 (one 128-byte swizzle row of 16-bit N): it
        reads B K-major only (``PG_TRANS_B=1``), since an N-major box is 64 wide."""
        return self.abi == "tma" and self.tile[1] < 64

    @property
    def itemsize(self) -> int:
        return int(as_dtype(self.dtype).itemsize)

    @property
    def partial_bytes(self) -> int:
        """Bytes of one of its split-K partial sums: float32, a float64 rung's in double (split_k.cuh, PG_SPLIT_F64)."""
        return 8 if self.itemsize == 8 else 4

    def tiles_text(self) -> str:
        bm, bn, bk = self.tile
        parts = [f"threadblock {bm}x{bn}x{bk}"]
        if self.warp_tile:
            parts.append("warp " + "x".join(map(str, self.warp_tile)))
        if self.thread_tile:
            parts.append("thread " + "x".join(map(str, self.thread_tile)))
        if self.instruction:
            parts.append("instruction " + "x".join(map(str, self.instruction)))
        return ", ".join(parts)

    def requirements_text(self) -> str:
        if self.predicated:
            vec = "16-byte vector paths need aligned pointers and leading dimensions (else a scalar build)" if self.align > 1 else "no alignment needs"
            sm = f"; {self.arch} only" if self.arch else (f"; sm_{self.min_sm} or newer" if self.min_sm else "")
            layouts = "any layout (transposes compiled in)"
            if self.abi == "tma":
                vec = ("TMA needs 16-byte aligned pointers and leading dimensions (others: it reads aligned copies of them, one "
                       "product at a time; a batch runs hgemm_v1)")
            if self.k_major_b:  # the kernel's B is Aᵀ after the operand swap (a result in the other layout)
                mine, other = ("row-major", "column-major") if self.layout == "row" else ("column-major", "row-major")
                layouts = f"its B tile read K-major only (a {mine} result needs a column-major B, a {other} one a row-major A)"
            return f"any M, N, K >= 1 (predicated edges); {layouts}; {vec}{sm}"
        m, n, k = self.multiple
        return (
            f"M, N, K multiples of {m}, {n}, {k}, {self.layout}-major operands, {self.align * self.itemsize}-byte alignment; "
            "otherwise operands are packed into zero-padded scratch buffers"
        )

    def variant(self) -> Variant:
        return Variant(
            name=self.name,
            dtypes=self.dtypes,
            description=self.description,
            layout=self.layout,
            tile=self.tiles_text(),
            requirements=self.requirements_text(),
            auto=self.predicated,
            out_dtypes=("float32",) if self.dtype in HALF_DTYPES else (),
            extra={"seed": self.seed, "source": str(self.source.relative_to(KERNEL_DIR))},
        )


def _spec(ladder: str, row: dict) -> KernelSpec:
    def tup(key: str, default=None):  # type: ignore[no-untyped-def]
        v = row.get(key, default)
        return tuple(int(x) for x in v) if v is not None else None

    return KernelSpec(
        name=row["name"],
        ladder=ladder,
        source=KERNEL_DIR / ladder / row["source"],
        entry=row["entry"],
        dtype=str((row.get("dtypes") or [row.get("dtype", "float32")])[0]),
        layout=row["layout"],
        tile=tup("tile"),  # type: ignore[arg-type]
        block=tuple(int(x) for x in (list(row["block"]) + [1, 1])[:2]),  # type: ignore[arg-type]
        grid=tuple(str(x).lower() for x in row["grid"]),  # type: ignore[arg-type]
        predicated=bool(row.get("predicated", False)),
        multiple=tup("multiple", [1, 1, 1]),  # type: ignore[arg-type]
        align=int(row.get("align", 1)),
        description=row.get("description", ""),
        seed=row.get("seed", ""),
        warp_tile=tup("warp_tile"),
        thread_tile=tup("thread_tile"),
        instruction=tup("instruction"),
        smem_bytes=int(row.get("smem_bytes", 0) or 0),
        smem_bytes_unaligned=int(row.get("smem_bytes_unaligned", 0) or 0),
        min_sm=int(row.get("min_sm", 0) or 0),
        arch=str(row.get("arch", "") or ""),
        abi=str(row.get("abi", "standard") or "standard"),
        row_split=bool(row.get("row_split", False)),
        batch=bool(row.get("batch", False)),
        split_step=int(row.get("split_step", 0) or 0),
        defines=tuple(sorted((str(k), int(v)) for k, v in (row.get("defines") or {}).items())),
        max_m=int(row.get("max_m", 0) or 0),
        max_n=int(row.get("max_n", 0) or 0),
        persistent=bool(row.get("persistent", False)),
        walks_strips=bool(row.get("walks_strips", False)),
        unaligned_pace=float(row.get("unaligned_pace", 1.0)),
        mixed_pace=(float((row.get("mixed_pace") or {}).get("nt", 1.0)), float((row.get("mixed_pace") or {}).get("tn", 1.0))),
        streamk=bool(row.get("streamk", False)),
        dtypes=tuple(str(d) for d in (row.get("dtypes") or [row.get("dtype", "float32")])),
        split_k=bool(row.get("split_k", True)),
        prior_tflops=float(row.get("prior_tflops", 0.0) or 0.0),
    )


@functools.lru_cache(maxsize=None)
def kernel_specs() -> dict[str, KernelSpec]:
    """Every ladder rung by variant name, in ladder order."""
    specs: dict[str, KernelSpec] = {}
    for ladder in LADDERS:
        path = KERNEL_DIR / ladder / "variants.json"
        if not path.exists():
            continue
        for row in json.loads(path.read_text())["variants"]:
            spec = _spec(ladder, row)
            specs[spec.name] = spec
    return specs


def measurement_build(row: str, suffix: str, defines: dict[str, int], by: str) -> str:
    """Register ``<row><suffix>``: rung ``row`` built with ``defines`` added (a measurement build,
    e.g. HG2_TRACE=1), in this process's variant table only (nothing is written to variants.json);
    ``by`` names the script that asks for it. Returns the new name, which gemm and bench accept."""
    specs = kernel_specs()
    spec = specs[row]
    said = " ".join(f"{k}={v}" for k, v in defines.items())
    built = dataclasses.replace(spec, name=row + suffix, defines=spec.defines + tuple(defines.items()),
                                description=f"{row} with {said} ({by})")
    specs[built.name] = built
    variant_table.cache_clear()  # the table is built from kernel_specs(): built again with the new row
    return built.name


@functools.lru_cache(maxsize=None)
def variant_table() -> tuple[Variant, ...]:
    """The backend's variants: every rung, then the cuBLAS comparator (never auto); built once."""
    rows = [s.variant() for s in kernel_specs().values()]
    rows.append(
        Variant(
            VENDOR_VARIANT,
            ("float32", "float16", "bfloat16", "float64"),
            "cuBLAS on the same device buffers (SGEMM with TF32 off; GemmEx fp16 or bf16 in/out, fp32 compute; DGEMM): the vendor column",
            layout="col",
            tile="cuBLAS heuristics",
            requirements="none",
            auto=False,
            vendor=True,
            out_dtypes=("float32",),
        )
    )
    return tuple(rows)
