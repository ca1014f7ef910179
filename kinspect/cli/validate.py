"""kinspect validate: record integrity checks over captures, segments and record files, for CI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import click
from rich.text import Text

from kinspect.cli.keylog import keylog_option, keylog_warnings
from kinspect.cli.limits import limit_options
from kinspect.cli.options import show_secrets_option
from kinspect.cli.schemas import open_schemas, schema_stage, write_notices
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import create_output, refuse_writing_over_inputs
from kinspect.limits import Limits
from kinspect.problems import ERROR, EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE, INFO, WARNING
from kinspect.render.junit import JUnitReport
from kinspect.render.safe import escape, path_text
from kinspect.inputs import Entry, Tally, readable, walk
from kinspect.validate import FileReport, Finding, classify, validate_file

SHOWN_PER_FILE = 200
UNRECOGNISED = "not a capture, segment or record file"
STYLES = {ERROR: "red", WARNING: "yellow", INFO: "dim"}

EPILOG = """\b
Examples:
  kinspect validate tests/fixtures/ pcaps/capture.pcapng
  kinspect validate /var/lib/kafka/data/orders-0/00000000000000000000.log
  kinspect validate --strict --junit validate.xml fixtures/
  kinspect validate --json samples/ | jq 'select(.type == "finding")'

\b
What is read: pcap/pcapng (also .gz): every record set of every Produce and Fetch;
Kafka log segments (*.log); files of record batches or message sets (told by content);
directories, recursively (files that are none of these are skipped).

\b
Checks: batch and message CRCs, framing, magic, record structure and counts, codecs and
decompression, attributes, timestamps, offsets, producer fields, control records, and keys and
values framed with a schema id that do not read as their schema (schema_value: the registry's
_schemas topic beside the segments, in the capture, or --schemas SOURCE). A damaged unit is
reported and the walk resumes at the next valid batch.

\b
Exit codes: 0 clean; 1 problems (errors, or warnings too with --strict); 2 usage error;
3 a file is unreadable or not something kinspect validates; 4 kinspect could not finish
(an internal error); 130 interrupted.
"""


@click.command(epilog=EPILOG)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--strict", is_flag=True, help="Fail on warnings too, not only on errors.")
@click.option("--junit", "junit_file", type=click.Path(dir_okay=False, writable=True),
              help="Also write a JUnit XML report here (a testsuite per file).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show information findings too (compaction gaps, padding, partial fetches).")
@click.option("--skip-unknown", is_flag=True,
              help="Skip named files that are not captures, segments or record files (as in "
                   "directories) instead of failing with exit 3; for pre-commit.")
@click.option("--schemas", "schema_sources", multiple=True, metavar="SOURCE",
              help="Check keys and values framed with a schema id against the schemas of SOURCE too: a "
                   "broker log dir or its _schemas-N directory, a capture, a directory of .avsc/.proto/.json "
                   "files named by id, or an http(s):// registry. Repeatable. The _schemas topic beside the "
                   "validated segments, and a capture's own, are read without it.")
@click.option("--schemas-topic", default="_schemas", show_default=True, metavar="NAME",
              help="The registry's topic (kafkastore.topic), in log dirs and captures.")
@show_secrets_option(note="In findings; raw SASL tokens after a SaslHandshake v0 are noted with -v.")
@keylog_option()
@limit_options
@output_options
def validate(paths, strict, junit_file, verbose, skip_unknown, schema_sources, schemas_topic, show_secrets, keylog,
             out: Output, limits: Limits):
    """Check Kafka record batches in captures, log segments, record files and directories.

    Each finding names its check, severity, byte position, batch and base offset, and what
    was expected and found.
    """
    keylogs = keylog.paths if keylog is not None else []
    refuse_writing_over_inputs([*paths, *keylogs], {"--junit": junit_file}, reads=_would_read)
    junit_out = create_output(junit_file, "--junit", [*paths, *keylogs]) if junit_file else None
    junit = JUnitReport(strict) if junit_file else None
    progress = _Progress(out)
    files = failed = unreadable = 0
    shown: list[Finding] = []
    hidden = 0
    for line in keylog_warnings(keylog):
        out.warn(line)
    tally = Tally()
    schemas, schema_exit = open_schemas(schema_sources, schemas_topic, limits, out, beside=paths)
    stages = _capture_stages(schemas, schemas_topic, show_secrets, keylog, out)
    try:
        for event in _events(paths, tally, skip_unknown=skip_unknown, progress=progress,
                             max_output=limits, show_secrets=show_secrets, keylog=keylog,
                             schemas=schemas, capture_stages=stages):
            event.file = path_text(event.file)  # a name that is not UTF-8 is shown as \xNN
            if isinstance(event, Finding):
                if junit is not None:
                    junit.add(event)
                if out.as_json:
                    out.record(event.to_dict())
                elif verbose or event.severity != INFO:
                    if len(shown) < SHOWN_PER_FILE:
                        shown.append(event)
                    else:
                        hidden += 1
                continue
            progress.done()
            files += 1
            status = event.status(strict)
            failed += status == "problems"
            unreadable += status == "unreadable"
            if event.unreadable is not None:
                out.warn(f"kinspect: {event.file}: {event.unreadable}")
            if junit is not None:
                junit.end_file(event)
            if out.as_json:
                out.record(event.to_dict(strict))
            else:
                _print_file(out, event, shown, hidden, strict)
            shown, hidden = [], 0
    finally:
        progress.done()
        if junit is not None:
            with junit_out:
                junit_out.write(junit.to_xml())
    write_notices(schemas, None, out)
    if not out.as_json:
        out.text(f"{files} file(s): {files - failed - unreadable} OK, {failed} with problems, "
                 f"{unreadable} unreadable")
    skipped = tally.skipped_line()
    if verbose:
        for path, why in tally.skipped_paths:
            out.warn(f"kinspect: skipped {path_text(path)}: {why}")
    if files == 0:
        out.warn(f"kinspect: nothing to validate in {', '.join(path_text(p) for p in paths)}"
                 + (f": {skipped}" if skipped else ": no files") + "; kinspect validate reads pcap/pcapng "
                 "captures, *.log segments and files of record batches")
        sys.exit(EXIT_UNREADABLE)
    if skipped:
        out.warn(f"kinspect: {skipped}" + ("" if verbose else "; -v lists them"))
    sys.exit(EXIT_UNREADABLE if unreadable or schema_exit else EXIT_PROBLEMS if failed else EXIT_OK)


def _capture_stages(schemas, topic: str, show_secrets: bool, keylog, out: Output):
    """A capture's finishing stages: the schema stage (its own registry records read first)."""
    options = {"show_secrets": show_secrets, "keylog": keylog}

    def stages(path: str) -> tuple:
        stage = schema_stage(schemas, topic, path, show_secrets, None, out, options)
        return () if stage is None else (stage,)
    return stages


