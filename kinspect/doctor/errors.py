"""errors: error codes by API, error, topic and broker, naming the first exchanges of each.

Codes a healthy cluster answers in its normal course (a coordinator or leader moving or still
loading, a topic being created, a member asked to rejoin or to retry with its new id, a fetch
session renewed, concurrent transactions finishing) are info; every other code is a warning.
The brokers' own clients are not counted."""

from __future__ import annotations

from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import ends, is_internal
from kinspect.doctor.finding import INFO, WARNING, evidence, finding
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.decode.filters import topics_of

NAME = "errors"
ROUTINE = frozenset({
    "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID",
    "REBALANCE_IN_PROGRESS", "MEMBER_ID_REQUIRED", "FETCH_SESSION_ID_NOT_FOUND",
    "INVALID_FETCH_SESSION_EPOCH", "CONCURRENT_TRANSACTIONS", "OFFSET_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "TOPIC_ALREADY_EXISTS", "NOT_CONTROLLER", "GROUP_ID_NOT_FOUND", "UNSTABLE_OFFSET_COMMIT",
})
TOPICS = 50  # topics named per finding


class _Errors:
    __slots__ = ("count", "topics", "brokers", "evidence")

    def __init__(self):
        self.count = 0
        self.topics: dict = {}
        self.brokers: dict = {}
        self.evidence: list = []


class Errors:
    name = NAME
    apis = None

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.errors: Bounded[_Errors] = Bounded("API errors", thresholds.max_state, _Errors)

    @property
    def bounded(self):
        return [self.errors]

    def exchange(self, record: dict) -> None:
        codes = record.get("error_codes")
        if not codes or is_internal(record):
            return
        topics = topics_of(record) or {None}
        _, broker = ends(record.get("conn"))
        for code in set(codes):
            entry = self.errors.at((record.get("api_name"), code))
            entry.count += 1
            for topic in topics:
                if topic in entry.topics or len(entry.topics) < TOPICS:
                    entry.topics[topic] = entry.topics.get(topic, 0) + 1
            if broker in entry.brokers or len(entry.brokers) < TOPICS:
                entry.brokers[broker] = entry.brokers.get(broker, 0) + 1
            if len(entry.evidence) < 5:
                entry.evidence.append(evidence(record))

    def finish(self, end: float):
        for (api_name, code), entry in self.errors.items.items():
            severity = INFO if code in ROUTINE else WARNING
            topics = sorted(((t, n) for t, n in entry.topics.items() if t is not None), key=lambda i: -i[1])
            named = f" on {', '.join(str(t) for t, _ in topics[:3])}" if topics else ""
            yield finding(NAME, severity, f"{api_name} answered {code} {entry.count} time(s){named}",
                          entry.evidence, api_name=api_name, error=code, count=entry.count,
                          topics=[{"topic": t, "count": n} for t, n in topics],
                          brokers=[{"broker": b, "count": n} for b, n in
                                   sorted(entry.brokers.items(), key=lambda i: -i[1])])
