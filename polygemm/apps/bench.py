"""``polygemm bench``: time polygemm against the vendor library in the same process.

Two modes. ``--mode call`` (the default, :mod:`.bench_call`) times what a user gets: the
public ``polygemm.gemm(a, b, out=out, ...)`` on device arrays (or, with ``--inputs numpy``,
NumPy in and out), wall clock per call over many calls back to back, beside the vendor
libraries called the way their users call them (``torch.matmul`` and ``cupy.matmul`` where
installed, the faster of them the anchor; ``numpy.matmul`` on the CPU). ``--mode kernel``
(:mod:`.bench_kernel`) times each variant's raw launch with the backend's device events
beside the backend's vendor variant (cuBLAS for cuda, NumPy's BLAS for cpu).

Either way: warm-up first, two rotating input sets of random normal data (never zeros, see
:class:`.bench_inputs.Normals`), the median of several repeats of a batch of calls
(``--repeats auto``: more for small products, fewer for large ones), TFLOP/s = 2·M·N·K / t,
and the vendor timed in turn with polygemm, repeat by repeat, each ratio using those
neighbouring timings; each ratio's range over the repeats is reported beside it, with a
warning where it is wide (a noisy machine). In kernel mode, ``--variants auto`` launches the
rung ``auto`` chooses for each shape (recorded as ``variant``, with ``requested="auto"``).

This module is the command; it also gathers the benchmark's public names from the
``bench_*`` modules, so that ``polygemm.apps.bench`` is the one import a script needs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, Sequence

from .. import registry
from ..backend import Backend
from ..errors import ArgumentError, BackendUnavailableError, did_you_mean
from .arguments import choice_word, dtype_name, non_negative_int, positive_int, split_names
from .bench_call import call_setup, run_call_bench, time_interleaved
from .bench_inputs import Normals, check_variant_names
from .bench_kernel import run_bench
from .bench_progress import Progress
from .bench_records import BenchRecord, load_records, record_json
from .bench_report import WIDE_SPREAD, call_markdown, ladder_tables, spread_warning, to_markdown
from .bench_shapes import (GPU_PRESETS, PRESETS, SWEEP_K, SWEEP_MN, Shape, auto_repeats, default_shapes, layout_of,
                           parse_shapes, preset_summary, runs_on_host, shape_text, sweep_shapes)
from .bench_timing import CallTimed, KernelTimed, ratio_range
from .outputs import write_file, write_json

__all__ = ["add_parser", "cmd_bench", "PRESETS", "SWEEP_MN", "SWEEP_K", "sweep_shapes", "auto_repeats", "default_shapes",
           "parse_shapes", "BenchRecord", "load_records", "record_json", "run_bench", "run_call_bench", "call_setup",
           "time_interleaved", "CallTimed", "KernelTimed", "ratio_range", "Normals", "Progress", "to_markdown",
           "call_markdown", "ladder_tables", "spread_warning", "WIDE_SPREAD", "Shape"]


def _intro(be: Backend, device: str, dtype: str, mode: str, inputs: str, shapes: Sequence[tuple[int, int, int]], preset: str) -> str:
    """The first line of a run: what is timed and, per backend, what the untimed warm-up covers."""
    host_only = tuple(getattr(be, "residencies", ("host",))) == ("host",)
    what = ("polygemm.gemm per call, wall clock, beside the vendor as its users call it" if mode == "call"
            else "each variant's raw launch beside the backend's vendor variant")
    if host_only:
        warm = "warm-up calls first, not timed"
    elif mode == "call" and inputs == "numpy":
        warm = "warm-up calls (compilation, module load) first, not timed; every timed call copies host<->device"
    else:
        warm = "warm-up calls (compilation, module load) first, not timed; the data stays on the device"
    return (f"polygemm bench: {device} {dtype}, {mode} mode, {len(shapes)} shape{'' if len(shapes) == 1 else 's'}{preset}: "
            f"{what}; {warm}")


def _bench_device(device: str | None) -> str:
    """``--device`` as every command reads it: a name, or auto ($POLYGEMM_DEVICE, else the
    available backend of highest priority). Returns the backend's own name (a plugin's entry
    point as spelt, ``cuda:1`` with its index); raises BackendUnavailableError, before anything
    is timed, for a name that is unknown, unavailable here or an index the backend refuses,
    saying so when the name came from $POLYGEMM_DEVICE."""
    name = registry.resolve_device(device)
    if name == "auto":
        for info in registry.backends():
            if info.available:
                return info.name
        raise BackendUnavailableError("no backend is available to benchmark")
    info, index, env = registry.locate_device(device)
    found = info.name
    if not info.available:
        raise BackendUnavailableError(f"device {found!r} is unavailable: {info.reason}{env}", details=info.detail)
    if index is None:
        return found
    try:
        registry.get_backend(f"{found}:{index}")
    except BackendUnavailableError as exc:
        raise BackendUnavailableError(f"{exc}{env}", details=exc.details) from None
    return f"{found}:{index}"



def _refuse_gpu_presets(args: argparse.Namespace, be: Backend, device: str) -> None:
    """A GPU preset (``real``) named for a backend that runs on the host is a usage error, before
    anything is timed: its products are GFLOPs to TFLOPs each, hours of a CPU's time, which
    nobody asking for a benchmark means to wait for. ``--max-dim N`` says which of them to keep,
    and is taken as that choice."""
    if args.max_dim is not None or not runs_on_host(be):
        return
    named = [p.strip().lower() for item in args.shapes or [] for p in item.split(",") if p.strip().lower() in GPU_PRESETS]
    if named:
        shapes = PRESETS[named[0]]
        tflop = sum(2.0 * m * n * k for m, n, k in shapes) / 1e12
        raise ArgumentError(f"--shapes {named[0]} is a preset for GPUs ({len(shapes)} products, {tflop:.0f} TFLOP a pass: hours "
                            f"on {device}, which runs on the host); time it on a GPU (--device cuda), or here use --shapes cpu "
                            "(seconds) or your own MxNxK[:LAYOUT] shapes, or add --max-dim N to keep only its products "
                            "of no dimension above N")


def cmd_bench(args: argparse.Namespace) -> int:
    def shapes_of(items: Sequence[str]) -> list[tuple[int, int, int]]:
        try:
            return parse_shapes(items)
        except argparse.ArgumentTypeError as exc:
            words = [p.strip() for item in items for p in item.split(",") if p.strip() and "x" not in p.lower()]
            raise ArgumentError(f"--shapes: {exc}{did_you_mean(words, PRESETS)}; presets: {', '.join(PRESETS)}") from None

    shapes = shapes_of(args.shapes) if args.shapes else []
    # the parser's types check these (a usage error, exit 2); a Namespace made by hand is checked here
    if not 0 <= args.settle < float("inf"):  # nan and inf too (inf would settle for ever)
        raise ArgumentError(f"--settle must be >= 0 seconds and finite; got {args.settle}")
    if args.repeats != "auto" and args.repeats < 1:
        raise ArgumentError(f"--repeats must be at least 1 or auto; got {args.repeats}")
    # an option of the other mode is refused, not ignored: "--mode kernel --batch 64" would time single products, records
    # that look like what was asked for and are not
    if args.mode == "kernel":
        given = [f"--{opt} {value}" for opt, value, default in
                 (("batch", args.batch, 0), ("inputs", args.inputs, "device"), ("result", args.result, "out"),
                  ("array-lib", args.array_lib, "auto")) if value != default]
        if given:
            raise ArgumentError(f"{', '.join(given)}: {'call-mode options' if len(given) > 1 else 'a call-mode option'}, which kernel mode "
                                "(each variant's raw launch) does not use; pass --mode call, or omit "
                                f"{'them' if len(given) > 1 else 'it'}")
    elif args.settle > 0:
        raise ArgumentError(f"--settle {args.settle:g}: a kernel-mode option, which call mode (polygemm.gemm per call) does "
                            "not use; pass --mode kernel, or omit it")
    if args.plot:  # before any timing: a missing dependency must not cost the run
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise ArgumentError(f"--plot needs matplotlib ({exc}); install it with pip install 'polygemm[plot]'") from None
    device = _bench_device(args.device)
    be = registry.get_backend(device)
    _refuse_gpu_presets(args, be, device)
    dtypes = be.dtypes()
    if args.dtype not in dtypes:  # before the run's first line, in the command's terms
        raise ArgumentError(f"--dtype {args.dtype}: backend {be.name!r} does not compute it; it computes "
                            f"{', '.join(dtypes)}: pass --dtype {dtypes[0] if len(dtypes) == 1 else 'one of them'}")
    preset = ""
    if not args.shapes:  # per device: seconds on a CPU, the large cubes on a GPU
        chosen = default_shapes(be)
        shapes, preset = shapes_of(chosen), f" (preset {', '.join(chosen)})"
    if args.max_dim is not None:
        kept = [s for s in shapes if max(s) <= args.max_dim]
        if len(kept) < len(shapes):
            preset += f" ({len(shapes) - len(kept)} more above --max-dim {args.max_dim} left out)"
        shapes = kept
        if not shapes:
            raise ArgumentError(f"--max-dim {args.max_dim} leaves out every shape; nothing to time")
    empty = [s for s in shapes if min(s) == 0]
    if empty:  # no arithmetic to time: 0 FLOP/s, a ratio of two overheads, and no place on a size axis
        raise ArgumentError(f"--shapes {shape_text(*empty[0], layout_of(empty[0]))}: a product with a zero dimension does no arithmetic; "
                            "nothing to time (every dimension must be >= 1)")
    # --repeats auto: a count per shape (auto_repeats); runs of shapes sharing one are timed together
    itemsize = 2 if "16" in args.dtype else (8 if "64" in args.dtype else 4)
    chunks: list[tuple[int, list[tuple[int, int, int]]]] = []
    for shape in shapes:
        reps = auto_repeats(*shape, itemsize=itemsize) if args.repeats == "auto" else args.repeats
        if chunks and chunks[-1][0] == reps:
            chunks[-1][1].append(shape)
        else:
            chunks.append((reps, [shape]))
    command = "polygemm " + shlex.join(args.argv)
    bar = not args.no_progress and sys.stdout.isatty()
    # "--variants ," would time nothing and exit 0 (an empty --json): split_names refuses it
    given = list(dict.fromkeys(split_names("--variants", args.variants, "variant", "polygemm variants lists them", "all") or []))
    if "all" in given and len(given) > 1:  # every variant, or the ones named: not both
        raise ArgumentError(f"--variants {','.join(given)}: 'all' times every variant and takes no other names beside it; "
                            f"pass --variants all, or the names alone")
    names = given or ["auto"]
    if args.mode == "call" and names == ["all"]:  # every variant of the dtype, each through the public call
        names = [v.name for v in be.variants() if args.dtype in v.dtypes and not v.vendor]
    if names != ["all"]:  # every name checked before anything is timed: a typo in the last must not cost the run
        check_variant_names(be, device, args.dtype, names)
    if args.mode == "call" and args.array_lib != "auto" and runs_on_host(be):  # (before the run's first line)
        raise ArgumentError(f"--array-lib {args.array_lib}: backend {be.name!r} takes host (NumPy) arrays, so its call is "
                            "timed on NumPy arrays; omit --array-lib")
    # the arrays and the vendor a call is timed beside, found once, before the run's first line
    setup = call_setup(be, args.dtype, args.array_lib) if args.mode == "call" else None
    print(_intro(be, device, args.dtype, args.mode, args.inputs, shapes, preset), flush=True)
    records: list[BenchRecord] = []  # every record as soon as it is timed: what Ctrl-C keeps
    too_large: list[str] = []  # shapes whose host arrays did not fit: left out, the others timed, exit 2
    try:
        if args.mode == "call":
            with Progress(len(names) * len(shapes), f"bench {device}", bar) as prog:
                for name in names:
                    for reps, part in chunks:
                        run_call_bench(device, args.dtype, part, variant=name, inputs=args.inputs, repeats=reps,
                                       progress=prog.line, step=prog.step, batch=args.batch, array_lib=args.array_lib,
                                       result=args.result, sink=records, too_large=too_large, setup=setup)
        else:
            variants: Sequence[str] | str = "all" if given in ([], ["all"]) else given
            count = (len([v for v in be.variants() if args.dtype in v.dtypes and not v.vendor]) if variants == "all" else len(variants))
            with Progress(count * len(shapes), f"bench {device}", bar) as prog:
                for reps, part in chunks:
                    run_bench(device, args.dtype, variants, part, repeats=reps, settle=args.settle,
                              progress=prog.line, step=prog.step, sink=records, too_large=too_large)
    except MemoryError as exc:  # past the operands (a call's work arrays): the records timed so far kept
        sys.stdout.flush()
        written = _write_outputs(args, records, command) if records else []
        kept = f"; the {len(records)} record(s) timed before it written to {', '.join(written)}" if written else ""
        print(f"polygemm: error: out of host memory while timing ({exc or 'MemoryError'}); pick smaller shapes "
              f"(or --max-dim N){kept}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout went away (bench ... | head): the records timed so far still kept, as
        if records:           # for Ctrl-C; then the command ends as a closed pipe ends it (status 141)
            _write_outputs(args, records, command, interrupted=True)
        raise
    except KeyboardInterrupt:
        sys.stdout.flush()
        written = _write_outputs(args, records, command, interrupted=True) if records else []
        kept = (f"the {len(records)} record{'s' if len(records) != 1 else ''} timed so far written to {', '.join(written)}"
                if written else (f"{len(records)} records timed so far, not written (no --json or --markdown)" if records
                                 else "nothing was timed; no file written"))
        print(f"polygemm: interrupted: {kept}", file=sys.stderr)
        return 130
    if not records and not too_large:  # every product refused (the lines above say why): no empty file, no success
        print("polygemm: error: nothing was timed (each product was refused, as the lines above say); no file written",
              file=sys.stderr)
        return 1
    written = _write_outputs(args, records, command) if records else []
    if written:  # say where the results went (plot -o says so too)
        print(f"wrote {', '.join(written)}")
    warning = spread_warning(records)
    if warning:
        print(f"polygemm bench: {warning}", file=sys.stderr)
    if too_large:  # the shapes asked for and not timed: a usage error, as polygemm gemm's for such a --shape
        shown = sorted(set(too_large), key=too_large.index)
        print(f"polygemm: error: {len(shown)} shape{'s' if len(shown) > 1 else ''} not timed, too large for this machine: "
              f"{shown[0]}{f' (and {len(shown) - 1} more)' if len(shown) > 1 else ''}; pick smaller --shapes (or --max-dim N"
              f"{', a smaller --batch' if args.batch else ''})", file=sys.stderr)
        return 2
    return 0


def _write_outputs(args: argparse.Namespace, records: list[BenchRecord], command: str, interrupted: bool = False) -> list[str]:
    """Write --json, --markdown and --plot (each whole or not at all); the paths written."""
    written = []
    if args.json:
        payload: dict[str, Any] = {"command": command}
        if interrupted:
            payload["interrupted"] = True  # the records of a run cut short (Ctrl-C, or its output closed)
        payload["records"] = [record_json(r) for r in records]
        warning = spread_warning(records)
        if warning:
            payload["warnings"] = [warning]
        write_json(args.json, payload, allow_nan=False)
        written.append(args.json)
    if args.markdown:
        text = to_markdown(records, command) + "\n"
        if interrupted:
            text = f"**Interrupted** (Ctrl-C, or its output closed): the {len(records)} records timed before it.\n\n" + text
        write_file(args.markdown, lambda fh: fh.write(text))
        written.append(args.markdown)
    if args.plot and records:
        from .plot import plot_records  # matplotlib, imported only when a chart is asked for

        plot_records(records, args.plot)
        written.append(args.plot)
    return written


def _repeats_arg(text: str) -> int | str:
    """``--repeats``: an integer >= 1, or ``auto`` (:func:`auto_repeats` per shape)."""
    if text == "auto":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or auto; got {text!r}") from None


def _seconds_arg(text: str) -> float:
    """``--settle``: seconds, a finite number >= 0 (inf would settle for ever, nan not at all)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds and finite; got {text!r}")
    return value




