"""The small text files of a log dir: checkpoints, partition.metadata, meta.properties, ...

Offset checkpoints (replication-offset-, recovery-point-offset-, log-start-offset-,
cleaner-offset-checkpoint) and leader-epoch-checkpoint share one layout: a version line (0),
a count line, then one entry per line ("topic partition offset", or "epoch start_offset").
partition.metadata: "version: 0" and "topic_id: <uuid>". meta.properties: key=value lines.
quorum-state and .kafka_cleanshutdown: JSON. Every parser takes bytes and returns
(dict, problems); nothing here raises on bad input.
"""

from __future__ import annotations

import json
import re

from kinspect.problems import ERROR, WARNING, Problem

_UUID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def _lines(data: bytes, path: str, problems: list[Problem]) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        problems.append(Problem(f"not UTF-8 text: {e.reason}", path, e.start, ERROR,
                                "checkpoint_text"))
        text = data.decode("utf-8", "replace")
    return text.splitlines()


def _header(lines: list[str], path: str, problems: list[Problem]) -> tuple[int | None, int | None]:
    version = count = None
    if not lines:  # Kafka reads an empty checkpoint as no entries
        return None, None
    if len(lines) < 2:
        problems.append(Problem(f"a checkpoint starts with a version line and a count line; "
                                f"found {len(lines)} lines", path, 0, ERROR, "checkpoint_format"))
        return None, None
    try:
        version, count = int(lines[0]), int(lines[1])
    except ValueError:
        problems.append(Problem(f"version and count lines are not numbers: {lines[:2]!r}", path,
                                0, ERROR, "checkpoint_format"))
        return version, None
    if version != 0:
        problems.append(Problem(f"checkpoint version {version} (Kafka writes 0)", path, 0,
                                WARNING, "checkpoint_version", 0, version))
    if count != len(lines) - 2:
        problems.append(Problem(f"count line says {count} entries, {len(lines) - 2} follow", path,
                                None, ERROR, "checkpoint_count", len(lines) - 2, count))
    return version, count


def decode_offset_checkpoint(data: bytes, path: str = "checkpoint") -> tuple[dict, list[Problem]]:
    """{"version", "count", "entries": [{"topic", "partition", "offset"}]}."""
    problems: list[Problem] = []
    lines = _lines(data, path, problems)
    version, count = _header(lines, path, problems)
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        parts = line.split(" ")
        try:
            topic, partition, offset = parts[0], int(parts[1]), int(parts[2])
            if len(parts) != 3:
                raise ValueError
        except (ValueError, IndexError):
            problems.append(Problem(f"line {number} is not 'topic partition offset': {line!r}",
                                    path, None, ERROR, "checkpoint_entry"))
            continue
        if offset < 0 or partition < 0:
            problems.append(Problem(f"line {number}: negative partition or offset", path, None,
                                    ERROR, "checkpoint_entry"))
        entries.append({"topic": topic, "partition": partition, "offset": offset})
    return {"version": version, "count": count, "entries": entries}, problems


def decode_leader_epoch_checkpoint(data: bytes, path: str = "leader-epoch-checkpoint"
                                   ) -> tuple[dict, list[Problem]]:
    """{"version", "count", "entries": [{"epoch", "start_offset"}]}: epochs and offsets increase."""
    problems: list[Problem] = []
    lines = _lines(data, path, problems)
    version, count = _header(lines, path, problems)
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        try:
            epoch, start = (int(part) for part in line.split(" "))
        except ValueError:
            problems.append(Problem(f"line {number} is not 'epoch start_offset': {line!r}", path,
                                    None, ERROR, "checkpoint_entry"))
            continue
        if entries and (epoch <= entries[-1]["epoch"] or start < entries[-1]["start_offset"]):
            problems.append(Problem(f"line {number}: epoch {epoch} at offset {start} does not "
                                    f"follow epoch {entries[-1]['epoch']} at "
                                    f"{entries[-1]['start_offset']}", path, None, ERROR,
                                    "checkpoint_order"))
        entries.append({"epoch": epoch, "start_offset": start})
    return {"version": version, "count": count, "entries": entries}, problems


def decode_partition_metadata(data: bytes, path: str = "partition.metadata"
                              ) -> tuple[dict, list[Problem]]:
    """{"version": 0, "topic_id": "<Kafka base64 uuid>"}."""
    problems: list[Problem] = []
    fields = {}
    for line in _lines(data, path, problems):
        key, sep, value = line.partition(": ")
        if not sep:
            problems.append(Problem(f"line is not 'key: value': {line!r}", path, None, ERROR,
                                    "partition_metadata"))
            continue
        fields[key] = value
    out = {"version": _int(fields.get("version")), "topic_id": fields.get("topic_id")}
    if out["version"] != 0:
        problems.append(Problem(f"version {fields.get('version')!r} (Kafka writes 0)", path, 0,
                                ERROR, "partition_metadata", 0, fields.get("version")))
    if out["topic_id"] is None or not _UUID.match(out["topic_id"]):
        problems.append(Problem(f"topic_id {out['topic_id']!r} is not a Kafka uuid", path, None,
                                ERROR, "partition_metadata"))
    return out, problems


def decode_properties(data: bytes, path: str = "meta.properties") -> tuple[dict, list[Problem]]:
    """Java properties as Kafka writes them: comments, key=value; values as strings."""
    problems: list[Problem] = []
    properties = {}
    for line in _lines(data, path, problems):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key, sep, value = stripped.partition("=")
        if not sep:
            problems.append(Problem(f"line is not key=value: {line!r}", path, None, WARNING,
                                    "properties"))
            continue
        properties[key.strip()] = value.strip()
    return {"properties": properties}, problems


def decode_json_file(data: bytes, path: str) -> tuple[dict, list[Problem]]:
    """quorum-state, .kafka_cleanshutdown: one JSON object (an empty file is fine)."""
    problems: list[Problem] = []
    if not data.strip():
        return {"json": None}, problems
    try:
        return {"json": json.loads(data)}, problems
    except (ValueError, UnicodeDecodeError) as e:
        problems.append(Problem(f"not JSON: {e}", path, None, ERROR, "json_file"))
        return {"json": None, "text": data.decode("utf-8", "replace")}, problems


def _int(text: str | None) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
