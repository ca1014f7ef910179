"""decode --summary's keys and values by schema (decode/schema_counts.py), on the capture of real
confluent-kafka serializers: against the lab's own record of what was serialized, and against
decode --json's per-record key_schema/value_schema fields, counted here on their own."""

from __future__ import annotations

import json
from collections import Counter

from kinspect.decode import schema_counts
from kinspect.decode.summary import Summary
from tests.unit.schemas.fixtures import CAPTURE, json_lines, kinspect, manifest

WRONG_7 = '{"type": "fixed", "name": "Wrong", "size": 1000}'  # longer than any value id 7 framed


def schema_dir(tmp_path):
    """Schema files named by id: 6 as registered, 7 a schema its values cannot fill; the rest
    of the ids unknown (the capture's own _schemas records are not read: --schemas-topic nope)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for record in manifest()["registry_records"]:
        value = record["value"]
        if record["key"].get("keytype") == "SCHEMA" and value and value["id"] == 6:
            (tmp_path / "6.json").write_text(value["schema"])
    (tmp_path / "7.avsc").write_text(WRONG_7)
    return tmp_path


def counted(lines: list[dict]) -> Counter:
    """(api, side, id or guid, subject, format, outcome) -> records, from decode --json's lines."""
    found = Counter()
    for line in lines:
        if line.get("type") != "exchange":
            continue
        body, topics, parts = ((line["request"], "topic_data", "partition_data") if line["api_key"] == 0 else
                               (line["response"], "responses", "partitions") if line["api_key"] == 1 else
                               (None, None, None))
        for topic in (body or {}).get(topics) or ():
            for part in topic[parts]:
                for batch in part.get("records") or ():
                    for record in batch.get("records") or ():
                        for side in ("key", "value"):
                            about = record.get(f"{side}_schema")
                            if about is None:
                                continue
                            result = ("unknown" if about.get("found") is False else
                                      "failed" if "error" in about else "decoded")
                            found[(line["api_name"], side, about.get("id") or about.get("guid"),
                                   about.get("subject"), about.get("format"), result)] += 1
    return found


def summary_counts(rows: list[dict]) -> Counter:
    found = Counter()
    for row in rows:
        if row["type"] == "summary_schema":
            assert row["records"] == row["decoded"] + row["unknown"] + row["failed"]
            for result in ("decoded", "unknown", "failed"):
                if row[result]:
                    found[(row["api_name"], row["side"], row["id"] if row["id"] is not None else row["guid"],
                           row["subject"], row["format"], result)] += row[result]
    return found


def _run(*args) -> list[dict]:
    done = kinspect("decode", "--json", *args, CAPTURE)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)


def test_summary_counts_every_value_as_the_lab_serialized_it():
    rows = _run("--summary")
    assert summary_counts(rows) == counted(_run())
    ids = {}  # (subject, format) -> id: a subject may hold an Avro and a Protobuf schema
    for record in manifest()["registry_records"]:
        value = record["value"]
        if record["key"].get("keytype") == "SCHEMA" and value:
            ids[(value["subject"], (value.get("schemaType") or "AVRO").lower())] = value["id"]
    serialized = Counter()
    for record in manifest()["records"]:
        if record.get("subject"):
            serialized[("value", ids[(record["subject"], record["format"])])] += 1
        if record.get("key_subject"):
            serialized[("key", ids[(record["key_subject"], record["key_format"])])] += 1
    produced = Counter()
    for row in rows:
        if row["type"] == "summary_schema" and row["api_name"] == "Produce":
            assert row["decoded"] == row["records"] and row["subject"] and row["format"]
            produced[(row["side"], row["id"])] += row["records"]
    assert produced == serialized and sum(serialized.values()) == 48


