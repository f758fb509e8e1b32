"""One operand as a kernel sees it (:class:`Operand`) and the geometry of its memory: the batch
stride that walks it, whether it overlaps itself or another operand, a broadcast batch made real."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable

import numpy as np

from .hostcopy import host_convert
from .layout import Layout

__all__ = ["Operand", "Residency", "batch_stride", "may_overlap", "self_overlapping", "overlaps", "made_real"]

_TooHardError = getattr(getattr(np, "exceptions", np), "TooHardError")

Residency = str  # "host", "cuda", "musa", or a plugin's device kind


@dataclass(frozen=True)
class Operand:
    """One matrix operand as a kernel sees it.

    ``layout`` is ``"row"`` (element (i, j) at ``ptr + (i*ld + j)*itemsize``) or
    ``"col"`` (``ptr + (i + j*ld)*itemsize``); ``ld`` is in elements. ``array`` is the
    object to hand to the backend: a NumPy array for host data (already copied when
    ``copied`` is set), the user's own object for device data.
    """

    name: str
    array: Any
    shape: tuple[int, int]
    dtype: np.dtype
    layout: Layout
    ld: int
    residency: Residency
    ptr: int
    copied: bool = False
    readonly: bool = False
    interface: dict | None = None
    #: batch dimensions as given: (size, element stride) per leading dimension (N-D operands)
    batch_dims: tuple[tuple[int, int], ...] = ()
    #: elements from one matrix of the (broadcast, flattened) batch to the next; 0: broadcast
    batch_stride: int = 0
    #: how many matrices the problem's batch has (1: a plain matrix product)
    batch_count: int = 1
    #: normalization made a broadcast batch real (a copy) because one stride could not walk it
    broadcast: bool = False
    #: that copy is still to be made or waived (``normalize(..., broadcast_copies=False)``;
    #: :meth:`GemmProblem.broadcasts_for` decides): ``array`` is the user's batch as given
    pending: bool = False
    #: the values are the conjugates of the memory's (a torch CUDA complex tensor with its conjugate bit, read without
    #: a copy): only a backend that reads conjugates (``Backend.reads_conjugates``) takes such an operand
    conj: bool = False
    #: a copy made of the operand before it was read, as a plan's copies name it (torch resolving a lazy conjugate or
    #: negation into a tensor of its values); "" for none
    copy_note: str = ""

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def aligned16(self) -> bool:
        """Base pointer and leading dimension both multiples of 16 bytes."""
        return self.ptr % 16 == 0 and (self.ld * self.itemsize) % 16 == 0

    @property
    def max_offset(self) -> int:
        """Largest element offset any kernel computes for this operand, over the whole batch
        (0 when empty)."""
        r, c = self.shape
        if r == 0 or c == 0 or self.batch_count == 0:
            return 0
        last = (r - 1) * self.ld + (c - 1) if self.layout == "row" else (r - 1) + (c - 1) * self.ld
        return last + max(0, (self.batch_count - 1) * self.batch_stride)

    @property
    def min_offset(self) -> int:
        """Smallest element offset over the whole batch: 0, or below the base pointer when the
        batch stride is negative (a reversed batch, ``x[::-1]``)."""
        if self.shape[0] == 0 or self.shape[1] == 0 or self.batch_count == 0:
            return 0
        return min(0, (self.batch_count - 1) * self.batch_stride)

    @property
    def nbytes_span(self) -> int:
        """Bytes from the base pointer to one past the last element."""
        r, c = self.shape
        if r == 0 or c == 0:
            return 0
        return (self.max_offset + 1) * self.itemsize

    @property
    def extent(self) -> tuple[int, int]:
        """The bytes the operand addresses, ``[lo, hi)`` relative to its base pointer (lo is
        negative for a reversed batch); ``(0, 0)`` when empty."""
        span = self.nbytes_span
        return (self.min_offset * self.itemsize, span) if span else (0, 0)

    def describe(self) -> str:
        kind = {"row": "row-major", "col": "column-major"}[self.layout]
        extra = ", copied once (strided view or non-native byte order)" if self.copied else ""
        batch = f"{self.batch_count} x " if self.batch_count != 1 else ""
        return f"{self.name}: {batch}{self.rows}x{self.cols} {self.dtype.name} {kind} (ld={self.ld}) on {self.residency}{extra}"


def batch_stride(op: Operand, batch: tuple[int, ...]) -> int | None:
    """One element stride that walks ``op``'s matrices in the order of the flattened
    ``batch`` (0: one matrix for all), or None when its batch strides need more than one."""
    dims = [(1, 0)] * (len(batch) - len(op.batch_dims)) + list(op.batch_dims)
    eff = [0 if n == 1 else st for (n, st) in dims]  # broadcast dimensions do not move
    stride: int | None = None
    period = 1  # matrices per step of dimension j in the flattened batch
    for j in range(len(batch) - 1, -1, -1):
        if batch[j] != 1:
            if stride is None:
                if eff[j] % period:
                    return None
                stride = eff[j] // period
            elif eff[j] != stride * period:
                return None
        period *= batch[j]
    return stride or 0


def may_overlap(dims: Iterable[tuple[int, int]], size: int = 1) -> bool:
    """Whether two elements of an array of ``dims`` ((count, step) pairs; steps in units of which an element takes
    ``size``) may share memory: its dimensions of more than one element, sorted by step, must each step past
    everything the smaller ones reach (the usual sufficient test: a view cut, reversed, transposed or stepped out of
    one array passes it; a zero step, or as_strided's steps smaller than what lies below them, fails it). An array of
    no elements shares nothing."""
    dims = [(int(n), int(st)) for n, st in dims]
    if any(n == 0 for n, _ in dims):  # no elements: none to share memory (NumPy gives an empty array any strides)
        return False
    reach = size - 1
    for n, st in sorted(((n, abs(st)) for n, st in dims if n > 1), key=lambda d: d[1]):
        if st <= reach:
            return True
        reach += st * (n - 1)
    return False


def self_overlapping(op: Operand) -> bool:
    """Whether two elements of ``op`` (all its matrices) may share memory (:func:`may_overlap`: an out that fails it
    is refused, one that passes it has each element to itself)."""
    dims = [(op.rows, op.ld if op.layout == "row" else 1), (op.cols, 1 if op.layout == "row" else op.ld)]
    dims += [(int(n), int(st)) for n, st in op.batch_dims if st != 0]  # one matrix for several: refused as such below
    return may_overlap(dims)


def overlaps(x: Operand, y: Operand) -> bool:
    if x.residency != y.residency:
        return False
    if x.residency == "host":
        try:
            return bool(np.shares_memory(x.array, y.array, max_work=1000))
        except _TooHardError:
            return True  # cannot prove them apart cheaply: treated as overlapping (the error says what to do)
    (lo1, hi1), (lo2, hi2) = x.extent, y.extent
    return x.ptr + lo1 < y.ptr + hi2 and y.ptr + lo2 < x.ptr + hi1 and hi1 > lo1 and hi2 > lo2


def made_real(op: Operand, batch: tuple[int, ...]) -> Operand:
    """A host operand broadcast to ``batch`` in a copy (one stride walks it)."""
    arr = host_convert(op.array, batch)
    op = replace(op, array=arr, ptr=arr.__array_interface__["data"][0], copied=True, broadcast=True, pending=False,
                 batch_dims=tuple((int(x), int(st) // arr.itemsize) for x, st in zip(arr.shape[:-2], arr.strides[:-2])))
    stride = batch_stride(op, batch)
    assert stride is not None
    return replace(op, batch_stride=stride, batch_count=math.prod(batch))
