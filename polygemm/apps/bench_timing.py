"""How ``polygemm bench`` times: :class:`KernelTimed` (kernel mode: a variant's raw launches,
the backend's device-event timer) and :class:`CallTimed` (call mode: any calls, the wall clock
between two device synchronizations). Both warm up first and size a batch of calls to a
minimum time; ``once()`` times one batch, in seconds per call."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

from ..backend import Backend
from ..errors import UnsupportedProblemError

__all__ = ["KernelRunner", "KernelTimed", "CallTimed", "ratio_range"]


class KernelRunner:
    """Queues one product on prepared operands; device backends avoid the API overhead.
    ``variant="auto"`` runs the rung auto chooses for the problem; ``ran`` names it."""

    def __init__(self, be: Backend, variant: str, a: Any, b: Any, c: Any) -> None:
        self._close: Callable[[], None] = lambda: None
        launch = be.launcher(variant, a, b, c, 1.0, 0.0)
        if launch is not None:
            ran = launch.variant
            if ran != variant and variant != "auto":  # e.g. a TMA rung handing an unaligned problem to another rung
                launch.close()
                raise UnsupportedProblemError(f"{variant} does not run this problem itself ({ran} would)")
            self.ran: str = ran
            self.call: Callable[[], None] = launch
            self._close = launch.close
        else:
            from .. import explain, gemm

            self.ran = explain(a, b, device=be.name, variant=variant, out=c).variant

            def call() -> None:
                gemm(a, b, device=be.name, variant=variant, out=c)

            self.call = call

    def close(self) -> None:
        self._close()


class KernelTimed:
    """One variant ready to time: warmed up, with a batch of calls sized to ``min_seconds``."""

    def __init__(self, be: Backend, variant: str, sets: list[tuple[Any, Any, Any]], min_seconds: float) -> None:
        self.timer = be.timer()
        self.be = be
        self.runners = [KernelRunner(be, variant, *s) for s in sets]
        try:
            with be.active():
                for r in self.runners:  # warm-up: compilation, module load, handle creation
                    r.call()
                be.synchronize()
                one = self.timer(lambda: [r.call() for r in self.runners]) / len(self.runners)
            calls = max(len(self.runners), min(200, int(min_seconds / max(one, 1e-7)) + 1))
            self.calls = calls + (-calls) % len(self.runners)
        except BaseException:
            self.close()
            raise

    def once(self) -> float:
        """Seconds per call over one batch, rotating the input sets."""
        def batch() -> None:
            for i in range(self.calls):
                self.runners[i % len(self.runners)].call()

        with self.be.active():
            return self.timer(batch) / self.calls

    def settle(self, seconds: float) -> None:
        """Run batches for ``seconds`` so the clocks reach this kernel's own steady state."""
        if seconds <= 0:
            return
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.once()

    def close(self) -> None:
        for r in self.runners:
            r.close()



class CallTimed:
    """Calls rotating over input sets, timed by the wall clock: ``batch`` calls back to back
    between two device synchronizations, divided by ``batch`` (call mode's method; the
    benchmark scripts under docs/benchmarks and tools time the call with it too). The
    constructor warms the calls up and sizes the batch to ``min_seconds``; :meth:`once` times
    one batch, in seconds per call. ``clock`` reads the wall clock in seconds (a test passes a fake)."""

    def __init__(self, fns: list[Callable[[], Any]], sync: Callable[[], None], min_seconds: float, max_calls: int = 5000,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.fns, self.sync, self.clock = fns, sync, clock
        for f in fns:  # warm-up: compilation, plan cache, handles, memory pools
            f()
        sync()
        probe = max(len(fns), 4)
        one = self._batch(probe)
        calls = max(len(fns), min(max_calls, int(min_seconds / max(one, 1e-7)) + 1))
        self.calls = calls + (-calls) % len(fns)

    def _batch(self, calls: int) -> float:
        fns, n = self.fns, len(self.fns)
        self.sync()
        t0 = self.clock()
        for i in range(calls):
            fns[i % n]()
        self.sync()
        return (self.clock() - t0) / calls

    def once(self) -> float:
        return self._batch(self.calls)


def ratio_range(vendor_times: Sequence[float], times: Sequence[float]) -> tuple[float, float, float]:
    """(lowest, highest, spread) of the per-repeat ratios ``vendor_times[i] / times[i]`` (the
    vendor and polygemm timed in the same repeat), spread being (highest - lowest) over the
    ratio of the medians; nans where the vendor has no timings."""
    pairs = [v / t for v, t in zip(vendor_times, times) if t > 0]
    if not pairs:
        return float("nan"), float("nan"), float("nan")
    ratio = statistics.median(vendor_times) / statistics.median(times)
    lo, hi = min(pairs), max(pairs)
    return lo, hi, (hi - lo) / ratio if ratio > 0 else float("nan")
