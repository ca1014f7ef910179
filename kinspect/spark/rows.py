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
| request_bytes, response_bytes | decode --json's request_size, response_size (frames with their length) |
| error_codes | as in decode --json: error names, each once |
| topics | topic names of the bodies' top-level topic lists, sorted (kinspect.filters.topics_of) |
| partitions | partition entries under the request's topics (the response's when the request names none) |
| batches, records | record batches (legacy messages count as batches) in both bodies, and their records |
| codecs | the batches' compression codecs, sorted, each once |
| problems | decode --json's problems: severity, what, path, offset |

A ``files`` row is one input (or one shard of one: ``shard`` of ``shards``; the job sums them):
path, bytes, packets, exchanges, problems, error (null, or why the file is no readable capture),
seconds (decoding it, summed over its shards), shards, and where it was decoded: ``native`` is
true when every C accelerator of kinspect.native loaded in the Python of each task that decoded
it (false: the pure-Python twins ran, several times slower), ``python`` that Python's
sys.executable (on a cluster with --package: the executor's ``.../environment/bin/python``).
"""

from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa

from kinspect.filters import TOPIC_LISTS, topics_of

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
    ("request_bytes", pa.int64()),
    ("response_bytes", pa.int64()),
    ("error_codes", _strings),
    ("topics", _strings),
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
])

# What a Spark task gives out: both tables in one schema, told apart by ``table``
# ("exchanges" or "files"); the other table's columns are null. A files row's ``path`` is in
# ``capture``, its other columns under FILE_COLUMNS' names.
FILE_COLUMNS = {"capture": "path", **{f"file_{f.name}": f.name for f in FILES if f.name != "path"}}
TASK = pa.schema([("table", pa.string())] + list(EXCHANGES) +
                 [pa.field(f"file_{f.name}", f.type) for f in FILES if f.name != "path"])


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


def exchange_row(capture: str, record: dict) -> dict:
    """The exchanges row of one exchange record (its bodies decoded)."""
    request, response = record.get("request"), record.get("response")
    found: list = []
    _batches_in(request, found)
    _batches_in(response, found)
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
        "response_expected": record.get("response_expected", True) is not False, "request_bytes": record.get("request_size"),
        "response_bytes": record.get("response_size"), "error_codes": list(record.get("error_codes") or ()),
        "topics": sorted(topics_of(record)),
        "partitions": _partitions(request) or _partitions(response),
        "batches": len(found), "records": records,
        "codecs": sorted({b["compression"] for b in found if b.get("compression")}),
        "problems": [{"severity": p.get("severity"), "what": p.get("what"), "path": p.get("path"),
                      "offset": p.get("offset")} for p in record.get("problems") or ()],
    }


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
