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

WHOLE_FILE = ("files", "findings", "clients")  # tables of one row (or rows) per input, decoded whole
TASK_ONLY = ("records", "flows", "filesystems", "schemas", "schemas_topic")  # not DecodeRun's options


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
    if opts.rotation(options):
        if table in WHOLE_FILE:
            raise opts.OptionError("kinspect data source: option rotation: the exchanges and records tables only")
        units = rotation_units(opts.paths(options))
    else:
        try:
            inputs = find_inputs(opts.paths(options)).inputs
        except NoInputs as e:
            raise NothingToRead(f"kinspect data source: {e}") from None
        # the files and findings tables: one row per input, or findings over it: files decoded whole
        whole = table in WHOLE_FILE
        units = [plain(u) for u in plan(inputs, cores=1 if whole else opts.cores(options, default_cores),
                                        target=opts.task_bytes(options))]
    keylog = opts.keylog_paths(options)
    if keylog:
        from kinspect.tls.keylog import KeyLog
        decode["keylog"] = KeyLog.from_files(keylog).portable()  # every secret: an executor may not see the file
    decode["records"] = table == "records"
    if decode["records"]:
        decode.update(opts.schemas(options))
    return table, units, payload(decode, keep)


def rotation_units(paths: list[str]) -> list[tuple]:
    """A rotation's files as the batch source reads them (rotation.py): each after the one before,
    the last one final."""
    from kinspect.spark.rotation import listed
    files = [f for path in paths for f in listed(path)]
    if not files:
        raise NothingToRead(f"kinspect data source: {', '.join(paths)}: no capture file to read")
    return [("rotation", files[i - 1] if i else None, f, False, i == len(files) - 1) for i, f in enumerate(files)]


def streamed(options: dict) -> tuple:
    """(directory, table, payload, settle seconds or None) of a streaming read."""
    from kinspect.spark import source_options as opts
    opts.check_known(options)
    table = opts.table(options)
    if table in WHOLE_FILE:
        raise opts.OptionError("kinspect data source: readStream gives the exchanges and records tables")
    paths = opts.paths(options)
    if len(paths) != 1:
        raise opts.OptionError("kinspect data source: readStream reads one directory (or glob) of rotating files")
    decode = opts.decode_options(options)
    keylog = opts.keylog_paths(options)
    if keylog:
        from kinspect.tls.keylog import KeyLog
        decode["keylog"] = KeyLog.from_files(keylog).portable()
    decode["records"] = table == "records"
    if decode["records"]:
        decode.update(opts.schemas(options))
    return paths[0], table, payload(decode, opts.exchange_filter(options)), opts.settle(options)


def stream_end(path: str, settle: float | None, now: float | None = None) -> dict:
    """The latest offset: the last complete file (every file but the newest; the newest too, as
    the last of all, once unchanged for ``settle`` seconds, and so is any file a ``sniff --write``
    rotation is still writing under its hidden name)."""
    import os
    import time

    from kinspect.capture.write import being_written
    from kinspect.spark.rotation import listed
    files = listed(path)
    if not files:
        return {"last": "", "final": False}
    newest = files[-1]
    if settle is not None:
        try:
            changed = max(os.stat(f).st_mtime for f in [newest, *being_written(os.path.dirname(newest))])
            idle = (now if now is not None else time.time()) - changed
        except OSError:
            idle = 0.0
        if idle >= settle:
            return {"last": os.path.basename(newest), "final": True}
    if len(files) == 1:
        return {"last": "", "final": False}
    return {"last": os.path.basename(files[-2]), "final": False}


def stream_partitions(path: str, start: dict, end: dict) -> list[tuple]:
    """The files after ``start``'s last up to ``end``'s, each with the file before it."""
    import os

    from kinspect.spark.rotation import listed, order
    files = listed(path)
    after = order(start["last"]) if start.get("last") else None
    upto = order(end["last"]) if end.get("last") else None
    if upto is None:
        return []
    out = []
    for i, f in enumerate(files):
        key = order(f)
        if (after is not None and key <= after) or key > upto:
            continue
        prev = files[i - 1] if i else None
        prev_final = bool(start.get("final")) and prev is not None and os.path.basename(prev) == start.get("last")
        final = bool(end.get("final")) and os.path.basename(f) == end["last"]
        out.append((prev, f, prev_final, final))
    return out


def partition_batches(value: tuple, table: str, given: bytes, files=None, size: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """One partition (a plain unit) decoded as Arrow batches of ``table`` (rows.TABLES). With
    ``files`` (an accumulator), the files rows go there once the unit is done."""
    options, keep = pickle.loads(given)
    if value[0] == "rotation":
        from kinspect.spark.rotation import rotation_rows
        rows = rotation_rows(*value[1:], options, keep)
    elif table == "findings":
        return arrow_batches(findings_rows(unit_of(value), options), TABLES[table], size)
    elif table == "clients":
        return arrow_batches(clients_rows(unit_of(value), options), TABLES[table], size)
    else:
        from kinspect.spark.task import unit_rows
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


def clients_rows(unit: Unit, options: dict) -> Iterator[dict]:
    """kinspect clients' inventory (doctor/clients.py, its default bounds, the brokers' own
    clients too) over each file of ``unit``, decoded whole, as rows.CLIENTS."""
    from kinspect.doctor.clients import Inventory
    from kinspect.spark.rows import client_row
    for path, inventory in _each_file_whole(unit, options, Inventory):
        for client in inventory.rows():
            yield client_row(path, client)


def findings_rows(unit: Unit, options: dict) -> Iterator[dict]:
    """kinspect doctor's findings (its default thresholds) over each file of ``unit``, decoded
    whole, as rows.FINDINGS; a file that is no readable capture has none (its files row says why)."""
    from kinspect.doctor.run import Doctor
    from kinspect.spark.rows import finding_row
    for path, doctor in _each_file_whole(unit, options, Doctor):
        findings, _notices = doctor.finish()
        for finding in findings:
            yield finding_row(path, finding)


def _each_file_whole(unit: Unit, options: dict, make):
    """(the path as text, ``make()`` fed every record of the file with .exchange) for each file of
    ``unit`` decoded to its end; a file without an error of its own that turns out unreadable
    gives nothing (its files row says why)."""
    from kinspect.capture.source import CaptureError
    from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun
    from kinspect.render.safe import path_text
    options = {k: v for k, v in options.items() if k not in TASK_ONLY}
    for f in unit.files:
        if f.error:
            continue
        state = make()
        try:
            for record in DecodeRun(f.path, **options).records():
                state.exchange(record)
        except (CaptureUnreadable, CaptureError, OSError):
            continue
        yield path_text(f.path), state
