"""Quoting what a user passed, in error messages."""

from __future__ import annotations

from typing import Any

__all__ = ["short_repr"]

def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message that quotes what the user passed.

    PolygemmError's messages are kept short (one line a reason), whatever was passed (alpha=[1.0] * 10000 would
    quote 50,000 characters; a list given as beta, variant, out_dtype or device likewise). A ``__repr__``
    that raises (a hostile or half-built object) gives the type's name instead of replacing the error being raised.
    The registry quotes a plugin's objects with it too (its default 40 characters there)."""
    try:
        text = repr(value)
    except BaseException:  # a hostile __repr__ (a plugin's even calling sys.exit() must not break polygemm)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
