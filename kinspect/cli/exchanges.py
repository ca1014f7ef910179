"""What decode and sniff share: the options that choose and filter exchanges, and the way an
exchange, a notice and the summary are printed (through cli.output)."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from kinspect.capture.source import sniff_format
from kinspect.cli.output import Output
from kinspect.decode.filters import ExchangeFilter, resolve_api
from kinspect.inputs import Tally, walk
from kinspect.decode.pipeline import MAX_CONNECTIONS
from kinspect.wire.frames import MAX_FRAME
from kinspect.render.safe import escape, path_text
from kinspect.decode.summary import Summary


def _apis(ctx, param, values):
    try:
        return [resolve_api(v) for v in values]
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def filter_options(command):
    """--api, --client-id, --topic, --errors, --min-latency-ms, --conn, --correlation-id: the command
    gets ``keep``, an ExchangeFilter."""
    options = [
        click.option("--api", "api_keys", multiple=True, callback=_apis,
                     help="Only these APIs (name or key; repeatable)."),
        click.option("--client-id", "client_ids", multiple=True,
                     help="Only these client ids (glob patterns; repeatable)."),
        click.option("--topic", "topics", multiple=True, help="Only exchanges touching these topics (repeatable)."),
        click.option("--errors", "errors_only", is_flag=True,
                     help="Only exchanges with error codes or decode problems."),
        click.option("--min-latency-ms", type=float, help="Only exchanges at least this slow."),
        click.option("--conn", "conns", multiple=True, metavar="ADDRESS",
                     help="Only these connections: HOST:PORT, HOST or :PORT of either end, or the whole "
                          "CLIENT-BROKER text as shown (glob patterns; repeatable)."),
        click.option("--correlation-id", "correlation_ids", multiple=True, type=int, metavar="N",
                     help="Only exchanges with this correlation id (repeatable; with --conn for one exchange)."),
    ]

    @functools.wraps(command)
    def wrapped(*args, api_keys, client_ids, topics, errors_only, min_latency_ms, conns, correlation_ids,
                **kwargs):
        return command(*args, keep=ExchangeFilter(api_keys, client_ids, topics, errors_only, min_latency_ms,
                                                  conns, correlation_ids), **kwargs)

    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


def _stack(command, options):
    for option in reversed(options):
        command = option(command)
    return command


def port_options(command):
    """--port (repeatable; ``ports``) and --no-heuristic: where Kafka is looked for."""
    return _stack(command, [
        click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True,
                     help="Kafka broker port besides 9092 (repeatable). Other ports are found by heuristics."),
        click.option("--no-heuristic", is_flag=True, help="Only decode the given ports; no detection on other ports."),
    ])


def report_options(summary_help: str):
    """--summary (its help says when it comes), -v/--verbose and --strict."""
    def decorate(command):
        return _stack(command, [
            click.option("--summary", is_flag=True, help=summary_help),
            click.option("-v", "--verbose", is_flag=True, help="Show each exchange's decoded request and response."),
            click.option("--strict", is_flag=True, help="Exit 1 when any exchange has a problem."),
        ])
    return decorate


def stream_bound_options(command):
    """--max-frame and --max-connections: the bounds of TCP reassembly and framing."""
    return _stack(command, [
        click.option("--max-frame", type=click.IntRange(1024), default=MAX_FRAME, show_default=True,
                     help="Largest Kafka frame accepted, in bytes; a larger one is skipped with a notice."),
        click.option("--max-connections", type=click.IntRange(1), default=MAX_CONNECTIONS, show_default=True,
                     help="TCP connections followed at once; past it those idle longest expire (with a notice)."),
    ])


def print_record(out: Output, record: dict, verbose: bool, write=None) -> None:
    """A record's lines: through rich on a terminal; piped (``write``: the stream's), as the plain
    escaped text rich prints there (no colour, no wrapping), written straight out as dump's table
    does: rich's print costs ~100 µs a line, more than all the rest of a notice's work."""
    from kinspect.render import text  # rich: text output only

    plain = write is not None
    lines = ([text.exchange_plain(record), *text.problem_plain(record)] if plain
             else [text.exchange_line(record), *text.problem_lines(record)])
    if "capture" in record:  # decode of several captures: each line says whose
        named = f"{record['capture']}  "
        lines[0] = named + lines[0] if isinstance(lines[0], str) else text.Text(named).append_text(lines[0])
    if verbose and record.get("type") == "exchange":
        for side in ("request", "response"):
            body = record.get(side)
            if body is not None:
                lines.append(f"  {side}:")
                lines += text.tree_lines(body)
    if not plain:
        for line in lines:
            out.text(line)
        return
    write("".join([escape(line, layout=True) + "\n" for line in lines]))


def emit(out: Output, output, mode: str, totals: Summary, lines: bool, verbose: bool, write=None) -> None:
    """One finished record of a live adapter (sniff, the proxy) out as its mode says: into the
    summary's totals, or written at once (JSON pieces, or the text lines) and flushed, unless
    ``lines`` is false (the dashboard holds the terminal)."""
    from kinspect.decode.finish import JSON, SUMMARY

    if mode == SUMMARY:
        totals.add(output)
    elif lines:
        if mode == JSON:
            for piece in output:
                out.write_line(piece)
        else:
            print_record(out, output, verbose, write)
        out.flush()


SCHEMA_COLUMNS = ["api_name", "side", "subject", "id", "format", "records", "decoded", "unknown", "failed"]


SUBJECT_SHOWN = 120  # characters of a subject in the text table (--json has it whole)
SCHEMA_ROWS_SHOWN = 1000  # rows of the text table, those of most records (a terminal table costs ~1 ms a row)


def _schema_cells(row: dict) -> dict:
    subject = row["subject"]
    if isinstance(subject, str) and len(subject) > SUBJECT_SHOWN:
        subject = f"{subject[:SUBJECT_SHOWN]}… ({len(subject) - SUBJECT_SHOWN} more characters)"
    return {**row, "subject": subject, "id": row["id"] if row["id"] is not None else row.get("guid")}


def print_summary(out: Output, totals: Summary) -> None:
    rows, errors, bounds = totals.rows(), totals.error_rows(), totals.bound_rows()
    schemas = totals.schema_rows()
    if out.as_json:
        for row in rows + errors + schemas + bounds:
            out.record(row)
        return
    out.table("Exchanges by API", rows, ["api_name", "versions", "count", "answered", "unanswered",
                                          "latency_p50_ms", "latency_p99_ms", "latency_max_ms", "bytes"])
    if errors:
        out.table("Errors by code and topic", errors, ["api_name", "error", "topic", "count"])
    if schemas:
        shown = sorted(schemas, key=lambda r: -r["records"])[:SCHEMA_ROWS_SHOWN] if len(schemas) > SCHEMA_ROWS_SHOWN \
            else schemas
        out.table("Keys and values by schema", [_schema_cells(r) for r in shown], SCHEMA_COLUMNS)
        if len(shown) < len(schemas):
            out.text(f"{len(schemas) - len(shown)} more rows of fewer records (--json lists them all)")
    if totals.orphans or totals.notices:
        notes = ", ".join(f"{n} {kind}" for kind, n in totals.notices.items())
        out.text(f"{totals.orphans} responses without request; notices: {notes or 'none'}")
    for row in bounds:
        out.text(f"{row['count']} {row['kind']} notices, the first: {escape(row['what'])}")


class CaptureWalk:
    """The captures under ``paths`` as decode reads them (inputs.walk: files, .gz, directories, -),
    each entry that can be read; what cannot be read, and a named file that is no capture, are
    said on stderr and leave ``unreadable`` true. ``tally`` counts them all."""

    def __init__(self, paths, out: Output):
        self.paths, self.out = paths, out
        self.tally = Tally()
        self.unreadable = False

    def __iter__(self):
        for entry in walk(self.paths, recognise_capture, streams=True, unrecognised="not a capture"):
            self.tally.add(entry)
            if entry.unreadable is not None:
                self.out.warn(f"kinspect: {path_text(entry.path)}: {entry.unreadable}")
                self.unreadable = True
            elif entry.skipped is not None:
                if entry.named:
                    self.out.warn(f"kinspect: {path_text(entry.path)}: {entry.skipped}: not a capture file")
                    self.unreadable = True
            else:
                yield entry

    def nothing_read(self) -> str | None:
        """The line to say when no capture was read at all (None when one was, or failed)."""
        if self.tally.read or self.tally.unreadable:
            return None
        skipped = self.tally.skipped_line()
        return (f"kinspect: no capture in {', '.join(path_text(p) for p in self.paths)}"
                + (f": {skipped}" if skipped else ": no files"))


def recognise_capture(path: Path, named: bool) -> str | None:
    """'capture' when the file starts as a pcap, a pcapng or a gzip file does (named files are
    the command's to judge: it reads them and says what they are not)."""
    if named:
        return "capture"
    with open(path, "rb") as f:
        return "capture" if sniff_format(f.read(4)) is not None else None
