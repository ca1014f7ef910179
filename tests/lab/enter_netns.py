"""Run a block of Python with the calling thread inside a lab network namespace.

`ip netns exec` wraps one command; KafkaBroker starts ZooKeeper, formats storage, starts the
broker, probes its port and runs Kafka's tools, each its own process, and probes from Python.
A network namespace belongs to a thread (setns(2)), and children inherit the namespace of the
thread that forks them, so entering the broker's namespace for the `with` block puts every one
of those processes, and the probes, there without changing the lab's broker code. The thread
comes back to its own namespace on exit; processes started inside stay where they were born.
Needs root (CAP_SYS_ADMIN).
"""

from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager
from typing import Iterator

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


@contextmanager
def entered(netns: str) -> Iterator[None]:
    """The block runs in namespace `netns` (a name from `ip netns list`)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)
