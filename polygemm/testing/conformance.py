"""The conformance suite: every backend (plugins too) runs the same grid of cases.

``run_conformance("cuda")`` drives ``polygemm.gemm(..., device=name, variant=v)`` over
shapes (1×1×1, primes, tall-skinny, K=1, empty), every layout combination, alpha/beta/c/
out (in place too), NaN/Inf propagation, device-resident operands, and the bad inputs the
API must reject, for each dtype and variant the backend declares. Inputs are fresh random
numbers (the seed is reported on failure); outputs are poisoned with NaN first. Results
are checked against the float64 reference under :func:`polygemm.testing.error_bound`.

The cases themselves are :mod:`.conformance_cases`'; this module selects and runs them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError, PolygemmError, UnsupportedProblemError
from ..backend import Backend, Variant
from ..core.dtypes import COMPLEX_DTYPES, SUPPORTED_DTYPES, dtype_alias
from ..core.text import short_repr
from ..problem import dtype_named
from ..registry import get_backend
from ..registry.checks import contract_fault
from .conformance_cases import FLOAT16_HINT, QUICK_SHAPES, SHAPES, Case, Context, Skip, case_groups

__all__ = ["CaseResult", "run_conformance", "run_case", "iter_cases", "case_groups", "modified_variants", "unchecked_dtypes", "SHAPES", "QUICK_SHAPES", "FLOAT16_HINT"]

@dataclass(frozen=True)
class CaseResult:
    """One case's outcome: status is ``pass``, ``fail`` or ``skip``; detail says why."""

    backend: str
    dtype: str
    variant: str
    group: str
    case: str
    status: str
    detail: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def modified_variants(be: Backend, variants: Iterable[str] | None) -> dict[str, Variant]:
    """The names among ``variants`` that modify a rung of ``be``'s own table (cuda's
    ``"rung:split_k=4"``: the rung split over K), each with the Variant ``be.get_variant`` gives
    for it (its dtypes are the rung's). The suite runs these by that name, as ``gemm(variant=...)``
    takes them. A name whose rung is another backend's selects nothing here; one whose rung is
    ``be``'s but that ``be`` refuses (a rung with no split build, ``split_k=1``, a modifier ``be``
    does not know) raises ArgumentError with the backend's reason."""
    table = {v.name for v in be.variants()}
    found: dict[str, Variant] = {}
    for name in variants or ():
        base, sep, _ = name.partition(":")
        if name in table or not sep or base not in table or name in found:
            continue
        try:
            found[name] = be.get_variant(name)
        except Exception as exc:  # the backend's own words: UnsupportedProblemError, or whatever a plugin raises
            raise ArgumentError(f"variants names {name!r}, which backend {be.name!r} does not run: {exc}") from None
        if not isinstance(found[name], Variant):
            raise ArgumentError(f"variants names {name!r}: backend {be.name!r}'s get_variant() must return a Variant; "
                                f"got {type(found[name]).__name__}")
    return found


#: what the suite leaves out, said wherever a selection asks for it
UNCHECKED_DTYPES = "integer products are exact: a backend's own tests compare them with numpy.matmul's"
#: the dtypes the suite checks: those the error bound is written for
CHECKED_DTYPES: tuple[str, ...] = SUPPORTED_DTYPES + COMPLEX_DTYPES


def _iter_targets(be: Backend, dtypes: Iterable[str] | None, variants: Iterable[str] | None) -> Iterator[tuple[str, str]]:
    """(dtype, variant name) to run, in the backend's table order; a modified name
    (``"rung:split_k=4"``) right after its rung's place."""
    want_d = set(dtypes) if dtypes else None
    want_v = set(variants) if variants else None
    modified = modified_variants(be, variants)
    for v in be.variants():
        runs = [(v.name, v)] if want_v is None or v.name in want_v else []
        runs += [(name, mv) for name, mv in modified.items() if name.partition(":")[0] == v.name]
        for name, chosen in runs:
            for d in chosen.dtypes:
                # the floating and complex dtypes, which the suite's error bound is written for (integer products are
                # exact, compared with numpy.matmul by the tests of their backends)
                if (want_d is None or d in want_d) and d in CHECKED_DTYPES:
                    yield d, name


def availability(be: Backend) -> tuple[bool, str]:
    from ..registry import backends as _infos

    info = next((i for i in _infos() if i.name == be.name), None)
    if info is not None:
        return info.available, info.reason
    av = be.probe()
    return av.ok, av.reason


