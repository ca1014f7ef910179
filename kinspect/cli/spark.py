"""kinspect spark: a capture set decoded on Spark, written as tables."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from kinspect.cli.exchanges import filter_options, port_options
from kinspect.cli.keylog import keylog_option, keylog_warnings
from kinspect.cli.options import show_secrets_option
from kinspect.cli.overlap import refuse_writing_over_inputs
from kinspect.decode.filters import ExchangeFilter
from kinspect.problems import EXIT_OK, EXIT_UNFINISHED, EXIT_UNREADABLE
from kinspect.render.safe import escape, path_text
from kinspect.spark.connect import parallelism
from kinspect.spark.interrupt import Interrupts
from kinspect.spark.plan import TARGET_BYTES, NoInputs, find_inputs, plan, searched_directory

EPILOG = """\b
Examples:
  kinspect spark captures/ --out tables/
  kinspect spark 'captures/broker-*.pcap.gz' --out tables/ --master 'local[8]'
  kinspect spark captures/ --out tables/ --format jsonl --api Produce --api Fetch
  kinspect spark captures/ --out tables/ --summary
  kinspect spark tls-captures/ --out tables/ --keylog sslkeys.log
  kinspect spark /shared/captures/ --out /shared/tables/ --master spark://head:7077 --package env.tar.gz
  kinspect spark captures/ --out tables/ --remote sc://head:15002 --package env.tar.gz

\b
On a cluster, --package PATH ships kinspect and its C accelerators to the executors as a packed
virtualenv (built with venv-pack at PATH if PATH does not exist yet; an existing file is shipped
as it is). Inputs and OUT must then be paths every node sees the same (a shared file system).
Under spark-submit, run kinspect/cli/spark_submit.py (python -m kinspect.cli.spark_submit --path prints
it) with the same arguments; see the README.

