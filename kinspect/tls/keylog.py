"""NSS key log files: the secrets a TLS client or server wrote, keyed by the ClientHello's random.

One line per secret, ``LABEL <client_random hex> <secret hex>`` (SSLKEYLOGFILE, Python's
``SSLContext.keylog_filename``, curl, the JVM agents, a pcapng Decryption Secrets Block):

- ``CLIENT_RANDOM``: the TLS 1.2 (and older) master secret, 48 bytes;
- ``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``,
  ``CLIENT_TRAFFIC_SECRET_0``, ``SERVER_TRAFFIC_SECRET_0``: TLS 1.3 traffic secrets;
- other labels (``EXPORTER_SECRET``, ``CLIENT_EARLY_TRAFFIC_SECRET``, ``RSA``...) are kept
  count of but not used. ``#`` lines are comments.

A line that is not of this form is counted in ``bad_lines`` (the first few kept in
``bad_examples`` with their file and line number), never an error. A ``KeyLog`` holds plain
data only, so it pickles (Spark ships it to its executors); ``refresh()`` reads what was
appended to its files since the last read (a client writing keys while ``sniff`` runs).
"""

from __future__ import annotations

import binascii
import os

from kinspect.native import tls as _native

MASTER = "CLIENT_RANDOM"
CLIENT_HS = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HS = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_AP = "CLIENT_TRAFFIC_SECRET_0"
SERVER_AP = "SERVER_TRAFFIC_SECRET_0"
USED = frozenset({MASTER, CLIENT_HS, SERVER_HS, CLIENT_AP, SERVER_AP})
KNOWN = USED | {"EXPORTER_SECRET", "EARLY_EXPORTER_SECRET", "CLIENT_EARLY_TRAFFIC_SECRET", "RSA"}
MAX_CONNECTIONS = 1 << 20  # client randoms kept; the oldest go first past it
MAX_LINE = 1024  # longer lines are bad lines (a secret is at most 64 bytes, 128 hex digits)
BAD_EXAMPLES = 5
_LABELS = {label.encode(): label for label in USED}
_UNUSED = frozenset(label.encode() for label in KNOWN - USED)