def test_summary_counts_unknown_ids_and_values_that_do_not_decode(tmp_path):
    args = ("--schemas", schema_dir(tmp_path), "--schemas-topic", "nope")
    rows = _run("--summary", *args)
    found = summary_counts(rows)
    assert found == counted(_run(*args))
    outcomes = Counter()
    for (_, _, _, _, _, result), n in found.items():
        outcomes[result] += n
    assert outcomes == {"decoded": 12, "unknown": 80, "failed": 4}
    assert found[("Produce", "value", 7, "7.avsc", "avro", "failed")] == 2
    assert found[("Produce", "value", 3, None, None, "unknown")] == 6
    # the counts come back from worker processes too
    assert [r for r in _run("--summary", "-j2", *args) if r["type"] == "summary_schema"] == \
        [r for r in rows if r["type"] == "summary_schema"]


def test_summary_text_has_the_table(tmp_path):
    done = kinspect("decode", "--summary", "--schemas", schema_dir(tmp_path), "--schemas-topic", "nope", CAPTURE)
    assert done.returncode == 0, done.stderr
    table = done.stdout.split("Keys and values by schema", 1)[1].splitlines()
    assert table[1].split() == ["api_name", "side", "subject", "id", "format", "records", "decoded", "unknown",
                                "failed"]
    assert "Produce value 7.avsc 7 avro 2 0 0 2".split() in [line.split() for line in table]


def _exchange(api_key, abouts, api_name="Produce"):
    records = [{"offset": n, "value": b"x", "value_schema": about} for n, about in enumerate(abouts)]
    body = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": [{"records": records}]}]}]}
    return {"type": "exchange", "api_key": api_key, "api_name": api_name, "api_version": 9, "latency_ms": 1.0,
            "error_codes": [], "request": body, "response": None}


def test_rows_past_the_bound_count_as_others(monkeypatch):
    monkeypatch.setattr(schema_counts, "SCHEMA_KEYS", 3)
    totals = Summary()
    totals.add(_exchange(0, [{"id": n, "found": False} for n in range(10)]))
    rows = totals.schema_rows()
    assert len(rows) == 4
    others = [r for r in rows if r["subject"] == schema_counts.OTHERS]
    assert others[0]["records"] == others[0]["unknown"] == 7


def test_tally_keeps_the_counts_for_a_summary_without_bodies():
    exchange = _exchange(0, [{"id": 1, "format": "avro", "subject": "s"},
                             {"id": 1, "format": "avro", "subject": "s", "error": "cut", "offset": 3},
                             {"guid": "ab-cd", "found": False}])
    schema_counts.tally(exchange)
    slim = {k: v for k, v in exchange.items() if k not in ("request", "response")}
    totals = Summary()
    totals.add(json.loads(json.dumps(slim)) | {"_schemas": exchange["_schemas"]})
    rows = totals.schema_rows()
    assert [(r["id"], r.get("guid"), r["decoded"], r["unknown"], r["failed"]) for r in rows] == \
        [(None, "ab-cd", 0, 1, 0), (1, None, 1, 0, 1)]


def test_the_text_table_shows_the_rows_of_most_records_with_subjects_cut(tmp_path):
    from kinspect.cli.exchanges import SCHEMA_ROWS_SHOWN, SUBJECT_SHOWN
    from tests.hostile.inputs_report_schemas import SUBJECT_LENGTH, html_subjects

    capture = html_subjects(tmp_path, SCHEMA_ROWS_SHOWN)  # ids 1..1000 two values each, 1001 one
    done = kinspect("decode", "--summary", capture)
    assert done.returncode == 0, done.stderr
    table = done.stdout.split("Keys and values by schema", 1)[1].splitlines()
    assert "1 more rows of fewer records (--json lists them all)" in table
    rows = [line for line in table if line.startswith("Produce")]
    assert len(rows) == SCHEMA_ROWS_SHOWN and not any(" 1001 " in line for line in rows)
    cut = f"… ({SUBJECT_LENGTH - SUBJECT_SHOWN} more characters)"
    assert sum(cut in line for line in table) == SCHEMA_ROWS_SHOWN
    every = [r for r in _run_on(capture) if r["type"] == "summary_schema"]
    assert len(every) == SCHEMA_ROWS_SHOWN + 1 and max(len(r["subject"] or "") for r in every) == SUBJECT_LENGTH


def _run_on(capture) -> list[dict]:
    done = kinspect("decode", "--summary", "--json", capture)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)
