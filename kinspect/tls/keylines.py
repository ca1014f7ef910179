"""Key-log lines: the NSS key-log format, and the index entries made of it (sans-I/O).

A line is ``LABEL <client_random hex> <secret hex>``; lines end at \n, \r or \r\n (as
bytes.splitlines). Each line is one of:

- a secret: at most MAX_LINE bytes, three whitespace-separated fields, a label of USED
  (``CLIENT_RANDOM``: the TLS 1.2 master secret, 48 bytes; ``CLIENT_HANDSHAKE_TRAFFIC_SECRET``,
  ``SERVER_HANDSHAKE_TRAFFIC_SECRET``, ``CLIENT_TRAFFIC_SECRET_0``, ``SERVER_TRAFFIC_SECRET_0``:
  TLS 1.3), a client random of 64 hex digits and a secret of 64 to 128;
- unused: the same form with another label of KNOWN (``EXPORTER_SECRET``, ``RSA``...);
- blank, or a comment (its first field starts with ``#``): passed over;
- bad: anything else (``why_bad`` says why).

An index entry is two native uint64: the client random's key (``random_key``) and where its
line starts, ``source << AT_BITS | byte offset``. ``keylog_scan_py`` and ``keylog_merge_py`` are the twins of
native/_tls.c's keylog_scan and keylog_merge, which make and merge sorted runs of them.
"""

from __future__ import annotations

import binascii
import heapq
from array import array

MASTER = "CLIENT_RANDOM"
CLIENT_HS = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HS = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_AP = "CLIENT_TRAFFIC_SECRET_0"
SERVER_AP = "SERVER_TRAFFIC_SECRET_0"
USED = frozenset({MASTER, CLIENT_HS, SERVER_HS, CLIENT_AP, SERVER_AP})
KNOWN = USED | {"EXPORTER_SECRET", "EARLY_EXPORTER_SECRET", "CLIENT_EARLY_TRAFFIC_SECRET", "RSA"}
USED_BYTES = tuple(sorted(label.encode() for label in USED))
UNUSED_BYTES = tuple(sorted(label.encode() for label in KNOWN - USED))
MAX_LINE = 1024  # longer lines are bad lines (a secret is at most 64 bytes, 128 hex digits)
AT_BITS = 40  # an entry's position: source << 40 | byte offset
AT_MASK = (1 << AT_BITS) - 1
MIX, U64 = 0x9E3779B97F4A7C15, (1 << 64) - 1


def random_key(client_random: bytes) -> int:
    """The index's key of a client random: its four 8-byte words mixed in turn (every bit counts:
    TLS 1.2 randoms begin with the time). The twin of native/_tls.c's random_key."""
    key = 0
    for word in range(0, 32, 8):
        key = (key ^ int.from_bytes(client_random[word:word + 8], "big")) * MIX & U64
    return key


def pairs(run: bytes):
    pairs = memoryview(run).cast("Q")
    return zip(pairs[::2], pairs[1::2])


def first_break(data: bytes) -> int:
    """Where the first line of ``data`` ends (its length when it has no line break)."""
    ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
    return min(ends) if ends else len(data)


def last_break(text: bytes) -> int:
    """Where the last line break of ``text`` is (-1: none). A \\r at the very end is not one
    yet: a \\n may follow it in the next read."""
    return max(text.rfind(b"\n"), text.rfind(b"\r", 0, len(text) - 1))


def secret_lines(text: bytes, entries: bytes) -> bytes:
    """The lines of ``text`` that ``entries`` index, in their order, one a line."""
    starts = sorted(at & AT_MASK for at in memoryview(entries).cast("Q")[1::2])
    lines = []
    for start in starts:
        line = text[start:start + MAX_LINE + 1]
        lines.append(line[:first_break(line)])
    return b"\n".join(lines) + b"\n"


