"""No output may be an input: a report file (validate --junit) or a redirected stdout that is one
of the inputs, or lies inside an input directory (where it would be read as an input, or written
over one), is refused with exit 2 before anything is written."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Iterable

import click

from kinspect.render.safe import path_text


def refuse_writing_over_inputs(inputs: Iterable, files: dict | None = None) -> None:
    """``inputs``: the paths a command reads ("-" and None are skipped); ``files``: the files it
    writes, by option name. Stdout counts when it is redirected to a file."""
    sources = [Path(p) for p in inputs if p is not None and str(p) != "-"]
    outputs = [(f"{option} {path_text(path)}", Path(path)) for option, path in (files or {}).items()
               if path is not None]
    redirected = _stdout_file()
    if redirected is not None:
        outputs.append(("stdout", redirected))
    for what, output in outputs:
        for source in sources:
            clash = _clash(output, source)
            if clash:
                raise click.UsageError(f"{what} {clash}: kinspect never writes over what it reads; "
                                       f"write it somewhere else")


def _clash(output: Path | int, source: Path) -> str | None:
    try:
        if source.is_dir():
            if isinstance(output, int):
                output = Path(os.readlink(f"/proc/self/fd/{output}"))
            if output.resolve().is_relative_to(source.resolve()):
                return f"is inside the input directory {path_text(source)}"
            return None
        if isinstance(output, int):
            same = os.path.samestat(os.fstat(output), os.stat(source))
        else:
            same = output.resolve() == source.resolve() or (
                output.exists() and source.exists() and os.path.samefile(output, source))
    except (OSError, ValueError):
        return None
    return f"is the input {path_text(source)}" if same else None


def _stdout_file() -> int | None:
    """Stdout's descriptor when it is a regular file (> or >> in the shell), else None."""
    try:
        fd = sys.stdout.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):
        return None
