"""Argument types and parsing helpers shared by the ``polygemm`` commands: shapes, counts,
comma-or-space separated names, and the parser class every command's parser is made of."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, Sequence

from ..core.dtypes import dtype_alias
from ..errors import ArgumentError

__all__ = ["parse_shape", "positive_int", "non_negative_int", "split_names", "choice_word", "add_verify_option", "Once", "Parser"]


#: an integer as the commands take it: ASCII digits, a sign (int() also takes "8_0" and other scripts' digits)
_DIGITS = re.compile(r"[-+]?[0-9]+", re.ASCII)


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"MxNxK"`` -> (M, N, K); raises argparse.ArgumentTypeError with the accepted form."""
    parts = [p.strip() for p in text.lower().replace("×", "x").split("x")]
    try:
        if not all(_DIGITS.fullmatch(p) for p in parts):  # "8_0x8x8" is a typo, not 80x8x8
            raise ValueError(text)
        m, n, k = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be MxNxK with three non-negative integers, e.g. 1024x1024x1024; got {text!r}") from None
    if min(m, n, k) < 0:
        raise argparse.ArgumentTypeError(f"shape dimensions must be >= 0; got {text!r}")
    return m, n, k


def _int_from(text: str, lowest: int, integer: str, bound: str) -> int:
    """``text`` as an integer >= ``lowest``; argparse.ArgumentTypeError saying ``integer`` when it
    is no integer ("1.5" is wrong for being no integer, whatever its size), ``bound`` when too small."""
    try:
        if not _DIGITS.fullmatch(text.strip()):  # no "1_000", no other scripts' digits
            raise ValueError(text)
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{integer}; got {text!r}") from None
    if value < lowest:
        raise argparse.ArgumentTypeError(f"{bound}; got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse type); raises argparse.ArgumentTypeError otherwise."""
    return _int_from(text, 1, "must be an integer >= 1", "must be an integer >= 1")


def non_negative_int(text: str) -> int:
    """An integer >= 0 (argparse type); raises argparse.ArgumentTypeError otherwise."""
    return _int_from(text, 0, "must be an integer, 0 or more", "must be 0 or more")


def split_names(option: str, given: Sequence[str] | None, what: str, listed: str, instead: str) -> list[str] | None:
    """The names an option took, comma or space separated, spaces around each dropped
    (``--device cpu,cuda`` as ``--device cpu cuda``); None when the option was not given. One
    that names nothing (``--variants ,``) is a usage error saying what to name (``what``s,
    ``listed`` where they are) or ``instead`` what to do, rather than running every name or none."""
    if given is None:
        return None
    names = [n.strip() for item in given for n in item.split(",") if n.strip()]
    if not names:
        raise ArgumentError(f"{option} {' '.join(map(repr, given))} names no {what}; name {what}s, comma or space "
                            f"separated ({listed}), or {instead}")
    return names


def choice_word(text: str) -> str:
    """An option's word as its choices spell it (argparse type): any case, spaces around dropped, as the API and
    the environment read ``verify=`` and ``precision=`` (``--verify RAISE`` is ``verify="RAISE"``)."""
    return text.strip().lower()


def add_verify_option(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--verify {off,raise,warn,retry}`` (``verify=`` of the API) to ``parser``, default None (the process default)."""
    from ..verification.modes import VERIFY_MODES

    parser.add_argument("--verify", default=None, type=choice_word, choices=list(VERIFY_MODES), help=help)


class Once(argparse.Action):
    """An option a command takes once (``gemm --shape``): given twice, a usage error naming both values, rather than
    the last one winning unseen."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        seen: set[str] = getattr(namespace, "_once", set())
        if self.dest in seen:
            def said(v: Any) -> str:  # a shape as it was typed (MxNxK), anything else as it is
                return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)

            parser.error(f"{option_string} given twice ({said(getattr(namespace, self.dest))} and then {said(values)}); this "
                         f"command takes one")
        namespace._once = seen | {self.dest}
        setattr(namespace, self.dest, values)


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: ...)" where a default says something (not None/False, not already in the help)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS or "default" in text.lower() or not text:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """The parser of ``polygemm`` and of each of its commands."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        # a token like a negative number or a negative shape ("--shape -1x2x3") is the option's
        # value, so the value's own check says what is wrong rather than argparse's "expected one
        # argument"; no option of polygemm starts with "-<digit>"
        self._negative_number_matcher = re.compile(r"^-\d*\.?\d+([x×X]-?\d*)*$")

    def _print_message(self, message: str, file: Any = None) -> None:
        # argparse drops an OSError of this write (--help into a full disk, a closed pipe): polygemm.main says it instead
        if message:
            (file or sys.stderr).write(message)

    def _get_option_tuples(self, option_string: str) -> list[Any]:
        # an abbreviation matching two spellings of one option (--rep: --repeat and --repeats) is that option, not an
        # ambiguity (each tuple names its action first, in every Python argparse has had)
        found = super()._get_option_tuples(option_string)
        seen: set[int] = set()
        kept = []
        for option in found:
            if id(option[0]) not in seen:
                seen.add(id(option[0]))
                kept.append(option)
        return kept


def dtype_name(text: str) -> str:
    """``--dtype``'s value as the dtype's NumPy name (``fp16``, ``half``: float16; ``bf16``: bfloat16); other text
    as given, for the option's choices to accept or refuse."""
    return dtype_alias(text)
