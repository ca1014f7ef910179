"""Readable dump lines (kinspect dump's default): one line per batch, record, index entry or
producer, with a header line per file and a summary; streamed, no table is held.

    formatter = TableFormat(data=True, mode="auto")
    for event in events:
        for text in formatter.lines(event): ...   # rich Text: styled on a terminal, .plain else
"""

from __future__ import annotations

import datetime as _dt
import functools

from rich.text import Text

from kinspect.records.stream import RecordStream

from kinspect.render.jsonl import dumps
from kinspect.render.safe import escape
from kinspect.render.text import problem_lines
from kinspect.render.dump_views import record_view

KIND_NAMES = {"log": "segment", "kraft_snapshot": "KRaft snapshot", "index": "offset index",
              "timeindex": "time index", "producer_snapshot": "producer state snapshot",
              "txnindex": "transaction index"}
ENTRY_KINDS = ("index", "timeindex", "producer_snapshot", "txnindex", "leader_epoch_checkpoint",
               "offset_checkpoint")


class TableFormat:
    """Lines for one event at a time: one per batch, record, entry or producer."""

    BATCH_HEAD = (f"{'POSITION':>12} {'OFFSETS':>23} {'COUNT':>6} {'SIZE':>8} {'CODEC':<6} "
                  f"{'MAX TIMESTAMP (UTC)':<24} {'TYPE':<6} {'PRODUCER':<22} {'FLAGS':<6} CRC")

    def __init__(self, data: bool = False, mode: str = "auto", plain_records: bool = False):
        """``plain_records``: record lines come as escaped str, not rich Text (for piped output,
        where a Text per record costs more than the rest of the line)."""
        self.data, self.mode, self.plain_records = data, mode, plain_records
        self.header_due = False
        self._lines: list[Text] = []

    def lines(self, event: dict) -> list[Text | str]:
        self._lines = []
        handler = self.HANDLERS.get(event["type"])
        if handler is not None:
            handler(self, event)
        self._lines += problem_lines(event)
        return self._lines

    def line(self, text: str | Text) -> None:
        """A line; text from the input is escaped before it becomes a rich Text (which would
        drop some control characters without a trace: BEL, BS, VT, FF, CR)."""
        self._lines.append(text if isinstance(text, Text) else Text(escape(text)))

    def _file(self, e: dict) -> None:
        where = []
        if e.get("topic") is not None:
            where.append(f"topic {e['topic']} partition {e['partition']}")
        if e.get("end_offset") is not None:
            where.append(f"snapshot at offset {e['end_offset']}, epoch {e['epoch']}")
        if e.get("renamed"):
            where.append(f"renamed {e['renamed']}")
        kind = KIND_NAMES.get(e["kind"], (e["kind"] or "unknown").replace("_", " "))
        details = ", ".join([kind, f"{e['size']:,} bytes", *where])
        self.line(Text.assemble("\n", (escape(e["file"]), "bold"), escape(f"  ({details})")))
        self.header_due = e["kind"] in ("log", "kraft_snapshot", "index", "timeindex",
                                        "txnindex", "producer_snapshot")
        self.kind = e["kind"]

    def _head(self, text: str) -> None:
        if self.header_due:
            self.line(Text(text, style="dim"))
            self.header_due = False

    def _batch(self, e: dict) -> None:
        self._head(self.BATCH_HEAD)
        first = e.get("base_offset")
        offsets = (f"{first}..{e['last_offset']}" if first is not None and first != e["last_offset"]
                   else str(e["last_offset"]))
        producer = "-"
        if e.get("producer_id", -1) >= 0:
            producer = f"{e['producer_id']}/{e['producer_epoch']}/{e['base_sequence']}"
        flags = "".join(flag for flag, on in (("T", e.get("is_transactional")),
                                              ("C", e.get("is_control")),
                                              ("D", e.get("delete_horizon_ms") is not None)) if on)
        if e.get("control"):
            flags += " " + e["control"]["type"]
        crc = {True: "ok", False: "BAD", None: "-"}[e.get("crc_valid")]
        kind = (e.get("timestamp_type") or "none").replace("Time", "")
        count = e.get("count") if e.get("count") is not None else len(e.get("records") or ()) or "-"
        text = (f"{e['position']:>12} {offsets:>23} {count!s:>6} {e['size']:>8} "
                f"{e.get('compression', '-'):<6} {_time(e.get('max_timestamp')):<24} "
                f"{kind:<6} {producer:<22} {flags or '-':<6} ")
        self.line(Text.assemble(text, (crc, "red bold" if crc == "BAD" else "green")))
        records = e.get("records") or ()
        if not isinstance(records, RecordStream):  # a stream is written by record_lines, chunk by chunk
            self._lines += (self.record_texts if self.plain_records else self.record_lines)(e, records)

    def record_lines(self, e: dict, records) -> list[Text]:
        return list(map(Text, self.record_texts(e, records)))

    def record_texts(self, e: dict, records) -> list[str]:
        """The record lines as plain text, escaped (what is written when output is piped)."""
        if e.get("is_control"):
            return [escape(self._control(record, e.get("control") or {})) for record in records]
        if not self.data:  # only the header keys come from the input, escaped as they are joined
            return list(map(self._sizes_line, records))
        return list(map(escape, map(self._record, records)))

    def _control(self, record: dict, control: dict) -> str:
        details = " ".join(f"{k}={_compact(v)}" for k, v in control.items()
                           if k not in ("type", "key_version"))
        return (f"{'':>14}offset {record['offset']}  {_time(record['timestamp'])}  "
                f"{control.get('type', 'control')} {details}")

    @staticmethod
    def _sizes_line(record: dict) -> str:
        """A record without --data: record_view's fields, read straight from the record (the hot
        path of dump --records)."""
        text = (f"{'':>14}offset {record['offset']}  {_time(record['timestamp'])}  "
                f"key {_size(record['key_size'])}  value {_size(record['value_size'])}")
        keys = ",".join([h["key"] for h in record["headers"]]) if record["headers"] else ""
        return f"{text}  headers [{escape(keys)}]" if keys else text

    def _record(self, record: dict) -> str:
        if not self.data:
            return self._sizes_line(record)
        view = record_view(record, self.data, self.mode)
        text = f"{'':>14}offset {view['offset']}  {_time(view['timestamp'])}"
        value = view["value"]
        if isinstance(value, dict) and "data" in value and "api_key" in value:  # KRaft metadata
            return f"{text}  {value['type']} v{value['version']} {_compact(value['data'])}"
        if "record_type" in view:
            name = view["record_name"] or f"type {view['record_type']}"
            value = "tombstone" if view["tombstone"] else _compact(view["value"])
            return f"{text}  {name} {_compact(view['key'])} → {value}"
        headers = " ".join(f"{h['key']}={_compact(h['value'])}" for h in view["headers"])
        return (f"{text}  key={_compact(view['key'])}{_schema_note(view.get('key_schema'))} "
                f"value={_compact(view['value'])}{_schema_note(view.get('value_schema'))}"
                + (f"  headers {headers}" if headers else ""))

    def _damage(self, e: dict) -> None:
        resumed = ("the end of the file" if e["resumed_at"] is None
                   else f"the next valid batch at {e['resumed_at']}")
        self.line(Text(f"{e['position']:>12} DAMAGE: {e['size']:,} bytes skipped to "
                           f"{resumed} ({e['what']})", style="red bold"))

    def _padding(self, e: dict) -> None:
        self.line(Text(f"{e['position']:>12} {e['size']:,} zero bytes to the end "
                           f"(preallocated space)", style="dim"))

    def _index_entry(self, e: dict) -> None:
        self._head(f"{'ENTRY':>8} {'OFFSET':>20} {'POSITION':>12} {'BATCH LAST OFFSET':>18}")
        last = "-" if e["batch_last_offset"] is None else e["batch_last_offset"]
        self.line(f"{e['index']:>8} {e['offset']:>20} {e['position']:>12} {last!s:>18}")

    def _time_index_entry(self, e: dict) -> None:
        self._head(f"{'ENTRY':>8} {'TIMESTAMP (UTC)':<24} {'OFFSET':>20} "
                   f"{'BATCH MAX TIMESTAMP':<24}")
        self.line(f"{e['index']:>8} {_time(e['timestamp']):<24} {e['offset']:>20} "
                  f"{_time(e['batch_max_timestamp']):<24}")

    def _index_zero_tail(self, e: dict) -> None:
        self.line(f"{e['index']:>8} {e['entries']:,} zero-filled entries from byte "
                  f"{e['position']} (preallocated, not entries)")

    def _producer_snapshot(self, e: dict) -> None:
        crc = "ok" if e.get("crc_valid") else "BAD"
        self.line(f"version {e['version']}, {e.get('count')} producers, CRC-32C {crc}")
        self._head(f"{'PRODUCER':>12} {'EPOCH':>6} {'COORD':>6} {'TXN FIRST':>10} "
                   f"{'SEQUENCES':>15} {'LAST OFFSET':>12} {'LAST TIMESTAMP (UTC)':<24}")

    def _producer(self, e: dict) -> None:
        batch = e.get("batch") or {}
        sequences = (f"{batch['first_sequence']}..{batch['last_sequence']}" if batch else "-")
        txn = "-" if e["current_txn_first_offset"] is None else e["current_txn_first_offset"]
        self.line(f"{e['producer_id']:>12} {e['producer_epoch']:>6} {e['coordinator_epoch']:>6} "
                  f"{txn!s:>10} {sequences:>15} {batch.get('last_offset', '-')!s:>12} "
                  f"{_time(e['last_timestamp']):<24}")

    def _aborted_txn(self, e: dict) -> None:
        self._head(f"{'ENTRY':>8} {'PRODUCER':>12} {'FIRST OFFSET':>14} {'LAST OFFSET':>14} "
                   f"{'LAST STABLE':>14}")
        self.line(f"{e['index']:>8} {e['producer_id']:>12} {e['first_offset']:>14} "
                  f"{e['last_offset']:>14} {e['last_stable_offset']:>14}")

    def _checkpoint(self, e: dict) -> None:
        entries = e.get("entries") or []
        if entries and "epoch" in entries[0]:
            rows, columns = entries, ["epoch", "start_offset"]
        else:
            rows, columns = entries, ["topic", "partition", "offset"]
        self.line(f"version {e.get('version')}, {len(entries)} entries")
        widths = [max([len(c)] + [len(str(r.get(c))) for r in rows]) for c in columns]
        if rows:
            self.line(Text("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)),
                           style="dim"))
        for row in rows:
            cells = [str(row.get(c)) for c in columns]
            self.line("  ".join(cell.rjust(w) if isinstance(row.get(c), int) else cell.ljust(w)
                                for cell, c, w in zip(cells, columns, widths)).rstrip())

    def _partition_metadata(self, e: dict) -> None:
        self.line(f"version {e.get('version')}, topic id {e.get('topic_id')}")

    def _properties(self, e: dict) -> None:
        for key, value in e["properties"].items():
            self.line(f"  {key} = {value}")

    def _json_file(self, e: dict) -> None:
        self.line("  " + _compact(e.get("json")))

    def _notice(self, e: dict) -> None:
        style = {"error": "red", "warning": "yellow"}.get(e.get("severity"), "dim")
        self.line(Text.assemble("    ", (e.get("severity", ""), style), escape(f" {e['what']}")))

    def _summary(self, e: dict) -> None:
        problems = e["problem_counts"]
        counts = ", ".join(f"{n} {severity}{'s' if n != 1 else ''}"
                           for severity, n in problems.items() if n) or "no problems"
        if e["kind"] in ("log", "kraft_snapshot"):
            offsets = ("" if e["first_offset"] is None
                       else f", offsets {e['first_offset']}..{e['last_offset']}")
            damaged = f", {e['damaged_bytes']:,} damaged bytes" if e["damaged_bytes"] else ""
            text = f"{e['items']} batches, {e['record_count']} records{offsets}{damaged}; {counts}"
        elif e["kind"] in ENTRY_KINDS:
            text = f"{e['items']} entries; {counts}"
        else:
            text = counts
        style = "red" if problems.get("error") else "yellow" if problems.get("warning") else "dim"
        self.line(Text(text, style=style))

    HANDLERS = {  # event type → the method writing its lines; other types: their problems only
        "file": _file, "batch": _batch, "damage": _damage, "padding": _padding,
        "index_entry": _index_entry, "time_index_entry": _time_index_entry,
        "index_zero_tail": _index_zero_tail, "producer_snapshot": _producer_snapshot,
        "producer": _producer, "aborted_txn": _aborted_txn, "checkpoint": _checkpoint,
        "partition_metadata": _partition_metadata, "properties": _properties,
        "json_file": _json_file, "notice": _notice, "summary": _summary,
    }


