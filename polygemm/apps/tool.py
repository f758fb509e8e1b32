"""The entry of the repository's ``tools/`` scripts: a machine without what a tool needs (a GPU stack such as
pycuda or CuPy, a device) gets one line saying so and status 2, as ``polygemm``'s own commands give it, not a
traceback."""

from __future__ import annotations

import sys
from typing import Callable, NoReturn

from ..errors import PolygemmError

__all__ = ["run_tool"]


def run_tool(main: Callable[[], int], name: str) -> NoReturn:
    """Exit with ``main()``'s status; an ImportError (a library the tool needs is not installed) or a PolygemmError
    (no such device here) is one ``name: error: ...`` line on stderr and status 2."""
    try:
        status = main()
    except (ImportError, PolygemmError) as exc:
        print(f"{name}: error: {'; '.join(line.strip() for line in str(exc).splitlines() if line.strip())}", file=sys.stderr)
        sys.exit(2)
    sys.exit(status)