\b
Tables in OUT: exchanges/ (one row per exchange; Parquet partitioned by api_name) and files/
(one row per input: path, bytes, packets, exchanges, problems, error, seconds, native, python);
with --clients also clients/ (kinspect clients' inventory per input); with --records also
records/ (one row per record; keys and values framed with a schema id decoded
as key_json/value_json with their schema's id, format and subject); with --summary also summary/apis,
summary/errors, summary/talkers, summary/clients. The columns are
documented in kinspect/spark/rows.py. Needs pip install 'kinspect[spark]' and Java 17+.

\b
Directories are walked; special files in them (FIFOs, sockets, devices) and links to
directories are skipped, each named on stderr and counted in the last line. An entry that
cannot be read (a link loop, a directory it may not enter) gets a files row with its error.
A file name that is not UTF-8 is written in the tables with those bytes as \\xNN.

\b
Exit codes: 0 written; 2 usage error (OUT already holds tables, is an input, or lies inside a
directory an input reads, a glob's included); 3 an input is missing or is a special file, or
some input is not a readable capture (its files row says why; the rest are written); 4 Spark
could not run (pyspark, pyarrow, pandas or a usable Java missing, or JAVA_HOME wrong: one line
says what to install or set) or the job failed; 130 interrupted.
"""


@click.command(epilog=EPILOG)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Directory the tables are written into (exchanges/, files/ must not exist yet).")
@click.option("--master", default=None,
              help="Spark master: local[N] (tasks retried once), spark://host:port, yarn, k8s://... (client "
                   "mode). Default: local[*], or spark-submit's --master under spark-submit.")
@click.option("--remote", default=None, metavar="sc://HOST:PORT",
              help="Run on a Spark Connect server instead of a master (needs its client libraries: "
                   "pip install 'kinspect[spark]').")
@click.option("--package", "package", type=click.Path(dir_okay=False), default=None,
              help="A packed virtualenv (.tar.gz) holding kinspect for the executors of a cluster or a "
                   "Connect server: built here with venv-pack when PATH does not exist yet.")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting, e.g. --conf spark.executor.memory=2g (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl"]), default="parquet", show_default=True,
              help="Table format: Parquet (exchanges partitioned by api_name) or JSON Lines.")
@click.option("--task-mb", type=click.IntRange(1), default=TARGET_BYTES >> 20, show_default=True,
              help="Capture megabytes per task: small files are packed to this; a file far above the "
                   "median size (or a big one among fewer files than cores) is split by connection.")
@click.option("--summary", is_flag=True,
              help="Also compute in Spark, print and write as summary/: per-API counts, latency "
                   "p50/p99/max (exact nearest rank, as decode --summary), bytes; errors by code "
                   "and topic; top talkers by bytes; latency by client and API; traffic by topic (topic ids "
                   "named from any capture's Metadata).")
@click.option("--records", is_flag=True,
              help="Also write records/: one row per record in a Produce or Fetch body (topic, partition, "
                   "offset, timestamp, key, value size, header count; kinspect/spark/rows.py).")
@click.option("--clients", "clients", is_flag=True,
              help="Also write clients/: kinspect clients' inventory of each input, the brokers' own clients "
                   "too (one row per client and file; kinspect/spark/rows.py). Each input is decoded once more.")
@click.option("--schemas", "schema_sources", multiple=True, metavar="SOURCE",
              help="With --records: keys and values framed with a schema id are decoded with the schemas of "
                   "each capture's own _schemas records (as decode does) and of SOURCE too: a broker log dir or "
                   "its _schemas-N directory, a capture, a directory of .avsc/.proto/.json files, or an "
                   "http(s):// registry (every executor must see it). Repeatable.")
@click.option("--schemas-topic", default="_schemas", show_default=True, metavar="NAME",
              help="The registry's topic (kafkastore.topic), in log dirs and captures.")
@click.option("--raw-values", is_flag=True, help="With --records: no schema decoding (the schema columns null).")
@port_options
@filter_options
@show_secrets_option
@keylog_option()
def spark(inputs, out, master, remote, package, confs, fmt, task_mb, summary, records, clients, schema_sources,
          schemas_topic, raw_values, ports, no_heuristic, keep: ExchangeFilter, show_secrets, keylog):
    """Decode a set of captures on Spark: files, directories or globs, here on every core by
    default (local[*]), or on a cluster with --master.

    Each task decodes its share with the same decoder as `kinspect decode`; the rows equal
    decode --json's exchanges.
    """
    refuse_writing_over_inputs(inputs, {"--out": out})
    for option, path in (("--out", out), ("--package", package)):
        _refuse_name_the_jvm_cannot_take(option, path)
    conf = _settings(confs)
    if remote is not None and master is not None:
        raise click.UsageError("--master and --remote: choose one (a Connect server has its own master)")
    if package is not None and remote is None and (master or "local").startswith("local") and \
            "PYSPARK_GATEWAY_PORT" not in os.environ:  # spark-submit's --master is not known before the session
        raise click.UsageError("--package is for a cluster's executors (--master spark://..., yarn, "
                               "k8s://... or --remote sc://...): local tasks run this interpreter")
    for table in ("exchanges", "files", "summary", "records", "clients"):
        if os.path.exists(os.path.join(out, table)):
            raise click.UsageError(f"--out {path_text(out)} already holds {table}/: choose another "
                                   f"directory, or remove it")
    from kinspect.spark.remote import filesystem_options, is_uri, list_uris
    uris = [arg for arg in inputs if is_uri(arg)]
    try:
        listing = find_inputs([arg for arg in inputs if not is_uri(arg)])
    except NoInputs as e:
        click.echo(f"kinspect: {shown(str(e))}", err=True)
        sys.exit(EXIT_UNREADABLE)
    _refuse_out_inside_inputs(inputs, out)  # once each input is known to name something
    files = listing.inputs
    _say_skipped(listing.skipped)
    from kinspect.spark.requirements import SparkMissing, check_requirements
    try:  # before pyspark or pyarrow is imported
        check_requirements(connect=remote is not None)
    except SparkMissing as e:
        click.echo(f"kinspect: {shown(str(e))}", err=True)
        sys.exit(EXIT_UNFINISHED)
    from kinspect.spark import job  # pyspark only now
    options = {"ports": set(ports) | {9092}, "heuristic": not no_heuristic, "show_secrets": show_secrets}
    options.update(schema_options(records, raw_values, schema_sources, schemas_topic))
    unreadable_schemas = bool(options.get("schemas")) and _check_schema_sources(schema_sources, schemas_topic)
    for line in keylog_warnings(keylog):
        click.echo(line, err=True)
    if package is not None and os.path.exists(package) and not os.path.isfile(package):
        raise click.UsageError(f"--package {path_text(package)} is not a regular file: give a packed "
                               f"environment (.tar.gz), or a path where none exists yet to build one")
    if package is not None and not os.path.exists(package):
        _build_package(package)
    with Interrupts() as interrupts:  # Ctrl-C: exit 130, without Py4J's tracebacks
        try:
            session = job.session(master, remote=remote, package=package, conf=conf, jvm_archive=True)
        except job.SparkMissing as e:
            click.echo(f"kinspect: {shown(str(e))}", err=True)
            sys.exit(EXIT_UNFINISHED)
        except job.SettingRefused as e:
            raise click.UsageError(str(e)) from None
        except Exception as e:
            if _error_class(e) != "JAVA_GATEWAY_EXITED":
                raise
            click.echo("kinspect: Spark's JVM ended before it started (its own messages, if any, are above): check "
                       "JAVA_HOME and the Java installation, and --conf spark.driver.* settings", err=True)
            sys.exit(EXIT_UNFINISHED)
        interrupts.stop_spark_on_sigint(session)
        local = remote is None and job.master_of(session).startswith("local")
        if keylog is not None:  # read here, once
            options["keylog"] = job.shipped_keylog(keylog, local)
        try:
            if uris:
                try:
                    files += [f for f in list_uris(session, uris) if f.path not in {g.path for g in files}]
                except Exception as e:  # FileNotFoundError, or Spark's own (no such bucket, no s3a class)
                    click.echo(f"kinspect: cannot list {shown(', '.join(uris))}: {escape(_first_line(e))}", err=True)
                    sys.exit(EXIT_UNREADABLE)
                options["filesystems"] = filesystem_options(session)
            units = plan(files, cores=parallelism(session), target=task_mb << 20)
            try:
                written = _write(session, units, out, fmt, options, keep if keep.active else None, records)
            except Exception as e:
                line = _executor_line(e)
                if line is None:
                    raise
                click.echo(f"kinspect: {escape(line)}", err=True)
                sys.exit(EXIT_UNFINISHED)
            if clients:
                job.write_clients(session, [f for f in files if not f.error], out, fmt, options, task_mb << 20)
            if summary:
                from kinspect.spark import summary as summaries
                tables = summaries.summarize(job.read_exchanges(session, out, fmt))
                click.echo(summaries.render(summaries.write(tables, out, fmt)))
        finally:
            job.stop(session, say=lambda text: click.echo(f"kinspect: {text}", err=True),
                     interrupted=interrupts.interrupted())
    if not local:
        click.echo(executors_line(written.files), err=True)
    for path, reasons in written.redone.items():
        click.echo(f"kinspect: {shown(path)}: split by connection, its shards might not have given one "
                   f"process's rows ({escape(reasons[0])}), so it was decoded again with each shard reading every "
                   f"connection", err=True)
    for f in written.unreadable:
        click.echo(f"kinspect: {shown(f['path'])}: {escape(f['error'])}", err=True)
    size = sum(f["bytes"] for f in written.files)
    problems = sum(f["problems"] for f in written.files)
    skipped = f", {len(listing.skipped):,} files skipped" if listing.skipped else ""
    click.echo(f"{len(written.files)} files ({size:,} bytes), {written.exchanges:,} exchanges, {problems:,} "
               f"problems, {len(written.unreadable)} unreadable{skipped} → {shown(out)}", err=True)
    sys.exit(EXIT_UNREADABLE if written.unreadable or unreadable_schemas else EXIT_OK)


SKIPPED_SHOWN = 20  # special files named one by one; past that, counted


def schema_options(records: bool, raw_values: bool, sources, topic: str) -> dict:
    """The tasks' schema options (spark/values.py) for --records, --raw-values, --schemas and
    --schemas-topic: with --records the captures' own _schemas records and the sources."""
    if not records or raw_values:
        return {}
    return {"schemas": list(sources), "schemas_topic": topic}


def _check_schema_sources(sources, topic: str) -> bool:
    """--schemas SOURCE opened here once, to say which cannot be read (the tasks leave them out):
    whether one could not."""
    if not sources:
        return False
    from kinspect.schemas.load import open_sources
    _schemas, problems = open_sources(list(sources), topic)
    for problem in problems:
        click.echo(f"kinspect: {escape(problem.what)}", err=True)
    return bool(problems)


def shown(path) -> str:
    """A file name as stderr shows it: bytes that are not UTF-8 as \\xNN, control characters
    (a terminal's escape sequences) escaped, as every command shows names."""
    return escape(path_text(path))


def _say_skipped(skipped: list[tuple[str, str]]) -> None:
    for path, kind in skipped[:SKIPPED_SHOWN]:
        click.echo(f"kinspect: skipped {shown(path)}: {kind}", err=True)
    if len(skipped) > SKIPPED_SHOWN:
        click.echo(f"kinspect: skipped {len(skipped) - SKIPPED_SHOWN:,} more files", err=True)


def _refuse_out_inside_inputs(inputs, out: str) -> None:
    """--out inside a directory an input reads (a directory, or a glob's): the tables would be read
    as captures by the next run over the same inputs. Exit 2."""
    from kinspect.spark.remote import is_uri
    target = Path(os.path.realpath(out))
    for arg in inputs:
        directory = None if is_uri(arg) else searched_directory(arg)
        if directory is not None and target.is_relative_to(os.path.realpath(directory)):
            raise click.UsageError(f"--out {path_text(out)} is inside {path_text(directory)}, which the input "
                                   f"{path_text(arg)} reads: its tables would be read as captures by the next "
                                   f"run; write them somewhere else")


def _refuse_name_the_jvm_cannot_take(option: str, path: str | None) -> None:
    """A path Spark's JVM opens (through py4j, which speaks UTF-8) whose name is not UTF-8: the
    job failed at its end with py4j's tracebacks ('internal error'). Exit 2 at once instead."""
    if path is None:
        return
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise click.UsageError(f"{option} {path_text(path)}: a name that is not UTF-8, which Spark cannot "
                               f"write or read; choose another") from None


def _error_class(error: Exception) -> str | None:
    """pyspark's error class of ``error`` (PySparkException.getErrorClass), or None."""
    try:
        return error.getErrorClass()
    except Exception:  # not pyspark's, or an older pyspark's
        return None


def _settings(confs) -> dict[str, str]:
    settings = {}
    for item in confs:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise click.UsageError(f"--conf {item!r}: give KEY=VALUE, e.g. spark.executor.memory=2g")
        settings[key.strip()] = value
    return settings


def _build_package(path: str) -> None:
    from kinspect.spark import package as packed
    click.echo(f"kinspect: building the packed environment {path_text(path)} (venv-pack) ...", err=True)
    try:
        native = packed.build(path, log=lambda line: click.echo(f"kinspect:   {line}", err=True))
    except packed.PackageError as e:
        click.echo(f"kinspect: {e}", err=True)
        sys.exit(EXIT_UNFINISHED)
    missing = [name for name, loaded in native.items() if not loaded]
    if missing:
        click.echo(f"kinspect: the packed environment lacks the C accelerators {', '.join(missing)} (no C "
                   f"compiler or Python headers here?): its executors decode in pure Python, several times slower",
                   err=True)


def executors_line(files: list[dict]) -> str:
    """Where the files were decoded: the executors' Pythons, and whether kinspect's C accelerators
    loaded there (files rows' native and python)."""
    read = [f for f in files if f["error"] is None or f["packets"]]
    pythons = sorted({f["python"] for f in files if f.get("python")})
    slow = [f for f in read if f.get("native") is False]
    accel = ("C accelerators loaded for every file" if not slow else
             f"C accelerators NOT loaded for {len(slow)} of {len(read)} files (pure Python, several times slower)")
    return f"executors' Python: {', '.join(pythons) or '-'}; {accel}"


def _write(session, units, out, fmt, options, keep, records):
    """job.write, with a progress bar on stderr when it is a terminal."""
    from kinspect.spark import job
    if not sys.stderr.isatty() or not units:
        return job.write(session, units, out, fmt, options, keep=keep, records=records)
    from kinspect.spark.progress import Bar
    with Bar(units) as bar:
        return job.write(session, units, out, fmt, options, keep=keep, progress=bar, records=records)


def _executor_line(error: Exception) -> str | None:
    """The one line a task's Python gave when it had no kinspect or another version (source.py's
    KinspectMissing), out of Spark's error and the worker's traceback in it; else None."""
    from kinspect.spark.source import MARK
    text = str(error)
    at = text.rfind(MARK)
    if at < 0:
        return None
    return text[at:].splitlines()[0].strip()


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
