"""Progress bars for long commands: on stderr, only on a terminal, never with ``--quiet``.

The library reports progress through an optional ``progress(done, total)``
callback and never prints; this is the command line's side of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any, TextIO, cast

import click

Progress = Callable[[int, int], None]


def wanted(quiet: bool, stream: IO[str] | None = None) -> bool:
    """A bar is drawn only for a person watching: stderr is a terminal and ``--quiet`` was not given."""
    stream = stream if stream is not None else sys.stderr
    try:
        return not quiet and stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress_bar(label: str, *, quiet: bool, stream: IO[str] | None = None) -> Iterator[Progress | None]:
    """A ``progress(done, total)`` callback drawing a bar, or ``None`` when no bar is wanted."""
    out = stream if stream is not None else sys.stderr
    if not wanted(quiet, out):
        yield None
        return
    bar: Any = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=max(total, 1), label=label, file=cast(TextIO, out), show_pos=False, show_percent=True)
            bar.__enter__()
        bar.length = max(total, 1)
        step = min(done, bar.length) - bar.pos
        if step > 0:
            bar.update(step)

    try:
        yield update
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
