"""A private MTU-1500 network: two network namespaces joined by a veth pair.

Loopback has MTU 65536, so there a Kafka message is one TCP segment; production networks
split them. The broker runs in one namespace, the clients in the other, and the capture
watches the veth. Addresses come from 198.18.0.0/15 (RFC 2544 benchmarking) and exist only
on these two veths; nothing routes out of the namespaces. Deleting a namespace deletes its
veth end, and with it the pair, so teardown is two commands and always runs. Names carry
the owner's pid, so namespaces left by a killed run (SIGKILL skips `finally`) are swept the
next time the lab starts.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

MTU = 1500
SUBNET_BITS = 30
OUR_NAMESPACE = re.compile(r"^kinspect-lab-(\d+)-[0-9a-f]{6}-(broker|client)$")


@dataclass(frozen=True)
class Side:
    netns: str
    interface: str
    address: str

    def exec_prefix(self) -> list[str]:
        """argv prefix that runs a command inside this side's namespace."""
        return ["ip", "netns", "exec", self.netns]


@dataclass(frozen=True)
class LabNetwork:
    broker: Side
    client: Side
    mtu: int = MTU


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _configure(side: Side) -> None:
    ns = side.netns
    _ip("-n", ns, "link", "set", "lo", "up")
    _ip("-n", ns, "addr", "add", f"{side.address}/{SUBNET_BITS}", "dev", side.interface)
    # veth does TSO by default: the capture would see 64 KB "segments" that never exist on a
    # real 1500-byte wire. One segment per GSO packet makes the stack segment before the tap.
    _ip("-n", ns, "link", "set", side.interface, "mtu", str(MTU), "gso_max_segs", "1", "up")


def _wait_for_carrier(side: Side, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["ip", "-n", side.netns, "-o", "link", "show", side.interface],
                             capture_output=True, text=True).stdout
        if "NO-CARRIER" not in out and "LOWER_UP" in out:
            return
        time.sleep(0.05)
    raise RuntimeError(f"veth {side.interface} in {side.netns} has no carrier after {timeout}s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_orphans() -> list[str]:
    """Delete lab namespaces whose creating process is gone; return their names."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    swept = []
    for line in listing.splitlines():
        name = line.split()[0] if line.strip() else ""
        m = OUR_NAMESPACE.match(name)
        if m and not _alive(int(m.group(1))):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            swept.append(name)
    return swept


@contextmanager
def loopback_namespace() -> Iterator[Side]:
    """One namespace with only its own loopback, up: MTU 65536 with TSO/GSO, as on a broker
    host's lo, but holding nothing else, so a capture of its lo sees only what runs in it.
    Named like the lab's broker namespaces, so a killed run's is swept the same way."""
    sweep_orphans()
    token = secrets.token_hex(3)
    side = Side(f"kinspect-lab-{os.getpid()}-{token}-broker", "lo", "127.0.0.1")
    _ip("netns", "add", side.netns)
    try:
        _ip("-n", side.netns, "link", "set", "lo", "up")
        yield side
    finally:
        subprocess.run(["ip", "netns", "del", side.netns], capture_output=True)


@contextmanager
def lab_network() -> Iterator[LabNetwork]:
    """Create the namespaces and veth pair; delete both on exit, whatever happened."""
    sweep_orphans()
    token = secrets.token_hex(3)
    prefix = f"kinspect-lab-{os.getpid()}-{token}"
    broker = Side(f"{prefix}-broker", f"kb{token}", "198.18.0.1")
    client = Side(f"{prefix}-client", f"kc{token}", "198.18.0.2")
    created: list[str] = []
    try:
        for side in (broker, client):
            _ip("netns", "add", side.netns)
            created.append(side.netns)
        # Both ends are born inside their namespaces: the pair never appears in the host's.
        _ip("link", "add", broker.interface, "netns", broker.netns, "type", "veth",
            "peer", "name", client.interface, "netns", client.netns)
        _configure(broker)
        _configure(client)
        _wait_for_carrier(client)
        yield LabNetwork(broker, client)
    finally:
        for ns in reversed(created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
