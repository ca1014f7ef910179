"""Real loopback captures recorded at test time with tcpdump and dumpcap.

One TCP exchange over IPv4 and one over IPv6, captured at once as: Ethernet on lo (pcap, µs),
Linux cooked v1 and v2 on "any" (v2 with nanosecond timestamps), and a pcapng of lo + any
(two interfaces with different link types, so every packet appears twice).
"""

from __future__ import annotations

import os
import random
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class LiveCaptures:
    files: dict[str, Path]
    port: int
    # (client address family, request bytes, reply bytes) per connection
    exchanges: list[tuple[int, bytes, bytes]] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(proc: subprocess.Popen, text: str, timeout: float = 15.0) -> None:
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    seen = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not sel.select(left):
            raise RuntimeError(f"{proc.args[0]} did not start: {seen.decode(errors='replace')}")
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            raise RuntimeError(f"{proc.args[0]} exited: {seen.decode(errors='replace')}")
        seen += chunk
    sel.close()


def _exchange(family: int, host: str, port: int, request: bytes, reply: bytes) -> None:
    server = socket.socket(family)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        got = bytearray()
        while chunk := conn.recv(65536):
            got += chunk
        assert bytes(got) == request
        conn.sendall(reply)
        conn.close()

    t = threading.Thread(target=serve)
    t.start()
    client = socket.create_connection((host, port))
    client.sendall(request[:10])
    time.sleep(0.01)  # a separate first segment
    client.sendall(request[10:])
    client.shutdown(socket.SHUT_WR)
    got = bytearray()
    while chunk := client.recv(65536):
        got += chunk
    client.close()
    t.join(10)
    server.close()
    assert bytes(got) == reply


def _frames(path: Path, display_filter: str = "") -> int:
    """Frames in a capture (matching ``display_filter``), counted by tshark."""
    cmd = ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"]
    if display_filter:
        cmd += ["-Y", display_filter]
    return len(subprocess.run(cmd, capture_output=True, text=True).stdout.split())


def _complete(captures: LiveCaptures) -> bool:
    """Every tool saw both connections open and close, and none dropped a packet."""
    ends = "(tcp.flags.syn == 1 && tcp.flags.ack == 0) || tcp.flags.fin == 1"
    per_interface = {name: _frames(path) // (2 if name == "multi" else 1) for name, path in captures.files.items()}
    opened_closed = {name: _frames(path, ends) for name, path in captures.files.items()}
    return len(set(per_interface.values())) == 1 and opened_closed == {"ethernet": 6, "sll": 6, "sll2_ns": 6, "multi": 12}


def _record(d: Path, warm_up: float) -> LiveCaptures:
    port = _free_port()
    bpf = f"tcp port {port}"
    files = {
        "ethernet": d / "lo.pcap",
        "sll": d / "any-sll.pcap",
        "sll2_ns": d / "any-sll2-ns.pcap",
        "multi": d / "lo-any.pcapng",
    }
    commands = [
        (["tcpdump", "-Z", "root", "-B", "32768", "--immediate-mode", "-U", "-i", "lo", "-w", files["ethernet"], bpf], "listening on"),
        (["tcpdump", "-Z", "root", "-B", "32768", "--immediate-mode", "-U", "-i", "any", "-y", "LINUX_SLL", "-w", files["sll"], bpf], "listening on"),
        (["tcpdump", "-Z", "root", "-B", "32768", "--immediate-mode", "-U", "-i", "any", "-y", "LINUX_SLL2", "--time-stamp-precision=nano",
          "-w", files["sll2_ns"], bpf], "listening on"),
        (["dumpcap", "-q", "-B", "32", "-f", bpf, "-i", "lo", "-i", "any", "-w", files["multi"]], "Capturing on"),
    ]
    procs = []
    try:
        for cmd, ready in commands:
            proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            procs.append(proc)
            _wait_for(proc, ready)
        time.sleep(warm_up)  # dumpcap opens its second interface after saying it is capturing
        rng = random.Random(7)
        captures = LiveCaptures(files, port)
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            request = b"kinspect " + rng.randbytes(150_000)
            reply = rng.randbytes(70_000)
            _exchange(family, host, port, request, reply)
            captures.exchanges.append((family, request, reply))
        time.sleep(1.0)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stderr.close()
    return captures


@pytest.fixture(scope="session")
def live(tmp_path_factory) -> LiveCaptures:
    if os.geteuid() != 0:
        pytest.fail("recording loopback captures needs root: run the suite as CI does (tests/run.sh as root)")
    for tool in ("tcpdump", "dumpcap", "tshark"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed")
    for attempt, warm_up in enumerate((1.0, 2.0, 4.0)):
        captures = _record(tmp_path_factory.mktemp(f"live{attempt}"), warm_up)
        if _complete(captures):
            return captures
    pytest.fail("the capture tools kept missing packets of the test exchange (a loaded machine?)")
