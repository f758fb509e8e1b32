"""``polygemm matrix``: the conformance suite over every discovered backend.

Prints backend × dtype × variant rows against case-group columns, each cell ``pass``,
``FAIL n/m`` or ``skip``, then the failures and skip reasons; ``--json`` writes every
case. Exit status 1 when anything fails.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any, Iterator, Sequence

from .. import registry
from ..errors import ArgumentError, PolygemmError, UnknownDeviceError, UnsupportedProblemError
from ..core.dtypes import INTEGER_DTYPES
from ..testing.conformance import CHECKED_DTYPES as _DTYPES, UNCHECKED_DTYPES, CaseResult, case_groups, run_conformance
from .arguments import dtype_name, split_names
from .outputs import write_json

__all__ = ["run_matrix", "render_table", "add_parser", "check_names"]


def run_matrix(
    backends: Sequence[str] | None = None,
    *,
    variants: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    quick: bool = False,
    progress: bool = False,
) -> list[CaseResult]:
    """Run the suite on each backend (all discovered ones by default)."""
    # comma or space separated, as --variants: "--backends cpu,cuda" names two backends, not one unknown one
    names = split_names("--backends", backends or None, "backend", ", ".join(registry.known_names()),
                        "leave --backends out to run every one") or [i.name for i in registry.backends()]
    names = [registry.backend_name(n) or n for n in names]  # "CPU" is cpu, as device= takes it
    names = list(dict.fromkeys(names))  # a backend named twice ("cpu CPU") ran twice, its counts doubled; variants lists it once
    check_names(names)
    if variants:  # a misspelt name would run nothing and pass
        known: set[str] = set()
        for name in names:
            try:
                known |= {v.name for v in registry.get_backend(name).variants()}
            except PolygemmError:
                pass
        if "auto" in variants:  # auto chooses among the variants; the suite runs each of them by name
            raise ArgumentError(f"--variants auto: auto is no variant of its own (it chooses among the others, which the "
                                f"suite runs each by name); name some of {', '.join(sorted(known))}, or leave --variants "
                                "out to run every one")
        unknown = [v for v in variants if v.partition(":")[0] not in known]  # "rung:split_k=4" names its rung
        if unknown:
            raise UnsupportedProblemError(f"--variants: {', '.join(map(repr, unknown))} is not a variant of "
                                          f"{', '.join(names)}; known: {', '.join(sorted(known))}")
    results: list[CaseResult] = []
    for name in names:
        try:
            be = registry.get_backend(name)
        except PolygemmError as exc:
            # named in --backends: a failure, as under pytest (POLYGEMM_TEST_BACKEND), so that a plugin whose import
            # fails cannot pass its CI's "polygemm matrix --backends mydev" with a skip and exit status 0.
            # Among every discovered backend it stays a skip: one broken plugin does not fail the others' matrix.
            results.append(CaseResult(name, "*", "*", "*", "*", "fail" if backends else "skip", str(exc)))
            continue
        counts: dict[str, int] = defaultdict(int)
        t0 = time.perf_counter()
        last = [t0, ""]  # when a case last finished, and which

        def tick(r: CaseResult, name: str = name) -> None:
            counts[r.status] += 1
            last[:] = [time.perf_counter(), f"{r.dtype}/{r.variant}/{r.group}/{r.case}"]
            if progress:
                done = sum(counts.values())
                sys.stderr.write(f"\r{name:12s} {done:5d} cases  pass {counts['pass']}  fail {counts['fail']}  skip {counts['skip']}  ({time.perf_counter() - t0:.0f} s)  ")
                sys.stderr.flush()

        with _stall_watch(name, last):
            rows = run_conformance(be, dtypes=dtypes, variants=variants, quick=quick, progress=tick, allow_empty=True)
        if not backends:  # a backend that breaks the contract, among every discovered one: a skip, as one that cannot load
            rows = [replace(r, status="skip") if r.status == "fail" and r.group == "*" else r for r in rows]
        results.extend(rows)
        if progress:
            sys.stderr.write("\n")
    return results


#: seconds with no case finished after which the run says so on stderr (a backend's call that hangs stops the run: a CI
#: log then names where)
STALL_S = 120.0


@contextlib.contextmanager
def _stall_watch(name: str, last: list[Any]) -> Iterator[None]:
    """While the suite runs on backend ``name``, a line on stderr each time ``STALL_S`` seconds pass with no case
    finished (``last``: when a case last finished, and which)."""
    done = threading.Event()

    def watch() -> None:
        said = 0.0
        while not done.wait(min(STALL_S, 10.0)):
            since = time.perf_counter() - last[0]
            if since >= STALL_S and last[0] != said:
                said = last[0]
                after = f" after {last[1]}" if last[1] else ""
                sys.stderr.write(f"polygemm matrix: {name}: no case has finished in {since:.0f} s (the next case{after} is "
                                 f"still running)\n")
                sys.stderr.flush()

    watcher = threading.Thread(target=watch, name="polygemm-matrix-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def check_names(names: Sequence[str]) -> None:
    """Raise UnknownDeviceError (a BackendUnavailableError and a ValueError) naming each unknown backend and the known ones.

    A typo must fail (a CI job running ``polygemm matrix --backends nosuch`` must not pass);
    a known backend that cannot run here (its probe said no) is reported as skipped instead,
    and one that cannot load (its import failed) as failed when named, skipped otherwise.
    """
    known = registry.known_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        hints = []
        for n in unknown:
            base, index = registry.split_index(n)
            if index is not None and registry.backend_name(base) is not None:
                # "cuda:1" is no typo of "cuda": the suite runs a backend by its name, on its default device
                hints.append(f"{n!r} (the suite runs each backend by its name, without a device index: "
                             f"{registry.backend_name(base)!r})")
                continue
            hints.append(f"{n!r}{registry.name_hint(n, known)}")
        raise UnknownDeviceError(f"unknown backend{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; known backends: {', '.join(known)}")


def render_table(results: list[CaseResult], quick: bool = False) -> str:
    groups = list(case_groups(quick))
    rows: dict[tuple[str, str, str], dict[str, list[CaseResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        rows[(r.backend, r.dtype, r.variant)][r.group].append(r)
    head = ["backend", "dtype", "variant", *groups]
    lines = []
    notes: list[str] = []
    skip_rows: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (be, dt, var), by_group in rows.items():
        cells = []
        for g in groups:
            rs = by_group.get(g, []) + by_group.get("*", [])
            if not rs:
                cells.append("-")
                continue
            fails = [r for r in rs if r.status == "fail"]
            passes = [r for r in rs if r.status == "pass"]
            if fails:
                cells.append(f"FAIL {len(fails)}/{len(rs)}")
                # a backend that could not load fails once, not once per group column
                notes.extend(f"FAIL {be} {dt} {var} {g}/{r.case}: {r.detail}" if r.group != "*" else f"FAIL {be}: {r.detail}"
                             for r in fails)
            elif passes:
                cells.append("pass" if len(passes) == len(rs) else f"pass {len(passes)}/{len(rs)}")
            else:
                cells.append("skip")
        for d in sorted({r.detail for rs in by_group.values() for r in rs if r.status == "skip"}):
            skip_rows[(be, d)].append(f"{dt}/{var}")
        lines.append([be, dt, var, *cells])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)] if lines else [len(h) for h in head]
    fmt = "  ".join(f"{{:{w}s}}" for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*map(str, line)) for line in lines]
    total = defaultdict(int)
    for r in results:
        total[r.status] += 1
    out.append("")
    out.append(f"{total['pass']} passed, {total['fail']} failed, {total['skip']} skipped")
    notes.extend(f"skip {be} ({len(rows_)} row{'' if len(rows_) == 1 else 's'}: {', '.join(rows_[:3])}{', ...' if len(rows_) > 3 else ''}): {d}" for (be, d), rows_ in skip_rows.items())
    seen = set()
    for n in notes:
        if n not in seen:
            seen.add(n)
            out.append("  " + n)
    return "\n".join(out)


def cmd_matrix(args: argparse.Namespace) -> int:
    # comma or space separated, as bench's --variants and POLYGEMM_TEST_VARIANTS take them; "--variants ," names none
    # and is refused, rather than run every variant as if the option were not there
    args.variants = split_names("--variants", args.variants, "variant", "polygemm variants lists them",
                                "leave --variants out to run every one")
    # comma or space separated too, as --backends and --variants (and POLYGEMM_TEST_DTYPES) take them, so checked here
    # rather than by argparse's choices, which would take "float32,float64" for one invalid choice
    args.dtypes = split_names("--dtypes", args.dtypes, "dtype", ", ".join(_DTYPES), "leave --dtypes out to run every one")
    if args.dtypes:  # the spellings --dtype takes elsewhere (fp16, half, bf16, ...)
        args.dtypes = [dtype_name(d) for d in args.dtypes]
    unknown = [d for d in args.dtypes or () if d not in _DTYPES]
    if unknown:
        why = f" ({UNCHECKED_DTYPES})" if unknown[0] in INTEGER_DTYPES else ""  # (said of integers and bool alone)
        raise ArgumentError(f"--dtypes {unknown[0]!r} is not a dtype the conformance matrix checks{why}; "
                            f"name {', '.join(_DTYPES)}, comma or space separated")
    results = run_matrix(args.backends, variants=args.variants, dtypes=args.dtypes, quick=args.quick, progress=not args.no_progress and sys.stderr.isatty())
    if not results:  # the filters matched no (dtype, variant) of any backend: a CI job must not pass on nothing
        asked = " ".join(f"--{k} {' '.join(v)}" for k, v in (("backends", args.backends), ("variants", args.variants),
                                                             ("dtypes", args.dtypes)) if v)
        raise UnsupportedProblemError(f"no case to run: {asked or 'the filters'} select no (dtype, variant) of "
                                      f"{', '.join(args.backends or registry.known_names())}; polygemm variants lists each "
                                      "backend's variants and their dtypes")
    print(render_table(results, args.quick))
    if args.json:
        payload: dict[str, Any] = {
            # (seconds: each case's wall time, its inputs and the reference's check included: a slow backend shows)
            "rows": [{k: r.as_dict()[k] for k in ("backend", "dtype", "variant", "group", "case", "status", "detail", "seconds")}
                     for r in results],
        }
        write_json(args.json, payload)  # whole or not at all, as bench writes
        print(f"wrote {args.json}")  # as bench and plot say where their files went
    # a backend named in --backends that computed no product (unavailable here, or refusing every problem: each case
    # but the bad-input ones a skip) fails the run, as a named backend that does not load does: a CI job asking for it
    # must not pass on skips
    named = dict.fromkeys(r.backend for r in results) if args.backends else {}
    idle = [name for name in named if all(r.status == "skip" for r in results if r.backend == name and r.group not in ("errors", "auto"))]
    if idle:
        print(f"polygemm matrix: {', '.join(idle)} computed no product (every case skipped, see above): exit status 1",
              file=sys.stderr)
    return 1 if idle or any(r.status == "fail" for r in results) else 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("matrix", help="run the conformance suite over every backend; pass/fail/skip table")
    s.add_argument("--backends", "--device", dest="backends", nargs="+", action="extend", metavar="NAME",
                   help="backend names, comma or space separated (default: every discovered backend); an unknown name is an error")
    s.add_argument("--variants", nargs="+", action="extend", help="only these variants, comma or space separated (default: every variant of each backend)")
    s.add_argument("--dtypes", nargs="+", action="extend", metavar="DTYPE", help=f"only these dtypes ({', '.join(_DTYPES)}), comma or space separated (default: all)")
    s.add_argument("--quick", action="store_true", help="the quick case grid")
    s.add_argument("--json", metavar="PATH", help='write {"rows": [...]} with every case')
    s.add_argument("--no-progress", action="store_true", help="no progress line on stderr (it is shown only on a terminal)")
    s.set_defaults(fn=cmd_matrix)
