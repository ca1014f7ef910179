"""rows.py and task.py: the exchanges rows of each capture equal, field by field, decode --json's lines."""

import json
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kinspect.spark.plan import Input, Unit
from kinspect.spark.rows import EXCHANGES, FILE_COLUMNS, FILES, TASK
from kinspect.spark.task import file_rows, unit_batches
from tests.conftest import PCAPS, REALDATA

CAPTURES = sorted(p for p in PCAPS.iterdir() if p.suffix in (".pcap", ".pcapng")) + \
    [REALDATA / "arkime/kafka.pcap", REALDATA / "go-sniffer/kafka.pcap", REALDATA / "ndpi/kafka.pcapng"]

SAME = {"conn": "conn", "api_key": "api_key", "api_name": "api_name", "api_version": "api_version",
        "correlation_id": "correlation_id", "client_id": "client_id", "request_time": "request_time",
        "response_time": "response_time", "latency_ms": "latency_ms", "request_size": "request_size",
        "response_size": "response_size", "error_codes": "error_codes"}


def _decode_json(capture) -> list[tuple[dict, str]]:
    out = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", str(capture)],
                         capture_output=True, check=False).stdout.decode()
    return [(json.loads(line), line) for line in out.splitlines()]


def _legacy_records(value) -> int:
    """Records of the magic 0/1 messages in a JSON body (their expanded records)."""
    if isinstance(value, dict):
        if value.get("magic") in (0, 1) and "position" in value:
            return len(value.get("records") or [])
        return sum(_legacy_records(v) for v in value.values())
    if isinstance(value, list):
        return sum(_legacy_records(v) for v in value)
    return 0


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_rows_equal_decode_json_field_by_field(capture):
    lines = [(r, text) for r, text in _decode_json(capture) if r["type"] == "exchange"]
    rows = [r for r in file_rows(Input(str(capture), capture.stat().st_size)) if r["table"] == "exchanges"]
    assert len(rows) == len(lines) > 0
    for row, (line, text) in zip(rows, lines):
        assert row["capture"] == str(capture)
        assert row["response_expected"] is line.get("response_expected", True)
        for column, key in SAME.items():
            assert row[column] == line[key], (column, text[:200])
        # from the line's text, not its structure: batches carry "position", and only they
        # (and legacy messages) "compression"; strings in values are escaped (\")
        assert row["batches"] == text.count('"position":')
        assert row["codecs"] == sorted(set(re.findall(r'"compression":"(\w+)"', text)))
        v2 = sum(int(n) for n in re.findall(r'"records_count":(\d+)', text))
        assert row["records"] == v2 + _legacy_records(line["request"]) + _legacy_records(line["response"])
        assert [(p["severity"], p["what"], p["path"], p["offset"]) for p in row["problems"]] == \
            [(p["severity"], p["what"], p["path"], p["offset"]) for p in line["problems"]]
        named = {m for m in re.findall(r'"(?:name|topic)":"([^"\\]*)"', text)}
        assert set(row["topics"]) <= named
        entries = [t for body in (line["request"], line["response"]) if isinstance(body, dict)
                   for value in body.values() if isinstance(value, list)
                   for t in value if isinstance(t, dict) and isinstance(t.get("topic_id"), str)
                   and t["topic_id"] != "00000000-0000-0000-0000-000000000000"]
        assert row["topic_ids"] == sorted({t["topic_id"] for t in entries if t.get("name") is None
                                           and t.get("topic") is None and t.get("topic_name") is None})
        assert row["named_ids"] == [{"topic_id": i, "name": n} for i, n in
                                    sorted({(t["topic_id"], t["name"]) for t in entries if isinstance(t.get("name"), str)})]


def test_rows_of_a_known_produce_and_fetch():
    """Hand-checked against decode -v of the README's sample capture."""
    capture = PCAPS / "librdkafka-produce-consume.pcapng"
    rows = [r for r in file_rows(Input(str(capture), 0)) if r["table"] == "exchanges"]
    produce = next(r for r in rows if r["api_name"] == "Produce" and r["correlation_id"] == 2
                   and r["conn"] == "127.0.0.1:32992-127.0.0.1:42347")
    assert (produce["topics"], produce["partitions"], produce["batches"], produce["records"], produce["codecs"]) == \
        (["lab-librdkafka"], 1, 1, 2, ["none"])
    fetch = [r for r in rows if r["api_name"] == "Fetch" and r["records"]]
    assert fetch and all(r["topics"] == ["lab-librdkafka"] for r in fetch)
    assert {c for r in rows for c in r["codecs"]} >= {"none"}


