"""Material for the storage tests: the broker-written log dirs of samples/, their kafka-dump-log
oracles (<file>.dump.txt beside each file) and helpers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kinspect.storage import files
from kinspect.storage.dump import DumpOptions, dump_file
from tests.conftest import SAMPLES

KAFKA4 = SAMPLES / "kafka-4.1.2" / "logs"
LEGACY = SAMPLES / "kafka-3.9.2-legacy" / "logs"
EXPIRY = SAMPLES / "kafka-4.1.2-expiry" / "logs"
SEGMENT = "00000000000000000000.log"
TXN_SEGMENT = KAFKA4 / "transactions-0" / SEGMENT  # 10 batches: data (none, zstd) and COMMIT/ABORT


def sample_roots() -> list[Path]:
    """The log dir of every broker sample (samples/schemas is not one broker's log dir)."""
    return [need(KAFKA4), need(EXPIRY), need(LEGACY)]


def oracle(path: Path) -> list[str]:
    """kafka-dump-log's output for a samples/ file, from the <file>.dump.txt beside it."""
    return need(path.with_name(path.name + ".dump.txt")).read_text(errors="replace").splitlines()


_BATCH = re.compile(r"^(?:baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) "
                    r"count: (?P<count>\d+) .*partitionLeaderEpoch: (?P<epoch>-?\d+) "
                    r".*isControl: (?P<control>\w+) .*|offset: (?P<offset>\d+) )"
                    r"position: (?P<position>\d+) (?P<time_type>\w+): (?P<timestamp>-?\d+) "
                    r"size: (?P<size>\d+) magic: (?P<magic>\d) compresscodec: (?P<codec>\w+) "
                    r"crc: (?P<crc>\d+) isvalid: (?P<valid>\w+)$")


def oracle_batches(log: Path) -> list[dict]:
    """The batches (magic 2) or shallow messages (magic 0/1) kafka-dump-log saw in a segment:
    position, size, last offset (a legacy wrapper's offset is its last inner one), timestamp
    (a batch's max timestamp), crc and its validity; base offset, count, control and leader
    epoch for magic 2."""
    found = []
    for line in oracle(log):
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


def manifest(root: Path) -> dict:
    """What the run that wrote a sample's log dir did (samples/<sample>/manifest.json)."""
    return json.loads(need(root.parent / "manifest.json").read_text())


def oracle_index(index: Path) -> list[tuple[int, int]]:
    """(offset, position) of every entry kafka-dump-log read from an offset index."""
    return [(int(a), int(b)) for a, b in re.findall(r"^offset: (\d+) position: (\d+)$",
                                                    "\n".join(oracle(index)), re.M)]


def oracle_timeindex(index: Path) -> list[tuple[int, int]]:
    """(timestamp, offset) of every entry kafka-dump-log read from a time index."""
    return [(int(a), int(b)) for a, b in re.findall(r"^timestamp: (-?\d+) offset: (\d+)$",
                                                    "\n".join(oracle(index)), re.M)]


def need(path: Path) -> Path:
    """A samples/ path; a test fails, saying why, when samples/ is not there (it is committed)."""
    if not path.exists():
        pytest.fail(f"{path} is missing: samples/ is committed (tools/make_samples.py regenerates it)")
    return path


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
