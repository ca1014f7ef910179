"""Fuzz the key log (kinspect/tls/keylog.py, keylines.py) and its index in C (native/_tls.c
keylog_scan, keylog_merge).

Input: a mode byte, a size byte, then key-log text:
- mode 0 (text): the text read at once, by C and by the Python twins (keylines.py): the
  same runs, connections, counts and first bad line; every connection ``items()`` gives is what
  ``get()`` of its random gives; ``portable()`` holds the same connections;
- mode 1 (file): the text written to a file and read in chunks of ``size`` + 1 bytes: the same
  connections and counts as the text read at once, up to its last line break (a last line
  without one may still be being written);
- mode 2 (growing file): the file written in two parts cut at ``size`` / 255 of it, read after
  each (refresh): the same as mode 1.
Checks: no exception; the agreements above; a text of n lines never makes more than n entries.
"""

import os

import harness

with harness.instrumented("kinspect.tls"):
    from kinspect.tls import keylines, keylog

FILE = os.memfd_create("fuzz-keylog")  # a regular file in memory: nothing left behind
PATH = f"/proc/self/fd/{FILE}"


def _state(log: "keylog.KeyLog") -> tuple:
    return log._runs, list(log.items()), log.lines, log.unused, log.bad_lines, log.dropped


def _text(text: bytes) -> None:
    fast = keylog.KeyLog.from_text(text, "fuzz.log")
    saved = keylog._native
    keylog._native = None
    try:
        slow = keylog.KeyLog.from_text(text, "fuzz.log")
    finally:
        keylog._native = saved
    harness.agree("keylog", _state(fast) + (fast.first_bad,), _state(slow) + (slow.first_bad,))
    connections = list(fast.items())
    for random, secrets in connections[:64]:
        harness.agree("get", fast.get(random), secrets, ("get", "items"))
    if fast.lines > text.count(b"\n") + text.count(b"\r") + 1:
        raise harness.Finding(f"{fast.lines} entries from a text of fewer lines")
    harness.agree("portable", list(fast.portable().items()), connections, ("portable", "items"))


def _complete(text: bytes) -> bytes:
    """The text up to its last line break (a \\r at the very end is none yet)."""
    return text[:keylines.last_break(text) + 1]


def _file(text: bytes, size: int, cut: int | None) -> None:
    saved = keylog.CHUNK
    keylog.CHUNK = size + 1
    try:
        os.ftruncate(FILE, 0)
        os.pwrite(FILE, text if cut is None else text[:cut], 0)
        log = keylog.KeyLog.from_files([PATH])
        if cut is not None:
            os.pwrite(FILE, text[cut:], cut)
            log.refresh()
    finally:
        keylog.CHUNK = saved
    whole = keylog.KeyLog.from_text(_complete(text), "whole")
    harness.agree("keylog file", (list(log.items()), log.lines, log.unused, log.bad_lines, log.dropped),
                  (list(whole.items()), whole.lines, whole.unused, whole.bad_lines, whole.dropped),
                  ("read from a file", "read at once"))


def target(data: bytes) -> None:
    mode, size, text = (data[0] % 3, data[1], data[2:]) if len(data) >= 2 else (0, 0, b"")
    if mode == 0:
        _text(text)
    elif mode == 1:
        _file(text, size, None)
    else:
        _file(text, 4095, len(text) * size // 255)


if __name__ == "__main__":
    harness.main(target, "keylog")
