"""Dump one broker file as a stream of events (dicts): the library behind `kinspect dump`.

    for event in dump_file("logs/t-0/00000000000000000000.log", buf, describe(path), options,
                           companion):
        ...

buf holds the file's bytes (an mmap is fine: segments are walked batch by batch); companion
(suffix) returns the bytes of the same segment's .log (for .index, .timeindex, .txnindex) or
None. Every file yields a "file" event first and a "summary" event last. Events keep bytes as
bytes: kinspect/render/ decides how to show them (dump_output.py). Problems are attached as
dicts (Problem.to_dict()) under "problems".

Secrets in KRaft metadata records (cluster_metadata.redact_secrets) are redacted in the events
unless show_secrets: in the decoded record, and in the raw value, which then becomes the text
"<redacted N bytes>" whole (whatever --decode or --no-internal asks, a value holds no secret).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kinspect.problems import ERROR, WARNING, Problem
from kinspect.records import batch as v2
from kinspect.limits import Limits
from kinspect.records.codecs import DEFAULT_MAX_OUTPUT, decompress
from kinspect.records.stream import RecordStream
from kinspect.storage import checkpoints, index, segment, snapshot, structs, txnindex
from kinspect.storage.cluster_metadata import decode_metadata_record, redact_secrets
from kinspect.storage.files import FileInfo
from kinspect.storage.offsets_records import decode_offsets_record
from kinspect.storage.share_state import decode_share_state_record
from kinspect.storage.transaction_state import decode_transaction_record
from kinspect.wire import secrets

RECORD_DECODERS = {  # (key, value) -> (decoded, problems)
    "__consumer_offsets": decode_offsets_record,
    "__transaction_state": decode_transaction_record,
    "__cluster_metadata": lambda key, value: decode_metadata_record(value),
    "__share_group_state": decode_share_state_record,
}
CONTROL_STRUCTS = {  # a control batch's type → the struct its records' values hold
    "SNAPSHOT_HEADER": "SnapshotHeaderRecord", "SNAPSHOT_FOOTER": "SnapshotFooterRecord",
    "KRAFT_VERSION": "KRaftVersionRecord", "KRAFT_VOTERS": "VotersRecord",
    "LEADER_CHANGE": "LeaderChangeMessage",
}
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

Companion = Callable[[str], object]


@dataclass(frozen=True)
class DumpOptions:
    records: bool = False        # each batch's records
    data: bool = False           # keys, values and headers (implies records)
    internal: bool = True        # decode __consumer_offsets, __transaction_state, metadata records
    checks: bool = True          # the record checks of kinspect.records.checks
    shallow: bool = False        # batch headers only: no CRC, no records (fastest)
    max_output: int = DEFAULT_MAX_OUTPUT
    limits: Limits | None = None  # the bounds of kinspect.limits (None: the defaults, max_output per batch)
    show_secrets: bool = False   # KRaft metadata records' secrets shown, not redacted
    values: Callable[[dict], object] | None = None  # with data: each record of a topic not decoded
    # by type, changed in place (kinspect.schemas.records.apply_record: schema-framed values)


def dump_file(display: str, buf, info: FileInfo, options: DumpOptions,
              companion: Companion) -> Iterator[dict]:
    head = {"type": "file", "file": display, "kind": info.kind, "size": len(buf)}
    for name in ("base_offset", "topic", "partition", "renamed", "directory_state"):
        value = getattr(info, name)
        if value is not None:
            head[name] = value
    if info.kind == "kraft_snapshot" and info.snapshot_epoch is not None:
        head["end_offset"], head["epoch"] = info.base_offset, info.snapshot_epoch
    yield head
    counts = Counts()
    dumper = _DUMPERS.get(info.kind)
    if dumper is None:
        counts.problem(Problem("not a file kinspect knows how to read", display, None, WARNING,
                               "file_kind"))
        yield {"type": "notice", "file": display, **counts.problems[-1].to_dict()}
    else:
        for event in dumper(display, buf, info, options, companion, counts):
            yield {"type": event["type"], "file": display, **event}
    yield counts.summary(display, info.kind)


class Counts:
    """What a file held and what went wrong, for its summary event."""

    def __init__(self):
        self.items = self.records = self.damaged = 0
        self.severities = {"error": 0, "warning": 0, "info": 0}
        self.checks: dict[str, int] = {}
        self.first_offset = self.last_offset = None
        self.problems: list[Problem] = []

    def problem(self, problem: Problem) -> None:
        self.problems.append(problem)

    def add(self, problems: list[Problem]) -> list[dict]:
        for p in problems:
            self.severities[p.severity] = self.severities.get(p.severity, 0) + 1
            if p.check:
                self.checks[p.check] = self.checks.get(p.check, 0) + 1
        return [p.to_dict() for p in problems]

    def summary(self, display: str, kind: str | None) -> dict:
        self.add(self.problems)
        out = {"type": "summary", "file": display, "kind": kind, "items": self.items,
               "problem_counts": dict(self.severities),
               "checks": dict(sorted(self.checks.items()))}
        if kind in ("log", "kraft_snapshot"):
            out.update(record_count=self.records, damaged_bytes=self.damaged,
                       first_offset=self.first_offset, last_offset=self.last_offset)
        return out


# -- segments and KRaft snapshots ---------------------------------------------------------------

def _dump_segment(display, buf, info, options, companion, counts) -> Iterator[dict]:
    decoder = RECORD_DECODERS.get(info.records_topic) if options.internal else None
    deep = not options.shallow
    ends = []  # a KRaft snapshot's first and last batch: (position, control type)
    for kind, item, problems in segment.walk_segment(buf, display, checks=options.checks,
                                                     decode=deep, max_output=options.limits or options.max_output):
        if kind != "batch":
            if kind == "damage":
                counts.damaged += item["size"]
            yield {"type": kind, **item, "problems": counts.add(problems)}
            continue
        event = batch_event(item) if deep else _shallow_event(item)
        counts.items += 1
        counts.records += event.get("count") or len(item.get("records") or ())
        first = event["base_offset"] if event["magic"] == 2 else _first_legacy(item)
        counts.first_offset = first if counts.first_offset is None else counts.first_offset
        counts.last_offset = event["last_offset"]
        if deep and (options.records or options.data):
            hide = (options.data and not options.show_secrets
                    and info.records_topic == "__cluster_metadata")
            values = options.values if options.data and decoder is None else None
            event["records"] = _records(buf, item, event, decoder if options.data else None,
                                        display, problems, options.max_output, hide, values)
        if info.kind == "kraft_snapshot":
            ends[1:] = [(event["position"], event.get("control", {}).get("type"))]
        event["problems"] = counts.add(problems)
        yield event
    if info.kind == "kraft_snapshot":
        for problem in _snapshot_frame(ends, display):
            yield {"type": "notice", **problem.to_dict()}
            counts.add([problem])


def batch_event(unit: dict) -> dict:
    """The header fields of a decoded unit, named as kafka-dump-log names them."""
    if unit["magic"] != 2:
        return {"type": "batch", "magic": unit["magic"], "position": unit["position"],
                "size": 12 + unit["message_size"], "last_offset": unit["offset"],
                "timestamp_type": unit["timestamp_type"], "max_timestamp": unit["timestamp"],
                "compression": unit["compression"], "crc": unit["crc"],
                "crc_valid": unit["crc_valid"], "attributes": unit["attributes"]}
    sequence = unit["base_sequence"]
    event = {"type": "batch", "magic": 2, "position": unit["position"],
             "size": 12 + unit["batch_length"], "base_offset": unit["base_offset"],
             "last_offset": unit["base_offset"] + unit["last_offset_delta"],
             "count": unit["records_count"], "base_sequence": sequence,
             "last_sequence": (NO_SEQUENCE if sequence == NO_SEQUENCE
                               else increment_sequence(sequence, unit["last_offset_delta"])),
             "producer_id": unit["producer_id"], "producer_epoch": unit["producer_epoch"],
             "partition_leader_epoch": unit["partition_leader_epoch"],
             "is_transactional": unit["is_transactional"], "is_control": unit["is_control"],
             "delete_horizon_ms": unit["base_timestamp"] if unit["has_delete_horizon"] else None,
             "timestamp_type": unit["timestamp_type"], "base_timestamp": unit["base_timestamp"],
             "max_timestamp": unit["max_timestamp"], "compression": unit["compression"],
             "crc": unit["crc"], "crc_valid": unit["crc_valid"], "attributes": unit["attributes"]}
    if "control" in unit:
        event["control"] = unit["control"]
    return event


def _shallow_event(header: dict) -> dict:
    return {"type": "batch", **header, "crc_valid": None}


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence arithmetic: sequences wrap from INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def _first_legacy(unit: dict) -> int:
    records = unit.get("records")
    return records[0]["offset"] if records else unit.get("offset", unit.get("last_offset"))


def _records(buf, unit: dict, event: dict, decoder, display: str, problems: list[Problem],
             max_output: int, hide: bool = False, values=None):
    """The unit's record dicts (its own, fresh per batch) with sizes, sequences, CRCs of
    legacy messages, a control record's value decoded as its struct ("control_value") and,
    with a decoder, the decoded internal record; hide: KRaft metadata
    records' secrets redacted; values: applied to each record after its sizes (schema-framed
    keys and values decoded). A batch too big to hold (a RecordStream) gets the same fields on
    each record as it is streamed out."""
    records = unit["records"]
    base_sequence, base_offset = event.get("base_sequence"), event.get("base_offset")
    is_control = event.get("is_control")
    decode = decoder is not None and not is_control
    hide = hide and not is_control
    values = None if is_control else values
    struct_name = is_control and CONTROL_STRUCTS.get((event.get("control") or {}).get("type"))
    control = _control_value(struct_name) if struct_name else None
    number = -1

    def sizes(record: dict) -> dict:
        _add_sizes((record,), unit["magic"] == 2, base_sequence, base_offset)
        return record

    def decoded(record: dict) -> dict:
        nonlocal number
        number += 1
        record["decoded"], decode_problems = decoder(record["key"], record["value"])
        where = f"{display} → batch at {event['position']} → records[{number}]"
        for p in decode_problems:
            p.path = f"{where} → {p.path}" if p.path else where
        problems.extend(decode_problems)
        return record

    if isinstance(records, RecordStream):  # a v2 batch, or a legacy wrapper's inner messages
        if unit["magic"] != 2:
            records = records.with_stored_crc().mapped(_no_timestamp_as_minus_one)
        records = records.mapped(sizes)
        records = records.mapped(decoded) if decode else records
        records = records.mapped(control) if control is not None else records
        records = records.mapped(_applied(values)) if values is not None else records
        return records.mapped(_hide_metadata_secrets) if hide else records
    _add_sizes(records, unit["magic"] == 2, base_sequence, base_offset)
    if unit["magic"] != 2:
        _legacy_fields(buf, unit, records, max_output)
    if decode:
        for record in records:
            decoded(record)
    if control is not None:
        for record in records:
            control(record)
    if values is not None:
        for record in records:
            values(record)
    if hide:
        for record in records:
            _hide_metadata_secrets(record)
    return records


def _add_sizes(records, v2: bool, base_sequence, base_offset) -> None:
    """Each record's key_size and value_size, and a v2 record's sequence, added in one loop per
    field over the batch (the hot path of dump --records)."""
    for record in records:
        key, value = record["key"], record["value"]
        record["key_size"] = -1 if key is None else len(key)
        record["value_size"] = -1 if value is None else len(value)
    if not v2:
        return
    if base_sequence == NO_SEQUENCE:
        for record in records:
            record["sequence"] = NO_SEQUENCE
    else:
        for record in records:
            record["sequence"] = increment_sequence(base_sequence, record["offset"] - base_offset)


def _control_value(name: str):
    """Decode a control record's value as the struct ``name``, at the version its first two bytes
    say (the nearest one kinspect knows): {"struct", "version", "data"}, as kafka-dump-log prints
    it. Faults are the batch's to report (records.control)."""
    low, high = structs.versions(name)

    def decode(record: dict) -> dict:
        value = record["value"]
        if value is not None and len(value) >= 2:
            version = min(max(int.from_bytes(value[:2], "big", signed=True), low), high)
            data, _ = structs.decode_struct(name, version, value)
            record["control_value"] = {"struct": name, "version": version, "data": data}
        return record
    return decode


