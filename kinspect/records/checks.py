"""Semantic integrity checks over decoded batches (issue 4), run when decode_records(checks=True).

Decoding already reports what it meets on the way (crc, batch_length, magic, codec,
decompress, records_count, record_length, varint_bounds, headers, control_record for a bad
key/value, wrapper_nesting, partial_trailing). These functions add the rules Kafka's broker
enforces that a decoder can pass over: each Problem has a stable check name, a severity, the
absolute byte position of the field, and expected/found values.
"""

from __future__ import annotations

from itertools import accumulate, compress, islice, repeat
from operator import add, gt, itemgetter, le, sub

from kinspect.problems import ERROR, INFO, WARNING, Problem, ProblemCap
from kinspect.records.packed import PackedRecords

# v2 header field positions, relative to the batch start
_ATTRIBUTES_AT = 21
_LAST_OFFSET_DELTA_AT = 23
_MAX_TIMESTAMP_AT = 35
_PRODUCER_ID_AT = 43
_RECORDS_AT = 61
_RESERVED_ATTRIBUTE_BITS = 0xFF80
# legacy message field positions, relative to the message start
_LEGACY_ATTRIBUTES_AT = 17
_LEGACY_TIMESTAMP_AT = 18
_ZSTD = 4

_OFFSET = itemgetter("offset")
_TIMESTAMP = itemgetter("timestamp")


def check_batch(batch: dict, where: str, problems: list[Problem]) -> None:
    """All v2 checks for one decoded batch (its records a list, or a RecordStream)."""
    cap = ProblemCap(problems)
    _reserved_attributes(batch, where, cap)
    _records(batch, where, cap)
    _producer_fields(batch, where, cap)
    _control_batch(batch, where, cap)
    cap.close(where, batch["position"])


def _chunks(records) -> list:
    """A batch's records a chunk at a time: a list is one chunk, a RecordStream streams."""
    return [records] if isinstance(records, list) else records.chunks()


def _reserved_attributes(batch: dict, where: str, problems: list[Problem]) -> None:
    reserved = batch["attributes"] & _RESERVED_ATTRIBUTE_BITS
    if reserved:
        problems.append(Problem(f"reserved attribute bits {reserved:#06x} are set", where,
                                batch["position"] + _ATTRIBUTES_AT, WARNING,
                                "reserved_attributes", 0, reserved))


def _records(batch: dict, where: str, problems: ProblemCap) -> None:
    """The checks that read every record, in one pass over them: offset deltas, then timestamps."""
    records = batch["records"]
    create_time = batch["timestamp_type"] == "CreateTime"
    largest = None
    if type(records) is PackedRecords:  # packed only with offset deltas 0, 1, 2, ...
        if records:
            _offset_delta_summary(batch, where, batch["position"] + _RECORDS_AT, len(records) - 1,
                                  0, problems)
            largest = records.largest_timestamp if create_time else None
    elif records:
        base = batch["base_offset"]
        at = batch["position"] + _RECORDS_AT
        previous, gaps, index = -1, 0, 0
        for chunk in _chunks(records):
            offsets = list(map(_OFFSET, chunk))
            start = base + previous + 1
            if offsets != list(range(start, start + len(offsets))):  # deltas not going on 1 by 1
                previous, gaps = _offset_delta_order(offsets, base, where, at, problems, index,
                                                     previous, gaps)
            else:
                previous += len(offsets)
            index += len(offsets)
            if create_time:
                most = max(map(_TIMESTAMP, chunk))
                largest = most if largest is None else max(largest, most)
        if index:
            _offset_delta_summary(batch, where, at, offsets[-1] - base, gaps, problems)
    _timestamps(batch, where, largest, problems)


def _offset_delta_summary(batch: dict, where: str, at: int, last: int, gaps: int,
                          problems: ProblemCap) -> None:
    if gaps:
        problems.append(Problem(f"{gaps} gap(s) in the record offset deltas: records were removed, "
                                f"as log compaction does", where, at, INFO, "offset_delta_order"))
    declared = batch["last_offset_delta"]
    if declared < last:
        problems.append(Problem(f"lastOffsetDelta {declared} is below the last record's delta {last}",
                                where, batch["position"] + _LAST_OFFSET_DELTA_AT, ERROR,
                                "last_offset_delta", last, declared))
    elif declared > last:
        problems.append(Problem(f"lastOffsetDelta {declared} is past the last record's delta {last}: "
                                f"trailing records were removed, as log compaction does", where,
                                batch["position"] + _LAST_OFFSET_DELTA_AT, INFO,
                                "last_offset_delta", last, declared))


