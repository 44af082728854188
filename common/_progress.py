"""A progress display for long work, drawn on stderr and only when stderr is a terminal.

Why one helper: `local start`, `snapshot rebuild`, `perf` and `chaos run` all wait on work that takes
seconds to minutes. A person at a terminal should see that it advances; a script reading stdout (or a
CI log) must see nothing extra, so the display never touches stdout and is silent when stderr is not a
TTY. rich draws it (a well-kept library; nothing here is hand-rolled terminal code).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as _RichProgress

__all__ = ["Progress", "progress"]


class Progress:
    """One task on the display: `advance`, `update(completed=..., total=..., description=...)`.

    A disabled instance (stderr not a terminal, or `enabled=False`) accepts the same calls and draws
    nothing, so callers never branch on whether a person is watching.
    """

    def __init__(self, rich_progress: _RichProgress | None, task: TaskID | None) -> None:
        self._rich = rich_progress
        self._task = task

    @property
    def enabled(self) -> bool:
        return self._rich is not None

    def advance(self, steps: float = 1.0) -> None:
        if self._rich is not None and self._task is not None:
            self._rich.advance(self._task, steps)

    def update(
        self, *, completed: float | None = None, total: float | None = None, description: str | None = None
    ) -> None:
        if self._rich is not None and self._task is not None:
            # rich treats None as "unchanged" for each of these.
            self._rich.update(self._task, completed=completed, total=total, description=description)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or the stream is closed
        return False


@contextmanager
def progress(
    description: str, *, total: float | None = None, enabled: bool | None = None, stream: TextIO | None = None
) -> Iterator[Progress]:
    """Show `description` with a bar (when `total` is known) or a spinner, until the block ends.

    `enabled=None` means "when the stream is a terminal"; the stream defaults to the `sys.stderr` of
    the moment of the call. The display is transient: it is erased when the block ends, so the
    command's own output (on stdout) reads the same with or without it.
    """
    out = stream if stream is not None else sys.stderr
    if enabled is None:
        enabled = _is_terminal(out)
    if not enabled:
        yield Progress(None, None)
        return
    rich_progress = _RichProgress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=out),
        transient=True,
        # rich would route print() through the display, i.e. move a command's stdout to stderr
        redirect_stdout=False,
        redirect_stderr=False,
    )
    with rich_progress:
        task = rich_progress.add_task(description, total=total)
        yield Progress(rich_progress, task)
