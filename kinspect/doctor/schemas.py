"""schemas: keys and values framed with a schema id (Confluent's or Apicurio's framing) that
stayed bytes, by side and schema.

Severity: warning for those that did not decode against their schema (a producer wrote what
its schema does not describe, the schema found is not the one it was written with, or it does
not compile); info for ids no schema source knows (the traffic's own _schemas records, or
--schemas SOURCE, would decode them). Counted in Produce requests and Fetch responses alike
(a record produced and fetched counts twice); the brokers' own fetches are not counted."""

from __future__ import annotations

from kinspect.decode.schema_counts import DECODED, UNKNOWN, framed, outcome, schema_of
from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import is_internal
from kinspect.doctor.finding import EVIDENCE, INFO, WARNING, evidence, finding
from kinspect.doctor.options import DEFAULTS, Thresholds

NAME = "schemas"
TOPICS = 50  # topics named per finding
ERROR_TEXT = 300  # characters of the first decode error kept


class _Values:
    __slots__ = ("count", "subject", "format", "error", "offset", "first", "topics", "evidence")

    def __init__(self):
        self.count = 0
        self.subject = self.format = self.error = self.offset = self.first = None
        self.topics: dict = {}
        self.evidence: list = []


class Schemas:
    name = NAME
    apis = (0, 1)  # Produce requests, Fetch responses

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.values: Bounded[_Values] = Bounded("schemas", thresholds.max_state, _Values)

    @property
    def bounded(self):
        return [self.values]

    def exchange(self, record: dict) -> None:
        if is_internal(record):
            return
        for topic, partition, held, side, about in framed(record):
            result = outcome(about)
            if result == DECODED:
                continue
            ident, guid, subject, form = schema_of(about)
            entry = self.values.at((result, side, ident, guid))
            entry.count += 1
            if entry.first is None:
                entry.subject, entry.format = subject, form
                error = about.get("error")
                entry.error = None if error is None else str(error)[:ERROR_TEXT]
                entry.offset = about.get("offset")
                entry.first = {"api_name": record.get("api_name"), "topic": topic, "partition": partition,
                               "offset": held.get("offset")}
            if topic in entry.topics or len(entry.topics) < TOPICS:
                entry.topics[topic] = entry.topics.get(topic, 0) + 1
            seen = evidence(record)
            if len(entry.evidence) < EVIDENCE and seen not in entry.evidence:
                entry.evidence.append(seen)

    def finish(self, end: float):
        for (result, side, ident, guid), entry in self.values.items.items():
            name = f"schema id {ident}" if ident is not None else f"schema GUID {guid}"
            topics = sorted(entry.topics.items(), key=lambda item: -item[1])
            on = f" on {', '.join(str(t) for t, _ in topics[:3])}" if topics else ""
            if result == UNKNOWN:
                severity = INFO
                summary = (f"{entry.count} record {side}s framed with {name}{on} stayed bytes: no schema "
                           f"source knows the id (--schemas SOURCE names one)")
            else:
                severity = WARNING
                what = ", ".join(str(v) for v in (entry.subject, entry.format) if v is not None)
                summary = (f"{entry.count} record {side}s{on} did not decode against {name}"
                           f"{f' ({what})' if what else ''}: {entry.error}")
            yield finding(NAME, severity, summary, entry.evidence, outcome=result, side=side, schema_id=ident,
                          guid=guid, subject=entry.subject, format=entry.format, count=entry.count,
                          error=entry.error, payload_offset=entry.offset, first=entry.first,
                          topics=[{"topic": t, "count": n} for t, n in topics])
