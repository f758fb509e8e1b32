"""Measuring what the cost model can only estimate: which of ``auto``'s top candidates runs a
product fastest on this GPU (``polygemm tune``, and ``POLYGEMM_AUTOTUNE=1`` on first sight).

The candidates are auto's own choice on the estimate alone (:data:`ESTIMATE`: the cost model's
pick, aligned copies included where it makes them), then (:func:`tune_candidates`) the cost
model's fastest few that take the operands as they are, plus its fastest split-K choices; each
is timed (:class:`ScratchTimer`: its own launch, on scratch
buffers laid out as the caller's operands are, filled with random normals, after a warm-up, the
median of several batches of launches by the device's events), never on the caller's arrays.
:func:`measure` turns the timings into a :class:`~.tune_cache.Measurement`; the timing function
is a parameter, so the logic is tested with a fake one.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import threading
import time
import warnings
from dataclasses import replace
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ...core.env import env_flag
from ...core.operand import Operand
from ...core.problem import GemmProblem
from ...errors import PolygemmError, UnsupportedProblemError
from .catalog import auto_candidates
from .cost import Candidate
from .decisions import KernelLauncher, batch_bytes, pitch_ranked, plan_mats
from .launch import PaddedLaunch
from .planning import Mat, aligned_copy, pitch_copy, pitch_off, tma_refusal
from .tune_cache import GpuId, Measurement, TuneCache, TuneKey, align_class, cache_for, now_text, package_version

__all__ = ["gpu_of", "tune_key", "tune_candidates", "measure", "ScratchTimer", "event_timer", "autotune_enabled",
           "AutotuneBudget", "AUTOTUNE_BUDGET", "TOP", "SPLITS", "safe_to_time", "measured_reason", "cache_enabled", "ESTIMATE",
           "estimating", "estimate_only", "process_budget",
           "tuning_failed", "is_tuning_error", "estimates", "time_candidates", "measured_ranking", "lookup", "tune_problem"]

#: candidates timed by default: the cost model's fastest this many, and its fastest split-K choices this many
TOP = 4
SPLITS = 4
#: timings a candidate gets (each the mean of a batch of launches), the median kept
REPEATS = 5
#: seconds a batch of launches lasts at least (fewer launches for long products, at most 100)
BATCH_SECONDS = 0.002
#: the candidate name standing for auto's own choice without a measurement (the estimate's pick)
ESTIMATE = "auto"

_local = threading.local()


@contextlib.contextmanager
def estimating() -> Iterator[None]:
    """Inside the block ``auto`` ignores measurements: what the cost model alone would run."""
    before = getattr(_local, "estimating", False)
    _local.estimating = True
    try:
        yield
    finally:
        _local.estimating = before


def estimate_only() -> bool:
    """Whether this thread is inside :func:`estimating`."""
    return bool(getattr(_local, "estimating", False))


def gpu_of(rt: Any, sms: int) -> GpuId | None:
    """The GPU a plan runs on, as tuning keys it (None without one: planning with no device, or
    a stand-in runtime that names no SM count)."""
    if rt is None or not getattr(rt, "name", "") or not getattr(rt, "sms", 0):
        return None
    return GpuId(str(rt.name), (int(rt.cc[0]), int(rt.cc[1])), int(sms))


def tune_key(gpu: GpuId, p: GemmProblem) -> TuneKey:
    """What ``auto`` weighs for ``p`` on ``gpu``: sizes, dtypes, the batch, and the operands as the
    device holds them (:func:`.decisions.plan_mats`: host operands as compact uploads, a batch's
    pointers standing for the alignment every matrix has)."""
    mats = plan_mats(p)
    layouts = ",".join(x.layout for x in mats)
    align = ",".join(align_class(x.ptr, x.ld, x.itemsize, x.rows if x.layout == "row" else x.cols) for x in mats)
    return TuneKey(gpu, p.dtype.name, p.out_dtype.name, p.m, p.n, p.k, p.count, layouts, align)


def tune_candidates(ranked: Sequence[Candidate]) -> list[str]:
    """The variant names worth timing, fastest estimate first, each once. Candidates on aligned
    copies are left out as such: a TMA rung named with variant= runs on the copies auto would make where it
    cannot read the operands (and is timed under that label); :data:`ESTIMATE` times the estimate's own pick."""
    return list(dict.fromkeys(c.label for c in ranked if not c.padded))


