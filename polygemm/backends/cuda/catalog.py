"""What the cuda backend can run and which rung ``variant="auto"`` takes.

The variant table comes from the ladders' ``variants.json`` (:mod:`.variants`); the auto choice
from the measured tables ``tuning/auto_fp{32,16}.json``. Both are read once per process.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np

from ...errors import UnsupportedProblemError
from .planning import LaunchPlan
from .variants import VENDOR_VARIANT, kernel_specs

__all__ = ["TUNING_DIR", "tuning_file", "tuning_records", "choose_auto_variant", "tma_fallback", "check_smem"]

TUNING_DIR = Path(__file__).with_name("tuning")


def tuning_file(dtype: str) -> Path:
    """The measured table for ``dtype`` (``auto_fp32.json`` or ``auto_fp16.json``)."""
    return TUNING_DIR / f"auto_fp{np.dtype(dtype).itemsize * 8}.json"


@functools.lru_cache(maxsize=None)
def tuning_records(dtype: str) -> tuple[dict, ...]:
    """The records of ``dtype``'s measured table (empty when there is none); read once."""
    try:
        return tuple(json.loads(tuning_file(dtype).read_text())["records"])
    except FileNotFoundError:
        return ()


def choose_auto_variant(m: int, n: int, k: int, dtype: str = "float32", records: list[dict] | tuple[dict, ...] | None = None, sm: int = 0,
                        batched: bool = False) -> tuple[str, str]:
    """The auto-selectable rung that measured fastest at the shape nearest (m, n, k).

    Returns (variant, reason). Only predicated rungs are eligible (no padding copies), and for
    a batch only those with a batched build (the batch on the grid, not one launch a matrix).
    The measurements live in ``tuning/auto_fp32.json``/``auto_fp16.json``, written from
    ``polygemm bench``.
    """
    specs = kernel_specs()
    eligible = [s.name for s in specs.values() if s.predicated and s.dtype == dtype and (not sm or s.runs_on(sm))
                and (s.batch or not batched)]
    if not eligible:
        raise UnsupportedProblemError(f"no auto-selectable cuda kernel for {dtype}" + (f" on sm_{sm}" if sm else ""))
    name = tuning_file(dtype).name
    rows = [r for r in (records if records is not None else tuning_records(dtype)) if r["variant"] in eligible and r.get("dtype", "float32") == dtype]
    # batches are chosen from measurements of batches where there are any, single products from single ones
    same_kind = [r for r in rows if bool(r.get("batch")) == batched]
    rows = same_kind or rows
    if not rows:
        default = eligible[-1]
        return default, f"no measured table ({name}) for {dtype}: the last predicated rung, {default}"

    def dist(r: dict) -> float:
        return sum(abs(math.log(max(x, 1)) - math.log(max(int(r[key]), 1))) for x, key in ((m, "m"), (n, "n"), (k, "k")))

    nearest = min(dist(r) for r in rows)
    at = [r for r in rows if dist(r) == nearest]
    best = max(at, key=lambda r: float(r["tflops"]))
    shape = f"{best['m']}x{best['n']}x{best['k']}"
    if best.get("batch"):
        shape = f"{best['batch']} x {shape}"
    return best["variant"], f"fastest measured at the nearest benchmarked shape {shape} ({float(best['tflops']):.1f} TFLOP/s, {name})"


def tma_fallback() -> str:
    """The rung that serves problems a TMA rung cannot describe: the fp16 mma.sync rung."""
    return next(s.name for s in kernel_specs().values() if s.dtype == "float16" and s.predicated and s.abi == "standard")


def check_smem(lp: LaunchPlan, limit: int) -> None:
    """Raise UnsupportedProblemError when ``lp``'s build needs more dynamic shared memory per
    block than ``limit`` (the device's opt-in maximum), naming both and the way out."""
    if lp.smem_bytes > limit:
        raise UnsupportedProblemError(
            f"{lp.variant} needs {lp.smem_bytes} bytes of shared memory per block for this problem "
            f"({'aligned' if lp.vec else 'unaligned'} operands); this device allows {limit}: "
            f"use variant='{VENDOR_VARIANT}'" + ("" if lp.vec else " or 16-byte aligned operands")
        )
