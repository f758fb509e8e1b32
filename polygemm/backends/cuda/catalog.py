"""What the cuda backend can run and which rung ``variant="auto"`` takes.

The variant table comes from the ladders' ``variants.json`` (:mod:`.variants`); the auto choice
from the measured tables ``tuning/auto_fp{32,16,64}.json`` (a rung with none weighed at the rate its
row declares, ``prior_tflops``). Both are read once per process.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path


from typing import Sequence

from ...errors import UnsupportedProblemError
from ...problem import as_dtype
from . import cost
from .cost import Candidate
from .planning import LaunchPlan
from .variants import VENDOR_VARIANT, KernelSpec, kernel_specs

__all__ = ["TUNING_DIR", "tuning_file", "tuning_records", "auto_specs", "auto_candidates", "explain_choice", "anchored_aligned",
           "choose_auto_variant", "tma_fallback", "check_smem"]

TUNING_DIR = Path(__file__).with_name("tuning")
#: dtypes without measurements of their own -> the dtype whose measurements choose for them:
#: bfloat16 runs the float16 rungs' PG_BF16=1 builds (same tiles, same tensor-core rate)
TUNED_AS = {"bfloat16": "float16"}


def tuning_file(dtype: str) -> Path:
    """The measured table for ``dtype`` (``auto_fp32.json``, ``auto_fp16.json`` or ``auto_fp64.json``)."""
    return TUNING_DIR / f"auto_fp{as_dtype(dtype).itemsize * 8}.json"


@functools.lru_cache(maxsize=None)
def tuning_records(dtype: str) -> tuple[dict, ...]:
    """The records of ``dtype``'s measured table (empty when there is none); read once."""
    try:
        return tuple(json.loads(tuning_file(dtype).read_text())["records"])
    except FileNotFoundError:
        return ()


@functools.lru_cache(maxsize=None)
def _tuned_rows(dtype: str) -> tuple[dict, ...]:
    """The measured table's records of the dtype that chooses for ``dtype`` (one tuple per
    process, so the cost model's per-table work is done once)."""
    tuned = TUNED_AS.get(dtype, dtype)
    return tuple(r for r in tuning_records(dtype) if r.get("dtype", tuned) == tuned)


def auto_specs(dtype: str, sm: int = 0, batched: bool = False) -> list[KernelSpec]:
    """The rungs ``auto`` may choose for ``dtype`` on sm_``sm``: predicated (no padding copies),
    runnable there, and for a batch only those with a batched build (the batch on the grid),
    not a persistent-grid row (a TMA rung's batch already runs on a persistent grid: that row's
    batch is its base row's, measured under the base row's name)."""
    return [s for s in kernel_specs().values() if s.predicated and dtype in s.dtypes and (not sm or s.runs_on(sm))
            and (not batched or (s.batch and not s.persistent))]


def auto_candidates(m: int, n: int, k: int, dtype: str = "float32", records: Sequence[dict] | None = None, sm: int = 0,
                    count: int = 1, sms: int = 132, result_layout: str = "row", out_itemsize: int | None = None) -> list[Candidate]:
    """Every way ``auto`` weighs for the product (rung, K-slices), fastest estimate first: the
    cost model of :mod:`.cost`, anchored on the measured tables ``tuning/auto_fp*.json``."""
    eligible = auto_specs(dtype, sm, count > 1)
    if not eligible:
        raise UnsupportedProblemError(f"no auto-selectable cuda kernel for {dtype}" + (f" on sm_{sm}" if sm else ""))
    tuned = TUNED_AS.get(dtype, dtype)
    rows = _tuned_rows(dtype) if records is None else [r for r in records if r.get("dtype", tuned) == tuned]
    return cost.rank(eligible, rows, m, n, k, count=count, sms=sms, result_layout=result_layout, out_itemsize=out_itemsize)


def explain_choice(best: Candidate, ranked: Sequence[Candidate], dtype: str, records: Sequence[dict] | None = None) -> str:
    """The reason ``auto`` gives for ``best``: its estimate and the measurement it is anchored on."""
    rows = records if records is not None else _tuned_rows(dtype)
    text = f"cost model: {best.label} estimated fastest, {best.estimate_us:.1f} µs ({best.waves:.2f} waves on this device)"
    anchors = cost.anchors_for(kernel_specs()[best.variant], rows, *best.shape, best.count, best.splits)
    anchor = anchors[0] if anchors else None
    if anchor is not None and cost.split_of(str(anchor["variant"]))[0] == best.variant:
        shape = f"{anchor['m']}x{anchor['n']}x{anchor['k']}"
        shape = f"{anchor['variant']} at " + (f"{anchor['batch']} x {shape}" if anchor.get("batch") else shape)
        more = f" and its {len(anchors) - 1} next nearest" if len(anchors) > 1 else ""
        text += f"; anchored on the measurement of {shape} ({float(anchor['tflops']):.1f} TFLOP/s, {tuning_file(dtype).name}){more}"
    else:
        spec = kernel_specs()[best.variant]
        measured = {cost.split_of(str(r.get("variant")))[0] for r in rows}
        if spec.prior_tflops > 0 and not any(o.source == spec.source for name, o in kernel_specs().items() if name in measured):
            text += (f"; no measurements yet ({tuning_file(dtype).name}): weighed at the rate its row of variants.json "
                     f"expects, {spec.prior_tflops:g} TFLOP/s on the whole device")
        else:
            text += "; no measurement of its own (the constants of a rung built from the same source)"
    if dtype in TUNED_AS:
        text += f"; {dtype} is not tuned yet: {TUNED_AS[dtype]}'s measurements choose (the same rungs, built for {dtype})"
    return text + f"; {len(ranked)} candidates weighed"


def anchored_aligned(cand: Candidate, dtype: str, records: Sequence[dict] | None = None) -> bool:
    """Whether ``cand``'s estimate rests on a measurement of its rung at a shape whose rows are
    16-byte aligned (the benchmark's compact operands: K and N elements a row), so that the
    rung's aligned build set its pace there (False: no measurement of its own, or one taken on
    unaligned rows, which already carries the unaligned build's pace)."""
    rows = records if records is not None else _tuned_rows(dtype)
    anchors = cost.anchors_for(kernel_specs()[cand.variant], rows, *cand.shape, cand.count, cand.splits)
    anchor = anchors[0] if anchors else None
    if anchor is None or cost.split_of(str(anchor["variant"]))[0] != cand.variant:
        return False
    size = as_dtype(TUNED_AS.get(dtype, dtype)).itemsize
    return int(anchor["k"]) * size % 16 == 0 and int(anchor["n"]) * size % 16 == 0


def choose_auto_variant(m: int, n: int, k: int, dtype: str = "float32", records: Sequence[dict] | None = None, sm: int = 0,
                        batched: bool = False, count: int | None = None) -> tuple[str, str]:
    """The rung ``auto`` runs for an m×n×k product (the best candidate's rung) and why."""
    ranked = auto_candidates(m, n, k, dtype, records, sm, count if count is not None else (2 if batched else 1))
    if not ranked:
        default = auto_specs(dtype, sm, batched)[-1].name
        return default, f"no measured table ({tuning_file(dtype).name}) for {dtype}: the last predicated rung, {default}"
    return ranked[0].variant, explain_choice(ranked[0], ranked, dtype, records)


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
