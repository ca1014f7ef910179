"""kinspect doctor: captures and a log dir → the problems they show, explained."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kinspect.cli.exchanges import CaptureWalk
from kinspect.cli.keylog import keylog_warnings, no_kafka_message
from kinspect.cli.limits import limit_options
from kinspect.cli.options import capture_options, capture_settings, threshold_options
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import refuse_writing_over_inputs
from kinspect.cli.schemas import open_schemas, schema_options, schema_stage, write_notices
from kinspect.doctor.finding import ERROR, INFO, RANK, SEVERITIES, WARNING, iso
from kinspect.doctor.options import Thresholds
from kinspect.doctor.run import CHECKS, Doctor
from kinspect.doctor.source import capture_records
from kinspect.limits import Limits
from kinspect.decode.parallel import WorkerDied
from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun
from kinspect.problems import EXIT_OK, EXIT_PROBLEMS, EXIT_UNFINISHED, EXIT_UNREADABLE
from kinspect.render.safe import escape, path_text, text_of

EPILOG = """\b
Examples:
  kinspect doctor capture.pcapng
  kinspect doctor capture.pcapng --log-dir /var/lib/kafka/data
  kinspect doctor --log-dir /var/lib/kafka/data          hanging transactions, from the files alone
  kinspect doctor --json capture.pcapng | jq 'select(.severity != "info")'
  kinspect doctor --check lag --max-lag-seconds 10 capture.pcapng
  kinspect doctor --keylog sslkeys.log tls-capture.pcapng
  kinspect decode --conn 10.0.0.5:51234-10.0.0.9:9092 --correlation-id 812 -v capture.pcapng
                                                         (an exchange a finding names)

\b
Checks: rebalance, lag, removed_api_versions, hanging_transaction, producer_sequence,
throttle, errors, slow, schemas (--check picks some; the README describes each and its fields).

