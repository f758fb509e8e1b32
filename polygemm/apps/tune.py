"""``polygemm tune``: measure, on this GPU, which of ``auto``'s top candidates runs each product
of a workload fastest, and keep the winners in the per-GPU tuning cache, which ``auto`` then
reads before the cost model's estimate (``polygemm explain`` says "measured on this GPU").

The workload is a list of shapes (``--shape MxNxK[:LAYOUT]``, as ``polygemm bench`` takes
them), presets (``--shapes real``), or the products a run recorded (``--from FILE``, written
under ``polygemm.tuning.record(FILE)`` or ``$POLYGEMM_RECORD_SHAPES=FILE``). It prints a table:
each shape, the winner and its µs a launch, the estimate's pick and its measured µs, the gain.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import registry
from ..errors import ArgumentError, BackendUnavailableError, PolygemmError, did_you_mean
from ..problem import dtype_named, normalize
from ..tuning import read_records
from .arguments import dtype_name, non_negative_int, positive_int
from .bench_layout import Shape, layout_of, shape_text
from .bench_shapes import PRESETS, parse_bench_shape, parse_shapes
from .explain import operands
from .outputs import add_json_option, emit_json

__all__ = ["Job", "TuneRow", "jobs_from_args", "tune_table", "run_tune", "cmd_tune", "add_parser", "DTYPES"]

DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Job:
    """One product to tune: its shape (with the operands' layout), dtype, result dtype, batch
    count (0: one product) and the result's layout."""

    shape: tuple[int, int, int]
    dtype: str
    out_dtype: str
    batch: int = 0
    out_layout: str = "row"

    def text(self) -> str:
        m, n, k = self.shape
        dt = self.dtype + (f"->{self.out_dtype}" if self.out_dtype != self.dtype else "")
        return (f"{self.batch} x " if self.batch else "") + shape_text(m, n, k, layout_of(self.shape)) + f" {dt}"

    def problem(self) -> Any:
        """The product as a call with these operands would describe it (host arrays whose values
        are never read: zeros the allocator does not touch)."""
        layout = layout_of(self.shape)
        a, b = operands(tuple(self.shape), self.dtype, layout[0] == "t", layout[1] == "t", self.batch)  # type: ignore[arg-type]
        m, n, _ = self.shape
        out = None
        if self.out_layout == "col":
            lead = (self.batch,) if self.batch else ()
            out = np.zeros(lead + (n, m), dtype_named(self.out_dtype)).swapaxes(-1, -2)
        return normalize(a, b, out=out, out_dtype=None if out is not None or self.out_dtype == self.dtype else self.out_dtype)


@dataclass(frozen=True)
class TuneRow:
    """One line of the table: the job and what was measured (None: nothing could be timed)."""

    job: Job
    winner: str = ""
    us: float = math.nan
    pick: str = ""
    pick_us: float = math.nan
    cached: bool = False  # an entry already in the cache, not measured again
    error: str = ""

    @property
    def gain(self) -> float:
        return self.pick_us / self.us if self.us > 0 and self.pick_us == self.pick_us else math.nan

    def record(self) -> dict[str, Any]:
        m, n, k = self.job.shape
        def nan(x: float) -> float | None:
            return None if x != x else round(x, 3)

        return {"m": m, "n": n, "k": k, "layout": layout_of(self.job.shape), "dtype": self.job.dtype, "out_dtype": self.job.out_dtype,
                "batch": self.job.batch, "winner": self.winner or None, "us": nan(self.us), "estimate_pick": self.pick or None,
                "estimate_pick_us": nan(self.pick_us), "gain": nan(self.gain), "cached": self.cached, "error": self.error or None}


def _shapes(items: Sequence[str], option: str) -> list[tuple[int, int, int]]:
    try:
        return parse_shapes(items)
    except argparse.ArgumentTypeError as exc:
        words = [p.strip() for item in items for p in item.split(",") if p.strip() and "x" not in p.lower()]
        raise ArgumentError(f"{option}: {exc}{did_you_mean(words, list(PRESETS))}; presets: {', '.join(PRESETS)}") from None


def jobs_from_args(args: argparse.Namespace) -> list[Job]:
    """The products ``--shape``, ``--shapes`` and ``--from`` name, each once, in that order."""
    out_dtype = args.out_dtype or args.dtype
    jobs: list[Job] = [Job(s, args.dtype, out_dtype, args.batch) for s in list(args.shape or []) + _shapes(args.shapes or [], "--shapes")]
    if args.from_file:
        try:
            recs = read_records(args.from_file)
        except OSError as exc:
            raise ArgumentError(f"--from {args.from_file}: cannot be read ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise ArgumentError(f"--from {exc}") from None
        for r in recs:
            if r["dtype"] not in DTYPES:
                continue  # a product the cuda backend's auto does not weigh (complex, integers)
            jobs.append(Job(Shape(r["m"], r["n"], r["k"], r["layout"]), r["dtype"], r["out_dtype"], r["batch"],
                            str(r.get("out_layout") or "row")))
    if not jobs and args.from_file:
        raise ArgumentError(f"--from {args.from_file}: no product the cuda backend tunes ({', '.join(DTYPES)}) in the "
                            f"recording; name products with --shape or --shapes")
    if not jobs:
        raise ArgumentError("name the products to tune: --shape MxNxK[:LAYOUT] (repeatable), --shapes PRESET (e.g. real), "
                            "or --from FILE (a recording of polygemm.tuning.record)")
    return list(dict.fromkeys(jobs))


def tuning_backend(device: str) -> Any:
    """The backend that tunes: the cuda backend (``cuda`` or ``cuda:N``), available here."""
    if device.strip().lower() == "auto":  # (get_backend's refusal would offer every backend, most of which tune none)
        raise ArgumentError("--device auto: polygemm tune measures one GPU's choices; pass --device cuda or cuda:N")
    be = registry.get_backend(device)
    if not callable(getattr(be, "tune", None)):
        raise ArgumentError(f"--device {device}: {be.name} has no tuning cache; polygemm tune measures the cuda backend's "
                            "choices (--device cuda or cuda:N)")
    av = be.probe()
    if not av.ok:
        raise BackendUnavailableError(f"device {device!r} is unavailable: {av.reason}")
    return be


def run_tune(be: Any, jobs: Sequence[Job], *, top: int, splits: int, force: bool, budget_s: float = math.inf,
             progress: Any = None) -> list[TuneRow]:
    """Tune each job with ``be.tune`` and return the table's rows (a job that cannot be tuned is a
    row with its error, the others go on)."""
    rows: list[TuneRow] = []
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")  # as measurements record their time
    for job in jobs:
        try:
            problem = job.problem()
            _, m = be.tune(problem, top=top, splits=splits, force=force, budget_s=budget_s)
        except (PolygemmError, MemoryError) as exc:
            rows.append(TuneRow(job, error=f"{type(exc).__name__}: {exc}"))
        else:
            if m is None:
                rows.append(TuneRow(job, error="no candidate could be timed"))
            else:
                pick_us = m.pick_us
                rows.append(TuneRow(job, m.winner, m.us, m.estimate_pick, math.nan if pick_us is None else pick_us,
                                    cached=m.measured_at < started))
        if progress is not None:
            progress(tune_table(rows[-1:], header=False))
    return rows


def tune_table(rows: Sequence[TuneRow], header: bool = True) -> str:
    """The table ``polygemm tune`` prints: shape, winner, its µs, the estimate's pick, its µs, gain."""
    w_shape = max([5] + [len(r.job.text()) for r in rows])
    w_win = max([6] + [len(r.winner) for r in rows])
    w_pick = max([13] + [len(r.pick) for r in rows])
    lines = []
    if header:
        lines.append(f"{'shape':{w_shape}s}  {'winner':{w_win}s}  {'µs':>8s}  {'estimate pick':{w_pick}s}  {'µs':>8s}  {'gain':>6s}")
    for r in rows:
        if r.error:
            lines.append(f"{r.job.text():{w_shape}s}  not tuned: {r.error}")
            continue
        same = r.pick == r.winner
        pick_us = "" if r.pick_us != r.pick_us else f"{r.pick_us:8.1f}"
        gain = "" if r.gain != r.gain else f"{r.gain:5.2f}x"
        lines.append(f"{r.job.text():{w_shape}s}  {r.winner:{w_win}s}  {r.us:8.1f}  {('(same)' if same else r.pick):{w_pick}s}  "
                     f"{pick_us:>8s}  {gain:>6s}" + ("  (cached)" if r.cached else ""))
    return "\n".join(lines)


def _summary(rows: Sequence[TuneRow]) -> str:
    done = [r for r in rows if not r.error]
    gains = [r.gain for r in done if r.gain == r.gain and r.gain > 0]
    if not gains:
        return f"{len(done)} of {len(rows)} products tuned"
    geo = math.exp(sum(math.log(g) for g in gains) / len(gains))
    moved = sum(1 for r in done if r.pick != r.winner)
    text = (f"{len(done)} of {len(rows)} products tuned; the measurement overrules the estimate on {moved}; "
            f"geometric-mean gain over the estimate's pick {geo:.3f}x, best {max(gains):.2f}x")
    shapes = list(dict.fromkeys(shape_text(*r.job.shape, layout_of(r.job.shape)) for r in done if r.pick != r.winner and not r.job.batch))
    if shapes:  # what a call-mode benchmark with POLYGEMM_TUNE_CACHE=0 and without compares
        text += "\nthe products it moved, as polygemm bench --shapes takes them: " + ",".join(shapes)
    return text


#: the defaults of --device, --top and --splits (--holdout tells them from options given), and of --dtype
_DEVICE, _TOP, _SPLITS, _DTYPE = "cuda", 4, 4, "float16"


def cmd_tune(args: argparse.Namespace) -> int:
    if args.from_file is not None and not args.from_file.strip():  # "--from $FILE" with FILE unset
        raise ArgumentError(f"--from {args.from_file!r}: an empty path; name a recording (e.g. --from calls.jsonl)")
    if args.holdout is not None:
        from .tune_holdout import cmd_holdout

        # what --holdout does not read (its tables' own shapes, no GPU): refused rather than silently dropped
        given = [opt for opt, v in (("--shape", args.shape), ("--shapes", args.shapes), ("--from", args.from_file),
                                    ("--out-dtype", args.out_dtype is not None), ("--batch", args.batch),
                                    ("--device", args.device != _DEVICE), ("--top", args.top != _TOP),
                                    ("--splits", args.splits != _SPLITS), ("--budget", args.budget is not None),
                                    ("--force", args.force)) if v]
        if given:
            raise ArgumentError(f"--holdout judges the cost model on its measured tables' own shapes, without a GPU; it "
                                f"takes --dtype, --seed and --json, not {', '.join(given)} (tune products without --holdout)")

        if args.seed is None:
            args.seed = 0
        return cmd_holdout(args)
    if args.seed is not None:  # read by --holdout alone: refused rather than silently dropped
        raise ArgumentError(f"--seed {args.seed} picks the shapes --holdout holds out; tuning products takes no seed (add "
                            f"--holdout, or leave --seed out)")
    if args.from_file and not args.shape and not args.shapes:
        # a recording's products keep the dtype and batch they were recorded with: refused rather than silently dropped
        given = [f"{opt} {value}" for opt, value, unset in (("--dtype", args.dtype, _DTYPE), ("--out-dtype", args.out_dtype, None),
                                                            ("--batch", args.batch, 0)) if value != unset]
        if given:
            raise ArgumentError(f"{', '.join(given)}: --from's products are tuned in the dtypes and batches they were "
                                f"recorded with; {'these apply' if len(given) > 1 else 'it applies'} to --shape and --shapes "
                                f"products (name some, or leave {'them' if len(given) > 1 else 'it'} out)")
    jobs = jobs_from_args(args)
    be = tuning_backend(args.device)
    budget = math.inf if args.budget is None else args.budget
    quiet = bool(args.json)
    if not quiet:
        print(f"polygemm tune: {len(jobs)} products on {be.device_name()}; each times auto's {args.top} fastest estimates "
              f"and {args.splits} fastest split-K choices on scratch buffers", flush=True)
    rows = run_tune(be, jobs, top=args.top, splits=args.splits, force=args.force, budget_s=budget)
    text = tune_table(rows) + "\n" + _summary(rows)
    emit_json(args, {"device": be.device_name(), "rows": [r.record() for r in rows]}, text)
    return 1 if rows and all(r.error for r in rows) else 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0; got {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0; got {text!r}")
    return value


def _fraction(text: str) -> float:
    """``--holdout``: a number (whether it lies between 0 and 1 is checked where the shapes are held out)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, exclusive (the share of shapes held out, "
                                         f"e.g. 0.2); got {text!r}") from None


def add_parser(sub: Any) -> None:
    s = sub.add_parser("tune", help="measure auto's top candidates for a workload's products on this GPU and keep the winners")
    s.add_argument("--shape", action="append", type=parse_bench_shape, metavar="MxNxK[:LAYOUT]",
                   help="a product to tune (repeatable); LAYOUT is two letters of n and t, A's and B's (nt: x @ W.T)")
    s.add_argument("--shapes", nargs="+", action="extend", metavar="ITEM",
                   help=f"presets ({', '.join(PRESETS)}) or shapes, comma or space separated, as polygemm bench takes them")
    s.add_argument("--from", dest="from_file", metavar="FILE",
                   help="the products a run recorded (polygemm.tuning.record(FILE) or $POLYGEMM_RECORD_SHAPES=FILE), each in its dtype")
    s.add_argument("--dtype", default=_DTYPE, type=dtype_name, choices=list(DTYPES), help="dtype of --shape and --shapes products")
    s.add_argument("--out-dtype", default=None, type=dtype_name, choices=list(DTYPES), help="the result's dtype (default: --dtype)")
    s.add_argument("--batch", type=non_negative_int, default=0, metavar="N", help="a strided batch of N products each (0: one)")
    s.add_argument("--device", default=_DEVICE, help="the cuda backend, or cuda:N for one GPU")
    s.add_argument("--top", type=positive_int, default=_TOP, help="the cost model's fastest estimates timed per product")
    s.add_argument("--splits", type=non_negative_int, default=_SPLITS, help="and its fastest split-K choices beyond those")
    s.add_argument("--budget", type=_seconds, default=None, metavar="SECONDS",
                   help="no further candidate of a product starts after this many seconds (default: every candidate)")
    s.add_argument("--force", action="store_true", help="measure products the cache already holds again")
    s.add_argument("--holdout", type=_fraction, default=None, metavar="FRACTION",
                   help="judge the cost model instead: refit it without this share of the measured tables' shapes and "
                        "report how far its picks land from the measured best on them (no GPU needed)")
    s.add_argument("--seed", type=non_negative_int, default=None, help="--holdout: which shapes are held out (default 0)")
    add_json_option(s, "the table")
    s.set_defaults(fn=cmd_tune)
