"""The cost model ``variant="auto"`` ranks the cuda rungs with, calibrated by measurement.

For each candidate — an auto-selectable rung, and for rungs with a batched build each way of
splitting K into equal slices — the model estimates the time of one launch on this device:

* **waves**: the rung's threadblock tiles (``units``: tiles × K-slices × matrices of a batch)
  run ``slots`` at a time (SMs × threadblocks that fit on one SM), so the time grows in steps
  of ``ceil(units / slots)``; a short last wave costs a whole one;
* **per wave**: the FLOPs of one tile over the SM's rate for this rung, plus a fixed cost per
  tile (prologue, pipeline fill, epilogue), both **fitted to the rung's own measurements** in
  ``tuning/auto_fp*.json`` by least squares on relative error;
* **bandwidth**: no faster than moving A, B and C (and a split's fp32 partial sums) through HBM;
  skinny rungs (``max_m``), which are bandwidth kernels, are modelled by bandwidth alone, at the
  effective rate fitted to their measurements;
* **split-K** adds the reduction, done in the same launch: by every threadblock where the
  whole grid is resident at once (bands of the output, read from L2 side by side), else by
  the last threadblock of each tile to finish (a tile's slices read by one SM).

The candidate with the smallest estimate runs; ``explain`` lists the runners-up with theirs.
The model replaces "the rung measured fastest at the nearest benchmarked shape", which knew
nothing of waves: 1000×3000×2000 in 128×256 tiles is 96 tiles, 0.73 of the H200's 132 SMs.
"""

from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .variants import KernelSpec

__all__ = ["Candidate", "copies_suffix", "RungModel", "fit_rung", "prior_model", "estimate_us", "split_choices", "rank", "anchors_for", "split_of", "shape_distance", "copy_us", "copy_bytes", "pitch_penalty_us",
           "HBM_BYTES_PER_US", "LAUNCH_US", "TMA_PITCH"]