class KeyLog:
    """Secrets by client random: ``get(client_random)`` → {label: secret bytes} or None."""

    def __init__(self) -> None:
        self.secrets: dict[bytes, dict[str, bytes]] = {}
        self.lines = 0  # secrets read
        self.unused = 0  # well-formed lines of labels kinspect does not use
        self.bad_lines = 0
        self.bad_examples: list[str] = []
        self.paths: list[str] = []
        self.read_errors: list[str] = []  # files that could not be read: "path: why"
        # path -> (device, inode, bytes consumed, partial last line, lines consumed)
        self._files: dict[str, tuple[int, int, int, bytes, int]] = {}

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
        return len(self.secrets)

    def get(self, client_random: bytes) -> dict[str, bytes] | None:
        return self.secrets.get(client_random)

    def add_text(self, text: str | bytes, source: str = "<text>", first_line: int = 1) -> int:
        """Read key-log lines; returns how many secrets they held. Well-formed lines are read by
        native/_tls.c's keylog_lines (or ``keylog_lines_py``, its twin); every other line goes
        through ``_line``, in order (same verdicts: ``_line`` adds no secret the fast path refused)."""
        if isinstance(text, str):
            text = text.encode("utf-8", "replace")
        read = _native.keylog_lines if _native is not None else keylog_lines_py
        added, unused, rest = read(text, first_line, self.secrets, _LABELS, _UNUSED, MAX_CONNECTIONS, MAX_LINE)
        for number, line in rest:
            added += self._line(line, source, number)
        self.lines += added
        self.unused += unused
        return added

    def _line(self, line: bytes, source: str, number: int) -> int:
        line = line.strip()
        if not line or line.startswith(b"#"):
            return 0
        parts = line.split() if len(line) <= MAX_LINE else []
        if len(parts) != 3:
            return self._bad(source, number, "not three fields (LABEL CLIENT_RANDOM SECRET)")
        label = parts[0].decode("ascii", "replace")
        if label not in KNOWN:
            return self._bad(source, number, f"unknown label {label[:40]!r}")
        try:
            random, secret = bytes.fromhex(parts[1].decode("ascii")), bytes.fromhex(parts[2].decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            return self._bad(source, number, "a field is not hexadecimal")
        if label not in USED:
            self.unused += 1
            return 0
        if len(random) != 32 or not 32 <= len(secret) <= 64:
            return self._bad(source, number, f"client random of {len(random)} bytes or secret of {len(secret)}")
        entry = self.secrets.get(random)
        if entry is None:
            if len(self.secrets) >= MAX_CONNECTIONS:
                del self.secrets[next(iter(self.secrets))]
            entry = self.secrets[random] = {}
        entry[label] = secret
        return 1

    def _bad(self, source: str, number: int, why: str) -> int:
        self.bad_lines += 1
        if len(self.bad_examples) < BAD_EXAMPLES:
            self.bad_examples.append(f"{source}:{number}: {why}")
        return 0

    def refresh(self) -> int:
        """Read what the files gained since the last read (all of a file replaced or cut short);
        returns the secrets added. A file that cannot be read is noted in ``read_errors``."""
        added = 0
        for path in self.paths:
            added += self._read(path)
        return added

    def _read(self, path: str) -> int:
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                dev, ino, done, partial, lines = self._files.get(path, (st.st_dev, st.st_ino, 0, b"", 0))
                if (dev, ino) != (st.st_dev, st.st_ino) or st.st_size < done:
                    done, partial, lines = 0, b"", 0  # replaced or truncated: read it anew
                if st.st_size == done:
                    self._files[path] = (st.st_dev, st.st_ino, done, partial, lines)
                    return 0
                f.seek(done)
                data = f.read(st.st_size - done)
        except OSError as e:
            why = f"{path}: {e.strerror or e}"
            if why not in self.read_errors:
                self.read_errors.append(why)
            return 0
        text = partial + data
        cut = text.rfind(b"\n") + 1  # a last line without its newline may still be written
        whole = text[:cut]
        added = self.add_text(whole, path, lines + 1)
        self._files[path] = (st.st_dev, st.st_ino, done + len(data), text[cut:][:MAX_LINE + 1],
                             lines + whole.count(b"\n"))
        return added

    def summary(self) -> str:
        """One line for the user: what was read."""
        text = f"{len(self.secrets)} TLS connections' secrets ({self.lines} lines)"
        if self.bad_lines:
            text += f"; {self.bad_lines} lines not understood (first: {self.bad_examples[0]})"
        return text


def keylog_lines_py(text: bytes, first_line: int, secrets: dict, labels: dict, unused_labels, max_connections: int,
                    max_line: int) -> tuple[int, int, list]:
    """The well-formed lines of ``text`` into ``secrets``: (secrets added, unused-label lines,
    [(line number, line)] of every other line with a field). The twin of native/_tls.c's
    keylog_lines, used where that is not built; no more work than a well-formed line needs."""
    unhex = binascii.unhexlify
    added = unused = 0
    rest = []
    for number, line in enumerate(text.splitlines(), first_line):
        parts = line.split()
        if len(parts) == 3 and len(line) <= max_line:
            name, random, secret = parts
            label = labels.get(name)
            try:
                if label is not None and len(random) == 64 and 64 <= len(secret) <= 128:
                    random, secret = unhex(random), unhex(secret)
                    entry = secrets.get(random)
                    if entry is None:
                        if len(secrets) >= max_connections:
                            del secrets[next(iter(secrets))]
                        entry = secrets[random] = {}
                    entry[label] = secret
                    added += 1
                    continue
                if name in unused_labels:
                    unhex(random), unhex(secret)
                    unused += 1
                    continue
            except binascii.Error:
                pass
        if parts:
            rest.append((number, line))
    return added, unused, rest
