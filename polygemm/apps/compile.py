"""``polygemm compile``: build the CUDA kernel catalog ahead of time, in parallel, with no GPU.

Every rung the backend may launch on a device of each ``--arch`` is built in every macro set it
may request (``KernelSpec.builds()``), plus the copy/scale helper and the probes, through the
backend's own compile path (:mod:`polygemm.backends.cuda.compiler`: nvcc, else NVRTC). The
cubins go into the kernel cache, or with ``--out DIR`` into DIR under the names the backend
looks for when ``POLYGEMM_KERNEL_DIR=DIR`` (what a wheel or a container image would ship).

ptxas's register report is read for each build: a register spill fails the run in an
auto-selectable (predicated) rung or a helper, and is reported but allowed in a teaching rung.
Exit status 0 when everything built, 1 on any failure.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import ArgumentError
from .arguments import choice_word, positive_int, split_names
from .outputs import cannot_create_in

__all__ = ["Job", "jobs", "covering", "run", "parse_arch", "add_parser"]

SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")
DEFAULT_ARCHS = ("sm_80", "sm_90")


@dataclass(frozen=True)
class Job:
    source: Path
    target: str  # what it is built for: sm_XX, or the rung's own (sm_90a)
    macros: tuple[tuple[str, int], ...]
    strict: bool  # a spill fails the run (auto-selectable rungs and helpers)
    name: str  # variant name, or the helper's file stem

    def label(self, kernel_dir: Path) -> str:
        return f"{self.source.relative_to(kernel_dir)} {self.target} {' '.join(f'{k}={v}' for k, v in self.macros)}".strip()


#: the oldest compute capability CUDA 12 targets (CUDA 13 starts at sm_75, and its nvcc says so for sm_50 to sm_72)
OLDEST_ARCH = 50


def parse_arch(text: str) -> int:
    """``sm_80``, ``sm_90a``, ``compute_90``, ``80`` or ``8.0`` -> 80 (the device's compute capability;
    ``sm_90a`` names the same devices as ``sm_90``: the wgmma rung is built for sm_90a whenever 90 is)."""
    t = text.strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d)\.?(\d)[af]?", t) or re.fullmatch(r"(?:sm_|compute_)?(\d\d)(\d)[af]?", t)
    if m is None:
        raise ArgumentError(f"--arch {text!r}: expected sm_XY such as sm_80, sm_90 or sm_90a")
    sm = int(m.group(1) + m.group(2))
    if sm < OLDEST_ARCH:  # (sm_12 parses: nvcc would then fail once per build, not once for the argument)
        raise ArgumentError(f"--arch {text!r}: compute capability {sm // 10}.{sm % 10} is older than CUDA 12 builds for; "
                            f"expected sm_{OLDEST_ARCH} or newer (sm_75 or newer with CUDA 13), such as sm_80 or sm_90")
    return sm


def _helper_min_sm(source: Path) -> int:
    """The oldest compute capability a helper kernel builds for, from its ``// requires: sm_NN`` line (0: any), so that
    a catalog for an older target (``--arch sm_75``, a T4's) leaves out probes of instructions it lacks (mma.sync m16n8k16)."""
    with open(source, encoding="utf-8") as fh:
        head = fh.read(2048)
    m = re.search(r"^// requires: sm_(\d+)", head, re.MULTILINE)
    return int(m.group(1)) if m else 0


def jobs(archs: Sequence[int], only: Sequence[str] | None = None) -> list[Job]:
    """Every build for devices of compute capabilities ``archs`` (each once), limited to the
    variants or helper file stems in ``only`` when given."""
    from ..backends.cuda.variants import KERNEL_DIR, kernel_specs

    specs = kernel_specs()
    extras = sorted((KERNEL_DIR / "util").glob("*.cu")) + sorted((KERNEL_DIR / "hgemm").glob("*probe*.cu")) \
        + sorted((KERNEL_DIR / "verify").glob("*.cu"))
    if only:
        known = set(specs) | {p.stem for p in extras}
        unknown = [n for n in only if n not in known]
        if unknown:
            archs_given = [n for n in unknown if re.fullmatch(r"(sm_|compute_)?\d{2,3}a?", n)]
            if archs_given:  # `--only cm_v01_naive sm_90`: an architecture where --arch was meant
                raise ArgumentError(f"--only {' '.join(archs_given)}: {'that is an architecture' if len(archs_given) == 1 else 'those are architectures'}; "
                                    f"pass it with --arch (--arch {' '.join(archs_given)})")
            raise ArgumentError(f"--only {' '.join(unknown)}: no such variant or helper; choose from {', '.join(list(specs) + [p.stem for p in extras])}")
    oldest = {extra: _helper_min_sm(extra) for extra in extras}
    out: dict[tuple, Job] = {}
    for sm in archs:
        for spec in specs.values():
            if (only and spec.name not in only) or not spec.runs_on(sm):
                continue
            target = spec.arch or f"sm_{sm}"
            for macros in spec.builds():
                job = Job(spec.source, target, tuple(sorted(macros.items())), spec.predicated, spec.name)
                out.setdefault((job.source, job.target, job.macros), job)
        for extra in extras:
            if (only and extra.stem not in only) or sm < oldest[extra]:
                continue
            job = Job(extra, f"sm_{sm}", (), True, extra.stem)
            out.setdefault((job.source, job.target, job.macros), job)
    return list(out.values())


def covering(todo: Sequence[Job]) -> list[Job]:
    """Per source and target, the fewest builds of ``todo`` (found greedily, in order) that build
    every variant (threadblock tile and the rest of its configuration) and every value of every
    macro at least once, and every source and target: what a check that cannot afford every
    build compiles in full, so that each configuration and each switch reaches ptxas somewhere."""
    groups: dict[tuple[Path, str], list[Job]] = {}
    for job in todo:
        groups.setdefault((job.source, job.target), []).append(job)
    chosen: list[Job] = []
    for group in groups.values():
        def features(job: Job) -> set[tuple[str, object]]:
            return {("variant", job.name), *job.macros}

        need = set().union(*(features(j) for j in group))
        while need:
            best = max(group, key=lambda j: len(features(j) & need))  # the first of the best: stable
            chosen.append(best)
            need -= features(best)
    return chosen


def _one(job: Job, out: Path | None, compiler: str | None) -> tuple[bool, str]:
    from ..backends.cuda import compiler as cc
    from ..backends.cuda.variants import KERNEL_DIR
    from ..errors import DeviceError

    label = job.label(KERNEL_DIR)
    macros = dict(job.macros)
    t0 = time.perf_counter()
    try:
        b = cc.build(job.source, job.target, macros, compiler=compiler, verbose=True)
    except DeviceError as exc:
        return False, f"FAIL compile {label}\n{exc}"
    took = time.perf_counter() - t0
    dest = out / cc.prebuilt_name(job.source, job.target, macros) if out is not None else cc.cache_path(job.source, job.target, macros, compiler)
    cc.write_entry(dest, cc.pack(cc.meta_for(job.source, job.target, macros, b.compiler), b.cubin))
    spills = [(int(a), int(s)) for a, s in SPILL.findall(b.log)]
    regs = ", ".join(REGS.findall(b.log))
    if any(a or s for a, s in spills):
        return (not job.strict), f"{'FAIL' if job.strict else 'note'} register spill {label}: {spills} (stores, loads bytes)"
    return True, f"ok   {label} ({regs} registers, {took:.1f} s)"


def run(archs: Sequence[int], out: Path | None = None, threads: int | None = None, compiler: str | None = None,
        only: Sequence[str] | None = None, quiet: bool = False, stream: Any = None, todo: Sequence[Job] | None = None) -> int:
    """Build every job for ``archs`` (or the jobs ``todo``, a part of them); print one line a
    build (failures and notes only when ``quiet``) and a summary; 0 when all passed, 1 otherwise."""
    from ..backends.cuda import compiler as cc

    stream = stream or sys.stdout
    todo = list(jobs(archs, only) if todo is None else todo)
    if not todo:  # a run that builds nothing must not read as "all passed"
        from ..backends.cuda.variants import kernel_specs

        specs = kernel_specs()
        needs = [f"{n} needs sm_{specs[n].min_sm} or newer" for n in (only or ()) if n in specs and getattr(specs[n], "min_sm", None)]
        what = f"--only {' '.join(only)}" if only else "the catalog"
        raise ArgumentError(f"nothing to build: {what} has no build for --arch {' '.join(f'sm_{a}' for a in archs)}"
                            + (f" ({'; '.join(needs)})" if needs else ""))
    for sm in archs:  # refused once here, rather than by the compiler once per build
        why = cc.unbuildable(f"sm_{sm}", compiler)
        if why is not None:
            raise ArgumentError(f"--arch sm_{sm}: no compiler here builds for it: {why}; name one of those")
    if out is not None:
        # refused before any build, with the way out: a file of that name (--out /dev/null, --out
        # kernels.tar) or a place that cannot be written would otherwise fail at the first cubin
        if out.exists() and not out.is_dir():
            raise ArgumentError(f"--out {out}: that is a file; name a folder (made if missing) for the cubins")
        above = next((p for p in out.absolute().parents if p.exists()), None)
        if not out.exists() and above is not None and not above.is_dir():
            raise ArgumentError(f"--out {out}: cannot make that folder ({above} is a file); name a folder you can write")
    # name the compiler (and fail early, with the reason, when there is none) before starting, and before --out is made
    targets = sorted({j.target for j in todo})
    used = sorted({cc.select(t, compiler, when="polygemm compile builds the kernels ahead of time with one").describe() for t in targets})
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArgumentError(f"--out {out}: cannot make that folder ({exc.strerror or exc}); name a folder you can write") from None
        # an existing folder where no file can be made (/proc, a read-only mount; os.access says yes to
        # root): tried by making a file, as the cubins will be
        why = cannot_create_in(str(out))
        if why is not None:
            raise ArgumentError(f"--out {out}: no file can be made in that folder ({why}); name a folder you can write")
    print(f"polygemm compile: {len(todo)} build{'' if len(todo) == 1 else 's'} for {', '.join(targets)} with {'; '.join(used)} into {out or cc.cache_dir()}", file=stream, flush=True)
    t0 = time.perf_counter()
    ok = True
    with ThreadPoolExecutor(max(1, threads or os.cpu_count() or 2)) as pool:  # NVRTC runs in parallel in threads; nvcc in processes
        for good, msg in pool.map(lambda j: _one(j, out, compiler), todo):
            if not quiet or not msg.startswith("ok"):
                print(msg, file=stream, flush=True)
            ok &= good
    print(f"{len(todo)} kernel build{'' if len(todo) == 1 else 's'} in {time.perf_counter() - t0:.0f} s: {'all passed' if ok else 'FAILURES above'}", file=stream, flush=True)
    return 0 if ok else 1


def cmd_compile(args: argparse.Namespace) -> int:
    # comma or space separated, as --only takes names ("--arch sm_80,sm_90", as TORCH_CUDA_ARCH_LIST lists them)
    given = split_names("--arch", args.arch, "architecture", "e.g. sm_80 sm_90", "leave --arch out for the default")
    archs = list(dict.fromkeys(parse_arch(a) for a in (given or DEFAULT_ARCHS)))
    if args.out is not None and not args.out.strip():
        # "--out $DIR" with DIR unset means a folder was meant, not the kernel cache (as an empty --json
        # path is refused: cli.unwritable)
        raise ArgumentError(f"--out {args.out!r}: an empty path; name a folder (e.g. --out kernels), or leave --out out "
                            f"to build into the kernel cache")
    # comma or space separated, as --variants and --backends take names elsewhere
    only = split_names("--only", args.only, "variant", "polygemm variants lists them; helpers by their kernel files' stems",
                       "leave --only out to build the catalog")
    return run(archs, Path(args.out) if args.out else None, args.jobs, args.compiler, only, args.quiet)


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "compile",
        help="build every CUDA kernel ahead of time (no GPU needed) into the cache or a folder",
        description=(
            "Build every CUDA kernel the backend may launch on devices of the given architectures, in every "
            "macro set, into the kernel cache or --out DIR (then run with POLYGEMM_KERNEL_DIR=DIR to load them and "
            "compile nothing). Always builds: fails on a compile error or a register spill in an auto-selectable kernel."
        ),
    )
    s.add_argument("--arch", nargs="+", action="extend", metavar="SM", help=f"device architectures, comma or space separated, e.g. sm_80 sm_86 sm_90 (sm_90a = sm_90) (default: {' '.join(DEFAULT_ARCHS)})")
    s.add_argument("--out", metavar="DIR", help="write the cubins here (for POLYGEMM_KERNEL_DIR) instead of the kernel cache")
    s.add_argument("-j", "--jobs", type=positive_int, default=None, metavar="N", help="builds at once (default: one per CPU)")
    s.add_argument("--compiler", type=choice_word, choices=["nvrtc", "nvcc"], default=None, help="force one (default: $POLYGEMM_COMPILER, else nvcc when installed (faster code for two SGEMM rungs), else NVRTC)")  # the order of compiler.COMPILERS
    s.add_argument("--only", nargs="+", action="extend", metavar="NAME", help="only these variants (polygemm variants lists them) or helpers (the kernel files' stems: copy_scale, repitch, split_bf16, transpose, ldmatrix_probe, mma_peak_probe, freivalds)")
    s.add_argument("-q", "--quiet", action="store_true", help="print failures, spill notes and the summary only")
    s.set_defaults(fn=cmd_compile)