def _selection(arg: str, value: Iterable[str] | str | None) -> list[str] | None:
    """A ``dtypes``/``variants``/``groups`` selection as a list of names (None: everything). One string
    is names comma separated, as ``POLYGEMM_TEST_DTYPES`` and ``polygemm matrix`` take them (read as an
    iterable, ``dtypes="float32"`` would be seven one-letter names, which select no case)."""
    if value is None:
        return None
    try:
        items = value.split(",") if isinstance(value, str) else list(value)
    except TypeError:  # one name not in a list (dtypes=np.float32) or no names at all: list()'s words named no argument
        raise ArgumentTypeError(f"{arg} must be names (strings) or one string of names comma separated, e.g. "
                                f"{arg}={'float32' if arg == 'dtypes' else 'name'!r}; got {short_repr(value)}") from None
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise ArgumentTypeError(f"{arg} must be names (strings), e.g. {arg}=[{'float32' if arg == 'dtypes' else 'name'!r}]; "
                                f"got {bad[0]!r} ({type(bad[0]).__name__})")
    names = [(dtype_alias(v) if arg == "dtypes" else v.strip()) for v in items if v.strip()]  # (fp32, as matrix takes it)
    if not names:  # an empty selection selects nothing: it would run every case, which is not what was asked
        raise ArgumentError(f"{arg} names nothing ({value!r}); name at least one, or pass None for all")
    return names


def unchecked_dtypes(arg: str, names: Sequence[str]) -> str:
    """The refusal of a selection ``arg`` naming ``names``, dtypes the suite does not check."""
    return (f"{arg} names {', '.join(map(repr, names))}, which the conformance suite does not check ({UNCHECKED_DTYPES}); "
            f"name {', '.join(CHECKED_DTYPES)}")


def _check_selection(be: Backend, dtypes: list[str] | None, variants: list[str] | None, groups: list[str] | None) -> None:
    """ArgumentError for a selection that names what no backend has (a typo): it would run no case and
    return no row, which a plugin's CI (``assert not any(r.status == "fail" ...)``) would take for a pass.
    A variant of another backend selects nothing here, as ``polygemm matrix`` passes one list to every backend."""

    unknown = [d for d in dtypes or () if d not in CHECKED_DTYPES]
    if unknown:
        raise ArgumentError(unchecked_dtypes("dtypes", unknown))
    grid = case_groups(quick=True)
    unknown = [g for g in groups or () if g not in grid]
    if unknown:
        raise ArgumentError(f"groups names {', '.join(map(repr, unknown))}, which is no case group; name {', '.join(grid)}")
    if variants:
        known = {v.name for v in be.variants()}
        if not {v.partition(":")[0] for v in variants} <= known:
            from .. import registry

            for name in registry.known_names():
                try:
                    known |= {v.name for v in registry.get_backend(name).variants()}
                except Exception:  # a backend that cannot load: its variants are unknown here
                    continue
        unknown = [v for v in variants if v.partition(":")[0] not in known]  # "rung:split_k=4" names its rung, as matrix reads it
        if unknown:
            from ..backend import variant_hint

            own = [v.name for v in be.variants()]
            if "auto" in unknown:  # matrix takes it as a name; the suite runs the variants auto chooses from, each by name
                raise ArgumentError(f"variants names 'auto', which is no variant of its own: the suite runs each variant by "
                                    f"name (auto chooses among them); name some of {', '.join(own) or 'none'}, or none for all")
            raise ArgumentError(f"variants names {', '.join(map(repr, unknown))}{variant_hint(unknown[0], sorted(known))}, which "
                                f"backend {be.name!r} does not have (nor any other); its variants: {', '.join(own) or 'none'}")
        modified_variants(be, variants)  # "rung:split_k=4" of a rung of this backend: refused here, in the backend's words


def iter_cases(
    be: Backend,
    *,
    dtypes: Iterable[str] | None = None,
    variants: Iterable[str] | None = None,
    groups: Iterable[str] | None = None,
    quick: bool = False,
) -> Iterator[tuple[str, str, str, str, Case]]:
    """(dtype, variant, group, case name, case) for every case of the grid."""
    dtypes, variants, groups = _selection("dtypes", dtypes), _selection("variants", variants), _selection("groups", groups)
    grid = case_groups(quick)
    if groups:
        wanted = set(groups)
        grid = {g: cs for g, cs in grid.items() if g in wanted}
    if not getattr(be, "batched", False) and "shapes" in grid:  # batches are run by backends that declare them
        grid["shapes"] = {name: case for name, case in grid["shapes"].items() if name != "batch"}
    for dtype, variant in _iter_targets(be, dtypes, variants):
        for group, cases in grid.items():
            for name, case in cases.items():
                yield dtype, variant, group, name, case


def run_case(be: Backend, dtype: str, variant: str, group: str, name: str, case: Case, seed: int | None = None) -> CaseResult:
    """Run one case with fresh random data (``seed``: the inputs of the failure that named it); never raises."""
    ctx = Context(be, dtype_named(dtype), variant, seed)
    t0 = time.perf_counter()
    try:
        case(ctx)
        status, detail = "pass", ""
    except Skip as s:
        status, detail = "skip", str(s)
    except UnsupportedProblemError as e:  # the variant declines the problem, saying why
        status, detail = "skip", f"unsupported: {e}"
    except AssertionError as e:  # every failure with the seed of its inputs
        status, detail = "fail", str(e) if f"seed {ctx.seed}" in str(e) else f"{e} (seed {ctx.seed})"
    except Exception as e:  # an unexpected error is a failure with its text
        status, detail = "fail", f"{type(e).__name__}: {e} (seed {ctx.seed})"
    return CaseResult(be.name, dtype, variant, group, name, status, detail, time.perf_counter() - t0)


