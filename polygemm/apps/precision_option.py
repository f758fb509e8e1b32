"""``--precision``, as ``polygemm gemm`` and ``polygemm explain`` take it (the ``precision=`` of the API)."""

from __future__ import annotations

from typing import Any

from ..core.precision import PRECISIONS
from .arguments import choice_word

__all__ = ["add_precision_option"]


def add_precision_option(parser: Any) -> None:
    """Add ``--precision {highest,high,medium}`` to ``parser`` (default: the process default, $POLYGEMM_PRECISION)."""
    parser.add_argument("--precision", default=None, type=choice_word, choices=list(PRECISIONS),
                        help="accuracy of float32 products: highest (float32-level error), high (the 3-pass class), medium "
                             "(one pass, e.g. TF32) (default: $POLYGEMM_PRECISION or highest)")
