"""kinspect dump's three outputs, from storage's dump events (storage/dump.py): readable lines
(dump_lines.py), kafka-dump-log's lines (kafka_format.py) or JSON Lines. The command picks one
with dump_renderer(), hands it every event of every file, then calls finish().
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Protocol, TextIO

from kinspect.records.stream import RecordStream
from kinspect.render.dump_lines import TableFormat
from kinspect.render.dump_views import record_view
from kinspect.render.jsonl import dumpb, dumps
from kinspect.render.kafka_format import KafkaFormat
from kinspect.render.safe import escape


class Sink(Protocol):
    """Where the renderers write: the command line's Output (kinspect/cli/output.py)."""
    stream: TextIO
    as_json: bool
    interactive: bool

    def record(self, record: dict) -> None: ...       # one JSON line
    def write_line(self, line: bytes) -> None: ...    # JSON text already encoded, as it is
    def text(self, text) -> None: ...                 # one line: str or rich Text
    def warn(self, message: str) -> None: ...         # one line on stderr


def dump_renderer(out: Sink, style: str = "table", records: bool = False, data: bool = False,
                  mode: str = "auto", internal: bool = True, exact: bool = False):
    """The renderer of dump's --format STYLE (table or kafka) and --json: its event(event) takes
    each event, its finish() ends the run."""
    if style == "kafka":
        return KafkaRenderer(out, records, data, internal, exact)
    if out.as_json:
        return JsonRenderer(out, data, mode)
    return TableRenderer(out, data, mode)


class JsonRenderer:
    """JSON Lines; every line of a file carries the file's topic and partition (after "file"), as
    kcat -J's messages do, so that a line read alone says where it came from."""

    def __init__(self, out: Sink, data: bool, mode: str):
        self.out, self.data, self.mode = out, data, mode
        self.where = {"topic": None, "partition": None}

    def event(self, event: dict) -> None:
        if event["type"] == "file":
            self.where = {"topic": event.get("topic"), "partition": event.get("partition")}
        elif "file" in event:
            event = {"type": event.pop("type"), "file": event.pop("file"), **self.where, **event}
        records = event.get("records")
        if records and event["type"] == "batch":
            if not self.data:  # the hot path of big segments: records written as text
                del event["records"]
                head = dumpb(event)[:-1]
                chunks = records.chunks() if isinstance(records, RecordStream) else [records]
                self.out.write_line(b'%s,"records":[' % head)
                for number, chunk in enumerate(chunks):
                    text = _records_json(chunk).encode()
                    self.out.write_line(b"%s%s" % (b"," if number else b"", text))
                self.out.write_line(b"]}\n")
                return
            view, mode = record_view, self.mode
            if isinstance(records, RecordStream):
                event["records"] = records.mapped(lambda r: view(r, True, mode))
            else:
                event["records"] = [view(r, True, mode) for r in records]
        self.out.record(event)

    def finish(self) -> None:
        pass


_PLAIN = '{"offset":%d,"timestamp":%d,"key_size":%d,"value_size":%d,"sequence":%d,"header_keys":[]}'
_PLAIN_FIELDS = itemgetter("offset", "timestamp", "key_size", "value_size", "sequence")
_SAME = '{"offset":%%d,"timestamp":%%d,"key_size":%d,"value_size":%d,"sequence":-1,"header_keys":[]}'
_SAME_FIELDS = itemgetter("offset", "timestamp")
_HEADERS, _SIZES = itemgetter("headers"), itemgetter("key_size", "value_size", "sequence")
_templates: dict[tuple, str] = {}  # (record count, key size, value size) → the batch's template
TEMPLATES_CHARS = 4 << 20  # the cache's bound: a held batch of 100,000 records has a 9 MB template
_cached_chars = 0


