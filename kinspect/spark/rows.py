"""The tables `kinspect spark` writes, as explicit Arrow schemas, and the rows of each.

An ``exchanges`` row is one exchange record of the decode pipeline (the record ``kinspect decode
--json`` writes as a line), flattened: its scalar fields as they are, and from its decoded bodies
the topics, the partitions, and the record batches. No Spark here: pyarrow only.

| column | from the exchange |
|---|---|
| capture | the input file's path |
| conn, api_key, api_name, api_version, correlation_id, client_id | as in decode --json |
| request_time, response_time | as in decode --json: seconds since the epoch, UTC (response null if none) |
| latency_ms | as in decode --json (null without a response) |
| response_expected | false for requests that get no response (Produce with acks=0), else true |
| request_size, response_size | as decode --json names them (frames with their length) |
| error_codes | as in decode --json: error names, each once |
| topics | topic names of the bodies' top-level topic lists, sorted (kinspect.decode.filters.topics_of) |
| topic_ids | ids of top-level topic entries named by id whose name this capture never learned (Fetch v13+, Produce v13+...): the summary names them from other captures |
| named_ids | (topic_id, name) pairs the bodies carry (Metadata, CreateTopics, DescribeTopicPartitions responses) |
| partitions | partition entries under the request's topics (the response's when the request names none) |
| batches, records | record batches (legacy messages count as batches) in both bodies, and their records |
| codecs | the batches' compression codecs, sorted, each once |
| problems | decode --json's problems: severity, what, path, offset |

A ``records`` row (with ``--records``) is one record of a record set in a body, decoded as decode
--json shows it (v2 batches and legacy magic 0/1 messages, decompressed; control records too):

| column | |
|---|---|
| capture, conn, api_name, correlation_id | the exchange it is in (join with exchanges on these) |
| side | "request" (Produce) or "response" (Fetch, ShareFetch, ...) |
| topic | the topic entry's name (Fetch v13+ topic ids resolved as decode does; null if unknown) |
| partition | the partition entry's index |
| offset, timestamp | the record's absolute offset, its timestamp in ms (null for magic 0) |
| key | the key's bytes (null for a null key) |
| value_size | the value's length in bytes (null for a null value: a tombstone) |
| header_count | the record's headers |
| key_json, value_json | with the option ``schemas`` (``--schemas``): the key or value decoded by its schema (Avro, Protobuf, JSON Schema; framed with a schema id), as the JSON text decode --json writes for it (secrets redacted unless show_secrets); null when no schema decoded it |
| key_schema_id, value_schema_id, key_schema_format, value_schema_format, key_schema_subject, value_schema_subject | decode --json's ``key_schema``/``value_schema``: the schema id of a framed key or value (also when it did not decode: an unknown id, a payload that does not read), its format (avro, protobuf, json) and subject when the schema is known |

A ``clients`` row (the option ``table`` "clients", ``--clients``) is one client of kinspect
clients --json --all over one capture file, with its ``capture``: the fields it writes, by the
same names (CLIENTS below).

A ``files`` row is one input (or one shard of one: ``shard`` of ``shards``; the job sums them):
path, bytes, packets, exchanges, problems, error (null, or why the file is no readable capture),
seconds (decoding it, summed over its shards), shards, and where it was decoded: ``native`` is
true when every C accelerator of kinspect.native loaded in the Python of each task that decoded
it (false: the pure-Python twins ran, several times slower), ``python`` that Python's
sys.executable (on a cluster with --package: the executor's ``.../environment/bin/python``).
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator

import pyarrow as pa

from kinspect.decode.filters import TOPIC_LISTS, topics_of
from kinspect.decode.shards import end_problems
from kinspect.wire.topics import NULL_TOPIC_ID

BATCH_ROWS = 4096  # rows per Arrow batch handed to Spark

_strings = pa.list_(pa.string())
PROBLEM = pa.struct([("severity", pa.string()), ("what", pa.string()), ("path", pa.string()),
                     ("offset", pa.int64())])

EXCHANGES = pa.schema([
    ("capture", pa.string()),
    ("conn", pa.string()),
    ("api_key", pa.int16()),
    ("api_name", pa.string()),
    ("api_version", pa.int16()),
    ("correlation_id", pa.int32()),
    ("client_id", pa.string()),
    ("request_time", pa.float64()),
    ("response_time", pa.float64()),
    ("latency_ms", pa.float64()),
    ("response_expected", pa.bool_()),
    ("request_size", pa.int64()),
    ("response_size", pa.int64()),
    ("error_codes", _strings),
    ("topics", _strings),
    ("topic_ids", _strings),
    ("named_ids", pa.list_(pa.struct([("topic_id", pa.string()), ("name", pa.string())]))),
    ("partitions", pa.int32()),
    ("batches", pa.int32()),
    ("records", pa.int64()),
    ("codecs", _strings),
    ("problems", pa.list_(PROBLEM)),
])

FILES = pa.schema([
    ("path", pa.string()),
    ("bytes", pa.int64()),
    ("packets", pa.int64()),
    ("exchanges", pa.int64()),
    ("problems", pa.int64()),
    ("error", pa.string()),
    ("seconds", pa.float64()),
    ("shard", pa.int32()),
    ("shards", pa.int32()),
    ("native", pa.bool_()),
    ("python", pa.string()),
    ("flows", pa.string()),  # a shard decoded by connection: its flows_report (pipeline.py), JSON
])

RECORDS = pa.schema([
    ("capture", pa.string()),
    ("conn", pa.string()),
    ("api_name", pa.string()),
    ("correlation_id", pa.int32()),
    ("side", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("key", pa.binary()),
    ("value_size", pa.int32()),
    ("header_count", pa.int32()),
    ("key_json", pa.string()),
    ("key_schema_id", pa.int32()),
    ("key_schema_format", pa.string()),
    ("key_schema_subject", pa.string()),
    ("value_json", pa.string()),
    ("value_schema_id", pa.int32()),
    ("value_schema_format", pa.string()),
    ("value_schema_subject", pa.string()),
])

# The records columns a schema fills (spark/values.py); null without one
SCHEMA_COLUMNS = tuple(f"{field}_{column}" for field in ("key", "value")
                       for column in ("json", "schema_id", "schema_format", "schema_subject"))
_NO_SCHEMA = {f"record_{name}": None for name in SCHEMA_COLUMNS}

# What a Spark task gives out: the three tables in one schema, told apart by ``table``
# ("exchanges", "files" or "records"); the other tables' columns are null. A files row's
# ``path`` is in ``capture``, its other columns under FILE_COLUMNS' names; a records row's
# exchange columns are the exchanges' own, the rest under RECORD_COLUMNS' names.
FILE_COLUMNS = {"capture": "path", **{f"file_{f.name}": f.name for f in FILES if f.name != "path"}}
_SHARED = ("capture", "conn", "api_name", "correlation_id")
RECORD_COLUMNS = {**{name: name for name in _SHARED},
                  **{f"record_{f.name}": f.name for f in RECORDS if f.name not in _SHARED}}
TASK = pa.schema([("table", pa.string())] + list(EXCHANGES) +
                 [pa.field(f"file_{f.name}", f.type) for f in FILES if f.name != "path"] +
                 [pa.field(f"record_{f.name}", f.type) for f in RECORDS if f.name not in _SHARED])


# The files table: a row per input, its shards' rows summed (every shard read the whole file)
FILE_TABLE = pa.schema([f for f in FILES if f.name not in ("shard", "flows")])

# A ``findings`` row: one finding of kinspect doctor's checks over one capture file (decoded whole):
# its check, severity and summary, the rest of its subject fields as JSON (group, topic, lag,
# series...: they differ by check), and the exchanges it names (doctor/finding.py).
FINDINGS = pa.schema([
    ("capture", pa.string()),
    ("check", pa.string()),
    ("severity", pa.string()),
    ("summary", pa.string()),
    ("details", pa.string()),
    ("evidence", pa.list_(pa.struct([("conn", pa.string()), ("correlation_id", pa.int32()),
                                     ("time", pa.float64())]))),
])

# A ``clients`` row: one client of kinspect clients' inventory (doctor/clients.py, its default
# bounds) over one capture file (decoded whole), the brokers' own clients too (``internal``):
# the fields kinspect clients --json --all writes, by the same names, ``errors`` a map of error
# name to count.
CLIENTS = pa.schema([
    ("capture", pa.string()),
    ("client_id", pa.string()),
    ("software_name", pa.string()),
    ("software_version", pa.string()),
    ("internal", pa.bool_()),
    ("addresses", _strings),
    ("brokers", _strings),
    ("connections", pa.int64()),
    ("requests", pa.int64()),
    ("apis", pa.list_(pa.struct([("api_key", pa.int16()), ("api_name", pa.string()),
                                 ("versions", pa.list_(pa.int16()))]))),
    ("kip896_ready", pa.bool_()),
    ("removed_versions", _strings),
    ("throttling_honoured", pa.bool_()),
    ("throttle_ms", pa.float64()),
    ("produced_topics", _strings),
    ("fetched_topics", _strings),
    ("errors", pa.map_(pa.string(), pa.int64())),
    ("first_seen", pa.float64()),
    ("last_seen", pa.float64()),
])

# Every table by the name the data source's option "table" gives it (source.py): the Parquet of
# `kinspect spark` and the data source take their columns from here alone. "task" is what a task
# gives out (all three in one schema).
TABLES = {"exchanges": EXCHANGES, "records": RECORDS, "files": FILE_TABLE, "findings": FINDINGS, "clients": CLIENTS,
          "task": TASK}


def client_row(capture: str, client: dict) -> dict:
    """The clients row of one row of doctor.clients.Inventory (as kinspect clients --json writes it)."""
    return {"capture": capture, **{name: client.get(name) for name in CLIENTS.names if name != "capture"}}


def finding_row(capture: str, finding: dict) -> dict:
    """The findings row of one of doctor's findings (a dict as doctor --json writes it)."""
    import json
    shown = ("type", "check", "severity", "summary", "evidence")
    return {"capture": capture, "check": finding["check"], "severity": finding["severity"],
            "summary": finding["summary"],
            "details": json.dumps({k: v for k, v in finding.items() if k not in shown}, sort_keys=True, default=str),
            "evidence": [{"conn": e.get("conn"), "correlation_id": e.get("correlation_id"), "time": e.get("time")}
                         for e in finding.get("evidence") or ()]}


