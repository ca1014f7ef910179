"""kinspect/spark/task.py without Spark: what a task gives for inputs that are no plain capture."""

import os
import threading

import pyarrow as pa

from kinspect.render.safe import path_text
from kinspect.spark.plan import Input, Unit
from kinspect.spark.rows import TASK
from kinspect.spark.task import file_rows, unit_batches
from tests.conftest import PCAPS

CAPTURE = PCAPS / "librdkafka-mtu1500.pcap"


def test_an_input_listed_with_an_error_is_one_files_row_with_it():
    (row,) = file_rows(Input("/x/loop", 0, "cannot read: Too many levels of symbolic links"))
    assert row["table"] == "files" and row["capture"] == "/x/loop"
    assert row["file_error"] == "cannot read: Too many levels of symbolic links" and row["file_exchanges"] == 0


def test_a_file_that_became_a_fifo_after_the_listing_is_not_opened(tmp_path):
    """Listed as a file, a FIFO by the time the task runs: opened, it would wait for a writer forever."""
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)
    rows = []
    reader = threading.Thread(target=lambda: rows.extend(file_rows(Input(str(fifo), 36_244))), daemon=True)
    reader.start()
    reader.join(60)
    assert not reader.is_alive(), "the task waits on the FIFO"
    (row,) = rows
    assert row["file_error"] == "a FIFO, not a regular file"


def test_a_name_that_is_not_utf8_is_decoded_and_shown_as_escaped_bytes(tmp_path):
    """Arrow's strings are UTF-8: the raw name (surrogate escapes) failed the whole task; its rows
    carry the name as every command shows it."""
    named = os.path.join(os.fsencode(tmp_path), b"capture-\xff.pcap")
    with open(named, "wb") as f:
        f.write(CAPTURE.read_bytes())
    path = os.fsdecode(named)
    batches = list(unit_batches(Unit((Input(path, CAPTURE.stat().st_size),)), {"records": True}))
    rows = pa.Table.from_batches(batches, TASK).to_pylist()
    assert {r["capture"] for r in rows} == {path_text(path)} and path_text(path).endswith("capture-\\xff.pcap")
    (files,) = [r for r in rows if r["table"] == "files"]
    assert files["file_error"] is None and files["file_exchanges"] == 43
    assert sum(r["table"] == "records" for r in rows) > 0
