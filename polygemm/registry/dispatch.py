"""Dispatch: the backend a call's ``device`` names (probed), or the one ``device="auto"`` takes
for a problem, and the candidates it passed over with why."""

from __future__ import annotations

from ..backend import Backend, variant_hint
from ..core.hints import dtype_way_on
from ..core.problem import GemmProblem
from ..core.text import short_repr
from ..errors import (ArgumentError, ArgumentTypeError, BackendUnavailableError, DTypeError, PolygemmError, UnknownDeviceError,
                      UnsupportedProblemError)
from . import discover
from .checks import BackendInfo
from .names import from_env, lookup_in, resolve_device, unknown_device
from .text import describe, one_line

__all__ = ["lookup", "check_known", "get_backend", "locate_device", "select", "for_device", "details_of", "rule_out"]

def lookup(name: str, note: str = "") -> tuple[str | None, int | None]:
    """The discovered backend ``name`` designates, as (its own name, device index or None):
    ``"CUDA:1"`` -> ``("cuda", 1)``, a plugin's entry point as spelt. (None, None) when no
    discovered backend has that name. Neither imports nor probes any backend. ``name`` is taken
    as given (:func:`resolve_device` strips and lower-cases ``device=``). A backend's name with
    an index written otherwise (``"cpu:01"``, ``"cuda: 1"``) raises ArgumentError saying how
    to write it, ``note`` appended."""
    return lookup_in(name, discover.all_entries(), note)


def check_known(device: str) -> None:
    """Raise BackendUnavailableError (suggesting the nearest name) unless ``device`` names a
    discovered backend (``"cuda:1"`` its device 1) or ``"auto"``, and ArgumentError for an index
    written otherwise (``"cuda:01"``); whether it can run here is not asked (a dask worker may
    have the GPU this machine lacks)."""
    name = resolve_device(device)
    entries = discover.all_entries()
    if name != "auto" and lookup_in(name, entries)[0] is None:
        raise unknown_device(name, entries)


def for_device(be: Backend, index: int) -> Backend:
    """``be.for_device(index)``. A plugin's for_device that raises anything but a polygemm error
    (its contract: BackendUnavailableError) is that device being unavailable, with the reason,
    rather than a traceback for ``device="plug:1"`` callers and the CLI."""
    try:
        return be.for_device(index)
    except (KeyboardInterrupt, PolygemmError):
        raise
    except BaseException as exc:  # noqa: BLE001 - a broken plugin is unavailable, never fatal
        text = f"for_device({index}) failed: {describe(exc)}"
        raise BackendUnavailableError(f"device {short_repr(f'{be.name}:{index}')} is unavailable: {one_line(text)}", details=text) from None


def get_backend(name: str) -> Backend:
    """The backend instance called ``name`` (available or not; see ``.probe()``).

    ``"cuda:0"`` names the ``cuda`` backend's device 0, which must be there: an indexed name of an
    unavailable backend raises BackendUnavailableError, as ``device="cuda:0"`` does. Raises BackendUnavailableError for an
    unknown name (suggesting the nearest known one) or one whose import failed, and
    ArgumentError for ``"auto"`` (not a backend) and ArgumentTypeError (an ArgumentError and a
    TypeError, as ``device=3`` raises) for a name that is not a string.
    """
    if not isinstance(name, str):
        raise ArgumentTypeError(f"get_backend takes a backend name (e.g. 'cpu', 'cuda', 'cuda:1'); got {short_repr(name)} ({type(name).__name__})")
    entries = discover.all_entries()
    found, index = lookup_in(name if name in entries else name.strip(), entries)  # as device= takes it ("CPU", " cuda ")
    if found is None and name.strip().lower() == "auto":
        raise ArgumentError("'auto' is not a backend: device='auto' chooses one per problem (polygemm.explain(a, b).backend "
                            f"says which); get_backend takes a backend name: {', '.join(sorted(entries))}")
    if found is None:
        raise unknown_device(name.strip().lower(), entries)
    entry = entries[found]
    be = entry.backend()
    if be is None:
        info = entry.info()
        raise BackendUnavailableError(f"backend {entry.name!r} could not be loaded: {info.reason}", details=info.detail)
    return be if index is None else for_device(be, index)


def details_of(infos: list[BackendInfo]) -> str:
    """Every backend's whole text, one block each (the ``details`` of an exception)."""
    return "\n".join(f"{i.name}: available" if i.available else f"{i.name}: unavailable: {i.detail or i.reason}" for i in infos)


def locate_device(device: str | None) -> tuple[BackendInfo, int | None, str]:
    """The backend an explicit ``device`` (a name, not ``"auto"``; None reads
    ``$POLYGEMM_DEVICE``, as :func:`resolve_device` does) designates, probed: its
    :class:`BackendInfo` (``available`` and ``reason`` say whether it can run here), the device
    index the name gives (None when none; not yet asked of the backend) and the note to append
    to errors about that device ("" unless the name came from ``$POLYGEMM_DEVICE``).

    Raises BackendUnavailableError for a name no discovered backend has (suggesting the nearest
    one, the note appended), ArgumentError for an index written otherwise (``"cuda:01"``) and
    for ``"auto"``, which names no backend.
    """
    name = resolve_device(device)
    entries = discover.all_entries()
    if name == "auto":
        raise ArgumentError(f"'auto' is not a backend: it chooses one per problem; name one of {', '.join(sorted(entries))}")
    env = from_env(device)
    found, index = lookup_in(name, entries, env)
    if found is None:
        exc = unknown_device(name, entries)
        raise UnknownDeviceError(f"{exc}{env}") if env else exc
    return entries[found].info(), index, env


