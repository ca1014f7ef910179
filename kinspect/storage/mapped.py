"""Files opened for reading only and mapped into memory: a segment of any size costs the pages
being read, not its size. release() gives back the pages behind a sequential reader, so the
resident set stays flat however big the file."""

from __future__ import annotations

import mmap
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def mapped(path: Path):
    """The file's bytes as a read-only mmap (b"" for an empty file). Raises OSError."""
    with open(path, "rb") as handle:
        if handle.seek(0, 2) == 0:
            yield b""
            return
        view = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        if hasattr(mmap, "MADV_SEQUENTIAL"):
            view.madvise(mmap.MADV_SEQUENTIAL)
        try:
            yield view
        finally:
            try:
                view.close()
            except BufferError:  # a memoryview still alive: the mapping goes with it
                pass


def release(view, upto: int) -> None:
    """Drop the mapped pages before byte `upto` from the resident set (they stay in the page
    cache and fault back in if read again)."""
    if isinstance(view, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        upto -= upto % mmap.PAGESIZE
        if upto > 0:
            view.madvise(mmap.MADV_DONTNEED, 0, upto)
