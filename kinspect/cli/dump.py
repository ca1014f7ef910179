"""kinspect dump: every file a Kafka broker writes, decoded and checked."""

from __future__ import annotations

import datetime as _dt
import sys
from contextlib import ExitStack
from pathlib import Path

import click
from rich.text import Text

from kinspect.cli.output import Output, output_options
from kinspect.problems import EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE
from kinspect.render.jsonl import dumpb, dumps
from kinspect.render.text import problem_lines
from kinspect.storage import files
from kinspect.storage.dump import DumpOptions, dump_file
from kinspect.storage.kafka_format import KafkaFormat
from kinspect.storage.mapped import mapped, release
from kinspect.storage.views import MODES, record_view

EPILOG = """\b
Examples:
  kinspect dump /var/lib/kafka/orders-0/00000000000000000000.log
  kinspect dump --records --data orders-0/                  every file of a partition
  kinspect dump --data __consumer_offsets-12/00000000000000000000.log
  kinspect dump --json --records logs/ | jq 'select(.type == "batch")'
  kinspect dump --format kafka --data 00000000000000000000.log > mine.txt
  diff mine.txt <(kafka-dump-log.sh --print-data-log --offsets-decoder --files ...)

\b
Reads .log segments, .index, .timeindex, .snapshot (producer state), .txnindex,
KRaft .checkpoint snapshots, leader-epoch-checkpoint, the offset checkpoints,
partition.metadata, meta.properties, quorum-state. Records of __consumer_offsets,
__transaction_state, __share_group_state and __cluster_metadata are decoded by type with
--data.
Damage (cut-off tails, garbage, zero-filled space) is reported with its position and
size, and the dump goes on at the next valid batch. Files are only read (mmap).

\b
Exit codes: 0 no errors; 1 errors found (or warnings, with --strict); 2 usage error;
3 a file unreadable or of no known kind.
"""

KIND_NAMES = {"log": "segment", "kraft_snapshot": "KRaft snapshot", "index": "offset index",
              "timeindex": "time index", "producer_snapshot": "producer state snapshot",
              "txnindex": "transaction index"}
ENTRY_KINDS = ("index", "timeindex", "producer_snapshot", "txnindex", "leader_epoch_checkpoint",
               "offset_checkpoint")
PROGRESS_STEP = 8 << 20


@click.command(epilog=EPILOG)
@click.argument("paths", nargs=-1, required=True, metavar="FILE|DIR...",
                type=click.Path(path_type=Path))
@click.option("--records", is_flag=True, help="Each batch's records (offset, timestamp, sizes).")
@click.option("--data", is_flag=True, help="Keys, values and headers too (implies --records).")
@click.option("--decode", "mode", type=click.Choice(MODES), default="auto", show_default=True,
              help="How --data shows keys and values.")
@click.option("--format", "style", type=click.Choice(["table", "kafka"]), default="table",
              show_default=True, help="kafka: kafka-dump-log's exact lines, to diff against it.")
@click.option("--type", "kind", type=click.Choice(files.KINDS),
              help="Read every FILE as this kind, whatever its name.")
@click.option("--no-internal", is_flag=True,
              help="Show internal topics' keys and values as bytes, not decoded records.")
@click.option("--no-checks", is_flag=True,
              help="Skip CRC and record checks: batch headers only (fastest).")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@output_options