def table_row(task_row: dict, table: str) -> dict | None:
    """A TASK row as a row of ``table`` (its columns under that table's names), or None when it
    belongs to another table. A files row here is one task's: the files table's row only when the
    file was decoded whole (source.py plans the files table so)."""
    kind = task_row["table"]
    if table == "task":
        return task_row
    if kind != table:
        return None
    if table == "files":
        return {name: task_row.get(task) for task, name in FILE_COLUMNS.items() if name in _FILE_TABLE_NAMES}
    if table == "records":
        return {name: task_row.get(task) for task, name in RECORD_COLUMNS.items()}
    return task_row


_FILE_TABLE_NAMES = frozenset(FILE_TABLE.names)


def file_table(task_rows) -> list[dict]:
    """The files table's rows (FILE_TABLE) from the tasks' files rows (TASK's FILE_COLUMNS),
    the biggest input first: per path, packets and shards the most, exchanges, problems and
    seconds summed, native only if every shard had it, an error if any shard had one. Shards
    decoded by connection left out the notices of connections open at the capture's end: the
    whole run's count of them is added (shards.end_problems)."""
    table: dict[str, dict] = {}
    reports: dict[str, list] = {}
    for task_row in task_rows:
        row = {name: task_row.get(task) for task, name in FILE_COLUMNS.items()}
        if row["flows"]:
            reports.setdefault(row["path"], []).append(json.loads(row["flows"]))
        seen = table.get(row["path"])
        if seen is None:
            table[row["path"]] = {name: row[name] for name in FILE_TABLE.names}
            continue
        for name, pick in (("packets", max), ("shards", max), ("exchanges", sum), ("problems", sum),
                           ("seconds", sum), ("native", min), ("error", max)):
            values = [v for v in (seen[name], row[name]) if v is not None]
            seen[name] = pick(values) if values else None
    for path, shards in reports.items():
        table[path]["problems"] += end_problems(shards)
    return sorted(table.values(), key=lambda r: (-(r["bytes"] or 0), r["path"]))