def test_files_row_counts_the_file_and_a_garbage_file_gets_an_error(tmp_path):
    capture = PCAPS / "librdkafka-mtu1500.pcap"
    rows = list(file_rows(Input(str(capture), capture.stat().st_size)))
    last = rows[-1]
    assert last["table"] == "files" and all(r["table"] == "exchanges" for r in rows[:-1])
    assert last["file_exchanges"] == len(rows) - 1 and last["file_error"] is None
    assert last["file_packets"] > last["file_exchanges"] and last["file_bytes"] == capture.stat().st_size
    garbage = tmp_path / "garbage.pcap"
    garbage.write_bytes(b"this is not a capture at all\n" * 50)
    (row,) = file_rows(Input(str(garbage), 1450))
    assert row["table"] == "files" and row["file_exchanges"] == 0 and row["file_error"]


def test_a_truncated_capture_keeps_what_it_has_and_says_so(tmp_path):
    capture = PCAPS / "librdkafka-mtu1500.pcap"
    data = capture.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) // 2 + 7])
    rows = list(file_rows(Input(str(cut), 0)))
    whole = [r for r in file_rows(Input(str(capture), 0)) if r["table"] == "exchanges"]
    assert 0 < rows[-1]["file_exchanges"] < len(whole)
    assert rows[-1]["file_problems"] > 0 and rows[-1]["file_error"] is None


def test_unit_batches_follow_the_task_schema_in_small_batches():
    capture = PCAPS / "librdkafka-produce-consume.pcapng"
    unit = Unit((Input(str(capture), capture.stat().st_size),))
    batches = list(unit_batches(unit, size=16))
    assert all(b.schema == TASK and b.num_rows <= 16 for b in batches)
    table = pa.Table.from_batches(batches)
    exchanges = table.filter(pc.equal(table["table"], "exchanges"))
    assert exchanges.num_rows == sum(1 for r, _ in _decode_json(capture) if r["type"] == "exchange")
    assert set(EXCHANGES.names) <= set(TASK.names) and len(set(TASK.names)) == len(TASK.names)
    assert sorted(FILE_COLUMNS.values()) == sorted(FILES.names) and set(FILE_COLUMNS) <= set(TASK.names)