\b
Exit codes: 0 no finding at warning or error; 1 findings at warning or above (or a capture
damaged, or without Kafka traffic); 2 usage error; 3 input unreadable; 4 kinspect could not
finish; 130 interrupted.
"""


@click.command(epilog=EPILOG)
@click.argument("captures", nargs=-1, metavar="[CAPTURE...]")
@click.option("--log-dir", type=click.Path(path_type=Path),
              help="A broker's data directory: open and hanging transactions (joining "
                   "__transaction_state, producer snapshots and control records).")
@click.option("--check", "checks", multiple=True, type=click.Choice(sorted(CHECKS)),
              help="Run only these checks (repeatable). Default: all.")
@click.option("--series", is_flag=True, help="--json: also a lag_series line per group partition "
                                             "(its lag over the capture), findings or not.")
@threshold_options
@capture_options
@schema_options
@limit_options
@output_options
def doctor(captures, log_dir, checks, series, thresholds: Thresholds, ports, no_heuristic, max_frame,
           max_connections, show_secrets, keylog, schema_sources, schemas_topic, raw_values, out: Output,
           limits: Limits):
    """Find what is wrong in Kafka traffic and a broker's log dir, and explain it.

    Reads captures (pcap/pcapng, .gz, or - for stdin), a broker log dir (--log-dir), or both,
    and runs the checks over every exchange: rebalances, consumer lag, API versions Kafka 4
    removed, hanging transactions, producer sequence errors, throttling, errors and slow
    exchanges. Each finding names the exchanges to look at with kinspect decode.
    """
    if not captures and log_dir is None:
        raise click.UsageError("give a capture, --log-dir DIR, or both")
    if keylog is not None and not captures:
        raise click.UsageError("--keylog goes with a capture")
    refuse_writing_over_inputs([*captures, log_dir, *(keylog.paths if keylog is not None else ())])
    for line in keylog_warnings(keylog):
        out.warn(line)
    engine = Doctor(thresholds, only=tuple(checks))
    exit_code = EXIT_OK
    if captures:
        settings = capture_settings(ports, no_heuristic, max_frame, max_connections, show_secrets, keylog, limits)
        values = SchemaValues(schema_sources, schemas_topic, raw_values, settings, out)
        exit_code = max(values.exit_code, read_captures(captures, out, settings, engine.exchange, values.stages))
        values.finish()
    extra, notices = [], []
    if log_dir is not None and (not checks or "hanging_transaction" in checks):
        extra, notices, problems = _log_dir(log_dir, thresholds, limits, out)
        for problem in problems:
            out.warn(f"kinspect: {problem.severity}: {problem}")
    findings, bound_notices = engine.finish(extra)
    notices += bound_notices
    if out.as_json:
        for found in findings:
            out.record(found)
        if series and engine.check("lag") is not None:
            for row in engine.check("lag").rows():
                out.record({"type": "lag_series", **{k: v for k, v in row.items() if k != "evidence"}})
        for notice in notices:
            out.record(notice)
    elif findings or engine.exchanges or log_dir is not None or exit_code == EXIT_OK:
        _report(out, findings, engine, log_dir)
        for notice in notices:
            out.warn(f"kinspect: {notice['what']}")
    if any(RANK[f["severity"]] >= RANK[WARNING] for f in findings):
        exit_code = max(exit_code, EXIT_PROBLEMS)
    sys.exit(exit_code)


class SchemaValues:
    """--schemas, --schemas-topic and --raw-values for the commands reading captures through
    read_captures (doctor, report): the sources opened once, each capture's finishing stage
    (cli/schemas.py's schema_stage, in this process), the run's notices written at the end."""

    def __init__(self, sources, topic: str, raw_values: bool, settings: dict, out: Output):
        self.topic, self.settings, self.out = topic, settings, out
        self.schemas, self.exit_code = (None, EXIT_OK) if raw_values else open_schemas(
            sources, topic, settings["limits"], out)

    def stages(self, source: str) -> tuple:
        if self.schemas is None:
            return ()
        stage = schema_stage(self.schemas, self.topic, source, self.settings["show_secrets"], None, self.out,
                             self.settings)
        return () if stage is None else (stage,)

    def finish(self) -> list[dict]:
        """The run's schema notices, written to stderr and returned (the report's page lists them)."""
        return [] if self.schemas is None else write_notices(self.schemas, None, self.out)


def read_captures(captures, out: Output, settings: dict, consume, stages_of=None) -> int:
    """Every capture's finished records to ``consume``, as decode reads them (files, .gz,
    directories, -); what cannot be read is said on stderr. The exit code so far.
    ``stages_of(source)``: the more finishing stages of a capture (SchemaValues.stages)."""
    exit_code = EXIT_OK
    many = len(captures) > 1
    found = CaptureWalk(captures, out)
    for entry in found:
        source = str(entry.path)
        many = many or entry.path != Path(captures[0])
        run = DecodeRun(source, **settings)
        try:
            stages = () if stages_of is None else stages_of(source)
            with out.progress(run.size) as bar:
                for record in capture_records(run, bar.update, path_text(source) if many else None, stages):
                    consume(record)
        except CaptureUnreadable as e:
            out.warn(f"kinspect: {path_text(source)}: {e}")
            exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        except WorkerDied as e:
            out.warn(f"kinspect: {path_text(source)}: {e}")
            sys.exit(EXIT_UNFINISHED)
        for problem in run.capture_problems:
            out.warn(f"kinspect: {path_text(source)}: {problem}")
            exit_code = max(exit_code, EXIT_PROBLEMS)
        if run.kafka_connections == 0:
            out.warn(no_kafka_message(path_text(source), run))
            exit_code = max(exit_code, EXIT_PROBLEMS)
    if found.unreadable:
        exit_code = max(exit_code, EXIT_UNREADABLE)
    nothing = found.nothing_read()
    if nothing is not None:
        out.warn(nothing)
        exit_code = max(exit_code, EXIT_UNREADABLE)
    return exit_code


def _log_dir(log_dir: Path, thresholds: Thresholds, limits: Limits, out: Output):
    from kinspect.doctor.logdir import LogDirUnreadable, read_transactions

    try:
        return read_transactions(log_dir, thresholds, limits)
    except LogDirUnreadable as e:
        out.warn(f"kinspect: {path_text(str(e))}")
        sys.exit(EXIT_UNREADABLE)


# -- the text report ---------------------------------------------------------------------------

HEADINGS = {ERROR: "Errors", WARNING: "Warnings", INFO: "Info"}
STYLES = {ERROR: "bold red", WARNING: "bold yellow", INFO: "cyan"}
HIDDEN = {"type", "check", "severity", "summary", "evidence"}


def _report(out: Output, findings: list[dict], engine: Doctor, log_dir: Path | None) -> None:
    read = " and ".join(([f"{engine.exchanges} exchanges"] if engine.exchanges or log_dir is None else [])
                        + ([f"log dir {path_text(str(log_dir))}"] if log_dir is not None else []))
    if not findings:
        out.text(f"No findings in {read}.")
        return
    for severity in SEVERITIES:
        chosen = [f for f in findings if f["severity"] == severity]
        if not chosen:
            continue
        _line(out, f"{HEADINGS[severity]} ({len(chosen)})", STYLES[severity])
        for found in chosen:
            _line(out, f"  [{found['check']}] {found['summary']}", "bold" if severity != INFO else None)
            for key, value in found.items():
                if key not in HIDDEN and value not in (None, [], {}, ""):
                    out.text(f"      {key}: {_fact(key, value)}")
            for seen in found["evidence"]:
                capture = f" {seen['capture']}" if seen.get("capture") else ""
                port = str(seen["conn"] or "").rpartition(":")[2]
                port = f" --port {port}" if port.isdigit() and port != "9092" else ""
                out.text(f"      evidence: {iso(seen['time']) or '-'}  kinspect decode{port} --conn {seen['conn']} "
                         f"--correlation-id {seen['correlation_id']}{capture}")
    counts = ", ".join(f"{sum(1 for f in findings if f['severity'] == s)} {s}" for s in SEVERITIES)
    out.text(f"{len(findings)} findings ({counts}) in {read}.")


def _line(out: Output, text: str, style: str | None) -> None:
    if style and out.interactive:
        from rich.text import Text

        out.text(Text(escape(text), style=style))
    else:
        out.text(text)


FACTS_LISTED = 10


MOMENTS = frozenset({"open_since", "committed_at", "log_end_at", "time", "started", "assigned"})


def _fact(key: str, value) -> str:
    if key in MOMENTS and isinstance(value, (int, float)):
        return iso(value) or str(value)
    if isinstance(value, list):
        shown = [_compact(v) for v in value[:FACTS_LISTED]]
        more = f" (+{len(value) - FACTS_LISTED} more)" if len(value) > FACTS_LISTED else ""
        return "; ".join(shown) + more
    return _compact(value)


def _compact(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fact(k, v)}" for k, v in value.items() if v is not None) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(_compact(v) for v in value)
    return text_of(value)