def _applied(values):
    def apply(record: dict) -> dict:
        values(record)
        return record
    return apply


def _hide_metadata_secrets(record: dict) -> dict:
    """A metadata record's secrets redacted: decoded (decoding it for the check when --no-internal
    did not), and its raw value whole."""
    decoded = record.get("decoded")
    if decoded is None:
        decoded, _ = decode_metadata_record(record["value"])
    if redact_secrets(decoded):
        record["value"] = secrets.whole(record["value"])
    return record


def _no_timestamp_as_minus_one(record: dict) -> dict:
    if record["timestamp"] is None:
        record["timestamp"] = -1
    return record


def _legacy_fields(buf, unit: dict, records: list[dict], max_output: int) -> None:
    if unit["compression"] == "none":  # the message is its own record
        for record in records:
            record["crc_valid"], record["crc"] = unit["crc_valid"], unit["crc"]
    else:
        crcs = _inner_crcs(buf, unit, max_output)
        for number, record in enumerate(records):
            record["crc"] = crcs[number] if number < len(crcs) else None
    for record in records:
        if record["timestamp"] is None:
            record["timestamp"] = -1


_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def _inner_crcs(buf, unit: dict, max_output: int) -> list[int]:
    """The stored CRC-32 of each message inside a compressed legacy wrapper."""
    start = unit["position"]
    data = bytes(memoryview(buf)[start:start + 12 + unit["message_size"]])
    cursor = 18 + (8 if unit["magic"] == 1 else 0)
    if cursor + 4 > len(data):
        return []
    key_size = _I32.unpack_from(data, cursor)[0]
    cursor += 4 + max(key_size, 0)
    if cursor + 4 > len(data):  # a damaged key length: the decoder has said so
        return []
    value_size = _I32.unpack_from(data, cursor)[0]
    inner, _ = decompress(unit["attributes"] & 0x07, data[cursor + 4:cursor + 4 + value_size],
                          max_output, unit["magic"])
    crcs = []
    pos = 0
    while inner is not None and pos + 16 <= len(inner):
        crcs.append(_U32.unpack_from(inner, pos + 12)[0])
        size = _I32.unpack_from(inner, pos + 8)[0]
        if size < 0:  # damaged: the walk of the inner set stops here, as the decoder's did
            break
        pos += 12 + size
    return crcs


