"""Keys and values by schema: what the schema stage (schemas/stage.py) did to an exchange's
records, counted. decode --summary, doctor's schemas check and the report read these counts.

    for topic, partition, record, side, about in framed(exchange):   # side: "key" or "value"
        outcome(about)                       # "decoded", "unknown" (id only) or "failed"

A record's ``key_schema``/``value_schema`` (schemas/records.py) says which schema framed it:
``"found": false`` when no source knows the id, ``"error"`` when the payload did not read as
its schema (or the schema did not compile), else the value decoded. In --summary mode the
exchange reaches the Summary without its bodies, so ``tally`` (a finishing stage) leaves the
counts on it as ``_schemas`` first."""

from __future__ import annotations

from collections import Counter
from typing import Iterator

PRODUCE, FETCH = 0, 1
DECODED, UNKNOWN, FAILED = "decoded", "unknown", "failed"
OUTCOMES = (DECODED, UNKNOWN, FAILED)
SIDES = (("key", "key_schema"), ("value", "value_schema"))
SCHEMA_KEYS = 10_000  # (api, side, schema) rows; past them, new schemas count as "(others)"
OTHERS = "(others)"


def framed(exchange: dict) -> Iterator[tuple]:
    """(topic, partition, record, side, about) of every framed key and value of a Produce
    request's or a Fetch response's batches (records still packed as bytes held none)."""
    api = exchange.get("api_key")
    if api == PRODUCE:
        body, topics_key, parts_key, index_key = exchange.get("request"), "topic_data", "partition_data", "index"
    elif api == FETCH:
        body, topics_key, parts_key, index_key = exchange.get("response"), "responses", "partitions", "partition_index"
    else:
        return
    if not isinstance(body, dict):
        return
    for entry in body.get(topics_key) or ():
        if not isinstance(entry, dict):
            continue
        topic = entry.get("topic") or entry.get("name") or entry.get("topic_id")
        for part in entry.get(parts_key) or ():
            if not isinstance(part, dict) or not isinstance(part.get("records"), list):
                continue
            for batch in part["records"]:
                records = batch.get("records") if isinstance(batch, dict) else None
                if not isinstance(records, list):
                    continue
                for record in records:
                    if not isinstance(record, dict):
                        continue
                    for side, field in SIDES:
                        about = record.get(field)
                        if isinstance(about, dict):
                            yield topic, part.get(index_key), record, side, about


def outcome(about: dict) -> str:
    if about.get("found") is False:
        return UNKNOWN
    if about.get("error") is not None:
        return FAILED
    return DECODED


def schema_of(about: dict) -> tuple:
    """(id, guid when there is no id, subject, format): the schema a count is kept under."""
    ident = about.get("id")
    return ident, about.get("guid") if ident is None else None, about.get("subject"), about.get("format")


def counts_of(exchange: dict) -> list:
    """[((side, schema_of, outcome), records), ...] of one exchange, from its bodies."""
    found = Counter((side, schema_of(about), outcome(about)) for _, _, _, side, about in framed(exchange))
    return list(found.items())


def tally(exchange: dict, topics=None, budget=None) -> None:
    """The finishing stage that keeps an exchange's counts on it (``_schemas``), for a Summary
    that sees it without its bodies (--summary mode); after the schema stage."""
    if exchange.get("api_key") in (PRODUCE, FETCH):
        exchange["_schemas"] = counts_of(exchange)


class SchemaCounts:
    """Keys and values by API, side and schema: records, and how many decoded, had an unknown
    id, or failed to decode. Past SCHEMA_KEYS rows, new schemas count under "(others)"."""

    def __init__(self):
        self.counts: dict[tuple, Counter] = {}

    def add(self, record: dict) -> None:
        found = record.get("_schemas")
        if found is None:
            if record.get("api_key") not in (PRODUCE, FETCH):
                return
            found = counts_of(record)
        api = record.get("api_name")
        for (side, schema, result), n in found:
            key = (api, side, schema)
            entry = self.counts.get(key)
            if entry is None:
                if len(self.counts) >= SCHEMA_KEYS:
                    key = (api, side, (None, None, OTHERS, None))
                entry = self.counts.setdefault(key, Counter())
            entry[result] += n

    def rows(self) -> list[dict]:
        rows = []
        for (api, side, (ident, guid, subject, form)), entry in self.counts.items():
            row = {"type": "summary_schema", "api_name": api, "side": side, "subject": subject, "id": ident,
                   "format": form, "records": sum(entry.values()),
                   **{result: entry[result] for result in OUTCOMES}}
            if guid is not None:
                row["guid"] = guid
            rows.append(row)
        return sorted(rows, key=lambda r: (r["api_name"] or "", r["side"], r["subject"] or "",
                                           r["id"] if r["id"] is not None else -1, r.get("guid") or ""))
