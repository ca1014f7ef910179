"""kinspect validate, the library: walk paths, tell what each file is, run the record checks of
kinspect.records on everything in it, and report each problem as a Finding.

Files are told apart by content: a pcap/pcapng magic (also inside gzip) is a capture (every
record set in every Produce/Fetch body is checked, through DecodeRun), Kafka's segment names
(``00000000000000000000.log``) are log segments, and a batch header at byte 0 makes a record
file (a fixture of batches or message sets). Segments and record files are walked unit by unit
from an mmap by kinspect.storage.segment, which resumes at the next batch whose CRC holds after
damage, so one damaged batch does not hide the rest of the file.

``validate_paths`` yields Findings as they are found and a FileReport after each file's last
finding, so memory stays bounded whatever the size of the files.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kinspect.capture.source import sniff_format
from kinspect.decode.finish import decoded_records
from kinspect.decode.pipeline import CaptureUnreadable, DecodeRun
from kinspect.problems import ERROR, INFO, WARNING, Problem
from kinspect.limits import Budget, Limits
from kinspect.records.checks import SCHEMA_CHECK, check_schema_values, schema_problem
from kinspect.records.codecs import DEFAULT_MAX_OUTPUT
from kinspect.records.stream import BatchStream
from kinspect.storage.segment import MIN_LENGTH, find_next_batch, walk_segment

SEGMENT_NAME = re.compile(r"\d{20}\.log")
# Kafka's files beside the segments: not record sets
SIDE_FILE = re.compile(r".*(\.index|\.timeindex|\.txnindex|\.snapshot|\.deleted|\.cleaned|\.swap|"
                       r"checkpoint|\.properties|\.metadata|\.lock)")
RECORD_APIS = {0: "Produce", 1: "Fetch", 78: "ShareFetch"}
# Batches no larger than this are believed when telling record files by content.
MAX_PLAUSIBLE_LENGTH = 1 << 30
PROGRESS_EVERY = 4 << 20
SCHEMA_SHOWN = 10  # schema_value findings of one exchange of a capture; the rest counted
RELEASE_EVERY = 16 << 20

_FRAME = struct.Struct(">qi")
_I64 = struct.Struct(">q")

# Check names grouped as CI reports show them (one JUnit testcase per family).
CHECK_FAMILIES = {
    "framing": ("batch_length", "magic", "partial_trailing", "trailing_zeros", "segment_name"),
    "crc": ("crc",),
    "records": ("records_count", "record_length", "varint_bounds", "headers"),
    "compression": ("codec", "decompress", "zstd_legacy", "wrapper_nesting", "wrapper_magic"),
    "attributes": ("reserved_attributes",),
    "timestamps": ("max_timestamp", "log_append_time", "legacy_timestamp"),
    "offsets": ("offset_delta_order", "last_offset_delta", "offset_order", "offset_gap",
                "wrapper_inner_offsets"),
    "producer": ("producer_fields",),
    "control": ("control_record",),
}
# Families of checks that run only with some input (a schema to read values against): a JUnit
# testcase of theirs appears only for the files that have findings of them.
EXTRA_FAMILIES = {"schemas": (SCHEMA_CHECK,)}
_FAMILY_OF = {check: family for families in (CHECK_FAMILIES, EXTRA_FAMILIES)
              for family, checks in families.items() for check in checks}
CAPTURE_FAMILIES = ("capture", "decode")


def check_family(check: str) -> str:
    """The family of a check name; captures add 'capture' (the file, the TCP streams) and
    'decode' (the bodies around the record sets)."""
    family = _FAMILY_OF.get(check)
    if family is not None:
        return family
    return "capture" if check.startswith("capture") else "decode"


@dataclass(slots=True)
class Finding:
    """One problem in one file: the check, where (byte position, batch), expected and found.

    ``position`` is absolute in the file for segments and record files; in a capture it is the
    byte offset in the Kafka frame of the exchange named by ``context``.
    """
    file: str
    check: str
    severity: str
    what: str
    path: str = ""
    position: int | None = None
    batch: int | None = None
    base_offset: int | None = None
    expected: object = None
    found: object = None
    context: dict | None = None

    def __str__(self) -> str:
        """One line: check, place, batch, what, expected and found (a schema_value finding's
        ``what`` says them)."""
        place = []
        if self.position is not None:
            place.append(f"{'frame ' if self.context else ''}byte {self.position:#x}")
        if self.path:
            place.append(self.path)
        if self.base_offset is not None:
            place.append(f"base offset {self.base_offset}")
        if self.context and self.context.get("correlation_id") is not None:
            place.append(f"{self.context['conn']} #{self.context['correlation_id']}")
        text = f"{self.check}{' at ' if place else ''}{', '.join(place)}: {self.what}"
        if (self.expected is not None or self.found is not None) and self.check != SCHEMA_CHECK:
            expected, found = _shown(self.check, self.expected), _shown(self.check, self.found)
            text += f" (expected {expected}, found {found})"
        return text

    def to_dict(self) -> dict:
        d = {"type": "finding", "file": self.file, "check": self.check,
             "severity": self.severity, "what": self.what, "path": self.path,
             "position": self.position, "batch": self.batch, "base_offset": self.base_offset,
             "expected": self.expected, "found": self.found}
        if self.context:
            d.update(self.context)
        return d


def _shown(check: str, value) -> str:
    if check == "crc" and isinstance(value, int):
        return f"{value:#010x}"
    return str(value)


@dataclass
class FileReport:
    """What one file held and how many findings of each severity it gave."""
    file: str
    kind: str  # segment, records, capture, unknown
    size: int = 0
    batches: int = 0
    records: int = 0
    record_sets: int = 0
    counts: dict = field(default_factory=lambda: {ERROR: 0, WARNING: 0, INFO: 0})
    unreadable: str | None = None
    seconds: float = 0.0

    def failed(self, strict: bool = False) -> bool:
        return bool(self.counts[ERROR] or (strict and self.counts[WARNING]))

    def status(self, strict: bool = False) -> str:
        if self.unreadable is not None:
            return "unreadable"
        return "problems" if self.failed(strict) else "ok"

    def to_dict(self, strict: bool = False) -> dict:
        d = {"type": "file", "file": self.file, "kind": self.kind, "status": self.status(strict),
             "bytes": self.size, "batches": self.batches, "records": self.records,
             "errors": self.counts[ERROR], "warnings": self.counts[WARNING],
             "infos": self.counts[INFO]}
        if self.kind == "capture":
            d["record_sets"] = self.record_sets
        if self.unreadable is not None:
            d["reason"] = self.unreadable
        return d


# ------------------------------------------------------------------ paths and classification

def validate_paths(paths: Iterable[str | os.PathLike], *, skip_unknown: bool = False,
                   max_output: int = DEFAULT_MAX_OUTPUT,
                   progress: Callable[[str, int, int], None] | None = None, show_secrets: bool = False,
                   keylog=None, schemas=None, capture_stages=None) -> Iterator[Finding | FileReport]:
    """Every file under ``paths``: its findings, then its FileReport (``keylog``: a tls.KeyLog
    for captures; ``schemas`` and ``capture_stages``: see validate_file).

    Named files must be something kinspect validates (else their report is unreadable),
    unless ``skip_unknown``: then, as files found in directories, they are skipped silently
    unless their name or content says Kafka. ``progress(file, done, total)`` is called now
    and then while a file is walked.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = _walk_directory(path)
        elif skip_unknown and path.is_file():
            found = iter((path,))
        else:
            yield from validate_file(path, None, max_output=max_output, progress=progress,
                                     show_secrets=show_secrets, keylog=keylog, schemas=schemas,
 capture_stages=capture_stages)
            continue
        for file in found:
            kind = classify(file, explicit=False)
            if kind is not None:
                yield from validate_file(file, kind, max_output=max_output, progress=progress,
                                         show_secrets=show_secrets, keylog=keylog, schemas=schemas,
 capture_stages=capture_stages)