def rule_out(be: Backend, problem: GemmProblem, variant: str) -> str | None:
    """Why ``device="auto"`` passes ``be`` over for ``problem`` (None: it takes it)."""
    try:
        why = be.supports(problem)
        if why is not None and not isinstance(why, str):
            # True or False is neither answer of the contract (None, or the reason as a string): read as a reason, True
            # ("yes, supported") would pass the backend over saying "True"; the plugin's author is told the contract
            return (f"supports() returned {type(why).__name__} {short_repr(why, 40)}; it must return None when the backend "
                    f"can compute the problem, else the reason (a string)")
        if why is not None:
            return one_line(why) or "supports() gave an empty reason"
        names = [v.name for v in be.variants()]
        if variant != "auto" and variant not in names:
            try:  # a spelling the backend parses itself (cuda's "rung:split_k=8"), which device='cuda' runs
                be.get_variant(variant)
            except PolygemmError:
                return f"has no variant {short_repr(variant)}{variant_hint(variant, names)}"
        if variant == "auto" and not any(v.auto and problem.dtype.name in v.dtypes for v in be.variants()):
            return f"no auto-selectable variant for {problem.dtype.name}"
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a broken plugin is passed over, never fatal
        return one_line(f"supports()/variants()/get_variant() failed: {describe(exc)}")
    return None


def dtypes_on(infos: list[BackendInfo], residency: str) -> tuple[str, ...]:
    """The dtypes the available backends that take ``residency`` data compute (a broken plugin counts none)."""
    found: set[str] = set()
    for info in infos:
        be = info.backend
        if info.available and be is not None and residency in getattr(be, "residencies", ()):
            try:
                found.update(be.dtypes())
            except Exception:  # passed over, as rule_out passes it over
                pass
    return tuple(sorted(found))


def select(problem: GemmProblem, device: str | None, variant: str = "auto",
           refused: dict[str, str] | None = None) -> tuple[Backend, list[tuple[str, str]]]:
    """Pick the backend for ``problem``; return it and the candidates passed over (name, why).

    An explicit device never falls back. ``"auto"`` takes the available backend of highest
    priority that supports the problem (and has ``variant`` when one is named), passing over those in
    ``refused`` (name: why; a backend whose plan() refused the problem after its supports() passed it). Each
    reason is one line; the exceptions' ``details`` carry every backend's whole text.
    """
    name = resolve_device(device)
    if name != "auto":
        info, index, env = locate_device(device)
        name = info.name
        if not info.available or info.backend is None:
            everyone = discover.backends()
            others = "; ".join(f"{i.name}: {'available' if i.available else 'unavailable'}" for i in everyone if i.name != name)
            raise BackendUnavailableError(
                f"device {short_repr(name)} is unavailable: {info.reason}. Backends here: {others}. Pick an available one or device='auto'.{env}",
                details=details_of([info] + [i for i in everyone if i.name != name]),
            )
        if index is None:
            return info.backend, []
        try:
            return for_device(info.backend, index), []
        except BackendUnavailableError as exc:
            if not env:
                raise
            raise BackendUnavailableError(f"{exc}{env}", details=exc.details) from None
    passed: list[tuple[str, str]] = []
    infos = discover.backends(wait=discover.AUTO_PROBE_WAIT)
    for info in infos:
        if not info.available or info.backend is None:
            passed.append((info.name, f"unavailable: {info.reason}"))
            continue
        why = refused.get(info.name) if refused else None
        if why is None:
            why = rule_out(info.backend, problem, variant)
        if why is not None:
            passed.append((info.name, why))
            continue
        return info.backend, passed
    summary = "; ".join(f"{n}: {w}" for n, w in passed)
    takes = dtypes_on(infos, problem.residency)
    if variant == "auto" and problem.residency != "host" and takes and problem.dtype.name not in takes:
        # the data's device is there and only its dtype is refused: a dtype error, as device='cuda' gives
        raise DTypeError(f"no available backend computes {problem.dtype.name} on {problem.residency} data; it takes "
                         f"{', '.join(takes)}: {dtype_way_on(problem.dtype.name, tuple(takes), problem.residency)} ({summary})",
                         details=details_of(infos))
    if variant != "auto":
        # what the available backends have, as device=<name> lists it, not only what they lack
        known = "; ".join(f"{info.name}: {', '.join(v.name for v in info.backend.variants())}" for info in infos
                          if info.available and info.backend is not None and any(n == info.name and w.startswith("has no variant")
                                                                                 for n, w in passed))
        raise UnsupportedProblemError(f"no available backend has variant {short_repr(variant)} for this problem ({summary})"
                                      + (f"; their variants: {known}" if known else ""), details=details_of(infos))
    raise BackendUnavailableError(f"no available backend can compute this {problem.dtype.name} problem on {problem.residency}: {summary}",
                                  details=details_of(infos))