def _records_json(records: list[dict]) -> str:
    """record_view(record, data=False) of each record as JSON, without building the dicts."""
    if records and "sequence" in records[0] and not any(map(_HEADERS, records)):
        return _plain_json(records)  # the v2 records of most segments: one format for the batch
    parts = []
    for r in records:
        keys = ",".join(dumps(h["key"]) for h in r["headers"]) if r["headers"] else ""
        extra = f',"sequence":{r["sequence"]}' if "sequence" in r else (
            f',"crc":{dumps(r["crc"])},"crc_valid":{dumps(r["crc_valid"])}')
        parts.append(f'{{"offset":{r["offset"]},"timestamp":{r["timestamp"]},"key_size":'
                     f'{r["key_size"]},"value_size":{r["value_size"]}{extra},'
                     f'"header_keys":[{keys}]}}')
    return ",".join(parts)


def _plain_json(records: list[dict]) -> str:
    """v2 records without headers, all fields integers: one %-format for the whole batch, with
    the sizes written into it when every record has the same (and no sequence: no producer id)."""
    count, first = len(records), records[0]
    key_size, value_size = first["key_size"], first["value_size"]
    if list(map(_SIZES, records)).count((key_size, value_size, -1)) == count:
        shape, fields = (count, key_size, value_size), _SAME_FIELDS
    else:
        shape, fields = (count,), _PLAIN_FIELDS
    template = _templates.get(shape)
    if template is None:
        one = _PLAIN if len(shape) == 1 else _SAME % (key_size, value_size)
        template = ",".join([one] * count)
        global _cached_chars
        if _cached_chars + len(template) > TEMPLATES_CHARS:
            _templates.clear()  # batches of many shapes, or huge ones: the cache stays bounded
            _cached_chars = 0
        if len(template) <= TEMPLATES_CHARS:
            _templates[shape] = template
            _cached_chars += len(template)
    return template % tuple(chain.from_iterable(map(fields, records)))


class TableRenderer:
    """Rich on a terminal; plain text written straight out when piped (much faster)."""

    def __init__(self, out: Sink, data: bool, mode: str):
        self.out = out
        self.write = None if out.interactive else out.stream.write
        self.format = TableFormat(data, mode, plain_records=self.write is not None)

    def event(self, event: dict) -> None:
        for text in self.format.lines(event):
            self._line(text)
        records = event.get("records")
        if isinstance(records, RecordStream):  # too big to hold: its lines a chunk at a time
            for chunk in records.chunks():
                if self.write is None:
                    for text in self.format.record_lines(event, chunk):
                        self.out.text(text)
                elif chunk:  # escaped as they were built
                    self.write("\n".join(self.format.record_texts(event, chunk)) + "\n")

    def _line(self, text) -> None:
        if self.write is None:
            self.out.text(text)
        elif isinstance(text, str):  # a record line, escaped as it was built
            self.write(text + "\n")
        else:
            self.write(escape(text.plain, layout=True) + "\n")

    def finish(self) -> None:
        pass


class KafkaRenderer:
    """kafka-dump-log's stdout lines; its stderr lines on stderr.

    Control characters from the data are escaped, as in every other text output, unless
    ``exact`` (--format kafka-exact) asks for kafka-dump-log's bytes, to diff the two."""

    def __init__(self, out: Sink, records: bool, data: bool, internal: bool, exact: bool = False):
        self.out = out
        self.format = KafkaFormat(deep=records, data=data, internal=internal)
        self.shown = None if exact else escape

    def event(self, event: dict) -> None:
        self._write(self.format.lines(event))
        records = event.get("records")
        if self.format.deep and isinstance(records, RecordStream):  # a chunk at a time
            for chunk in records.chunks():
                self._write(self.format.record_lines(event, chunk))
        for line in self.format.immediate_errors():
            self.out.warn(line)

    def _write(self, lines: list[str]) -> None:
        if lines:
            if self.shown is not None:
                lines = [self.shown(line) for line in lines]
            self.out.stream.write("\n".join(lines) + "\n")

    def finish(self) -> None:
        self.out.stream.flush()
        for line in self.format.errors():
            self.out.warn(line)
