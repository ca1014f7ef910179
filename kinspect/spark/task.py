"""One Spark task's work, without Spark: decode a planned unit into rows of rows.TASK.

Each file is streamed through the one decode path (kinspect.decode.pipeline.DecodeRun). The shard of a
split file keeps only its own exchanges: with the option ``flows``, those of its own connections,
the others' packets left unread (its files row carries the run's flows_report, which job.py checks
against the other shards'); without, every exchange is paired and each is dealt to one shard
(plan.Shard). A file that cannot be read as a capture gives its ``files`` row an error, and the
task goes on with the next file.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Iterator

import pyarrow as pa

from kinspect import native
from kinspect.capture.source import CaptureError
from kinspect.decode.finish import decoded_records
from kinspect.decode.parallel import keep_heap
from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun
from kinspect.render.safe import path_text
from kinspect.spark.plan import Input, Shard, Unit, special_kind
from kinspect.spark.remote import is_uri, open_uri
from kinspect.spark.rows import BATCH_ROWS, TASK, arrow_batches, task_rows
from kinspect.spark.values import FileValues, popped


class _Unopened:
    """A URI that could not be opened: reading it raises the reason (DecodeRun reports it)."""

    def __init__(self, name: str, error: OSError):
        self.name, self.error = name, error

    def read(self, n: int = -1) -> bytes:
        raise self.error

    def close(self) -> None:
        pass

    def __str__(self) -> str:
        return self.name


def _shard_of(shard: int, shards: int):
    return Shard(shard, shards) if shards > 1 else None


def file_rows(f: Input, shard: int = 0, shards: int = 1, options: dict | None = None,
              keep=None, records: bool = False) -> Iterator[dict]:
    """The exchanges rows of one file (or shard), those ``keep(record)`` keeps when given (decode's
    filters), then its files row (rows.FILE_COLUMNS). Its ``exchanges`` counts all the exchanges
    decoded; with ``records``, each exchange row is followed by its records rows (rows.RECORDS);
    ``problems`` every record that is not a clean exchange: problems of exchanges,
    notices, responses without a request, and the capture's own problems."""
    start = time.perf_counter()
    options = dict(options or {})
    records = options.pop("records", records)
    filesystems = options.pop("filesystems", None)
    by_connection = options.pop("flows", False) and shards > 1
    schema_sources, schemas_topic = popped(options)
    name = path_text(f.path)  # the tables' text is UTF-8: a name that is not is shown as \xNN
    refused = f.error or _not_regular(f.path)
    if refused:
        yield _files_row(name, f.size, shard, shards, error=refused, seconds=time.perf_counter() - start)
        return
    source = f.path
    if is_uri(f.path):
        try:
            source = open_uri(f.path, filesystems)
        except OSError as e:
            source = _Unopened(f.path, e)
    if by_connection:  # its own connections alone: checked against the other shards' (job.py)
        run = DecodeRun(source, flows=(shard, shards), **options)
    else:
        run = DecodeRun(source, keep_record=_shard_of(shard, shards), **options)
    exchanges = problems = 0
    error = None
    values = None
    try:
        if records and schema_sources is not None:
            values = FileValues.open(schema_sources, schemas_topic, source, options)
        for record in decoded_records(run, pack_records=not records):  # rows need only a batch's count
            if record["type"] == "exchange":
                exchanges += 1
                problems += len(record["problems"])
                if values is not None:
                    values.exchange(record)
                if keep is not None and not keep(record):
                    continue
                yield from task_rows(name, record, records, values)
            else:
                problems += 1
    except (CaptureUnreadable, CaptureError) as e:
        error = path_text(str(e))
    except OSError as e:
        error = path_text(e.strerror or str(e))
    finally:
        if source is not f.path:
            source.close()
    if shard == 0:  # every shard read the whole file: its own problems count once
        problems += len(run.capture_problems)
    report = None
    if by_connection:
        report = json.dumps(run.flows_report())
        problems -= sum(run.end_notices.values())  # rows.file_table counts them as one run would
    yield _files_row(name, f.size, shard, shards, packets=run.packets, exchanges=exchanges, problems=problems,
                     error=error, seconds=time.perf_counter() - start, flows=report)


def _files_row(name: str, size: int, shard: int, shards: int, *, packets: int = 0, exchanges: int = 0,
               problems: int = 0, error: str | None = None, seconds: float = 0.0, flows: str | None = None) -> dict:
    return {"table": "files", "capture": name, "file_bytes": size, "file_packets": packets,
            "file_exchanges": exchanges, "file_problems": problems, "file_error": error,
            "file_seconds": seconds, "file_shard": shard, "file_shards": shards,
            "file_native": all(native.status().values()), "file_python": path_text(sys.executable),
            "file_flows": flows}


def _not_regular(path: str) -> str | None:
    """Why a local ``path`` is not decoded when it is no regular file (the driver listed a file
    that has since become a FIFO, which would never end), else None."""
    if is_uri(path):
        return None
    try:
        kind = special_kind(os.stat(path).st_mode)
    except OSError:
        return None  # decoding it says why it cannot be read
    return f"{kind}, not a regular file" if kind else None


def unit_rows(unit: Unit, options: dict | None = None, keep=None) -> Iterator[dict]:
    keep_heap()  # the worker process's malloc keeps decoding's big buffers (parallel.keep_heap)
    for f in unit.files:
        yield from file_rows(f, unit.shard, unit.shards, options, keep)


def unit_batches(unit: Unit, options: dict | None = None, keep=None, size: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """What the task hands to Spark: Arrow batches of rows.TASK, ``size`` rows at most."""
    return arrow_batches(unit_rows(unit, options, keep), TASK, size)
