"""Where the cuda backend's device checks work: each thread's scratch for its checks and its page-locked record (kept
between checks, given back when the thread goes), and the blocks the default streams keep for checked products (a
product and its check go into one, lent to one call at a time)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from .scratch import STREAMS_KEPT
from .verify_geometry import RECORD

__all__ = ["take_scratch", "forget_scratch", "record_buffer", "CHECKED_BLOCKS"]

_pinned = threading.local()
#: the largest scratch a thread keeps between its checks (larger ones are taken and given back by each check): enough
#: for products of up to about 300,000 rows and inner size, little beside the operands, held by every thread that checks
_SCRATCH_KEPT = 8 << 20


class _Kept:
    """A thread's scratch for one device's checks, given back to the device's pool when the thread's storage goes."""

    def __init__(self, rt: Any, ptr: int, nbytes: int) -> None:
        self.ptr, self.nbytes = ptr, nbytes
        self.done = weakref.finalize(self, _give_back, rt, ptr)
        self.done.atexit = False  # (never at exit, when the driver may be gone: the process's memory goes with it)


def _give_back(rt: Any, ptr: int) -> None:
    """Free a thread's kept scratch (a finalizer's: with the device's context current, raising nothing)."""
    try:
        pushed = rt.enter()
        try:
            rt.release(ptr, 0)
        finally:
            if pushed:
                rt.leave()
    except Exception:  # noqa: BLE001 - a device gone, or the interpreter ending: nothing to tell
        pass


def take_scratch(rt: Any, nbytes: int, stream: int) -> tuple[int, bool]:
    """Scratch of ``nbytes`` for a check on ``stream``, and whether it is this thread's kept scratch (else the caller
    gives it back). A check waits for its stream before it returns, so the next check of this thread, on any stream,
    finds its scratch idle: a loop of checked calls takes it from the pool once, not twice a call."""
    if nbytes > _SCRATCH_KEPT:
        return rt.scratch(nbytes, stream), False
    kept = getattr(_pinned, "scratch", None)
    if kept is None:
        kept = _pinned.scratch = {}
    mine = kept.get(rt)
    if mine is not None and mine.nbytes >= nbytes:
        return mine.ptr, True
    size = 1 << max(16, (nbytes - 1).bit_length())  # a power of two: a loop of growing checks takes a few
    ptr = rt.scratch(size, stream)
    kept[rt] = _Kept(rt, ptr, size)  # kept before the old block goes: a failure giving it back leaks nothing of the new
    if mine is not None:
        mine.done.detach()
        rt.release(mine.ptr, stream)
    return ptr, True


def forget_scratch(rt: Any) -> None:
    """Drop this thread's kept scratch for ``rt`` (the caller gives it back in stream order)."""
    mine = getattr(_pinned, "scratch", {}).pop(rt, None)
    if mine is not None:
        mine.done.detach()


def record_buffer(rt: Any) -> tuple[np.ndarray, int]:
    """This thread's page-locked record for ``rt``'s device, mapped into the device's address space, and the address
    the check's last launch writes it at (0 where the context maps no host memory: the record is then copied back,
    into page-locked memory still, as a pageable one costs the read-back a staged copy and a wait of its own); made
    with the device's context current."""
    kept = getattr(_pinned, "records", None)
    if kept is None:
        kept = _pinned.records = {}
    buf = kept.get(rt)
    if buf is None:
        buf = kept[rt] = rt.mapped_zeros(1, RECORD)
    return buf  # type: ignore[no-any-return]



class _StreamBlocks:
    """The scratch checked calls compute and check their products in, kept for the default streams (0 and 1, which
    order every call queued on them: the next call's product follows the last one's copy out of the block) per device,
    grown as calls need it up to :data:`_CHECKED_KEPT` bytes, and lent to one call at a time. Other streams, a larger
    block or a block lent already: the call takes a block of its own from the pool (given back after its work)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[Any, int], tuple[int, int]] = {}
        self._lent: set[tuple[Any, int]] = set()
        self._lock = threading.Lock()

    def take(self, rt: Any, nbytes: int, stream: int) -> tuple[int, bool]:
        """A block of ``nbytes`` for one call on ``stream``, and whether it is the stream's kept one (give it back with
        :meth:`give_back` once the call's work is queued, or on failure)."""
        key = (rt, stream)
        if stream not in STREAMS_KEPT or nbytes > _CHECKED_KEPT:
            return rt.scratch(nbytes, stream), False
        with self._lock:
            if key in self._lent:
                held: tuple[int, int] | None = None
                lent = False
            else:
                self._lent.add(key)
                held, lent = self._kept.get(key), True
        if not lent:
            return rt.scratch(nbytes, stream), False
        if held is not None and held[1] >= nbytes:
            return held[0], True
        size = 1 << max(16, (nbytes - 1).bit_length())  # a power of two: a loop of growing products takes a few
        try:
            ptr = rt.scratch(size, stream)
        except BaseException:
            with self._lock:
                self._lent.discard(key)
            raise
        with self._lock:
            self._kept[key] = (ptr, size)
        if held is not None:
            try:
                rt.release(held[0], stream)  # after the work queued on the stream: the last call's copy out of it
            except BaseException:
                self.give_back(rt, ptr, stream, True)
                raise
        return ptr, True

    def give_back(self, rt: Any, ptr: int, stream: int, kept: bool) -> None:
        """The call's work is queued: the kept block lent to the next call, a block of its own freed after the work."""
        if kept:
            with self._lock:
                self._lent.discard((rt, stream))
        else:
            rt.release(ptr, stream)


#: the largest block a default stream keeps for checked calls (larger products take theirs from the pool, whose
#: allocation is then a small part of the call)
_CHECKED_KEPT = 8 << 20
CHECKED_BLOCKS = _StreamBlocks()


