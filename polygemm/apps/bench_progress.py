"""``polygemm bench``'s progress: a bar on a terminal (tqdm, else rich) with the result lines
printed above it, or plain lines."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["Progress"]


class Progress:
    """A progress bar on a terminal (tqdm, else rich), the result lines printed above it; plain
    lines where there is no terminal, with ``--no-progress``, or with neither installed."""

    def __init__(self, total: int, desc: str, bar: bool) -> None:
        self._tqdm: Any = None
        self._rich: Any = None
        self._task: Any = None
        if not bar or total <= 0:
            return
        try:
            from tqdm import tqdm

            try:  # a terminal that reports no width (some ptys) gets a fixed one
                width = os.get_terminal_size(sys.stdout.fileno()).columns
            except (OSError, ValueError):
                width = 0
            size: dict[str, Any] = {"dynamic_ncols": True} if width > 0 else {"ncols": 100}
            self._tqdm = tqdm(total=total, desc=desc, unit="run", file=sys.stdout, leave=False, **size)
            return
        except ImportError:
            pass
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._rich = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TimeRemainingColumn(), console=Console(file=sys.stdout), transient=True)
            self._rich.start()
            self._task = self._rich.add_task(desc, total=total)
        except ImportError:
            self._rich = None

    @property
    def active(self) -> bool:
        return self._tqdm is not None or self._rich is not None

    def line(self, text: str) -> None:
        if self._tqdm is not None:
            self._tqdm.write(text, file=sys.stdout)
        elif self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, flush=True)

    def step(self) -> None:
        if self._tqdm is not None:
            self._tqdm.update(1)
        elif self._rich is not None:
            self._rich.advance(self._task)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._rich is not None:
            self._rich.stop()
        self._tqdm = self._rich = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

