"""``polygemm ceiling``: the device's mma.sync throughput ceiling beside cuBLAS HGEMM.

The ldmatrix + mma.sync rung (``hgemm_v1_mma_ldmatrix``) can go no faster than the rate at
which the SMs retire ``mma.sync.m16n8k16`` with operands already in registers. This command
measures that rate with ``kernels/hgemm/mma_peak_probe.cu`` (no memory traffic) and times
cuBLAS HGEMM on random fp16 data in the same process, repeat by repeat, with device events
after warm-up, and reports the medians and their ratio: the most any mma.sync kernel can
reach against cuBLAS on this device.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import shlex
import statistics
from typing import Any, Sequence

import numpy as np

from .. import registry
from ..backends.cuda.variants import KERNEL_DIR, VENDOR_VARIANT
from ..errors import BackendUnavailableError
from .arguments import positive_int
from .outputs import write_file, write_json

__all__ = ["PROBE_SOURCE", "PROBE_CHAINS", "PROBE_BLOCK", "measure_ceiling", "to_markdown", "add_parser"]

PROBE_SOURCE = KERNEL_DIR / "hgemm" / "mma_peak_probe.cu"
PROBE_CHAINS = 16  # independent accumulators per warp (PROBE_CHAINS in the kernel)
PROBE_BLOCK = 256
FLOP_PER_MMA = 2 * 16 * 8 * 16


def run_probe(rt: Any, blocks: int, iters: int, x: float = 1.0) -> tuple[Any, Any]:
    """Queue one probe launch; returns (device output array, launch callable)."""
    import pycuda.gpuarray as gpuarray

    fn = rt.function(PROBE_SOURCE, "hgemm_mma_peak_probe")
    words = np.full(12, x, np.float16).view(np.uint32)  # 6 fp16x2 words
    ab = gpuarray.to_gpu(words)
    out = gpuarray.empty(blocks * PROBE_BLOCK, np.float32)

    def launch() -> None:
        fn(ab, out, np.int32(iters), block=(PROBE_BLOCK, 1, 1), grid=(blocks, 1))

    return out, launch


def measure_ceiling(repeats: int = 5, shapes: Sequence[tuple[int, int, int]] = ((4096, 4096, 4096), (8192, 8192, 8192)),
                    blocks_per_sm: int = 4, iters: int = 8192) -> dict[str, Any]:
    """Median TFLOP/s of the mma.sync probe and of cuBLAS HGEMM at ``shapes``, interleaved."""
    be = registry.get_backend("cuda")
    av = be.probe()
    if not av.ok:
        raise BackendUnavailableError(f"device 'cuda' is unavailable: {av.reason}")
    rt = be.runtime  # type: ignore[attr-defined]
    timer = be.timer()
    rng = np.random.default_rng()
    with rt.active():
        sms = rt.device.get_attribute(rt.drv.device_attribute.MULTIPROCESSOR_COUNT)
        blocks = sms * blocks_per_sm
        out, probe = run_probe(rt, blocks, iters)
        probe_flop = blocks * (PROBE_BLOCK // 32) * iters * PROBE_CHAINS * FLOP_PER_MMA
        probe()
        rt.ctx.synchronize()
        expect = PROBE_CHAINS * 4 * iters * 16.0
        got = out.get()
        if not np.all(got == expect):
            raise AssertionError(f"mma probe computed {got[:4]}, expected {expect}")
        launches = []
        for (m, n, k) in shapes:
            a = be.to_device(rng.standard_normal((m, k), dtype=np.float32).astype(np.float16))
            b = be.to_device(rng.standard_normal((k, n), dtype=np.float32).astype(np.float16))
            c = be.to_device(np.zeros((m, n), np.float16))
            launch = be.launcher(VENDOR_VARIANT, a, b, c)  # type: ignore[attr-defined]
            launch()
            launches.append(((m, n, k), launch, (a, b, c)))
        rt.ctx.synchronize()
    probe_t: list[float] = []
    vendor_t: dict[tuple[int, int, int], list[float]] = {s: [] for s, _, _ in launches}
    try:
        for _ in range(repeats):
            probe_t.append(timer(lambda: [probe() for _ in range(3)]) / 3)
            for shape, launch, _ in launches:
                vendor_t[shape].append(timer(lambda: [launch() for _ in range(10)]) / 10)
    finally:
        for _, launch, _ in launches:
            launch.close()
    peak = probe_flop / statistics.median(probe_t) / 1e12
    rows = []
    for (m, n, k), ts in vendor_t.items():
        v = 2.0 * m * n * k / statistics.median(ts) / 1e12
        rows.append({"m": m, "n": n, "k": k, "cublas_tflops": v, "ceiling_over_cublas": peak / v})
    return {
        "device": be.device_name(),  # type: ignore[attr-defined]
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "repeats": repeats,
        "probe": {"blocks": int(blocks), "threads_per_block": PROBE_BLOCK, "iters": iters, "chains_per_warp": PROBE_CHAINS,
                  "flop_per_launch": probe_flop, "tflops_runs": [probe_flop / t / 1e12 for t in probe_t]},
        "mma_sync_ceiling_tflops": peak,
        "cublas": rows,
    }


def to_markdown(result: dict[str, Any], command: str) -> str:
    peak = result["mma_sync_ceiling_tflops"]
    lines = [
        f"Device: {result['device']}; date {result['date']}; median of {result['repeats']} repeats, probe and cuBLAS interleaved.",
        "",
        f"Command: `{command}`",
        "",
        f"mma.sync m16n8k16 (f16 in, f32 accumulate) ceiling, operands in registers: **{peak:.1f} TFLOP/s** "
        f"({result['probe']['blocks']} blocks x {result['probe']['threads_per_block']} threads, "
        f"{result['probe']['chains_per_warp']} independent accumulators per warp).",
        "",
        "| shape | cuBLAS HGEMM TFLOP/s | ceiling / cuBLAS | 0.75x cuBLAS as a share of the ceiling |",
        "|---|---|---|---|",
    ]
    for r in result["cublas"]:
        lines.append(f"| {r['m']}×{r['n']}×{r['k']} | {r['cublas_tflops']:.1f} | {r['ceiling_over_cublas']:.2f}× | "
                     f"{0.75 * r['cublas_tflops'] / peak:.0%} |")
    return "\n".join(lines)


def cmd_ceiling(args: argparse.Namespace) -> int:
    result = measure_ceiling(repeats=args.repeats)
    command = "polygemm " + shlex.join(args.argv)
    text = to_markdown(result, command)
    print(text)
    if args.json:
        write_json(args.json, {"command": command, **result})
    if args.markdown:
        write_file(args.markdown, lambda fh: fh.write(text + "\n"))
    return 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("ceiling", help="cuda: the mma.sync throughput ceiling beside cuBLAS HGEMM (same process)")
    s.add_argument("--repeats", type=positive_int, default=5, help="timed repeats of each kernel (median reported; default 5)")
    s.add_argument("--json", metavar="PATH", help="write the records as JSON to PATH")
    s.add_argument("--markdown", metavar="PATH", help="write the table as markdown to PATH")
    s.set_defaults(fn=cmd_ceiling)