#: the H200's HBM3e at the rate copy kernels reach (of its 4.8 TB/s peak), bytes per µs
HBM_BYTES_PER_US = 4.0e6
#: one kernel launch as the device sees it back to back (queueing, ramp-up, tail), µs
LAUNCH_US = 3.0
#: one cuLaunchKernel as the host pays it (measured on the H200 machine: ~10 µs), µs
HOST_LAUNCH_US = 10.0
#: shared memory one SM offers threadblocks (H100/H200: 228 KB), bytes
SMEM_PER_SM = 233472
#: fewest K per slice a split is worth (below it the prologue and reduction dominate)
MIN_SLICE_K = 64
#: fewest warp steps per slice of a skinny rung's split: 8 per warp of its 8, each keeping a
#: ring of 3-4 steps in flight (a shorter slice spends much of its time filling and draining
#: the rings, which the bandwidth model does not see)
SKINNY_MIN_SLICE_STEPS = 64
#: fewest K-tiles per slice of a tiled rung that cuts K itself (the DMMA rungs: a 4-6 stage
#: ring and a workspace tile per slice, which a shorter slice spends its time filling)
TILED_MIN_SLICE_STEPS = 16
#: the slice counts weighed (the measured ones among them, where a rung has measured splits)
SPLIT_COUNTS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256)
#: the host's share of a split the device timings leave out (the workspace's lookup and the
#: longer parameter list), paid by every call
SPLIT_HOST_US = 1.0
#: the host's share of a TMA-store row (``HG2_EPILOGUE=3``) the device timings leave out: C's
#: tensor map, encoded for each new result (H200, 1000x8192x512 fp16 with a new result every
#: call: 22.1 µs a call against 19.1 for the same ping-pong kernel storing C itself)
STORE_MAP_HOST_US = 3.0
#: a call whose device time is below this waits on its host path (a call that makes its result
#: costs the host about this much), so STORE_MAP_HOST_US lengthens it; longer calls hide it
#: (4096x4096x512 fp16 on the TMA-store row: 32.2 µs a call with a new result, 32.5 into an out).
#: SPLIT_HOST_US is not gated so: gated, the model moved fp32 1000x1000x512 and 8192x128x512 to
#: cm_v12:split_k=2, 10% slower than cm_v13 beside it (H100, h100_tune_hostgate_*_fp32.json)
HOST_BOUND_US = 2.0 * HOST_LAUNCH_US
#: what a split's cooperative launch adds to a short call, beyond SPLIT_HOST_US: the driver's co-residency check on the
#: host and a later start on the device (H100, 128x128x128 float32 through the call on CuPy arrays: 14.4 µs a call
#: back to back and 30 µs launched and waited for on cm_v13_cp_async_narrow_tile:split_k=2, against the same rung's
#: measured 11 µs unsplit and a float16 call's 10.9 and 18.4); a call longer than HOST_BOUND_US hides it
COOPERATIVE_US = 3.5
#: what one SM reads of the other slices' partial sums when it reduces a tile alone (L2 to
#: SM, measured: a 128 x 128 tile's 8 slices took 15-17 µs)
SM_REDUCE_BYTES_PER_US = 3.0e4
#: what the block that began a stream-K tile reads the other runs' partial tiles at (one SM,
#: from L2, whole 128-byte rows per warp), bytes per µs
SK_SLOT_BYTES_PER_US = 1.0e5
#: what a resident grid reduces at, all SMs reading the slices from L2 (plus one µs of waiting)
GRID_REDUCE_BYTES_PER_US = 4.0e6
#: how much less an estimate is trusted per unit of log-distance from the measurement it is
#: anchored on (a rung measured at this very shape beats one extrapolated from far away)
DISTANCE_PENALTY = 0.03
#: how many of a rung's nearest measurements anchor its estimate away from a measured shape, and how soon their
#: weights fall with distance (:func:`_blended_scale`)
ANCHORS_BLENDED = 5
ANCHOR_WEIGHT_EPS = 0.2
#: the most a vendor timed faster than its median beside a measurement speeds that measurement's run up by: clocks differ
#: by run this much at most; a vendor several times its median (fp32 64 x 128^3: 10.5 TFLOP/s beside one rung, 3.6 beside
#: the others) ran another path, which says nothing of the rung's. Uncapped, it moved auto at that measured shape to a
#: rung measured 2.5x slower; capped, the float32 table's picks at its own shapes run at 0.997 of the measured best, not
#: 0.972, and float16's at held-out shapes at 0.935, not 0.933 (``polygemm tune --holdout 0.2``, seeds 0-9)
VENDOR_PACE_CAP = 1.25
#: registers per thread assumed for occupancy (the register-tiled rungs sit near 128)
ASSUMED_REGISTERS = 128
#: what a TMA rung loses per byte it reads from rows that start off a 32-byte sector boundary
#: (a 128-byte box row then spans a sector more than it moves), counted over the operand's reads
#: from L2 (once per threadblock tile across it). Measured on the H200 (pitch_bench.py): B of
#: 4096x1000x16384 fp16 with 2000-byte rows cost 51 µs over 1.05 GB of reads (255 against 204
#: µs with its rows padded to 2048 bytes), and 10.7 µs over 0.26 GB at K = 4096
MISALIGNED_BYTES_PER_US = 2.0e7
#: the row pitch TMA reads at full speed, bytes: whole 32-byte sectors (planning.FULL_SPEED_PITCH)
TMA_PITCH = 32
#: the share of that loss a cluster row keeps: its CTAs load a shared tile in parts, multicast
#: to each other. Measured on the H100 (pitch_bench.py, compact rows beside rows padded to 128
#: bytes, h100_pitch_fp16.json): 4096x1000x4096 fp16 lost 20.1 µs on the one-CTA 128x256 row
#: and 2.3 µs on its 2-CTA cluster row; 4096x1000x16384 86 µs and none (within the rounds'
#: spread); 1000x3000x2000 9.2 µs on 128x192, 1.9 µs on its cluster row
CLUSTER_PITCH_SHARE = 0.15
#: the shortest result side (kernel M or N) ``auto`` offers a cluster row for. Sharing B pays
#: where a mid-size result is bound by L2 (1000x3000x2000, 1000x1000x4096 on the H100); on a
#: thin result a cluster's second CTA has few or no rows, and the rows' times there moved by
#: up to 1.6x between two runs (16x4096x4096: 17.7 and 27.7 µs)
CLUSTER_MIN_SIDE = 512


@dataclass(frozen=True)
class RungModel:
    """A rung's fitted constants: FLOPs per µs of one SM at full tiles, and fixed µs per tile."""

    flops_per_sm_us: float
    tile_us: float
    bytes_per_us: float = HBM_BYTES_PER_US
    measurements: int = 0
    source: str = ""  # the rung whose measurements these are (a row sharing its source may borrow them)


@dataclass(frozen=True)
class Candidate:
    """One way to run the product and its estimated time."""

    variant: str
    splits: int  # 0: K not split
    estimate_us: float
    waves: float  # units / slots (fractional: how full the last wave is)
    shape: tuple[int, int, int] = (0, 0, 0)  # the product estimated (m, n, k)
    count: int = 1  # matrices of a batch
    padded: bool = False  # unaligned operands copied into aligned scratch first (a TMA rung)
    unaligned: bool = False  # the estimate scaled by the rung's unaligned_pace (its PG_VEC=0 build)
    #: "a" or "b": that operand copied into the other layout first (padded is then True too: the rung reads scratch)
    transposed: str = ""

    @property
    def name(self) -> str:
        """The variant as a plan names it: the rung and its K-slices."""
        return self.variant + (f":split_k={self.splits}" if self.splits else "")

    @property
    def label(self) -> str:
        return self.name + copies_suffix(self.padded, self.transposed)


def copies_suffix(padded: bool, transposed: str = "") -> str:
    """What a candidate's label adds where the rung reads scratch copies of the operands."""
    if transposed:
        return f" on a transposed copy of {transposed.upper()}"
    return " on aligned copies" if padded else ""


