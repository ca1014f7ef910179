"""The proxy's file descriptors: the limit raised at start, and what it leaves room for.

Each client costs two descriptors (its socket and the proxy's to its broker), each broker a
listening socket; the rest (the bootstrap listener, the tap's pipe, the event loop's and the C
pump's own) are counted as they are open when the plan is made. At the common soft limit of
1,024 only about half of 1,000 concurrent clients were served, so the soft limit is raised to
the hard one (which an unprivileged process may do) before anything else.

    before, after = raise_limit()
    plan = Plan.of(after, open_descriptors(), max_brokers)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PER_CLIENT = 2
SPARE = 16  # for what opens later: the decoder's pipe end, a metrics socket, a log file
BROKER_SHARE = 4  # broker listeners take at most a quarter of the room: clients keep the rest


def raise_limit() -> tuple[int, int]:
    """The soft RLIMIT_NOFILE before and after raising it to the hard limit (unchanged where
    there is no such limit, or it cannot be raised)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = _kernel_ceiling(soft)
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
            return soft, hard
        except (ValueError, OSError):
            pass
    return soft, soft


def _kernel_ceiling(soft: int) -> int:
    """An unlimited hard limit: Linux caps a process at fs.nr_open."""
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read())
    except (OSError, ValueError):
        return soft


def open_descriptors() -> int:
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(directory)) - 1  # the listing's own
        except OSError:
            continue
    return 0


@dataclass(frozen=True)
class Plan:
    limit: int
    brokers: int   # broker listeners allowed: --max-brokers, or less when the limit is low
    clients: int   # concurrent clients the rest leaves room for

    @classmethod
    def of(cls, limit: int, used: int, max_brokers: int) -> "Plan":
        if limit < 0:  # unknown: trust --max-brokers
            return cls(limit, max_brokers, -1)
        room = max(limit - used - SPARE, 0)
        brokers = min(max_brokers, room // BROKER_SHARE)
        return cls(limit, brokers, (room - brokers) // PER_CLIENT)
