"""No output may be an input, and no output is written through a trap.

``refuse_writing_over_inputs``: an output file (``validate --junit``, ``sniff --write``,
``spark --out``) or a redirected stdout that is one of the inputs (the same file by any path,
symbolic or hard link), or that is a file of an input directory the command would read, is
refused with exit 2 before anything is written. A new file inside an input directory is fine
(``validate . --junit ./report.xml``): it overwrites nothing.

``create_output``: opens an output file for writing without following a symbolic link at its
name, without blocking on a FIFO, and refusing anything but a regular file; the file is
truncated only once it is known to be none of the inputs (another user's link planted at a
predictable path, say under /tmp, cannot make kinspect write over the link's target).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import Callable, Iterable

import click

from kinspect.render.safe import path_text

REFUSED = "kinspect never writes over what it reads; write it somewhere else"


def refuse_writing_over_inputs(inputs: Iterable, files: dict | None = None,
                               reads: Callable[[Path], bool] | None = None) -> None:
    """``inputs``: the paths a command reads ("-" and None are skipped), key logs included;
    ``files``: the files it writes, by option name. Stdout counts when it is redirected to a
    file. ``reads(path)``: whether a file found in an input directory would be read (by default,
    every file is)."""
    sources = [Path(p) for p in inputs if p is not None and str(p) != "-"]
    outputs = [(f"{option} {path_text(path)}", Path(path)) for option, path in (files or {}).items()
               if path is not None]
    redirected = _stdout_file()
    if redirected is not None:
        outputs.append(("stdout", redirected))
    for what, output in outputs:
        for source in sources:
            clash = _clash(output, source, reads or _every_file)
            if clash:
                raise click.UsageError(f"{what} {clash}: {REFUSED}")


def create_output(path, option: str, inputs: Iterable = (), mode: int = 0o644):
    """A binary file object writing ``path`` from its start (the ``option`` names it in messages).

    Refused with a UsageError (exit 2): a symbolic link at ``path``, anything but a regular file
    (a FIFO would block, a device would be written), a file that is one of ``inputs``. A file this
    call created is removed again when it is refused."""
    name = f"{option} {path_text(path)}"
    created = True
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags | os.O_EXCL, mode)
        except FileExistsError:
            created = False
            fd = os.open(path, flags, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise click.UsageError(f"{name} is a symbolic link; kinspect does not write through links: "
                                   f"give the real path") from None
        if e.errno == errno.ENXIO:  # a FIFO with no reader
            raise click.UsageError(f"{name} is not a regular file; write to a file") from None
        raise click.UsageError(f"cannot write {name}: {e.strerror or e}; choose another path") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise click.UsageError(f"{name} is not a regular file; write to a file")
        for source in inputs:
            if source is None or str(source) == "-":
                continue
            try:
                if os.path.samestat(info, os.stat(source)):
                    raise click.UsageError(f"{name} is the input {path_text(source)}: {REFUSED}")
            except OSError:
                continue
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        if created:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise


def _every_file(path: Path) -> bool:
    return True


def _clash(output: Path | int, source: Path, reads: Callable[[Path], bool]) -> str | None:
    try:
        if isinstance(output, int):
            info = os.fstat(output)
            where = Path(os.readlink(f"/proc/self/fd/{output}"))
        else:
            where = output
            info = os.stat(output) if output.exists() else None
        if source.is_dir():
            if info is None or not stat.S_ISREG(info.st_mode):
                return None  # a new file overwrites nothing
            if where.resolve().is_relative_to(source.resolve()) and reads(where):
                return f"is a file the input directory {path_text(source)} holds"
            return None
        same = info is not None and source.exists() and os.path.samestat(info, os.stat(source))
        if not same and not isinstance(output, int):
            same = output.resolve() == source.resolve()  # one name for a file yet to be made
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