def test_shards_of_a_truncated_capture_count_its_problems_once(tmp_path):
    data = (PCAPS / "kafka39-legacy.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3 + 5])
    f = Input(str(cut), 0)
    whole = list(file_rows(f))
    shards = [list(file_rows(f, i, 3)) for i in range(3)]
    assert whole[-1]["file_problems"] > 0
    for column in ("file_problems", "file_exchanges"):
        assert sum(rows[-1][column] for rows in shards) == whole[-1][column]
    assert all(rows[-1]["file_packets"] == whole[-1]["file_packets"] for rows in shards)


def _json_bytes(value):
    if value is None:
        return None
    if isinstance(value, dict):
        return __import__("base64").b64decode(value["b64"])
    return value.encode()


def _json_records(capture, line: dict) -> list[tuple]:
    """decode --json's records of one exchange line, found by walking the whole JSON: any object
    with offset, timestamp, key, value and headers, under the nearest topic name and partition."""
    found = []

    def walk(value, side, topic, partition):
        if isinstance(value, dict):
            if {"offset", "timestamp", "key", "value", "headers"} <= value.keys():
                found.append((str(capture), line["conn"], line["api_name"], line["correlation_id"], side, topic,
                              partition, value["offset"], value["timestamp"], _json_bytes(value["key"]),
                              None if value["value"] is None else len(_json_bytes(value["value"])),
                              len(value["headers"])))
                return
            for key in ("name", "topic", "topic_name"):
                if isinstance(value.get(key), str) and any(k.startswith("partition") for k in value):
                    topic = value[key]
                    break
            for key in ("index", "partition_index", "partition"):
                if isinstance(value.get(key), int) and "records" in value:
                    partition = value[key]
                    break
            for item in value.values():
                walk(item, side, topic, partition)
        elif isinstance(value, list):
            for item in value:
                walk(item, side, topic, partition)

    walk(line["request"], "request", None, None)
    walk(line["response"], "response", None, None)
    return found


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_records_rows_equal_decode_json_records(capture):
    from kinspect.spark.rows import RECORD_COLUMNS, SCHEMA_COLUMNS
    expected = [rec for line, _ in _decode_json(capture) if line["type"] == "exchange"
                for rec in _json_records(capture, line)]
    rows = [r for r in file_rows(Input(str(capture), 0), records=True) if r["table"] == "records"]
    shown = [c for c in RECORD_COLUMNS if RECORD_COLUMNS[c] not in SCHEMA_COLUMNS]  # test_values.py's
    assert [tuple(r[c] for c in shown) for r in rows] == expected
    assert all(r[f"record_{c}"] is None for r in rows for c in SCHEMA_COLUMNS)  # no schemas asked for
    if "produce" in capture.name or "librdkafka" in capture.name:
        assert rows  # the lab's producer captures hold records


def test_records_table_schema_is_fixed():
    from kinspect.spark.rows import RECORD_COLUMNS, RECORDS
    assert RECORDS.names == ["capture", "conn", "api_name", "correlation_id", "side", "topic", "partition",
                             "offset", "timestamp", "key", "value_size", "header_count",
                             "key_json", "key_schema_id", "key_schema_format", "key_schema_subject",
                             "value_json", "value_schema_id", "value_schema_format", "value_schema_subject"]
    assert list(RECORD_COLUMNS.values()) == RECORDS.names and set(RECORD_COLUMNS) <= set(TASK.names)
    capture = PCAPS / "librdkafka-produce-consume.pcapng"
    rows = [r for r in file_rows(Input(str(capture), 0), records=True) if r["table"] == "records"]
    table = pa.Table.from_batches(list(unit_batches(Unit((Input(str(capture), 0),)), {"records": True})))
    assert table.filter(pc.equal(table["table"], "records")).num_rows == len(rows)
    produce = [r for r in rows if r["api_name"] == "Produce" and r["correlation_id"] == 2
               and r["conn"] == "127.0.0.1:32992-127.0.0.1:42347"]  # hand-checked with decode -v
    assert [(r["record_topic"], r["record_partition"], r["record_offset"], r["record_key"], r["record_value_size"],
             r["record_header_count"], r["record_side"]) for r in produce] == \
        [("lab-librdkafka", 1, 0, b"k1", 17, 0, "request"), ("lab-librdkafka", 1, 1, b"k3", 17, 2, "request")]


def test_file_table_sums_a_files_shards_and_puts_the_biggest_first():
    from kinspect.spark.rows import FILE_TABLE, file_table

    def row(path, size, shard, shards, packets, exchanges, problems, error=None, native=True):
        return {"table": "files", "capture": path, "file_bytes": size, "file_packets": packets,
                "file_exchanges": exchanges, "file_problems": problems, "file_error": error,
                "file_seconds": 0.5, "file_shard": shard, "file_shards": shards, "file_native": native,
                "file_python": "/usr/bin/python3"}
    table = file_table([row("b.pcap", 10, 0, 1, 7, 3, 0), row("big.pcap", 99, 1, 2, 50, 4, 0, native=False),
                        row("a.pcap", 10, 0, 1, 5, 2, 1, error="truncated"), row("big.pcap", 99, 0, 2, 50, 6, 2)])
    assert [r["path"] for r in table] == ["big.pcap", "a.pcap", "b.pcap"]
    assert all(list(r) == FILE_TABLE.names for r in table)
    assert table[0] == {"path": "big.pcap", "bytes": 99, "packets": 50, "exchanges": 10, "problems": 2,
                        "error": None, "seconds": 1.0, "shards": 2, "native": False, "python": "/usr/bin/python3"}
    assert table[1]["error"] == "truncated" and table[1]["problems"] == 1


def test_the_exchanges_columns_are_named_as_decode_json_names_its_fields():
    """request_size, not request_bytes: a column holding a decode --json field has its name."""
    exchange = next(r for r, _ in _decode_json(PCAPS / "librdkafka-mtu1500.pcap") if r["type"] == "exchange")
    shared = {name for name in EXCHANGES.names if name in exchange}
    assert {"conn", "api_key", "api_name", "api_version", "correlation_id", "client_id", "request_time",
            "response_time", "latency_ms", "request_size", "response_size", "error_codes"} <= shared
    assert not {"request_bytes", "response_bytes"} & set(EXCHANGES.names)
