"""The thresholds of the checks, with their defaults (the CLI's options set them)."""

from __future__ import annotations

from dataclasses import dataclass

from kinspect.doctor.bounded import DEFAULT_LIMIT


@dataclass(frozen=True)
class Thresholds:
    rebalances: int = 3            # rebalances of one group that make a warning (fewer: info)
    lag: int = 1                   # records behind that make a stalled group a warning
    lag_seconds: float = 60.0      # seconds behind (record timestamps) that make a warning
    stalled_s: float = 30.0        # seconds the committed offset stood while the log end moved
    vanished_s: float = 5.0        # a transactional producer silent this long before the end left
    slow_ms: float = 1000.0        # latency beyond what the request asked to wait that is slow
    throttle_ms: int = 1           # total throttle of a client and API that makes a warning
    max_state: int = DEFAULT_LIMIT  # groups, producers, connections, clients kept per check
    series: int = 256              # points kept per time series (lag over time, rounds)


DEFAULTS = Thresholds()
