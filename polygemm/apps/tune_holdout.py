"""``polygemm tune --holdout FRACTION``: the cost model judged on shapes it was not fitted to.

The measured tables (``tuning/auto_fp16.json``, ``auto_fp32.json``: every auto-selectable rung
timed at the benchmark's shapes) are split by shape: a seeded random ``FRACTION`` of the shapes
is held out, the model is refitted on the rest, and at each held-out shape its pick is compared
with the rung measured fastest there (``best µs / pick µs``: 1.0 is a perfect pick). The same
shapes ranked by the model fitted on everything say how much of the miss is extrapolation. No
GPU is needed: the tables hold the timings.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from ..backends.cuda import cost
from ..backends.cuda.catalog import TUNED_AS, auto_specs, tuning_records
from ..core.problem import new_result_layout
from ..errors import ArgumentError
from .outputs import emit_json

__all__ = ["HeldOut", "measured_us", "split_shapes", "judge", "holdout_table", "cmd_holdout"]

Shape4 = tuple[int, int, int, int]  # m, n, k, batch


@dataclass(frozen=True)
class HeldOut:
    """One held-out shape: the fastest measured candidate, and the picks of the model refitted
    without the shape and fitted with it (µs as measured; nan where the pick was not measured)."""

    shape: Shape4
    best: str
    best_us: float
    pick: str
    pick_us: float
    fitted_pick: str
    fitted_us: float

    @property
    def ratio(self) -> float:
        return self.best_us / self.pick_us if self.pick_us == self.pick_us else math.nan

    @property
    def fitted_ratio(self) -> float:
        return self.best_us / self.fitted_us if self.fitted_us == self.fitted_us else math.nan


def _shape(r: dict[str, Any]) -> Shape4:
    return int(r["m"]), int(r["n"]), int(r["k"]), int(r.get("batch") or 1)


def measured_us(records: Sequence[dict[str, Any]], eligible: set[str]) -> dict[Shape4, dict[str, float]]:
    """Per shape, each auto-selectable candidate's median measured µs (its records' TFLOP/s)."""
    by: dict[Shape4, dict[str, list[float]]] = {}
    for r in records:
        if cost.split_of(str(r.get("variant")))[0] not in eligible or float(r.get("tflops") or 0) <= 0:
            continue
        s = _shape(r)
        us = 2.0 * s[0] * s[1] * s[2] * s[3] / (float(r["tflops"]) * 1e6)
        by.setdefault(s, {}).setdefault(str(r["variant"]), []).append(us)
    return {s: {v: statistics.median(ts) for v, ts in vs.items()} for s, vs in by.items()}


def split_shapes(shapes: Sequence[Shape4], fraction: float, seed: int) -> tuple[set[Shape4], set[Shape4]]:
    """(held out, kept): a seeded random ``fraction`` of ``shapes`` held out (at least one, one kept)."""
    ordered = sorted(shapes)
    n_out = min(max(1, round(fraction * len(ordered))), len(ordered) - 1)
    out = set(random.Random(seed).sample(ordered, n_out))
    return out, set(ordered) - out


def _pick(dtype: str, rows: tuple[dict[str, Any], ...], s: Shape4, sm: int, sms: int) -> str:
    # the result laid out as the planner lays out a new one, as where it was measured
    layout = new_result_layout(s[0], s[1], s[3] > 1)
    ranked = cost.rank(auto_specs(dtype, sm, s[3] > 1), rows, s[0], s[1], s[2], count=s[3], sms=sms, result_layout=layout)
    return ranked[0].label if ranked else ""


def judge(dtype: str, fraction: float, seed: int, records: Sequence[dict[str, Any]] | None = None, sm: int = 90,
          sms: int = 132) -> list[HeldOut]:
    """The held-out shapes of ``dtype``'s table, each with the refitted and the fully fitted picks."""
    tuned = TUNED_AS.get(dtype, dtype)
    recs = [r for r in (tuning_records(dtype) if records is None else records) if r.get("dtype", tuned) == tuned]
    eligible = {s.name for s in auto_specs(dtype, sm)} | {s.name for s in auto_specs(dtype, sm, True)}
    table = measured_us(recs, eligible)
    if len(table) < 2:
        raise ArgumentError(f"--holdout: {dtype}'s measured table has {len(table)} shapes; at least 2 are needed")
    held, _ = split_shapes(list(table), fraction, seed)
    train = tuple(r for r in recs if _shape(r) not in held)
    full = tuple(recs)
    out = []
    for s in sorted(held):
        times = table[s]
        best = min(times, key=lambda v: times[v])
        pick, fitted = _pick(dtype, train, s, sm, sms), _pick(dtype, full, s, sm, sms)
        out.append(HeldOut(s, best, times[best], pick, times.get(pick, math.nan), fitted, times.get(fitted, math.nan)))
    return out


def _geo(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x == x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def holdout_table(rows: Sequence[HeldOut]) -> str:
    """Each held-out shape: the best measured, the refitted model's pick (best µs / its µs), and
    the fully fitted model's; then the geometric means and the misses over 10%."""
    lines = [f"{'shape':22s}  {'measured best':40s}  {'µs':>8s}  {'held-out pick':40s}  {'ratio':>6s}  {'fitted ratio':>12s}"]
    for r in rows:
        m, n, k, c = r.shape
        shape = (f"{c} x " if c > 1 else "") + f"{m}x{n}x{k}"
        ratio = "n/m" if r.ratio != r.ratio else f"{r.ratio:.3f}"
        fitted = "n/m" if r.fitted_ratio != r.fitted_ratio else f"{r.fitted_ratio:.3f}"
        lines.append(f"{shape:22s}  {r.best:40s}  {r.best_us:8.1f}  {r.pick:40s}  {ratio:>6s}  {fitted:>12s}")
    lines.append(_summary(rows))
    return "\n".join(lines)


def _summary(rows: Sequence[HeldOut]) -> str:
    seen = [r for r in rows if r.ratio == r.ratio]
    miss = sum(1 for r in seen if r.ratio < 1 / 1.1)
    return (f"{len(rows)} held-out shapes: the refitted model's pick runs at {_geo([r.ratio for r in seen]):.3f} of the measured "
            f"best (geometric mean over the {len(seen)} whose pick was measured), {miss} over 10% slower, "
            f"{len(rows) - len(seen)} picks never measured there (n/m); fitted on every shape: "
            f"{_geo([r.fitted_ratio for r in rows]):.3f}")


def cmd_holdout(args: argparse.Namespace) -> int:
    fraction = float(args.holdout)
    if not 0 < fraction < 1:
        raise ArgumentError(f"--holdout must be a fraction between 0 and 1, exclusive (the share of shapes held out); got {args.holdout}")
    dtypes = [args.dtype]
    payload: dict[str, Any] = {"fraction": fraction, "seed": args.seed, "dtypes": {}}
    texts = []
    for dtype in dtypes:
        rows = judge(dtype, fraction, args.seed)
        payload["dtypes"][dtype] = [{"m": r.shape[0], "n": r.shape[1], "k": r.shape[2], "batch": r.shape[3], "best": r.best,
                                     "best_us": r.best_us, "pick": r.pick, "pick_us": None if r.pick_us != r.pick_us else r.pick_us,
                                     "fitted_pick": r.fitted_pick, "fitted_us": None if r.fitted_us != r.fitted_us else r.fitted_us}
                                    for r in rows]
        texts.append(f"{dtype}, {len(rows)} of the measured shapes held out ({fraction:g} asked, at least one; seed {args.seed}):\n"
                     + holdout_table(rows))
    emit_json(args, payload, "\n\n".join(texts))
    return 0
