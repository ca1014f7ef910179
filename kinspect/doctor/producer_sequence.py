"""producer_sequence: the idempotent producer's errors (OUT_OF_ORDER_SEQUENCE_NUMBER,
DUPLICATE_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, PRODUCER_FENCED) per
producer id and partition, with the batches' sequence numbers that led up to them.

Severity: error for OUT_OF_ORDER_SEQUENCE_NUMBER (records may be lost or the producer stops);
warning for the others (a retry's duplicate, a fenced or expired producer)."""

from __future__ import annotations

from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import batch_count, batches, is_internal, topic_name
from kinspect.doctor.finding import ERROR, WARNING, evidence, finding
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.wire.apis import error_name

NAME = "producer_sequence"
PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN, TXN_OFFSET_COMMIT = 0, 22, 24, 26, 28
APIS = frozenset({PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN, TXN_OFFSET_COMMIT})
OUT_OF_ORDER, DUPLICATE, INVALID_EPOCH, UNKNOWN_PRODUCER, FENCED = 45, 46, 47, 59, 90
WATCHED = {OUT_OF_ORDER: ERROR, DUPLICATE: WARNING, INVALID_EPOCH: WARNING, UNKNOWN_PRODUCER: WARNING,
           FENCED: WARNING}
TIMELINE = 8  # batches remembered per producer and partition
STEP = ("time", "correlation_id", "api_name", "producer_epoch", "base_sequence", "last_sequence", "base_offset",
        "error")  # a timeline step's fields; kept as a tuple (100,000 producer partitions: 8 steps each)


class _Seen:
    __slots__ = ("timeline", "errors")

    def __init__(self):
        self.timeline: list = []
        self.errors: dict = {}  # error code -> {count, first: timeline copy, evidence: [...]}


class ProducerSequence:
    name = NAME
    apis = APIS

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.seen: Bounded[_Seen] = Bounded("producer partitions", thresholds.max_state, _Seen)

    @property
    def bounded(self):
        return [self.seen]

    def exchange(self, record: dict) -> None:
        if is_internal(record):
            return
        request = record.get("request") or {}
        response = record.get("response")
        if record["api_key"] == PRODUCE:
            self._produce(record, request, response)
            return
        error = (response or {}).get("error_code")
        producer_id = request.get("producer_id")
        if error in WATCHED and isinstance(producer_id, int) and producer_id >= 0:
            self._error(self.seen.at((producer_id, None, None)), error, record,
                        (record.get("request_time"), record.get("correlation_id"), record.get("api_name"),
                         request.get("producer_epoch"), None, None, None, error))

    def _produce(self, record, request, response) -> None:
        errors = {}
        for topic in (response or {}).get("responses") or ():
            for p in topic.get("partition_responses") or ():
                errors[(topic_name(topic), p.get("index"))] = p
        for topic in request.get("topic_data") or ():
            name = topic_name(topic)
            for p in topic.get("partition_data") or ():
                answer = errors.get((name, p.get("index"))) or {}
                for batch in batches(p.get("records")):
                    producer_id = batch.get("producer_id")
                    if not isinstance(producer_id, int) or producer_id < 0:
                        continue
                    seen = self.seen.at((producer_id, name, p.get("index")))
                    error = answer.get("error_code") or 0
                    base = batch.get("base_sequence")
                    step = (record.get("request_time"), record.get("correlation_id"), "Produce",
                            batch.get("producer_epoch"), base,
                            base + batch_count(batch) - 1 if isinstance(base, int) else None,
                            answer.get("base_offset"), error)
                    seen.timeline.append(step)
                    del seen.timeline[:-TIMELINE]
                    if error in WATCHED:
                        self._error(seen, error, record, None)

    def _error(self, seen: _Seen, error: int, record, step) -> None:
        if step is not None:
            seen.timeline.append(step)
            del seen.timeline[:-TIMELINE]
        known = seen.errors.get(error)
        if known is None:
            seen.errors[error] = {"count": 1, "timeline": list(seen.timeline), "evidence": [evidence(record)]}
        else:
            known["count"] += 1
            if len(known["evidence"]) < 5:
                known["evidence"].append(evidence(record))

    def finish(self, end: float):
        for (producer_id, topic, partition), seen in self.seen.items.items():
            for error, known in seen.errors.items():
                name = error_name(error)
                where = f" on {topic}-{partition}" if topic is not None else ""
                yield finding(NAME, WATCHED[error],
                              f"producer id {producer_id} got {name} {known['count']} time(s){where}",
                              known["evidence"], producer_id=producer_id, topic=topic, partition=partition,
                              error=name, count=known["count"], timeline=[_step(s) for s in known["timeline"]])


def _step(step: tuple) -> dict:
    out = dict(zip(STEP, step))
    out["error"] = error_name(out["error"]) if out["error"] else None
    return out
