"""Material for the storage tests: the broker-written log dirs of samples/ and helpers; their
kafka-dump-log oracles are read by tests/samples_oracle.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kinspect.storage import files
from kinspect.storage.dump import DumpOptions, dump_file
from tests.conftest import SAMPLES
from tests.samples_oracle import dump_lines, need, oracle_batches  # noqa: F401 (the storage tests' names)

KAFKA4 = SAMPLES / "kafka-4.1.2" / "logs"
LEGACY = SAMPLES / "kafka-3.9.2-legacy" / "logs"
EXPIRY = SAMPLES / "kafka-4.1.2-expiry" / "logs"
SEGMENT = "00000000000000000000.log"
TXN_SEGMENT = KAFKA4 / "transactions-0" / SEGMENT  # 10 batches: data (none, zstd) and COMMIT/ABORT


def sample_roots() -> list[Path]:
    """The log dir of every broker sample (samples/schemas is not one broker's log dir)."""
    return [need(KAFKA4), need(EXPIRY), need(LEGACY)]


def manifest(root: Path) -> dict:
    """What the run that wrote a sample's log dir did (samples/<sample>/manifest.json)."""
    return json.loads(need(root.parent / "manifest.json").read_text())


def oracle_index(index: Path) -> list[tuple[int, int]]:
    """(offset, position) of every entry kafka-dump-log read from an offset index."""
    return [(int(a), int(b)) for a, b in re.findall(r"^offset: (\d+) position: (\d+)$",
                                                    "\n".join(dump_lines(index)), re.M)]


def oracle_timeindex(index: Path) -> list[tuple[int, int]]:
    """(timestamp, offset) of every entry kafka-dump-log read from a time index."""
    return [(int(a), int(b)) for a, b in re.findall(r"^timestamp: (-?\d+) offset: (\d+)$",
                                                    "\n".join(dump_lines(index)), re.M)]


def events(path: Path, **options) -> list[dict]:
    """Every dump event of one file, read as bytes, its .log companion beside it."""
    def companion(suffix: str):
        other = files.companion(path, suffix)
        return other.read_bytes() if other.is_file() and other != path else None
    return list(dump_file(str(path), path.read_bytes(), files.describe(path),
                          DumpOptions(**options), companion))


def of_type(all_events: list[dict], kind: str) -> list[dict]:
    return [e for e in all_events if e["type"] == kind]


def problems_of(all_events: list[dict], severities=("error", "warning")) -> list[dict]:
    found = [p for e in all_events for p in e.get("problems") or () if isinstance(p, dict)]
    found += [e for e in all_events if e["type"] == "notice"]
    return [p for p in found if p["severity"] in severities]