def _offset_delta_order(offsets: list[int], base: int, where: str, at: int, problems: ProblemCap,
                        first_index: int, previous: int, gaps: int) -> tuple[int, int]:
    """Offsets of records ``first_index``.. that are not 0, 1, 2, ...: (previous, gaps) after them.

    A delta must pass the highest delta before it; one that passes it by more than 1 is a gap.
    The comparisons run over whole lists (a hostile batch may hold millions of records out of
    order): only the problems the cap shows are built, the rest are counted."""
    deltas = list(map(sub, offsets, repeat(base, len(offsets))))
    highs = list(accumulate(deltas, max, initial=previous))  # highs[i]: highest before record i
    bad = sum(map(le, deltas, highs))
    gaps += sum(map(gt, deltas, map(add, highs, repeat(1, len(deltas)))))
    if bad:
        shown = islice(compress(range(len(deltas)), map(le, deltas, highs)),
                       problems.room("offset_delta_order"))
        for i in shown:
            problems.append(Problem(f"offset delta {deltas[i]} does not increase (previous {highs[i]})",
                                    f"{where} → records[{first_index + i}]", at, ERROR,
                                    "offset_delta_order", f"> {highs[i]}", deltas[i]))
            bad -= 1
        problems.count("offset_delta_order", bad, ERROR)
    return highs[-1], gaps


def _timestamps(batch: dict, where: str, largest: int | None, problems: ProblemCap) -> None:
    """``largest``: the largest record timestamp (None without records)."""
    at = batch["position"] + _MAX_TIMESTAMP_AT
    if batch["timestamp_type"] == "LogAppendTime":
        if batch["max_timestamp"] < 0:
            problems.append(Problem("LogAppendTime batch has no append time in maxTimestamp", where,
                                    at, ERROR, "log_append_time", ">= 0", batch["max_timestamp"]))
        return
    if largest is None:
        return
    if largest != batch["max_timestamp"]:
        problems.append(Problem(f"maxTimestamp {batch['max_timestamp']} is not the largest record "
                                f"timestamp {largest}", where, at, ERROR, "max_timestamp",
                                largest, batch["max_timestamp"]))


def _producer_fields(batch: dict, where: str, problems: list[Problem]) -> None:
    producer_id, epoch, sequence = (batch["producer_id"], batch["producer_epoch"],
                                    batch["base_sequence"])
    found = {"producer_id": producer_id, "producer_epoch": epoch, "base_sequence": sequence}
    at = batch["position"] + _PRODUCER_ID_AT
    if batch["is_transactional"] and (producer_id < 0 or epoch < 0):
        problems.append(Problem("transactional batch without a producer id and epoch", where, at,
                                ERROR, "producer_fields", "producer_id >= 0, producer_epoch >= 0",
                                found))
    # Without a producer id, epoch and sequence mean nothing: Kafka's own group coordinator
    # writes base sequence 0 there, kafkajs epoch 0. Nothing to report.
    elif producer_id >= 0 and sequence < 0 and not batch["is_control"]:
        problems.append(Problem("idempotent batch (producer id set) without a base sequence",
                                where, at, WARNING, "producer_fields", "base_sequence >= 0", found))


def _control_batch(batch: dict, where: str, problems: list[Problem]) -> None:
    if not batch["is_control"]:
        return
    count = len(batch["records"])
    if count != 1:
        problems.append(Problem(f"control batch holds {count} records", where,
                                batch["position"] + _RECORDS_AT, ERROR, "control_record", 1, count))
    control_type = batch.get("control", {}).get("type")
    if control_type in ("ABORT", "COMMIT") and not batch["is_transactional"]:
        problems.append(Problem(f"{control_type} marker in a batch without the transactional bit",
                                where, batch["position"] + _ATTRIBUTES_AT, ERROR, "control_record",
                                "transactional", "not transactional"))


def check_offset_order(previous_last: int | None, first: int, where: str, at: int,
                       problems: list[Problem]) -> None:
    """Between consecutive units of one record set: offsets increase; gaps are compaction."""
    if previous_last is None:
        return
    # legacy producers may write offset 0 on every message of a Produce request
    if first < previous_last or (first == previous_last and first != 0):
        problems.append(Problem(f"offset {first} does not follow the previous batch's last offset "
                                f"{previous_last}", where, at, WARNING, "offset_order",
                                f"> {previous_last}", first))
    elif first != previous_last + 1:
        problems.append(Problem(f"offsets {previous_last + 1}..{first - 1} are missing before this "
                                f"batch, as after log compaction", where, at, INFO, "offset_gap",
                                previous_last + 1, first))


def check_legacy_message(message: dict, inner_offsets: list[int] | None, where: str,
                         problems: list[Problem]) -> None:
    """All legacy (magic 0/1) checks for one top-level message; inner_offsets as stored."""
    position = message["position"]
    magic = message["magic"]
    codec = message["attributes"] & 0x07
    if codec == _ZSTD:
        problems.append(Problem(f"zstd compression needs magic 2, found magic {magic}", where,
                                position + _LEGACY_ATTRIBUTES_AT, ERROR, "zstd_legacy", 2, magic))
    _legacy_timestamp(magic, message["attributes"], message["timestamp"], where,
                      position, problems)
    if inner_offsets is None:  # not a wrapper, or it did not decompress
        return
    if not inner_offsets:
        problems.append(Problem("compressed wrapper holds no messages", where, position, WARNING,
                                "wrapper_inner_offsets", ">= 1", 0))
    for index, record in enumerate(message["records"]):
        if record["magic"] != magic:
            problems.append(Problem(f"inner message magic {record['magic']} differs from the "
                                    f"wrapper's {magic}", f"{where} → records[{index}]", position,
                                    ERROR, "wrapper_magic", magic, record["magic"]))
    _inner_offsets(message, inner_offsets, where, problems)