def add_parser(sub: Any) -> None:
    s = sub.add_parser("bench", help="time polygemm against the vendor library (same process)")
    s.add_argument("--device", default=None, help="backend to time (default: $POLYGEMM_DEVICE, else the best available)")
    s.add_argument("--mode", type=choice_word, choices=["call", "kernel"], default="call",
                   help="call: the public polygemm.gemm per call (wall clock) beside the vendor as its users call it; "
                        "kernel: each variant's raw launch (device events) beside the backend's vendor variant")
    s.add_argument("--inputs", type=choice_word, choices=["device", "numpy"], default="device",
                   help="call mode: device arrays (CuPy, else torch) with out=, or NumPy in and out (copies included)")
    s.add_argument("--result", type=choice_word, choices=["out", "new"], default="out",
                   help="call mode: out: both calls write into a given out= array; new: each call makes its result "
                        "(polygemm.gemm(a, b) beside cupy.matmul(a, b) on device arrays, beside a @ b on a host backend's "
                        "NumPy arrays), the allocation timed in both")
    s.add_argument("--array-lib", type=choice_word, choices=["auto", "cupy", "torch"], default="auto",
                   help="call mode: whose device arrays polygemm.gemm is timed on (auto: CuPy, else torch); torch.matmul and "
                        "cupy.matmul are both timed beside it where installed, the ratio taken to the faster")
    s.add_argument("--batch", type=non_negative_int, default=0, metavar="N",
                   help="call mode: a strided batch of N products per call (vendor: its batched GEMM, e.g. torch.matmul on 3-D)")
    s.add_argument("--dtype", default="float32", type=dtype_name, choices=["float16", "bfloat16", "float32", "float64"],
                   help="element type of A, B and C (bfloat16: ml_dtypes' for NumPy, torch's on the device)")
    s.add_argument("--variants", nargs="+", action="extend", default=None,
                   help="variant names (comma or space separated); call mode default: auto; kernel mode default: all, "
                        "and auto there is the raw launch of the rung auto picks for each shape")
    s.add_argument("--shapes", nargs="+", action="extend", default=None,
                   help="MxNxK items (MxNxK:LAYOUT for operands in a layout: nn, nt, tn or tt, A's letter then B's, t a "
                        "transposed view, e.g. 4096x6144x4096:nt for x @ W.T) and presets: "
                        + "; ".join(f"{name} ({preset_summary(shapes)})" for name, shapes in PRESETS.items())
                        + ". Default: square on a GPU (cuda, musa), cpu on the CPU (seconds on 2 cores); real is refused "
                          "on the CPU (hours there)")
    s.add_argument("--repeats", type=_repeats_arg, default=5,
                   help="timed repeats, the median reported with the ratio's range over them; auto: by each shape's FLOPs "
                        "and bytes, 7 for the smallest (launch-bound) products, 5, 3 for the largest (see bench_shapes.auto_repeats)")
    s.add_argument("--max-dim", type=positive_int, default=None, metavar="N",
                   help="leave out the shapes with a dimension above N (e.g. the sweep preset's small end on a CPU)")
    s.add_argument("--settle", type=_seconds_arg, default=0.0, metavar="SECONDS",
                   help="kernel mode: run each kernel alone this long before timing its repeats (sustained clocks) "
                        "instead of interleaving the vendor repeat by repeat")
    s.add_argument("--json", metavar="PATH", help="write the records as JSON")
    s.add_argument("--markdown", metavar="PATH", help="write the tables as markdown")
    s.add_argument("--plot", metavar="PATH", help="chart of FLOP/s against problem size with min-max bars, in the format the "
                                                  "extension names (PNG without one; needs matplotlib: pip install 'polygemm[plot]'; "
                                                  "checked before any timing)")
    s.add_argument("--no-progress", action="store_true",
                   help="plain result lines, no progress bar (a bar is drawn only on a terminal, with tqdm or rich installed)")
    s.set_defaults(fn=cmd_bench)
