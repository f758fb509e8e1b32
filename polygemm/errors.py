"""The exception hierarchy of polygemm.

Every error polygemm raises derives from :class:`PolygemmError` and from the built-in
exception a NumPy user would expect (``ValueError`` for bad values and shapes,
``TypeError`` for bad dtypes, ``RuntimeError`` for missing or failing devices), so
``except ValueError`` keeps working in code that does not know polygemm.
"""

from __future__ import annotations

import difflib
from typing import Sequence

__all__ = [
    "PolygemmError",
    "ShapeError",
    "DTypeError",
    "ArgumentError",
    "ArgumentTypeError",
    "BackendUnavailableError",
    "UnknownDeviceError",
    "UnsupportedProblemError",
    "DeviceError",
    "VerificationError",
    "VerificationWarning",
]


def did_you_mean(words: Sequence[str], choices: Sequence[str], *, cutoff: float = 0.6) -> str:
    """`` (did you mean X?)`` naming the choices near any of ``words`` (a typo of a command, an
    option, a preset, a keyword, a device or a variant; case aside, an exact choice is no typo),
    else "". ``cutoff``: how near, as difflib measures it. Every typo hint in a message is
    written by this one function."""
    near = [m for w in words for m in difflib.get_close_matches(w.lower(), list(choices), n=1, cutoff=cutoff) if m != w]
    shown = [m if m.startswith("-") else repr(m) for m in dict.fromkeys(near)]  # options bare, as argparse writes them
    return f" (did you mean {', '.join(shown)}?)" if shown else ""


class PolygemmError(Exception):
    """Base class of every error raised by polygemm.

    The message is kept short (each reason one line); ``details`` holds the whole text
    behind it when there is more (e.g. every backend's full reason), else ``""``.
    """

    details: str = ""

    def __init__(self, *args: object, details: str = "") -> None:
        super().__init__(*args)
        if details:
            self.details = details


class ShapeError(PolygemmError, ValueError):
    """An operand has the wrong number of dimensions or a shape that does not fit."""


class DTypeError(PolygemmError, TypeError):
    """An operand's dtype is not supported, or operands' dtypes disagree."""


class ArgumentError(PolygemmError, ValueError):
    """A scalar or keyword argument has a value that cannot be used (alpha, beta, out, ...)."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a kind that cannot be used at all: alpha or beta that is no real number (a
    string, a complex, a Decimal, a bool), an ``out`` that is no array (a list, a memoryview, a
    NumPy scalar), a variant that is no string, an operand that is None. NumPy and Python raise
    TypeError for these (``numpy.matmul(a, b, out=[...])``, ``float(1j)``, ``a * "2"``), so
    ``except TypeError`` catches it; it is an ArgumentError (and a ValueError) too."""


class BackendUnavailableError(PolygemmError, RuntimeError):
    """The requested backend does not exist or cannot run on this machine.

    The message names each backend's one-line reason once; ``details`` has every
    backend's whole text (what ``polygemm info -v`` prints).
    """


class UnknownDeviceError(BackendUnavailableError, ValueError):
    """``device=`` (or ``$POLYGEMM_DEVICE``, ``get_backend``) names no backend polygemm knows: a
    typo, or a plugin that is not installed. The message names the known devices and the nearest
    one. Also a ``ValueError``, as NumPy and CuPy raise for an argument value they do not take;
    and a BackendUnavailableError."""


class UnsupportedProblemError(PolygemmError, ValueError):
    """The chosen backend or variant cannot compute this problem (size, layout, residency)."""


class DeviceError(PolygemmError, RuntimeError):
    """A device call failed; the message carries the vendor's error string."""


class VerificationError(PolygemmError, RuntimeError):
    """A product computed with ``verify=`` failed its check: its result disagrees with its operands by
    more than the rounding error its dtype allows. The message names the rows that disagree (the first
    few), by how much against the threshold, the backend, device and variant; ``report`` holds the
    whole finding (a :class:`polygemm.verification.CheckReport`). Nothing is handed back as good."""

    report: object = None

    def __init__(self, *args: object, details: str = "", report: object = None) -> None:
        super().__init__(*args, details=details)
        self.report = report


class VerificationWarning(RuntimeWarning):
    """``verify="warn"``: a product failed its check and was returned all the same (see
    :class:`VerificationError` for what the message names)."""
