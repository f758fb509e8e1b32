"""A verified call: the product computed, checked where it ran, and handed back only when it passed.

The product is computed into a result of its own, never into ``out``: ``out`` (and ``c``, when
``out`` is ``c``) is written only once the check passed (``"raise"``, ``"retry"``) or the warning
was given (``"warn"``), so a failed check leaves both as they were. That costs one copy of the result
into ``out`` per verified call with ``out``; a call without ``out`` pays nothing for it.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import sys
import threading
import warnings
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from .. import registry
from ..backend import Backend, Plan
from ..errors import ArgumentTypeError, PolygemmError, VerificationError, VerificationWarning
from .faults import active_faults, corrupt
from .host import host_check
from .report import CheckReport

__all__ = ["verified_gemm", "check_product", "deliver", "host_values"]

log = logging.getLogger("polygemm")
_local = threading.local()


def _rng() -> np.random.Generator:
    """This thread's generator of check vectors (seeded from the OS once a thread: a fresh r every call)."""
    rng = getattr(_local, "rng", None)
    if rng is None:
        rng = _local.rng = np.random.default_rng()
    return rng


def host_values(x: Any, backend: Backend | None = None) -> np.ndarray | None:
    """``x``'s values as a NumPy array (None stays None): NumPy as it is, CuPy and torch through their own
    copies, a backend's own device arrays through ``backend.to_host``, array-likes through NumPy."""
    if x is None or isinstance(x, np.ndarray):
        return x
    module = type(x).__module__.partition(".")[0]
    if module == "torch":
        t = x.detach().cpu()
        if t.is_conj():  # a lazy conjugate: its values, as torch reads them (numpy() refuses the bit)
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        host: np.ndarray = t.float().numpy() if str(t.dtype) == "torch.bfloat16" else t.numpy()  # bfloat16 in float32: exact
        return host
    if module == "cupy":
        return np.asarray(x.get())
    if backend is not None and (hasattr(x, "__cuda_array_interface__") or hasattr(x, "__polygemm_array_interface__")):
        return np.asarray(backend.to_host(x))  # pycuda's, a MusaArray, and the like: the backend copies it
    return np.asarray(x)


def check_product(backend: Backend, plan: Plan, a: Any, b: Any, c: Any, result: Any, alpha: float, beta: float) -> CheckReport:
    """Check ``result`` of ``plan``: on the backend's device when it checks there (``verify_product``, which
    returns None for operands it does not hold), else on the host."""
    p = plan.problem
    about = _about(plan)
    on_device = getattr(backend, "verify_product", None)
    if on_device is not None:
        report = on_device(plan, a, b, c, result, alpha, beta, _seed(), about)
        if report is not None:
            assert isinstance(report, CheckReport)
            return report
    # the threshold allows for the error of the path that ran, which may be more accurate than the call asked
    return host_check(host_values(a, backend), host_values(b, backend), host_values(c, backend) if beta != 0.0 else None,
                      host_values(result, backend), alpha, beta, dtype=p.dtype, out_dtype=p.out_dtype, rng=_rng(),
                      scalar_dtype=backend.scalar_dtype(p.dtype), about=about,
                      precision=plan.precision_met)


def _seed() -> int:
    """A fresh seed of the check's r every call (a raw draw: the cheapest there is)."""
    return (int(_rng().bit_generator.random_raw()) >> 2) | 1


#: _about's answer per plan (held with it: its id is not reused while it is kept)
_abouts: dict[int, tuple[Plan, dict[str, str]]] = {}


def _about(plan: Plan) -> dict[str, str]:
    """What a report names the product by: its backend, device, variant and shape (kept per plan: a loop of checked
    calls asks the same of one cached plan every call; read it, never change it)."""
    known = _abouts.get(id(plan))
    if known is not None and known[0] is plan:
        return known[1]
    about = {"backend": plan.backend, "device": plan.device, "variant": plan.variant, "shape": _shape_text(plan.problem)}
    if len(_abouts) >= 1024:
        _abouts.clear()
    _abouts[id(plan)] = (plan, about)
    return about


#: the words a report names a product by, per problem shape (a loop of checked calls asks the same every call)
_shapes: dict[tuple[Any, ...], str] = {}


def _shape_text(p: Any) -> str:
    """``"MxNxK (MxNxK) dtype"`` of problem ``p`` (batched: its batch first)."""
    key = (p.count, tuple(p.batch), p.m, p.n, p.k, p.dtype)
    text = _shapes.get(key)
    if text is None:
        if len(_shapes) >= 1024:
            _shapes.clear()
        text = _shapes[key] = f"{p.shape_str()} (MxNxK) {p.dtype.name}"
    return text


