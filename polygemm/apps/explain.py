"""``polygemm explain``: the plan ``polygemm.gemm`` would run for a problem, without running it
(what :func:`polygemm.explain` returns: backend, variant, why, layouts, copies, padding, the
backends passed over), for operands described by their shape, dtype and layout."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from .. import explain
from ..backend import Plan
from ..problem import dtype_named
from .arguments import Once, add_verify_option, dtype_name, non_negative_int
from .bench_layout import layout_of, shape_text
from .bench_shapes import parse_bench_shape, reads_as_shape
from .outputs import JSON_STDOUT, add_json_option, emit_json
from .precision_option import add_precision_option

__all__ = ["operands", "plan_record", "cmd_explain", "add_parser"]

DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64", "uint8",
          "uint16", "uint32", "uint64", "bool")


def operands(shape: tuple[int, int, int], dtype: str, transpose_a: bool = False, transpose_b: bool = False,
             batch: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """NumPy operands a (M×K) and b (K×N) of ``dtype``, each a transposed view of a K×M (N×K)
    array where asked (column-major, as ``x.T`` passes it), with a leading batch axis of
    ``batch`` > 0. Their values are never read: planning reads shapes, dtypes and strides."""
    m, n, k = shape
    dt = dtype_named(dtype)
    lead = (batch,) if batch else ()
    a = _unbacked(lead + (k, m), dt).swapaxes(-1, -2) if transpose_a else _unbacked(lead + (m, k), dt)
    b = _unbacked(lead + (n, k), dt).swapaxes(-1, -2) if transpose_b else _unbacked(lead + (k, n), dt)
    return a, b


def _unbacked(shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    """A read-only C-ordered array of ``shape`` with the strides of a compact one over one element
    of memory: planning a product a GPU holds (100000³) needs no host memory for it. ValueError
    past what NumPy can index."""
    strides, step = [], dt.itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    if step >= 2**63:
        raise ValueError(f"{'x'.join(map(str, shape))} elements of {dt.itemsize} bytes are past what NumPy can index")
    base = np.zeros(1, dt)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(reversed(strides)), writeable=False)


def _plain(value: Any) -> Any:
    """A launch parameter as JSON holds it: numbers, strings, booleans and lists of them as they are, anything else as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def plan_record(plan: Plan) -> dict[str, Any]:
    """``polygemm explain --json``: the plan's public fields, the problem's sizes and dtypes."""
    p = plan.problem
    return {
        "m": p.m, "n": p.n, "k": p.k, "batch": list(p.batch), "dtype": p.dtype.name, "out_dtype": p.out_dtype.name,
        "alpha": p.alpha, "beta": p.beta, "backend": plan.backend, "device": plan.device, "variant": plan.variant,
        "reason": plan.reason, "layouts": dict(plan.layouts), "copies": list(plan.copies), "padding": plan.padding,
        "launch": {str(k): _plain(v) for k, v in plan.launch.items()},
        "passed_over": [{"backend": name, "why": why} for name, why in plan.candidates],
        "notes": list(plan.notes), "cached": plan.cached, "uncached": plan.uncached, "precision": plan.problem.precision,
        "precision_used": plan.precision,
    }


def cmd_explain(args: argparse.Namespace) -> int:
    if args.shape is None and args.shape_pos is None and isinstance(args.json, str) and reads_as_shape(args.json):
        # "explain --json 8x8x8": --json took the shape for its file; meant as the shape, with JSON on standard output
        args.shape_pos, args.json = parse_bench_shape(args.json), JSON_STDOUT
    if isinstance(args.json, str) and args.json != JSON_STDOUT and reads_as_shape(args.json):
        # "explain --json 8x8x8 16x16x16": a second shape, not a file to write the plan to
        print(f"polygemm explain: error: --json {args.json} names a shape, not a file; explain takes one shape (name "
              f"a file for the JSON, e.g. --json plan.json, or give --json last for standard output)", file=sys.stderr)
        return 2
    if (args.shape is None) == (args.shape_pos is None):
        print("polygemm explain: error: give the shape once, as MxNxK[:LAYOUT] or --shape MxNxK[:LAYOUT] (e.g. 1024x1024x1024:nt)",
              file=sys.stderr)
        return 2
    shape = args.shape if args.shape is not None else args.shape_pos
    layout = layout_of(shape)  # ``t``: a transposed view (x @ W.T is nt), as bench and tune take it
    stated = hasattr(shape, "layout")  # (an explicit ":nn" says "as stored" as much as ":nt" says its layout)
    if stated and (args.transpose_a or args.transpose_b):  # two ways of saying one thing: which is meant?
        flags = " and ".join(f for f, on in (("--transpose-a", args.transpose_a), ("--transpose-b", args.transpose_b)) if on)
        print(f"polygemm explain: error: the shape's :{layout} and {flags} both give the layout; give it once (e.g. "
              f"{shape_text(*tuple(shape), layout)} alone)", file=sys.stderr)
        return 2
    args.shape = tuple(shape)
    try:
        a, b = operands(args.shape, args.dtype, args.transpose_a or layout[0] == "t", args.transpose_b or layout[1] == "t",
                        args.batch)
    except ValueError as exc:
        m, n, k = args.shape
        options = f"--shape {m}x{n}x{k}" + (f" with --batch {args.batch}" if args.batch else "")
        print(f"polygemm: error: {options}: {exc}; pick a smaller {'shape or batch' if args.batch else 'shape'}",
              file=sys.stderr)
        return 2
    plan = explain(a, b, device=args.device, variant=args.variant, precision=args.precision, out_dtype=args.out_dtype,
                   verify=args.verify)
    emit_json(args, plan_record(plan), str(plan))
    return 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("explain", help="the plan polygemm.gemm would run for a problem (backend, variant, why), without running it")
    s.add_argument("shape_pos", nargs="?", type=parse_bench_shape, metavar="MxNxK[:LAYOUT]",
                   help="the product, e.g. 1024x1024x1024 or 4096x4096x4096:nt (as bench takes it; or --shape)")
    s.add_argument("--shape", type=parse_bench_shape, default=None, metavar="MxNxK[:LAYOUT]", action=Once,
                   help="the product (LAYOUT: nn, nt, tn or tt; t: that operand a transposed view)")
    s.add_argument("--dtype", default="float32", type=dtype_name, choices=list(DTYPES),
                   help="dtype of a, b and the result (fp16, bf16, half, double and the like name them too)")
    s.add_argument("--device", default=None, help="backend name or auto (default: $POLYGEMM_DEVICE or auto)")
    s.add_argument("--variant", default="auto", help="variant name (polygemm variants lists them) or auto")
    s.add_argument("--transpose-a", action="store_true",
                   help="a is the transposed view of a KxM array (column-major, passed as x.T), not a C-ordered MxK array")
    s.add_argument("--transpose-b", action="store_true",
                   help="b is the transposed view of an NxK array (column-major, passed as x.T), not a C-ordered KxN array")
    s.add_argument("--batch", type=non_negative_int, default=0, metavar="N",
                   help="a strided batch of N products (a leading axis of N on a and b; 0: one product)")
    s.add_argument("--out-dtype", default=None, type=dtype_name, choices=list(DTYPES), help="the result's dtype, where it may differ from the inputs'")
    add_verify_option(s, "the check verify= would add, and its estimated cost (default: $POLYGEMM_VERIFY, else off)")
    add_precision_option(s)
    add_json_option(s, "the plan")
    s.epilog = "The operands are NumPy arrays on the host: a GPU backend's plan includes their copies to the device."
    s.set_defaults(fn=cmd_explain)