def _events(paths, tally: Tally, *, skip_unknown: bool, **options) -> Iterator[Finding | FileReport]:
    """validate_file's findings and report for every file inputs.walk finds (named files are
    validate's to judge: one it does not read is unreadable, unless --skip-unknown)."""
    for entry in walk(paths, _recognise, unrecognised=UNRECOGNISED):
        tally.add(entry)
        if entry.unreadable is not None:
            report = FileReport(str(entry.path), "unknown")
            report.unreadable = entry.unreadable
            yield report
        elif entry.skipped is not None:
            continue
        elif entry.named and entry.kind is None and skip_unknown:
            tally.read -= 1
            tally.add(Entry(entry.path, True, skipped=UNRECOGNISED))
        else:
            yield from validate_file(entry.path, entry.kind, **options)


def _recognise(path: Path, named: bool) -> str | None:
    readable(path)
    return classify(path, explicit=named)


def _print_file(out: Output, report: FileReport, shown: list[Finding], hidden: int,
                strict: bool) -> None:
    status = report.status(strict)
    label = {"ok": ("OK", "green"), "problems": ("FAIL", "bold red"),
             "unreadable": ("UNREADABLE", "bold red")}[status]
    counts = [f"{n} {name}{'s' if n != 1 else ''}" for name, n in
              (("error", report.counts[ERROR]), ("warning", report.counts[WARNING]),
               ("note", report.counts[INFO])) if n]
    if report.unreadable is not None:
        detail = report.unreadable
    else:
        units = f"{report.batches} batches, {report.records} records"
        if report.kind == "capture":
            units = f"{report.record_sets} record sets, {units}"
        detail = f"{report.kind}: {units}" + (f"; {', '.join(counts)}" if counts else "")
    out.text(Text.assemble((f"{label[0]:<11}", label[1]), (escape(report.file), "bold"),
                           escape(f"  {detail}")))
    for finding in shown:
        out.text(Text.assemble("  ", (f"{finding.severity:<8}", STYLES.get(finding.severity, "")),
                               escape(str(finding))))
    if hidden:
        out.text(f"  ... {hidden} more findings (use --json for all of them)")


class _Progress:
    """A progress bar for each file that takes long (Output.progress), on a terminal only."""

    def __init__(self, out: Output):
        self.out = out
        self.file = None
        self.bar = None

    def __call__(self, file: str, done: int, total: int) -> None:
        if file != self.file:
            self.done()
            self.file = file
            self.bar = self.out.progress(total, "validating").__enter__()
        if self.bar is not None:
            self.bar.update(done)

    def done(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
        self.file = self.bar = None


def _would_read(path: Path) -> bool:
    """Whether a file found in an input directory is one validate reads."""
    return classify(path, explicit=False) is not None
