"""From the capture alone: the registry's Produce requests to _schemas (and a reader's Fetch
responses) give the schemas; every value the clients produced decodes as it was serialized."""

from __future__ import annotations

import pytest

from kinspect.decode.pipeline import DecodeRun
from kinspect.schemas.capture import SchemaRecords, read_capture
from kinspect.schemas.records import apply_record
from kinspect.schemas.registry import SchemaStore
from kinspect.schemas.resolver import Schemas
from kinspect.schemas.sources import feed_records, read_log_dir
from tests.unit.schemas.fixtures import CAPTURE, DATA_TOPICS, LOGS, expected, manifest



def _exchanges():
    return list(DecodeRun(str(CAPTURE)).records())


def _data_records(exchanges):
    """(topic, offset, record) of every data record: Produce requests (offsets from their
    responses) and Fetch responses."""
    for exchange in exchanges:
        if exchange.get("type") != "exchange":
            continue
        if exchange["api_key"] == 0 and exchange["response"]:
            bases = {(t["name"], p["index"]): p["base_offset"]
                     for t in exchange["response"]["responses"] for p in t["partition_responses"]}
            for topic in exchange["request"]["topic_data"]:
                for part in topic["partition_data"]:
                    for batch in part["records"] or ():
                        for record in batch["records"]:
                            if topic["name"] in DATA_TOPICS:
                                yield "produce", topic["name"], bases[(topic["name"], part["index"])] + record["offset"], record
        elif exchange["api_key"] == 1 and exchange["response"]:
            for topic in exchange["response"]["responses"]:
                name = topic.get("topic") or topic.get("name")
                for part in topic["partitions"]:
                    for batch in part["records"] or ():
                        for record in batch["records"]:
                            if name in DATA_TOPICS:
                                yield "fetch", name, record["offset"], record


def test_the_capture_alone_decodes_every_value_as_serialized():
    exchanges = _exchanges()
    collected = SchemaRecords()
    for exchange in exchanges:
        collected.exchange(exchange)
    schemas = Schemas()
    feed_records(schemas.store, collected.records())
    want = expected()
    seen = {"produce": set(), "fetch": set()}
    for how, topic, offset, record in _data_records(exchanges):
        entry = want[(topic, offset)]
        framed = apply_record(record, schemas, show_secrets=True)
        seen[how].add((topic, offset))
        if entry["format"] is None:
            assert not framed
            continue
        about = record["value_schema"]
        assert about["format"] == entry["format"] and "error" not in about, (topic, offset, about)
        assert about.get("message") == entry.get("message")
        assert _shown(record["value"]) == entry["value"], (how, topic, offset)
        if entry.get("key_format"):
            assert record["key_schema"]["subject"] == entry["key_subject"]
            assert record["key"] == entry["key"]
    assert seen["produce"] == set(want) == seen["fetch"]
    assert schemas.problems() == []


def _shown(value):
    """bytes as the JSON output shows them (the manifest's form)."""
    from tests.lab.schema_clients import shown
    return shown(value)


def test_the_capture_and_the_log_dir_replay_to_the_same_registry():
    from_capture, from_logs = SchemaStore(), SchemaStore()
    assert read_capture(str(CAPTURE), from_capture) == len(manifest()["registry_records"])
    assert read_log_dir(LOGS, from_logs) == 1
    assert from_capture.ids() == from_logs.ids() == [1, 2, 3, 4, 5, 6, 7]
    for schema_id in from_logs.ids():
        a, b = from_capture.by_id(schema_id), from_logs.by_id(schema_id)
        assert (a.subject, a.version, a.text, a.references, a.deleted) == (
            b.subject, b.version, b.text, b.references, b.deleted)
    # the soft-deleted subject still resolves its id, marked deleted
    retired = from_logs.by_id(7)
    assert retired.subject == "lab-retired-value" and retired.deleted
    # what the lab registry wrote: NOOP, CONFIG, SCHEMA, DELETE_SUBJECT, all counted
    assert from_logs.counts == {"NOOP": 1, "CONFIG": 1, "SCHEMA": 10, "DELETE_SUBJECT": 1}
