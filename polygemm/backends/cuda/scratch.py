"""Scratch memory a call's launches use: the blocks a plan keeps per default stream, and one block shared by the
several launches of one call (copies, the rung, copies back), lent to one call at a time."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from .device import CudaRuntime
from .planning import round_up

__all__ = ["KEPT_SCRATCH_BYTES", "STREAMS_KEPT", "BLOCK_ALIGN", "block_bytes", "stream_scratch", "quiet_release", "CallScratch", "Held"]

#: the streams a split-K plan keeps a workspace for: the null stream and the CUDA array
#: interface's legacy default stream (1), which no caller can destroy and which orders every
#: call on it. Not the per-thread default stream (2): one handle, a different stream in each
#: thread, so two threads' calls could use one workspace at once.
STREAMS_KEPT = (0, 1)
#: the largest scratch block a plan keeps for a stream: a larger one (a copy of a large operand, a wide
#: split's workspace) is taken and freed by each call, where the allocation is a small part of the work
#: its size stands for, so that the plans in the plan cache do not hold the device's memory
KEPT_SCRATCH_BYTES = 64 << 20
#: bytes each piece of a scratch block starts on (the pool's allocations are at least this aligned, so every
#: piece is aligned for 16-byte loads and TMA)
BLOCK_ALIGN = 256


def block_bytes(nbytes: int) -> int:
    """``nbytes`` rounded up to :data:`BLOCK_ALIGN`: a piece's share of a scratch block, the next piece aligned."""
    return round_up(nbytes, BLOCK_ALIGN)


def stream_scratch(owner: Any, kept: dict[int, int], lock: threading.Lock, rt: CudaRuntime, stream: int,
                   make: Callable[[], int], nbytes: int) -> tuple[int, bool]:
    """Scratch of ``nbytes`` for a call on ``stream`` and whether it is the call's own. On the default streams
    (:data:`STREAMS_KEPT`), which order every call on them one after another, it is the block ``owner``
    keeps for that stream in ``kept``: made by ``make`` at the first call, freed when ``owner`` is dropped.
    Any other stream the caller may destroy, and a block kept for it could not be freed safely later
    (cuMemFreeAsync on a destroyed stream crashes the process); and a block above
    :data:`KEPT_SCRATCH_BYTES` is not kept: there the call gets a block of its own (owned: the caller
    releases it after its work)."""
    ptr = kept.get(stream)
    if ptr is not None:
        return ptr, False
    ptr = make()
    if stream not in STREAMS_KEPT or nbytes > KEPT_SCRATCH_BYTES:
        return ptr, True
    with lock:
        if not kept:  # the first: free them all when the owner goes
            weakref.finalize(owner, rt.give_back, kept).atexit = False
        held = kept.setdefault(stream, ptr)
    if held != ptr:  # another thread kept one for this stream first
        rt.release(ptr, stream)
    return held, False


def quiet_release(rt: Any, ptr: int, stream: int) -> None:
    """Give back scratch after a failed launch, raising nothing: the launch's error is the one to report (a stream
    capture the launch invalidated made the release fail too, and its error had replaced the launch's)."""
    try:
        rt.release(ptr, stream)
    except Exception:  # noqa: BLE001
        pass


@dataclass(frozen=True)
class Held:
    """A call's scratch block: where it starts, whether the call owns it (freed after its work) and whether the call
    holds the owner's queueing lock (the kept block is lent to it)."""

    base: int
    owned: bool
    holds: bool
    stream: int


class CallScratch:
    """One block for all the launches of a call, kept per default stream up to :data:`KEPT_SCRATCH_BYTES`
    (:func:`stream_scratch`): its pointers stay the same call after call, so a rung's tensor maps are encoded once
    and no call allocates. A call queues several launches: two threads queueing on one stream at once would
    interleave them over one kept block, so the kept block goes to the call that holds the queueing lock from
    :meth:`take` until :meth:`give_back`; a call that finds it taken gets a block of its own."""

    def __init__(self) -> None:
        self._kept: dict[int, int] = {}
        self._lock = threading.Lock()
        self._queueing = threading.Lock()

    def take(self, rt: Any, nbytes: int, stream: int) -> Held:
        """A block of ``nbytes`` for one call on ``stream`` (give it back with :meth:`give_back` once its launches
        are queued, or on failure)."""
        holds = self._queueing.acquire(blocking=False)
        try:
            if holds:
                base, owned = stream_scratch(self, self._kept, self._lock, rt, stream, lambda: rt.scratch(nbytes, stream), nbytes)
            else:
                base, owned = rt.scratch(nbytes, stream), True
        except BaseException:
            if holds:
                self._queueing.release()
            raise
        return Held(base, owned, holds, stream)

    def give_back(self, rt: Any, held: Held, quiet: bool = False) -> None:
        """The call's launches are queued (or none will be): its own block freed after them (``quiet``: raising
        nothing, after a failure whose error is the one to report), the kept block lent to the next call."""
        try:
            if held.owned:
                if quiet:
                    quiet_release(rt, held.base, held.stream)
                else:
                    rt.release(held.base, held.stream)
        finally:
            if held.holds:
                self._queueing.release()
