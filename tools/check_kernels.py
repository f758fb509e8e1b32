#!/usr/bin/env python3
"""Compile every CUDA kernel with nvcc (no GPU needed) for sm_80 and sm_90.

Predicated (auto-selectable) rungs are compiled in every macro set the backend may request
(KernelSpec.builds: the PG_TRANS_A / PG_TRANS_B / PG_VEC / PG_OUT_F32 combinations and the
PG_ROW_SPLIT builds), and fail the check if ptxas reports a register spill. Spills in
teaching rungs are reported but allowed. Exit status 1 on any failure.

    python tools/check_kernels.py [--arch 80 90] [-j N]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from polygemm.backends.cuda.compiler import find_nvcc, nvcc_command  # noqa: E402
from polygemm.backends.cuda.variants import KERNEL_DIR, kernel_specs  # noqa: E402

SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def jobs(archs: list[str]) -> list[tuple[str, Path, dict[str, int], bool]]:
    out = []
    for spec in kernel_specs().values():
        combos = spec.builds()
        for arch in archs:
            if not spec.runs_on(int(arch)):
                continue
            target = spec.arch or f"sm_{arch}"
            for macros in combos:
                out.append((target, spec.source, macros, spec.predicated))
    extras = sorted((KERNEL_DIR / "util").glob("*.cu")) + sorted((KERNEL_DIR / "hgemm").glob("*probe*.cu"))
    for extra in extras:
        for arch in archs:
            out.append((f"sm_{arch}", extra, {}, True))
    return out


def compile_one(job: tuple[str, Path, dict[str, int], bool], tmp: str) -> tuple[bool, str]:
    arch, src, macros, strict = job
    out = Path(tmp) / f"{src.stem}_{arch}_{abs(hash(tuple(macros.items())))}.cubin"
    cmd = nvcc_command(find_nvcc() or "nvcc", src, arch, macros, out, verbose=True)  # the backend's own command line
    r = subprocess.run(cmd, capture_output=True, text=True)
    label = f"{src.relative_to(KERNEL_DIR)} {arch} {' '.join(f'{k}={v}' for k, v in macros.items())}".strip()
    if r.returncode != 0:
        return False, f"FAIL compile {label}\n{r.stderr.strip()}"
    spills = [(int(a), int(b)) for a, b in SPILL.findall(r.stderr)]
    if any(a or b for a, b in spills):
        msg = f"{'FAIL' if strict else 'note'} register spill {label}: {spills}"
        return (not strict), msg
    regs = re.findall(r"Used (\d+) registers", r.stderr)
    return True, f"ok   {label} ({', '.join(regs)} registers)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", nargs="+", default=["80", "90"])
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    todo = jobs(args.arch)
    ok = True
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.j) as pool:
        for good, msg in pool.map(lambda j: compile_one(j, tmp), todo):
            print(msg, flush=True)
            ok &= good
    print(f"{len(todo)} kernel builds checked: {'all passed' if ok else 'FAILURES above'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
