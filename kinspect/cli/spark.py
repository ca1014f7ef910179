"""kinspect spark: a capture set decoded on Spark, written as tables."""

from __future__ import annotations

import os
import sys

import click

from kinspect.cli.exchanges import filter_options, port_options, secrets_option
from kinspect.cli.overlap import refuse_writing_over_inputs
from kinspect.filters import ExchangeFilter
from kinspect.problems import EXIT_OK, EXIT_UNFINISHED, EXIT_UNREADABLE
from kinspect.render.safe import path_text
from kinspect.spark.plan import TARGET_BYTES, NoInputs, list_inputs, plan

EPILOG = """\b
Examples:
  kinspect spark captures/ --out tables/
  kinspect spark 'captures/broker-*.pcap.gz' --out tables/ --master 'local[8]'
  kinspect spark captures/ --out tables/ --format jsonl --api Produce --api Fetch
  kinspect spark captures/ --out tables/ --summary

\b
Tables in OUT: exchanges/ (one row per exchange; Parquet partitioned by api_name) and files/
(one row per input: path, bytes, packets, exchanges, problems, error, seconds); with --summary
also summary/apis, summary/errors, summary/talkers. The columns are
documented in kinspect/spark/rows.py. Needs pip install 'kinspect[spark]' and Java 17+.

\b
Exit codes: 0 written; 2 usage error (OUT already holds tables, or is an input); 3 an input
is missing, or some input is not a readable capture (its files row says why; the rest are
written); 4 Spark could not run (pyspark, pyarrow or Java missing: the message says what to
install) or the job failed; 130 interrupted.
"""


@click.command(epilog=EPILOG)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Directory the tables are written into (exchanges/, files/ must not exist yet).")
@click.option("--master", default="local[*]", show_default=True,
              help="Spark master: local[N] (tasks retried once), spark://host:port, yarn, k8s://...")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl"]), default="parquet", show_default=True,
              help="Table format: Parquet (exchanges partitioned by api_name) or JSON Lines.")
@click.option("--task-mb", type=click.IntRange(1), default=TARGET_BYTES >> 20, show_default=True,
              help="Capture megabytes per task: small files are packed to this; a file far above the "
                   "median size (or a big one among fewer files than cores) is split by connection.")
@click.option("--summary", is_flag=True,
              help="Also compute in Spark, print and write as summary/: per-API counts, latency "
                   "p50/p99/max (exact nearest rank, as decode --summary), bytes; errors by code "
                   "and topic; top talkers by bytes.")
@port_options
@filter_options
@secrets_option
def spark(inputs, out, master, fmt, task_mb, summary, ports, no_heuristic, keep: ExchangeFilter, show_secrets):
    """Decode a set of captures on Spark: files, directories or globs, here on every core by
    default (local[*]), or on a cluster with --master.

    Each task decodes its share with the same decoder as `kinspect decode`; the rows equal
    decode --json's exchanges.
    """
    refuse_writing_over_inputs(inputs, {"--out": out})
    for table in ("exchanges", "files", "summary"):
        if os.path.exists(os.path.join(out, table)):
            raise click.UsageError(f"--out {path_text(out)} already holds {table}/: choose another "
                                   f"directory, or remove it")
    try:
        files = list_inputs(list(inputs))
    except NoInputs as e:
        click.echo(f"kinspect: {path_text(str(e))}", err=True)
        sys.exit(EXIT_UNREADABLE)
    from kinspect.spark import job  # pyspark only now
    options = {"ports": set(ports) | {9092}, "heuristic": not no_heuristic, "show_secrets": show_secrets}
    try:
        session = job.session(master)
    except job.SparkMissing as e:
        click.echo(f"kinspect: {e}", err=True)
        sys.exit(EXIT_UNFINISHED)
    try:
        units = plan(files, cores=session.sparkContext.defaultParallelism, target=task_mb << 20)
        written = job.write(session, units, out, fmt, options, keep=keep if keep.active else None)
        if summary:
            from kinspect.spark import summary as summaries
            tables = summaries.summarize(job.read_exchanges(session, out, fmt))
            click.echo(summaries.render(summaries.write(tables, out, fmt)))
    finally:
        session.stop()
    for f in written.unreadable:
        click.echo(f"kinspect: {path_text(f['path'])}: {f['error']}", err=True)
    size = sum(f["bytes"] for f in written.files)
    problems = sum(f["problems"] for f in written.files)
    click.echo(f"{len(written.files)} files ({size:,} bytes), {written.exchanges:,} exchanges, {problems:,} "
               f"problems, {len(written.unreadable)} unreadable → {path_text(out)}", err=True)
    sys.exit(EXIT_UNREADABLE if written.unreadable else EXIT_OK)
