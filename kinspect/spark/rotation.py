"""A directory of rotating capture files (dumpcap's ring buffer, ``sniff --write`` rotation)
decoded file by file, with connections stitched across each pair of neighbouring files.

The files are ordered by name, digit runs compared as numbers (dumpcap's ``NAME_00012_<time>``,
rotation.py of capture/write.py's ``NAME_00012.pcap``). File i is decoded after file i-1, as one
capture (capture/chain.py), so an exchange whose request is in i-1 and whose response is in i
is paired. Each exchange belongs to exactly one file, decided from its times alone, so that every
file's task decides alike whichever neighbours it reads (b_i: the first packet time of file i):

- answered: the file of its response (response_time >= b_i);
- sent with no response expected (acks=0): the file of its request;
- unanswered: the file after its request's, or the request's file when that is the last one
  (``final``); so the task of file i leaves out the requests still waiting at its end, which the
  task of i+1 pairs with their response in i+1 or gives out unanswered.

What is lost: a response that comes more than one whole file after its request (file i+1's
task starts at file i): its request is given out unanswered and the response is an orphan.
A connection picked up in the middle of file i-1 must find its frames again (as a capture
that starts mid-connection does): an exchange cut there is missing. A file the ring buffer has
deleted before it was read is lost with its exchanges, and its neighbour is decoded without it.
Packet times must grow from one file to the next.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Iterator

from kinspect.capture.chain import ChainedCapture, first_time
from kinspect.capture.source import CaptureError
from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun
from kinspect.render.safe import path_text
from kinspect.spark.plan import _is_capture
from kinspect.spark.rows import task_rows
from kinspect.spark.values import FileValues, popped

_DIGITS = re.compile(r"(\d+)")


def order(name: str) -> tuple:
    """Sort key of a file name: digit runs as numbers (NAME_9 before NAME_10)."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(os.path.basename(name)))


def listed(path: str) -> list[str]:
    """The capture files of a rotation: a directory's (not its subdirectories'), or a glob's
    matches; hidden files and files that are no capture left out; in writing order."""
    if os.path.isdir(path):
        with os.scandir(path) as entries:
            names = [e.path for e in entries if not e.name.startswith(".") and e.is_file(follow_symlinks=False)]
    else:
        names = [p for p in glob.glob(path) if os.path.isfile(p) and not os.path.basename(p).startswith(".")]
    return sorted((os.path.abspath(p) for p in names if _is_capture(p)), key=order)


def owned(record: dict, boundary: float, prev_final: bool, final: bool) -> bool:
    """Whether an exchange decoded from (file i-1, file i) belongs to file i (the module's rules);
    ``boundary``: the time of file i's first packet."""
    request_here = record["request_time"] >= boundary
    if record.get("response_time") is not None:
        return record["response_time"] >= boundary
    if record.get("response_expected", True) is False:
        return request_here
    if request_here:
        return final
    return not prev_final


def rotation_rows(prev: str | None, path: str, prev_final: bool, final: bool, options: dict | None = None,
                  keep=None) -> Iterator[dict]:
    """The exchanges rows (with ``records``, each followed by its records rows) that belong to
    ``path``, decoded after ``prev`` (None: the first file, or its predecessor is gone)."""
    options = dict(options or {})
    records = options.pop("records", False)
    options.pop("flows", None)
    options.pop("filesystems", None)
    schema_sources, schemas_topic = popped(options)
    limits = options.get("limits")
    try:
        boundary = first_time(path, *(limits,) if limits else ())
    except (CaptureError, OSError):
        return  # not a capture (any more): nothing of it to give
    if boundary is None:
        return
    paths = [path]
    if prev is not None and os.path.exists(prev):
        paths.insert(0, prev)
    else:
        prev_final = True  # nothing of a file not read is given out here
    name = path_text(path)
    run = DecodeRun(ChainedCapture(paths, *(limits,) if limits else ()), **options)
    values = None  # a rotation learns the registry's records as they come (no first pass)
    if records and schema_sources is not None:
        values = FileValues.open(schema_sources, schemas_topic, None, options)
    try:
        for record in run.records(pack_records=not records):
            if values is not None:
                values.exchange(record)
            if record["type"] != "exchange" or not owned(record, boundary, prev_final, final):
                continue
            if keep is not None and not keep(record):
                continue
            yield from task_rows(name, record, records, values)
    except (CaptureUnreadable, CaptureError, OSError):
        return
