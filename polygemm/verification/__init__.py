"""``verify=``: every product checked where it was computed (a Freivalds test of ``C·r`` against
``alpha·A·(B·r) + beta·C0·r`` with a fresh random ``r`` of ±1, its threshold from the error bound of
the dtypes used), and what a failed check does: raise, warn, or recompute once.

:mod:`.modes` holds the accepted values and the process default, :mod:`.threshold` the threshold,
:mod:`.host` the check on the host, :mod:`.call` a verified call, :mod:`.faults` injected faults
(:func:`polygemm.testing.inject_fault`), :mod:`.cost` what ``explain`` says of the check.
"""

from __future__ import annotations

from .modes import VERIFY_MODES, get_verify, parse_verify, process_default, set_verify
from .report import CheckReport, Finding

__all__ = ["VERIFY_MODES", "get_verify", "parse_verify", "process_default", "set_verify", "CheckReport", "Finding"]
