"""The ``cuda`` backend: hand-written GEMM kernels on NVIDIA GPUs (the Backend methods only).

What it can run and what ``auto`` picks: :mod:`.catalog`; which of auto's candidates the operands
allow: :mod:`.fitting`; building kernels: :mod:`.compiler`;
the device, its context and loaded kernels: :mod:`.device`; one planned launch: :mod:`.launch`;
the pure launch planning (operand swap, transposes, alignment builds, geometry): :mod:`.planning`.

NumPy operands are copied to the device and the result back (synchronously). Device operands
(``__cuda_array_interface__``: CuPy, PyTorch, pycuda) stay where they are; the product is queued
on the stream they name (the default stream when they name none) and not waited for, and the
result is ``out`` or a new pycuda ``GPUArray``.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ...backend import Availability, Backend, Plan, Variant, check_call, host_layouts
from ...errors import ArgumentError, BackendUnavailableError, DeviceError, UnsupportedProblemError
from ...interop import device_pointer, raw_view
from ...core.views import operand_view
from ...problem import Call, GemmProblem, normalize, short_repr
from .catalog import auto_candidates, check_smem, choose_auto_variant, explain_choice, tma_fallback
from .cost import Candidate
from . import compiler
from .device import CudaRuntime, fork_hint, runtime_for
from .launch import PaddedLaunch, PanelLaunch, PreparedLaunch
from .planning import (IndexRangeError, LaunchPlan, Mat, TmaUnsuitable, aligned_copy, panel_mats, panels, pitch_copy, pitch_off, plan_launch,
                       split_refusal, tma_refusal)
from .variants import kernel_specs, variant_table
from .decisions import (CudaPlan, KernelLauncher, at_offset, batch_bytes, compact_ld, device_memory, device_sm, layout_ranked, pitch_ranked,
                        plan_mats, split_suffix)
from .fitting import copies_named, fit_named_on_copies, fit_ranked
from .complex_launch import ComplexLaunch
from .complex_plan import plan_complex, queue_complex, with_complex
from .host_run import run_host
from . import emulated_plan
from . import autotune
from .tune_cache import Measurement, TuneKey
from ...tuning import record_problem

__all__ = ["CudaBackend", "CudaPlan"]


def _no_driver() -> tuple[str, str] | None:
    """(library, the loader's words) when the NVIDIA driver library that PyCUDA and the launch path
    link against (``libcuda.so.1``; ``nvcuda.dll`` on Windows) does not load here, else None."""
    import ctypes
    import sys

    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return name, str(exc)
    return None


#: the dtypes whose rungs take alpha and beta as doubles (the float64 rungs, complex128's four products on them)
DOUBLE_SCALARS = ("float64", "complex128")


class CudaBackend(Backend):
    """NVIDIA GPUs through PyCUDA: two SGEMM ladders, the FP16 tensor-core kernels, cuBLAS."""

    name = "cuda"
    priority = 500
    residencies = ("host", "cuda")
    float32_scalars = True
    batched = True
    reads_conjugates = True  # complex operands: the imaginary plane copied negated (.complex_launch)

    def __init__(self, ordinal: int | None = None) -> None:
        #: the device of ``cuda:N``; None for ``cuda``, which runs where device operands live
        #: (host operands: $POLYGEMM_CUDA_DEVICE, else device 0)
        self._ordinal = ordinal
        self._rt: CudaRuntime | None = None
        self._rt_error: str | None = None
        self._lock = threading.Lock()
        self._indexed: dict[int, CudaBackend] = {}

    # -- discovery -------------------------------------------------------------------
    def _runtime(self) -> CudaRuntime:
        rt = self._rt
        if rt is not None:
            return rt
        with self._lock:
            if self._rt is None and self._rt_error is None:
                self._rt_error = self._start()
            if self._rt is None:
                raise BackendUnavailableError(f"cuda backend unavailable: {self._rt_error}")
            return self._rt

    def _start(self) -> str | None:
        try:
            import pycuda.driver as drv  # noqa: F401
        except Exception as exc:
            # Without an NVIDIA driver, installing PyCUDA cannot make this backend available (and its source
            # build needs cuda.h and libcuda.so): on a machine with no NVIDIA GPU the missing driver is the reason
            # given, not "pip install 'polygemm[cuda]'" (a build that fails, or a backend still unavailable), nor
            # "pycuda is not importable" (pycuda's own import fails for want of libcuda even where it is installed)
            # (the first line is what info and errors show, cut to 120 characters; info -v shows the loader's words)
            missing = _no_driver()
            if missing is not None:
                return (f"no NVIDIA driver ({missing[0]} does not load): the cuda backend needs an NVIDIA GPU and its driver\n"
                        f"{missing[1]}\nwith a GPU and its driver installed: pip install 'polygemm[cuda]'")
            return f"pycuda is not importable ({type(exc).__name__}: {exc}); install it with pip install 'polygemm[cuda]'"
        try:
            drv.init()
        except Exception as exc:
            return f"CUDA driver initialization failed: {exc}{fork_hint()}"
        try:
            count = drv.Device.count()
        except Exception as exc:
            return f"could not count CUDA devices: {exc}"
        if count < 1:
            return "no CUDA device found"
        if self._ordinal is not None:
            ordinal = self._ordinal
        else:
            try:
                ordinal = int(os.environ.get("POLYGEMM_CUDA_DEVICE", "0"))
            except ValueError:
                return f"POLYGEMM_CUDA_DEVICE={os.environ['POLYGEMM_CUDA_DEVICE']!r} is not a device index (0 .. {count - 1})"
        if not 0 <= ordinal < count:
            return f"cuda:{ordinal} does not exist: this machine has {count} CUDA device(s), cuda:0 .. cuda:{count - 1}"
        try:
            rt = runtime_for(ordinal)
        except Exception as exc:
            return f"could not open CUDA device {ordinal}: {exc}{fork_hint()}"
        if rt.cc < (6, 0):
            return f"{rt.name} has compute capability {rt.cc[0]}.{rt.cc[1]}; polygemm's kernels need 6.0 or newer"
        reason = compiler.available(rt.arch)
        if reason is not None:
            return reason
        self._rt = rt
        return None

    def probe(self) -> Availability:
        try:
            self._runtime()
        except BackendUnavailableError:
            return Availability(False, self._rt_error or "unknown")
        return Availability(True)

    def variants(self) -> Sequence[Variant]:
        # complex products run on the real rungs (.complex_plan); float32 ones also on the bfloat16 rungs (.emulated_plan)
        return with_complex(emulated_plan.with_emulations(variant_table()))

    def device_name(self) -> str:
        return self._label(self._rt)

    @staticmethod
    def _label(rt: Any) -> str:
        if rt is None:
            return ""
        return f"{rt.name} (cuda:{getattr(rt, 'ordinal', 0)}, {rt.arch}; kernels built by {compiler.describe(rt.arch)})"

    def for_device(self, index: int) -> "CudaBackend":
        """``cuda:index``: this backend held to one device (operands elsewhere are refused)."""
        if index == self._ordinal:
            return self
        with self._lock:
            be = self._indexed.get(index)
            if be is None:
                be = self._indexed[index] = CudaBackend(index)
                be.name = f"cuda:{index}"  # type: ignore[misc]
        av = be.probe()
        if not av.ok:
            raise BackendUnavailableError(f"device {short_repr(f'cuda:{index}')} is unavailable: {av.reason}")
        return be

    def _plan_runtime(self, p: GemmProblem) -> Any:
        """The device a plan runs on: ``cuda:N``'s, or for ``cuda`` the one the device operands
        live on (asked of the driver), else the default. Operands on another device than a
        ``cuda:N`` asks for, or on two devices, are refused, naming where each lives."""
        base = self._rt
        if p.residency != "cuda" or base is None or not hasattr(base, "cu"):
            return base
        where = {op.name: base.cu.pointer_device(op.ptr) for op in p.operands() if op.ptr}
        devices = {d for d in where.values() if d is not None}
        if len(devices) > 1:
            listing = ", ".join(f"{n} on cuda:{d}" for n, d in where.items() if d is not None)
            raise ArgumentError(f"operands live on different GPUs ({listing}); move them to one device")
        if not devices:
            return base
        d = devices.pop()
        if self._ordinal is not None and d != self._ordinal:
            listing = ", ".join(f"{n} on cuda:{x}" for n, x in where.items() if x is not None)
            raise ArgumentError(f"device='cuda:{self._ordinal}' but the operands live on cuda:{d} ({listing}); "
                                f"pass device='cuda:{d}', or device='cuda' to run where the data is")
        return base if d == base.ordinal else runtime_for(d)

    # -- planning --------------------------------------------------------------------
    def get_variant(self, name: str) -> Variant:
        """A variant by name; ``"<rung>:split_k=<n>"`` names a rung with a batched build run as
        ``n`` K-slices side by side and a deterministic reduction (what ``auto`` may choose)."""
        base, splits = split_suffix(name)
        v = super().get_variant(base)
        if splits:
            spec = kernel_specs().get(base)
            if spec is None or not (spec.batch and spec.predicated and spec.split_k):
                able = ", ".join(s.name for s in kernel_specs().values() if s.batch and s.predicated and s.split_k)
                raise UnsupportedProblemError(f"variant={name!r}: {base} cannot split K (no batched build); rungs that can: {able}")
        return v

    def scalar_dtype(self, dtype: np.dtype) -> np.dtype | None:
        """float32, except for float64 and complex128 products, whose rungs (and cuBLAS's DGEMM) take alpha and
        beta as doubles: the base refusal of scalars past float32's range applies to the others only."""
        return None if dtype.name in DOUBLE_SCALARS else np.dtype(np.float32)

    def _sms(self, rt: Any = None) -> int:
        """The device's streaming multiprocessors (132 when no device is open: planning tests)."""
        return int(getattr(rt if rt is not None else self._rt, "sms", 0) or 132)

    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        rt = self._plan_runtime(problem)
        if problem.dtype.kind == "c":  # four real products of one real plan
            return plan_complex(self, problem, variant, rt)
        return self.plan_real(problem, variant, rt)

    def plan_real(self, problem: GemmProblem, variant: str, rt: Any) -> Plan:
        """The plan of real ``problem`` on ``rt``'s device: :meth:`plan_on`'s, or a float32 product's emulation on the
        bfloat16 tensor cores (:mod:`.emulated_plan`) where it is named or auto estimates it faster."""
        if variant in emulated_plan.EMULATED:
            self.check_problem(problem, self.get_variant(variant))
            return emulated_plan.plan_emulated(self, problem, variant, rt)[0]
        plan = self.plan_on(problem, variant, rt)
        emulation = emulated_plan.emulation_for(problem, device_sm(rt)) \
            if variant == "auto" else None
        return emulated_plan.choose(self, problem, emulation, rt, plan) if emulation is not None else plan

    def plan_on(self, problem: GemmProblem, variant: str, rt: Any, record: bool = True) -> Plan:
        """The plan of real ``problem`` on ``rt``'s device (None: planned without a device); ``record``: an auto plan
        is a shape the run's recorder keeps (``$POLYGEMM_RECORD_SHAPES``), not one derived from the caller's."""
        p = problem
        sm = device_sm(rt)
        ranked: list[Candidate] = []
        estimate = 0.0
        if variant == "auto":
            self.check_problem(p)
            if record:
                record_problem(p)
            ranked = auto_candidates(p.m, p.n, p.k, p.dtype.name, sm=sm, count=p.count, sms=self._sms(rt),
                                     result_layout=p.result_layout, out_itemsize=p.out_dtype.itemsize)
            if not ranked:
                chosen, reason = choose_auto_variant(p.m, p.n, p.k, p.dtype.name, sm=sm, batched=p.count > 1)
            else:
                chosen, reason = ranked[0].variant, explain_choice(ranked[0], ranked, p.dtype.name)
        else:
            chosen, reason = self.get_variant(variant).name, f"variant={variant!r} requested"
        chosen_splits = split_suffix(variant)[1] if variant != "auto" else 0
        v = self.get_variant(chosen)
        self.check_problem(p, v)
        spec = kernel_specs().get(chosen)
        if spec is not None and sm and not spec.runs_on(sm):
            need = spec.arch or f"sm_{spec.min_sm} or newer"
            raise UnsupportedProblemError(f"variant {chosen!r} needs {need}; this device is sm_{sm}")
        plan = Plan(self.name, chosen + (f":split_k={chosen_splits}" if chosen_splits else ""), reason, p,
                    device=self._label(rt), layouts=host_layouts(p))
        if p.residency == "host":
            plan.copies.append("host -> device: a, b" + (", c" if p.c is not None and p.beta != 0 else "") + "; device -> host: result")
        if p.empty:
            plan.reason += "; empty product (M, N, K or the batch is 0): no GEMM kernel launched"
            plan.private = CudaPlan(None, p.result_layout, batch_bytes(p), rt)
            return plan
        a, b, c = plan_mats(p)
        sa, sb, _, sd = batch_bytes(p)
        batch = (p.count, sa // p.a.itemsize, sb // p.b.itemsize, sd // p.out_dtype.itemsize) if p.batch else (0, 0, 0, 0)
        none: tuple[Mat | None, Mat | None, Mat | None] = (None, None, None)
        pads = none
        if ranked:  # the fastest estimate these operands allow (alignment, index range, slices)
            copies = (pitch_copy(a), pitch_copy(b), aligned_copy(c))  # what a TMA rung would read instead
            pitched = tma_refusal(a, b) is None and (pitch_off(a) or pitch_off(b))
            if pitched:  # TMA can read these rows, but not at full speed: weigh that, and copies that avoid it
                best = ranked[0]
                ranked = pitch_ranked(ranked, a, b, copies, p.result_layout, p.count)
                if ranked[0] is not best:
                    plan.reason = explain_choice(ranked[0], ranked, p.dtype.name)
            mixed = layout_ranked(ranked, a, b, p.count, device_memory(rt))  # a rung slower on mixed layouts, on a copy
            if mixed[0] is not ranked[0]:
                plan.reason = explain_choice(mixed[0], mixed, p.dtype.name)
            ranked = mixed
            # a variant measured fastest on this GPU runs before any estimate (timed: that candidate, its time its estimate)
            ranked, plan.reason, timed = autotune.measured_ranking(self, p, rt, self._sms(rt), ranked, plan.reason)
            lp, parts, pads, fitted, estimate = fit_ranked(self._fit, plan, ranked, timed, (a, b, c), copies, pitched, specs=kernel_specs(),
                                                 batch=batch, rt=rt, dtype=p.dtype.name, count=p.count)
            spec = fitted or spec
            if lp is None:
                raise UnsupportedProblemError(f"no cuda kernel can take {p.shape_str()} {p.dtype.name} as given: "
                                              + "; ".join(f"{name}: {why}" for name, why in plan.candidates[:3]))
        else:
            if chosen_splits and p.count > 1:
                raise UnsupportedProblemError(f"variant={variant!r}: split-K takes one product, not a batch of {p.count}")
            try:
                lp, parts = self._fit(spec, a, b, c, batch=batch, rt=rt, splits=chosen_splits, dtype=p.dtype.name)
            except UnsupportedProblemError as exc:
                # a named TMA rung runs on aligned copies of what it cannot describe, as auto runs it (on an H100, 700^3
                # fp16: 21 us a call, where the mma rung's unaligned build took 36), the operands whose rows TMA reads
                # slowly copied at its pitch too, as auto copies them; a K-split of unaligned operands too (the copies'
                # slices start on 16-byte boundaries); what copies do not serve (a batch, panels, a B tile read K-major
                # only) goes to the mma rung
                unsuitable = exc if isinstance(exc, TmaUnsuitable) else None
                if unsuitable is None and chosen_splits and spec is not None and spec.abi == "tma":
                    why = tma_refusal(a, b)  # a K-slice off 16-byte boundaries of operands TMA cannot read as they are
                    unsuitable = None if why is None else TmaUnsuitable(f"{why}; as they are, {exc}")
                if unsuitable is None:
                    raise
                assert spec is not None  # (only a catalog rung raises TmaUnsuitable)
                copies = (pitch_copy(a), pitch_copy(b), aligned_copy(c))
                on_copies = fit_named_on_copies(self._fit, spec, (a, b, c), copies, splits=chosen_splits, count=p.count,
                                                batch=batch, rt=rt, dtype=p.dtype.name)
                if not isinstance(on_copies, str):
                    (lp, pads), parts = on_copies, None
                    plan.padding = copies_named((a, b, c), pads)
                    plan.notes.append(f"{chosen} reads 16-byte aligned tiles only ({unsuitable}): the unaligned operands are "
                                      "copied into aligned scratch on the call's stream first")
                elif unsuitable is not exc:  # a split the copies cannot serve either: refused as it was, as the mma rung would
                    raise
                else:
                    fallback = tma_fallback()
                    plan.notes.append(f"{chosen} cannot take this problem ({exc}{'; ' if on_copies else ''}{on_copies}); "
                                      f"{fallback} runs instead")
                    plan.variant = fallback + (f":split_k={chosen_splits}" if chosen_splits else "")
                    spec = kernel_specs()[fallback]
                    lp, parts = self._fit(spec, a, b, c, batch=batch, rt=rt, dtype=p.dtype.name, splits=chosen_splits)
        if lp.splits and ":split_k=" not in plan.variant:  # slices chosen to fit 32-bit offsets
            plan.variant += f":split_k={lp.splits}"
        if rt is not None:
            check_smem(lp, rt.max_smem_per_block)
        plan.launch = lp.describe()
        if lp.packs:  # teaching rungs
            plan.padding = "; ".join(f"{pk.src.name} -> {pk.dst.rows}x{pk.dst.cols} scratch" for pk in lp.packs)
        plan.notes.extend(lp.notes)
        if p.batch and not lp.batch_count:
            plan.launch["batch"] = f"{p.count} products, one launch each on the same stream (the rung has no batched build)"
        prepared: PreparedLaunch | PanelLaunch | PaddedLaunch | None = None
        if parts is not None:
            plan.launch["panels"] = (f"{len(parts)} panels of the result, one launch each: an operand spans past the "
                                     f"kernels' 32-bit offsets, each panel's pieces do not")
        if rt is not None:
            prepared = PanelLaunch([(PreparedLaunch(rt, spec, part), offs) for part, offs in parts]) if parts is not None \
                else PreparedLaunch(rt, spec, lp)
            if isinstance(prepared, PreparedLaunch) and lp.batch_count and lp.cluster != (1, 1):
                # a cluster row's batch or K-slices: loaded now, so its grid is lowered to the
                # clusters the device holds at once (PreparedLaunch.kernel) and the plan shows
                # the grid that runs
                prepared.kernel()
                plan.launch = lp.describe()
                plan.notes.extend(n for n in lp.notes if n not in plan.notes)
            if any(x is not None for x in pads):
                prepared = PaddedLaunch(prepared, (a, b, c), pads)  # type: ignore[arg-type]
        one = prepared is not None and p.k > 0 and p.count * p.m * p.n > 0 and bool(prepared.lp.batch_count or p.count == 1)
        plan.private = CudaPlan(prepared, p.result_layout, batch_bytes(p), rt, one, estimate_us=estimate, vec=lp.vec)
        return plan

    # -- tuning (autotune: what is measured and how) --------------------------------------
    def tune(self, problem: GemmProblem, *, top: int = autotune.TOP, splits: int = autotune.SPLITS, force: bool = False,
             budget_s: float = float("inf"), time_fn: Callable[[str], Any] | None = None) -> tuple[TuneKey, Measurement | None]:
        """Measure auto's top candidates for ``problem`` on this GPU and keep the winner in the
        tuning cache (an entry already there is returned unless ``force``). ``time_fn``: seconds
        a launch of a variant name (a test's stand-in for the scratch-buffer timing)."""
        p = problem.broadcasts_for(self)
        self.check_problem(p)
        rt = self._plan_runtime(p) if p.residency == "cuda" and self._rt is not None else self._runtime()
        return autotune.tune_problem(self, p, rt, self._sms(rt), top=top, splits=splits, force=force, budget_s=budget_s,
                                     time_fn=time_fn)

    def _fit(self, spec: Any, a: Mat, b: Mat, c: Mat, *, batch: tuple[int, int, int, int], rt: Any, splits: int = 0,
             dtype: str | None = None) -> tuple[LaunchPlan, list[tuple[LaunchPlan, tuple[int, int, int]]] | None]:
        """Plan one launch of ``spec``; when an operand spans past the kernels' 32-bit offsets,
        the product runs in pieces instead -- K-slices (a rung with a batched build: each slice
        is addressed from a 64-bit base) or else panels of the result -- so the user never has
        to block it. Returns (the launch plan, the panels with byte offsets, or None)."""
        sms = self._sms(rt)
        try:
            return plan_launch(spec, a, b, c, batch=batch, sms=sms, splits=splits, dtype=dtype), None
        except IndexRangeError:
            if spec is None or batch[0] > 1:
                raise
        if not splits and spec.batch and spec.predicated and spec.split_k:
            for s in range(2, 4097):
                if a.cols % s or split_refusal(spec, a, b, s) is not None:
                    continue
                try:
                    return plan_launch(spec, a, b, c, sms=sms, splits=s, dtype=dtype), None
                except IndexRangeError:
                    continue
        parts = []
        for rows, cols in panels(a, b, c):
            pa, pb, pc, offsets = panel_mats(a, b, c, rows, cols)
            parts.append((plan_launch(spec, pa, pb, pc, sms=sms, splits=splits, dtype=dtype), offsets))
        return parts[0][0], parts

    # -- running ---------------------------------------------------------------------
    def run(self, plan: Plan) -> Any:
        return self.execute(plan, Call.from_problem(plan.problem))

    def execute(self, plan: Plan, call: Call) -> Any:
        if not call.matched:  # a call the core did not bind: its operands must be the plan's
            check_call(plan, call)
        p = plan.problem
        decided: CudaPlan = plan.private
        rt = decided.rt if decided.rt is not None else self._runtime()
        if rt.several and p.residency == "cuda" and call.a_ptr and rt.cu.pointer_device(call.a_ptr) != rt.ordinal:
            # a plan cached for one GPU, operands of a kind whose device the cache key cannot see
            raise ArgumentError(f"this call's operands are not on cuda:{rt.ordinal}, where a plan for the same shapes ran; "
                                f"pass device='cuda:N' naming their GPU")
        try:
            if p.residency == "host":
                with rt.active():
                    return run_host(rt, p, decided, call)
            out, stream = call.out, call.stream  # the commonest device call as _run_device and _queue_device run it:
            if decided.one_launch and out is not None and stream != -1 and (call.beta == 0.0 or call.c is None or call.c_ptr == call.out_ptr):
                pushed = rt.enter()  # one launch into out on the operands' one stream, no c values moved first
                try:
                    decided.launch.queue(call.a_ptr, call.b_ptr, call.out_ptr, call.alpha, call.beta, 0 if stream is None else stream)  # type: ignore[union-attr]
                finally:
                    if pushed:
                        rt.leave()
                return out
            return self._run_device(rt, p, decided, call)
        except UnsupportedProblemError:
            raise
        except DeviceError as exc:
            if fork_hint():
                raise DeviceError(f"{exc}{fork_hint()}") from exc
            raise
        except MemoryError as exc:
            raise DeviceError(f"CUDA out of memory for {p.shape_str()}: {exc}{fork_hint()}") from exc
        except Exception as exc:
            if type(exc).__module__.startswith("pycuda"):
                raise DeviceError(f"CUDA error running {plan.variant} on {p.shape_str()}: {exc}{fork_hint()}") from exc
            raise

    def _run_device(self, rt: CudaRuntime, p: GemmProblem, decided: CudaPlan, call: Call) -> Any:
        stream = call.stream
        pushed = rt.enter()
        try:
            if stream != -1:
                return self._queue_device(rt, p, decided, call, 0 if stream is None else stream)
            # the operands name different streams: wait for all their work, run on the legacy
            # stream, and return with the result written (that stream orders nothing on a
            # non-blocking one, so no operand's stream could be trusted to read it after)
            rt.cu.check(rt.cu.lib.cuCtxSynchronize(), "cuCtxSynchronize")
            result = self._queue_device(rt, p, decided, call, 0)
            rt.cu.check(rt.cu.lib.cuCtxSynchronize(), "cuCtxSynchronize")
            return result
        finally:
            if pushed:
                rt.leave()

    def _queue_device(self, rt: CudaRuntime, p: GemmProblem, decided: CudaPlan, call: Call, stream: int) -> Any:
        """Queue the call's work on ``stream`` (the device's context current) and return the result."""
        launch = decided.launch
        if call.out is not None:
            result: Any = call.out
            dest = call.out_ptr
        elif call.alloc is not None:  # the operands' own library allocates (CuPy's pool, torch's allocator)
            result = call.alloc(p.result_shape, p.out_dtype)
            dest = device_pointer(result)  # torch's array interface refuses bfloat16
        else:
            result = self._new_result(rt, p, decided.result_layout)
            dest = int(result.gpudata) if p.count * p.m * p.n else 0
        if p.dtype.kind == "c":
            queue_complex(p, decided, call, dest, stream)
            return result
        assert not isinstance(launch, ComplexLaunch)
        if decided.one_launch and (call.beta == 0.0 or call.c is None or call.c_ptr == dest):
            launch.queue(call.a_ptr, call.b_ptr, dest, call.alpha, call.beta, stream)  # type: ignore[union-attr]
            return result
        if p.m == 0 or p.n == 0 or p.count == 0:
            return result
        sa, sb, sc, sd = decided.batch_bytes
        c_src = dmat = None
        if p.k == 0 or (call.c is not None and call.beta != 0.0 and call.c_ptr != dest):  # c's values move first
            dmat = Mat("out", p.m, p.n, p.out.layout if p.out is not None else decided.result_layout,
                       p.out.ld if p.out is not None else compact_ld(decided.result_layout, p.m, p.n), dest, p.out_dtype.itemsize)
            if call.c is not None and call.beta != 0.0:
                assert p.c is not None
                c_src = Mat("c", p.m, p.n, p.c.layout, p.c.ld, call.c_ptr, p.c.itemsize)
        if p.k == 0:
            for i in range(p.count):
                rt.copy_scale(p.m, p.n, call.beta, at_offset(c_src, i * sc), at_offset(dmat, i * sd), stream, p.out_dtype.name)  # type: ignore[arg-type]
            return result
        assert launch is not None
        if c_src is None:  # the common case: one prepared launch, nothing moved first
            if launch.lp.batch_count or p.count == 1:
                launch.queue(call.a_ptr, call.b_ptr, dest, call.alpha, call.beta, stream)
                return result
        copy_c = c_src is not None and call.c_ptr != dest
        if launch.lp.batch_count:  # a batched build takes the whole batch in one launch
            # everything that can fail (build, load, tensor maps) happens before out is written
            prepared = launch.prepare(call.a_ptr, call.b_ptr, dest, call.alpha, call.beta, stream)
            try:
                for i in range(p.count if copy_c else 0):
                    rt.copy_scale(p.m, p.n, 1.0, at_offset(c_src, i * sc), at_offset(dmat, i * sd), stream, p.out_dtype.name)  # type: ignore[arg-type]
            except BaseException:
                launch.discard(prepared)
                raise
            launch.launch(prepared, stream)
            return result
        for i in range(p.count):
            prepared = launch.prepare(call.a_ptr + i * sa, call.b_ptr + i * sb, dest + i * sd, call.alpha, call.beta, stream)
            if copy_c:
                rt.copy_scale(p.m, p.n, 1.0, at_offset(c_src, i * sc), at_offset(dmat, i * sd), stream, p.out_dtype.name)  # type: ignore[arg-type]
            launch.launch(prepared, stream)
        return result

    def _new_result(self, rt: CudaRuntime, p: GemmProblem, layout: str) -> Any:
        """A pycuda ``GPUArray`` result whose memory a :class:`~.device.DeviceBuffer` owns (freed
        from any thread; see there)."""
        import pycuda.gpuarray as gpuarray

        owner = rt.buffer(p.count * p.m * p.n * p.out_dtype.itemsize)
        return gpuarray.GPUArray(p.result_shape, p.out_dtype, gpudata=owner.ptr, base=owner, order="C" if layout == "row" else "F")

    # -- device helpers ----------------------------------------------------------------
    def to_device(self, array: np.ndarray) -> Any:
        import pycuda.gpuarray as gpuarray

        rt = self._runtime()
        arr = np.asarray(array)
        order = "F" if arr.flags.f_contiguous and not arr.flags.c_contiguous else "C"  # a Fortran array stays one
        raw = np.asarray(raw_view(arr), order=order)  # bfloat16 moves as its bits
        with rt.active():
            owner = rt.buffer(raw.nbytes)  # freed from any thread (see DeviceBuffer)
            dev = gpuarray.GPUArray(raw.shape, raw.dtype, gpudata=owner.ptr, base=owner, order=order)
            dev.set(raw)
            return dev.view(arr.dtype)

    def to_host(self, array: Any) -> np.ndarray:
        rt = self._runtime()
        with rt.active():
            if hasattr(array, "get"):
                if array.dtype.name == "bfloat16":  # bfloat16 moves as its bits (no buffer format)
                    return array.view(np.uint16).get().view(array.dtype)
                return array.get()
            raise TypeError(f"cannot copy a {type(array).__name__} to the host; expected a pycuda GPUArray")

    def synchronize(self) -> None:
        rt = self._runtime()
        with rt.active():
            rt.ctx.synchronize()

    def timer(self) -> Callable[[Callable[[], Any]], float]:
        return autotune.event_timer(self._runtime())

    def launcher(self, variant: str, a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> "KernelLauncher":
        """A reusable launch of ``variant`` on device arrays, for benchmarks: calling it queues
        one product on the default stream without synchronizing (the raw kernel, no API)."""
        problem = normalize(a, b, c, alpha=alpha, beta=beta, out=c).broadcasts_for(self)
        self.check_problem(problem)
        plan = self.plan(problem, variant)
        decided: CudaPlan = plan.private
        if plan.problem.residency != "cuda" or decided.launch is None:
            raise UnsupportedProblemError("launcher() takes CUDA device arrays of a non-empty product")
        pa, pb, pc = (operand_view(x)[1] for x in (a, b, c))  # type: ignore[index]
        return KernelLauncher(decided.launch, pa, pb, pc, float(alpha), float(beta), plan.variant)

    def active(self) -> Any:
        return self._runtime().active()

    # -- verify= (polygemm.verification calls these; see .verify) --------------------
    def verify_product(self, plan: Plan, a: Any, b: Any, c: Any, result: Any, alpha: float, beta: float, seed: int,
                       about: dict[str, str]) -> Any:
        """The check of a product of device operands on their device (None: check it on the host)."""
        from .verify import device_check  # (None for a problem of device operands it does not check)

        if plan.problem.residency != "cuda":
            return None
        rt = getattr(plan.private, "rt", None) or self._runtime()
        return device_check(rt, plan, a, b, c, result, alpha, beta, seed, about)

    def checked_execute(self, plan: Plan, call: Call, seed: int, about: dict[str, str]) -> Any:
        """``call`` (bound to ``plan``, with ``out``) computed into scratch, checked on the device, and copied into
        ``out`` where it passed (:func:`.verify.checked_execute`); None where that does not apply."""
        from .verify import checked_execute

        if plan.problem.residency != "cuda":
            return None
        rt = getattr(plan.private, "rt", None) or self._runtime()
        return checked_execute(self.execute, rt, plan, call, seed, about)

    def copy_result(self, result: Any, out: Any) -> bool:
        """Copy a verified product's ``result`` into ``out`` by one device copy on their stream where both are dense
        device arrays of one layout (False: the caller copies by the array library)."""
        from .verify import copy_dense

        return copy_dense(result, out)

    def verify_on_device(self, problem: GemmProblem) -> bool:
        """Whether ``verify=`` checks a product of ``problem`` on the device (else on the host)."""
        from .verify_geometry import checks_on_device

        return checks_on_device(problem)

    def verify_cost_us(self, plan: Plan, given_out: bool) -> tuple[float, float | None] | None:
        """The device check's estimated µs for ``plan``'s product and the product's own estimate (None where the
        plan has none), or None where the host checks it."""
        from .verify_geometry import check_cost_us

        us = check_cost_us(plan.problem, given_out)
        estimate = getattr(plan.private, "estimate_us", None)
        return None if us is None else (us, float(estimate) if estimate else None)

    def verify_retry_variant(self, plan: Plan) -> str | None:
        """The rung a failed check's retry runs: the next of auto's candidates (None: the same again)."""
        from .verify import retry_variant

        def known(name: str) -> bool:
            try:
                self.get_variant(name)
            except UnsupportedProblemError:
                return False
            return True

        return retry_variant(plan, known)

    @property
    def runtime(self) -> CudaRuntime:
        return self._runtime()
