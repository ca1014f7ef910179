"""What kafka-dump-log said about the committed samples' files (samples/**/<file>.dump.txt beside
each segment, index, snapshot and checkpoint): the expected values of tests that read samples/, so
none comes from kinspect's own output. The one reader of those outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

# the segments kafka-dump-log read (samples/schemas has none of its output)
SEGMENTS = sorted(p for p in SAMPLES.glob("*/logs/*/*.log") if p.with_name(p.name + ".dump.txt").is_file())
_FIELD = re.compile(r"(\w+): (\S+)")


_BATCH = re.compile(r"^(?:baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) "
                    r"count: (?P<count>\d+) .*partitionLeaderEpoch: (?P<epoch>-?\d+) "
                    r".*isControl: (?P<control>\w+) .*|offset: (?P<offset>\d+) )"
                    r"position: (?P<position>\d+) (?P<time_type>\w+): (?P<timestamp>-?\d+) "
                    r"size: (?P<size>\d+) magic: (?P<magic>\d) compresscodec: (?P<codec>\w+) "
                    r"crc: (?P<crc>\d+) isvalid: (?P<valid>\w+)$")


def need(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: samples/ is committed (tools/make_samples.py regenerates it)")
    return path


def dump_lines(path: Path) -> list[str]:
    """kafka-dump-log's output for a samples/ file, line by line (split at newlines only: a
    payload it printed may hold other line breaks)."""
    text = need(path.with_name(path.name + ".dump.txt")).read_text("utf-8", "replace")
    return text.removesuffix("\n").split("\n")


def oracle(segment: Path) -> list[dict]:
    """Every batch (legacy: every outer message) of a segment as kafka-dump-log printed it: its
    fields (baseOffset or offset, lastOffset, count, position, size, magic, isControl, ...) as
    text, and "records", the offsets of the records it printed under it."""
    batches = []
    for line in dump_lines(segment):
        if line.startswith("| offset: "):
            batches[-1]["records"].append(int(line.split()[2]))
        elif " position: " in line and " isvalid: " in line:
            batches.append({**dict(_FIELD.findall(line)), "records": []})
    return batches


def positions(segment: Path) -> list[int]:
    return [int(batch["position"]) for batch in oracle(segment)]


def counts(segment: Path) -> tuple[int, int]:
    """(batches, records) of a segment."""
    batches = oracle(segment)
    return len(batches), sum(len(batch["records"]) for batch in batches)


def oracle_batches(log: Path) -> list[dict]:
    """The batches (magic 2) or shallow messages (magic 0/1) kafka-dump-log saw in a segment,
    typed: position, size, last offset (a legacy wrapper's offset is its last inner one),
    timestamp (a batch's max timestamp), crc and its validity; base offset, count, control and
    leader epoch for magic 2."""
    found = []
    for line in dump_lines(log):
        match = _BATCH.match(line)
        if match:
            m = match.groupdict()
            legacy = m["offset"] is not None
            found.append({"position": int(m["position"]), "size": int(m["size"]),
                          "magic": int(m["magic"]), "codec": m["codec"],
                          "last_offset": int(m["offset"] if legacy else m["last"]),
                          "base_offset": None if legacy else int(m["base"]),
                          "count": None if legacy else int(m["count"]),
                          "is_control": None if legacy else m["control"] == "true",
                          "leader_epoch": None if legacy else int(m["epoch"]),
                          "timestamp_type": m["time_type"], "timestamp": int(m["timestamp"]),
                          "crc": int(m["crc"]), "crc_valid": m["valid"] == "true"})
    return found
