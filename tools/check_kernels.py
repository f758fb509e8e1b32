#!/usr/bin/env python3
"""Compile-check the CUDA kernel catalog (no GPU needed) for sm_80 and sm_90.

The same builds as ``polygemm compile`` (the backend's own compile path, forced to nvcc here;
``--compiler nvrtc`` checks NVRTC instead), into a temporary folder. Predicated
(auto-selectable) rungs have a build for every macro set the backend may request
(KernelSpec.builds: the PG_TRANS_A / PG_TRANS_B / PG_VEC / PG_OUT_F32 combinations and the
PG_ROW_SPLIT builds); a register spill reported by ptxas fails the check in those and in the
helpers, and is reported but allowed in teaching rungs. Exit status 1 on any failure.

``--builds`` says which builds go through the whole compiler (front end, optimizer, ptxas):
``all`` (default) every build of the catalog, 1,568 for sm_80 and sm_90, about 20 CPU minutes
with nvcc: the check to run on a many-core machine (tools/gpu_tests.sh runs it on the GPU
machine's 16 cores); ``cover`` per source and target the fewest builds that take every variant
and every value of every macro through ptxas at least once (118 builds); ``one`` the first build
of each source and target (69). ``--front-end`` runs NVRTC's front end on every build of the
catalog besides (``-fdevice-syntax-only``: each macro set's C++ is parsed, its templates
instantiated and its static_asserts checked, at a twentieth of a build's cost). CI runs
``--builds cover`` with nvcc and ``--compiler nvrtc --builds one --front-end``: every build
passes NVRTC's front end, each variant and each switch value reaches ptxas at least once (combinations
of switches reach it only in the full check), in the minutes two cores allow.

``--duplicates NAME ...`` compiles every build of those variants (or helpers) to PTX with
nvcc and lists the builds whose PTX is the same as another's (comment lines aside): work a
check could share.

``--profile`` builds nothing for the check: it times one build of each source and target
phase by phase (nvcc's preprocessor, nvcc to PTX, ptxas, the whole nvcc build, the whole
NVRTC build where NVRTC is installed) in CPU seconds, and scales each by the number of
builds of that source and target in the catalog: where a check of the catalog spends its time.

    python tools/check_kernels.py [--arch 80 90] [-j N] [--compiler nvcc|nvrtc] [--builds all|cover|one] [--front-end]
    python tools/check_kernels.py --profile | --duplicates NAME ...
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from polygemm.apps.compile import Job, covering, jobs, parse_arch, run  # noqa: E402
from polygemm.errors import PolygemmError  # noqa: E402

PHASES = ("preprocess", "to PTX", "ptxas", "nvcc", "NVRTC")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str]) -> float:
    """CPU seconds of ``cmd`` and everything it ran (it must succeed)."""
    before = _children_cpu()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise PolygemmError(f"{' '.join(cmd[:3])} ... failed: {r.stderr.strip()[-2000:]}")
    return _children_cpu() - before


def _phases(job: Job, tmp: Path, nvrtc: bool) -> dict[str, float]:
    """CPU seconds of each phase of one build of ``job``."""
    from polygemm.backends.cuda import compiler as cc

    nvcc = cc.find_nvcc() or "nvcc"
    macros = dict(job.macros)
    full = cc.nvcc_command(nvcc, job.source, job.target, macros, tmp / "k.cubin", verbose=True)
    # the same command line, stopped after the preprocessor or after cicc (PTX)
    front = [a for a in full if not a.startswith("-gencode") and a not in ("-cubin", "-Xptxas", "-v")]
    front = front[:1] + [f"-arch=compute_{job.target[3:]}"] + front[1:-2]
    out = {
        "nvcc": _timed(full),
        "preprocess": _timed([*front, "-E", "-o", str(tmp / "k.ii")]),
        "to PTX": _timed([*front, "-ptx", "-o", str(tmp / "k.ptx")]),
        "ptxas": _timed([os.path.join(os.path.dirname(nvcc), "ptxas"), f"-arch={job.target}", "-v", str(tmp / "k.ptx"), "-o", str(tmp / "p.cubin")]),
    }
    if nvrtc:
        before = _own_cpu()
        cc.build(job.source, job.target, macros, compiler="nvrtc", verbose=True)
        out["NVRTC"] = _own_cpu() - before
    return out


def profile(archs: list[int]) -> int:
    from polygemm.backends.cuda import compiler as cc
    from polygemm.backends.cuda.variants import KERNEL_DIR
    from polygemm.errors import BackendUnavailableError

    try:
        cc.select("sm_80", "nvrtc")
        nvrtc = True
    except BackendUnavailableError as exc:
        print(f"check_kernels --profile: NVRTC NOT profiled: {exc}", file=sys.stderr)
        nvrtc = False
    todo = jobs(archs)
    count = collections.Counter((j.source, j.target) for j in todo)
    sample: dict[tuple[Path, str], Job] = {}
    for j in todo:
        sample.setdefault((j.source, j.target), j)
    shown = [p for p in PHASES if nvrtc or p != "NVRTC"]
    print(f"one build of each of {len(sample)} sources and targets, in CPU seconds; builds: how many the catalog has of that source and target ({len(todo)} in all)")
    print(f"{'source':42} {'target':7} {'builds':>6} " + " ".join(f"{p:>10}" for p in shown))
    total: dict[str, float] = collections.defaultdict(float)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for (source, target), job in sample.items():
            got = _phases(job, Path(tmp), nvrtc)
            n = count[(source, target)]
            for k, v in got.items():
                total[k] += v * n
            print(f"{str(source.relative_to(KERNEL_DIR)):42} {target:7} {n:>6} " + " ".join(f"{got[p]:>10.2f}" for p in shown), flush=True)
    print(f"{'catalog (scaled)':42} {'':7} {len(todo):>6} " + " ".join(f"{total[p]:>10.0f}" for p in shown))
    print(f"profiled in {time.perf_counter() - t0:.0f} s. 'to PTX' includes the preprocessor; 'nvcc' is the check's own command "
          f"(preprocessor, cicc, ptxas); wall time on N free cores is about the CPU seconds / N")
    return 0


def _ptx_digest(job: Job) -> str:
    from polygemm.backends.cuda import compiler as cc

    with tempfile.TemporaryDirectory() as tmp:
        cmd = cc.nvcc_command(cc.find_nvcc() or "nvcc", job.source, job.target, dict(job.macros), Path(tmp) / "k.ptx")
        cmd = [cmd[0], "-ptx", f"-arch=compute_{job.target[3:]}"] + [a for a in cmd[1:] if a != "-cubin" and not a.startswith("-gencode")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise PolygemmError(f"nvcc -ptx {job.source.name} failed: {r.stderr.strip()[-2000:]}")
        text = (Path(tmp) / "k.ptx").read_text()
    return hashlib.sha256("\n".join(line for line in text.splitlines() if not line.startswith("//")).encode()).hexdigest()


def duplicates(archs: list[int], names: list[str], threads: int) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from polygemm.backends.cuda.variants import KERNEL_DIR

    todo = jobs(archs, names)
    with ThreadPoolExecutor(max(1, threads)) as pool:
        digests = list(pool.map(_ptx_digest, todo))
    groups: dict[str, list[Job]] = collections.defaultdict(list)
    for job, digest in zip(todo, digests):
        groups[digest].append(job)
    same = [g for g in groups.values() if len(g) > 1]
    print(f"{len(todo)} builds, {len(groups)} different PTX texts")
    for g in same:
        print("same PTX: " + "; ".join(j.label(KERNEL_DIR) for j in g))
    return 0


def front_end(todo: list[Job], threads: int) -> int:
    """NVRTC's front end on every build of ``todo``: one line a failure, then a summary; 0 when
    every build passed."""
    from concurrent.futures import ThreadPoolExecutor

    from polygemm.backends.cuda import compiler as cc
    from polygemm.backends.cuda.variants import KERNEL_DIR

    for target in sorted({j.target for j in todo}):  # no NVRTC (or none for a target): said once, not once a build
        cc.select(target, "nvrtc")

    def one(job: Job) -> str:
        try:
            cc.check_front_end(job.source, job.target, dict(job.macros))
        except PolygemmError as exc:
            return f"FAIL front end {job.label(KERNEL_DIR)}\n{exc}"
        return ""

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, threads)) as pool:  # NVRTC releases the GIL: threads run in parallel
        failures = [msg for msg in pool.map(one, todo) if msg]
    for msg in failures:
        print(msg, flush=True)
    print(f"{len(todo)} builds through NVRTC's front end in {time.perf_counter() - t0:.0f} s: "
          f"{'all passed' if not failures else f'{len(failures)} FAILED'}", flush=True)
    return 1 if failures else 0


def selected(todo: list[Job], builds: str) -> list[Job]:
    """The builds of the catalog ``todo`` that ``--builds`` names."""
    if builds == "cover":
        return covering(todo)
    if builds == "one":
        first: dict[tuple[Path, str], Job] = {}
        for j in todo:
            first.setdefault((j.source, j.target), j)
        return list(first.values())
    return todo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", nargs="+", default=["80", "90"])
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--compiler", choices=["nvcc", "nvrtc"], default="nvcc")
    ap.add_argument("--builds", choices=["all", "cover", "one"], default="all",
                    help="which builds are compiled in full: every one, the fewest that cover every variant and macro value per source and target, or one per source and target")
    ap.add_argument("-q", "--quiet", action="store_true", help="print failures, spill notes and summaries only")
    ap.add_argument("--front-end", action="store_true", help="also run NVRTC's front end on every build of the catalog")
    ap.add_argument("--profile", action="store_true", help="time one build of each source and target phase by phase (builds nothing for the check)")
    ap.add_argument("--duplicates", nargs="+", metavar="NAME", help="list the builds of these variants whose nvcc PTX is another's (builds nothing for the check)")
    args = ap.parse_args()
    try:
        archs = list(dict.fromkeys(parse_arch(a) for a in args.arch))
        if args.profile:
            return profile(archs)
        if args.duplicates:
            return duplicates(archs, args.duplicates, args.j)
        catalog = jobs(archs)
        rc = front_end(catalog, args.j) if args.front_end else 0
        todo = selected(catalog, args.builds)
        if args.builds != "all":
            print(f"check_kernels: {len(todo)} of {len(catalog)} builds in full (--builds {args.builds})", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            return run(archs, Path(tmp), args.j, args.compiler, quiet=args.quiet, todo=todo) or rc
    except PolygemmError as exc:
        print(f"check_kernels: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
