#!/usr/bin/env python3
"""The wgmma rungs' epilogues side by side, beside the vendor, in one process (issue 14).

Builds ``hgemm_v2_wgmma_tma`` / ``hgemm_v3_wgmma_pingpong`` with extra macros (HG2_EPILOGUE:
0 = C stored straight from the accumulator fragments, 1 = staged through shared memory and
stored with coalesced 16-byte vectors, 2 = no C store at all, a measurement aid: the main
loop alone; HG2_GROUP_M; PG_BN; PG_STAGES; a persistent grid of one CTA per SM) and launches
each with the plan the backend makes for the rung (tensor maps, parameters), only the kernel,
its shared memory and its grid replaced. The vendor is cuBLAS through the backend
(``variant="cublas"``) for single products and ``torch.bmm`` (cublasGemmStridedBatchedEx)
for strided batches. Random normal fp16 inputs, two rotating input sets, warm-up first;
every round times the vendor and every build once (a batch of calls of >= 25 ms each, CUDA
events); the median over rounds is reported. Each build's result is checked against the
vendor's on the timed shape (NaN-poisoned output first); ``--checks`` adds alpha/beta, fp32
output and transposed layouts for the staged builds.

    python docs/benchmarks/epilogue_bench.py --json OUT.json [--rounds 7] [--checks] [--shuffle]
        [--only CONFIG ...] [--shapes [BATCHx]MxNxK ...]
    python docs/benchmarks/epilogue_bench.py --profile 4096x4096x4096 v2_e0 v2_e1  # once each, for ncu
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import polygemm as pg  # noqa: E402
from polygemm.backends.cuda.compiler import compile_cubin  # noqa: E402
from polygemm.backends.cuda.launch import _TMA_ARGS, _TMA_BATCH_ARGS, PreparedLaunch  # noqa: E402
from polygemm.backends.cuda.variants import kernel_specs  # noqa: E402

V2, V3 = "hgemm_v2_wgmma_tma", "hgemm_v3_wgmma_pingpong"


@dataclasses.dataclass(frozen=True)
class Config:
    """One build of a wgmma rung and its grid."""

    label: str
    variant: str
    macros: tuple[tuple[str, int], ...]
    persistent: bool = False
    max_grid: int = 0  # persistent grid: at most this many CTAs (0: one per SM)

    @property
    def m(self) -> dict[str, int]:
        return dict(self.macros)

    @property
    def bn(self) -> int:
        return self.m.get("PG_BN", 128 if self.variant == V3 else 256)

    def smem(self) -> int:
        """Dynamic shared memory of the build (the kernel's kSmemBytes)."""
        stages = self.m.get("PG_STAGES", 6 if self.variant == V3 else 4)
        staged = 16 * 1024 if self.m.get("HG2_EPILOGUE", 1) == 1 else 0
        return stages * (128 + self.bn) * 64 * 2 + 1024 + 256 + staged


def cfg(label: str, variant: str, persistent: bool = False, max_grid: int = 0, **macros: int) -> Config:
    return Config(label, variant, tuple(sorted(macros.items())), persistent, max_grid)


ORIGINAL = dict(HG2_EPILOGUE=0, HG2_GROUP_M=8)  # the committed builds before the staged epilogue
SINGLE = [
    cfg("v2_e0_g8", V2, **ORIGINAL),
    cfg("v2_e1_g8", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8),
    cfg("v2_e1_g4", V2, HG2_EPILOGUE=1, HG2_GROUP_M=4),
    cfg("v2_e1_g2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=2),
    cfg("v2_e1_g1", V2, HG2_EPILOGUE=1, HG2_GROUP_M=1),
    cfg("v2_e2_g4_noepi", V2, HG2_EPILOGUE=2, HG2_GROUP_M=4),
    cfg("v2_e1_g4_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=4),
    cfg("v2bn192s5_e0_g8", V2, PG_BN=192, PG_STAGES=5, **ORIGINAL),
    cfg("v2bn192s4_e1_g4", V2, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_BN=192, PG_STAGES=4),
    cfg("v2bn192s5_e1_g4", V2, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_BN=192, PG_STAGES=5),
    cfg("v3s4_e0_g8", V3, PG_STAGES=4, **ORIGINAL),
    cfg("v3s4_e1_g4", V3, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=4),
    cfg("v3s6_e1_g4", V3, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=6),
    cfg("v3s6_e1_g8", V3, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_STAGES=6),
    cfg("v3s5_e1_g4", V3, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=5),
    cfg("v3s6_e2_g4_noepi", V3, HG2_EPILOGUE=2, HG2_GROUP_M=4, PG_STAGES=6),
    # 2-CTA clusters multicasting B (each CTA loads half of the B tile for both), plain and persistent grids,
    # beside the shipped persistent builds
    cfg("v2_e1_g8_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=8),
    cfg("v2_e1_g8_c2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_CLUSTER_M=2),
    cfg("v2_e1_g8_c2_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_CLUSTER_M=2),
    cfg("v3s6_e1_g4_persistent", V3, True, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=6),
    # clusters after the remote stage release lost its .release.cluster fence (MEMBAR.ALL.GPU per k-tile)
    cfg("v2_e1_g8_c2_persistent128", V2, True, 128, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_CLUSTER_M=2),
    cfg("v2bn192s5_e1_g8", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=192, PG_STAGES=5),
    cfg("v2bn192s5_e1_g8_c2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=192, PG_STAGES=5, PG_CLUSTER_M=2),
    cfg("v2bn128s6_e1_g8", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=128, PG_STAGES=6),
    cfg("v2bn128s6_e1_g8_c2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=128, PG_STAGES=6, PG_CLUSTER_M=2),
    cfg("v2bn128s6_e1_g8_c2_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=128, PG_STAGES=6, PG_CLUSTER_M=2),
    cfg("v2bn64s8_e1_g8", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=64, PG_STAGES=8),
    cfg("v2bn64s8_e1_g8_c2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=64, PG_STAGES=8, PG_CLUSTER_M=2),
    # 2 x 2 clusters: A shared along N as well as B along M
    cfg("v2_e1_g8_c2x2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_CLUSTER_M=2, PG_CLUSTER_N=2),
    cfg("v2_e1_g8_c2x2_persistent128", V2, True, 128, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_CLUSTER_M=2, PG_CLUSTER_N=2),
    cfg("v2bn192s5_e1_g8_c2x2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=192, PG_STAGES=5, PG_CLUSTER_M=2, PG_CLUSTER_N=2),
    cfg("v2bn192s5_e1_g8_c1x2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=192, PG_STAGES=5, PG_CLUSTER_N=2),
    cfg("v2bn128s6_e1_g8_c2x2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=128, PG_STAGES=6, PG_CLUSTER_M=2, PG_CLUSTER_N=2),
    cfg("v2bn64s8_e1_g8_c2x2", V2, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_BN=64, PG_STAGES=8, PG_CLUSTER_M=2, PG_CLUSTER_N=2),
    # the persistent builds without their C store: the epilogue's share of the shipped rows
    cfg("v2_e2_g8_persistent_noepi", V2, True, HG2_EPILOGUE=2, HG2_GROUP_M=8),
    cfg("v3s6_e2_g4_persistent_noepi", V3, True, HG2_EPILOGUE=2, HG2_GROUP_M=4, PG_STAGES=6),
    # the consumers' k-tile loop unrolled over the ring (HG2_RING_UNROLL=1, the default) or not
    cfg("v2_e1_g8_persistent_loop", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=8, HG2_RING_UNROLL=0),
    cfg("v2_e1_g8_c2_persistent_loop", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_CLUSTER_M=2, HG2_RING_UNROLL=0),
    cfg("v3s6_e1_g4_persistent_loop", V3, True, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=6, HG2_RING_UNROLL=0),
    # a grid of 128 CTAs (4096³: 512 tiles, four each, where 132 CTAs leave 16 of them a tile short)
    cfg("v2_e1_g8_persistent128", V2, True, 128, HG2_EPILOGUE=1, HG2_GROUP_M=8),
    # the tile order of the 128x256 persistent rows: group heights, and groups of unit columns walked row by row
    cfg("v2_e1_g4_c2_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_CLUSTER_M=2),
    cfg("v2_e1_g16_c2_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=16, PG_CLUSTER_M=2),
    cfg("v2_e1_gn4_c2_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_N=4, PG_CLUSTER_M=2),
    cfg("v2_e1_gn8_c2_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_N=8, PG_CLUSTER_M=2),
    cfg("v2_e1_g16_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_M=16),
    cfg("v2_e1_gn8_persistent", V2, True, HG2_EPILOGUE=1, HG2_GROUP_N=8),
]
BATCHED = [
    cfg("v3s4_e0_g8", V3, PG_STAGES=4, **ORIGINAL),
    cfg("v3s6_e1_g4", V3, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=6),
    cfg("v3s6_e1_g8", V3, HG2_EPILOGUE=1, HG2_GROUP_M=8, PG_STAGES=6),
    cfg("v3s5_e1_g4", V3, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=5),
    cfg("v3s6_e2_g4_noepi", V3, HG2_EPILOGUE=2, HG2_GROUP_M=4, PG_STAGES=6),
    cfg("v2_e0_g8", V2, **ORIGINAL),
    cfg("v2_e1_g4", V2, HG2_EPILOGUE=1, HG2_GROUP_M=4),
]
SHAPES = [(0, 4096, 4096, 4096), (0, 8192, 8192, 8192), (0, 8192, 8192, 512), (0, 1000, 3000, 2000), (64, 512, 512, 512)]


class Bench:
    def __init__(self) -> None:
        self.be = pg.get_backend("cuda")
        self.rt = self.be.runtime
        self.specs = kernel_specs()
        self._kernels: dict[tuple, Any] = {}

    # -- building --------------------------------------------------------------------
    def plan(self, c: Config, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, alpha: float = 1.0, beta: float = 0.0):
        """(PreparedLaunch-to-be, macros, smem) for config ``c`` on these operands."""
        kl = self.be.launcher(c.variant, a, b, out, alpha, beta)
        base: PreparedLaunch = kl.launch
        assert base.spec is not None and base.lp.tma, f"{c.variant} did not plan a TMA launch: {base.variant}"
        # tensor-map boxes follow BN and the cluster (a CTA's share of a multicast tile)
        clusters = {k: v for k, v in c.m.items() if k.startswith("PG_CLUSTER_")}
        spec = dataclasses.replace(base.spec, tile=(128, c.bn, 64), defines=tuple(sorted({**dict(base.spec.defines), **clusters}.items())))
        lp = dataclasses.replace(base.lp)
        if getattr(lp, "splits", 0):
            raise RuntimeError(f"the plan of {c.variant} splits K here; this script times single launches")
        macros = {**lp.macros(), **c.m}
        lp.smem_bytes = c.smem()
        count = max(lp.batch_count, 1)
        tiles = math.ceil(lp.m / 128) * math.ceil(lp.n / c.bn) * count
        cm, cn = lp.cluster = spec.cluster_mn  # the tensor maps' boxes follow the plan's cluster
        cl = cm * cn
        if cl > 1:  # a cluster's CTAs are consecutive along x and share a unit of cm x cn tiles
            units = math.ceil(math.ceil(lp.m / 128) / cm) * math.ceil(math.ceil(lp.n / c.bn) / cn) * count
            cap = c.max_grid or self.rt.sms
            lp.grid = (min(units, cap // cl) * cl if c.persistent else units * cl, 1, 1)
        elif c.persistent or lp.batch_count:
            lp.grid = (min(tiles, c.max_grid or self.rt.sms), 1, 1)
        else:
            lp.grid = (math.ceil(lp.n / c.bn), math.ceil(lp.m / 128), 1)
        return spec, lp, macros

    def compile_all(self, jobs: list[tuple[Path, str, dict[str, int]]]) -> None:
        uniq = {(str(s), a, tuple(sorted((m or {}).items()))): (s, a, m) for s, a, m in jobs}
        t = time.time()

        def one(job: tuple[Path, str, dict[str, int]]) -> None:
            try:
                compile_cubin(*job)
            except Exception as exc:  # reported; the launch that needs it fails on its own
                print(f"build failed {job[0].name} {job[2]}: {str(exc)[:300]}", flush=True)

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(one, uniq.values()))
        print(f"compiled {len(uniq)} builds in {time.time() - t:.1f} s", flush=True)

    def launch(self, c: Config, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, alpha: float = 1.0, beta: float = 0.0) -> Callable[[], None]:
        spec, lp, macros = self.plan(c, a, b, out, alpha, beta)
        key = (str(spec.source), spec.entry, tuple(sorted(macros.items())), lp.smem_bytes)
        kern = self._kernels.get(key)
        if kern is None:
            cubin = compile_cubin(spec.source, spec.arch or self.rt.arch, macros)
            pushed = self.rt.enter()
            try:
                kern = self.rt.cu.load(cubin, spec.entry, lp.smem_bytes)
            finally:
                if pushed:
                    self.rt.leave()
            self._kernels[key] = kern
        pl = PreparedLaunch(self.rt, spec, lp)
        pl._kernel = kern
        pl._pack = kern.struct_for(_TMA_ARGS + (_TMA_BATCH_ARGS if lp.batch_count else ())).pack
        pl._go = kern.launcher(lp.grid, lp.block, lp.smem_bytes)
        pl._plain = not lp.packs and lp.unpack is None
        prepared = pl.prepare(a.data_ptr(), b.data_ptr(), out.data_ptr(), alpha, beta)
        return lambda: pl.launch(prepared, 0)


def time_batch(fn: Callable[[int], None], calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(calls):
        fn(i)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.float(), ref.float()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def run_shape(bench: Bench, count: int, m: int, n: int, k: int, rounds: int, log: Callable[[str], None],
              only: set[str] | None = None, shuffle: bool = False) -> list[dict]:
    lead = (count,) if count else ()
    sets = []
    for _ in range(2):
        a = torch.randn(*lead, m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(*lead, k, n, device="cuda", dtype=torch.float16)
        sets.append((a, b, torch.empty(*lead, m, n, device="cuda", dtype=torch.float16)))
    if count:
        vendor_name = "torch.bmm (cublasGemmStridedBatchedEx)"
        vend = [(lambda s=s: torch.bmm(s[0], s[1], out=s[2])) for s in sets]
    else:
        vendor_name = "cublas (the backend's variant='cublas')"
        vend = [bench.be.launcher("cublas", *s) for s in sets]
    ref = torch.empty_like(sets[0][2])
    if count:
        torch.bmm(sets[0][0], sets[0][1], out=ref)
    else:
        bench.be.launcher("cublas", sets[0][0], sets[0][1], ref)()
    torch.cuda.synchronize()
    configs = [c for c in (BATCHED if count else SINGLE) if only is None or c.label in only]
    runs: dict[str, list[Callable[[], None]]] = {}
    errs: dict[str, float] = {}
    for c in configs:
        try:
            fns = [bench.launch(c, *s) for s in sets]
            sets[0][2].fill_(float("nan"))
            fns[0]()
            torch.cuda.synchronize()
            if c.m.get("HG2_EPILOGUE") != 2:
                errs[c.label] = rel_err(sets[0][2], ref)
                if not errs[c.label] < 2e-3:
                    log(f"  {c.label}: WRONG result (max rel err {errs[c.label]:.3g}); not timed")
                    continue
            runs[c.label] = fns
        except Exception as exc:  # one bad build must not lose the rest of the run
            log(f"  {c.label}: {type(exc).__name__}: {str(exc)[:300]}")
    timed: dict[str, tuple[Callable[[int], None], int]] = {}
    for label, fns in [("vendor", vend)] + list(runs.items()):
        f = (lambda i, fns=fns: fns[i % 2]())
        for i in range(4):
            f(i)
        torch.cuda.synchronize()
        one = time_batch(f, 4)
        calls = max(2, min(400, int(0.025 / max(one, 1e-7)) + 1))
        timed[label] = (f, calls + calls % 2)
    times: dict[str, list[float]] = {label: [] for label in timed}
    order = list(timed)
    rng = random.Random(12345)
    for _ in range(rounds):
        if shuffle:  # no build always timed right after the same neighbour (power, clocks)
            rng.shuffle(order)
        for label in order:
            f, calls = timed[label]
            times[label].append(time_batch(f, calls))
    flops = 2.0 * m * n * k * max(count, 1)
    vt = statistics.median(times["vendor"])
    shape = f"{count} x {m}x{n}x{k}" if count else f"{m}x{n}x{k}"
    log(f"{shape}: vendor {vendor_name} {vt * 1e6:.1f} us, {flops / vt / 1e12:.1f} TFLOP/s")
    recs = []
    for c in configs:
        if c.label not in runs:
            continue
        t = statistics.median(times[c.label])
        rec = {
            "shape": shape, "batch": count, "m": m, "n": n, "k": k, "dtype": "float16", "config": c.label, "variant": c.variant,
            "macros": c.m, "persistent_grid": c.persistent or bool(count), "smem_bytes": c.smem(), "us_per_call": t * 1e6,
            "tflops": flops / t / 1e12, "vendor": vendor_name, "vendor_us_per_call": vt * 1e6, "vendor_tflops": flops / vt / 1e12,
            "ratio": vt / t, "max_rel_err_vs_vendor": errs.get(c.label), "rounds": rounds, "calls_per_round": timed[c.label][1],
            "times_us": [x * 1e6 for x in times[c.label]], "vendor_times_us": [x * 1e6 for x in times["vendor"]],
        }
        recs.append(rec)
        log(f"  {c.label:20s} {t * 1e6:9.1f} us  {rec['tflops']:6.1f} TFLOP/s  {rec['ratio']:.3f}x vendor  (err {errs.get(c.label, float('nan')):.1e})")
    return recs


def checks(bench: Bench, log: Callable[[str], None]) -> list[dict]:
    """Staged builds against an fp32 torch reference: alpha/beta, fp32 output, layouts, edges."""
    out = []
    m, n, k = 1000, 3000, 2000
    configs = [cfg("v2_e1_g4", V2, HG2_EPILOGUE=1, HG2_GROUP_M=4), cfg("v2_e1_g1", V2, HG2_EPILOGUE=1, HG2_GROUP_M=1),
               cfg("v2bn192s5_e1_g4", V2, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_BN=192, PG_STAGES=5),
               cfg("v3s6_e1_g4", V3, HG2_EPILOGUE=1, HG2_GROUP_M=4, PG_STAGES=6)]
    for (mm, nn, kk) in ((m, n, k), (136, 200, 264), (8, 24, 8)):
        for ta in (False, True):
            for tb in (False, True):
                a = torch.randn(kk, mm, device="cuda", dtype=torch.float16).t() if ta else torch.randn(mm, kk, device="cuda", dtype=torch.float16)
                b = torch.randn(nn, kk, device="cuda", dtype=torch.float16).t() if tb else torch.randn(kk, nn, device="cuda", dtype=torch.float16)
                prod = a.float() @ b.float()
                for odt in (torch.float16, torch.float32):
                    for alpha, beta in ((1.0, 0.0), (0.5, -1.25)):
                        c0 = torch.randn(mm, nn, device="cuda", dtype=odt)
                        ref = alpha * prod + beta * c0.float()
                        for c in configs:
                            res = torch.full((mm, nn), float("nan"), device="cuda", dtype=odt)
                            if beta != 0.0:
                                res.copy_(c0)
                            try:
                                bench.launch(c, a, b, res, alpha, beta)()
                                torch.cuda.synchronize()
                                e = rel_err(res, ref)
                            except Exception as exc:
                                e = float("inf")
                                log(f"  check {c.label}: {type(exc).__name__}: {str(exc)[:200]}")
                            ok = e < (2e-3 if odt == torch.float16 else 1e-4)
                            out.append({"config": c.label, "shape": f"{mm}x{nn}x{kk}", "trans_a": ta, "trans_b": tb,
                                        "out": str(odt), "alpha": alpha, "beta": beta, "max_rel_err": e, "ok": ok})
                            if not ok:
                                log(f"  CHECK FAILED {c.label} {mm}x{nn}x{kk} ta={ta} tb={tb} out={odt} alpha={alpha} beta={beta}: {e:.3g}")
    log(f"checks: {sum(r['ok'] for r in out)} of {len(out)} passed")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--checks", action="store_true")
    ap.add_argument("--profile", nargs="+", metavar=("SHAPE", "CONFIG"))
    ap.add_argument("--precompile", action="store_true", help="also build every fp16 rung's builds first (for the tests)")
    ap.add_argument("--only", nargs="+", metavar="CONFIG", help="time only these builds (labels of SINGLE / BATCHED)")
    ap.add_argument("--shapes", nargs="+", metavar="[BATCHx]MxNxK", help="instead of the default shapes")
    ap.add_argument("--shuffle", action="store_true", help="a new order of the vendor and the builds every round")
    args = ap.parse_args()
    bench = Bench()
    with bench.rt.active():  # the device's primary context current (torch uses the same one)
        return run(bench, args)


def run(bench: Bench, args: argparse.Namespace) -> int:
    lines: list[str] = []

    def log(s: str) -> None:
        lines.append(s)
        print(s, flush=True)

    if args.profile:
        m, n, k = (int(x) for x in args.profile[0].split("x"))
        by = {c.label: c for c in SINGLE}
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        o = torch.empty(m, n, device="cuda", dtype=torch.float16)
        fns = [(label, bench.launch(by[label], a, b, o)) for label in args.profile[1:]]
        torch.cuda.synchronize()
        for label, f in fns:
            f()
            torch.cuda.synchronize()
            print(f"profiled {label} at {m}x{n}x{k}", flush=True)
        return 0

    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in ([0] + sh.split("x") if sh.count("x") == 2 else sh.split("x"))) for sh in args.shapes]
    only = set(args.only) if args.only else None
    # build everything first, in parallel (compile_cubin caches on disk)
    jobs = []
    for count, m, n, k in shapes:
        lead = (count,) if count else ()
        a = torch.empty(*lead, m, k, device="cuda", dtype=torch.float16)
        b = torch.empty(*lead, k, n, device="cuda", dtype=torch.float16)
        o = torch.empty(*lead, m, n, device="cuda", dtype=torch.float16)
        for c in (BATCHED if count else SINGLE):
            if only is not None and c.label not in only:
                continue
            spec, _, macros = bench.plan(c, a, b, o)
            jobs.append((spec.source, spec.arch, macros))
    if args.precompile:
        for spec in bench.specs.values():
            if spec.dtype == "float16" and spec.runs_on(bench.rt.sm):
                jobs += [(spec.source, spec.arch or bench.rt.arch, m if spec.predicated else None) for m in spec.builds()]
    bench.compile_all(jobs)
    log(f"device {bench.rt.name}; torch {torch.__version__}; median of {args.rounds} rounds, vendor and every build timed once per round"
        + (" (a new order every round)" if args.shuffle else ""))
    records = []
    for count, m, n, k in shapes:
        records += run_shape(bench, count, m, n, k, args.rounds, log, only, args.shuffle)
        if args.json:  # written as it goes: a run cut short keeps what it measured
            args.json.write_text(json.dumps({"command": " ".join(sys.argv), "records": records, "log": lines}, indent=1))
    chk = checks(bench, log) if args.checks else []
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "records": records, "checks": chk, "log": lines}, indent=1))
    return 0 if all(r["ok"] for r in chk) else 1


if __name__ == "__main__":
    raise SystemExit(main())
