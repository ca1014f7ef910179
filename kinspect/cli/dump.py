"""kinspect dump: every file a Kafka broker writes, decoded and checked."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import click

from kinspect.cli.limits import limit_options
from kinspect.cli.options import show_secrets_option
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import refuse_writing_over_inputs
from kinspect.cli.schemas import open_schemas
from kinspect.inputs import Tally, readable, walk
from kinspect.limits import Limits
from kinspect.problems import EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE
from kinspect.render.dump_output import dump_renderer
from kinspect.render.dump_views import MODES
from kinspect.render.safe import path_text
from kinspect.storage import files
from kinspect.storage.dump import DumpOptions, dump_file
from kinspect.storage.mapped import mapped, release

EPILOG = """\b
Examples:
  kinspect dump /var/lib/kafka/orders-0/00000000000000000000.log
  kinspect dump --records --data orders-0/                  every file of a partition
  kinspect dump --data __consumer_offsets-12/00000000000000000000.log
  kinspect dump --json --records logs/ | jq 'select(.type == "batch")'
  kinspect dump --data orders-0/ --schemas /var/lib/kafka     Avro/Protobuf values decoded
  kinspect dump --format kafka --data 00000000000000000000.log > mine.txt
  diff mine.txt <(kafka-dump-log.sh --print-data-log --offsets-decoder --files ...)

\b
Reads .log segments, .index, .timeindex, .snapshot (producer state), .txnindex,
KRaft .checkpoint snapshots, leader-epoch-checkpoint, the offset checkpoints,
partition.metadata, meta.properties, quorum-state. Records of __consumer_offsets,
__transaction_state, __share_group_state and __cluster_metadata are decoded by type with
--data; secrets in __cluster_metadata (secret config values, SCRAM credentials) are
redacted unless --show-secrets, in every format.
Damage (cut-off tails, garbage, zero-filled space) is reported with its position and
size, and the dump goes on at the next valid batch. Files are only read (mmap).

