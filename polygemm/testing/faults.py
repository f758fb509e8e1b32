"""Fault injection for pipelines that use ``verify=``: :func:`inject_fault` corrupts one element of the
result of verified products, after they are computed and before they are checked, as a silent data
corruption of the device would."""

from __future__ import annotations

import contextlib
import operator
from typing import Iterator, Sequence

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from ..verification.faults import Fault, add_fault, remove_fault

__all__ = ["inject_fault", "Fault"]


@contextlib.contextmanager
def inject_fault(row: int, col: int, *, value: float | complex | int | None = None, bit: int | None = None, batch: Sequence[int] = (),
                 times: int | None = None) -> Iterator[Fault]:
    """While the block runs, set element ``[*batch, row, col]`` of each verified product's result to ``value``,
    or flip its ``bit`` (0: the least significant bit of the element's storage; for float32, 23..30 are the
    exponent, 31 the sign), before the check; ``times``: in only the first so many products (None: all of
    them: ``verify="retry"`` then fails twice). Only calls with a check (``verify=`` or
    ``polygemm.set_verify``) are corrupted. Yields the :class:`Fault`; ``fault.hits`` counts the products
    corrupted. Faults apply to every thread's calls while the block runs; a fault a product cannot take (its
    element outside the result, a value or bit its dtype does not hold) raises ArgumentError (one outside the result
    also an IndexError) in the thread that made it, and is passed over, uncounted, by other threads' products.

        with polygemm.testing.inject_fault(3, 5, value=1e3):
            with pytest.raises(polygemm.VerificationError):
                polygemm.gemm(a, b, verify="raise")
    """
    if (value is None) == (bit is None):
        raise ArgumentError("inject_fault takes value= (the element's new value) or bit= (the bit to flip), one of them")
    row, col = _whole("row", row), _whole("col", col)
    bit = None if bit is None else _whole("bit", bit)
    try:
        items = None if isinstance(batch, (str, bytes)) else tuple(batch)
    except TypeError:  # no iterable, or one that refuses iteration (a 0-d array)
        items = None
    if items is None:
        raise ArgumentTypeError(f"inject_fault: batch={batch!r} is not a sequence of whole numbers; pass a tuple of ints, "
                                f"one a batch axis (batch=({batch!r},) for one)")
    batch = tuple(_whole("batch", i) for i in items)
    times = None if times is None else _whole("times", times)
    if times is not None and times < 1:
        raise ArgumentError(f"times={times!r}: pass a count >= 1, or None for every verified product")
    if bit is not None and bit < 0:
        raise ArgumentError(f"bit={bit!r}: pass a bit index >= 0 (0: the least significant bit of the element)")
    # a complex value for a complex result (its imaginary part corrupted too), an integer kept whole (an int64 result
    # holds integers past float64's 53 bits), a float otherwise
    # (a string is refused, not parsed: value="2" is a caller's mistake float() would hide)
    new: float | complex | int | None
    if value is None:
        new = None
    elif isinstance(value, (complex, np.complexfloating)):
        new = complex(value)
    elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        new = int(value)
    elif isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"inject_fault: value={value!r} is a string; pass a number (an int, a float or a complex)")
    else:
        try:
            new = float(value)
        except (TypeError, ValueError):
            raise ArgumentTypeError(f"inject_fault: value={value!r} is not a number; pass one (an int, a float or a "
                                    f"complex)") from None
    fault = Fault(row, col, new, bit, batch, times)
    try:  # (registered inside: an interrupt landing just after the registration still takes it out again)
        add_fault(fault)
        yield fault
    finally:
        remove_fault(fault)


def _whole(name: str, x: object) -> int:
    """``x`` as an int where it is one (Python's or NumPy's), else ArgumentTypeError naming ``name``."""
    if isinstance(x, (bool, np.bool_)):
        raise ArgumentTypeError(f"inject_fault: {name}={x!r} is a bool; pass a whole number")
    try:
        return operator.index(x)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentTypeError(f"inject_fault: {name}={x!r} is not a whole number (an int); pass one") from None