def held_line(rest: bytes) -> bytes:
    """The start of a line still being written, as much as its verdict needs: a line longer than
    MAX_LINE is kept as MAX_LINE + 1 bytes that end the same way, blank, a comment or bad (and
    a \r at its end, which a \n may follow)."""
    if len(rest) <= MAX_LINE + 1:
        return rest
    cr = b"\r" if rest.endswith(b"\r") else b""
    head = rest.lstrip()[:1]
    return (head or b" ") * (MAX_LINE + 1) + cr


def parse_line(line: bytes) -> tuple[str, bytes, bytes] | None:
    """(label, client random, secret) of a secret's line, or None when it is not one."""
    parts = line.split()
    if len(parts) != 3 or len(line) > MAX_LINE or parts[0] not in USED_BYTES:
        return None
    label, random, secret = parts
    if len(random) != 64 or not 64 <= len(secret) <= 128:
        return None
    try:
        return label.decode(), binascii.unhexlify(random), binascii.unhexlify(secret)
    except binascii.Error:
        return None


def why_bad(line: bytes) -> str:
    """Why keylog_scan_py found ``line`` bad, in a few words."""
    if len(line) > MAX_LINE:
        return f"longer than {MAX_LINE} bytes"
    parts = line.split()
    if len(parts) != 3:
        return "not three fields (LABEL CLIENT_RANDOM SECRET)"
    label = parts[0].decode("ascii", "replace")
    if label not in KNOWN:
        return f"unknown label {label[:40]!r}"
    try:
        random, secret = binascii.unhexlify(parts[1]), binascii.unhexlify(parts[2])
    except binascii.Error:
        return "a field is not hexadecimal"
    return f"client random of {len(random)} bytes or secret of {len(secret)}"


def _hex(field: bytes) -> bool:
    try:
        binascii.unhexlify(field)
        return True
    except binascii.Error:
        return False


def keylog_scan_py(text, base: int, first_line: int, source: int, max_line: int, used: tuple, unused_labels: tuple,
            room: int) -> tuple:
    """The lines of ``text`` indexed: (entries, lines, added, unused, bad, dropped, first_bad).
    The twin of native/_tls.c's keylog_scan (its comment says what each is), used where that is
    not built."""
    text = bytes(text)
    entries: list[tuple[int, int]] = []
    lines = unused = bad = dropped = 0
    first_bad = None
    n, at = len(text), 0
    used, unused_labels = frozenset(used), frozenset(unused_labels)
    while at < n:
        start = at
        end = text.find(b"\n", at)
        end = n if end < 0 else end
        stop = text.find(b"\r", at, end)
        stop = end if stop < 0 else stop
        at = stop + (2 if text[stop:stop + 2] == b"\r\n" else 1) if stop < n else n
        lines += 1
        line = text[start:stop]
        parts = line.split(None, 3)
        if not parts or parts[0][:1] == b"#":
            continue
        if len(parts) == 3 and stop - start <= max_line:
            label, random, secret = parts
            if label in used:
                if len(random) == 64 and 64 <= len(secret) <= 128 and _hex(random) and _hex(secret):
                    offset = base + start
                    if len(entries) >= room or offset >> AT_BITS:
                        dropped += 1
                    else:
                        entries.append((random_key(binascii.unhexlify(random)), source << AT_BITS | offset))
                    continue
            elif label in unused_labels and _hex(random) and _hex(secret):
                unused += 1
                continue
        if not bad:
            first_bad = (first_line + lines - 1, start, stop)
        bad += 1
    entries.sort()
    packed = array("Q", [value for pair in entries for value in pair]).tobytes()
    return packed, lines, len(entries), unused, bad, dropped, first_bad


def keylog_merge_py(a: bytes, b: bytes) -> bytes:
    """Two sorted runs of entries as one: the twin of native/_tls.c's keylog_merge."""
    return array("Q", [value for pair in heapq.merge(pairs(a), pairs(b)) for value in pair]).tobytes()
