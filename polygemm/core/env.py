"""On/off environment variables, read one way everywhere."""

from __future__ import annotations

import os

from ..errors import ArgumentError

__all__ = ["env_flag", "TRUE_WORDS", "FALSE_WORDS"]

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
