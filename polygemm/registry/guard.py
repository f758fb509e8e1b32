"""The plugin guard: a third party's backend (an entry point of another distribution) is held to
the contract by the core. Its plan() and run() results are checked, what it raises that is not
polygemm's becomes a DeviceError naming it, its inputs are read-only to it, and a failed call
leaves a host ``out`` as it was. Built-in backends are not wrapped."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ..backend import Backend, Plan
from ..core.problem import Call, GemmProblem
from ..errors import DeviceError, PolygemmError
from ..interop.cuda_array_interface import device_interface
from .discover import BUILTIN_PRIORITY
from .names import split_index

__all__ = ["is_plugin", "plugin_check", "plugin_plan", "plugin_execute"]

def is_plugin(backend: Backend) -> bool:
    """A backend of another distribution (an entry point): its plan() and run() are held to the
    contract by the core (:func:`plugin_plan`, :func:`plugin_execute`); the built-ins are not."""
    # by the base name: a built-in's device handle is named with its index ("cuda:0")
    return split_index(backend.name)[0] not in BUILTIN_PRIORITY


def _broken(backend: Backend, what: str) -> DeviceError:
    return DeviceError(f"backend {backend.name!r} ({type(backend).__module__}.{type(backend).__qualname__}) {what}; "
                       f"this is a fault of that plugin: report it to its authors, or pass another device")


def plugin_check(backend: Backend, problem: GemmProblem) -> None:
    """A plugin's check_problem() (its refusal(), dtypes(), variants() and residencies read for a named device): its
    refusals (polygemm's errors) as they are; anything else it raises (a variants() that fails now though it listed at
    discovery, residencies that are no tuple) a DeviceError naming the plugin, not a bare TypeError naming none."""
    try:
        backend.check_problem(problem)
    except PolygemmError:
        raise
    except (Exception, SystemExit, GeneratorExit) as exc:
        raise _broken(backend, f"failed while the core checked a problem against it (its refusal(), dtypes(), variants() "
                               f"or residencies): {type(exc).__name__}: {exc}") from exc


def plugin_plan(backend: Backend, problem: GemmProblem, variant: str) -> Plan:
    """A plugin's plan(), checked: its own errors (polygemm's) as they are; anything else it
    raises (a KeyError of its tile table) or returns (None, a dict, another backend's plan) is
    a DeviceError naming the plugin, not an AttributeError ("'NoneType' object has no attribute
    'candidates'") or a bare KeyError naming no backend; a plan naming another backend would be
    reported by last_plan()/explain() as that one's."""
    try:
        plan = backend.plan(problem, variant)
    except PolygemmError:
        raise
    except (Exception, SystemExit, GeneratorExit) as exc:  # (a sys.exit() in a plugin is its failure, as at its import)
        raise _broken(backend, f"failed in plan(): {type(exc).__name__}: {exc}") from exc
    if not isinstance(plan, Plan):
        raise _broken(backend, f"plan() returned {type(plan).__name__} {plan!r:.60}, not a polygemm.backend.Plan")
    if plan.backend != backend.name:
        raise _broken(backend, f"plan() returned a plan for backend {plan.backend!r}; Plan(backend=...) must be "
                               f"self.name ({backend.name!r})")
    # the core's own copy, with its own lists, to complete and cache: a plugin may keep the Plan it returns and return
    # it again (a table of plans by shape); completed in place, the plan cached for gemm(a, b) would describe a later
    # gemm(a, b, out=o) and run with an out it did not have
    mine = copy.copy(plan)
    mine.layouts, mine.launch, mine.copies = dict(plan.layouts), dict(plan.launch), list(plan.copies)
    mine.candidates, mine.notes = list(plan.candidates), list(plan.notes)
    return mine


def plugin_execute(backend: Backend, plan: Plan, call: Call) -> Any:
    """A plugin's execute (its run()), held to the contract the caller relies on: a host result
    is a NumPy array of the result's shape and dtype, and ``out`` when one is given (written, not
    a new array beside it); what it raises that is not polygemm's is a DeviceError naming it;
    and a failed call leaves a host ``out`` (and so a ``c`` updated in place) as it was, whatever
    the plugin wrote into it before failing. Unchecked, each would reach the caller silently: a
    (M+1, N) or float64 result, None, an ``out`` returned unwritten (its old values read as the
    product), a half-written ``out`` after a raise."""
    problem = plan.problem
    out = call.out
    host = problem.residency == "host"
    saved = out.copy() if host and isinstance(out, np.ndarray) and out.size else None  # O(M*N) beside the O(M*N*K) product
    if host:  # the inputs as read-only views: a plugin that wrote into c (or a, b) would change the caller's arrays
        call = _read_only_inputs(call)

    def restore() -> None:
        if saved is not None:
            np.copyto(out, saved)

    # the method the plugin wrote: its execute() where it overrides the core's (which binds the call and calls run())
    fn = "execute()" if type(backend).execute is not Backend.execute else "run()"
    try:
        # IEEE results silently, as every backend gives them: a plugin's NumPy warnings (inf - inf in its matmul) are no
        # FloatingPointError under the caller's np.errstate(all="raise")
        with np.errstate(all="ignore"):
            result = backend.execute(plan, call)
    except PolygemmError:
        restore()
        raise
    except KeyboardInterrupt:  # the user's, not the plugin's: raised on, out as it was
        restore()
        raise
    except (Exception, SystemExit, GeneratorExit) as exc:  # (a sys.exit() in a plugin is its failure, as at its import)
        restore()
        wrote = (" (it wrote into an input: a, b and c are read-only to a plugin's run(); compute into a new array, or into "
                 "problem.out.array when out is given)") if isinstance(exc, ValueError) and "read-only" in str(exc) else ""
        raise _broken(backend, f"failed in {fn} on {problem.shape_str()} (MxNxK) {problem.dtype.name}, variant "
                               f"{plan.variant!r}: {type(exc).__name__}: {exc}{wrote}") from exc
    want = problem.result_shape
    shape = getattr(result, "shape", None)
    if shape is None and not host:  # a device array known by its interface alone, which holds its shape
        try:
            found = device_interface(result)
        except Exception:  # noqa: BLE001 - an interface that cannot be read: no shape, said below
            found = None
        shape = None if found is None else found[1].get("shape")
    why = None
    if host and not isinstance(result, np.ndarray):
        why = f"{fn} returned {type(result).__name__}, not a NumPy array"
    elif shape is None or tuple(shape) != want:
        why = f"{fn} returned a result of shape {None if shape is None else tuple(shape)}, not the result's {want}"
    elif host and result.dtype != problem.out_dtype:
        why = f"{fn} returned a {result.dtype.name} result, not {problem.out_dtype.name}"
    elif host and out is not None and not (result is out or (
            result.__array_interface__["data"][0] == out.__array_interface__["data"][0] and result.strides == out.strides)):
        why = f"{fn} returned an array other than problem.out.array (it must write problem.out.array and return that very object)"
    if why is not None:
        restore()
        raise _broken(backend, f"{why}, for {problem.shape_str()} (MxNxK) {problem.dtype.name}, variant {plan.variant!r}"
                               + ("; out was left as it was" if out is not None and host else ""))
    if host and out is None and not _fresh(result, call):
        # a new result is the caller's own, as numpy.matmul's is: a plain, C-ordered, writeable array sharing no memory
        # with the operands (a view of c, a broadcast, a Fortran-ordered or read-only array is copied into one)
        result = np.array(result, order="C", copy=True, subok=False)
    return result


def _fresh(result: np.ndarray, call: Call) -> bool:
    """Whether a plugin's new host result is already what numpy.matmul returns: a plain C-ordered writeable array whose
    memory is none of the operands'."""
    if type(result) is not np.ndarray or not result.flags.c_contiguous or not result.flags.writeable:
        return False
    return not any(isinstance(x, np.ndarray) and np.may_share_memory(result, x) for x in (call.a, call.b, call.c))


def _read_only(x: Any) -> Any:
    if type(x) is not np.ndarray or not x.flags.writeable:
        return x
    view = x.view()
    view.flags.writeable = False
    return view


def _read_only_inputs(call: Call) -> Call:
    """``call`` with its host a, b and c as read-only views of the same memory (no copy); ``out``
    as it is, and ``c`` too when it is ``out`` (in place: written as ``out``)."""
    c = call.c if call.c is call.out else _read_only(call.c)
    return Call(_read_only(call.a), _read_only(call.b), c, call.out, call.a_ptr, call.b_ptr, call.c_ptr,
                call.out_ptr, call.alpha, call.beta, call.stream, call.alloc, call.matched)
