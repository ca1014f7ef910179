"""kinspect decode: captures → paired Kafka exchanges."""

from __future__ import annotations

import sys

import click

from kinspect.cli.exchanges import (CaptureWalk, filter_options, port_options, print_record, print_summary, report_options,
                                    stream_bound_options)
from kinspect.cli.keylog import keylog_counts, keylog_news, keylog_option, keylog_warnings, no_kafka_message
from kinspect.cli.limits import limit_options
from kinspect.cli.options import show_secrets_option
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import refuse_writing_over_inputs
from kinspect.cli.schemas import open_schemas, schema_options, schema_stage, write_notices
from kinspect.limits import Limits
from kinspect.decode.filters import ExchangeFilter
from kinspect.decode.finish import JSON, RECORD, SUMMARY
from kinspect.decode.parallel import WorkerDied, run_outputs
from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun
from kinspect.problems import EXIT_OK, EXIT_PROBLEMS, EXIT_UNFINISHED, EXIT_UNREADABLE
from kinspect.render.safe import path_text
from kinspect.decode.schema_counts import tally
from kinspect.decode.summary import Summary

EPILOG = """\b
Examples:
  kinspect decode pcaps/librdkafka-produce-consume.pcapng
  kinspect decode --json capture.pcap.gz | jq 'select(.api_name == "Produce")'
  tcpdump -i any -w - port 9092 | kinspect decode -
  kinspect decode --port 19092 --errors --min-latency-ms 50 prod.pcapng
  kinspect decode --summary capture.pcapng
  kinspect decode -v --api Fetch --topic orders capture.pcapng
  kinspect decode --keylog sslkeys.log tls-capture.pcapng

\b
Exit codes: 0 decoded; 1 problems (capture damaged, no Kafka traffic found, or with --strict
any problem in an exchange); 2 usage error; 3 input unreadable; 4 kinspect could not finish
(a worker process died, or an internal error); 130 interrupted.
"""


@click.command(epilog=EPILOG)
@click.argument("captures", nargs=-1, required=True, metavar="CAPTURE...")
@port_options
@filter_options
@report_options("Per-API counts, latency p50/p99/max, bytes, errors by code and topic, keys and values by "
                "schema (decoded, unknown id, failed).")
@stream_bound_options
@click.option("-j", "--jobs", type=click.IntRange(1), default=None,
              help="Processes decoding bodies for --json and --summary. Default: one, while the "
                   "work measured so far says that is faster (small captures); else workers for the "
                   "rest, one per CPU beyond the first (two on two CPUs). -j1: one process.")
@click.option("-c", "--count", type=click.IntRange(1), default=None,
              help="Stop after this many exchanges (after filters), as tcpdump -c and kcat -c do.")
