"""values.py and the records table's schema columns, and the clients table's rows, without Spark:
on the lab's capture of confluent-kafka's real serializers (tests/data/schemas), every record's
key_json/value_json and schema columns are what kinspect decode --json writes for its key and
value; the clients rows are kinspect clients --json --all's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from kinspect.spark.plan import Input, Unit
from kinspect.spark.reading import clients_rows
from kinspect.spark.rows import CLIENTS, RECORDS, arrow_batches
from kinspect.spark.task import file_rows
from tests.conftest import PCAPS
from tests.unit.schemas.fixtures import CAPTURE, LOGS

OPTIONS = {"ports": {9092}, "heuristic": True, "records": True}
COLUMNS = ("json", "schema_id", "schema_format", "schema_subject")


def _kinspect(*args) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "kinspect", *map(str, args)], capture_output=True,
                         text=True, timeout=120)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def _decoded_records(capture, *flags) -> dict[tuple, dict]:
    """decode --json's records, by (conn, correlation id, side, topic, partition, offset)."""
    found = {}
    for line in _kinspect("decode", "--json", *flags, capture):
        if line.get("type") != "exchange":
            continue
        for side in ("request", "response"):
            body = line.get(side)
            if not isinstance(body, dict):
                continue
            for topics in (body.get(k) for k in ("topic_data", "responses", "topics")):
                for topic in topics if isinstance(topics, list) else ():
                    name = topic.get("name", topic.get("topic"))
                    for partition in topic.get("partition_data", topic.get("partitions")) or ():
                        index = partition.get("index", partition.get("partition_index"))
                        for batch in partition.get("records") or ():
                            for record in batch.get("records") or ():
                                found[line["conn"], line["correlation_id"], side, name, index,
                                      record["offset"]] = record
    return found


def _rows(capture, **options) -> dict[tuple, dict]:
    rows = file_rows(Input(str(capture), capture.stat().st_size, None), options={**OPTIONS, **options})
    return {(r["conn"], r["correlation_id"], r["record_side"], r["record_topic"], r["record_partition"],
             r["record_offset"]): {name: r[f"record_{name}"] for name in RECORDS.names if f"record_{name}" in r}
            for r in rows if r["table"] == "records"}


def _expected(record: dict) -> dict:
    """The schema columns decode --json's record says it should have."""
    columns = {}
    for field in ("key", "value"):
        about = record.get(f"{field}_schema") or {}
        decoded = bool(about) and about.get("found") is not False and "error" not in about
        columns.update({f"{field}_json": record[field] if decoded else None,
                        f"{field}_schema_id": about.get("id"), f"{field}_schema_format": about.get("format"),
                        f"{field}_schema_subject": about.get("subject")})
    return columns


def _got(row: dict) -> dict:
    got = {f"{field}_{c}": row[f"{field}_{c}"] for field in ("key", "value") for c in COLUMNS}
    for field in ("key", "value"):
        if got[f"{field}_json"] is not None:
            got[f"{field}_json"] = json.loads(got[f"{field}_json"])
    return got


def test_record_columns_equal_decode_json_with_the_captures_own_schemas():
    expected = _decoded_records(CAPTURE)
    rows = _rows(CAPTURE, schemas=[])
    assert rows.keys() == expected.keys()
    assert {k: _got(r) for k, r in rows.items()} == {k: _expected(r) for k, r in expected.items()}
    decoded = [r for r in rows.values() if r["value_json"] is not None]
    assert {r["value_schema_format"] for r in decoded} == {"avro", "protobuf", "json"}
    assert len(decoded) >= 60 and any(r["key_json"] is not None for r in rows.values())
    assert list(arrow_batches([{"table": "x", **{f"record_{k}": v for k, v in r.items()}} for r in rows.values()],
                              _task_schema()))  # the rows fit TASK's columns


def _task_schema():
    from kinspect.spark.rows import TASK
    return TASK


def test_without_the_option_or_with_raw_values_the_columns_are_null():
    for options in ({}, {"schemas": None}):
        rows = _rows(CAPTURE, **options)
        assert rows and all(r.get("value_json") is None and r.get("value_schema_id") is None for r in rows.values())


def test_schemas_sources_decode_what_the_capture_does_not_name(tmp_path):
    """A registry topic of another name, in a log dir given as a source: the capture never names it,
    so its values decode from the source alone (decode --schemas-topic --schemas gives the same)."""
    logs = tmp_path / "logs"
    shutil.copytree(LOGS / "_schemas-0", logs / "registry-0")
    expected = _decoded_records(CAPTURE, "--schemas", logs, "--schemas-topic", "registry")
    rows = _rows(CAPTURE, schemas=[str(logs)], schemas_topic="registry")
    assert {k: _got(r) for k, r in rows.items()} == {k: _expected(r) for k, r in expected.items()}
    assert sum(r["value_json"] is not None for r in rows.values()) >= 60
    assert all(r["value_json"] is None for r in _rows(CAPTURE, schemas=[], schemas_topic="registry").values())


def test_clients_rows_equal_kinspect_clients_all():
    for capture in (PCAPS / "java-transactions.pcap", PCAPS / "kafka39-legacy.pcap", CAPTURE):
        rows = list(clients_rows(Unit((Input(str(capture), 0, None),), 0, 1), dict(OPTIONS)))
        expected = [{k: v for k, v in line.items() if k != "type"} for line in _kinspect(
            "clients", "--json", "--all", capture) if line.get("type") == "client"]
        assert expected and [{k: v for k, v in r.items() if k != "capture"} for r in rows] == expected
        assert {r["capture"] for r in rows} == {str(capture)}
        table = [b.to_pylist() for b in arrow_batches(rows, CLIENTS)][0]  # the rows fit the schema
        assert [dict(r["errors"]) for r in table] == [r["errors"] for r in expected]


def test_the_data_source_options_say_what_the_tasks_get():
    from kinspect.spark import source_options as opts
    assert opts.schemas({}) == {"schemas": [], "schemas_topic": "_schemas"}
    assert opts.schemas({"schemas": "a,b", "schemas_topic": "registry"}) == {"schemas": ["a", "b"],
                                                                              "schemas_topic": "registry"}
    assert opts.schemas({"schemas": "a", "raw_values": "true"}) == {}
    opts.check_known({"schemas": "a", "schemas_topic": "t", "raw_values": "false", "table": "clients"})
    assert opts.table({"table": "clients"}) == "clients"


def test_a_tasks_scan_for_the_registry_topic_keeps_the_runs_gzip_bound(tmp_path, monkeypatch):
    """A task's first pass over a gzip'ed capture looks for the registry topic only as far as the
    task's decode may read (its limits), not to the end of a bomb: the name past the bound is
    not found, so no first pass reads it."""
    import gzip

    from kinspect.limits import Limits
    from kinspect.schemas import stage
    from kinspect.spark import values
    monkeypatch.setattr(stage, "CHUNK", 1 << 16)  # the scan's buffer, smaller than the bound
    passes = []
    monkeypatch.setattr(values, "read_capture", lambda path, *args, **options: passes.append(path))
    far = tmp_path / "far.pcap.gz"
    far.write_bytes(gzip.compress(bytes(4 << 20) + b"_schemas"))
    small = Limits(max_batch_bytes=1 << 20, max_file_ratio=2)
    values.FileValues.open([], "_schemas", str(far), {"limits": small})
    assert passes == []  # past the bound: no first pass
    values.FileValues.open([], "_schemas", str(far), {})
    assert passes == [str(far)]  # the default bound (64 MiB first) reaches the name
