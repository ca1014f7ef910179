"""Packet capture for the lab: tcpdump (pcap) or dumpcap (pcapng or pcap).

Start returns only once the tool says it is listening, so no client packet is missed; stop
waits until the kernel has handed over every packet seen so far, then sends SIGINT and waits
for the tool to flush and exit.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

LISTENING = {"tcpdump": re.compile(r"listening on "), "dumpcap": re.compile(r"Capturing on ")}
TCPDUMP_COUNT = re.compile(r"(\d+) packets? captured")
TCPDUMP_DROPS = re.compile(r"(\d+) packets? dropped by kernel")
DUMPCAP_DROPS = re.compile(r"Packets received/dropped on interface .*: \d+/(\d+)")
BUFFER_MIB = 32  # the default 2 MiB ring overflows when a loaded machine starves the reader


class PacketsDropped(RuntimeError):
    """The kernel dropped packets: the capture is incomplete and must not be used."""


@dataclass
class Recorder:
    """tool: "tcpdump" or "dumpcap"; fmt: "pcap" or "pcapng" (tcpdump writes pcap only);
    linktype: None for the interface's default, or a DLT name such as "LINUX_SLL2"."""

    output: Path
    interface: str
    bpf: str
    tool: str = "tcpdump"
    fmt: str = "pcap"
    linktype: str | None = None
    exec_prefix: list[str] = field(default_factory=list)
    buffer_mib: int = BUFFER_MIB  # the kernel's capture buffer; 64 KB loopback segments need more
    process: subprocess.Popen | None = None
    stderr: list[str] = field(default_factory=list)
    _pump_thread: threading.Thread | None = None

    def argv(self) -> list[str]:
        if self.tool == "tcpdump":
            if self.fmt != "pcap":
                raise ValueError("tcpdump writes pcap only; use dumpcap for pcapng")
            # -U: write each packet as it arrives; --immediate-mode: no kernel batching, so
            # SIGINT cannot strand packets in the ring; -Z root: keep the right to write.
            argv = ["tcpdump", "-i", self.interface, "-s", "0", "-U", "--immediate-mode",
                    "-B", str(self.buffer_mib * 1024), "-Z", "root", "-w", str(self.output)]
        elif self.tool == "dumpcap":
            argv = ["dumpcap", "-i", self.interface, "-s", "0", "-B", str(self.buffer_mib),
                    "-w", str(self.output)]
            if self.fmt == "pcap":
                argv.append("-P")
        else:
            raise ValueError(f"unknown capture tool {self.tool!r}")
        if self.linktype:
            argv += ["-y", self.linktype]
        if self.tool == "dumpcap":
            argv += ["-f", self.bpf]
        else:
            argv.append(self.bpf)
        return [*self.exec_prefix, *argv]

    def start(self, timeout: float = 15.0) -> "Recorder":
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        listening = threading.Event()
        self._pump_thread = threading.Thread(target=self._pump, args=(listening,), daemon=True)
        self._pump_thread.start()
        if not listening.wait(timeout):
            self._terminate()
            raise RuntimeError(f"{self.tool} did not start listening:\n" + "\n".join(self.stderr))
        return self

    def _pump(self, listening: threading.Event) -> None:
        pattern = LISTENING[self.tool]
        for line in self.process.stderr:
            self.stderr.append(line.rstrip())
            if pattern.search(line):
                listening.set()

    def _tcpdump_count(self) -> int | None:
        """Ask tcpdump for its running count (SIGUSR1 prints it) and read the answer."""
        seen = len(self.stderr)
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            for line in self.stderr[seen:]:
                m = TCPDUMP_COUNT.search(line)
                if m:
                    return int(m.group(1))
            time.sleep(0.02)
        return None

    def _settle(self, quiet: float = 0.3, limit: float = 5.0) -> None:
        """Wait until the capture stops growing: the clients are done, stragglers land."""
        if self.tool != "tcpdump":
            time.sleep(1.0)  # dumpcap has no running count; its read timeout is well under this
            return
        deadline = time.monotonic() + limit
        last = self._tcpdump_count()
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self._tcpdump_count()
            if now == last:
                return
            last = now

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self._settle()
        self._terminate()
        self.output.chmod(0o644)  # dumpcap creates 0600; these files are meant to be shared
        pattern = TCPDUMP_DROPS if self.tool == "tcpdump" else DUMPCAP_DROPS
        if any(int(m.group(1)) for line in self.stderr if (m := pattern.search(line))):
            raise PacketsDropped(f"{self.tool} dropped packets:\n" + "\n".join(self.stderr))

    def _terminate(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._pump_thread.join(5)  # the final statistics are the last lines it reads

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.stop()
        elif self.process is not None and self.process.poll() is None:
            self._terminate()
