"""The ``polygemm`` command line: its parser and entry point, and the commands ``info``,
``variants`` and ``gemm``; each other command (bench, tune, plot, matrix, explain,
compile, ceiling) is a module of :mod:`polygemm.apps` with its own ``add_parser``."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import textwrap
import warnings
from typing import Any, Sequence

import numpy as np

from .. import __version__, registry
from ..backend import Backend, Variant
from ..errors import ArgumentError, DeviceError, PolygemmError, VerificationError, did_you_mean
from .arguments import Once, Parser, add_verify_option, dtype_name, non_negative_int, positive_int, split_names
from .bench_inputs import host_memory
from .bench_layout import layout_of
from .bench_shapes import parse_bench_shape, reads_as_shape
from .explain import DTYPES as EXPLAIN_DTYPES
from .outputs import WriteFailed, add_json_option, emit_json, unwritable
from .precision_option import add_precision_option

__all__ = ["main", "build_parser", "INFO_WIDTH", "TABLE_WIDTH", "COMMAND_MODULES"]

#: ``polygemm info`` (without -v) prints no line wider than this
INFO_WIDTH = 120
#: ``polygemm variants`` fits its table in this many columns
TABLE_WIDTH = 100
#: the least of a variant's tile the variants table shows ("block 128x128x32, warp 64x32")
TILE_SHOWN = 32


def _fatal_free(fn: Any, *args: Any) -> tuple[Any, str | None]:
    """Call plugin code: (result, None), or (None, "ExcType: message") for anything it raises."""
    try:
        return fn(*args), None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a plugin must not take the CLI down
        return None, registry.one_line(f"{type(exc).__name__}: {exc}")


def _library(mod: str) -> tuple[str | None, str | None]:
    """(version, None) of an importable library, or (None, "ExcType: message") of one that is not."""
    try:
        m = importlib.import_module(mod)
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return str(getattr(m, "VERSION_TEXT", None) or getattr(m, "__version__", "unknown")), None


def _version(mod: str) -> str:
    version, err = _library(mod)
    return f"not importable ({err})" if version is None else version


def _fit(head: str, text: str, width: int = INFO_WIDTH) -> list[str]:
    """``head`` + ``text`` wrapped to ``width`` columns, continuation lines under the text."""
    indent = " " * (len(head) if len(head) <= width // 2 else 4)
    lines = textwrap.wrap(" ".join(str(text).split()), width=width, initial_indent=head, subsequent_indent=indent,
                          break_long_words=True, break_on_hyphens=False)
    return lines or [head.rstrip()]


def cmd_info(args: argparse.Namespace) -> int:
    verbose = getattr(args, "verbose", False)
    out: list[str] = [f"polygemm {__version__} (Python {sys.version.split()[0]})"]
    payload: dict[str, Any] = {"polygemm": __version__, "python": sys.version.split()[0], "libraries": {}, "backends": []}
    for mod in ("numpy", "cffi", "pycuda"):
        version, err = _library(mod)
        payload["libraries"][mod] = {"version": version, "error": err}
        out += _fit(f"  {mod:7s} ", registry.one_line(_version(mod)))
    out.append("backends (highest priority first):")
    infos = registry.backends()
    w = min(24, max([6] + [len(i.name) for i in infos]))
    more = False
    for info in infos:
        head = f"  {info.name:{w}s} priority {info.priority:3d}  "
        record: dict[str, Any] = {"name": info.name, "priority": info.priority, "available": bool(info.available),
                                  "device": None, "dtypes": None, "reason": registry.one_line(info.reason), "detail": info.detail or info.reason,
                                  "source": info.source, "errors": []}
        payload["backends"].append(record)
        if info.available and info.backend is not None:
            dev, err = _fatal_free(info.backend.device_name)
            if err is None:
                record["device"] = str(dev)
            else:
                record["errors"].append(f"device_name(): {err}")
            dev = dev if err is None else f"(device name unavailable: {err})"
            dtypes, err = _fatal_free(info.backend.dtypes)
            if err is None:
                dtypes, err = _fatal_free(lambda: [str(d) for d in dtypes])
            if err is None:
                record["dtypes"] = dtypes
            else:
                record["errors"].append(f"dtypes(): {err}")
            text = f"{registry.one_line(dev)} [{', '.join(dtypes) if err is None else err}]"
            out += _fit(head + "available    ", text)
        else:
            reason = registry.one_line(info.reason)
            out += _fit(head + "unavailable  ", reason)
            detail = (info.detail or info.reason).strip()
            lines = detail.splitlines()
            if lines and " ".join(lines[0].split()) == reason:
                lines = lines[1:]  # the reason above already says all of that line
            if lines:
                more = True
                if verbose:
                    for line in lines:
                        out.append(f"  {'':{w}s} | {line}")
        out += _fit(f"  {'':{w}s} from ", info.source)
    if more and not verbose:
        out.append("(polygemm info -v prints each reason in full)")
    emit_json(args, payload, "\n".join(out))
    return 0


_ABBREV = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128"}


def _dtypes_cell(dtypes: Sequence[str]) -> str:
    """A variant's dtypes as the table shows them: abbreviated, every integer dtype and bool as one word (int/bool)."""
    from ..core.dtypes import INTEGER_DTYPES

    ints = set(INTEGER_DTYPES) <= set(dtypes)
    shown = [_ABBREV.get(d, d) for d in dtypes if not (ints and d in INTEGER_DTYPES)]
    return "/".join(shown + (["int/bool"] if ints else []))
