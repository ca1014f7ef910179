"""The data source's two sides in kinspect (source.py holds the Spark classes): planning a read
from its options, beside the driver, and decoding one partition into a table's Arrow batches, in
a task. Both `spark.read.format("kinspect")` and `kinspect spark` (job.py) decode here.
"""

from __future__ import annotations

import pickle
from typing import Iterator

import pyarrow as pa

from kinspect.spark.plan import Input, NoInputs, Unit, find_inputs, plan
from kinspect.spark.rows import BATCH_ROWS, TABLES, arrow_batches, table_row


def plain(unit: Unit) -> tuple:
    """A unit as plain values (source.UnitPartition's): no kinspect class to unpickle."""
    return tuple((f.path, f.size, f.error) for f in unit.files), unit.shard, unit.shards


def unit_of(value: tuple) -> Unit:
    files, shard, shards = value
    return Unit(tuple(Input(*f) for f in files), shard, shards)


def payload(options: dict, keep=None) -> bytes:
    """What every task of a read gets: the DecodeRun options (key log, bounds, records, flows) and
    decode's exchange filter."""
    return pickle.dumps((options, keep), protocol=pickle.HIGHEST_PROTOCOL)


class NothingToRead(ValueError):
    """The paths list no capture: a one-line message that names the path."""


def planned(options: dict, default_cores: int) -> tuple[str, list, bytes]:
    """(table, units as plain values, payload) of a read from its options (source_options.py)."""
    from kinspect.spark import source_options as opts
    opts.check_known(options)
    table = opts.table(options)
    decode = opts.decode_options(options)
    keep = opts.exchange_filter(options)
    try:
        inputs = find_inputs(opts.paths(options)).inputs
    except NoInputs as e:
        raise NothingToRead(f"kinspect data source: {e}") from None
    # the files table is one row per input: its files are decoded whole (no shards to sum)
    units = plan(inputs, cores=1 if table == "files" else opts.cores(options, default_cores),
                 target=opts.task_bytes(options))
    keylog = opts.keylog_paths(options)
    if keylog:
        from kinspect.tls.keylog import KeyLog
        decode["keylog"] = KeyLog.from_files(keylog).portable()  # every secret: an executor may not see the file
    decode["records"] = table == "records"
    return table, [plain(u) for u in units], payload(decode, keep)


def partition_batches(value: tuple, table: str, given: bytes, files=None, size: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """One partition (a plain unit) decoded as Arrow batches of ``table`` (rows.TABLES). With
    ``files`` (an accumulator), the files rows go there once the unit is done."""
    from kinspect.spark.task import unit_rows
    options, keep = pickle.loads(given)
    rows = unit_rows(unit_of(value), options, keep)
    if files is not None:
        rows = _diverted(rows, files)
    return arrow_batches(_as_table(rows, table), TABLES[table], size)


def _as_table(rows, table: str):
    for row in rows:
        converted = table_row(row, table)
        if converted is not None:
            yield converted


def _diverted(rows, files):
    """``rows`` but its files rows, which go to the accumulator ``files`` after the last row."""
    held = []
    for row in rows:
        if row["table"] == "files":
            held.append(row)
        else:
            yield row
    files.add(held)