def _snapshot_frame(batches: list[tuple[int, str | None]], display: str) -> list[Problem]:
    """batches: the first and the last batch of the snapshot (one, if it has one)."""
    """A KRaft snapshot starts with a SnapshotHeader batch and ends with a SnapshotFooter."""
    problems = []
    if not batches or batches[0][1] != "SNAPSHOT_HEADER":
        problems.append(Problem("KRaft snapshot does not start with a SnapshotHeader control "
                                "batch", display, 0, ERROR, "kraft_snapshot"))
    if not batches or batches[-1][1] != "SNAPSHOT_FOOTER":
        at = batches[-1][0] if batches else 0
        problems.append(Problem("KRaft snapshot does not end with a SnapshotFooter control "
                                "batch (cut off?)", display, at, ERROR, "kraft_snapshot"))
    return problems


# -- indexes -----------------------------------------------------------------------------------

def _log_headers(log) -> Callable[[], Iterator[dict]] | None:
    if log is None:
        return None
    return lambda: (item for kind, item, _ in segment.walk_segment(log, decode=False)
                    if kind == "batch")


def _no_log(display: str, counts: Counts) -> Iterator[dict]:
    problem = Problem("no .log of the same segment beside it: entries are not checked against "
                      "the log", display, None, WARNING, "index_log")
    counts.add([problem])
    yield {"type": "notice", **problem.to_dict()}


