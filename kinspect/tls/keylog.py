"""NSS key logs: the secrets a TLS client or server wrote, found by the ClientHello's random.

One line per secret, ``LABEL <client_random hex> <secret hex>`` (SSLKEYLOGFILE, Python's
``SSLContext.keylog_filename``, curl, the JVM agents, a pcapng Decryption Secrets Block); the
lines are read as keylines.py says. Lines of labels kinspect does not use are counted in
``unused``; any line not understood is counted in ``bad_lines`` and kept nowhere: ``first_bad``
says where the first was and why.

Memory: a key log is not held. Each secret's line is indexed by 16 bytes (a key made of the
client random, where its line starts), in sorted runs (native/_tls.c's keylog_scan and
keylog_merge, or their twins in keylines.py); ``get`` finds a random's lines and reads
them again, from the file (kept open, so a file replaced meanwhile is still read) or from the
text given. A 1 GB key log costs about 150 MB, a key log of junk nothing. At most
MAX_ENTRIES secrets are indexed; those after are counted in ``dropped``.

The API (the TLS layer, the pipeline, the CLI and Spark use only this):

- ``KeyLog.from_files(paths)``, ``KeyLog.from_text(text, source)``, ``KeyLog()``;
- ``get(client_random)`` → {label: secret bytes} or None (the last line of a label wins);
- ``add_text(text, source, first_line)`` → secrets added (a Decryption Secrets Block's text; kept
  by reference, or only its secrets' lines when it is mostly other lines);
- ``refresh()`` → secrets added: what the files gained since the last read (a client writing
  keys while ``sniff`` runs; a file replaced or cut short is read anew from its start);
- ``items()``: (client random, {label: secret}) of every connection, by client random;
- ``subset(client_randoms)``: a KeyLog of those connections only, held in memory;
- ``portable()``: a KeyLog of every secret, held in memory, with no file behind it: what to
  ship to another process or host (it pickles as its secrets' lines plus the index: about the
  size of the key log's secrets, 100 MiB of them in 2 s);
- counters ``lines`` (secrets indexed), ``unused``, ``bad_lines``, ``dropped``; ``first_bad``;
  ``paths``; ``read_errors`` ("path: why" of files that could not be read, once each);
  ``summary()``; ``len()``: the secrets indexed.

A file that is not a regular file (a FIFO, a device) is never opened for reading: it would block
or never end. It is noted in ``read_errors`` (``not_regular`` says it is that).
"""

from __future__ import annotations

import bisect
import heapq
import os
import stat
import sys
from array import array

from kinspect.native import tls as _native
from kinspect.tls.keylines import (AT_BITS, AT_MASK, CLIENT_AP, CLIENT_HS, KNOWN, MASTER, MAX_LINE,  # noqa: F401
                                   SERVER_AP, SERVER_HS, UNUSED_BYTES, USED, USED_BYTES, first_break,
                                   held_line, keylog_merge_py, keylog_scan_py, last_break, pairs, parse_line,
                                   random_key, secret_lines, why_bad)

MAX_ENTRIES = 1 << 24  # secrets indexed (16 bytes each: 256 MiB); the rest are counted in dropped
MAX_RUN = 1 << 20  # entries of a run that runs are merged into (16 MiB): the rest stay apart
MAX_CANDIDATES = 64  # lines of one client random read again, the last ones (5 labels, logged twice...)
MAX_READ = 1024  # lines read again for one lookup (others may share the random's key)
MAX_HANDLES = 64  # key-log files kept open; the oldest are opened again by name when needed
CHUNK = 8 << 20  # bytes of a file read at a time
KEPT_BYTES = 512  # a text of more bytes a secret than this is not kept whole: only its secrets' lines
NOT_REGULAR = "not a regular file (a FIFO, a socket or a device); give a key-log file"
_ENTRY = 16