def dump(paths, records, data, mode, style, kind, no_internal, no_checks, strict, out: Output):
    """Dump Kafka log segments, indexes, snapshots and checkpoints (files or directories)."""
    if style == "kafka" and out.as_json:
        raise click.UsageError("--format kafka and --json do not go together")
    records = records or data
    options = DumpOptions(records=records, data=data, internal=not no_internal,
                          checks=not no_checks, shallow=no_checks and not records
                          and style != "kafka")
    renderer = (KafkaRenderer(out, records, data, not no_internal) if style == "kafka"
                else JsonRenderer(out, data, mode) if out.as_json
                else TableRenderer(out, data, mode))
    exit_code = EXIT_OK
    for path, explicit in _targets(paths, out):
        if path is None:
            exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        info = files.describe(path, kind)
        if info.kind is None:
            if explicit:
                out.warn(f"kinspect: {path}: not a file of a Kafka log dir kinspect reads "
                         f"(--type KIND reads it as one)")
                exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        try:
            summary = _dump_one(path, info, options, renderer, out)
        except BrokenPipeError:  # the reader went away (| head): kinspect's main handles it
            raise
        except OSError as e:
            out.warn(f"kinspect: {path}: {e.strerror or e}")
            exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        problems = summary["problem_counts"]
        if problems.get("error") or (strict and problems.get("warning")):
            exit_code = max(exit_code, EXIT_PROBLEMS)
    renderer.finish()
    sys.exit(exit_code)


def _targets(paths, out: Output):
    """(file, named explicitly) for every FILE and every file under every DIR, sorted."""
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file())
            if not found:
                out.warn(f"kinspect: {path}: no files in this directory")
            for file in found:
                yield file, False
        elif path.exists():
            yield path, True
        else:
            out.warn(f"kinspect: {path}: no such file or directory")
            yield None, True


def _dump_one(path: Path, info: files.FileInfo, options: DumpOptions, renderer, out: Output
              ) -> dict:
    with ExitStack() as stack:
        buf = stack.enter_context(mapped(path))

        def companion(suffix: str):
            other = files.companion(path, suffix)
            if other == path or not other.is_file():
                return None
            try:
                return stack.enter_context(mapped(other))
            except OSError:
                return None

        big = info.kind in ("log", "kraft_snapshot") and len(buf) > PROGRESS_STEP
        summary = {}
        with out.progress(len(buf) if big else None) as bar:
            events = dump_file(str(path), buf, info, options, companion)
            try:
                next_update = PROGRESS_STEP
                for event in events:
                    if event["type"] == "summary":
                        summary = event
                    renderer.event(event)
                    if big and event.get("position", 0) >= next_update:
                        bar.update(event["position"])
                        release(buf, event["position"])
                        next_update = event["position"] + PROGRESS_STEP
            finally:
                events.close()
        return summary


# -- renderers -----------------------------------------------------------------------------------

class JsonRenderer:
    def __init__(self, out: Output, data: bool, mode: str):
        self.out, self.data, self.mode = out, data, mode

    def event(self, event: dict) -> None:
        records = event.get("records")
        if records and event["type"] == "batch":
            if not self.data:  # the hot path of big segments: records written as text
                del event["records"]
                head = dumpb(event)[:-1]
                self._write(b'%s,"records":[%s]}\n' % (head, _records_json(records).encode()))
                return
            view, mode = record_view, self.mode
            event["records"] = [view(r, True, mode) for r in records]
        self.out.record(event)

    def _write(self, line: bytes) -> None:
        """As Output.record writes: to stdout's buffer, after what the text layer holds."""
        stream = self.out.stream
        binary = getattr(stream, "buffer", None)
        if binary is None:
            stream.write(line.decode("utf-8"))
        else:
            stream.flush()
            binary.write(line)

    def finish(self) -> None:
        pass


def _records_json(records: list[dict]) -> str:
    """record_view(record, data=False) of each record as JSON, without building the dicts."""
    parts = []
    for r in records:
        keys = ",".join(dumps(h["key"]) for h in r["headers"]) if r["headers"] else ""
        extra = f',"sequence":{r["sequence"]}' if "sequence" in r else (
            f',"crc":{dumps(r["crc"])},"crc_valid":{dumps(r["crc_valid"])}')
        parts.append(f'{{"offset":{r["offset"]},"timestamp":{r["timestamp"]},"key_size":'
                     f'{r["key_size"]},"value_size":{r["value_size"]}{extra},'
                     f'"header_keys":[{keys}]}}')
    return ",".join(parts)


