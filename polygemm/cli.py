"""The ``polygemm`` command line: info, gemm, variants, bench, matrix."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

import numpy as np

from . import __version__, registry
from .errors import PolygemmError

__all__ = ["main", "parse_shape"]


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"MxNxK"`` -> (M, N, K); raises argparse.ArgumentTypeError with the accepted form."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        m, n, k = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be MxNxK with three non-negative integers, e.g. 1024x1024x1024; got {text!r}") from None
    if min(m, n, k) < 0:
        raise argparse.ArgumentTypeError(f"shape dimensions must be >= 0; got {text!r}")
    return m, n, k


def _version(mod: str) -> str:
    try:
        m = importlib.import_module(mod)
    except Exception as exc:
        return f"not importable ({type(exc).__name__}: {exc})"
    return str(getattr(m, "VERSION_TEXT", None) or getattr(m, "__version__", "unknown"))


def cmd_info(args: argparse.Namespace) -> int:
    print(f"polygemm {__version__} (Python {sys.version.split()[0]})")
    for mod in ("numpy", "cffi", "pycuda"):
        print(f"  {mod:7s} {_version(mod)}")
    print("backends (highest priority first):")
    infos = registry.backends()
    w = max([6] + [len(i.name) for i in infos])
    for info in infos:
        if info.available and info.backend is not None:
            try:
                dev = info.backend.device_name()
            except Exception as exc:
                dev = f"(device name unavailable: {exc})"
            dtypes = ", ".join(info.backend.dtypes())
            print(f"  {info.name:{w}s} priority {info.priority:3d}  available    {dev} [{dtypes}]")
        else:
            print(f"  {info.name:{w}s} priority {info.priority:3d}  unavailable  {info.reason}")
        print(f"  {'':{w}s} from {info.source}")
    return 0


def cmd_variants(args: argparse.Namespace) -> int:
    names = [args.device] if args.device else registry.known_names()
    for name in names:
        try:
            be = registry.get_backend(name)
        except PolygemmError as exc:
            print(f"{name}: {exc}")
            continue
        print(f"{name}:")
        vs = be.variants()
        if not vs:
            print("  (no variants in this version)")
        for v in vs:
            flags = [] if v.auto else ["never auto"]
            if v.vendor:
                flags.append("vendor library")
            tag = f" [{', '.join(flags)}]" if flags else ""
            print(f"  {v.name:28s} {'/'.join(v.dtypes):24s} layout={v.layout:4s} {v.tile}{tag}")
            print(f"  {'':28s} {v.description}")
            if v.requirements and v.requirements != "none":
                print(f"  {'':28s} needs: {v.requirements}")
    return 0


def cmd_gemm(args: argparse.Namespace) -> int:
    from .api import gemm, explain

    m, n, k = args.shape
    dtype = np.dtype(args.dtype)
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    plan = explain(a, b, device=args.device, variant=args.variant)
    print(plan)
    be = registry.get_backend(plan.backend)
    timer = be.timer()
    result = None

    def call() -> None:
        nonlocal result
        result = gemm(a, b, device=plan.backend, variant=plan.variant)

    first = timer(call)
    best = min(timer(call) for _ in range(max(args.repeat, 1)))
    flops = 2.0 * m * n * k
    print(f"time: first call {first * 1e3:.3f} ms (includes compilation and copies), best of {args.repeat} {best * 1e3:.3f} ms"
          f" = {flops / best / 1e12 if best > 0 else float('nan'):.3f} TFLOP/s including host<->device copies")
    if args.check:
        from .testing import check_result

        res = check_result(np.asarray(result), a, b)
        print(f"check: {'PASS' if res.ok else 'FAIL'}: {res.message}")
        return 0 if res.ok else 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="polygemm", description="Cross-vendor GEMM: information, single runs, benchmarks and the test matrix.")
    p.add_argument("--version", action="version", version=f"polygemm {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("info", help="version, every backend with availability and reason, library versions")
    s.set_defaults(fn=cmd_info)

    s = sub.add_parser("variants", help="list each backend's variants from its static table (no device needed)")
    s.add_argument("--device", help="only this backend")
    s.set_defaults(fn=cmd_variants)

    s = sub.add_parser("gemm", help="run one product on random data, print the plan and the time")
    s.add_argument("--shape", type=parse_shape, required=True, help="MxNxK, e.g. 1024x1024x1024")
    s.add_argument("--dtype", default="float32", choices=["float16", "float32", "float64"])
    s.add_argument("--device", default=None, help="backend name or auto (default: $POLYGEMM_DEVICE or auto)")
    s.add_argument("--variant", default="auto")
    s.add_argument("--repeat", type=int, default=3, help="timed repetitions after the first call")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--check", action="store_true", help="compare with the float64 reference under the error bound")
    s.set_defaults(fn=cmd_gemm)

    for name, module in (("bench", "bench"), ("matrix", "matrix"), ("ceiling", "backends.cuda.ceiling")):
        try:
            mod = importlib.import_module(f".{module}", __package__)
        except ModuleNotFoundError:
            continue
        mod.add_parser(sub)  # type: ignore[attr-defined]
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``polygemm`` and ``python -m polygemm``; returns the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        return int(args.fn(args) or 0)
    except PolygemmError as exc:
        print(f"polygemm: error: {exc}", file=sys.stderr)
        return 2