def _dump_offset_index(display, buf, info, options, companion, counts) -> Iterator[dict]:
    log = companion(".log")
    if log is None:
        yield from _no_log(display, counts)
    checked = index.check_offset_index(buf, info.base_offset or 0, _log_headers(log), display,
                                       None if log is None else len(log))
    yield from _index_events(checked, "index_entry", counts)


def _dump_time_index(display, buf, info, options, companion, counts) -> Iterator[dict]:
    log = companion(".log")
    if log is None:
        yield from _no_log(display, counts)
    checked = index.check_time_index(buf, info.base_offset or 0, _log_headers(log), display)
    yield from _index_events(checked, "time_index_entry", counts)


def _index_events(checked, entry_type: str, counts: Counts) -> Iterator[dict]:
    for kind, item, problems in checked:
        if kind == "entry":
            counts.items += 1
            yield {"type": entry_type, **item, "problems": counts.add(problems)}
        else:
            yield {"type": f"index_{kind}", **item, "problems": counts.add(problems)}


# -- producer snapshots, transaction indexes, checkpoints --------------------------------------

def _dump_producer_snapshot(display, buf, info, options, companion, counts) -> Iterator[dict]:
    decoded, problems = snapshot.decode_snapshot(buf, display)
    producers = decoded.pop("producers")
    yield {"type": "producer_snapshot", **decoded, "problems": counts.add(problems)}
    for producer in producers:
        counts.items += 1
        yield {"type": "producer", **producer}