def deliver(result: Any, out: Any, backend: Backend | None = None) -> Any:
    """``result`` into ``out`` (returned), or ``result`` itself when there is no ``out``; ``backend``: whose
    context a device array of its own (pycuda's) is written in."""
    if out is None:
        return result
    if isinstance(out, np.ndarray):
        np.copyto(out, np.asarray(host_values(result)))
    elif type(out).__module__.partition(".")[0] == "torch":
        out.copy_(result)
    elif (copy := getattr(backend, "copy_result", None)) is not None and copy(result, out):
        pass  # one device copy on the arrays' stream (the backend's driver, not the array library's kernel)
    else:
        with backend.active() if backend is not None else contextlib.nullcontext():
            try:
                out[...] = result
            except TypeError as exc:  # a plugin's array that takes no item assignment, of a backend with no copy_result
                name = getattr(backend, "name", "its backend")
                raise ArgumentTypeError(f"out is a {type(out).__name__}, which verify= cannot write the checked result into "
                                        f"({exc}); backend {name!r} offers no copy_result(result, out) for that: omit out "
                                        f"and use the returned result, or call without verify=") from exc
    return out


def _retry_variant(backend: Backend, plan: Plan) -> str | None:
    """The variant the retry runs: the backend's choice of another rung (``verify_retry_variant``), or
    None to run the same call again."""
    other = getattr(backend, "verify_retry_variant", None)
    if other is None:
        return None
    name = other(plan)
    return None if name is None else str(name)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _callers_level() -> int:
    """The ``stacklevel`` of a warning raised in the function that calls this one, that names the first frame
    outside polygemm: the user's line, however many of polygemm's calls (matmul, a stand-in for out) lie between."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def _check_into_out(bind: Callable[..., Any], a: Any, b: Any, c: Any, alpha: float, beta: float, device: Any, variant: str,
                    out: Any, out_dtype: Any, precision: str | None) -> tuple[Any, Plan, Backend, float, float, Callable[[bool], None]] | None:
    """A call with ``out`` bound once (``bind``: the plan cache's, which validates ``out`` as gemm does) and computed,
    checked and copied into ``out`` by its backend in one go (``checked_execute``): (what the backend returned, the
    plan, the backend, the call's alpha and beta, ``record``); None where the backend does not do that for this call."""
    bound = bind(a, b, c, alpha, beta, device, variant, out, out_dtype, precision)
    if bound is None:
        return None
    entry, call, record = bound
    backend = entry.backend
    hook = getattr(backend, "checked_execute", None)
    if hook is None:
        return None
    plan = entry.plan
    checked = hook(plan, call, _seed(), _about(plan))
    if checked is None:
        return None
    record(checked.report.ok)
    return checked, plan, backend, call.alpha, call.beta, record


def verified_gemm(run: Callable[..., Any], last_product: Callable[[], tuple[Plan, float, float]], validate: Callable[..., Plan],
                  mode: str,
                  a: Any, b: Any, c: Any, alpha: Any, beta: Any, device: Any, variant: str, out: Any, out_dtype: Any,
                  precision: str | None = None, note: Callable[[str], None] | None = None,
                  bind: Callable[..., Any] | None = None, adopt: Callable[[Plan], None] | None = None) -> Any:
    """``run(a, b, c, ...)`` (polygemm.gemm with its check off) checked as ``mode`` says ("raise", "warn",
    "retry"). ``last_product()``: the plan of the product ``run`` computed last in this thread (the cached plan itself,
    read, never changed) and that call's alpha and beta. ``validate``: polygemm.explain, which refuses what gemm would refuse about ``out`` before
    anything runs (the product itself is computed into a result of its own); ``note``: adds a line to the last
    plan's notes (what a retry did). ``bind``: for a call with ``out``, its plan and bound call where one kernel path computes it
    (``(entry, call, record)``; ``record(delivered)`` makes it this thread's last product and, where it was written,
    tells ``out``'s library), else None; its backend's ``checked_execute`` then computes, checks and delivers it in
    one go."""
    kw = {"alpha": alpha, "beta": beta, "out_dtype": out_dtype, "precision": precision, "verify": "off"}
    if out is not None and bind is not None and not active_faults():
        fast = _check_into_out(bind, a, b, c, alpha, beta, device, variant, out, out_dtype, precision)
        if fast is not None:
            checked, plan, backend, alpha_, beta_, record = fast
            try:
                if checked.report.ok:
                    if note is not None:
                        note(_passed(mode, checked.report))
                    return out
                if mode == "warn":
                    _warn(checked.report)
                    checked.deliver()
                    record(True)
                    return out
                if mode != "retry":
                    raise _refusal(checked.report, out, c)
            finally:
                checked.close()
            kw["out_dtype"] = plan.problem.out_dtype
            return _retried(run, last_product, checked.report, plan, backend, a, b, c, alpha_, beta_, device, variant, out,
                            kw, note, adopt)
    with_out: Plan | None = None
    if out is not None:
        with_out = validate(a, b, c, alpha=alpha, beta=beta, device=device, variant=variant, out=out,
                            out_dtype=out_dtype, precision=precision)
        kw["out_dtype"] = with_out.problem.out_dtype
    result = run(a, b, c, device=device, variant=variant, **kw)
    plan, alpha_, beta_ = last_product()
    backend = registry.get_backend(plan.backend)
    if active_faults():
        with backend.active():  # a device array of the backend's own (pycuda) is written with its context current
            result = corrupt(result, backend.to_host, backend.to_device)
    report = check_product(backend, plan, a, b, c, result, alpha_, beta_)
    if report.ok or mode == "warn":
        if not report.ok:
            _warn(report)
        delivered = deliver(result, out, backend)
        if with_out is not None and adopt is not None:  # last_plan() describes the call as made, out and all
            adopt(with_out)
            if note is not None:
                note(f"verify={mode!r}: computed into a result of its own, checked, then copied into out")
        if note is not None:
            note(_passed(mode, report) if report.ok else
                 f"verify='warn': the check failed ({_rows(report.failed)} off; VerificationWarning said where); the result "
                 f"was handed back all the same")
        return delivered
    if mode == "retry":
        return _retried(run, last_product, report, plan, backend, a, b, c, alpha_, beta_, device, variant, out, kw, note,
                        adopt)
    raise _refusal(report, out, c)


#: _passed's notes by (mode, where, rows checked, rows unchecked): a loop of checked calls makes the same one each call
_passed_notes: dict[tuple[str, str, int, int], str] = {}


def _passed(mode: str, report: CheckReport) -> str:
    """last_plan()'s note of a check that passed."""
    key = (mode, report.where, report.checked, report.unchecked)
    text = _passed_notes.get(key)
    if text is None:
        if len(_passed_notes) >= 1024:
            _passed_notes.clear()
        text = _passed_notes[key] = _passed_text(mode, report)
    return text


def _passed_text(mode: str, report: CheckReport) -> str:
    skipped = (f", {_rows(report.unchecked)} left unchecked (non-finite operands, or a product that may rightly "
               f"overflow)" if report.unchecked else "")
    return f"verify={mode!r}: checked on {report.where}, passed ({_rows(report.checked)}{skipped})"


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _warn(report: CheckReport) -> None:
    warnings.warn(VerificationWarning(report.message() + "; returned all the same (verify='warn')"),
                  stacklevel=_callers_level())


def _refusal(report: CheckReport, out: Any, c: Any) -> VerificationError:
    """The error of a check that failed: the result was not handed back, and ``out`` and ``c`` are as they were."""
    kept = " and ".join(name for name, x in (("out", out), ("c", c)) if x is not None)
    return VerificationError(report.message() + "; the result was not handed back" +
                             (f"; {kept} {'are' if ' and ' in kept else 'is'} untouched" if kept else ""), report=report)


def _retried(run: Callable[..., Any], last_product: Callable[[], tuple[Plan, float, float]], report: CheckReport, plan: Plan,
             backend: Backend, a: Any, b: Any, c: Any, alpha_: float, beta_: float, device: Any, variant: str, out: Any,
             kw: dict[str, Any], note: Callable[[str], None] | None, adopt: Callable[[Plan], None] | None = None) -> Any:
    """verify="retry" after ``report`` failed for ``plan``: the product computed again (by another rung where the
    backend has one) into a result of its own and checked; delivered into ``out`` if it passed, else raised.
    ``adopt``: makes the plan last_plan() describes the retry's, its reason the retry (not a variant requested)."""
    other = _retry_variant(backend, plan)
    try:
        result = run(a, b, c, device=device if other is None else plan.backend, variant=variant if other is None else other, **kw)
    except PolygemmError:  # the other rung cannot take these operands after all: the same call again
        if other is None:
            raise
        result = run(a, b, c, device=device, variant=variant, **kw)
    again = last_product()[0]
    if active_faults():
        with backend.active():
            result = corrupt(result, backend.to_host, backend.to_device)
    second = check_product(backend, again, a, b, c, result, alpha_, beta_)
    if second.ok:
        log.warning("%s; recomputed with variant %r, which passed (verify='retry')", report.message(), again.variant)
        if adopt is not None and other is not None:  # the retry chose the variant, not the caller
            mine = copy.copy(again)
            mine.reason = f"verify='retry' ran it: variant {plan.variant!r}, which ran first, failed its check"
            adopt(mine)
        if note is not None:  # last_plan() describes the product handed back: say why it ran this variant
            note(f"verify='retry': variant {plan.variant!r} failed its check ({_rows(report.failed)} off); this variant "
                 "recomputed the product and passed")
        return deliver(result, out, backend)
    first = f"first attempt: variant {plan.variant!r}, {_rows(report.failed)} off" + (f", the first row {report.rows[0]}" if report.rows else "")
    raise _refusal(replace(second, attempts=(first, f"retried with variant {again.variant!r}, which failed too")), out, c)
