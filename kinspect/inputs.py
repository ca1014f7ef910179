"""What a command reads: the files named on its command line, and the files of its directories.

One rule for decode, validate, dump, offsets and spark:

- a named file is the command's to judge (it is read, or said to be no input of that command);
- a directory is walked, its subdirectories too (hidden names are skipped, links to directories
  are not followed); each file found is recognised by ``recognise`` (by content, or by Kafka's own
  file names), and what is not recognised is skipped;
- what is not a regular file (a FIFO would block, a device never ends), a broken link and a link
  loop are skipped; a file or directory that cannot be read is reported with its cause.

Every path comes back as an ``Entry``: ``kind`` says what it is, or ``skipped`` why it is not
read, or ``unreadable`` why it cannot be. ``Tally`` counts them for the one closing line each
command prints (and lists the skipped with -v).
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

# recognise(path, named) -> the kind of input, or None: no input of this command
Recogniser = Callable[[Path, bool], "str | None"]


@dataclass(frozen=True)
class Entry:
    path: Path
    named: bool  # given on the command line (not found in a directory)
    kind: str | None = None
    skipped: str | None = None  # why this is no input: "not a capture", "a FIFO"...
    unreadable: str | None = None  # why it cannot be read: "permission denied"...


@dataclass
class Tally:
    read: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    skipped_paths: list = field(default_factory=list)  # (path, reason), the first LISTED
    unreadable: int = 0

    LISTED = 1000

    def add(self, entry: Entry) -> None:
        if entry.unreadable is not None:
            self.unreadable += 1
        elif entry.skipped is not None:
            self.skipped[entry.skipped] += 1
            if len(self.skipped_paths) < self.LISTED:
                self.skipped_paths.append((entry.path, entry.skipped))
        else:
            self.read += 1

    def skipped_line(self) -> str | None:
        """``12 files skipped (not a capture: 10, a FIFO: 2)``, or None when none were."""
        total = sum(self.skipped.values())
        if not total:
            return None
        reasons = ", ".join(f"{why}: {n}" for why, n in self.skipped.most_common())
        return f"{total} file{'s' if total != 1 else ''} skipped ({reasons})"


def walk(paths: Iterable, recognise: Recogniser, *, streams: bool = False,
         unrecognised: str = "not recognised") -> Iterator[Entry]:
    """An Entry for every named path and every file under every named directory, in order.

    ``streams``: the command reads pipes (decode reads ``-`` and ``<(tcpdump ...)``), so a named
    FIFO or character device is read; otherwise it is skipped as any other non-regular file.
    ``unrecognised``: the reason given for a file found in a directory that is no input."""
    for raw in paths:
        path = Path(raw)
        if str(raw) == "-":
            yield Entry(path, True, kind=recognise(path, True) if streams else None,
                        skipped=None if streams else "standard input")
            continue
        try:
            info = os.stat(path)
        except OSError as e:
            yield Entry(path, True, unreadable=_why(e))
            continue
        if stat.S_ISDIR(info.st_mode):
            yield from _walk_directory(path, recognise, unrecognised)
        elif stat.S_ISREG(info.st_mode) or (streams and (stat.S_ISFIFO(info.st_mode)
                                                          or stat.S_ISCHR(info.st_mode))):
            yield _recognised(path, True, recognise, unrecognised)
        else:
            yield Entry(path, True, skipped=_special(info.st_mode))


def _walk_directory(root: Path, recognise: Recogniser, unrecognised: str) -> Iterator[Entry]:
    """Depth first, names sorted, with a stack: no recursion (a directory nested thousands deep
    ended os.walk with a RecursionError)."""
    pending = [root]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                names = sorted(entry.name for entry in listing)
        except OSError as e:
            yield Entry(Path(directory), False, unreadable=_why(e))
            continue
        subdirectories = []
        for name in names:
            path = Path(directory, name)
            if os.path.isdir(path) and not os.path.islink(path):
                if not name.startswith("."):
                    subdirectories.append(path)
                continue
            if name.startswith("."):
                yield Entry(path, False, skipped="hidden")
                continue
            try:
                info = os.stat(path)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    yield Entry(path, False, skipped="a link loop")
                elif e.errno == errno.ENOENT:
                    yield Entry(path, False, skipped="a broken link")
                else:
                    yield Entry(path, False, unreadable=_why(e))
                continue
            if stat.S_ISDIR(info.st_mode):
                yield Entry(path, False, skipped="a link to a directory")
            elif stat.S_ISREG(info.st_mode):
                yield _recognised(path, False, recognise, unrecognised)
            else:
                yield Entry(path, False, skipped=_special(info.st_mode))
        pending.extend(reversed(subdirectories))


def _recognised(path: Path, named: bool, recognise: Recogniser, unrecognised: str) -> Entry:
    try:
        kind = recognise(path, named)
    except OSError as e:
        return Entry(path, named, unreadable=_why(e))
    if kind is None and not named:
        return Entry(path, named, skipped=unrecognised)
    return Entry(path, named, kind=kind)


def readable(path: Path) -> None:
    """Raises the OSError that reading ``path`` would (a recogniser by name calls it)."""
    os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _why(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "a link loop"
    return error.strerror or str(error)