def _dump_txnindex(display, buf, info, options, companion, counts) -> Iterator[dict]:
    log = companion(".log")
    if log is None:
        yield from _no_log(display, counts)
    headers = _log_headers(log)
    batches = index.BatchCursor(headers) if headers is not None else None
    for entry, problems in txnindex.iter_aborted(buf, display):
        if entry is None:
            yield {"type": "index_trailing", "problems": counts.add(problems)}
            continue
        counts.items += 1
        if batches is not None:
            batch = batches.ending_at_or_after(entry["last_offset"])
            control = _control_type(log, batch) if batch is not None else None
            problems += txnindex.check_marker(entry, batch, control,
                                              f"{display} → entry[{entry['index']}]",
                                              entry["index"] * txnindex.ENTRY.size)
        yield {"type": "aborted_txn", **entry, "problems": counts.add(problems)}


def _control_type(log, header: dict) -> str | None:
    if not header["is_control"] or header["magic"] != 2:
        return None
    view = memoryview(log).cast("B") if not isinstance(log, bytes) else memoryview(log)
    data = log if isinstance(log, bytes) else view
    unit = v2.decode_batch(data, view, header["position"], 0, "", 0, [], DEFAULT_MAX_OUTPUT)
    return unit.get("control", {}).get("type")


def _dump_text(decode, event_type: str):
    def dumper(display, buf, info, options, companion, counts) -> Iterator[dict]:
        decoded, problems = decode(bytes(buf), display)
        counts.items += len(decoded.get("entries") or ())
        yield {"type": event_type, **decoded, "problems": counts.add(problems)}
    return dumper


def _dump_nothing(display, buf, info, options, companion, counts) -> Iterator[dict]:
    return iter(())


_DUMPERS = {
    "log": _dump_segment, "kraft_snapshot": _dump_segment,
    "index": _dump_offset_index, "timeindex": _dump_time_index,
    "producer_snapshot": _dump_producer_snapshot, "txnindex": _dump_txnindex,
    "leader_epoch_checkpoint": _dump_text(checkpoints.decode_leader_epoch_checkpoint,
                                          "checkpoint"),
    "offset_checkpoint": _dump_text(checkpoints.decode_offset_checkpoint, "checkpoint"),
    "partition_metadata": _dump_text(checkpoints.decode_partition_metadata,
                                     "partition_metadata"),
    "meta_properties": _dump_text(checkpoints.decode_properties, "properties"),
    "quorum_state": _dump_text(checkpoints.decode_json_file, "json_file"),
    "clean_shutdown": _dump_text(checkpoints.decode_json_file, "json_file"),
    "lock": _dump_nothing,
}
