"""Consecutive capture files read as one capture: the files a rotating writer (dumpcap's ring
buffer, ``sniff --write`` with rotation) cut one recording into. A PacketSource
(capture/stream.py): packets of each file in turn, numbered on, so that a connection that goes on
from one file into the next is reassembled as one.
"""

from __future__ import annotations

from typing import Iterator

from kinspect.capture.source import Capture, open_capture
from kinspect.limits import DEFAULT_LIMITS, Limits


def first_time(path: str, limits: Limits = DEFAULT_LIMITS) -> float | None:
    """The timestamp of the first packet of ``path``, or None when it holds none."""
    with open_capture(path, limits) as capture:
        for ts, _linktype, _data, _number in capture.packets():
            return ts
    return None


class ChainedCapture:
    """``paths`` opened one after another (each opened when the one before ends); a file that
    cannot be read as a capture raises CaptureError when its turn comes."""

    def __init__(self, paths: list[str], limits: Limits = DEFAULT_LIMITS):
        self.paths = list(paths)
        self.limits = limits
        self.name = self.paths[-1] if self.paths else ""
        self.problems: list = []
        self.size: int | None = None
        self._open: Capture | None = None
        self._done = 0  # bytes read from the files already closed
        self._secrets: list = []  # the closed files' Decryption Secrets Blocks

    @property
    def bytes_read(self) -> int:
        return self._done + (self._open.bytes_read if self._open is not None else 0)

    @property
    def secrets(self) -> list:
        return self._secrets + (self._open.secrets if self._open is not None else [])

    def packets(self) -> Iterator[tuple]:
        number = 0
        for path in self.paths:
            self._open = open_capture(path, self.limits)
            with self._open as capture:
                for ts, linktype, data, _number in capture.packets():
                    number += 1
                    yield ts, linktype, data, number
                self.problems.extend(capture.problems)
                self._secrets.extend(capture.secrets)
                self._done += capture.bytes_read
            self._open = None

    def __enter__(self) -> ChainedCapture:
        return self

    def __exit__(self, *exc) -> None:
        if self._open is not None:
            self._open.close()