@schema_options
@show_secrets_option
@keylog_option()
@limit_options
@output_options
def decode(captures, ports, no_heuristic, keep: ExchangeFilter, summary, verbose, strict, max_frame, max_connections, jobs, count,
           schema_sources, schemas_topic, raw_values, show_secrets, keylog, out: Output, limits: Limits):
    """Decode Kafka traffic in pcap/pcapng captures (a file, a .gz, or - for stdin).

    Every request is paired with its response by connection and correlation id, with latency,
    decoded bodies, expanded record batches and error codes.
    """
    refuse_writing_over_inputs([*captures, *(keylog.paths if keylog is not None else ())])
    totals = Summary()
    exit_code = EXIT_OK
    any_problems = False
    mode = SUMMARY if summary else JSON if out.as_json else RECORD
    write = None if out.interactive else out.stream.write  # piped text: plain lines (see print_record)
    for line in keylog_warnings(keylog):
        out.warn(line)
    shown = kept = 0
    schemas = notices = None
    if not raw_values:
        from kinspect.schemas.stage import WorkerNotices
        schemas, exit_code = open_schemas(schema_sources, schemas_topic, limits, out)
        notices = WorkerNotices()
    found = CaptureWalk(captures, out)
    entries = list(found)
    several = len(entries) > 1  # each record names its capture
    for entry in entries:
        source = str(entry.path)
        if count is not None and shown >= count:
            break
        counts = keylog_counts(keylog)
        run = DecodeRun(source, ports=set(ports) | {9092}, heuristic=not no_heuristic, max_frame=max_frame,
                        limits=limits, max_connections=max_connections, show_secrets=show_secrets,
                        keylog=keylog, capture_name=path_text(source) if several else None)
        stage = None if schemas is None else schema_stage(
            schemas, schemas_topic, source, show_secrets, notices, out,
            dict(ports=set(ports) | {9092}, heuristic=not no_heuristic, max_frame=max_frame, limits=limits,
                 max_connections=max_connections, keylog=keylog))
        if stage is not None:
            stage.packed_json = mode == JSON  # packed batches' values decoded as their JSON is written
        stages = () if stage is None else (stage, tally) if summary else (stage,)  # tally: counts by schema
        try:
            with out.progress(run.size) as bar:
                # with --count, this process writes every line, so that it can count them
                outputs = run_outputs(run, keep, mode, 1 if count else jobs, bar.update,
                                   sink=out if mode == JSON and not count else None, stages=stages)
                for output, has_error in outputs:
                    any_problems |= has_error
                    if output is None:  # filtered out, or a JSON line already written
                        continue
                    kept += 1
                    if mode == SUMMARY:
                        totals.add(output)
                    elif mode == JSON:
                        out.write_line(output)
                    else:
                        print_record(out, output, verbose, write)
                    if count is not None and _is_exchange(output):
                        shown += 1
                        if shown >= count:
                            outputs.close()
                            break
        except CaptureUnreadable as e:
            out.warn(f"kinspect: {source}: {e}")
            exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        except WorkerDied as e:
            cut = " (its last line may be cut off)" if e.cut else ""
            out.warn(f"kinspect: {source}: {e}. The output stops short{cut}: re-run with -j1 to "
                     f"decode in one process (it needs less memory)")
            sys.exit(EXIT_UNFINISHED)
        for line in keylog_news(run.keylog, counts, path_text(source)):
            out.warn(line)
        for problem in run.capture_problems:
            out.warn(f"kinspect: {source}: {problem}")
            if out.as_json and not summary:
                out.record({"type": "notice", "kind": "capture", "source": path_text(source), **problem.to_dict()})
            exit_code = max(exit_code, EXIT_PROBLEMS)
        if run.kafka_connections == 0:
            out.warn(no_kafka_message(source, run))
            exit_code = max(exit_code, EXIT_PROBLEMS)
    if summary:
        print_summary(out, totals)
    if schemas is not None:
        write_notices(schemas, notices, out)
    if found.unreadable:
        exit_code = max(exit_code, EXIT_UNREADABLE)
    skipped = found.tally.skipped_line()
    if verbose:
        for path, why in found.tally.skipped_paths:
            out.warn(f"kinspect: skipped {path_text(path)}: {why}")
    nothing = found.nothing_read()
    if nothing is not None:
        out.warn(nothing + "; kinspect decode reads pcap and pcapng files (also gzip'ed)")
        exit_code = max(exit_code, EXIT_UNREADABLE)
    elif skipped and not verbose:
        out.warn(f"kinspect: {skipped}; -v lists them")
    if keep.active and found.tally.read and kept == 0 and out.json_writes == 0:
        out.warn(f"kinspect: no exchange matched the filters ({keep.describe()})")
    if strict and any_problems:
        exit_code = max(exit_code, EXIT_PROBLEMS)
    sys.exit(exit_code)


def _is_exchange(output) -> bool:
    if isinstance(output, (bytes, bytearray, memoryview)):
        return bytes(output[:18]) == b'{"type":"exchange"'
    return output.get("type") == "exchange"
