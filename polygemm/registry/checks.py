"""What the registry checks of a loaded backend before it calls it available: its priority, its
variant table and its probe's answer, each held to the contract (:class:`BackendInfo` says the result)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from ..backend import Availability, Backend, Variant
from ..core.precision import PRECISIONS
from ..core.text import short_repr
from .text import describe, one_line

__all__ = ["BackendInfo", "make_info", "variant_table_error", "check_backend", "contract_fault", "Status", "DEFAULT_PLUGIN_PRIORITY"]

DEFAULT_PLUGIN_PRIORITY = 300
#: (available, full reason, priority) of one backend's checks
Status = tuple[bool, str, int]

@dataclass(frozen=True)
class BackendInfo:
    """One discovered backend: ``available`` and ``reason`` come from its import and probe.

    ``reason`` is one line (at most 120 characters, "" when available); ``detail`` is the
    backend's whole text (e.g. every place a library was looked for), shown by
    ``polygemm info -v``.

    ``backend`` is the live instance of this process (None where the import failed). A pickled
    info arrives with ``backend=None`` (``get_backend(name)`` gives the receiving process its
    own): an instance holds this process's locks, driver handles and kernels.
    """

    name: str
    available: bool
    reason: str
    priority: int
    source: str
    backend: Backend | None
    detail: str = ""

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"{self.name} (priority {self.priority}): {state}"

    def __reduce__(self) -> tuple[Any, ...]:
        # what a worker reports (dask's client.run(polygemm.backends), a process pool) is sent without the instance,
        # which holds this process's locks (the cuda backend's lock does not pickle)
        return BackendInfo, (self.name, self.available, self.reason, self.priority, self.source, None, self.detail)

    def __copy__(self) -> BackendInfo:  # frozen: a copy in this process is this info (and its live backend)
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> BackendInfo:
        return self


def _names_tuple(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(isinstance(x, str) and x for x in value)


_EMPTY_TABLE = "variants() returned no Variant; a backend lists at least one kernel it runs"


def variant_table_error(items: list[Any]) -> str | None:
    """What is wrong with a backend's variant table (entries that are no Variants, or fields not of
    their kind), else None; an empty table is no error here (see _EMPTY_TABLE). The registry's probe
    and ``polygemm variants`` ask it. Taken as it was, such a table would misread: ``dtypes="float32"``
    as the dtypes 'f', 'l', 'o', ..., a name given twice would make the second variant unreachable, a
    variant named by no string could not be selected at all, and tile=None would crash ``polygemm variants``."""
    bad = [v for v in items if not isinstance(v, Variant)]
    if bad:
        return f"variants() must return Variant objects; got {type(bad[0]).__name__} {short_repr(bad[0], 40)}"
    seen: set[str] = set()
    for v in items:
        if not isinstance(v.name, str) or not v.name.strip():
            return f"variants(): a Variant's name must be a non-empty string; got {short_repr(v.name, 40)}"
        if ":" in v.name or v.name.strip().lower() == "auto":
            # variant="name:modifier" (split_k=4, ...) and variant="auto" mean something else to every caller
            return (f"variants(): variant {v.name!r} is a name callers cannot select: 'auto' asks for the backend's "
                    f"choice, and ':' begins a modifier (variant='name:split_k=4'); rename it")
        for field_name in ("dtypes", "out_dtypes"):
            value = getattr(v, field_name)
            if not _names_tuple(value):
                return (f"variants(): variant {v.name!r} has {field_name}={short_repr(value, 40)}; it must be a tuple of "
                        f"dtype names, e.g. ('float32',)")
        if not v.dtypes:
            return f"variants(): variant {v.name!r} has dtypes=(); name the dtypes it computes, e.g. ('float32',)"
        # the text fields are printed by `polygemm variants`, for every backend
        for field_name in ("description", "layout", "tile", "requirements"):
            value = getattr(v, field_name)
            if not isinstance(value, str):
                return f"variants(): variant {v.name!r} has {field_name}={short_repr(value, 40)}; it must be a string"
        for field_name in ("auto", "vendor"):
            value = getattr(v, field_name)
            if isinstance(value, str) or value not in (True, False):
                return f"variants(): variant {v.name!r} has {field_name}={short_repr(value, 40)}; it must be True or False"
        precision = getattr(v, "precision", "highest")
        if precision not in PRECISIONS:  # the precision a float32 call may ask of it: read by the planner and the check
            return (f"variants(): variant {v.name!r} has precision={short_repr(precision, 40)}; it must be one of "
                    f"{', '.join(map(repr, PRECISIONS))} (the error class it computes float32 products in)")
        if v.name in seen:
            return f"variants(): variant {v.name!r} is listed twice; give each variant its own name"
        seen.add(v.name)
    return None


def make_info(name: str, ok: bool, text: str, priority: int, source: str, be: Backend | None) -> BackendInfo:
    if ok:
        return BackendInfo(name, True, "", priority, source, be)
    return BackendInfo(name, False, one_line(text) or "unavailable", priority, source, be, text.strip())


def _contract(be: Backend, fallback: int) -> tuple[str | None, int, list[Any]]:
    """What of ``be``'s contract the registry reads before its probe, checked: (the fault, or None; its priority, or
    ``fallback`` where the priority itself is at fault; its variant table)."""
    try:
        prio = getattr(be, "priority", DEFAULT_PLUGIN_PRIORITY)
    except BaseException as exc:
        return (f"reading priority failed: {describe(exc)}", fallback, [])
    if isinstance(prio, bool) or not isinstance(prio, numbers.Integral):
        return (f"priority must be an integer; got {type(prio).__name__} {short_repr(prio, 40)}", fallback, [])
    prio = int(prio)
    try:
        places = getattr(be, "residencies", ("host",))
    except BaseException as exc:
        return (f"reading residencies failed: {describe(exc)}", prio, [])
    if not _names_tuple(places) or not places:  # ("mydev") is a string: its letters would read as places
        return (f"residencies must be a tuple of the places its operands live, e.g. ('host',) or ('mydev',); got "
                f"{short_repr(places, 40)}", prio, [])
    try:
        table = be.variants()
        items = [table] if isinstance(table, (str, bytes)) else list(table)
    except BaseException as exc:
        return (f"variants() failed: {describe(exc)}", prio, [])
    return (variant_table_error(items), prio, items)


_PROBE_FAULTS = ("probe failed: ", "probe() must return an Availability")


def contract_fault(be: Backend, reason: str) -> str | None:
    """Why an unavailable ``be`` (its ``reason``) is so by a fault of its own code, not of the machine it runs on: a
    priority, residencies or variant table of the wrong kinds, a probe() that raised or returned no Availability, an
    empty table; None where its probe() said no. The conformance suite fails such a backend rather than skipping it."""
    fault, _, items = _contract(be, 0)
    if fault is not None:
        return fault
    if reason.startswith(_PROBE_FAULTS) or reason == _EMPTY_TABLE or not items:
        return reason or _EMPTY_TABLE
    return None


def check_backend(be: Backend, fallback: int) -> Status:
    """The checks of a loaded backend: its priority, its variant table, its probe (``fallback``: the
    priority reported when the priority itself is refused)."""
    fault, prio, items = _contract(be, fallback)
    if fault is not None:
        return (False, fault, prio)
    try:
        av = be.probe()
    except BaseException as exc:
        return (False, f"{_PROBE_FAULTS[0]}{describe(exc)}", prio)
    if not isinstance(av, Availability):
        return (False, f"{_PROBE_FAULTS[1]}; it returned {type(av).__name__} {short_repr(av, 40)}", prio)
    if av.ok and not items:  # available, yet nothing could run on it ("it supports " and then nothing, in every refusal)
        return (False, _EMPTY_TABLE, prio)
    if av.ok:
        return (True, "", prio)
    reason = av.reason if isinstance(av.reason, str) else short_repr(av.reason, 200)
    extra = getattr(av, "detail", "")  # a longer text, should Availability grow one
    if isinstance(extra, str) and extra.strip() and extra.strip() != reason.strip():
        reason = f"{reason}\n{extra}"
    return (False, reason if reason.strip() else "probe said unavailable without a reason", prio)