def _batches_in(value, out: list) -> None:
    """Record batches (and legacy messages) anywhere in a decoded body, not inside one another."""
    if type(value) is dict:
        if "magic" in value and "crc_valid" in value and "position" in value:
            out.append(value)
            return
        for item in value.values():
            if type(item) is dict or type(item) is list:
                _batches_in(item, out)
    elif type(value) is list:
        for item in value:
            if type(item) is dict or type(item) is list:
                _batches_in(item, out)


def _partitions(body) -> int:
    if type(body) is not dict:
        return 0
    n = 0
    for key in TOPIC_LISTS:
        topics = body.get(key)
        if type(topics) is list:
            for topic in topics:
                if type(topic) is dict:
                    for name, value in topic.items():
                        if name.startswith("partition") and type(value) is list:
                            n += len(value)
    return n


def _topic_ids(record: dict) -> tuple[list, list]:
    """(ids without a name, (id, name) pairs) of the bodies' top-level topic lists."""
    unnamed: set[str] = set()
    named: set[tuple[str, str]] = set()
    for body in (record.get("request"), record.get("response")):
        if type(body) is not dict:
            continue
        for value in body.values():
            if type(value) is not list or not value or type(value[0]) is not dict or "topic_id" not in value[0]:
                continue
            for topic in value:
                if type(topic) is not dict:
                    continue
                topic_id = topic.get("topic_id")
                if not isinstance(topic_id, str) or topic_id == NULL_TOPIC_ID:
                    continue
                name = _topic_name(topic)
                if name is None:
                    unnamed.add(topic_id)
                elif isinstance(topic.get("name"), str):  # carried by the body, not annotated
                    named.add((topic_id, name))
    return sorted(unnamed), [{"topic_id": i, "name": n} for i, n in sorted(named)]


