"""What ``verify=`` takes, and the process default (:func:`set_verify`, ``$POLYGEMM_VERIFY``).

The default is kept in :data:`process_default`, one small object the call path reads with one
attribute lookup: a call with ``verify`` left out and no default set does nothing more than before.
``$POLYGEMM_VERIFY`` is read once, when polygemm is imported (a bad value there warns and is
ignored rather than failing the import); :func:`set_verify` changes the default at any time.
"""

from __future__ import annotations

import os
from typing import Optional, Union

import numpy as np

from ..core.env import warn_bad_environment
from ..core.text import short_repr
from ..errors import ArgumentError, ArgumentTypeError

__all__ = ["VERIFY_MODES", "VerifyMode", "parse_verify", "set_verify", "get_verify", "process_default"]

#: the values ``verify=`` takes besides None (None and "off": no check)
VERIFY_MODES: tuple[str, ...] = ("off", "raise", "warn", "retry")

#: "off", "raise", "warn" or "retry" (any case), True ("raise"), False ("off") or None (the process default)
VerifyMode = Optional[Union[bool, str]]


class _Default:
    """The process default: ``mode`` is None when no check is wanted (the call path tests only that)."""

    __slots__ = ("mode",)

    def __init__(self) -> None:
        self.mode: str | None = None


process_default = _Default()


def parse_verify(value: object, name: str = "verify") -> str | None:
    """The check ``value`` asks for: "raise", "warn" or "retry", or None for no check (None, "off"). ``True`` asks for
    "raise" and ``False`` for none, as a flag reads. ArgumentError (a ValueError) naming ``name`` and the accepted values
    otherwise."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return "raise" if value else None
    if isinstance(value, str):
        mode = value.strip().lower()
        if mode in VERIFY_MODES:
            return None if mode == "off" else mode
    accepted = ", ".join(repr(m) for m in VERIFY_MODES)
    if not isinstance(value, str):  # a number is no mode of the wrong value but of the wrong kind
        raise ArgumentTypeError(f"{name} must be None, a bool or a string; got {short_repr(value)} ({type(value).__name__}); "
                                f"pass one of None, True (as 'raise'), False (as 'off'), {accepted}")
    none = "1, 0, " if name.startswith("POLYGEMM_") else "None, True, False, "  # (an environment variable holds text only)
    raise ArgumentError(f"{name}={short_repr(value)} is not a verification mode; pass one of {none}{accepted}")


def set_verify(mode: VerifyMode) -> None:
    """Set the check every ``gemm``/``matmul`` call makes when its ``verify`` is left out: None, False or "off"
    (none, the default), "raise" (or True), "warn" or "retry". A call's own ``verify=`` overrides it."""
    process_default.mode = parse_verify(mode, "mode")


def get_verify() -> str:
    """The process default set by :func:`set_verify` or ``$POLYGEMM_VERIFY``: "off", "raise", "warn" or "retry"."""
    return process_default.mode or "off"


#: the switches an environment variable is commonly set to, and the mode each means ("": none)
_ENV_FLAGS = {"1": "raise", "true": "raise", "yes": "raise", "on": "raise", "0": "", "false": "", "no": ""}


def _from_environment() -> None:
    raw = os.environ.get("POLYGEMM_VERIFY")
    if raw is None or not raw.strip():
        return
    flag = _ENV_FLAGS.get(raw.strip().lower())
    if flag is not None:  # a shell's switch: 1 or true checks (and raises), 0 or false does not
        process_default.mode = flag or None
        return
    try:
        process_default.mode = parse_verify(raw, "POLYGEMM_VERIFY")
    except ArgumentError as exc:  # a typo in the environment warns; it does not break import polygemm
        warn_bad_environment(f"{exc}, or a switch (true, yes, on for 'raise'; false, no for 'off'); no check is made "
                             f"by default")


_from_environment()
