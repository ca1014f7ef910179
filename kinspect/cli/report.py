"""kinspect report: captures and a log dir → one self-contained HTML page of charts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kinspect.cli.doctor import SchemaValues, read_captures
from kinspect.cli.keylog import keylog_warnings
from kinspect.cli.limits import limit_options
from kinspect.cli.options import capture_options, capture_settings, threshold_options
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import create_output, refuse_writing_over_inputs
from kinspect.cli.schemas import schema_options
from kinspect.doctor.options import Thresholds
from kinspect.limits import Limits
from kinspect.problems import EXIT_OK, EXIT_UNREADABLE
from kinspect.render.safe import path_text

EPILOG = """\b
Examples:
  kinspect report capture.pcapng -o report.html
  kinspect report capture.pcapng --log-dir /var/lib/kafka/data -o incident-4711.html
  kinspect report --log-dir /var/lib/kafka/data -o storage.html
  kinspect report --keylog sslkeys.log tls-capture.pcapng -o report.html
  kinspect report --schemas /var/lib/kafka/data capture.pcapng -o report.html

\b
The page holds doctor's findings (each linked to its chart and its exchanges), requests/s and
bytes/s by API and broker, latency p50/p99 per API over time and its histogram, rebalances and
lag per group, error codes over time, the client inventory with KIP-896 readiness, keys and
values by schema (with --schemas, or the capture's own _schemas records), and for a
log dir its partition sizes, batch sizes, codecs, timestamps over offsets and validate's
findings. One file, no network needed to view it: it opens from a mail attachment.

\b
Exit codes: 0 written; 1 written, and a capture was damaged or held no Kafka traffic; 2 usage
error; 3 input unreadable (the page is written from what could be read, if anything); 4 kinspect
could not finish; 130 interrupted.
"""


@click.command(epilog=EPILOG)
@click.argument("captures", nargs=-1, metavar="[CAPTURE...]")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), required=True,
              help="The HTML file to write.")
@click.option("--log-dir", type=click.Path(path_type=Path),
              help="A broker's data directory: partition sizes, batches, codecs, timestamps, validate's "
                   "findings and open transactions.")
@click.option("--title", default="kinspect report", show_default=True, help="The page's title.")
@threshold_options
@capture_options
@schema_options
@limit_options
@output_options
def report(captures, output, log_dir, title, thresholds: Thresholds, ports, no_heuristic, max_frame,
           max_connections, show_secrets, keylog, schema_sources, schemas_topic, raw_values, out: Output,
           limits: Limits):
    """Write one self-contained HTML report of captures and a broker's log dir.

    Reads captures (pcap/pcapng, .gz, directories, or - for stdin), a broker log dir (--log-dir),
    or both, and draws what kinspect doctor, clients, decode --summary and validate find.
    """
    from kinspect.report.gather import Gathered
    from kinspect.report.logdir import LogDirUnreadable
    from kinspect.report.model import build
    from kinspect.report.page import render

    if not captures and log_dir is None:
        raise click.UsageError("give a capture, --log-dir DIR, or both")
    if keylog is not None and not captures:
        raise click.UsageError("--keylog goes with a capture")
    inputs = [*captures, log_dir, *(keylog.paths if keylog is not None else ())]
    refuse_writing_over_inputs(inputs, {"--output": output})
    for line in keylog_warnings(keylog):
        out.warn(line)
    gathered = Gathered(thresholds)
    exit_code = EXIT_OK
    if captures:
        settings = capture_settings(ports, no_heuristic, max_frame, max_connections, show_secrets, keylog, limits)
        values = SchemaValues(schema_sources, schemas_topic, raw_values, settings, out)
        exit_code = max(values.exit_code, read_captures(captures, out, settings, gathered.add, values.stages))
        gathered.notices += values.finish()
    if log_dir is not None:
        try:
            gathered.log_dir(log_dir, limits)
        except LogDirUnreadable as e:
            out.warn(f"kinspect: {path_text(str(e))}")
            sys.exit(EXIT_UNREADABLE)
    if exit_code == EXIT_UNREADABLE and not gathered.doctor.exchanges and log_dir is None:
        sys.exit(exit_code)  # nothing was read: no page
    gathered.finish()
    html = render(build(gathered, [path_text(str(c)) for c in captures],
                        path_text(str(log_dir)) if log_dir is not None else None), title)
    with create_output(output, "--output", inputs) as written:
        written.write(html.encode("utf-8"))
    out.warn(f"kinspect: wrote {path_text(str(output))} ({len(html.encode('utf-8')):,} bytes; "
             f"{len(gathered.findings)} findings)")
    sys.exit(exit_code)
