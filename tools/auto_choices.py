#!/usr/bin/env python3
"""What ``auto`` chooses for the target shapes and why, in the words ``polygemm.explain``
prints: the cuda backend's plan made without a GPU, for a device of 132 SMs (a plan's choice
reads only the device's capability and limits, and the committed tuning tables; a cluster
row's grid is lowered only when its kernel is loaded on a real device).

    python tools/auto_choices.py > docs/auto-choices.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from polygemm.backends.cuda.backend import CudaBackend  # noqa: E402
from polygemm.problem import normalize  # noqa: E402

SHAPES = [(16, 4096, 4096), (512, 512, 16384), (8192, 8192, 512), (1000, 3000, 2000), (1, 8192, 8192), (4096, 16, 4096),
          (17, 4096, 4096), (1000, 1000, 16384), (4096, 1000, 4096), (4096, 1000, 16384), (4095, 4097, 4093),
          (4096, 4096, 4096), (8192, 8192, 8192)]


def main() -> None:
    be = CudaBackend()
    be._rt = None  # plan as for any sm_90-class device of 132 SMs, not the one this machine may have
    print("# What auto chooses at the target shapes\n")
    print("Written by `python tools/auto_choices.py > docs/auto-choices.md` from the committed tuning tables, for a device of")
    print("132 SMs (no GPU needed); [auto.md](auto.md) says how the choice is made. A test checks that this page is current.\n")
    print("| shape | dtype | auto's choice | why (the cost model's words) | runner-up (estimate) | notes |")
    print("|---|---|---|---|---|---|")
    for dtype in ("float16", "float32"):
        for m, n, k in SHAPES:
            a, b = np.zeros((m, k), dtype), np.zeros((k, n), dtype)
            plan = be.plan(normalize(a, b))
            why = plan.reason.removeprefix("cost model: ")
            runner = next((f"`{name}` ({text.removeprefix('estimated ')})" for name, text in plan.candidates
                           if text.startswith("estimated") and "but" not in text), "–")
            notes = "; ".join(n for n in plan.notes if "aligned" in n or "boundaries" in n) or ""
            if plan.padding:
                notes = (notes + "; " if notes else "") + "copies: " + plan.padding
            print(f"| {m}×{n}×{k} | {dtype} | `{plan.variant}` | {why} | {runner} | {notes} |")


if __name__ == "__main__":
    main()