def _legacy_timestamp(magic: int, attributes: int, timestamp: int | None, where: str,
                      position: int, problems: list[Problem]) -> None:
    if magic == 0:
        if attributes & 0x08:
            problems.append(Problem("magic 0 message has the timestamp-type bit set: magic 0 has "
                                    "no timestamp (CreateTime, read as -1)", where,
                                    position + _LEGACY_ATTRIBUTES_AT, ERROR, "legacy_timestamp",
                                    "CreateTime", "LogAppendTime"))
        return
    if attributes & 0x08 and timestamp < 0:
        problems.append(Problem(f"LogAppendTime message has timestamp {timestamp}", where,
                                position + _LEGACY_TIMESTAMP_AT, ERROR, "legacy_timestamp",
                                ">= 0", timestamp))
    elif timestamp < -1:
        problems.append(Problem(f"timestamp {timestamp} is negative (only -1, no timestamp, is "
                                f"allowed)", where, position + _LEGACY_TIMESTAMP_AT, WARNING,
                                "legacy_timestamp", ">= -1", timestamp))


def _inner_offsets(message: dict, inner_offsets: list[int], where: str,
                   problems: list[Problem]) -> None:
    if not inner_offsets:
        return
    position = message["position"]
    if any(b <= a for a, b in zip(inner_offsets, inner_offsets[1:])):
        problems.append(Problem("inner message offsets do not increase", where, position, ERROR,
                                "wrapper_inner_offsets", "increasing", _first(inner_offsets)))
        return
    if message["magic"] == 1:
        expected = list(range(len(inner_offsets)))
        if inner_offsets != expected:
            problems.append(Problem("magic 1 inner offsets should be relative: 0, 1, 2, ...", where,
                                    position, WARNING, "wrapper_inner_offsets",
                                    f"0..{len(expected) - 1}", _first(inner_offsets)))
    elif inner_offsets[-1] != message["offset"]:  # normal in a Produce request
        problems.append(Problem(f"magic 0 wrapper offset {message['offset']} is not its last inner "
                                f"offset {inner_offsets[-1]}", where, position, INFO,
                                "wrapper_inner_offsets", inner_offsets[-1], message["offset"]))


def _first(offsets: list[int], shown: int = 20) -> list[int | str]:
    return offsets if len(offsets) <= shown else offsets[:shown] + [f"... {len(offsets)} in all"]


SCHEMA_CHECK = "schema_value"


def check_schema_values(batch: dict, where: str, schemas, problems: list[Problem]) -> None:
    """Keys and values framed with a schema id (kinspect.schemas.framing) whose schema is known
    but which do not read as it: one ``schema_value`` error each (the first few of a batch kept,
    the rest counted), at the batch's position, naming the record's offset, the schema and the
    decoder's cause (``found``: the record's offset and the byte of the key or value where
    reading stopped). Unknown ids and schemas that do not compile are the Schemas' notices (one
    each), not problems here."""
    if batch.get("is_control"):
        return
    records = batch["records"]
    if not records:
        return
    cap = ProblemCap(problems)
    position = batch["position"]
    index = 0
    for chunk in _chunks(records) if type(records) is not PackedRecords else [records.records()]:
        for record in chunk:
            headers = record.get("headers")
            for field, is_key in (("key", True), ("value", False)):
                payload = record.get(field)
                if payload is None:
                    continue
                found = schemas.decode(payload, headers, is_key)
                if found is None or "offset" not in found[1]:
                    continue  # not framed, decoded, unknown, or a schema that does not compile
                about = found[1]
                if cap.counted(SCHEMA_CHECK, ERROR):
                    continue
                cap.append(schema_problem(field, record, about, f"{where} → records[{index}]", position))
            index += 1
    cap.close(where, position)


def schema_problem(field: str, record: dict, about: dict, where: str, position: int | None) -> Problem:
    """The schema_value problem of one key or value (``about``: what the Schemas said of it)."""
    schema = {name: about[name] for name in ("id", "guid", "format", "subject", "message")
              if about.get(name) is not None}
    named = f"schema id {about['id']}" if about.get("id") is not None else f"schema GUID {about.get('guid')}"
    subject = f" (subject {about['subject']})" if about.get("subject") else ""
    at = f" at byte {about['offset']} of the {field}" if about.get("offset") is not None else ""
    offset = record.get("offset")
    return Problem(f"the {field} of the record at offset {offset} does not read as its "
                   f"{about.get('format', 'schema')} {named}{subject}: {about['error']}{at}",
                   where, position, ERROR, SCHEMA_CHECK, schema,
                   {"offset": offset, "error": about["error"], "at": about.get("offset")})
