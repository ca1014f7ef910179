"""slow: latency outliers by broker and API, naming the slowest exchanges.

An exchange is slow when its latency, less the time the request asked the broker to wait
(Fetch and ShareFetch max_wait_ms) and the throttle the broker imposed, is ``--slow-ms`` or
more. A request sent while its connection was muted by an earlier response's throttle (KIP-219:
the broker reads nothing more from it until the throttle ends) is timed from the end of that
throttle. JoinGroup and SyncGroup wait for the whole group by design (the rebalance check covers
them); unanswered requests are not timed.

Severity: warning for a broker and API with slow exchanges."""

from __future__ import annotations

import heapq

from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import ends, is_internal
from kinspect.doctor.finding import WARNING, evidence, finding
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.decode.summary import Latencies

NAME = "slow"
FETCH, JOIN_GROUP, SYNC_GROUP, SHARE_FETCH = 1, 11, 14, 78
WAITING = frozenset({JOIN_GROUP, SYNC_GROUP})
WORST = 5


class _Broker:
    __slots__ = ("latencies", "slow", "worst")

    def __init__(self):
        self.latencies = Latencies()
        self.slow = 0
        self.worst: list = []  # a heap of (excess ms, n, evidence, latency ms)


class Slow:
    name = NAME
    apis = None

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.t = thresholds
        self.brokers: Bounded[_Broker] = Bounded("broker APIs", thresholds.max_state, _Broker)
        self.muted: Bounded[list] = Bounded("connections", thresholds.max_state, lambda: [0.0])
        self._n = 0

    @property
    def bounded(self):
        return [self.brokers, self.muted]

    def exchange(self, record: dict) -> None:
        latency = record.get("latency_ms")
        if latency is None or record["api_key"] in WAITING or is_internal(record):
            return
        _, broker = ends(record.get("conn"))
        entry = self.brokers.at((broker, record.get("api_name")))
        entry.latencies.add(latency)
        waited = 0.0
        if record["api_key"] in (FETCH, SHARE_FETCH):
            waited = (record.get("request") or {}).get("max_wait_ms") or 0
        response = record.get("response")
        throttle = response.get("throttle_time_ms") if isinstance(response, dict) else None
        throttle = throttle if isinstance(throttle, int) and throttle > 0 else 0
        sent, answered = record.get("request_time") or 0.0, record.get("response_time")
        muted = self.muted.at(record.get("conn"))
        queued = max(0.0, muted[0] - sent) * 1000 if muted[0] > sent else 0.0
        if throttle and answered:
            muted[0] = max(muted[0], answered + throttle / 1000)
        excess = latency - max(0, waited) - throttle - min(queued, latency)
        if excess < self.t.slow_ms:
            return
        entry.slow += 1
        self._n += 1
        item = (excess, self._n, evidence(record), latency)
        if len(entry.worst) < WORST:
            heapq.heappush(entry.worst, item)
        else:
            heapq.heappushpop(entry.worst, item)

    def finish(self, end: float):
        for (broker, api_name), entry in self.brokers.items.items():
            if not entry.slow:
                continue
            worst = sorted(entry.worst, reverse=True)
            lat = entry.latencies
            yield finding(NAME, WARNING,
                          f"{entry.slow} {api_name} exchange(s) with broker {broker} took "
                          f"{self.t.slow_ms:g} ms or more beyond their wait (slowest {worst[0][3]:.0f} ms; "
                          f"p50 {lat.percentile(50):.1f} ms, p99 {lat.percentile(99):.1f} ms)",
                          [e for _, _, e, _ in worst], broker=broker, api_name=api_name, slow=entry.slow,
                          count=lat.count, latency_p50_ms=lat.percentile(50), latency_p99_ms=lat.percentile(99),
                          latency_max_ms=lat.largest,
                          slowest=[{"latency_ms": l, "excess_ms": round(x, 3), **e} for x, _, e, l in worst])
