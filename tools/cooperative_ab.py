"""Plain or cooperative: the same prepared launch of a waiting grid (split-K on a resident grid,
stream-K) queued both ways, alternating rounds, timed by CUDA events (median of 8 rounds).

    python tools/cooperative_ab.py > docs/benchmarks/h100_cooperative_ab.txt   (needs CuPy and a GPU)
"""
import statistics

import cupy as cp
import numpy as np

import polygemm as pg

cases = [("hgemm_v2_wgmma_tma:split_k=4", (512, 512, 16384)), ("hgemm_v2_wgmma_tma_cluster2:split_k=4", (1000, 1000, 16384)),
         ("hgemm_v2_wgmma_tma_streamk", (4096, 4096, 4096)), ("hgemm_v2_wgmma_tma_128x128_streamk", (8192, 8192, 8192)),
         ("hgemm_v2_wgmma_tma_streamk", (1000, 3000, 2000)), ("cm_v13_cp_async_narrow_tile:split_k=4", (512, 512, 16384)),
         ("hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=4", (1000, 1000, 16384))]
print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
for var, (m, n, k) in cases:
    dt = np.float32 if var.startswith("cm_") else np.float16
    a = cp.random.standard_normal((m, k), dtype=cp.float32).astype(dt); b = cp.random.standard_normal((k, n), dtype=cp.float32).astype(dt)
    o = pg.gemm(a, b, device="cuda", variant=var)
    L = pg.last_plan().private.launch; lp = L.lp; kk = L.kernel()
    prep = L.prepare(int(a.data.ptr), int(b.data.ptr), int(o.data.ptr), 1.0, 0.0)
    buf = prep.main if hasattr(prep, "main") else prep
    gos = {"plain": kk.launcher(lp.grid, lp.block, lp.smem_bytes, cooperative=False), "coop": kk.launcher(lp.grid, lp.block, lp.smem_bytes, cooperative=True)}
    res = {x: [] for x in gos}
    reps = max(5, int(2e12 / (2 * m * n * k) ))
    reps = min(reps, 200)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    for r in range(9):
        for name, go in gos.items():
            for _ in range(3): go(buf, 0)
            e0.record(cp.cuda.Stream.null)
            for _ in range(reps): go(buf, 0)
            e1.record(cp.cuda.Stream.null); e1.synchronize()
            if r: res[name].append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / reps)
    # the result of the cooperative launches is still right
    ref = (a.astype(cp.float32) @ b.astype(cp.float32))
    err = float(cp.abs(o.astype(cp.float32) - ref).max() / cp.abs(ref).max())
    p, c = statistics.median(res["plain"]), statistics.median(res["coop"])
    print(f"{var:50s} {m}x{n}x{k} grid {lp.grid} plain {p:8.1f} us  coop {c:8.1f} us  coop/plain {c/p:.3f}  relerr {err:.1e}")
