#!/usr/bin/env python3
"""Compile every CUDA kernel with nvcc (no GPU needed) for sm_80 and sm_90.

The same builds as ``polygemm compile`` (the backend's own compile path, forced to nvcc here;
``--compiler nvrtc`` checks NVRTC instead), into a temporary folder. Predicated
(auto-selectable) rungs are compiled in every macro set the backend may request
(KernelSpec.builds: the PG_TRANS_A / PG_TRANS_B / PG_VEC / PG_OUT_F32 combinations and the
PG_ROW_SPLIT builds), and fail the check if ptxas reports a register spill. Spills in
teaching rungs are reported but allowed. Exit status 1 on any failure.

    python tools/check_kernels.py [--arch 80 90] [-j N] [--compiler nvcc|nvrtc]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from polygemm.apps.compile import parse_arch, run  # noqa: E402
from polygemm.errors import PolygemmError  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", nargs="+", default=["80", "90"])
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--compiler", choices=["nvcc", "nvrtc"], default="nvcc")
    args = ap.parse_args()
    try:
        archs = list(dict.fromkeys(parse_arch(a) for a in args.arch))
        with tempfile.TemporaryDirectory() as tmp:
            return run(archs, Path(tmp), args.j, args.compiler)
    except PolygemmError as exc:
        print(f"check_kernels: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
