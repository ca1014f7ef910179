"""throttle: time the brokers asked clients to wait (throttle_time_ms in responses), per client
and API, and whether the client honoured it: a request it sent on the same connection after the
throttled response and before the throttle ran out did not (KIP-219; pipelined requests sent
before that response arrived are not counted).

Severity: warning when a client and API were throttled ``--min-throttle-ms`` in total or more."""

from __future__ import annotations

from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import is_internal
from kinspect.doctor.finding import WARNING, evidence, finding
from kinspect.doctor.options import DEFAULTS, Thresholds

NAME = "throttle"
SLACK = 0.005  # seconds of clock and scheduling slack before a request counts as too early


class _Throttled:
    __slots__ = ("count", "total_ms", "max_ms", "worst", "early", "requests")

    def __init__(self):
        self.count = self.total_ms = self.max_ms = self.early = self.requests = 0
        self.worst: list = []


class Throttle:
    name = NAME
    apis = None

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.t = thresholds
        self.throttled: Bounded[_Throttled] = Bounded("throttled clients", thresholds.max_state, _Throttled)
        self.until: Bounded[list] = Bounded("connections", thresholds.max_state, list)

    @property
    def bounded(self):
        return [self.throttled, self.until]

    def exchange(self, record: dict) -> None:
        if is_internal(record):
            return
        conn = record.get("conn")
        sent = record.get("request_time") or 0.0
        wait = self.until.get(conn)
        if wait is not None and wait[0] is not None and wait[1] + SLACK < sent < wait[0] - SLACK:
            wait[2].early += 1
        response = record.get("response")
        ms = response.get("throttle_time_ms") if isinstance(response, dict) else None
        if not isinstance(ms, int) or ms <= 0:
            return
        entry = self.throttled.at((record.get("client_id"), record.get("api_name")))
        entry.count += 1
        entry.total_ms += ms
        entry.max_ms = max(entry.max_ms, ms)
        entry.worst.append((ms, evidence(record)))
        entry.worst.sort(key=lambda item: -item[0])
        del entry.worst[5:]
        answered = record.get("response_time") or sent
        self.until.at(conn)[:] = [answered + ms / 1000, answered, entry]

    def honoured(self, client_id) -> bool | None:
        """Whether ``client_id`` waited out every throttle; None when it was never throttled."""
        entries = [e for (c, _), e in self.throttled.items.items() if c == client_id]
        if not entries:
            return None
        return not any(e.early for e in entries)

    def finish(self, end: float):
        for (client_id, api_name), entry in self.throttled.items.items():
            if entry.total_ms < self.t.throttle_ms:
                continue
            honoured = entry.early == 0
            yield finding(NAME, WARNING,
                          f"client {client_id} was throttled {entry.count} time(s) on {api_name}: "
                          f"{entry.total_ms} ms in all, up to {entry.max_ms} ms"
                          + ("" if honoured else f"; it sent {entry.early} request(s) before the throttle ran out"),
                          [e for _, e in entry.worst], client_id=client_id, api_name=api_name,
                          throttle_ms=entry.total_ms, throttled=entry.count, max_throttle_ms=entry.max_ms,
                          honoured=honoured, early_requests=entry.early)