class KeyLog:
    """Secrets by client random: ``get(client_random)`` → {label: secret bytes} or None."""

    def __init__(self) -> None:
        self.lines = 0  # secrets indexed
        self.unused = 0  # well-formed lines of labels kinspect does not use
        self.bad_lines = 0
        self.first_bad: str | None = None  # "source:line: why" of the first bad line
        self.dropped = 0  # secrets past MAX_ENTRIES, not indexed
        self.paths: list[str] = []
        self.read_errors: list[str] = []  # files that could not be read: "path: why"
        self.not_regular: list[str] = []  # of those, the paths that are no regular file
        # what an entry's source number names: a file (path, device, inode) or the text itself
        self._sources: list[tuple[str, int, int] | bytes] = []
        self._runs: list[bytes] = []  # sorted entries: native uint64 (key, at) pairs
        # path -> (device, inode, bytes consumed, partial last line, lines consumed, source)
        self._files: dict[str, tuple[int, int, int, bytes, int, int]] = {}
        self._handles: dict[int, object] = {}  # source → its file, open (never pickled)
        self._pending = b""  # entries a scan left for its caller

    @classmethod
    def from_files(cls, paths) -> "KeyLog":
        keylog = cls()
        for path in paths:
            keylog.paths.append(os.fspath(path))
        keylog.refresh()
        return keylog

    @classmethod
    def from_text(cls, text: str | bytes, source: str = "<text>") -> "KeyLog":
        keylog = cls()
        keylog.add_text(text, source)
        return keylog

    def __len__(self) -> int:
        return self.lines

    # -- reading ------------------------------------------------------------------------------

    def add_text(self, text: str | bytes, source: str = "<text>", first_line: int = 1) -> int:
        """Index the secrets of ``text``; returns how many. The text is kept when it holds any:
        by reference, or only its secrets' lines when they are a small part of it (junk around a
        few secrets would be held whole). ``source`` and ``first_line`` name the lines in
        ``first_bad``."""
        if isinstance(text, str):
            text = text.encode("utf-8", "replace")
        elif type(text) is not bytes:
            text = bytes(text)
        number = len(self._sources)
        added, _ = self._scan(text, 0, first_line, number, source, keep=False)
        if not added:
            return 0
        entries, self._pending = self._pending, b""
        if len(text) > KEPT_BYTES * added:  # mostly other lines: only the secrets' are kept
            text = secret_lines(text, entries)
            scan = _native.keylog_scan if _native is not None else keylog_scan_py
            entries = scan(text, 0, 1, number, MAX_LINE, USED_BYTES, UNUSED_BYTES, added)[0]
        self._sources.append(text)
        self._add_run(entries)
        return added

    def _scan(self, text, base: int, first_line: int, source: int, name: str, keep: bool = True) -> tuple[int, int]:
        """Index the lines of ``text`` (from byte ``base`` of source ``source``): (added, lines).
        ``keep=False``: the entries are left in ``_pending`` for the caller."""
        self._pending = b""
        if source >> (64 - AT_BITS):
            self.dropped += text.count(b"\n")  # sources beyond counting: not indexed
            return 0, 0
        scan = _native.keylog_scan if _native is not None else keylog_scan_py
        entries, lines, added, unused, bad, dropped, first = scan(text, base, first_line, source, MAX_LINE, USED_BYTES,
                                                                  UNUSED_BYTES, MAX_ENTRIES - self.lines)
        self.lines += added
        self.unused += unused
        self.dropped += dropped
        if bad:
            self.bad_lines += bad
            if self.first_bad is None:
                number, start, stop = first
                self.first_bad = f"{name}:{number}: {why_bad(bytes(text[start:stop]))}"
        if added and keep:
            self._add_run(entries)
        elif added:
            self._pending = entries
        return added, lines

    def _add_run(self, run: bytes) -> None:
        runs = self._runs
        runs.append(run)
        merge = _native.keylog_merge if _native is not None else keylog_merge_py
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]) and \
                len(runs[-2]) + len(runs[-1]) <= MAX_RUN * _ENTRY:
            last = runs.pop()
            runs[-1] = merge(runs[-1], last)

    def refresh(self) -> int:
        """Read what the files gained since the last read; returns the secrets added. A file
        that cannot be read is noted in ``read_errors``, once."""
        added = 0
        for path in self.paths:
            added += self._read(path)
        return added

    def _note(self, path: str, why: str) -> None:
        text = f"{path}: {why}"
        if text not in self.read_errors:
            self.read_errors.append(text)
            if why == NOT_REGULAR:
                self.not_regular.append(path)

    def _read(self, path: str) -> int:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO would block a plain open
        except OSError as e:
            self._note(path, e.strerror or str(e))
            return 0
        f = open(fd, "rb", buffering=0)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._note(path, NOT_REGULAR)
                return 0
            dev, ino, done, partial, lines, source = self._files.get(path, (-1, -1, 0, b"", 0, -1))
            if (dev, ino) != (st.st_dev, st.st_ino) or st.st_size < done:  # new, replaced or cut short
                dev, ino, done, partial, lines = st.st_dev, st.st_ino, 0, b"", 0
                source = len(self._sources)
                self._sources.append((path, dev, ino))
                self._keep_open(source, f)
                f = None
            added = 0
            while done < st.st_size:
                data = os.pread(fd, min(CHUNK, st.st_size - done), done)
                if not data:
                    break
                text = partial + data
                cut = last_break(text) + 1
                if cut:
                    more, counted = self._scan(memoryview(text)[:cut], done - len(partial), lines + 1, source, path)
                    added += more
                    lines += counted
                partial = held_line(text[cut:])  # a last line may still be being written
                done += len(data)
            self._files[path] = (dev, ino, done, partial, lines, source)
            return added
        except OSError as e:
            self._note(path, e.strerror or str(e))
            return 0
        finally:
            if f is not None:
                f.close()

    def _keep_open(self, source: int, f) -> None:
        self._handles[source] = f
        while len(self._handles) > MAX_HANDLES:
            del self._handles[next(iter(self._handles))]  # closed when collected

    # -- finding --------------------------------------------------------------------------------

    def get(self, client_random: bytes) -> dict[str, bytes] | None:
        if len(client_random) != 32:
            return None
        key = random_key(client_random)
        found = []
        for run in self._runs:
            pairs = memoryview(run).cast("Q")
            keys = pairs[::2]
            i = bisect.bisect_left(keys, key)
            while i < len(keys) and keys[i] == key:
                found.append(pairs[2 * i + 1])
                i += 1
        if not found:
            return None
        found.sort(reverse=True)  # the last lines first: the last of a label wins
        secrets: dict[str, bytes] = {}
        matched = 0
        for at in found[:MAX_READ]:
            parsed = parse_line(self._line_at(at >> AT_BITS, at & AT_MASK))
            if parsed is not None and parsed[1] == client_random:
                secrets.setdefault(parsed[0], parsed[2])
                matched += 1
                if matched == MAX_CANDIDATES:
                    break
        return secrets or None

    def _line_at(self, source: int, offset: int) -> bytes:
        """The line that starts at ``offset`` of a source (b"" when its file is gone)."""
        where = self._sources[source]
        if type(where) is bytes:
            data = where[offset:offset + MAX_LINE + 1]
        else:
            data = self._file_bytes(source, where, offset)
        return data[:first_break(data)]

    def _file_bytes(self, source: int, where: tuple[str, int, int], offset: int, size: int = MAX_LINE + 1) -> bytes:
        f = self._handles.get(source)
        try:
            if f is None:
                path, dev, ino = where
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                f = open(fd, "rb", buffering=0)
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) != (dev, ino) or not stat.S_ISREG(st.st_mode):
                    f.close()
                    return b""  # another file there now: the lines are checked when read anyway
                self._keep_open(source, f)
            return os.pread(f.fileno(), size, offset)
        except OSError:
            return b""

    def _indexed_lines(self):
        """The line of every entry, in the order they were read (a file's read a chunk at a time)."""
        places = sorted(at for run in self._runs for at in memoryview(run).cast("Q")[1::2])
        window_source, window_start, window = -1, 0, b""
        for at in places:
            source, offset = at >> AT_BITS, at & AT_MASK
            where = self._sources[source]
            if type(where) is bytes:
                line = where[offset:offset + MAX_LINE + 1]
            else:
                if source != window_source or not window_start <= offset <= window_start + len(window) - MAX_LINE - 1:
                    window_source, window_start = source, offset
                    window = self._file_bytes(source, where, offset, CHUNK)
                line = window[offset - window_start:offset - window_start + MAX_LINE + 1]
            yield line[:first_break(line)]

    def items(self):
        """(client random, {label: secret}) of every connection, by client random."""
        streams = [pairs(run) for run in self._runs]
        group: list[int] = []
        last = None
        for key, at in heapq.merge(*streams):
            if key != last and group:
                yield from self._connections(group)
                group = []
            last = key
            group.append(at)
        if group:
            yield from self._connections(group)

    def _connections(self, places: list[int]):
        """The connections whose lines are at ``places`` (one key: mostly one connection)."""
        found: dict[bytes, dict[str, bytes]] = {}
        for at in sorted(places)[-MAX_READ:]:
            parsed = parse_line(self._line_at(at >> AT_BITS, at & AT_MASK))
            if parsed is not None:
                found.setdefault(parsed[1], {})[parsed[0]] = parsed[2]
        for random in sorted(found):
            yield random, found[random]

    def subset(self, client_randoms) -> "KeyLog":
        """The secrets of these connections only, held in memory."""
        lines = []
        for random in client_randoms:
            for label, secret in (self.get(random) or {}).items():
                lines.append(f"{label} {random.hex()} {secret.hex()}\n")
        return KeyLog.from_text("".join(lines), "subset")

    def portable(self) -> "KeyLog":
        """Every secret, held in memory, with no file behind it: what to ship to another process
        or host. The counters stay those of the files read."""
        copy = KeyLog.from_text(b"\n".join(self._indexed_lines()) + b"\n", "portable")
        copy.unused, copy.bad_lines, copy.first_bad, copy.dropped = (self.unused, self.bad_lines, self.first_bad,
                                                                     self.dropped)
        return copy

    def summary(self) -> str:
        """One line for the user: what was read."""
        text = f"{self.lines} TLS secrets"
        if self.bad_lines:
            text += f"; {self.bad_lines} lines not understood (first: {self.first_bad})"
        if self.dropped:
            text += f"; {self.dropped} secrets past the first {MAX_ENTRIES} not used"
        return text

    # -- pickling (Spark): no open files; the index in this host's byte order ---------------------

    def __getstate__(self) -> dict:
        state = {name: getattr(self, name) for name in self.__dict__ if name not in ("_handles", "_pending")}
        state["byteorder"] = sys.byteorder
        return state

    def __setstate__(self, state: dict) -> None:
        order = state.pop("byteorder", sys.byteorder)
        self.__dict__.update(state)
        self._handles, self._pending = {}, b""
        if order != sys.byteorder:
            runs = []
            for run in self._runs:
                swapped = array("Q", run)
                swapped.byteswap()
                runs.append(swapped.tobytes())
            self._runs = runs
