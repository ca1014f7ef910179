"""Generators of hostile input directories for `kinspect spark` (issue 30, items 5 and 10).

Each function writes one input under ``root`` and returns its path:
- ``special_entries_dir``: a directory of two real captures beside entries a walk meets in the
  wild: a FIFO no one writes (read, it would never end), a Unix socket, a link loop, a dangling
  link, a link to a directory above it (a walk that followed it would never end), a capture
  whose name is not UTF-8, and one whose name holds terminal escape sequences (so do the FIFO's;
  the dangling link's is not UTF-8);
- ``deep_dir``: a capture at the bottom of directories nested ``depth`` deep (1,500: deeper than
  Python's recursion limit, within PATH_MAX). shutil.rmtree (and so pytest's clean-up of its
  temporary directories) recurses too: remove it with ``remove_tree``.

Run ``kinspect spark DIR --out OUT --master local[1]``: each must end within 20 s past Spark's
start and 1 GiB. special_entries_dir: exit 3 (the loop and the dangling link have files rows with
their errors), the FIFO, the socket and the directory link named as skipped, every name escaped.
deep_dir: exit 0, the capture decoded.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from tests.conftest import PCAPS

CAPTURES = (PCAPS / "librdkafka-mtu1500.pcap", PCAPS / "java-console-consumer.pcap")
NOT_UTF8 = b"capture-\xff\xfe.pcap"
ESCAPES = "\x1b[31mred\x1b]0;title\x07"  # colour, then a window title (OSC ... BEL)
FIFO = "never-written-" + ESCAPES
DANGLING = b"dangling-\xff"


def special_entries_dir(root: Path) -> Path:
    top = Path(root) / "spark-special-entries"
    top.mkdir(parents=True)
    for capture in CAPTURES:
        shutil.copy(capture, top / capture.name)
    shutil.copy(CAPTURES[0], os.path.join(os.fsencode(top), NOT_UTF8))
    shutil.copy(CAPTURES[0], top / (ESCAPES + ".pcap"))
    os.mkfifo(top / FIFO)
    with socket.socket(socket.AF_UNIX) as listener:  # the socket file stays once it is closed
        listener.bind(str(top / "a.sock"))
    (top / "loop").symlink_to("loop")
    os.symlink("no-such-file", os.path.join(os.fsencode(top), DANGLING))
    (top / "up").symlink_to("..")
    return top


def deep_dir(root: Path, depth: int = 1500) -> Path:
    top = Path(root) / "spark-deep"
    bottom = str(top)
    os.mkdir(bottom)
    for _ in range(depth):  # one level at a time: os.makedirs and Path.mkdir recurse
        bottom = os.path.join(bottom, "d")
        os.mkdir(bottom)
    shutil.copy(CAPTURES[0], os.path.join(bottom, CAPTURES[0].name))
    return top


def remove_tree(top: Path) -> None:
    """``top`` and everything under it, removed without recursion."""
    found, pending = [], [str(top)]
    while pending:
        directory = pending.pop()
        found.append(directory)
        for entry in os.scandir(directory):
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            else:
                os.unlink(entry.path)
    for directory in reversed(found):
        os.rmdir(directory)