def exchange_row(capture: str, record: dict) -> dict:
    """The exchanges row of one exchange record (its bodies decoded)."""
    request, response = record.get("request"), record.get("response")
    found: list = []
    _batches_in(request, found)
    _batches_in(response, found)
    unnamed, named = _topic_ids(record)
    records = 0
    for batch in found:
        count = batch.get("records_count")
        records += count if type(count) is int else len(batch.get("records") or ())
    return {
        "capture": capture, "conn": record["conn"], "api_key": record["api_key"],
        "api_name": record["api_name"], "api_version": record["api_version"],
        "correlation_id": record["correlation_id"], "client_id": record.get("client_id"),
        "request_time": record["request_time"], "response_time": record.get("response_time"),
        "latency_ms": record.get("latency_ms"),
        "response_expected": record.get("response_expected", True) is not False, "request_size": record.get("request_size"),
        "response_size": record.get("response_size"), "error_codes": list(record.get("error_codes") or ()),
        "topics": sorted(topics_of(record)), "topic_ids": unnamed, "named_ids": named,
        "partitions": _partitions(request) or _partitions(response),
        "batches": len(found), "records": records,
        "codecs": sorted({b["compression"] for b in found if b.get("compression")}),
        "problems": [{"severity": p.get("severity"), "what": p.get("what"), "path": p.get("path"),
                      "offset": p.get("offset")} for p in record.get("problems") or ()],
    }


def _topic_name(topic: dict):
    for key in ("name", "topic", "topic_name"):
        name = topic.get(key)
        if isinstance(name, str):
            return name
    return None


def _partition_index(partition: dict):
    for key in ("index", "partition_index", "partition"):
        value = partition.get(key)
        if type(value) is int:
            return value
    return None


def _batch_records(batch) -> Iterator[dict]:
    """The records of a v2 batch, or of a legacy message (its inner messages when a wrapper)."""
    if type(batch) is not dict:
        return
    for record in batch.get("records") or ():
        if type(record) is dict:
            yield record


def task_rows(capture: str, record: dict, records: bool, values=None) -> Iterator[dict]:
    """What a task gives out for one exchange: its exchanges row (marked with its table), then,
    with ``records``, its records rows (``values``: spark.values.FileValues, for the schema
    columns)."""
    row = exchange_row(capture, record)
    row["table"] = "exchanges"
    yield row
    if records:
        yield from record_rows(capture, record, values)


def record_rows(capture: str, record: dict, values=None) -> Iterator[dict]:
    """The records rows (RECORDS, under TASK's names) of one exchange record: every record in
    a record set of a partition entry of its bodies' top-level topic lists; with ``values``
    (spark.values.FileValues), their keys and values read by their schemas too."""
    for side in ("request", "response"):
        body = record.get(side)
        if type(body) is not dict:
            continue
        for key in TOPIC_LISTS:
            topics = body.get(key)
            if type(topics) is not list:
                continue
            for topic in topics:
                if type(topic) is not dict:
                    continue
                name = _topic_name(topic)
                for field, partitions in topic.items():
                    if not field.startswith("partition") or type(partitions) is not list:
                        continue
                    for partition in partitions:
                        if type(partition) is not dict or type(partition.get("records")) is not list:
                            continue
                        index = _partition_index(partition)
                        for batch in partition["records"]:
                            for r in _batch_records(batch):
                                value, headers = r.get("value"), r.get("headers")
                                key_bytes = r.get("key")
                                row = {"table": "records", "capture": capture, "conn": record["conn"],
                                       "api_name": record["api_name"], "correlation_id": record["correlation_id"],
                                       "record_side": side, "record_topic": name, "record_partition": index,
                                       "record_offset": r.get("offset"), "record_timestamp": r.get("timestamp"),
                                       "record_key": bytes(key_bytes) if key_bytes is not None else None,
                                       "record_value_size": len(value) if value is not None else None,
                                       "record_header_count": len(headers) if headers is not None else 0}
                                if values is None:
                                    row.update(_NO_SCHEMA)
                                else:
                                    for column, cell in values.columns(key_bytes, value, headers).items():
                                        row[f"record_{column}"] = cell
                                yield row


def arrow_batches(rows: Iterable[dict], schema: pa.Schema, size: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Rows (dicts, missing keys null) as Arrow batches of at most ``size`` rows."""
    held: list[dict] = []
    for row in rows:
        held.append(row)
        if len(held) >= size:
            yield pa.RecordBatch.from_pylist(held, schema=schema)
            held = []
    if held:
        yield pa.RecordBatch.from_pylist(held, schema=schema)