def measure(names: Sequence[str], time_fn: Callable[[str], Any], estimates: dict[str, float] | None = None, *,
            top: int = TOP, splits: int = SPLITS, budget_s: float = math.inf,
            clock: Callable[[], float] = time.monotonic) -> Measurement | None:
    """Time ``names`` in order and keep the fastest. ``time_fn(name)`` gives seconds per launch,
    or (the label of what ran, seconds): :data:`ESTIMATE` is auto's own choice without a
    measurement (the cost model's pick, aligned copies and all), timed first where it is in
    ``names`` and recorded under its label as the estimate's pick (else the first timed is).
    Named candidates are timed until ``top`` have been and, beyond those, ``splits`` split-K
    ones. A candidate that cannot take the problem (UnsupportedProblemError, or a time that is
    not a positive number) is passed over and counts for nothing; once ``budget_s`` seconds are
    spent no further candidate starts (the first timed always runs). None when nothing was timed."""
    timings: dict[str, float] = {}
    start = clock()
    named = extra = 0
    pick = ""
    for name in names:
        is_split = ":split_k=" in name
        if name != ESTIMATE and named >= max(top, 1) and (not is_split or extra >= splits):
            if extra >= splits:
                break
            continue
        if timings and clock() - start > budget_s:
            break
        try:
            got = time_fn(name)
        except UnsupportedProblemError:
            continue
        label, t = got if isinstance(got, tuple) else (name, got)
        if t is None or not math.isfinite(t) or t <= 0:
            continue
        if name == ESTIMATE:
            pick = label
        elif named >= max(top, 1):
            extra += 1
            named += 1
        else:
            named += 1
        timings.setdefault(label, t * 1e6)
    if not timings:
        return None
    winner = min(timings, key=lambda n: timings[n])
    pick = pick or next(iter(timings))
    return Measurement(winner, timings[winner], timings, pick, float((estimates or {}).get(pick, 0.0)), now_text(), package_version())


def measured_reason(m: Measurement) -> str:
    """The plan's reason for a variant measured fastest on this GPU."""
    if m.shipped:
        text = (f"measured on this GPU model: {m.winner} ran {m.us:.1f} µs, the fastest of {len(m.timings)} candidates "
                f"timed on {m.date or 'an unknown date'} (the measurements polygemm ships; polygemm tune measures this GPU "
                f"itself)")
    else:
        text = (f"measured on this GPU: {m.winner} ran {m.us:.1f} µs, the fastest of {len(m.timings)} candidates timed "
                f"on {m.date or 'an unknown date'} (polygemm tune)")
    if m.estimate_pick and m.estimate_pick != m.winner:
        pick = m.pick_us
        text += f"; the cost model's estimate picked {m.estimate_pick}" + (f" ({pick:.1f} µs measured)" if pick else "")
    elif m.estimate_pick:
        text += "; the cost model's estimate picked it too"
    return text


def event_timer(rt: Any) -> Callable[[Callable[[], Any]], float]:
    """Seconds ``fn()``'s queued work takes on the legacy default stream, by the device's events."""
    def _time(fn: Callable[[], Any]) -> float:
        with rt.active():
            start, end = rt.drv.Event(), rt.drv.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.time_till(end)) / 1e3

    return _time


def safe_to_time(rt: Any) -> bool:
    """Whether launches on the legacy default stream are allowed now: not while a stream of this
    thread is captured into a CUDA graph (the driver then refuses, or the capture breaks)."""
    cu = getattr(rt, "cu", None)
    if cu is None:
        return False
    status = cu.ffi.new("int *")
    try:
        pushed = rt.enter()  # the question is asked of the device's context (a NumPy caller's thread has none current)
    except Exception:  # noqa: BLE001 - no context: nothing can be timed either
        return False
    try:
        return bool(cu.lib.cuStreamIsCapturing(cu.stream(0), status) == 0 and status[0] == 0)
    except Exception:  # noqa: BLE001 - a driver that cannot say: do not time
        return False
    finally:
        if pushed:
            rt.leave()


def _span_bytes(mat: Mat, stride: int, count: int) -> int:
    return (mat.max_offset + 1) * mat.itemsize + (max(count, 1) - 1) * stride


