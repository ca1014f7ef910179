"""Kafka's own tools as oracles: their output parsed back into values kinspect must match.

- kafka-consumer-groups --describe (offsets, --members, --state): whitespace tables, one block
  per group, '-' where unknown;
- kafka-dump-log --offsets-decoder: batch header lines and "| offset: N ... key: {json}
  payload: {json}|<DELETE>" record lines, "endTxnMarker: COMMIT" for markers;
- the lab clients' committed() events: {"event": "committed", "group", "offsets": [...]}.
"""

from __future__ import annotations

import json
import re

_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) .*producerId: (-?\d+) .*"
                    r"isTransactional: (\w+) isControl: (\w+) .*position: (\d+)")
_LEGACY = re.compile(r"^offset: (\d+) position: (\d+) ")
_RECORD = re.compile(r"^\| offset: (\d+) .*?key: (\{.*?\}) payload: (.*)$")
_MARKER = re.compile(r"^\| offset: (\d+) .*endTxnMarker: (\w+)")


def describe_blocks(output: str) -> list[list[dict]]:
    """Each block of kafka-consumer-groups --describe as rows {column: value or None}."""
    blocks, header = [], None
    for line in output.splitlines():
        if not line.strip():
            header = None
            continue
        if line.split()[0] == "GROUP" and len(line.split()) > 1:  # 3.x repeats it, no blank line
            header = _columns(line)
            blocks.append([])
            continue
        if header is None:
            continue
        blocks[-1].append(dict(zip(header, _cells(line, header))))
    return blocks


def describe_offsets(output: str) -> dict[tuple[str, str, int], dict]:
    """(group, topic, partition) → the row of kafka-consumer-groups --describe."""
    rows = {}
    for block in describe_blocks(output):
        for row in block:
            if row.get("TOPIC") is not None:
                rows[(row["GROUP"], row["TOPIC"], row["PARTITION"])] = row
    return rows


def committed_events(events: list[dict]) -> dict[tuple[str, str, int], dict | None]:
    """(group, topic, partition) → {"offset", "metadata"} as committed() saw it, or None."""
    out = {}
    for event in events:
        if event.get("event") == "committed":
            for o in event["offsets"]:
                key = (event["group"], o["topic"], o["partition"])
                out[key] = None if o["offset"] is None else {"offset": o["offset"],
                                                             "metadata": o.get("metadata")}
    return out


def dump_log_records(output: str) -> list[dict]:
    """Every record of kafka-dump-log --offsets-decoder, with its batch's producer id and flags."""
    records, batch = [], None
    for line in output.splitlines():
        m = _BATCH.match(line)
        if m:
            batch = {"producer_id": int(m[3]), "transactional": m[4] == "true",
                     "control": m[5] == "true", "position": int(m[6])}
            continue
        m = _LEGACY.match(line)
        if m:  # a magic 0/1 message (or wrapper): no producer, never transactional
            batch = {"producer_id": -1, "transactional": False, "control": False,
                     "position": int(m[2])}
            continue
        m = _MARKER.match(line)
        if m:
            records.append({"offset": int(m[1]), "marker": m[2], **batch})
            continue
        m = _RECORD.match(line)
        if m:
            payload = m[3].strip()
            records.append({"offset": int(m[1]), "key": json.loads(m[2]),
                            "payload": None if payload == "<DELETE>" else json.loads(payload),
                            **batch})
    return records


def _columns(header: str) -> list[str]:
    # "COORDINATOR (ID)" is one column with a space in its name
    return re.findall(r"\S+(?: \(ID\))?", header)


def _cells(line: str, header: list[str]) -> list:
    cells: list = []
    for token in line.split():
        if re.fullmatch(r"\(\d+\)", token) and cells:  # "host:port  (id)" is one cell
            cells[-1] += " " + token
        else:
            cells.append(token)
    cells = [_value(cell) for cell in cells]
    if len(cells) == len(header) - 1 and "ASSIGNMENT-STRATEGY" in header:
        cells.insert(header.index("ASSIGNMENT-STRATEGY"), None)  # 3.x leaves it blank
    return cells


def _value(cell: str):
    if cell == "-":
        return None
    return int(cell) if re.fullmatch(r"-?\d+", cell) else cell


def check_history_against_dump(records: list[dict], history: list) -> int:
    """Every offset commit record kafka-dump-log printed is in kinspect's history with the same
    key, value and outcome (markers decide transactional ones). Returns how many were compared."""
    by_offset = {c.record_offset: c for c in history}
    markers = [r for r in records if "marker" in r]
    compared = 0
    for record in records:
        if "marker" in record or record["key"]["type"] not in ("0", "1"):
            continue
        key = record["key"]["data"]
        commit = by_offset[record["offset"]]
        assert (commit.group, commit.topic, commit.partition) == (
            key["group"], key["topic"], key["partition"]), record
        if record["payload"] is None:
            assert commit.outcome == "deleted" and commit.offset is None, record
        else:
            value = record["payload"]["data"]
            assert (commit.offset, commit.metadata, commit.commit_timestamp) == (
                value["offset"], value["metadata"], value["commitTimestamp"]), record
            assert commit.outcome == _outcome(record, markers), record
        compared += 1
    return compared


def _outcome(record: dict, markers: list[dict]) -> str:
    if not record["transactional"]:
        return "committed"
    for marker in markers:
        if marker["offset"] > record["offset"] and marker["producer_id"] == record["producer_id"]:
            return {"COMMIT": "committed", "ABORT": "aborted"}[marker["marker"]]
    return "pending"
