"""kinspect sniff --live on a real terminal (a pty): the dashboard is drawn and redrawn while real
clients run, and its last frame holds what decode finds in a simultaneous tcpdump capture.

The pty is the only way to see what a user sees: rich draws the dashboard only when stdout is a
terminal. Its output is read raw, the escape sequences stripped, and the frames cut at each
status line ("lo (ring)  up N s  packets ...").
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections import Counter

import pytest

from tests.integration.test_sniff_lab import _clients, _decode, broker  # noqa: F401 (fixture)
from tests.lab.kinspect_child import KINSPECT, REPO
from tests.lab.recorder import Recorder

pytestmark = pytest.mark.lab

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
STATUS = re.compile(r"lo \(ring\)  up \d+ s  packets (\d+)  in flight (\d+)  kernel drops (\S+)  TCP gaps (\d+)")


class Terminal:
    """A child process on a pty of 160 columns and 60 lines; everything it writes, kept raw."""

    def __init__(self, argv: list[str]):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 160, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "60"}
        for quiet in ("NO_COLOR", "TTY_COMPATIBLE", "FORCE_COLOR"):
            env.pop(quiet, None)
        self.process = subprocess.Popen(argv, cwd=REPO, env=env, stdin=slave, stdout=slave, stderr=slave,
                                        start_new_session=True)
        os.close(slave)
        self.master = master
        self.raw = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if not ready:
                if self.process.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the child side closed
                return
            if not chunk:
                return
            self.raw += chunk

    @property
    def text(self) -> str:
        return ESCAPE.sub("", self.raw.decode("utf-8", "replace")).replace("\r", "")

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text):
                return True
            if self.process.poll() is not None:
                return bool(re.search(pattern, self.text))
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 60) -> int:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout)
        self._reader.join(10)
        os.close(self.master)
        return code


def _last_frame(text: str) -> str:
    starts = [m.start() for m in STATUS.finditer(text)]
    assert starts, text[-3000:]
    return text[starts[-1]:]


def _table_rows(frame: str, title: str) -> list[list[str]]:
    """The body rows of one of the frame's tables (rich's box: "│ a │ b │" between the header's
    "┡━━╇" and the bottom "└──┴")."""
    lines = frame.split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    rows = []
    for line in lines[at + 1:]:
        cells = line.strip()
        if cells.startswith("└"):
            break
        if cells.startswith("│"):
            rows.append([c.strip() for c in cells.strip("│").split("│")])
    return rows


def test_live_dashboard_on_a_terminal_redraws_and_ends_with_decodes_figures(broker, tmp_path):  # noqa: F811
    bpf = f"tcp port {broker.port}"
    recorder = Recorder(tmp_path / "tcpdump.pcap", "lo", bpf)
    with recorder:
        term = Terminal([*KINSPECT, "sniff", "lo", "--backend", "ring", "--port", str(broker.port),
                         "--filter", bpf, "--live"])
        assert term.wait_for(r"Requests by API"), term.text[-2000:]
        started = time.monotonic()
        values = _clients(broker, "pty")
        time.sleep(max(0.0, 2.0 - (time.monotonic() - started)) + 1.0)  # several redraws after the last
    code = term.stop()
    assert code == 0, term.text[-3000:]
    raw, text = bytes(term.raw), term.text
    assert b"\x1b[" in raw  # a terminal's output: styles and cursor moves
    assert "Traceback" not in text
    frames = STATUS.findall(text)
    assert len(frames) >= 8, f"{len(frames)} frames drawn"  # 4 a second, for several seconds
    packets = [int(f[0]) for f in frames]
    assert packets == sorted(packets) and packets[-1] > packets[0]

    last = _last_frame(text)
    status = STATUS.search(last)
    assert (status.group(3), status.group(4)) == ("0", "0"), status.group(0)  # no drops, no gaps
    assert status.group(2) == "0"  # nothing in flight once the clients are done

    expected = [r for r in _decode(recorder.output) if r["type"] == "exchange"]
    by_api = Counter(r["api_name"] for r in expected)
    shown = {row[0]: row for row in _table_rows(last, "Requests by API")}
    for api in ("Produce", "Fetch", "Metadata"):
        assert api in shown, (api, shown)
    # columns: api, req/s, p50 ms, p99 ms, total, no response; totals over the whole run
    assert {api: int(row[4]) for api, row in shown.items()} == dict(by_api), (shown, by_api)
    unanswered = Counter(r["api_name"] for r in expected
                         if r.get("response") is None and r.get("response_expected", True))
    assert {api: int(row[5]) for api, row in shown.items() if row[5] != "0"} == dict(unanswered)
    errors = Counter((r["api_name"], code) for r in expected for code in r.get("error_codes") or ())
    assert {(row[0], row[1]): int(row[2]) for row in _table_rows(last, "Errors by code")} == dict(errors)
    clients = {row[0] for row in _table_rows(last, "Top clients by bytes")}
    assert clients and clients <= {r["client_id"] for r in expected}, clients
    assert any(c.startswith("pty-") for c in clients)
    assert values  # the clients did produce
