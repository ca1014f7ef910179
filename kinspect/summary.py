"""decode --summary: per-API counts, latency percentiles, bytes, and errors by code and topic."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from kinspect.filters import topics_of


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


class Summary:
    def __init__(self):
        self.count = Counter()
        self.versions: dict[str, set] = defaultdict(set)
        self.latencies: dict[str, list] = defaultdict(list)
        self.bytes = Counter()
        self.unanswered = Counter()
        self.errors = Counter()          # (api, error name, topic or "-") → count
        self.notices = Counter()
        self.orphans = 0

    def add(self, record: dict) -> None:
        kind = record.get("type")
        if kind == "notice":
            self.notices[record.get("kind", "notice")] += 1
            return
        if kind == "orphan_response":
            self.orphans += 1
            return
        api = record["api_name"]
        self.count[api] += 1
        self.versions[api].add(record["api_version"])
        self.bytes[api] += (record.get("request_size") or 0) + (record.get("response_size") or 0)
        if record.get("latency_ms") is not None:
            self.latencies[api].append(record["latency_ms"])
        elif record.get("response_expected", True):
            self.unanswered[api] += 1
        if record["error_codes"]:
            topics = record.get("_topics")
            if topics is None:
                topics = sorted(topics_of(record))
            topics = topics or ["-"]
            for code in record["error_codes"]:
                for topic in topics:
                    self.errors[(api, code, topic)] += 1

    def rows(self) -> list[dict]:
        rows = []
        for api, count in sorted(self.count.items(), key=lambda kv: -kv[1]):
            lat = sorted(self.latencies[api])
            rows.append({
                "type": "summary", "api_name": api, "versions": sorted(self.versions[api]),
                "count": count, "answered": len(lat), "unanswered": self.unanswered[api],
                "latency_p50_ms": percentile(lat, 50), "latency_p99_ms": percentile(lat, 99),
                "latency_max_ms": lat[-1] if lat else None, "bytes": self.bytes[api],
            })
        return rows

    def error_rows(self) -> list[dict]:
        return [{"type": "summary_error", "api_name": api, "error": code, "topic": topic, "count": n}
                for (api, code, topic), n in sorted(self.errors.items(), key=lambda kv: -kv[1])]
