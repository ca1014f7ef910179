"""decode --summary: per-API counts, latency percentiles, bytes, errors by code and topic, and
keys and values by schema (decode/schema_counts.py)."""

from __future__ import annotations

import math
from array import array
from collections import Counter, defaultdict

from kinspect.decode.filters import topics_of
from kinspect.decode.schema_counts import SchemaCounts

EXACT_LATENCIES = 1_000_000  # per API; past them, a histogram of 0.1% wide buckets
BOUND_NOTICES = frozenset({"expired"})  # notices that say a bound cut something
ERROR_KEYS = 10_000          # (api, error, topic) rows; past them, new topics count as "(others)"
_STEP = math.log(1.001)


def percentile(sorted_values, q: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


class Latencies:
    """Latencies of one API: every value while there are few, then a histogram whose buckets
    are 0.1% wide, so memory stays bounded whatever the number of exchanges."""

    __slots__ = ("values", "buckets", "count", "largest")

    def __init__(self):
        self.values: array | None = array("d")
        self.buckets: Counter = Counter()
        self.count = 0
        self.largest = None

    def add(self, ms: float) -> None:
        self.count += 1
        self.largest = ms if self.largest is None or ms > self.largest else self.largest
        if self.values is not None:
            self.values.append(ms)
            if len(self.values) > EXACT_LATENCIES:
                for value in self.values:
                    self.buckets[self._bucket(value)] += 1
                self.values = None
        else:
            self.buckets[self._bucket(ms)] += 1

    @staticmethod
    def _bucket(ms: float) -> int:
        return -1 if ms <= 0 else round(math.log(ms * 1000 + 1) / _STEP)

    @property
    def exact(self) -> bool:
        return self.values is not None

    def percentile(self, q: float) -> float | None:
        if self.values is not None:
            return percentile(sorted(self.values), q)
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for bucket in sorted(self.buckets):
            seen += self.buckets[bucket]
            if seen >= rank:
                return 0.0 if bucket < 0 else round((math.exp(bucket * _STEP) - 1) / 1000, 3)
        return self.largest


class Summary:
    def __init__(self):
        self.count = Counter()
        self.versions: dict[str, set] = defaultdict(set)
        self.latencies: dict[str, Latencies] = defaultdict(Latencies)
        self.bytes = Counter()
        self.unanswered = Counter()
        self.errors = Counter()          # (api, error name, topic or "-") → count
        self.notices = Counter()
        self.bounds: dict[str, str] = {}  # notice kind → its first text, for kinds a bound causes
        self.orphans = 0
        self.schemas = SchemaCounts()    # keys and values by API, side and schema

    def add(self, record: dict) -> None:
        kind = record.get("type")
        if kind == "notice":
            # a notice standing for more of its kind (pipeline.NOTICES_AT_ONCE) counts them all
            if record.get("kind") == "orphan_response":  # the responses with no request it counts
                self.orphans += record.get("more", 1)
                return
            self.notices[record.get("kind", "notice")] += record.get("more", 1)
            if record.get("kind") in BOUND_NOTICES:
                self.bounds.setdefault(record["kind"], record.get("what", ""))
            return
        if kind == "orphan_response":
            self.orphans += 1
            return
        api = record["api_name"]
        self.count[api] += 1
        self.versions[api].add(record["api_version"])
        self.bytes[api] += (record.get("request_size") or 0) + (record.get("response_size") or 0)
        if record.get("latency_ms") is not None:
            self.latencies[api].add(record["latency_ms"])
        elif record.get("response_expected", True):
            self.unanswered[api] += 1
        self.schemas.add(record)
        if record["error_codes"]:
            topics = record.get("_topics")
            if topics is None:
                topics = sorted(topics_of(record))
            topics = topics or ["-"]
            for code in record["error_codes"]:
                for topic in topics:
                    key = (api, code, topic)
                    if key not in self.errors and len(self.errors) >= ERROR_KEYS:
                        key = (api, code, "(others)")
                    self.errors[key] += 1

    def rows(self) -> list[dict]:
        rows = []
        for api, count in sorted(self.count.items(), key=lambda kv: -kv[1]):
            lat = self.latencies[api]
            row = {
                "type": "summary", "api_name": api, "versions": sorted(self.versions[api]),
                "count": count, "answered": lat.count, "unanswered": self.unanswered[api],
                "latency_p50_ms": lat.percentile(50), "latency_p99_ms": lat.percentile(99),
                "latency_max_ms": lat.largest, "bytes": self.bytes[api],
            }
            if not lat.exact:
                row["latency_percentiles"] = "within 0.1%"
            rows.append(row)
        return rows

    def bound_rows(self) -> list[dict]:
        """Notices of a bound that cut something: how many, and the first one's words."""
        return [{"type": "summary_notice", "kind": kind, "count": self.notices[kind], "what": what}
                for kind, what in self.bounds.items()]

    def error_rows(self) -> list[dict]:
        return [{"type": "summary_error", "api_name": api, "error": code, "topic": topic, "count": n}
                for (api, code, topic), n in sorted(self.errors.items(), key=lambda kv: -kv[1])]

    def schema_rows(self) -> list[dict]:
        """Keys and values by API, side and schema: records decoded, with an unknown id, failed."""
        return self.schemas.rows()