def _rebound(op: Operand, mat: Mat, ptr: int, stride: int) -> Operand:
    """``op`` as a device operand at ``ptr``, laid out as ``mat`` (the plan's view of it)."""
    layout: Any = mat.layout
    return replace(op, ptr=ptr, ld=mat.ld, layout=layout, residency="cuda", array=None, interface=None, copied=False,
                   readonly=False, batch_stride=stride // mat.itemsize if stride else 0, broadcast=False, pending=False)


class ScratchTimer:
    """Times named variants of a product on scratch device buffers laid out as ``p``'s operands
    are (leading dimensions, layouts, batch strides, and each base's offset within 256 bytes, so
    the plan reads the same alignment), holding random normals. Use as a context manager
    (the buffers are freed on exit); calling it with a name returns seconds per launch."""

    def __init__(self, backend: Any, rt: Any, p: GemmProblem, repeats: int = REPEATS, batch_seconds: float = BATCH_SECONDS) -> None:
        self.backend, self.rt, self.p = backend, rt, p
        self.repeats, self.batch_seconds = max(1, repeats), batch_seconds
        self._allocs: list[Any] = []
        self._timer = event_timer(rt)
        self.problem: GemmProblem | None = None
        self.ptrs = (0, 0, 0)
        self._done: dict[str, tuple[str, float]] = {}

    def __enter__(self) -> "ScratchTimer":
        p, rt = self.p, self.rt
        a, b, c = plan_mats(p)
        # a reversed batch (negative strides) is timed walking forward: the same alignment, and no read below the buffer
        sa, sb, _, sd = (abs(x) for x in batch_bytes(p))
        with rt.active():
            try:
                ptrs = []
                for mat, stride in ((a, sa), (b, sb), (c, sd)):
                    nbytes = _span_bytes(mat, stride, p.count)
                    buf = rt.allocate(nbytes + 256)
                    self._allocs.append(buf)
                    ptr = int(buf) + (mat.ptr % 256 if mat.ptr else 0)
                    if mat is not c:
                        self._fill(ptr, nbytes, mat.itemsize, p.dtype)
                    ptrs.append(ptr)
            except BaseException:
                self.__exit__(None, None, None)
                raise
        self.ptrs = (ptrs[0], ptrs[1], ptrs[2])
        out = _rebound(p.out, c, ptrs[2], sd) if p.out is not None else None
        self.problem = replace(p, a=_rebound(p.a, a, ptrs[0], sa), b=_rebound(p.b, b, ptrs[1], sb), c=None, out=out,
                               alpha=1.0, beta=0.0, residency="cuda")
        return self

    def _fill(self, ptr: int, nbytes: int, itemsize: int, dtype: Any) -> None:
        """Random normals (never zeros): a block drawn on the host, then doubled on the device."""
        drv = self.rt.drv
        count = max(nbytes // itemsize, 1)
        block = np.random.default_rng().standard_normal(min(count, 1 << 20), dtype=np.float32).astype(dtype)
        raw = block.view(np.uint8)
        done = min(raw.nbytes, nbytes)
        drv.memcpy_htod(ptr, raw[:done])
        while done < nbytes:
            step = min(done, nbytes - done)
            drv.memcpy_dtod(ptr + done, ptr, step)
            done += step

    def __exit__(self, *exc: Any) -> None:
        if not self._allocs:
            return
        with self.rt.active():
            for buf in self._allocs:
                try:
                    buf.free()
                except Exception:  # noqa: BLE001 - freeing scratch must not hide the timing's own error
                    pass
        self._allocs.clear()

    def __call__(self, name: str) -> tuple[str, float]:
        """(the label of what ran, seconds a launch) of variant ``name``, or for :data:`ESTIMATE`
        of what auto runs on the cost model's estimate alone (``rung on aligned copies`` where it
        copies the operands first)."""
        assert self.problem is not None, "use ScratchTimer as a context manager"
        if name in self._done:
            return self._done[name]
        if name == ESTIMATE:
            with estimating():
                plan = self.backend.plan(self.problem, "auto")
        else:
            plan = self.backend.plan(self.problem, name)
            if plan.variant != name:  # e.g. a TMA rung handing these operands to another rung: not this candidate
                raise UnsupportedProblemError(f"{name} does not run this problem itself ({plan.variant} would)")
        launch = plan.private.launch
        if launch is None:
            raise UnsupportedProblemError(f"{name}: nothing to launch for this problem")
        label = plan.variant + (launch.copies_label if isinstance(launch, PaddedLaunch) else "")
        run = KernelLauncher(launch, *self.ptrs, 1.0, 0.0, plan.variant)
        with self.rt.active():
            run()  # warm-up: the build, the module load, a split's workspace
            self.rt.ctx.synchronize()
            one = self._timer(run)
            calls = max(1, min(100, int(self.batch_seconds / max(one, 1e-7))))

            def batch() -> None:
                for _ in range(calls):
                    run()

            t = statistics.median(self._timer(batch) / calls for _ in range(self.repeats))
        self._done[name] = self._done[label] = (label, t)  # a named candidate that is the estimate's pick: timed once
        return label, t


def cache_enabled() -> bool:
    """``POLYGEMM_TUNE_CACHE`` (on by default): whether ``auto`` reads measured winners; off, the
    cost model's estimate alone chooses (what ``polygemm bench`` compares a tuned run against)."""
    return env_flag("POLYGEMM_TUNE_CACHE", True)


def autotune_enabled() -> bool:
    """``POLYGEMM_AUTOTUNE``: tune each new product on first sight (off by default)."""
    return env_flag("POLYGEMM_AUTOTUNE")


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
        if not 0 <= value < math.inf:  # (inf: no count or timeout a loop can take)
            raise ValueError
    except ValueError:
        warnings.warn(f"{name}={raw!r} is not a finite number >= 0; using {default:g}", RuntimeWarning, stacklevel=3)
        return default
    return value


class AutotuneBudget:
    """How much first-sight tuning a process does: at most ``shapes`` products
    (``$POLYGEMM_AUTOTUNE_SHAPES``, default 64), each at most ``seconds`` of timing
    (``$POLYGEMM_AUTOTUNE_SECONDS``, default 2; the candidate started last finishes)."""

    def __init__(self, shapes: int | None = None, seconds: float | None = None) -> None:
        self.shapes = int(_env_number("POLYGEMM_AUTOTUNE_SHAPES", 64)) if shapes is None else shapes
        self.seconds = _env_number("POLYGEMM_AUTOTUNE_SECONDS", 2.0) if seconds is None else seconds
        self.used = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """One more product may be tuned (counted); False once ``shapes`` have been."""
        with self._lock:
            if self.used >= self.shapes:
                return False
            self.used += 1
            return True


#: the process's first-sight tuning budget (read from the environment on first use)
AUTOTUNE_BUDGET: list[AutotuneBudget] = []
_budget_lock = threading.Lock()


def process_budget() -> AutotuneBudget:
    with _budget_lock:
        if not AUTOTUNE_BUDGET:
            AUTOTUNE_BUDGET.append(AutotuneBudget())
        return AUTOTUNE_BUDGET[0]


def tuning_failed(key: TuneKey, exc: BaseException) -> None:
    """A first-sight tuning that failed: said once as a warning; the plan goes on with the estimate."""
    warnings.warn(f"POLYGEMM_AUTOTUNE: tuning {key.shape_text()} {key.dtype} failed ({type(exc).__name__}: {exc}); "
                  f"the cost model's estimate chooses", RuntimeWarning, stacklevel=4)


def is_tuning_error(exc: BaseException) -> bool:
    return isinstance(exc, (PolygemmError, MemoryError, RuntimeError, OSError)) or type(exc).__module__.startswith("pycuda")


# -- auto's side: what the plan reads, and tuning a product ------------------------------------
def estimates(p: GemmProblem, sm: int, sms: int) -> list[Candidate]:
    """auto's candidates for ``p``, fastest estimate first, as the plan weighs them before trying
    each (the cost model, then what rows off sector boundaries cost a TMA rung)."""
    ranked = auto_candidates(p.m, p.n, p.k, p.dtype.name, sm=sm, count=p.count, sms=sms, result_layout=p.result_layout,
                             out_itemsize=p.out_dtype.itemsize)
    a, b, c = plan_mats(p)
    if ranked and tma_refusal(a, b) is None and (pitch_off(a) or pitch_off(b)):
        ranked = pitch_ranked(ranked, a, b, (pitch_copy(a), pitch_copy(b), aligned_copy(c)), p.result_layout, p.count)
    return ranked


def time_candidates(backend: Any, p: GemmProblem, rt: Any, ranked: Sequence[Candidate], *, top: int = TOP,
                    splits: int = SPLITS, budget_s: float = math.inf,
                    time_fn: Callable[[str], Any] | None = None) -> Measurement | None:
    """Time auto's own choice and its top candidates for ``p`` (by ``time_fn``, else on scratch
    buffers on ``rt``, planned by ``backend``)."""
    names = [ESTIMATE] + tune_candidates(ranked)
    guesses: dict[str, float] = {}
    for cand in ranked:
        if not cand.padded:
            guesses.setdefault(cand.label, cand.estimate_us)
    if time_fn is not None:
        return measure(names, time_fn, guesses, top=top, splits=splits, budget_s=budget_s)
    with ScratchTimer(backend, rt, p) as timer:
        return measure(names, timer, guesses, top=top, splits=splits, budget_s=budget_s)


def measured_ranking(backend: Any, p: GemmProblem, rt: Any, sms: int, ranked: list[Candidate],
                     reason: str) -> tuple[list[Candidate], str, Candidate | None]:
    """``ranked`` with the variant measured fastest for ``p`` on this GPU first (its time as its
    estimate), the plan's reason saying so, and that candidate; where nothing was measured (with
    ``POLYGEMM_AUTOTUNE=1``, measured now, within the process's budget), ``ranked`` as it is, the
    reason saying the choice is estimated, and None."""
    gpu = gpu_of(rt, sms)
    if gpu is None or p.empty or estimate_only():
        return ranked, reason, None
    if not cache_enabled():
        return ranked, reason + "; estimated ($POLYGEMM_TUNE_CACHE is off: measurements on this GPU are not read)", None
    key = tune_key(gpu, p)
    cache = cache_for(gpu)
    m = cache.get(key)
    borrowed = ""
    if m is None and key.dtype == "bfloat16":  # the float16 rungs' bfloat16 builds: float16's measurement chooses
        m = cache.get(_as_float16(key))
        borrowed = " (of the float16 product: bfloat16 runs the same rungs' bfloat16 builds)" if m is not None else ""
    if (m is None or m.shipped or borrowed) and autotune_enabled():  # this GPU's own measurement, where it may make one
        mine = _first_sight(backend, p, rt, key, ranked, cache)
        if mine is not None:
            m, borrowed = mine, ""
    if m is None:
        return ranked, reason + "; estimated, not measured on this GPU (polygemm tune measures it)", None
    hit = next((c for c in ranked if c.label == m.winner), None)
    if hit is None and m.winner.endswith(" on aligned copies"):  # copies made where TMA refuses the operands as they are
        base = next((c for c in ranked if c.label == m.winner.removesuffix(" on aligned copies") and not c.padded), None)
        if base is not None:
            first = replace(base, estimate_us=m.us, padded=True)
            return [first] + ranked, measured_reason(m) + borrowed, first
    if hit is None:
        where = "this GPU model" if m.shipped else "this GPU"
        return ranked, reason + (f"; estimated: {m.winner}, measured fastest on {where} on {m.date}{borrowed}, is no "
                                 f"candidate for these operands now"), None
    first = replace(hit, estimate_us=m.us)
    return [first] + [c for c in ranked if c is not hit], measured_reason(m) + borrowed, first


def _as_float16(key: TuneKey) -> TuneKey:
    """A bfloat16 product's key as the float16 product of the same operands would have it."""
    return replace(key, dtype="float16", out_dtype="float16" if key.out_dtype == "bfloat16" else key.out_dtype)


def _first_sight(backend: Any, p: GemmProblem, rt: Any, key: TuneKey, ranked: list[Candidate], cache: TuneCache) -> Measurement | None:
    """``POLYGEMM_AUTOTUNE=1``: ``p`` timed now on scratch buffers, once however many threads
    plan it at once, within the process's budget; a failure is warned of and the estimate chooses."""
    budget = process_budget()
    if not safe_to_time(rt):
        return None

    def run() -> Measurement | None:
        if not budget.take():
            return None
        try:
            return time_candidates(backend, p, rt, ranked, budget_s=budget.seconds)
        except Exception as exc:
            if not is_tuning_error(exc):
                raise
            tuning_failed(key, exc)
            return None

    return cache.measure_once(key, run)


def lookup(p: GemmProblem, rt: Any, sms: int) -> Measurement | None:
    """What the tuning cache holds for ``p`` on ``rt``'s GPU (None: not measured, or no GPU)."""
    gpu = gpu_of(rt, sms)
    return None if gpu is None or p.empty else cache_for(gpu).get(tune_key(gpu, p))


def tune_problem(backend: Any, p: GemmProblem, rt: Any, sms: int, *, top: int = TOP, splits: int = SPLITS, force: bool = False,
                 budget_s: float = math.inf, time_fn: Callable[[str], Any] | None = None) -> tuple[TuneKey, Measurement | None]:
    """``polygemm tune``'s one product: its key, and the measurement kept (measured now unless the
    cache holds one and not ``force``; None for an empty product or when nothing could be timed)."""
    gpu = gpu_of(rt, sms)
    if gpu is None:
        from ...errors import BackendUnavailableError

        raise BackendUnavailableError("tuning needs a CUDA device")
    key = tune_key(gpu, p)
    if p.empty:
        return key, None
    ranked = estimates(p, rt.cc[0] * 10 + rt.cc[1], sms)
    m = cache_for(gpu).measure_once(key, lambda: time_candidates(backend, p, rt, ranked, top=top, splits=splits, budget_s=budget_s,
                                                                 time_fn=time_fn), force=force)
    return key, m
