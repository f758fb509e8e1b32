"""What a check found (:class:`CheckReport`) and how a failure is said."""

from __future__ import annotations

import math

from dataclasses import dataclass, field

__all__ = ["Finding", "CheckReport", "SHOWN"]

#: how many rows (and columns) that disagree a message names
SHOWN = 5


@dataclass(frozen=True)
class Finding:
    """One row (or column) of the result whose check failed: ``|C·r - expected|`` and its threshold
    (``diff`` NaN: the row holds a NaN or an infinity its operands do not explain)."""

    index: int
    diff: float
    threshold: float
    #: the matrix of a batch it belongs to (its index in the batch); () for one product
    batch: tuple[int, ...] = ()
    #: an exact check's (integers, bool): any difference fails, there is no threshold
    exact: bool = False

    def __str__(self) -> str:
        where = f"{list(self.batch)}, " if self.batch else ""
        if self.exact:
            return f"{where}{self.index} (off by {self.diff:.3g}, exact check)"
        if self.diff != self.diff or self.diff in (float("inf"), float("-inf")):
            if not math.isfinite(self.threshold):  # no threshold to name
                return f"{where}{self.index} (non-finite where its operands are finite)"
            return f"{where}{self.index} (non-finite, threshold {self.threshold:.3g})"
        ratio = self.diff / self.threshold if self.threshold > 0 else float("inf")
        return f"{where}{self.index} (off by {self.diff:.3g}, threshold {self.threshold:.3g}, {ratio:.3g}x)"


@dataclass(frozen=True)
class CheckReport:
    """The outcome of one product's check."""

    ok: bool
    #: rows checked, and rows that could not be (non-finite operands, or a row whose elements may overflow the
    #: result's dtype, where a NaN or infinity is the product's right answer)
    checked: int
    unchecked: int
    #: rows that failed, the first few of them, and (on failure) the first few columns that did
    failed: int
    rows: tuple[Finding, ...] = ()
    columns: tuple[Finding, ...] = ()
    #: the largest ``|C·r - expected| / threshold`` among the rows checked (below 1: passed); inf when the check failed
    #: (the failed rows' own ratios are in ``rows`` and ``columns``)
    worst_ratio: float = 0.0
    #: where the check ran ("host", or the device's name) and what computed the product
    where: str = "host"
    backend: str = ""
    device: str = ""
    variant: str = ""
    shape: str = ""
    attempts: tuple[str, ...] = field(default=())
    #: columns that failed (``columns`` names the first few), where the check counted them; None where it did not (a
    #: check found from the columns' side alone counts them in ``failed``). Last, so that positional construction holds
    failed_columns: int | None = None

    def __bool__(self) -> bool:
        return self.ok

    @classmethod
    def of(cls, ok: bool, checked: int, unchecked: int, failed: int, rows: tuple[Finding, ...], columns: tuple[Finding, ...],
           worst_ratio: float, where: str, about: dict[str, str], failed_columns: int | None = None) -> "CheckReport":
        """A report of the product ``about`` names (its backend, device, variant and shape)."""
        # filled in directly: a frozen dataclass's __init__ sets each of its 14 fields through object.__setattr__ (2 µs,
        # on every checked call); the fields and their values are the same as __init__'s
        report = object.__new__(cls)
        report.__dict__.update(ok=ok, checked=checked, unchecked=unchecked, failed=failed, rows=rows, columns=columns,
                               worst_ratio=worst_ratio, where=where, backend=about.get("backend", ""),
                               device=about.get("device", ""), variant=about.get("variant", ""),
                               shape=about.get("shape", ""), attempts=(), failed_columns=failed_columns)
        return report

    def message(self) -> str:
        """The sentence a VerificationError or VerificationWarning carries."""
        on = f"backend {self.backend!r}" + (f" ({self.device})" if self.device else "") + f", variant {self.variant!r}"
        more = ", ..." if self.failed > SHOWN else ""
        text = f"verify: the product {self.shape} computed by {on} failed its check: "
        if not self.rows and self.columns:  # found from the columns' side, the rows' left unchecked
            text += (f"{self.failed} {'column disagrees' if self.failed == 1 else 'columns disagree'} with (r·A)·B beyond the threshold (checked from the columns' side: a NaN "
                     f"or an infinity in A's rows or in B left {self.unchecked} rows unchecked); columns " +
                     ", ".join(str(f) for f in self.columns[:SHOWN]) + more)
        else:
            text += (f"{self.failed} of {self.checked} rows disagree with A·(B·r) beyond the threshold; rows " +
                     ", ".join(str(f) for f in self.rows[:SHOWN]) + more)
            if self.columns:
                # more columns than those named only where the check counted them (a count it did not make is not guessed)
                cmore = ", ..." if (self.failed_columns or 0) > min(len(self.columns), SHOWN) else ""
                text += "; columns " + ", ".join(str(f) for f in self.columns[:SHOWN]) + cmore
        if self.attempts:
            text += "; " + "; ".join(self.attempts)
        return text + f" (checked on {self.where})"
