"""The progress bar never mixes with the output, read off a real terminal (tmux's final screen).

Each command runs twice in a tmux pane: once with the bar drawn at every update
(KINSPECT_PROGRESS_AFTER=0) and once with it never drawn. The two final screens must be the same
line for line, and the raw bytes of the first run must show that the bar was drawn (where it may
be: stdout on the terminal or in a file; through a pipe it is not drawn at all, since the reader
writes to the terminal between the bar's redraws).
"""

from __future__ import annotations

import os
import shlex
import shutil
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import count

import pytest

from tests.conftest import PCAPS, SAMPLES


BAR = "━"
KINSPECT = f"{shlex.quote(sys.executable)} -m kinspect"
_sessions = count()


def many_connections(source, target, copies: int) -> None:
    """``copies`` of a real Ethernet capture, each on its own client ports and a second later: a
    capture of thousands of packets (the bar is updated every 4,096) that decodes like the first."""
    data = source.read_bytes()
    assert struct.unpack_from("<I", data, 20)[0] == 1  # Ethernet
    out = bytearray(data[:24])
    for copy in range(copies):
        position = 24
        while position < len(data):
            seconds, micros, length, wire = struct.unpack_from("<IIII", data, position)
            packet = bytearray(data[position + 16:position + 16 + length])
            tcp = 14 + (packet[14] & 0x0F) * 4
            for offset in (tcp, tcp + 2):  # the client's port: every port but the broker's
                port = struct.unpack_from("!H", packet, offset)[0]
                if port != 9092:
                    struct.pack_into("!H", packet, offset, 20000 + (port + copy * 101) % 40000)
            out += struct.pack("<IIII", seconds + copy, micros, length, wire) + packet
            position += 16 + length
    target.write_bytes(bytes(out))


def segment_of_many_batches(target, megabytes: int) -> None:
    """A real segment's batches again and again (validate finds their offsets out of order)."""
    batches = (SAMPLES / "kafka-4.1.2/logs/codec-none-0/00000000000000000000.log").read_bytes()
    target.write_bytes(batches * (megabytes * (1 << 20) // len(batches)))


class Pane:
    def __init__(self, tmp_path):
        self.name = f"s{next(_sessions)}"
        # A server of its own: when a session's server exits with its last session, a new
        # session started on the same socket at that moment fails (seen in CI).
        self.socket = f"kinspect-test-{os.getpid()}-{self.name}"
        self.raw = tmp_path / f"{self.name}.raw"
        self.cwd = tmp_path

    def run(self, command: str, draw_after: str, timeout: float = 120) -> tuple[list[str], bytes]:
        tmux = ["tmux", "-L", self.socket]
        env = ["-e", f"KINSPECT_PROGRESS_AFTER={draw_after}", "-e", "TERM=xterm-256color"]
        conf = self.cwd / "tmux.conf"
        conf.write_text("set -g history-limit 200000\n")
        subprocess.run([*tmux, "-f", str(conf), "new-session", "-d", "-s", self.name, "-x", "150",
                        "-y", "50", *env, "-c", str(self.cwd), "bash --norc --noprofile"], check=True)
        try:
            subprocess.run([*tmux, "pipe-pane", "-t", self.name, "-o", f"cat >> {shlex.quote(str(self.raw))}"],
                           check=True)
            subprocess.run([*tmux, "send-keys", "-t", self.name, f"clear; printf '\\137\\137BEGIN\\n'; {command}; printf '\\137\\137END%s\\n' $?", "Enter"],
                           check=True)
            deadline = time.monotonic() + timeout
            while True:
                screen = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-", "-t", self.name],
                                        capture_output=True, text=True, check=True).stdout
                if any(line.startswith("__END") for line in screen.split("\n")):
                    break
                assert time.monotonic() < deadline, f"{command} did not end: {screen[-2000:]}"
                time.sleep(0.2)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
        lines = screen.rstrip("\n").split("\n")
        start = lines.index("__BEGIN")
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("__END"))
        shown = [line.rstrip() for line in lines[start + 1:end + 1]]
        return shown, self.raw.read_bytes() if self.raw.exists() else b""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    many_connections(PCAPS / "librdkafka-mtu1500.pcap", root / "many.pcap", 60)
    segment_of_many_batches(root / "00000000000000000000.log", 6)
    shutil.copy(PCAPS / "librdkafka-produce-consume.pcapng", root / "small.pcapng")
    return root


CASES = [  # (command, the bar is drawn)
    ("decode small.pcapng", False),  # the README's first command: too short for a bar
    ("decode many.pcap", True),
    ("decode -v --api Metadata many.pcap", True),
    ("decode --json many.pcap", True),
    ("decode --summary many.pcap", True),
    ("decode --json many.pcap > out.json; wc -l < out.json", True),
    ("decode many.pcap | head -20", False),
    ("decode many.pcap | cut -c1-60 | tail -5", False),
    ("validate 00000000000000000000.log", True),
    ("dump --records 00000000000000000000.log | tail -3", False),
    ("dump 00000000000000000000.log", True),
]


@pytest.mark.parametrize("command, drawn", CASES, ids=[c for c, _ in CASES])
def test_the_bar_never_mixes_with_the_output(inputs, tmp_path, command, drawn):
    line = command.replace("decode ", f"{KINSPECT} decode ", 1).replace("validate ", f"{KINSPECT} validate ", 1) \
        .replace("dump ", f"{KINSPECT} dump ", 1)
    # the two runs at once, each in a pane and a directory of its own (a command may write a file)
    panes = []
    for where in (tmp_path / "bar", tmp_path / "quiet"):
        shutil.copytree(inputs, where)
        panes.append(Pane(where))
    with ThreadPoolExecutor(2) as pool:
        drawn_run = pool.submit(panes[0].run, line, "0")
        quiet_run = pool.submit(panes[1].run, line, "1000000")
        (with_bar, raw), (without_bar, quiet_raw) = drawn_run.result(), quiet_run.result()
    assert BAR.encode() not in quiet_raw
    assert (BAR.encode() in raw) == drawn, raw[-3000:]
    assert not any(BAR in shown for shown in with_bar)
    assert with_bar == without_bar
    assert with_bar and with_bar[-1].startswith("__END")
    assert len(with_bar) > 1


def test_spark_bar_is_gone_from_the_final_screen(tmp_path):
    """Spark's bar (files and bytes done, polled from the job's tasks) is drawn on the terminal
    while the job runs, and nothing of it stays on the final screen or glued to its output."""
    shutil.copy(PCAPS / "librdkafka-produce-consume.pcapng", tmp_path / "small.pcapng")
    shown, raw = Pane(tmp_path).run(f"{KINSPECT} spark small.pcapng --out o", "0", timeout=300)
    assert BAR.encode() in raw, raw[-3000:]
    assert shown[-1] == "__END0", shown
    assert not any(BAR in line or "decoding" in line for line in shown), shown
    summary = [line for line in shown if "exchanges" in line]
    assert summary and summary[-1].startswith("1 files (42,288 bytes), 61 exchanges, 0 problems"), shown
