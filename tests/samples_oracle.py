"""What kafka-dump-log said about the committed samples' segments (samples/**/<file>.dump.txt):
the expected values of tests that read samples/, so none comes from kinspect's own output."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SAMPLES

# the segments kafka-dump-log read (samples/schemas has none of its output)
SEGMENTS = sorted(p for p in SAMPLES.glob("*/logs/*/*.log") if p.with_name(p.name + ".dump.txt").is_file())
_FIELD = re.compile(r"(\w+): (\S+)")


def dump_lines(path: Path) -> list[str]:
    """kafka-dump-log's output for a samples/ file, line by line."""
    return path.with_name(path.name + ".dump.txt").read_text("utf-8", "replace").split("\n")


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