class KafkaRenderer:
    """kafka-dump-log's stdout lines; its stderr lines on stderr."""

    def __init__(self, out: Output, records: bool, data: bool, internal: bool):
        self.out = out
        self.format = KafkaFormat(deep=records, data=data, internal=internal)

    def event(self, event: dict) -> None:
        lines = self.format.lines(event)
        if lines:
            self.out.stream.write("\n".join(lines) + "\n")
        for line in self.format.immediate_errors():
            self.out.warn(line)

    def finish(self) -> None:
        self.out.stream.flush()
        for line in self.format.errors():
            self.out.warn(line)


class TableRenderer:
    """Readable lines, one per batch, entry or producer, streamed (no table is held)."""

    BATCH_HEAD = (f"{'POSITION':>12} {'OFFSETS':>23} {'COUNT':>6} {'SIZE':>8} {'CODEC':<6} "
                  f"{'MAX TIMESTAMP (UTC)':<24} {'TYPE':<6} {'PRODUCER':<22} {'FLAGS':<6} CRC")

    def __init__(self, out: Output, data: bool, mode: str):
        self.out, self.data, self.mode = out, data, mode
        self.header_due = False
        self.write = None if out.interactive else out.stream.write

    def line(self, text: str | Text) -> None:
        """Rich on a terminal; plain text, written straight out, when piped (much faster)."""
        if self.write is None:
            self.out.text(text if isinstance(text, Text) else Text(text))
        else:
            self.write((text.plain if isinstance(text, Text) else text) + "\n")

    def finish(self) -> None:
        pass

    def event(self, event: dict) -> None:
        handler = getattr(self, "_" + event["type"], None)
        if handler is not None:
            handler(event)
        for line in problem_lines(event):
            self.line(line)

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
        self.line(Text.assemble("\n", (f"{e['file']}", "bold"), f"  ({details})"))
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
        for record in e.get("records") or ():
            if e.get("is_control"):
                self.line(Text(self._control(record, e.get("control") or {})))
            else:
                self.line(Text(self._record(record)))

    def _control(self, record: dict, control: dict) -> str:
        details = " ".join(f"{k}={_compact(v)}" for k, v in control.items()
                           if k not in ("type", "key_version"))
        return (f"{'':>14}offset {record['offset']}  {_time(record['timestamp'])}  "
                f"{control.get('type', 'control')} {details}")

    def _record(self, record: dict) -> str:
        view = record_view(record, self.data, self.mode)
        text = f"{'':>14}offset {view['offset']}  {_time(view['timestamp'])}"
        if not self.data:
            keys = ",".join(view["header_keys"])
            return (f"{text}  key {_size(view['key_size'])}  value {_size(view['value_size'])}"
                    + (f"  headers [{keys}]" if keys else ""))
        value = view["value"]
        if isinstance(value, dict) and "data" in value and "api_key" in value:  # KRaft metadata
            return f"{text}  {value['type']} v{value['version']} {_compact(value['data'])}"
        if "record_type" in view:
            name = view["record_name"] or f"type {view['record_type']}"
            value = "tombstone" if view["tombstone"] else _compact(view["value"])
            return f"{text}  {name} {_compact(view['key'])} → {value}"
        headers = " ".join(f"{h['key']}={_compact(h['value'])}" for h in view["headers"])
        return (f"{text}  key={_compact(view['key'])} value={_compact(view['value'])}"
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
        if rows:
            self.out.table("", rows, columns)

    def _partition_metadata(self, e: dict) -> None:
        self.line(f"version {e.get('version')}, topic id {e.get('topic_id')}")

    def _properties(self, e: dict) -> None:
        for key, value in e["properties"].items():
            self.line(f"  {key} = {value}")

    def _json_file(self, e: dict) -> None:
        self.line("  " + _compact(e.get("json")))

    def _notice(self, e: dict) -> None:
        style = {"error": "red", "warning": "yellow"}.get(e.get("severity"), "dim")
        self.line(Text.assemble("    ", (e.get("severity", ""), style), f" {e['what']}"))

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


def _time(ms) -> str:
    if ms is None or ms < 0:
        return "-" if ms is None else str(ms)
    try:
        moment = _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _size(n: int) -> str:
    return "null" if n < 0 else f"{n} B"


def _compact(value, limit: int = 200) -> str:
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
