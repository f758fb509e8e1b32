"""Environment variables, read one way everywhere: on/off flags, and the warning a bad value read at import gives."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from ..errors import ArgumentError

__all__ = ["env_flag", "TRUE_WORDS", "FALSE_WORDS", "warn_bad_environment"]

#: the spellings an on/off environment variable takes (any case, spaces around ignored)
TRUE_WORDS = ("1", "true", "yes", "on")


FALSE_WORDS = ("0", "false", "no", "off", "")


def env_flag(name: str, default: bool = False) -> bool:
    """An on/off environment variable: ``default`` when unset; 1, true, yes, on (any case) are
    True, and 0, false, no, off or empty are False. Anything else raises ArgumentError naming the
    variable, its value and the spellings taken (a typo must not quietly mean "off")."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ArgumentError(f"{name}={raw!r} is not an on/off value; set it to one of {', '.join(TRUE_WORDS)} (on) or "
                        f"{', '.join(w for w in FALSE_WORDS if w)} or empty (off), in any case")


#: the package's folder: a warning about the environment is attributed to the first frame outside it
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _internal(frame: Any) -> bool:
    """Whether the warnings machinery skips ``frame`` when it counts a stack level (the import system's own)."""
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name


def _outside_level() -> int:
    """The ``stacklevel`` of the first frame outside polygemm, from the caller of :func:`warn_bad_environment`
    (the line that imported polygemm, or that called it), counted as ``warnings.warn`` counts it."""
    frame: Any = sys._getframe(2)  # the caller of warn_bad_environment is at level 2
    level = 2
    while frame is not None and (_internal(frame) or os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)):
        frame = frame.f_back
        if frame is not None and not _internal(frame):
            level += 1
    return level if frame is not None else 2


def warn_bad_environment(text: str) -> None:
    """Warn (RuntimeWarning) that an environment variable read at import holds a value polygemm does not take.

    The value is ignored, and ``import polygemm`` must go on whatever the warning filters say: where they turn the
    warning into an error (``python -W error``), the words go to standard error instead. Under polygemm's own command
    line they are one line of the command's (``polygemm: warning: ...``), as its other warnings are."""
    try:
        if _command_line():
            _tell(f"polygemm: warning: {text}")
            return
        warnings.warn(text, RuntimeWarning, stacklevel=_outside_level())
    except Warning:
        _tell(f"polygemm: RuntimeWarning: {text}")


def _tell(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
    except (AttributeError, OSError, ValueError):  # no stderr (pythonw) or a closed one: nothing to tell
        pass


def _command_line() -> bool:
    """Whether this process is polygemm's command line: ``polygemm ...`` or ``python -m polygemm ...``."""
    orig = list(getattr(sys, "orig_argv", ()))
    if "-m" in orig:
        return orig[orig.index("-m") + 1:orig.index("-m") + 2] == ["polygemm"]
    return bool(sys.argv) and os.path.basename(str(sys.argv[0])) == "polygemm"