def _time(ms) -> str:
    if ms == _last_time[0]:  # records of a batch often share their timestamp
        return _last_time[1]
    if ms is None or ms < 0:
        return "-" if ms is None else str(ms)
    second = _second(ms // 1000)
    text = str(ms) if second is None else f"{second}{ms % 1000:03d}Z"
    _last_time[:] = ms, text
    return text


_last_time: list = [None, "-"]


@functools.lru_cache(maxsize=4096)  # records of a batch share their seconds
def _second(seconds: int) -> str | None:
    try:
        moment = _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.")


def _schema_note(about) -> str:
    """(avro id 3 orders-value), (protobuf id 4 lab.Order), (schema id 9 unknown), or the error."""
    if about is None:
        return ""
    name = f"id {about['id']}" if about.get("id") is not None else f"GUID {about.get('guid')}"
    if about.get("found") is False:
        return f" (schema {name} unknown)"
    detail = about.get("message") or about.get("subject")
    note = f"{about.get('format')} {name}" + (f" {detail}" if detail else "")
    if "error" in about:
        at = f" at byte {about['offset']}" if about.get("offset") is not None else ""
        return f" ({note}: {about['error']}{at})"
    return f" ({note})"


def _size(n: int) -> str:
    return "null" if n < 0 else f"{n} B"


def _compact(value, limit: int = 200) -> str:
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
