"""What ``polygemm bench`` times on: random normal operands (never zeros) laid out as each
shape's layout says, the variant names checked before anything is timed, and the shapes whose
host arrays do not fit in memory."""

from __future__ import annotations

import math
import os

from typing import Any, Callable, Sequence

import numpy as np

from ..backend import Backend
from ..errors import PolygemmError, UnsupportedProblemError
from .bench_layout import shape_text

__all__ = ["Normals", "operands", "in_layout", "too_large_text", "skip_too_large", "check_variant_names"]


class Normals:
    """Random normal operands without drawing every element anew: one pool of normals per run,
    laid out cyclically from a random start for each operand. The pool's length is a prime, so
    the rows of an operand start at different places in it (no two rows repeat each other)
    and two operands differ; values are never all zeros. Drawing 8192×16384 normals takes
    seconds of host time, a pooled copy a fraction of that, which is what lets the sweep's
    large shapes fit its budget."""

    LENGTH = 4_194_301  # a prime below 2**22: 16 MiB of float32

    def __init__(self, rng: np.random.Generator, dtype: Any) -> None:
        self.rng = rng
        self.pool = rng.standard_normal(self.LENGTH, dtype=np.float32).astype(dtype)

    def __call__(self, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape, dtype=np.int64))
        start = int(self.rng.integers(self.LENGTH))
        out = np.empty(size, self.pool.dtype)
        head = min(size, self.LENGTH - start)
        out[:head] = self.pool[start:start + head]
        out[head:min(size, self.LENGTH)] = self.pool[:min(size, self.LENGTH) - head]
        done = min(size, self.LENGTH)
        while done < size:  # doubling copies of what is already laid out: one pass over ``out``
            step = min(done, size - done)
            out[done:done + step] = out[:step]
            done += step
        return out.reshape(shape)


def operands(normals: Normals, lead: tuple[int, ...], m: int, n: int, k: int, layout: str = "nn") -> tuple[np.ndarray, np.ndarray]:
    """Host A (``lead + (m, k)``) and B (``lead + (k, n)``) laid out as ``layout`` (two letters of
    :data:`.bench_layout.LAYOUTS`) says: ``n`` a C-ordered array, ``t`` the transposed view of a
    C-ordered ``lead + (k, m)`` (A) or ``lead + (n, k)`` (B) array, as ``x @ W.T`` passes an
    ``nn.Linear`` weight ``W``; no copy makes either contiguous."""
    a = normals(lead + (k, m)).swapaxes(-1, -2) if layout[0] == "t" else normals(lead + (m, k))
    b = normals(lead + (n, k)).swapaxes(-1, -2) if layout[1] == "t" else normals(lead + (k, n))
    return a, b


def in_layout(host: np.ndarray, to_device: Callable[[np.ndarray], Any], transposed: bool,
              transpose: Callable[[Any], Any] | None) -> Any:
    """A device copy of the host operand ``host`` in its layout: a transposed view (``transposed``)
    is copied as the C-ordered array it views and transposed on the device with ``transpose``
    (``x.swapaxes(-1, -2)``, the view a user of the library takes); a library without one (a
    backend's own arrays) gets the view itself, which their ``to_device`` keeps column-major."""
    if not transposed or transpose is None:
        return to_device(host)
    return transpose(to_device(host.swapaxes(-1, -2)))


def too_large_text(m: int, n: int, k: int, lead: tuple[int, ...], itemsize: int, sets: int, layout: str = "nn") -> str:
    """What a shape whose host operands could not be allocated says (as ``polygemm gemm`` says it)."""
    count = int(np.prod(lead)) if lead else 1
    need = sets * count * (m * k + k * n + m * n) * itemsize
    return (f"{''.join(f'{d}x' for d in lead)}{shape_text(m, n, k, layout)}: operands and a result of that size need about "
            f"{need / 2**30:.1f} GiB "
            f"of host memory, more than this machine can give")


def host_memory() -> int:
    """The machine's physical memory in bytes (0 where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 0


def check_fits(m: int, n: int, k: int, lead: tuple[int, ...], itemsize: int, sets: int) -> None:
    """MemoryError where ``sets`` host operands and results of this shape would not fit this machine's memory, or
    would count past NumPy's 64-bit sizes: Linux grants such an allocation and its OOM killer ends the process later,
    silently (the shape is then left out, as one whose allocation failed)."""
    count = math.prod(lead) if lead else 1
    elements = count * (m * k + k * n + m * n)
    have = host_memory()
    if max(count * m * k, count * k * n, count * m * n) >= 2**62 or (have and sets * elements * itemsize > have):
        raise MemoryError("past this machine's memory")


def skip_too_large(why: str, too_large: list[str] | None, progress: Callable[[str], None] | None,
                    step: Callable[[], None] | None) -> None:
    """A shape whose host arrays do not fit: left out, said, and kept in ``too_large`` (the command's
    error at the end); without that list (a library caller) a MemoryError naming the shape."""
    if too_large is None:
        raise MemoryError(why)
    too_large.append(why)
    if progress:
        progress(f"{why.split(':', 1)[0]} not timed: {why.split(': ', 1)[1]}")
    if step:
        step()



def check_variant_names(be: Backend, device: str, dtype: str, names: Sequence[str]) -> None:
    """UnsupportedProblemError for the first of ``names`` that is not a ``dtype`` variant of
    ``be`` (nor ``auto``); names the backend modifies (cuda's ``rung:split_k=8``, which gemm and
    the raw launch both take) count as their variant."""
    known = {v.name for v in be.variants() if dtype in v.dtypes}
    for name in names:
        if name == "auto" or name in known:
            continue
        try:
            ok = be.get_variant(name).name in known
        except PolygemmError:
            ok = False
        if not ok:
            raise UnsupportedProblemError(f"--variants: {name!r} is not a {dtype} variant of {device}; known: auto, {', '.join(sorted(known))}")