def run_conformance(
    backend: str | Backend,
    *,
    dtypes: Iterable[str] | None = None,
    variants: Iterable[str] | None = None,
    groups: Iterable[str] | None = None,
    quick: bool = False,
    progress: Callable[[CaseResult], None] | None = None,
    allow_empty: bool = False,
    seed: int | None = None,
) -> list[CaseResult]:
    """Run the suite on one backend; return one :class:`CaseResult` per case.

    An unavailable backend gives one ``skip`` row per (dtype, variant) with its reason; one unavailable for a fault of
    its own code (a probe() that raised or returned no Availability, a table or priority of the wrong kinds) one
    ``fail`` row saying so, as the pytest runner fails it.
    ``dtypes``, ``variants`` and ``groups`` select (lists of names, or one string of names comma
    separated); a name no backend has raises ArgumentError rather than selecting nothing, and so
    does a dtype selection that leaves this backend no (dtype, variant) to run (the suite checks the
    floating and complex dtypes, :data:`CHECKED_DTYPES`; integer products are exact, compared with numpy.matmul
    by the tests of their backends), unless ``allow_empty`` (``polygemm matrix``, one selection for every backend).
    ``progress`` is called after every case (for progress displays). ``seed``: the seed a failure named, to run
    its case again on the same inputs (with ``dtypes``, ``variants`` and ``groups`` selecting it); None, fresh
    inputs for every case.
    """
    if not isinstance(backend, (str, Backend)):
        raise ArgumentTypeError(f"backend must be a backend's name or a polygemm.backend.Backend; got {short_repr(backend)}")
    for flag, given in (("quick", quick), ("allow_empty", allow_empty)):
        if not isinstance(given, (bool, np.bool_)):
            raise ArgumentTypeError(f"{flag} must be True or False; got {short_repr(given)}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32):
        raise ArgumentError(f"seed must be an integer from 0 to 2**32 - 1 (the seed a failure named), or None; got "
                            f"{short_repr(seed)}")
    if progress is not None and not callable(progress):
        raise ArgumentTypeError(f"progress must be a callable taking each CaseResult, or None; got {short_repr(progress)}")
    be = get_backend(backend) if isinstance(backend, str) else backend
    dtypes, variants, groups = _selection("dtypes", dtypes), _selection("variants", variants), _selection("groups", groups)
    available, reason = availability(be)
    fault = None if available else contract_fault(be, reason)
    if fault is not None:  # unavailable for a fault of its own code, not of this machine: a failure, as under pytest
        row = CaseResult(be.name, "*", "*", "*", "*", "fail", f"backend {be.name!r} breaks the backend contract: {fault}")
        if progress is not None:
            progress(row)
        return [row]
    if not available:  # its rows skipped with the reason; its variant table read only where it can be (a broken one is
        #                the reason it is unavailable: no traceback, no "no case to run" read from a misread table)
        try:
            _check_selection(be, dtypes, variants, groups)
            targets = list(_iter_targets(be, dtypes, variants))
        except PolygemmError:  # a selection of what the backend has not (a typo, a rung that cannot split): the caller's
            raise
        except Exception:  # noqa: BLE001 - the table the registry refused: one row for the backend
            targets = []
        skipped = [CaseResult(be.name, dtype, variant, "*", "*", "skip", f"backend unavailable: {reason}")
                   for dtype, variant in targets or [("*", "*")]]
        for row in skipped:
            if progress is not None:
                progress(row)
        return skipped
    _check_selection(be, dtypes, variants, groups)
    # (a variant of another backend selects nothing here, as polygemm matrix passes one list to every backend; one of
    # this backend's own that selects nothing, a variant of integers only, say, is refused like an empty dtype selection)
    own = {v.name for v in be.variants()}
    mine = [v for v in variants or () if v.partition(":")[0] in own]
    if not allow_empty and (not variants or mine) and next(_iter_targets(be, dtypes, variants), None) is None:
        chosen = [v for v in be.variants() if not variants or v.name in {m.partition(":")[0] for m in mine}]
        declared = sorted({d for v in chosen for d in v.dtypes})
        whose = f"variant{'s' if len(mine) != 1 else ''} {', '.join(mine)} declare{'s' if len(mine) == 1 else ''}" if mine \
            else "its variants declare"
        raise ArgumentError(f"no case to run on {be.name!r}: {whose} {', '.join(declared) or 'no dtype'}"
                            + (f" and the selection asks for {', '.join(dtypes)}" if dtypes else "")
                            + f"; the suite checks {', '.join(CHECKED_DTYPES)} ({UNCHECKED_DTYPES})")
    results: list[CaseResult] = []
    for target in iter_cases(be, dtypes=dtypes, variants=variants, groups=groups, quick=quick):
        results.append(run_case(be, *target, seed=seed))
        if progress is not None:
            progress(results[-1])
    return results

