"""Reasons as the registry reports them: one line, at most 120 characters."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["one_line", "describe", "REASON_LIMIT"]

#: the longest reason ``BackendInfo.reason`` and the messages built from it carry
REASON_LIMIT = 120


#: an absolute path of three or more parts (not a URL's: "https://host/a/b" keeps every part, as a user needs it to follow)
_PATH = re.compile(r"(?<![\w./:])(?:/[^\s/:;,'\"()]+){3,}")


def one_line(text: Any, limit: int = REASON_LIMIT) -> str:
    """The first non-empty line of ``text``, whitespace collapsed, at most ``limit`` characters.

    A longer line is cut at a word boundary and ends in `` ...``.
    """
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    s = " ".join(lines[0].split()) if lines else ""
    if len(s) <= limit:
        return s
    whole = s
    for keep in (2, 1):  # too long: long absolute paths lose their leading folders first
        s = _PATH.sub(lambda m, k=keep: ".../" + "/".join(m.group(0).split("/")[-k:]), whole)
        if len(s) <= limit:
            return s
    cut = s[: limit - 4]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ;,:(") + " ..."


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