#: shorter words in the table's tile column (-v prints the tile as written)
_TILE_WORDS = (("threadblock", "block"), ("instruction", "instr"))


def _short_tile(tile: str) -> str:
    for long, short in _TILE_WORDS:
        tile = tile.replace(long, short)
    return tile


def _cell(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."[: width]


def _variants_backend(name: str) -> Backend:
    """The backend whose table ``polygemm variants --device NAME`` prints. The table needs no
    device: ``cuda:0`` on a machine where cuda is unavailable prints cuda's table; an index the
    backend refuses where it is available (``cpu:1``) is the caller's error."""
    if name.strip().lower() == "auto":
        raise ArgumentError("--device auto: 'auto' is not a backend (it chooses one per problem); name backends "
                            f"({', '.join(registry.known_names())}) or leave --device out to list every one")
    try:
        return registry.get_backend(name)
    except ArgumentError:  # e.g. an index written with a leading zero ("cuda:01"), on any machine
        raise
    except PolygemmError:
        base, index = registry.split_index(name.strip())
        if index is None:
            raise
        be = registry.get_backend(base)  # the name is known: only the device index was refused
        info = next((i for i in registry.backends() if i.backend is be), None)
        if info is not None and info.available:
            raise
        return be


def cmd_variants(args: argparse.Namespace) -> int:
    if isinstance(args.json, str) and not args.device and args.json.strip().partition(":")[0] in registry.known_names():
        # "variants --json cpu": --json took the backend meant for --device as its file name
        print(f"polygemm variants: error: --json {args.json} names a backend, not a file; give it as --device "
              f"{args.json} (with --json alone for JSON on standard output, or --json FILE.json)", file=sys.stderr)
        return 2
    args.device = split_names("--device", args.device, "backend", ", ".join(registry.known_names()),
                              "leave --device out to list every one")
    names = list(args.device) if args.device else registry.known_names()
    tables: list[tuple[str, list[Variant] | None, str]] = []
    seen: set[str] = set()
    for name in names:
        try:
            be = _variants_backend(name)
        except PolygemmError as exc:
            if args.device:  # a name the user gave: unknown, not loadable, an index the backend refuses (exit 2)
                raise
            tables.append((name, None, registry.one_line(exc)))  # every backend listed: a broken one is a row
            continue
        if be.name in seen:
            continue
        seen.add(be.name)
        vs, err = _fatal_free(lambda: list(be.variants()))
        if err is None and vs is not None:  # a plugin's table of the wrong kinds (tile=None) is a row of its own, not a crash
            err = registry.variant_table_error(vs)
        tables.append((be.name, None if err else vs, err or ""))
    payload = {"backends": [{"name": name, "variants": None if vs is None else [_variant_record(v) for v in vs],
                             "error": err or None} for name, vs, err in tables]}
    out: list[str] = []
    for name, vs, err in tables:
        if vs is None:
            out.append(f"{name}: {err}")
            continue
        out.append(f"{name}:")
        if not vs:
            out.append("  (no variants in this version)")
            continue
        # each backend's table sized to its own names and dtypes (the cpu backend's long dtypes cell must not cut the
        # cuda table's tiles)
        wn = max([7] + [len(v.name) for v in vs])
        wd = max([6] + [len(_dtypes_cell(v.dtypes)) for v in vs])
        head = f"  {'variant':{wn}s}  {'auto':6s}  {'dtypes':{wd}s}  {'layout':6s}  "
        out.append(head + "tile")
        for v in vs:
            auto = "yes" if v.auto else ("vendor" if v.vendor else "no")
            dts = _dtypes_cell(v.dtypes)
            row = f"  {v.name:{wn}s}  {auto:6s}  {dts:{wd}s}  {_cell(v.layout, 6):6s}  "
            # the tile whole where the line has room, else cut, but never below what names a tile ("block 64x128x64")
            out.append((row + _cell(_short_tile(v.tile), max(TILE_SHOWN, TABLE_WIDTH - len(row)))).rstrip())
            if args.verbose:
                body = [v.description]
                if v.requirements and v.requirements != "none":
                    body.append(f"needs: {v.requirements}")
                # (a wider result only of 16-bit inputs: the core takes float32 results of float16 and bfloat16 alone)
                halves = [d for d in v.dtypes if d in ("float16", "bfloat16")]
                dtypes = ", ".join(v.dtypes) + (f"; {' and '.join(halves)} also with {', '.join(v.out_dtypes)} results"
                                                if v.out_dtypes and halves else "")
                body.append(f"dtypes: {dtypes}" + (f"; tile: {v.tile}" if v.tile else ""))
                for text in body:
                    out += _fit("      ", text, TABLE_WIDTH)
    out.append("")
    out += _fit("", "auto: yes = variant='auto' may pick it when the problem fits (polygemm.explain(a, b) says "
                    "which one and why); no = only by name; vendor = the vendor library, the benchmarks' comparator. "
                    "-v adds descriptions and requirements.", TABLE_WIDTH)
    emit_json(args, payload, "\n".join(out))
    # a backend the user named whose table cannot be listed: its row, and the status of a device that cannot be used
    return 1 if args.device and any(vs is None for _, vs, _ in tables) else 0


def _variant_record(v: Variant) -> dict[str, Any]:
    """One row of ``polygemm variants --json``: the Variant's static fields (not its backend-private ``extra``)."""
    return {"name": str(v.name), "dtypes": [str(d) for d in v.dtypes], "out_dtypes": [str(d) for d in v.out_dtypes],
            "auto": bool(v.auto), "vendor": bool(v.vendor), "layout": str(v.layout), "tile": str(v.tile),
            "requirements": str(v.requirements), "description": str(v.description),
            "precision": str(getattr(v, "precision", "highest"))}


def cmd_gemm(args: argparse.Namespace) -> int:
    from ..problem import dtype_named

    m, n, k = args.shape
    dtype = dtype_named(args.dtype)  # bfloat16: ml_dtypes' type
    need = (m * k + k * n + m * n) * (8 + dtype.itemsize)  # the draws in float64, then the operands and result
    have = host_memory()
    if have and need > have:  # Linux grants such an allocation and its OOM killer ends the process later, silently
        print(f"polygemm: error: --shape {m}x{n}x{k}: operands and a result of that size need about {need / 2**30:.1f} GiB of "
              f"host memory; this machine has {have / 2**30:.1f} GiB; pick a smaller shape", file=sys.stderr)
        return 2
    try:
        rng = np.random.default_rng(args.seed)
        layout = layout_of(args.shape)  # "t": a transposed view (x @ W.T is nt), as explain and bench take it
        try:
            a = _draw(rng, (k, m), dtype).T if layout[0] == "t" else _draw(rng, (m, k), dtype)
            b = _draw(rng, (n, k), dtype).T if layout[1] == "t" else _draw(rng, (k, n), dtype)
        except (ValueError, OverflowError) as exc:  # past what NumPy can index ("Maximum allowed dimension exceeded")
            print(f"polygemm: error: --shape {m}x{n}x{k}: NumPy cannot make operands that large ({exc}); pick a smaller shape",
                  file=sys.stderr)
            return 2
        return _run_gemm(args, a, b, m, n, k)
    except MemoryError:  # the operands, or the result (and the work arrays) of a product of them
        print(f"polygemm: error: --shape {m}x{n}x{k}: operands and a result of that size need about {need / 2**30:.1f} GiB of "
              f"host memory, more than this machine can give; pick a smaller shape", file=sys.stderr)
        return 2




def _draw(rng: np.random.Generator, shape: tuple[int, int], dtype: np.dtype) -> np.ndarray:
    """Operand values of ``dtype``: standard normal (complex: in both parts), small integers for integer dtypes (their
    products then stay exact and within int8's range for small K), and coin flips for bool."""
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -3, 4, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _run_gemm(args: argparse.Namespace, a: np.ndarray, b: np.ndarray, m: int, n: int, k: int) -> int:
    """``polygemm gemm`` on the operands drawn: the plan, the timed calls, the check."""
    from .. import explain, gemm

    verify = getattr(args, "verify", None)
    plan = explain(a, b, device=args.device, variant=args.variant, precision=args.precision, verify=verify)
    print(plan)
    be = registry.get_backend(plan.backend)
    timer = be.timer()
    result = None

    def call() -> None:
        nonlocal result
        result = gemm(a, b, device=plan.backend, variant=plan.variant, precision=args.precision, verify=verify)

    first = timer(call)
    best = min(timer(call) for _ in range(args.repeat))
    flops = 2.0 * m * n * k
    rate = flops / best if best > 0 else float("nan")
    speed = f"{rate / 1e12:.3f} TFLOP/s" if rate >= 1e11 else f"{rate / 1e9:.3f} GFLOP/s"
    # what the timings include, per backend: the cpu computes where the arrays are; a GPU
    # backend is handed NumPy arrays here, so every call copies host<->device
    host_only = tuple(getattr(be, "residencies", ("host",))) == ("host",)
    setup = {"cuda": "kernel compilation or cache load", "musa": "loading the library"}.get(plan.backend, "one-time setup")
    first_note = "first call" if host_only else f"first call, includes {setup} and host<->device copies"
    copies = "" if host_only else " including host<->device copies"
    print(f"time: {first * 1e3:.3f} ms ({first_note}), best of {args.repeat} {best * 1e3:.3f} ms = {speed}{copies}")
    if args.check and a.dtype.kind in "iub":  # integer arithmetic is exact: the same numbers as numpy.matmul's, or wrong
        got, want = np.asarray(result), np.matmul(a, b)
        wrong = int(np.count_nonzero(got != want)) if got.shape == want.shape else got.size
        print(f"check: {'FAIL' if wrong else 'PASS'}: " + (f"{wrong} of {want.size} elements differ from numpy.matmul's" if wrong
                                                           else f"all {want.size} elements equal numpy.matmul's (exact)"))
        return 1 if wrong else 0
    if args.check:
        from ..testing import check_result

        res = check_result(np.asarray(result), a, b)
        print(f"check: {'PASS' if res.ok else 'FAIL'}: {res.message}")
        return 0 if res.ok else 1
    return 0


#: the modules of polygemm.apps that each add a command (``add_parser(sub)``), in ``--help``'s order;
#: imported when the parser is built, so that the library never imports them
COMMAND_MODULES = ("explain", "bench", "tune", "plot", "matrix", "ceiling", "compile")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="polygemm", description="Cross-vendor GEMM: information, single runs, benchmarks and the test matrix.")
    p.add_argument("--version", action="version", version=f"polygemm {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    s = sub.add_parser("info", help="version, every backend with availability and reason, library versions")
    s.add_argument("-v", "--verbose", action="store_true", help="print each unavailable backend's reason in full (e.g. every place a library was looked for)")
    add_json_option(s, "versions and every backend (with each reason in full)")
    s.set_defaults(fn=cmd_info)

    s = sub.add_parser("variants", help="list each backend's variants from its static table (no device needed)")
    s.add_argument("--device", "--backends", dest="device", nargs="+", action="extend", metavar="NAME",
                   help="only these backends, comma or space separated (default: every discovered backend)")
    s.add_argument("-v", "--verbose", action="store_true", help="add each variant's description, requirements and full tile")
    add_json_option(s, "every variant with all its fields")
    s.set_defaults(fn=cmd_variants)

    s = sub.add_parser("gemm", help="run one product on random data, print the plan and the time")
    # (required, checked after the options are read: a misspelt --shpae is told --shape, a bare 64x64x64 its option)
    s.add_argument("--shape", type=parse_bench_shape, default=None, metavar="MxNxK[:LAYOUT]", action=Once,
                   help="MxNxK, e.g. 1024x1024x1024; LAYOUT is two letters of n and t, A's and B's (nt: x @ W.T)")
    s.add_argument("--dtype", default="float32", type=dtype_name, choices=list(EXPLAIN_DTYPES),
                   help="dtype of a, b and the result (fp16, bf16, half, double and the like name them too; integer "
                        "operands are drawn small, bool ones as coin flips)")
    s.add_argument("--device", default=None, help="backend name or auto (default: $POLYGEMM_DEVICE or auto)")
    s.add_argument("--variant", default="auto", help="variant name (polygemm variants lists them) or auto")
    s.add_argument("--repeat", "--repeats", dest="repeat", type=positive_int, default=3,
                   help="timed repetitions after the first call (>= 1); --repeats, as bench spells it, is the same")
    s.add_argument("--seed", type=non_negative_int, default=None, help="seed of the random inputs, >= 0 (default: a fresh one each run)")
    s.add_argument("--check", action="store_true", help="compare with the float64 reference under the error bound")
    add_precision_option(s)
    add_verify_option(s, "check every timed call where it ran (polygemm.gemm's verify=; default: $POLYGEMM_VERIFY or off)")
    s.set_defaults(fn=cmd_gemm)

    for module in COMMAND_MODULES:
        importlib.import_module(f".{module}", __package__).add_parser(sub)
    return p


def _silence_stdout() -> None:
    """The reader of stdout went away (``polygemm info | head -1``): drop what is left to write."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    # the top level takes no option with a value, so its first word that is no option is the command
    first = next((w for w in argv if not w.startswith("-")), None)
    if first is not None and first not in commands:
        hint = did_you_mean([first], list(commands))
        if hint:
            parser.error(f"argument command: invalid choice: {first!r}{hint}; choose from {', '.join(map(repr, commands))}")
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser (its usage, its options), with the option it most likely meant
        command = commands[args.command]
        known = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
        hint = did_you_mean([w.split("=", 1)[0] for w in extra if w.startswith("--")], known)
        shapes = [w for w in extra if not w.startswith("-") and reads_as_shape(w)]
        if shapes and "--shape" in known and not hint:  # "polygemm gemm 64x64x64": the shape is an option's value
            hint = f"; give the shape as --shape {shapes[0]}"
        elif shapes and "--shapes" in known and not hint:  # "polygemm bench 64x64x64"
            hint = f"; give the shapes as --shapes {' '.join(shapes)}"
        devices = [w for w in extra if not w.startswith("-") and registry.backend_name(w.partition(":")[0]) is not None]
        option = next((a.option_strings[0] for a in command._actions if "--device" in a.option_strings), None)
        if devices and option and not hint:  # "polygemm variants cpu": the backend is --device's value (matrix: --backends)
            hint = f"; give the backend as {option} {devices[0]}"
        command.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    if args.command == "gemm" and args.shape is None:
        commands["gemm"].error("the following arguments are required: --shape MxNxK[:LAYOUT] (e.g. --shape 1024x1024x1024)")
    args.argv = argv
    why = unwritable(args)
    if why is not None:
        print(f"polygemm: error: {why}", file=sys.stderr)
        return 2
    try:
        return int(args.fn(args) or 0)
    except PolygemmError as exc:
        # a device that came from $POLYGEMM_DEVICE: the way to choose another is --device here, not device=
        text = str(exc).replace(f"{registry.ENV_DEVICE_WAY}, to choose another", "pass --device, to choose another")
        # the API's spellings in the command's terms: --device auto, not device='auto' or get_backend
        text = text.replace("Pick an available one or device='auto'", "Pick an available one with --device, or --device auto")
        text = text.replace("get_backend takes a backend name:", "this option takes a backend name:")
        # the API's argument names as the command's options (out_dtype: --out-dtype; device='x': --device x)
        text = re.sub(r"\bout_dtype\b(?!=)", "--out-dtype", text)
        text = re.sub(r"(?<![\w-])device='([^']*)'", r"--device \1", text)
        options = {o for a in commands[args.command]._actions for o in a.option_strings}
        if "--variant" in options:  # gemm, explain
            text = re.sub(r"(?<![\w-])variant='([^']*)'", r"--variant \1", text)
        if "--variants" in options:  # matrix: the conformance suite's refusals of its variants=[...]
            text = re.sub(r"^variants names ", "--variants names ", text)
            text = re.sub(r"(?<![\w-])variant=('[^']*')", r"\1", text)
        if "--compiler" in options:  # compile: compiler.select leads with compiler='nvrtc' forced
            text = re.sub(r"(?<![\w-])compiler '([^']*)'", r"--compiler \1", text)
        if "--dtype" in options:  # the inputs' dtype is the command's --dtype, not a cast of arrays a and b
            text = re.sub(r"\bcast a and b to (\w+) to compute in it", r"pass --dtype \1 to compute in it", text)
        if "--out-dtype" in options:  # explain, tune: the command hands out no result to cast (result.astype)
            text = re.sub(r"omit --out-dtype and cast the result \(result\.astype\('(\w+)'\)\): a cast of (\w+) a and b to \1 "
                          r"would round them before the product",
                          r"omit --out-dtype (or give --out-dtype \2: the product is computed in \2), or pass --dtype \1 to "
                          r"compute in \1 (rounding the inputs to \1 before the product)", text)
            text = re.sub(r"(omit --out-dtype \([^)]*\)), and cast the result if you need it so \(result\.astype\('\w+'\)\)",
                          r"\1", text)
        text = "; ".join(part.strip() for part in text.splitlines() if part.strip())  # one line (a driver's reason may hold several)
        print(f"polygemm: error: {text}", file=sys.stderr)
        # 1: the run itself failed (a device error, a product that failed its check, its output unwritten), as --check's FAIL;
        # 2: what was asked cannot be done here (arguments, devices, problems refused before anything ran)
        return 1 if isinstance(exc, (DeviceError, VerificationError, WriteFailed)) else 2


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """A warning as one line of the command's (``polygemm: warning: ...``), not Python's file, line and source."""
    print(f"polygemm: warning: {message}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``polygemm`` and ``python -m polygemm``; returns the exit status: 0 done, 1 the
    run failed (a device error, a product that failed its check, ``--check``'s FAIL), 2 what was
    asked cannot be done here (usage, arguments, an unknown or unavailable device, a refused problem).

    A closed stdout (``polygemm info | head -1``) ends the command quietly with status 141
    (128 + SIGPIPE, as a shell reports a tool killed by SIGPIPE); Ctrl-C ends it with
    "polygemm: interrupted" and status 130 (128 + SIGINT), no traceback. A standard stream closed
    before the start (``>&-``), which Python holds as None: a closed stdout ends the command with
    status 1 and one line on stderr (print() would drop every line of the output silently); a closed
    stderr's lines are dropped, never sent to stdout in their place (print(file=None) writes there).
    """
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the process's own stand-in, open until it ends
    if sys.stdout is None:
        print("polygemm: error: standard output is closed; give the command somewhere to write (a file, a pipe or "
              "/dev/null)", file=sys.stderr)
        return 1
    try:
        try:
            with warnings.catch_warnings():  # (the filters as they were; only how a warning is shown changes)
                warnings.showwarning = _show_warning
                status = _run(argv)
        except SystemExit:  # argparse: --help, --version, a usage error
            sys.stdout.flush()
            raise
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except OSError as exc:  # standard output that cannot take what is written (a full disk, /dev/full): one line
        _silence_stdout()
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"polygemm: error: cannot write the command's output{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print("polygemm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # python -m polygemm.apps.cli, the same command as python -m polygemm
    raise SystemExit(main())
