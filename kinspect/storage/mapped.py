"""Files opened for reading only and mapped into memory: a segment of any size costs the pages
being read, not its size."""

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
        try:
            yield view
        finally:
            try:
                view.close()
            except BufferError:  # a memoryview still alive: the mapping goes with it
                pass
