"""Live figures over decoded exchanges, for the dashboard and the metrics endpoint.

Fed with the pipeline's output records (exchanges, orphan responses, notices) by any live adapter
(sniff now, the proxy later); it knows nothing of where they came from. The adapter also sets
the gauges only it can know: requests in flight and the capture's drop counters.

Memory is bounded: rates and latency percentiles come from the last ``WINDOW`` seconds, at most
``WINDOW_SAMPLES`` latencies per API; clients and topics past ``MAX_KEYS`` are counted under
"(others)". Totals since the start are kept for the metrics endpoint.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque

from kinspect.decode.filters import topics_of
from kinspect.decode.summary import percentile

WINDOW = 10.0           # seconds the rates and percentiles look back
WINDOW_SAMPLES = 20_000  # latencies kept per API within the window
MAX_KEYS = 1000          # distinct clients, topics, error rows
OTHERS = "(others)"


def _bounded_add(counter: Counter, key, n: int = 1) -> None:
    if key in counter or len(counter) < MAX_KEYS:
        counter[key] += n
    else:
        counter[OTHERS] += n


class LiveStats:
    """Thread-safe (the metrics endpoint reads from its own thread)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        self.requests = Counter()        # api name -> exchanges since the start
        self.unanswered = Counter()      # api name -> exchanges without a response
        self.errors = Counter()          # (api, error name) -> count
        self.client_bytes = Counter()    # client id -> request + response bytes
        self.topic_bytes = Counter()     # topic -> bytes of the exchanges naming it
        self.orphans = 0
        self.notices = Counter()         # notice kind -> count
        self.latency_sum = Counter()     # api -> total ms (for the metrics' mean)
        self._recent: dict[str, deque] = {}  # api -> deque of (time, latency ms or None)
        self.in_flight = 0
        self.packets = 0
        self.kernel_received: int | None = None
        self.kernel_dropped: int | None = None
        self.tcp_gaps = 0                # gap notices: bytes TCP lost

    def add(self, record: dict) -> None:
        kind = record.get("type")
        with self._lock:
            if kind == "exchange":
                self._exchange(record)
            elif kind == "orphan_response":
                self.orphans += 1
            elif kind == "notice" and record.get("kind") == "orphan_response":  # counts the rest of them
                self.orphans += record.get("more", 1)
            elif kind == "notice":  # one that counts the rest of its kind stands for them all
                self.notices[record.get("kind")] += record.get("more", 1)
                if record.get("kind") == "gap":
                    self.tcp_gaps += record.get("more", 1)

    def _exchange(self, e: dict) -> None:
        api = e["api_name"]
        self.requests[api] += 1
        latency = e.get("latency_ms")
        if e.get("response") is None and latency is None:
            if e.get("response_expected", True):  # Produce with acks=0 expects none
                self.unanswered[api] += 1
        else:
            self.latency_sum[api] += latency or 0.0
        recent = self._recent.get(api)
        if recent is None:
            recent = self._recent[api] = deque(maxlen=WINDOW_SAMPLES)
        recent.append((self.clock(), latency))
        for code in e.get("error_codes") or ():
            _bounded_add(self.errors, (api, str(code)))
        size = (e.get("request_size") or 0) + (e.get("response_size") or 0)
        _bounded_add(self.client_bytes, e.get("client_id") or "-", size)
        for topic in topics_of(e):
            _bounded_add(self.topic_bytes, topic, size)

    def set_capture(self, *, packets: int | None = None, received: int | None = None,
                    dropped: int | None = None, in_flight: int | None = None) -> None:
        with self._lock:
            if packets is not None:
                self.packets = packets
            if received is not None:
                self.kernel_received = received
            if dropped is not None:
                self.kernel_dropped = dropped
            if in_flight is not None:
                self.in_flight = in_flight

    def window(self) -> dict[str, dict]:
        """Per API over the last WINDOW seconds: requests/s, latency p50/p99 (ms)."""
        now = self.clock()
        span = min(WINDOW, max(now - self.started, 1e-3))
        rows = {}
        with self._lock:
            for api, recent in self._recent.items():
                while recent and recent[0][0] < now - WINDOW:
                    recent.popleft()
                latencies = sorted(ms for _, ms in recent if ms is not None)
                rows[api] = {"rate": len(recent) / span, "p50": percentile(latencies, 50),
                             "p99": percentile(latencies, 99), "count": self.requests[api]}
        return rows

    def snapshot(self) -> dict:
        """Everything at once, copied under the lock."""
        with self._lock:
            return {
                "requests": dict(self.requests), "unanswered": dict(self.unanswered),
                "errors": dict(self.errors), "clients": self.client_bytes.most_common(),
                "topics": self.topic_bytes.most_common(), "orphans": self.orphans,
                "notices": dict(self.notices), "latency_sum": dict(self.latency_sum),
                "in_flight": self.in_flight, "packets": self.packets,
                "kernel_received": self.kernel_received, "kernel_dropped": self.kernel_dropped,
                "tcp_gaps": self.tcp_gaps, "uptime": self.clock() - self.started,
            }