def _walk_directory(root: Path) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(directory, name)
            if not name.startswith(".") and path.is_file():  # no FIFOs, sockets, devices
                yield path


def classify(path: Path, explicit: bool = True) -> str | None:
    """'capture', 'segment', 'records' or None (not something validate reads)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return classify_bytes(path.name, b"", explicit)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    return classify_bytes(path.name, view, explicit)
                finally:
                    view.release()
    except (OSError, ValueError):
        return None


def classify_bytes(name: str, data: bytes | memoryview, explicit: bool = True) -> str | None:
    """Tell a file's kind from its name and content.

    A record file starts with a unit whose CRC holds, or with a header whose length leads
    to the end of the file or to a unit whose CRC holds (the first unit is damaged). A file
    named on the command line (explicit) needs less: a plausible header at byte 0, or one
    whose length leads to the end or to another header (damage is reported, not skipped).
    """
    size = len(data)
    data = memoryview(data)
    head = bytes(data[:8])
    if sniff_format(head) == "gzip":
        head = _gunzip_head(data)
    if sniff_format(head) in ("pcap", "pcapng"):
        return "capture"
    if SEGMENT_NAME.fullmatch(name) or (explicit and name.endswith(".log")):
        return "segment"
    if SIDE_FILE.fullmatch(name) or size < 17:
        return None
    length = _FRAME.unpack_from(data, 0)[1]
    minimum = MIN_LENGTH.get(data[16])
    if minimum is None:
        after = 12 + length
        follows = (_frames(data, after, size) is not None if explicit
                   else _sealed_at(data, after, size))
        return "records" if length >= 5 and (after == size or (after < size and follows)) else None
    if not minimum <= length <= MAX_PLAUSIBLE_LENGTH:
        return None
    if explicit or 12 + length == size or _sealed_at(data, 0, size) \
            or _sealed_at(data, 12 + length, size):
        return "records"
    return None


def _gunzip_head(data) -> bytes:
    try:
        return zlib.decompressobj(31).decompress(bytes(data[:4096]), 8)
    except zlib.error:
        return b""


# ------------------------------------------------------------------ one file

def validate_file(path: Path, kind: str | None = None, *, max_output: int = DEFAULT_MAX_OUTPUT,
                  progress: Callable[[str, int, int], None] | None = None, show_secrets: bool = False,
                  keylog=None, schemas=None, capture_stages=None) -> Iterator[Finding | FileReport]:
    """``schemas``: a kinspect.schemas Schemas: keys and values framed with a schema id it knows
    are read as it in segments and record files, and one that does not read is a schema_value
    finding. ``capture_stages(path)``: the finishing stages of a capture's exchanges (decode's
    schema stage, cli/schemas.py, which learns the capture's own registry records too): a key or
    value it could not read against its schema is a schema_value finding there."""
    name = str(path)
    started = time.perf_counter()
    report = FileReport(name, kind or "unknown")
    try:
        report.size = path.stat().st_size
        if not path.is_file():
            report.unreadable = "not a regular file (a pipe or device): save it to a file first"
        elif kind is None:
            kind = report.kind = classify(path) or "unknown"
    except OSError as e:
        report.unreadable = e.strerror or str(e)
    if report.unreadable is None and kind == "unknown":
        report.unreadable = _not_recognised(path)
    if report.unreadable is None:
        if kind == "capture":
            findings = _capture_findings(path, report, max_output, show_secrets, keylog,
                                         capture_stages(name) if capture_stages else ())
        else:
            findings = _mapped_findings(path, report, max_output, progress, schemas)
        for finding in _guarded(findings, name):
            report.counts[finding.severity] = report.counts.get(finding.severity, 0) + 1
            yield finding
    report.seconds = time.perf_counter() - started
    yield report


def _guarded(findings: Iterator[Finding], file: str) -> Iterator[Finding]:
    """A bug in a decoder costs the rest of one file, never the run."""
    try:
        yield from findings
    except Exception as e:  # noqa: BLE001 - reported as a finding, as the design asks
        yield Finding(file, "decoder_error", ERROR,
                      f"kinspect stopped checking this file: {e!r} (a kinspect bug: please "
                      f"report it with the file)")


def _not_recognised(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        return e.strerror or str(e)
    if not head:
        return "empty file: not a capture, log segment or record file"
    return (f"not a capture, log segment or record file (starts with {head.hex(' ')}); "
            f"kinspect validate reads pcap/pcapng, *.log segments and files of record batches")


def _mapped_findings(path: Path, report: FileReport, max_output: int,
                     progress: Callable[[str, int, int], None] | None, schemas=None) -> Iterator[Finding]:
    try:
        f = open(path, "rb")
    except OSError as e:
        report.unreadable = e.strerror or str(e)
        return
    with f:
        if report.size == 0:
            return  # an empty segment: Kafka's newest segment often is
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            report.unreadable = f"cannot map the file: {e}"
            return
        try:
            mapped.madvise(mmap.MADV_SEQUENTIAL)
            view = memoryview(mapped)
            released = 0

            def advance(pos: int) -> None:
                nonlocal released
                if progress is not None:
                    progress(str(path), pos, report.size)
                if pos - released >= RELEASE_EVERY:  # walked pages are not needed again
                    upto = pos - pos % mmap.PAGESIZE
                    mapped.madvise(mmap.MADV_DONTNEED, released, upto - released)
                    released = upto

            try:
                yield from walk_records(view, str(path), report, max_output=max_output,
                                        progress=advance, segment_name=path.name, schemas=schemas)
            finally:
                view.release()
        finally:
            try:
                mapped.close()
            except BufferError:  # a view still referenced somewhere: the collector closes it
                pass


def validate_bytes(data: bytes, name: str = "<bytes>", kind: str = "records", *,
                   max_output: int = DEFAULT_MAX_OUTPUT) -> tuple[FileReport, list[Finding]]:
    """Validate an in-memory record file or segment (tests, fuzzing)."""
    report = FileReport(name, kind, size=len(data))
    findings = list(walk_records(memoryview(data), name, report, max_output=max_output,
                                 segment_name=name if kind == "segment" else ""))
    for finding in findings:
        report.counts[finding.severity] += 1
    return report, findings


# ------------------------------------------------------------------ segments and record files

def walk_records(buf, file: str, report: FileReport, *, max_output: int | Limits = DEFAULT_MAX_OUTPUT,
                 progress: Callable[[int], None] | None = None,
                 segment_name: str = "", schemas=None) -> Iterator[Finding]:
    """Every unit (v2 batch or legacy message) of a record file, checked, as Findings.

    kinspect.storage.segment walks the file and resumes at the next valid batch after damage;
    here each stretch of damage is named by the framing check it fails, at its field. With
    ``schemas`` holding any schema, the keys and values of every batch whose CRC holds are read
    as their schemas (records.checks.check_schema_values).
    """
    index = 0
    next_report = PROGRESS_EVERY
    damaged = None  # (position, length, base offset, index) of the last unit, if its CRC failed
    limits = max_output if isinstance(max_output, Limits) else Limits(max_batch_bytes=max_output)
    # records are counted and checked, never shown: a regular batch's stay packed as their bytes
    # (no object per record; the checks need only their count and largest timestamp)
    budget = Budget(limits, input_bytes=len(buf), pack_records=True)
    if schemas is not None and not len(schemas.store) and schemas.fallback is None:
        schemas = None  # no schema anywhere: nothing framed can be read, at no cost
    for kind, item, problems in walk_segment(buf, "", checks=True, max_output=budget):
        pos = item["position"]
        if progress is not None and pos >= next_report:
            progress(pos)
            next_report = pos + PROGRESS_EVERY
        if kind == "batch":
            first = _first_offset(item)
            report.batches += 1
            report.records += len(item["records"])
            if index == 0 and segment_name:
                _segment_name(segment_name, first, pos, problems)
            if schemas is not None and item["crc_valid"]:
                check_schema_values(item, f" → batch[{index}]", schemas, problems)
            for problem in problems:
                yield _from_problem(file, problem, index, first)
            length = item["batch_length"] if item["magic"] == 2 else item["message_size"]
            damaged = None if item["crc_valid"] else (pos, length, first, index)
            index += 1
        elif kind == "padding":  # padding and damage items carry one problem each
            yield _from_problem(file, problems[0], index, None)
        else:
            yield _damage(buf, item, problems[0].what, damaged, index, file)
            damaged = None
    if progress is not None:
        progress(len(buf))


def _first_offset(unit: dict) -> int:
    if unit["magic"] == 2:
        return unit["base_offset"]
    return unit["records"][0]["offset"] if unit["records"] else unit["offset"]


def _damage(buf, item: dict, what: str, damaged: tuple | None, index: int, file: str) -> Finding:
    """Bytes that are not a batch, named by the framing check they fail (one finding)."""
    pos, resumed = item["position"], item["resumed_at"]
    if damaged is not None and damaged[0] + 12 + damaged[1] == pos:
        # a unit that fails its CRC, then bytes that do not frame: its length is what is wrong
        at, length, base_offset, unit = damaged
        return Finding(file, "batch_length", ERROR,
                       f"batch length {length} is probably damaged (or this batch and the "
                       f"next one are): the batch fails its CRC and the bytes after it do not "
                       f"frame a batch; {what}", f"batch[{unit}]",
                       at + 8, unit, base_offset, None if resumed is None else resumed - at - 12,
                       length)
    left = len(buf) - pos
    where = f"batch[{index}]"
    base_offset = _I64.unpack_from(buf, pos)[0] if left >= 8 else None
    if left < 17:
        return Finding(file, "partial_trailing", ERROR, f"truncated batch: {what}", where, pos,
                       index, base_offset, ">= 17", left)
    length = _FRAME.unpack_from(buf, pos)[1]
    magic = buf[pos + 16]
    minimum = MIN_LENGTH.get(magic)
    if minimum is None:
        return Finding(file, "magic", ERROR, what, where, pos + 16, index, base_offset,
                       "0, 1 or 2", magic)
    if length < minimum:
        return Finding(file, "batch_length", ERROR, what, where, pos + 8, index, base_offset,
                       f">= {minimum}", length)
    if length > left - 12 and resumed is None:
        return Finding(file, "partial_trailing", ERROR, f"truncated batch: {what}", where, pos,
                       index, base_offset, length, left - 12)
    # the length runs past the end of the file or past a valid batch: it is damaged
    return Finding(file, "batch_length", ERROR, what, where, pos + 8, index, base_offset,
                   None if resumed is None else resumed - pos - 12, length)


def _frames(view, pos: int, end: int) -> int | None:
    """The length of the unit at pos if its header frames one inside the buffer, else None."""
    if pos < 0 or end - pos < 17:
        return None
    length = _FRAME.unpack_from(view, pos)[1]
    minimum = MIN_LENGTH.get(view[pos + 16])
    if minimum is None or length < minimum or length > end - pos - 12:
        return None
    return length


def _sealed_at(view, pos: int, end: int) -> bool:
    """A whole unit with a valid CRC starts at pos: a real batch, not look-alike bytes."""
    # (a stop a few bytes on: the search needs room for the header bytes it matches)
    return 0 <= pos < end and find_next_batch(view, view, pos, end, stop=pos + 8) == pos


def _segment_name(name: str, first: int, pos: int, problems: list[Problem]) -> None:
    """Kafka names a segment after the base offset of its first batch."""
    if not SEGMENT_NAME.fullmatch(name):
        return
    named = int(name[:20])
    if first < named:
        problems.append(Problem(f"first batch offset {first} is below the segment's base offset "
                                f"{named} (its file name)", " → batch[0]", pos, WARNING,
                                "segment_name", f">= {named}", first))


def _from_problem(file: str, problem: Problem, index: int, base_offset: int | None) -> Finding:
    path = problem.path.removeprefix(" → ")  # the walk's path prefix is empty
    return Finding(file, problem.check or "decode", problem.severity, problem.what, path,
                   problem.offset, index, base_offset, problem.expected, problem.found)


# ------------------------------------------------------------------ captures

def _capture_findings(path: Path, report: FileReport, max_output: int | Limits,
                      show_secrets: bool = False, keylog=None, stages: tuple = ()) -> Iterator[Finding]:
    run = DecodeRun(str(path), show_secrets=show_secrets, keylog=keylog,
                    **({"limits": max_output} if isinstance(max_output, Limits) else {}))
    file = str(path)
    # records are counted, never shown (a schema stage unpacks the batches it reads)
    records = (decoded_records(run, pack_records=True, stages=stages) if stages
               else run.records(pack_records=True))
    try:
        for record in records:
            kind = record.get("type")
            if kind == "notice":
                yield Finding(file, f"capture_{record.get('kind', 'notice')}",
                              record.get("severity", WARNING), record.get("what", ""), record.get("conn", ""),
                              record.get("stream_offset"),
                              context={"conn": record.get("conn"), "time": record.get("time")})
            elif kind == "exchange" and record.get("api_key") in RECORD_APIS:
                yield from _exchange_findings(file, record, report)
                if stages:
                    yield from _schema_findings(file, record)
    except CaptureUnreadable as e:
        report.unreadable = str(e)
        return
    for problem in run.capture_problems:
        yield Finding(file, problem.check or "capture", problem.severity, problem.what,
                      problem.path, problem.offset, expected=problem.expected,
                      found=problem.found)
    if run.kafka_connections == 0:
        tls = (f"; {run.tls_undecrypted} TLS connection(s) could not be decrypted: pass --keylog FILE"
               if run.tls_undecrypted else "")
        yield Finding(file, "capture_kafka", WARNING,
                      f"no Kafka traffic found in {run.packets} packets ({run.tcp_packets} TCP): "
                      f"no record set was checked{tls}")


def _exchange_findings(file: str, record: dict, report: FileReport) -> Iterator[Finding]:
    for side in ("request", "response"):
        body = record.get(side)
        if body:
            for batches in _record_sets(body):
                report.record_sets += 1
                report.batches += len(batches)
                report.records += sum(len(batch.get("records", ())) for batch in batches)
    for problem in record.get("problems") or ():
        side = problem.get("side")
        body = record.get(side) if side else None
        batch, where = _locate(body, problem.get("path", ""))
        context = {"conn": record.get("conn"), "correlation_id": record.get("correlation_id"),
                   "api": f"{record.get('api_name')} v{record.get('api_version')}",
                   "side": side, "time": record.get("request_time"), **where}
        yield Finding(file, problem.get("check") or "exchange", problem.get("severity", ERROR),
                      problem.get("what", ""), problem.get("path", ""), problem.get("offset"),
                      _batch_index(problem),
                      None if batch is None else batch.get("base_offset", batch.get("offset")),
                      problem.get("expected"), problem.get("found"), context)


def _schema_findings(file: str, record: dict) -> Iterator[Finding]:
    """The keys and values of an exchange's record sets that the schema stage could not read
    against their schema (it left a "key_schema"/"value_schema" with an "offset"): the first
    SCHEMA_SHOWN as findings, then one that counts the rest."""
    shown = more = 0
    context = {"conn": record.get("conn"), "correlation_id": record.get("correlation_id"),
               "api": f"{record.get('api_name')} v{record.get('api_version')}",
               "time": record.get("request_time")}
    for side in ("request", "response"):
        for where, batches in _partition_record_sets(record.get(side)):
            for index, batch in enumerate(batches):
                records = batch.get("records") if isinstance(batch, dict) else None
                if not isinstance(records, list):
                    continue
                for number, item in enumerate(records):
                    for part in ("key", "value"):
                        about = item.get(f"{part}_schema") if isinstance(item, dict) else None
                        if not isinstance(about, dict) or "offset" not in about:
                            continue
                        if shown >= SCHEMA_SHOWN:
                            more += 1
                            continue
                        shown += 1
                        problem = schema_problem(part, item, about, f"{where['topic']}-{where['partition']} → "
                                                 f"batch[{index}] → records[{number}]", batch.get("position"))
                        yield Finding(file, SCHEMA_CHECK, ERROR, problem.what, problem.path, problem.offset,
                                      index, batch.get("base_offset", batch.get("offset")), problem.expected,
                                      problem.found, {**context, "side": side, **where})
    if more:
        yield Finding(file, SCHEMA_CHECK, ERROR, f"{more} more {SCHEMA_CHECK} problems like the ones above in "
                      f"this exchange ({shown + more} in all; the first {shown} are shown)", "", None,
                      context={**context})


def _partition_record_sets(body) -> Iterator[tuple[dict, list]]:
    """({"topic", "partition"}, its list of batches) of each partition entry of a Produce request
    or a Fetch response (a record set too big to hold, streamed, is not read again here)."""
    if not isinstance(body, dict):
        return
    for topics in (body.get("topic_data"), body.get("responses"), body.get("topics")):
        for topic in topics if isinstance(topics, list) else ():
            if not isinstance(topic, dict):
                continue
            name = topic.get("name", topic.get("topic"))
            for partition in topic.get("partition_data", topic.get("partitions")) or ():
                if isinstance(partition, dict) and isinstance(partition.get("records"), list):
                    index = partition.get("index", partition.get("partition_index"))
                    yield {"topic": name, "partition": index}, partition["records"]


def _record_sets(value) -> Iterator[list]:
    """Decoded record sets (lists of batches, or a BatchStream) anywhere in a body."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "records" and (type(item) is BatchStream or isinstance(item, list) and all(
                    isinstance(batch, dict) for batch in item[:1])):
                yield item
            elif isinstance(item, (dict, list)):
                yield from _record_sets(item)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                yield from _record_sets(item)


_STEP = re.compile(r"(\w+)(?:\[(\d+)\])?")


def _locate(body, path: str) -> tuple[dict | None, dict]:
    """Follow a problem path ('FetchResponse v11 → responses[0] → … → records → batch[2]')
    into the decoded body: the batch it names, and the topic and partition on the way."""
    where: dict = {}
    node = body
    for step in path.split(" → ")[1:]:
        match = _STEP.fullmatch(step)
        if match is None or node is None:
            break
        name, index = match.group(1), match.group(2)
        if isinstance(node, dict):
            for key in ("topic", "name"):
                if isinstance(node.get(key), str):
                    where["topic"] = node[key]
            for key in ("partition_index", "partition", "index"):
                if isinstance(node.get(key), int):
                    where["partition"] = node[key]
        if name == "batch":
            batches = node if isinstance(node, list) else None
            i = int(index or 0)
            return (batches[i] if batches and i < len(batches) and isinstance(batches[i], dict)
                    else None), where
        node = node.get(name) if isinstance(node, dict) else None
        if index is not None:
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
    return None, where


def _batch_index(problem: dict) -> int | None:
    match = re.search(r"→ batch\[(\d+)\]", problem.get("path", ""))
    return int(match.group(1)) if match else None