\b
Exit codes: 0 no errors; 1 errors found (or warnings, with --strict); 2 usage error;
3 a file unreadable or of no known kind; 4 kinspect could not finish (an internal error);
130 interrupted.
"""

PROGRESS_STEP = 1 << 20  # bytes between progress updates (and releases of walked pages)
UNRECOGNISED = "not a file of a Kafka log dir"


@click.command(epilog=EPILOG)
@click.argument("paths", nargs=-1, metavar="FILE|DIR...", type=click.Path(path_type=Path, readable=False))
@click.option("--files", "listed", multiple=True, metavar="FILE,...",
              help="Files to dump, comma-separated, as kafka-dump-log takes them (the same as naming them).")
@click.option("--records", "--deep-iteration", is_flag=True,
              help="Each batch's records (offset, timestamp, sizes).")
@click.option("--data", "--print-data-log", is_flag=True,
              help="Keys, values and headers too (implies --records).")
@click.option("--decode", "mode", type=click.Choice(MODES), default="auto", show_default=True,
              help="How --data shows keys and values.")
@click.option("--format", "style", type=click.Choice(["table", "kafka", "kafka-exact"]),
              default="table", show_default=True,
              help="kafka: kafka-dump-log's lines, to diff against it, with control characters of "
                   "keys, values and names escaped; kafka-exact: byte for byte, control "
                   "characters included (for a file to diff, not a terminal). Secrets redacted "
                   "unless --show-secrets.")
@click.option("--type", "kind", type=click.Choice(files.KINDS),
              help="Read every FILE as this kind, whatever its name.")
@click.option("--no-internal", is_flag=True,
              help="Show internal topics' keys and values as bytes, not decoded records.")
@click.option("--no-checks", is_flag=True,
              help="Skip CRC and record checks: batch headers only (fastest).")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("-v", "--verbose", is_flag=True, help="List the files of the directories that were skipped, and why.")
@click.option("--schemas", "schema_sources", multiple=True, metavar="SOURCE",
              help="With --data: decode Avro, Protobuf and JSON Schema keys and values framed with a "
                   "schema id, with the schemas of SOURCE: a broker log dir or its _schemas-N "
                   "directory, a capture, a directory of .avsc/.proto/.json files named by id, or an "
                   "http(s):// registry. Repeatable. The _schemas topic of the dumped log dir is "
                   "read without it.")
@click.option("--schemas-topic", default="_schemas", show_default=True, metavar="NAME",
              help="The registry's topic (kafkastore.topic), in log dirs and captures.")
@click.option("--raw-values", is_flag=True,
              help="With --data: keys and values as their bytes, even when a schema decodes them.")
@show_secrets_option(scope="With --data", note="Here: those of __cluster_metadata records (a listener's "
                     "sasl.jaas.config, SCRAM salts and keys), in every format; kafka-dump-log prints them, so "
                     "--format kafka matches it byte for byte only with --show-secrets.")
@limit_options
@output_options
def dump(paths, listed, records, data, mode, style, kind, no_internal, no_checks, strict, verbose,
         schema_sources, schemas_topic, raw_values, show_secrets, out: Output, limits: Limits):
    """Dump Kafka log segments, indexes, snapshots and checkpoints (files or directories)."""
    exact = style == "kafka-exact"
    style = "kafka" if exact else style
    if style == "kafka" and out.as_json:
        raise click.UsageError("--format kafka and --json do not go together")
    paths = [*paths, *(Path(name) for names in listed for name in names.split(",") if name)]
    if not paths:
        raise click.UsageError("name the files or directories to dump (FILE|DIR..., or --files FILE,...)")
    refuse_writing_over_inputs(paths, reads=lambda path: files.describe(path).kind is not None)
    records = records or data
    exit_code = EXIT_OK
    schemas = None
    if data and not raw_values and style != "kafka":
        schemas, exit_code = open_schemas(schema_sources, schemas_topic, limits, out, beside=paths)
    options = DumpOptions(records=records, data=data, internal=not no_internal,
                          checks=not no_checks, shallow=no_checks and not records
                          and style != "kafka", limits=limits, show_secrets=show_secrets,
                          values=None if schemas is None else _schema_values(schemas, show_secrets))
    renderer = dump_renderer(out, style, records, data, mode, internal=not no_internal, exact=exact)
    tally = Tally()
    for entry in walk(paths, lambda path, named: _kind(path, kind), unrecognised=UNRECOGNISED):
        tally.add(entry)
        path = entry.path
        if entry.unreadable is not None:
            out.warn(f"kinspect: {path_text(path)}: {entry.unreadable}")
            exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        if entry.skipped is not None:
            if entry.named:
                out.warn(f"kinspect: {path_text(path)}: {entry.skipped}: kinspect dump reads regular files")
                exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        if entry.kind is None:
            out.warn(f"kinspect: {path_text(path)}: not a file of a Kafka log dir kinspect reads "
                     f"(--type KIND reads it as one)")
            exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        try:
            summary = _dump_one(path, files.describe(path, kind), options, renderer, out)
        except BrokenPipeError:  # the reader went away (| head): kinspect's main handles it
            raise
        except OSError as e:
            out.warn(f"kinspect: {path_text(path)}: {e.strerror or e}")
            exit_code = max(exit_code, EXIT_UNREADABLE)
            continue
        problems = summary["problem_counts"]
        if problems.get("error") or (strict and problems.get("warning")):
            exit_code = max(exit_code, EXIT_PROBLEMS)
    renderer.finish()
    if schemas is not None:
        for problem in schemas.problems():
            if out.as_json:
                out.record({"type": "notice", **problem.to_dict()})
            out.warn(f"kinspect: {problem.what}")
    skipped = tally.skipped_line()
    if verbose:
        for path, why in tally.skipped_paths:
            out.warn(f"kinspect: skipped {path_text(path)}: {why}")
    if tally.read == 0 and exit_code == EXIT_OK:
        out.warn(f"kinspect: nothing to dump in {', '.join(path_text(p) for p in paths)}"
                 + (f": {skipped}" if skipped else ": no files")
                 + "; kinspect dump reads a Kafka log dir's files (.log, .index, .timeindex, .snapshot, "
                   ".txnindex, checkpoints)")
        exit_code = EXIT_UNREADABLE
    elif skipped and not verbose:
        out.warn(f"kinspect: {skipped}; -v lists them")
    sys.exit(exit_code)


def _schema_values(schemas, show_secrets: bool):
    from kinspect.schemas.records import apply_record
    return lambda record: apply_record(record, schemas, show_secrets)


def _kind(path: Path, kind: str | None) -> str | None:
    """What dump reads ``path`` as (Kafka's file names say; --type overrides), after checking
    that it can be read."""
    readable(path)
    return files.describe(path, kind).kind


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

        walked = info.kind in ("log", "kraft_snapshot")
        summary = {}
        with out.progress(len(buf) if walked else None, "dumping") as bar:
            events = dump_file(path_text(path), buf, info, options, companion)
            try:
                next_update = PROGRESS_STEP
                for event in events:
                    if event["type"] == "summary":
                        summary = event
                    renderer.event(event)
                    if walked and event.get("position", 0) >= next_update:
                        bar.update(event["position"])
                        release(buf, event["position"])
                        next_update = event["position"] + PROGRESS_STEP
            finally:
                events.close()
        return summary
