"""render/dump_output.py: the renderer each dump option picks, and the JSON writer's fast path
(records without --data written as text) against what record_view gives."""

import io
import json

import pytest

from kinspect.cli.output import Output
from kinspect.render.dump_output import (JsonRenderer, KafkaRenderer, TableRenderer, _records_json,
                                          dump_renderer)
from kinspect.render.dump_views import record_view
from kinspect.storage.dump import DumpOptions, dump_file
from kinspect.storage.files import companion, describe
from tests.conftest import SAMPLES

LEGACY = SAMPLES / "kafka-3.9.2-legacy" / "logs"
SEGMENTS = sorted(p for p in [*(SAMPLES / "kafka-4.1.2" / "logs").glob("*/*.log"), *LEGACY.glob("*/*.log")])


def _out(as_json: bool):
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    return Output(as_json, stream), stream


def _events(path, **options):
    def other(suffix):
        file = companion(path, suffix)
        return file.read_bytes() if file.is_file() and file != path else None
    return dump_file(path.name, path.read_bytes(), describe(path), DumpOptions(**options), other)


@pytest.mark.parametrize("as_json, style, kind", [
    (False, "table", TableRenderer), (True, "table", JsonRenderer), (False, "kafka", KafkaRenderer)])
def test_each_option_picks_its_renderer(as_json, style, kind):
    assert type(dump_renderer(_out(as_json)[0], style)) is kind


@pytest.mark.parametrize("path", SEGMENTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_records_written_as_text_are_their_record_views(path):
    """Without --data, a batch's records skip the dicts: the line must still be the JSON of
    record_view(record, data=False) of each record, with the file's topic and partition."""
    out, stream = _out(True)
    renderer = dump_renderer(out, "table", records=True)
    expected = []
    where = {}
    for event in _events(path, records=True):
        if event["type"] == "file":
            where = {"topic": event.get("topic"), "partition": event.get("partition")}
        if event["type"] == "batch":
            view = {"type": "batch", "file": event["file"], **where,
                    **{k: v for k, v in event.items() if k not in ("type", "file", "records")},
                    "records": [record_view(r, False, "auto") for r in event["records"]]}
            expected.append(json.loads(json.dumps(view, default=str)))
        renderer.event(event)
    renderer.finish()
    lines = [json.loads(line) for line in stream.buffer.getvalue().decode().splitlines()]
    batches = [line for line in lines if line["type"] == "batch"]
    assert batches and batches == expected


def _sized(offset, timestamp, key, value, sequence, headers=()):
    return {"offset": offset, "timestamp": timestamp, "key": key, "value": value,
            "headers": headers, "key_size": -1 if key is None else len(key),
            "value_size": -1 if value is None else len(value), "sequence": sequence}


@pytest.mark.parametrize("headers", [False, True], ids=["plain", "one-with-headers"])
def test_a_batch_of_records_as_text_is_the_json_of_their_views(headers):
    """The one-format path for v2 records without headers (and the general one, when a record
    has headers) against json.dumps of each record_view: ints beyond 32 bits, negative
    timestamps and sequences, null keys and values."""
    records = [_sized(2**40 + 1, 1795830376047, None, b"v" * 1000, -1),
               _sized(2**40 + 2, -1, b"", None, 2**31 - 1),
               _sized(2**63 - 1, -2**63, b"key", b"", 0)]
    if headers:
        records[1]["headers"] = ({"key": 'h"\u00e9\n', "value": b"x"},)
    expected = ",".join(json.dumps(record_view(r, False, "auto"), separators=(",", ":"),
                                   ensure_ascii=False) for r in records)
    assert _records_json(records) == expected
    assert _records_json(records[:1]) == expected.split(',{"offset"')[0]
    assert _records_json([]) == ""


def test_records_of_one_size_as_text_keep_each_ones_sequence():
    """Sizes the same in every record are written into the batch's format only with no sequence
    in any record: a hostile base sequence (-5, records from delta 4) gives -1 then 0."""
    records = [_sized(4, 1, b"k", b"v", -1), _sized(5, 1, b"k", b"v", 0), _sized(6, 1, b"k", b"v", -1)]
    same = [_sized(7, 1, b"k", b"v", -1), _sized(8, 2, b"k", b"v", -1)]
    for batch in (records, same, same[:1], records[1:]):
        assert _records_json(batch) == ",".join(
            json.dumps(record_view(r, False, "auto"), separators=(",", ":")) for r in batch)


def test_the_batch_formats_kept_stay_within_their_bound():
    """Held batches of many record counts (a hostile segment's; each up to --max-records, whose
    format is ~90 bytes a record) keep at most TEMPLATES_CHARS of formats, not 1,024 of them, and
    each batch's text is still right."""
    from kinspect.render import dump_output
    for count in range(20_000, 20_060):
        batch = [_sized(n, 1, b"k", b"v", n) for n in range(count)]
        text = _records_json(batch)
        assert text.count('{"offset"') == count and text.endswith(f'"sequence":{count - 1},"header_keys":[]}}')
        assert sum(map(len, dump_output._templates.values())) <= dump_output.TEMPLATES_CHARS
    huge = [_sized(n, 1, b"k", b"v", n) for n in range(60_000)]  # a format above the bound: not kept
    assert _records_json(huge).count('{"offset"') == 60_000
    assert sum(map(len, dump_output._templates.values())) <= dump_output.TEMPLATES_CHARS
