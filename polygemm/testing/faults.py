"""Fault injection for pipelines that use ``verify=``: :func:`inject_fault` corrupts one element of the
result of verified products, after they are computed and before they are checked, as a silent data
corruption of the device would."""

from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import numpy as np

from ..errors import ArgumentError
from ..verification.faults import Fault, add_fault, remove_fault

__all__ = ["inject_fault", "Fault"]


@contextlib.contextmanager
def inject_fault(row: int, col: int, *, value: float | complex | None = None, bit: int | None = None, batch: Sequence[int] = (),
                 times: int | None = None) -> Iterator[Fault]:
    """While the block runs, set element ``[*batch, row, col]`` of each verified product's result to ``value``,
    or flip its ``bit`` (0: the least significant bit of the element's storage; for float32, 23..30 are the
    exponent, 31 the sign), before the check; ``times``: in only the first so many products (None: all of
    them: ``verify="retry"`` then fails twice). Only calls with a check (``verify=`` or
    ``polygemm.set_verify``) are corrupted. Yields the :class:`Fault`; ``fault.hits`` counts the products
    corrupted. Faults apply to every thread's calls while the block runs.

        with polygemm.testing.inject_fault(3, 5, value=1e3):
            with pytest.raises(polygemm.VerificationError):
                polygemm.gemm(a, b, verify="raise")
    """
    if (value is None) == (bit is None):
        raise ArgumentError("inject_fault takes value= (the element's new value) or bit= (the bit to flip), one of them")
    if times is not None and times < 1:
        raise ArgumentError(f"times={times!r}: pass a count >= 1, or None for every verified product")
    # a complex value for a complex result (its imaginary part corrupted too), a float otherwise
    new = None if value is None else complex(value) if isinstance(value, (complex, np.complexfloating)) else float(value)
    fault = Fault(int(row), int(col), new, None if bit is None else int(bit),
                  tuple(int(i) for i in batch), times)
    add_fault(fault)
    try:
        yield fault
    finally:
        remove_fault(fault)