def copy_us(nbytes: Sequence[int]) -> float:
    """Pitched copy launches moving these many bytes each (what a copy reads plus what it writes: a
    copy with a wider pitch writes more than it reads), one launch each, and a launch costs the
    host ``HOST_LAUNCH_US`` however small its copy (calls back to back wait on the host, not the
    device: 4096x17x4096 fp16 with B and C copied ran 48 µs a call where the device estimate
    said 23)."""
    return sum(max(HOST_LAUNCH_US, LAUNCH_US + b / HBM_BYTES_PER_US) for b in nbytes if b)


def copy_bytes(x: Any, pad: Any) -> int:
    """What copying matrix ``x`` into ``pad`` (or back) moves: its bytes read, the pad's written."""
    return (x.max_offset + 1) * x.itemsize + (pad.max_offset + 1) * pad.itemsize


def blocks_per_sm(spec: KernelSpec) -> int:
    """Threadblocks of ``spec`` one SM holds at once (shared memory and threads; the TMA rungs
    run one persistent threadblock per SM)."""
    if spec.abi == "tma":
        return 1
    threads = max(spec.block[0] * spec.block[1], 32)
    by_smem = SMEM_PER_SM // (spec.smem_bytes + 1024) if spec.smem_bytes else 32
    by_regs = 65536 // (threads * ASSUMED_REGISTERS)  # register tiles of the compute rungs: ~128 a thread
    return max(1, min(by_smem, by_regs, 2048 // threads, 32))


def kernel_mn(spec: KernelSpec, m: int, n: int, result_layout: str) -> tuple[int, int]:
    """The rung's own M and N: a rung computing in the other layout than the result swaps them."""
    return (m, n) if spec.layout == result_layout else (n, m)


def tiles(spec: KernelSpec, m: int, n: int, result_layout: str) -> int:
    """Threadblocks of one m×n result in ``spec``'s own orientation: its threadblock tiles (a
    cluster row launches whole clusters, so its tile rows count rounded up to the cluster)."""
    km, kn = kernel_mn(spec, m, n, result_layout)
    bm, bn, _ = spec.tile
    cm, cn = spec.cluster_mn
    return math.ceil(math.ceil(km / bm) / cm) * cm * math.ceil(math.ceil(kn / bn) / cn) * cn


def streamk_runs(spec: KernelSpec, m: int, n: int, k: int, count: int, sms: int, result_layout: str) -> tuple[int, int, int, int]:
    """A stream-K row's schedule (PG_STREAMK in common.cuh): (tiles, k-tiles per tile, tiles
    run whole, k-tiles of each SM's run of the rest). Whole tiles for all but the last one or
    two waves; those waves' k-tiles are cut into one equal run per SM."""
    t = tiles(spec, m, n, result_layout) * max(count, 1)
    kt = max(math.ceil(k / spec.tile[2]), 1)
    dp = t if t % sms == 0 else max(t // sms - 1, 0) * sms
    return t, kt, dp, math.ceil((t - dp) * kt / sms)


def _shape_terms(spec: KernelSpec, m: int, n: int, k: int, count: int, splits: int, sms: int,
                 result_layout: str) -> tuple[float, float, float]:
    """(FLOPs the busiest SM computes, its rounds of resident threadblocks, fractional waves).

    The busiest SM runs ``ceil(units / sms)`` threadblocks, ``blocks_per_sm`` at a time: their
    FLOPs share the SM's rate, and each round pays the fixed per-tile cost once. (A rung that
    holds four threadblocks per SM does not run four tiles in the time of one: 32 tiles of
    128 x 64 on 132 SMs take a quarter of the time 512 tiles do, not the same.)"""
    bm, bn, bk = spec.tile
    if spec.streamk:  # whole tiles for all but the last one or two waves, whose k-tiles are shared out
        t, kt, dp, run = streamk_runs(spec, m, n, k, count, sms, result_layout)
        pieces = math.ceil(run / kt) + 1 if run else 0  # a run touches at most this many tiles
        return 2.0 * bm * bn * bk * ((dp // sms) * kt + run), float(dp // sms + pieces), t / sms
    ks = spec.split_slice(k, splits)
    units = tiles(spec, m, n, result_layout) * max(splits, 1) * max(count, 1)
    bps = blocks_per_sm(spec)
    per_sm = math.ceil(units / sms)
    return 2.0 * bm * bn * ks * per_sm, float(math.ceil(per_sm / bps)), units / (sms * bps)


def _bytes(m: int, n: int, k: int, count: int, splits: int, itemsize: int, out_itemsize: int, partial: int) -> float:
    moved = (m * k + k * n) * itemsize + m * n * out_itemsize
    if splits:
        moved += splits * m * n * partial  # the partial sums the rung writes
    return float(moved * max(count, 1))


def skinny_share(spec: KernelSpec, m: int, n: int, *, splits: int = 0, count: int = 1, sms: int = 132,
                 result_layout: str = "row") -> float:
    """The share of the GPU's bandwidth a skinny rung's grid draws: its strips (x K-slices x
    matrices) over the SMs, the busiest SM's strips setting the time (one SM streams at about
    its share of HBM whatever else it holds). The grid is the planner's: a rung that walks its
    strips runs at most SMs // (row tiles x slices) threadblocks along x (planning.plan_launch).
    512 x 2 x 500000 unsplit is 16 strips: 0.12 of an H100; in 8 K-slices, 0.97."""
    km, kn = kernel_mn(spec, m, n, result_layout)
    gx, gy = math.ceil(kn / spec.tile[1]), math.ceil(km / spec.tile[0])
    z = max(splits, 1) * max(count, 1)
    if not gx * gy:  # an empty result: no strips, nothing drawn (its plan launches nothing)
        return 1.0
    x = spec.strip_blocks(gx, gy, z, sms)
    blocks = x * gy * z
    busiest = math.ceil(blocks / sms) * math.ceil(gx / x)  # strips the busiest SM streams
    return min(1.0, gx * gy * z / (sms * busiest))


def skinny_bytes(spec: KernelSpec, m: int, n: int, k: int, result_layout: str, out_itemsize: int) -> float:
    """What a skinny rung moves: its small operand and C once, its large operand (the kernel's B)
    once per threadblock row of ``tile[0]`` kernel rows (a kernel M past the tile reads it again)."""
    km, kn = kernel_mn(spec, m, n, result_layout)
    return float((km * k + k * kn * math.ceil(km / spec.tile[0])) * spec.itemsize + km * kn * out_itemsize)


def estimate_us(spec: KernelSpec, model: RungModel, m: int, n: int, k: int, *, count: int = 1, splits: int = 0,
                sms: int = 132, result_layout: str = "row", out_itemsize: int | None = None) -> Candidate:
    """The model's time for ``spec`` on an m×n×k product (``count`` matrices, K in ``splits`` slices)."""
    osize = spec.itemsize if out_itemsize is None else out_itemsize
    moved = _bytes(m, n, k, count, splits, spec.itemsize, osize, spec.partial_bytes)
    flops_sm, rounds, frac = _shape_terms(spec, m, n, k, count, splits, sms, result_layout)
    if spec.max_m:  # a bandwidth kernel, at the share of the GPU its grid draws
        share = skinny_share(spec, m, n, splits=splits, count=count, sms=sms, result_layout=result_layout)
        t = LAUNCH_US + skinny_bytes(spec, m, n, k, result_layout, osize) / (model.bytes_per_us * share)
    else:
        compute = flops_sm / model.flops_per_sm_us + rounds * model.tile_us
        t = LAUNCH_US + max(compute, moved / HBM_BYTES_PER_US)
    if spec.streamk:  # the block that began a shared tile reads the other runs' partial tiles
        _, kt, _, run = streamk_runs(spec, m, n, k, count, sms, result_layout)
        if run and run % kt:  # runs that do not fall on tile boundaries: tiles are shared
            t += math.ceil(kt / run) * spec.tile[0] * spec.tile[1] * 4 / SK_SLOT_BYTES_PER_US
    if splits:
        partial = spec.partial_bytes
        data = (splits * partial + osize) * m * n
        # the grid is resident: every block reduces bands (a skinny rung always leaves each
        # tile to its last slice: split_k.cuh's pg_split_fixup)
        if spec.abi == "tma" or (frac <= 1.0 and not spec.max_m):
            t += 1.0 + data / GRID_REDUCE_BYTES_PER_US
        else:  # each tile's last block reads the tile's slices; the tiles' blocks side by side
            km, kn = kernel_mn(spec, m, n, result_layout)
            bm, bn, _ = spec.tile
            per_tile = (splits * partial + osize) * min(bm, km) * min(bn, kn) / SM_REDUCE_BYTES_PER_US
            t += max(math.ceil(tiles(spec, m, n, result_layout) / sms) * per_tile, data / HBM_BYTES_PER_US)
    return Candidate(spec.name, splits, t, frac, (m, n, k), max(count, 1))


def pitch_penalty_us(spec: KernelSpec, m: int, n: int, k: int, a_off: bool, b_off: bool, *, count: int = 1,
                     result_layout: str = "row") -> float:
    """The time a TMA rung loses to A (``a_off``) or B (``b_off``) rows that do not start on
    ``TMA_PITCH`` boundaries: that operand's reads from L2 (the kernel's A once per tile
    column, its B once per tile row) over ``MISALIGNED_BYTES_PER_US``, ``CLUSTER_PITCH_SHARE``
    of it for a cluster row. 0 for other rungs."""
    if spec.abi != "tma" or not (a_off or b_off):
        return 0.0
    km, kn = kernel_mn(spec, m, n, result_layout)
    if spec.layout != result_layout:  # the operand swap: the kernel's A is the user's B
        a_off, b_off = b_off, a_off
    bm, bn, _ = spec.tile
    reads = (math.ceil(kn / bn) * km * k if a_off else 0) + (math.ceil(km / bm) * kn * k if b_off else 0)
    share = CLUSTER_PITCH_SHARE if spec.cluster > 1 else 1.0
    return share * reads * spec.itemsize * max(count, 1) / MISALIGNED_BYTES_PER_US


def fit_rung(spec: KernelSpec, records: Iterable[dict], sms: int = 132) -> RungModel | None:
    """Fit ``spec``'s constants to its measurements (records of ``polygemm bench``: m, n, k,
    tflops, optional batch). None without measurements."""
    rows = [r for r in records if r.get("variant") == spec.name and float(r.get("tflops") or 0) > 0]
    if not rows:
        return None
    times, x1, x2 = [], [], []
    for r in rows:
        m, n, k, count = int(r["m"]), int(r["n"]), int(r["k"]), int(r.get("batch") or 1)
        t = 2.0 * m * n * k * count / (float(r["tflops"]) * 1e6)
        times.append(t)
        flops_sm, rounds, _ = _shape_terms(spec, m, n, k, count, split_of(str(r.get("variant")))[1], sms, str(r.get("layout") or "row"))
        x1.append(flops_sm)
        x2.append(rounds)
    t_arr = np.asarray(times)
    if spec.max_m:  # bandwidth: the median effective rate over the measurements
        moved = np.asarray([skinny_bytes(spec, int(r["m"]), int(r["n"]), int(r["k"]), str(r.get("layout") or "row"), spec.itemsize)
                            / skinny_share(spec, int(r["m"]), int(r["n"]), splits=split_of(str(r.get("variant")))[1],
                                           sms=sms, result_layout=str(r.get("layout") or "row"))
                            for r in rows])
        bw = float(np.median(moved / np.maximum(t_arr - LAUNCH_US, 0.5)))
        return RungModel(1.0, 0.0, bw, len(rows), spec.name)
    # t - launch ≈ x1 / rate + x2 * tile_us, weighted by 1 / t (relative error), coefficients >= 0
    w = 1.0 / t_arr
    y = np.maximum(t_arr - LAUNCH_US, 0.1 * t_arr) * w
    design = np.stack([np.asarray(x1) * w, np.asarray(x2) * w], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    inv_rate, tile_us = float(coef[0]), float(coef[1])
    if inv_rate <= 0 or tile_us < 0:  # refit without the per-tile term
        inv_rate = float(np.dot(design[:, 0], y) / max(np.dot(design[:, 0], design[:, 0]), 1e-30))
        tile_us = 0.0
    return RungModel(1.0 / max(inv_rate, 1e-12), tile_us, HBM_BYTES_PER_US, len(rows), spec.name)


def split_choices(spec: KernelSpec, k: int) -> list[int]:
    """The K-slice counts worth weighing for ``spec``: equal slices of at least
    ``MIN_SLICE_K``, each a whole number of 64-wide K-tiles where possible (so no slice pays a
    zero-filled tile), among ``SPLIT_COUNTS``; [] for rungs without a batched build."""
    if not (spec.batch and spec.predicated) or spec.persistent or (spec.max_m and not spec.split_step):
        return []  # a persistent row's split is its base row's (split-K grids are persistent)
    if spec.split_step:  # slices of whole steps, cut by the kernel: K need not divide evenly
        least = (SKINNY_MIN_SLICE_STEPS if spec.max_m else TILED_MIN_SLICE_STEPS) * spec.split_step
        return [s for s in SPLIT_COUNTS if k >= s * least and spec.cuts_k(k, s)]
    out = []
    for s in SPLIT_COUNTS:
        if k % s or k // s < MIN_SLICE_K:
            continue
        ks = k // s
        if ks % 64 and ks % 8:
            continue
        out.append(s)
    return out


def _fit_models(specs: Sequence[KernelSpec], recs: Sequence[dict], sms: int) -> dict[str, RungModel]:
    fitted = {s.name: fit_rung(s, recs, sms) for s in specs}
    out: dict[str, RungModel] = {}
    for s in specs:
        model = fitted[s.name]
        if model is None:  # a row sharing a source with a measured row borrows its constants (not across
            # cluster sizes: a cluster row's pace is bound by L2 differently, so it waits for measurements of its own)
            model = next((fitted[o.name] for o in specs if o.source == s.source and o.entry == s.entry and o.cluster == s.cluster
                          and fitted[o.name] is not None), None)
        if model is None and s.prior_tflops > 0:
            model = prior_model(s, sms)
        if model is not None:
            out[s.name] = model
    return out


def prior_model(spec: KernelSpec, sms: int) -> RungModel:
    """The constants of a rung that has no measurements yet (nor a measured row of its source) but
    declares the device-wide rate it is expected to reach (``prior_tflops``): that rate shared by
    the SMs, no fixed cost per tile. Its estimates then weigh waves and bandwidth like a measured
    rung's; its ``measurements`` count stays 0, which ``explain`` reports."""
    return RungModel(spec.prior_tflops * 1e6 / max(sms, 1), 0.0, HBM_BYTES_PER_US, 0, spec.name)


@functools.lru_cache(maxsize=64)
def _models(specs: tuple[KernelSpec, ...], records: tuple[tuple[tuple[str, object], ...], ...], sms: int) -> dict[str, RungModel]:
    """:func:`_fit_models` cached on a table's contents (tables given as lists)."""
    return _fit_models(specs, [dict(r) for r in records], sms)


def models_for(specs: Sequence[KernelSpec], records: Sequence[dict], sms: int) -> dict[str, RungModel]:
    """Each rung's fitted model (rungs without measurements of their own borrow those of a row
    built from the same source; rungs with neither are left out). Cached per table."""
    return _table(records).models(specs, sms)


@dataclass(frozen=True)
class _Row:
    """One measurement as the ranking reads it: the record, its K-slices, log m, n, k, batch
    and log of its slices."""

    record: dict
    splits: int
    logs: tuple[float, float, float, float]
    log_splits: float


class _Table:
    """What ranking reads of a measured table, worked out once per table: a new shape's plan
    ranks some fifty candidates, each anchored on the nearest of thousands of records."""

    def __init__(self, records: Sequence[dict]) -> None:
        self.records = records
        self._fits: dict[tuple[tuple[KernelSpec, ...], int], dict[str, RungModel]] = {}
        self.vendor = _vendor_medians(records)
        #: per rung, its measurements with a rate, in table order (ties go to the first, as min does)
        self.rows: dict[str, list[_Row]] = {}
        #: per rung, the slice counts it was measured with (0: unsplit), rate or not
        self.splits: dict[str, set[int]] = {}
        #: a measurement's time over its model's (:func:`_measured_over_model`), per measurement, rung model and device:
        #: the same for every product it anchors, and worked out once (a new shape ranks some fifty candidates on five each)
        self.over_model: dict[tuple[int, str, int, int, str], float] = {}
        for r in records:
            rung, sp = split_of(str(r.get("variant")))
            self.splits.setdefault(rung, set()).add(sp)
            if float(r.get("tflops") or 0) > 0:
                logs = tuple(math.log(max(int(r[key]), 1)) for key in ("m", "n", "k"))
                self.rows.setdefault(rung, []).append(_Row(r, sp, logs + (math.log(max(int(r.get("batch") or 1), 1)),), math.log(max(sp, 1))))


    def models(self, specs: Sequence[KernelSpec], sms: int) -> dict[str, RungModel]:
        """The rungs' fitted models: kept with a loaded (tuple) table; a list's are cached on its
        contents, which the caller may change between calls."""
        key = (tuple(specs), sms)
        if type(self.records) is not tuple:
            frozen = tuple(tuple(sorted((k, v) for k, v in r.items() if isinstance(v, (int, float, str)) or v is None)) for r in self.records)
            return _models(key[0], frozen, sms)
        fits = self._fits.get(key)
        if fits is None:
            fits = self._fits[key] = _fit_models(key[0], self.records, sms)
        return fits


_TABLES: dict[int, tuple[Sequence[dict], _Table]] = {}
_TABLES_KEPT = 8  # the loaded tables are two (fp32, fp16); callers' tuples beyond a few are dropped


def _table(records: Sequence[dict]) -> _Table:
    """``records``' :class:`_Table`: kept for a tuple (the loaded tables are tuples and never
    change), made afresh for anything else (a list a caller may still change)."""
    if type(records) is not tuple:
        return _Table(records)
    hit = _TABLES.get(id(records))
    if hit is None or hit[0] is not records:
        if len(_TABLES) >= _TABLES_KEPT:  # a caller's own tuples are not kept for ever
            _TABLES.clear()
        hit = _TABLES[id(records)] = (records, _Table(records))
    return hit[1]


def _vendor_medians(records: Sequence[dict]) -> dict[tuple[int, int, int, int], float]:
    """The vendor's median TFLOP/s at each measured shape (m, n, k, batch) over every record:
    each record timed the vendor beside the rung, so its vendor figure says how fast that run's
    GPU was (the H200's clocks under its power cap differ by up to 15% between runs)."""
    by: dict[tuple[int, int, int, int], list[float]] = {}
    for r in records:
        v = float(r.get("vendor_tflops") or 0)
        if v > 0:
            by.setdefault((int(r["m"]), int(r["n"]), int(r["k"]), int(r.get("batch") or 1)), []).append(v)
    return {key: float(np.median(vs)) for key, vs in by.items()}


def shape_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """How far apart two shapes are, ``(m, n, k, count)`` each (log scale; batch counts too):
    the sum of ``|log(max(x, 1)) - log(max(y, 1))|`` over their sizes, in that order
    (tools/update_tuning.py paces other GPUs' records by it too)."""
    return sum(abs(math.log(max(x, 1)) - math.log(max(y, 1))) for x, y in zip(a, b))


def split_of(variant: str) -> tuple[str, int]:
    """A measured variant name's rung and K-slices: ``"rung:split_k=8"`` -> ("rung", 8)."""
    base, sep, rest = variant.partition(":split_k=")
    return (base, int(rest)) if sep and rest.isdigit() else (variant, 0)


def anchors_for(spec: KernelSpec, records: Sequence[dict], m: int, n: int, k: int, count: int, splits: int = 0) -> list[dict]:
    """The rung's measurements its estimate for this product rests on, nearest first (none: it has none): the one at
    this very product where there is one, else the ``ANCHORS_BLENDED`` nearest. A split candidate's distance to an
    unsplit measurement (and an unsplit one's to a split measurement) carries a penalty, and so does another slice count:
    its nearest are the rung's split measurements where it has them near, and the blend may take in both kinds."""
    return [a for _, _, a in _anchors(_table(records), spec, m, n, k, count, splits)]


def _anchors(table: _Table, spec: KernelSpec, m: int, n: int, k: int, count: int, splits: int) -> list[tuple[float, float, dict]]:
    """The rung's measurements this product's estimate rests on, nearest first, each with its distance (the shape
    distance plus a penalty for running differently) and that penalty: the one at this very product where there is
    one, else the ``ANCHORS_BLENDED`` nearest (ties: table order, newest run first)."""
    rows = table.rows.get(spec.name)
    if not rows:
        return []
    lm, ln, lk, lc = (math.log(max(x, 1)) for x in (m, n, k, count))
    ls = math.log(max(splits, 1))

    def scored(i: int, r: _Row) -> tuple[float, int, float]:  # shape distance (as shape_distance) plus the penalty
        rm, rn, rk, rc = r.logs
        penalty = abs(ls - r.log_splits) + (0.5 if (r.splits > 0) != (splits > 0) else 0.0)
        return abs(lm - rm) + abs(ln - rn) + abs(lk - rk) + abs(lc - rc) + penalty, i, penalty

    nearest = heapq.nsmallest(ANCHORS_BLENDED, (scored(i, r) for i, r in enumerate(rows)))
    if nearest[0][0] == 0.0:  # measured here: the measurement alone
        nearest = nearest[:1]
    return [(d, penalty, rows[i].record) for d, i, penalty in nearest]


def _anchor_scale(table: _Table, anchor: dict, donor: KernelSpec, model: RungModel, m: int, n: int, k: int, count: int,
                  splits: int, sms: int, result_layout: str) -> float:
    """What one measurement says of the model: its time over the model's at its shape, trusted less the farther it lies
    from this product."""
    key = (id(anchor), donor.name, id(model), sms, result_layout)
    over = table.over_model.get(key)
    if over is None:
        over = table.over_model[key] = _measured_over_model(anchor, donor, model, table.vendor, sms, result_layout)
    am, an, ak, ac = int(anchor["m"]), int(anchor["n"]), int(anchor["k"]), int(anchor.get("batch") or 1)
    # an estimate far from any measurement of its kind is trusted less
    distance = shape_distance((m, n, k, count), (am, an, ak, ac)) + (0.5 if (split_of(str(anchor["variant"]))[1] > 0) != (splits > 0) else 0.0)
    return over * (1.0 + DISTANCE_PENALTY * distance)


def _measured_over_model(anchor: dict, donor: KernelSpec, model: RungModel, vendor: dict[tuple[int, int, int, int], float],
                         sms: int, result_layout: str) -> float:
    """A measurement's time over the model's at its own shape (the product it anchors plays no part)."""
    am, an, ak, ac = int(anchor["m"]), int(anchor["n"]), int(anchor["k"]), int(anchor.get("batch") or 1)
    asplit = split_of(str(anchor["variant"]))[1]
    measured_us = 2.0 * am * an * ak * ac / (float(anchor["tflops"]) * 1e6)
    # in a run where the vendor beside it ran faster than its median at this shape
    # (the H200's clocks differ by run), the rung did too: count it at the median's
    # pace, up to VENDOR_PACE_CAP. Not the other way: a vendor slower than its median beside a rung is
    # often that rung's doing (the two share the power cap), not a slow run
    ref, beside = vendor.get((am, an, ak, ac)), float(anchor.get("vendor_tflops") or 0)
    if ref and beside > ref:
        measured_us *= min(beside / ref, VENDOR_PACE_CAP)
    # the measurement ran on compact row-major operands: take out what their rows' pitch cost it
    # (the plan adds what the actual operands' rows cost: pitch_penalty_us)
    measured_us -= min(0.5 * measured_us, pitch_penalty_us(
        donor, am, an, ak, (ak * donor.itemsize) % TMA_PITCH != 0 and am > 1,
        (an * donor.itemsize) % TMA_PITCH != 0 and ak > 1, count=ac))
    return measured_us / estimate_us(donor, model, am, an, ak, count=ac, splits=asplit, sms=sms, result_layout=result_layout).estimate_us


def _blended_scale(anchors: list[tuple[float, float, dict]], scale_of: Callable[[dict], float]) -> float:
    """The anchors' scales (:func:`_anchors`) in one: a measurement at this very product alone; else their geometric
    mean weighted by ``1 / (ANCHOR_WEIGHT_EPS + distance - shared)**2``, ``shared`` the nearest's penalty for running
    differently (such as unsplit where this candidate splits K). Anchors of the nearest's kind bear the same penalty:
    left in, it would weigh the farther of them up; an anchor of another kind keeps what its own penalty differs by.
    One neighbour's quirk (a tile count that happens to fill the last wave) otherwise decides a shape it does not
    resemble: on shapes held out of the measured tables, blending the five nearest picks rungs 1-2% nearer the measured
    best than the nearest alone (``polygemm tune --holdout``, 24 seeds)."""
    if anchors[0][0] == 0.0:
        return scale_of(anchors[0][2])
    shared = anchors[0][1]
    total = weights = 0.0
    for distance, _, anchor in anchors:
        w = 1.0 / (ANCHOR_WEIGHT_EPS + distance - shared) ** 2
        total += w * math.log(scale_of(anchor))
        weights += w
    return math.exp(total / weights)


def rank(specs: Sequence[KernelSpec], records: Sequence[dict], m: int, n: int, k: int, *, count: int = 1, sms: int = 132,
         result_layout: str = "row", out_itemsize: int | None = None, split_ok: bool = True) -> list[Candidate]:
    """Every candidate for the product, fastest estimate first.

    Each estimate is anchored on the rung's own measurements at the nearest shapes: the model's
    time for this candidate, times what the measurements there say of the model (their time
    over the model's, blended over the ``ANCHORS_BLENDED`` nearest: :func:`_blended_scale`). At a
    measured shape an unsplit candidate's estimate is the measurement itself; elsewhere the
    model carries what changed (waves, K-slices, bandwidth). Rungs with no measurement of their
    own (a tile variant of a measured source) use the model alone."""
    table = _table(records)
    models = table.models(specs, sms)
    out = []
    for spec in specs:
        model = models.get(spec.name)
        if model is None:
            continue
        if spec.max_m and (kernel_mn(spec, m, n, result_layout)[0] > spec.max_m or count > 1):  # skinny: the rung's own M
            continue
        if spec.max_n and kernel_mn(spec, m, n, result_layout)[1] > spec.max_n:  # a thin tile: the rung's own N
            continue
        if spec.cluster > 1 and (min(kernel_mn(spec, m, n, result_layout)) < CLUSTER_MIN_SIDE or count > 1):
            continue  # (a cluster row runs batches, but none was measured: the one-CTA rows take them)
        if (spec.cluster > 1 or spec.k_major_b) and not table.rows.get(spec.name):
            continue  # a cluster row's pace is its own (bound by L2, its grid by the GPCs), and so is a 32-wide
            # tile's (bound by its ring of loads, not the tensor cores a wider tile's model was fitted to): offered once measured
        # a row without measurements (a tile variant) is anchored like the row it borrows from
        donor = spec if table.rows.get(spec.name) else \
            next((o for o in specs if o.name == model.source), spec)
        splits = [0] + (split_choices(spec, k) if split_ok and count <= 1 and spec.split_k else [])
        # where a rung's splits were measured, only those slice counts are weighed: the model
        # extrapolates waves well but not a deeper split's reduction and workspace traffic
        # (a cluster row's pace is its own, bound by L2: only its own measured splits count,
        # never those of the row it borrows a model from)
        measured_splits = table.splits.get(spec.name if spec.cluster > 1 else donor.name, set())
        if measured_splits - {0} or spec.cluster > 1:
            splits = [s for s in splits if s in measured_splits or s == 0]
        for s in splits:
            scale = 1.0
            anchors = _anchors(table, donor, m, n, k, count, s)
            if anchors:
                scale = _blended_scale(anchors, lambda a: _anchor_scale(table, a, donor, model, m, n, k, count, s, sms, result_layout))
            c = estimate_us(spec, model, m, n, k, count=count, splits=s, sms=sms, result_layout=result_layout, out_itemsize=out_itemsize)
            device_us = c.estimate_us * scale
            host = SPLIT_HOST_US if s else 0.0  # what the measurements (device time) leave out
            if s and device_us < HOST_BOUND_US and spec.abi == "standard":
                host += COOPERATIVE_US
            if spec.tma_store and device_us < HOST_BOUND_US:  # C's map, where the host path sets the pace
                host += STORE_MAP_HOST_US
            out.append(Candidate(c.variant, c.splits, device_us + host, c.waves, c.shape, c.count))
    out.sort(key=lambda c: c.estimate_us)
    return out
