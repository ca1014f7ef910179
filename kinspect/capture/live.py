"""Live packet sources for ``kinspect sniff``: what the pipeline's packet-source seam is fed
from a network interface.

Backends (``open_live``):

- ``ring``: AF_PACKET TPACKET_V3 rings in this process (capture/ring.py);
- ``dumpcap`` / ``tcpdump``: the privileged part stays in a child, Wireshark's own split; its
  ``-w -`` stream goes through the same streaming pcap/pcapng parsers as ``decode -``;
- ``auto``: the ring when this process may open one, else dumpcap, else tcpdump.

Each source yields ``(ts, linktype, data, number)`` packets and, when nothing came for a while,
``(now, TICK, b"", 0)`` ticks (see pipeline.py); ``statistics()`` gives the kernel's counters
(received, dropped) as far as the backend lets them be known: rings and tcpdump every second,
dumpcap when it stops (its closing line; with several interfaces, its pcapng interface
statistics blocks too). ``stop()`` may be called from a
signal handler. Errors that stop a capture before it starts are ``LiveError``: a one-line message
that says what to do, and whether what was asked is impossible (the CLI chooses the exit code).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque

from kinspect.capture.pcap import PcapParser
from kinspect.capture.pcapng import PcapngParser
from kinspect.capture.source import sniff_format
from kinspect.capture.stream import TICK
from kinspect.problems import Problem

BACKENDS = ("auto", "ring", "dumpcap", "tcpdump")
DUMPCAP_DELAY_NOTE = ("dumpcap hands packets over up to 250 ms late at low rates (its libpcap buffer timeout); "
                      "--backend ring or tcpdump print lines sooner")
TICK_EVERY = 0.1  # seconds: a tick at least this often, packets or not
START_TIMEOUT = 10.0  # seconds a child has to say it is listening
STOP_TIMEOUT = 5.0  # seconds a child has to flush and exit once told to stop
CHUNK = 1 << 20

TCPDUMP_DROPS = re.compile(r"(\d+) packets? dropped by kernel")
TCPDUMP_RECEIVED = re.compile(r"(\d+) packets? received by filter")
# dumpcap 4.0: "Packets received/dropped on interface 'Loopback: lo': 100/0 (pcap:0/dumpcap:0/...)"
DUMPCAP_DROPS = re.compile(r"Packets received/dropped on interface (?:'(.*)'|(\S+)): (\d+)/(\d+) ")
LISTENING = re.compile(r"listening on |Capturing on ")
PERMISSION = re.compile(r"permission|not permitted|Operation not permitted|socket: Operation", re.I)
NO_DEVICE = re.compile(r"No such device|doesn't exist|no such interface|There is no device", re.I)
BAD_FILTER = re.compile(r"syntax error|can't parse filter|Invalid capture filter|illegal", re.I)


class LiveError(Exception):
    """The capture could not start, and what to do. ``asked``: what was asked cannot be done (no
    such interface, a filter that does not compile, an unknown backend); otherwise the machine
    cannot do it now (permissions, a tool missing, a tool that failed)."""

    def __init__(self, message: str, asked: bool = False):
        super().__init__(message)
        self.asked = asked


def permission_message(interfaces: list[str], detail: str = "") -> str:
    """One line: the capabilities capture needs, and the way to grant them to dumpcap (never to
    the Python interpreter, which would hand them to every Python program on the machine)."""
    cause = f" ({detail})" if detail else ""
    names = ", ".join(interfaces)
    return (f"no permission to capture on {names}{cause}: capture needs CAP_NET_RAW and CAP_NET_ADMIN. "
            f"Run kinspect as root, or give them to dumpcap and use --backend dumpcap: "
            f"sudo setcap cap_net_raw,cap_net_admin+eip \"$(command -v dumpcap)\" "
            f"(on Debian/Ubuntu: sudo dpkg-reconfigure wireshark-common, then add yourself to the wireshark group)")


def list_interfaces() -> list[str]:
    """The interfaces that exist, ``any`` first (scapy lists them; the kernel's list otherwise)."""
    names = [name for _, name in socket.if_nameindex()]
    try:
        from scapy.arch import get_if_list
        names += list(get_if_list())
    except Exception:  # scapy missing or failing: the kernel's own list alone
        pass
    return ["any", *sorted(set(names) - {"any"})]


def check_interfaces(interfaces: list[str]) -> None:
    """LiveError (usage) naming the interfaces that exist, when one given does not."""
    known = {name for _, name in socket.if_nameindex()} | {"any"}
    missing = [name for name in interfaces if name not in known]
    if missing:
        raise LiveError(f"no interface named {', '.join(repr(m) for m in missing)}; the interfaces here are: "
                        f"{', '.join(list_interfaces())}", asked=True)


def build_filter(ports, heuristic: bool, user_filter: str | None) -> str:
    """The BPF expression: ``--filter`` as given, else every TCP packet when Kafka is detected
    on any port (as decode does), else only the Kafka ports."""
    if user_filter:
        return user_filter
    if heuristic:
        return "tcp"
    return "tcp and (" + " or ".join(f"port {p}" for p in sorted(ports)) + ")"


def open_live(interfaces: list[str], backend: str = "auto", bpf: str = "tcp", buffer_mb: int = 32):
    """A started live source (a PacketSource). LiveError when it cannot start."""
    check_interfaces(interfaces)
    if backend in ("auto", "ring"):
        from kinspect.capture.ring import RingError, RingSource
        try:
            return RingSource(interfaces, bpf, buffer_mb)
        except ValueError as e:  # the filter does not compile
            raise LiveError(f"the capture filter {bpf!r} does not compile: {e}", asked=True) from None
        except RingError as e:
            if backend == "ring":
                if e.errno in (errno.EPERM, errno.EACCES):
                    raise LiveError(permission_message(interfaces, "the ring backend runs in this process")) \
                        from None
                raise LiveError(f"cannot set up the capture ring: {e.strerror}; try --backend dumpcap") from None
            # auto: the child backends may hold the capabilities this process lacks
        tools = [t for t in ("dumpcap", "tcpdump") if shutil.which(t)]
        if not tools:
            raise LiveError(permission_message(interfaces, "and neither dumpcap nor tcpdump is installed"))
        if len(interfaces) > 1 and tools[0] == "tcpdump":
            raise LiveError(permission_message(interfaces, "tcpdump captures one interface only"))
        return PipeSource(tools[0], interfaces, bpf, buffer_mb)
    if backend not in ("dumpcap", "tcpdump"):
        raise LiveError(f"unknown backend {backend!r}; one of {', '.join(BACKENDS)}", asked=True)
    if shutil.which(backend) is None:
        other = "tcpdump" if backend == "dumpcap" else "dumpcap"
        raise LiveError(f"{backend} is not installed (apt-get install {'tshark' if backend == 'dumpcap' else 'tcpdump'})"
                        f"; or use --backend ring or --backend {other}")
    if backend == "tcpdump" and len(interfaces) > 1:
        raise LiveError("tcpdump captures one interface at a time: give one, or 'any', or use --backend dumpcap "
                        "or ring", asked=True)
    return PipeSource(backend, interfaces, bpf, buffer_mb)


PIPE_SIZES = (8 << 20, 1 << 20)  # bytes: the pipe from the child, as wide as allowed


def _widen_pipe(fd: int) -> None:
    """A wider pipe from the child (64 KiB by default): the child blocks on a full pipe, and
    while it is blocked it reads nothing from the kernel's buffer, so a burst that decoding
    takes a while over is held in the pipe as well as the kernel's buffer; and each wake-up of
    the child moves more packets. Unprivileged, Linux allows up to fs.pipe-max-size (1 MiB)."""
    for size in PIPE_SIZES:
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
            return
        except (OSError, AttributeError):
            continue


class PipeSource:
    """A PacketSource reading ``dumpcap -w -`` or ``tcpdump -U -w -`` from a child process."""

    size = None

    def __init__(self, tool: str, interfaces: list[str], bpf: str, buffer_mb: int):
        self.backend = tool
        self.interfaces = list(interfaces)
        self.problems: list[Problem] = []
        self.stderr: deque[str] = deque(maxlen=200)
        self.bytes_read = 0
        self._listening = threading.Event()
        self._received = self._dropped = 0  # tcpdump's running counts (SIGUSR1), or dumpcap's final
        self._per_interface: dict[str, dict] = {}
        self._stop = False
        self._final = False
        self._parser = None
        self.argv = self._argv(tool, interfaces, bpf, buffer_mb)
        try:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise LiveError(f"cannot run {tool}: {e.strerror or e}") from None
        _widen_pipe(self.process.stdout.fileno())
        self._pump = threading.Thread(target=self._read_stderr, daemon=True)
        self._pump.start()
        self._wait_listening()

    @staticmethod
    def _argv(tool: str, interfaces: list[str], bpf: str, buffer_mb: int) -> list[str]:
        if tool == "dumpcap":
            # -f and -B before the -i's apply to every interface.
            # Line delay: dumpcap flushes its output after every batch it reads when writing to a
            # pipe, and we read whatever is there; but it opens libpcap with a fixed 250 ms timeout
            # (CAP_READ_TIMEOUT) and no immediate mode, so on TPACKET_V3 the kernel hands over a
            # block of packets when it is full or 250 ms after its first packet. At low rates lines
            # come 0-250 ms late, and no option of dumpcap changes that (--update-interval, in 4.2
            # and later, only paces its reports to Wireshark). tcpdump takes --immediate-mode.
            # One interface: pcap (-P), whose records kinspect/native/_packets.c walks in C (the
            # pcapng parser is Python: 4.3 us a packet against 0.6); its drop counts then come
            # from the closing line dumpcap prints. Several interfaces need pcapng.
            argv = ["dumpcap", "-P" if len(interfaces) == 1 else "-n", "-B", str(buffer_mb)]
            if bpf:
                argv += ["-f", bpf]
            for name in interfaces:
                argv += ["-i", name]
            return argv + ["-w", "-"]
        argv = ["tcpdump", "-i", interfaces[0], "-s", "0", "-U", "--immediate-mode", "-n",
                "-B", str(buffer_mb * 1024), "-w", "-"]
        return argv + ([bpf] if bpf else [])

    def _read_stderr(self) -> None:
        for raw in self.process.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            self.stderr.append(line)
            if LISTENING.search(line):
                self._listening.set()
            m = TCPDUMP_DROPS.search(line)
            if m:
                self._dropped = int(m.group(1))
            m = TCPDUMP_RECEIVED.search(line)
            if m:
                self._received = int(m.group(1))
            m = DUMPCAP_DROPS.search(line)
            if m:
                self._per_interface[m.group(1) or m.group(2)] = {"received": int(m.group(3)),
                                                                 "dropped": int(m.group(4))}
        self._listening.set()  # it ended: nobody waits any longer

    def _wait_listening(self) -> None:
        """Until the child says it listens and writes its file header (dumpcap says "Capturing
        on" before it opens the interface: a permission failure comes after it)."""
        self._head = b""
        self._listening.wait(START_TIMEOUT)
        if self.process.poll() is None and self._listening.is_set():
            fd = self.process.stdout.fileno()
            ready, _, _ = select.select([fd], [], [], START_TIMEOUT)
            if ready:
                self._head = os.read(fd, CHUNK)
            if self._head:
                return
        try:
            self.process.wait(2)
        except subprocess.TimeoutExpired:
            self.close()
            raise LiveError(f"{self.backend} did not start capturing within {START_TIMEOUT:g} s") from None
        self._pump.join(2)
        said = " ".join(line for line in self.stderr if line).strip()
        if PERMISSION.search(said):
            raise LiveError(permission_message(self.interfaces, f"{self.backend}: {said[:160]}"))
        if NO_DEVICE.search(said):
            check_interfaces(self.interfaces)  # names the existing ones if it can tell
            raise LiveError(f"{self.backend} cannot open {', '.join(self.interfaces)}: {said[:200]}", asked=True)
        if BAD_FILTER.search(said):
            raise LiveError(f"the capture filter does not compile: {said[:200]}", asked=True)
        raise LiveError(f"{self.backend} exited {self.process.returncode} before capturing: {said[:300]}")

    def stop(self) -> None:
        """Ask the child to stop (it flushes, writes its statistics and exits); packets() then
        ends at the end of its stream."""
        if not self._stop:
            self._stop = True
            self._signal(signal.SIGINT)

    def _signal(self, sig) -> None:
        if self.process.poll() is None:
            try:
                self.process.send_signal(sig)
            except ProcessLookupError:
                pass

    def statistics(self) -> dict:
        """The kernel's counters as the child reports them (None until known)."""
        if self.backend == "tcpdump" and not self._stop:
            self._signal(signal.SIGUSR1)  # tcpdump prints its running counts; read at the next call
        stats = {"received": None, "dropped": None, "interfaces": {}, "final": self._final}
        if self.backend == "tcpdump":
            if self._received or self._dropped or self._final:
                # libpcap's ps_recv counts the dropped too (and on a loopback interface both
                # copies of each packet, the outgoing one being discarded in user space)
                stats.update(received=self._received, dropped=self._dropped)
            return stats
        parser = self._parser
        isb = getattr(parser, "statistics", None) or {}
        # dumpcap's "received" (its ISB ifrecv, and its closing line) counts the packets it got
        # from libpcap, drops not included: added to them, so that "received" means what it
        # means for the ring and tcpdump (every packet the filter passed, the dropped included)
        if isb:  # the pcapng interface statistics blocks, written when dumpcap stops
            dropped = sum(c.get("ifdrop", 0) + c.get("osdrop", 0) for c in isb.values())
            stats["received"] = sum(c.get("ifrecv", 0) for c in isb.values()) + dropped
            stats["dropped"] = dropped
        elif self._per_interface:
            stats["dropped"] = sum(c["dropped"] for c in self._per_interface.values())
            stats["received"] = sum(c["received"] for c in self._per_interface.values()) + stats["dropped"]
        stats["interfaces"] = dict(self._per_interface)
        return stats

    def packets(self):
        out = self.process.stdout
        fd = out.fileno()
        head, pending = b"", self._head  # what came with the start
        parser = None
        next_tick = time.monotonic() + TICK_EVERY
        deadline = None
        while True:
            if self._stop and deadline is None:
                deadline = time.monotonic() + STOP_TIMEOUT
            if deadline is not None and time.monotonic() > deadline:
                self.problems.append(Problem(f"{self.backend} did not stop within {STOP_TIMEOUT:g} s; "
                                             f"killed", self.backend, None))
                self.process.kill()
                break
            if pending:
                chunk, pending = pending, b""
            else:
                ready, _, _ = select.select([fd], [], [], TICK_EVERY)
                chunk = os.read(fd, CHUNK) if ready else None
            if chunk == b"":
                break  # the child closed its stream
            if chunk:
                self.bytes_read += len(chunk)
                if parser is None:
                    head += chunk
                    if len(head) < 8:
                        continue
                    fmt = sniff_format(head)
                    if fmt not in ("pcap", "pcapng"):
                        self.problems.append(Problem(f"{self.backend} wrote something that is not a capture "
                                                     f"(starts with {head[:8].hex(' ')})", self.backend, None))
                        self.stop()
                        break
                    parser = self._parser = (PcapParser if fmt == "pcap" else PcapngParser)(self.problems)
                    chunk, head = head, b""
                parser.feed(chunk)
                yield from parser.packets()
            now = time.monotonic()
            if chunk is None or now >= next_tick:
                next_tick = now + TICK_EVERY
                yield (time.time(), TICK, b"", 0)
        if parser is not None:
            parser.feed(b"")
            yield from parser.packets(final=True)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._pump.join(2)
        self._final = True
        if not self._stop and self.process.returncode not in (0, None, -signal.SIGINT):
            said = " ".join(list(self.stderr)[-3:])
            self.problems.append(Problem(f"{self.backend} exited {self.process.returncode}: {said[:200]}",
                                         self.backend, None))

    def close(self) -> None:
        if self.process.poll() is None:
            self._signal(signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
