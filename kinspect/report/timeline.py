"""Exchanges counted in time buckets: requests, bytes and latency per API and per broker, and
error codes, over the capture's time.

The bucket width starts at one second and doubles whenever the capture's span would need more
than ``MAX_BUCKETS`` buckets (the buckets merge pairwise), so a chart has at most that many
points per series, however long the capture. Per bucket and API the latencies are decode
--summary's own ``Latencies`` (exact values, or its 0.1%-wide histogram once the timeline holds
``EXACT_VALUES`` of them: memory stays bounded). Series past ``MAX_SERIES`` (the least busy
APIs, brokers or error codes) are counted as "(others)"."""

from __future__ import annotations

from collections import Counter

from kinspect.doctor.exchanges import ends
from kinspect.decode.summary import Latencies

MAX_BUCKETS = 240
MAX_SERIES = 16
EXACT_VALUES = 1_000_000
OTHERS = "(others)"


class _Bucket:
    __slots__ = ("requests", "bytes", "latencies", "broker_requests", "broker_bytes", "errors")

    def __init__(self):
        self.requests: Counter = Counter()
        self.bytes: Counter = Counter()
        self.latencies: dict[str, Latencies] = {}
        self.broker_requests: Counter = Counter()
        self.broker_bytes: Counter = Counter()
        self.errors: Counter = Counter()


class Timeline:
    def __init__(self, max_buckets: int = MAX_BUCKETS):
        self.max_buckets = max_buckets
        self.width = 1.0
        self.origin: float | None = None
        self.buckets: dict[int, _Bucket] = {}
        self.exact = 0            # latencies held as exact values, over every bucket
        self.totals = {"api": Counter(), "broker": Counter(), "error": Counter()}

    def add(self, record: dict) -> None:
        if record.get("type") != "exchange":
            return
        moment = record.get("request_time")
        if not isinstance(moment, (int, float)):
            return
        bucket = self._bucket(moment)
        api = record["api_name"]
        size = (record.get("request_size") or 0) + (record.get("response_size") or 0)
        broker = ends(record.get("conn"))[1] or "?"
        bucket.requests[api] += 1
        bucket.bytes[api] += size
        bucket.broker_requests[broker] += 1
        bucket.broker_bytes[broker] += size
        self.totals["api"][api] += 1
        self.totals["broker"][broker] += 1
        latency = record.get("latency_ms")
        if latency is not None:
            latencies = bucket.latencies.get(api)
            if latencies is None:
                latencies = bucket.latencies[api] = Latencies()
                if self.exact >= EXACT_VALUES:
                    latencies.values = None
            latencies.add(latency)
            if latencies.values is not None:
                self.exact += 1
                if self.exact >= EXACT_VALUES:
                    self._histograms()
        for code in record.get("error_codes") or ():
            bucket.errors[code] += 1
            self.totals["error"][code] += 1

    def _bucket(self, moment: float) -> _Bucket:
        if self.origin is None or moment < self.origin:
            self._rebase(moment)
        index = int((moment - self.origin) // self.width)
        while index >= self.max_buckets:
            self._widen()
            index = int((moment - self.origin) // self.width)
        bucket = self.buckets.get(index)
        if bucket is None:
            bucket = self.buckets[index] = _Bucket()
        return bucket

    def _rebase(self, moment: float) -> None:
        """An exchange before the origin (or the first): the origin moves back to a whole
        multiple of the width, and the buckets kept move up by as many as it moved."""
        origin = float(int(moment // self.width) * self.width)
        if self.origin is not None:
            shift = round((self.origin - origin) / self.width)
            self.buckets = {index + shift: b for index, b in self.buckets.items()}
            while self.buckets and max(self.buckets) >= self.max_buckets:
                self._widen()
        self.origin = origin

    def _widen(self) -> None:
        self.width *= 2
        merged: dict[int, _Bucket] = {}
        for index, bucket in sorted(self.buckets.items()):
            into = merged.get(index // 2)
            if into is None:
                merged[index // 2] = bucket
            else:
                _merge(into, bucket)
        self.buckets = merged

    def _histograms(self) -> None:
        for bucket in self.buckets.values():
            for latencies in bucket.latencies.values():
                _to_histogram(latencies)

    # -- what the charts show -------------------------------------------------------------

    def times(self) -> list[float]:
        """Each bucket's start, in seconds since the epoch, from the first to the last."""
        if not self.buckets:
            return []
        return [self.origin + i * self.width for i in range(min(self.buckets), max(self.buckets) + 1)]

    def _kept(self, kind: str) -> set:
        return {name for name, _ in self.totals[kind].most_common(MAX_SERIES - 1)} \
            if len(self.totals[kind]) > MAX_SERIES else set(self.totals[kind])

    def rates(self, field: str, kind: str) -> dict[str, list[float]]:
        """Per series name, the rate per second in each bucket (requests/s or bytes/s)."""
        kept = self._kept(kind)
        out: dict[str, list[float]] = {}
        indexes = range(min(self.buckets), max(self.buckets) + 1) if self.buckets else ()
        for position, index in enumerate(indexes):
            bucket = self.buckets.get(index)
            for name, n in (getattr(bucket, field).items() if bucket else ()):
                key = str(name) if name in kept else OTHERS
                out.setdefault(key, [0.0] * len(indexes))[position] += n / self.width
        return out

    def latency(self, q: float) -> dict[str, list[float | None]]:
        """Per API, the q-th percentile of the latencies answered in each bucket (None: none)."""
        kept = self._kept("api")
        indexes = range(min(self.buckets), max(self.buckets) + 1) if self.buckets else ()
        out: dict[str, list] = {}
        for position, index in enumerate(indexes):
            bucket = self.buckets.get(index)
            for api, latencies in (bucket.latencies.items() if bucket else ()):
                if api in kept:
                    out.setdefault(api, [None] * len(indexes))[position] = latencies.percentile(q)
        return out


def _merge(into: _Bucket, other: _Bucket) -> None:
    for field in ("requests", "bytes", "broker_requests", "broker_bytes", "errors"):
        getattr(into, field).update(getattr(other, field))
    for api, latencies in other.latencies.items():
        mine = into.latencies.get(api)
        if mine is None:
            into.latencies[api] = latencies
            continue
        if mine.values is not None and latencies.values is not None:
            mine.values.extend(latencies.values)
        else:
            _to_histogram(mine)
            _to_histogram(latencies)
            mine.buckets.update(latencies.buckets)
        mine.count += latencies.count
        if latencies.largest is not None and (mine.largest is None or latencies.largest > mine.largest):
            mine.largest = latencies.largest


def _to_histogram(latencies: Latencies) -> None:
    if latencies.values is not None:
        for value in latencies.values:
            latencies.buckets[Latencies._bucket(value)] += 1
        latencies.values = None
